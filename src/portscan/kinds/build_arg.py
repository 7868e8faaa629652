"""The ``build-arg`` kind: values passed to a CUDA extension build."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, ClassVar

from portscan.kinds.python_surface import PythonSurface
from portscan.kinds.common import PYTHON, code_list
from portscan.ruleset.prefilter import Fragment, Token
from portscan.ruleset.table import TableReader

BUILD_ARGUMENTS = ("nvcc", "cxx", "libraries", "extra_link_args")
#: what a file that writes these flags outside a ``cpp_extension`` call spells (the prefilter)
_TOKENS: dict[str, tuple[frozenset[Token], ...]] = {
    "nvcc": (frozenset({Fragment("nvcc")}), frozenset({"extra_cuda_cflags"})),
    "cxx": (frozenset({"cxx"}), frozenset({"extra_cflags"}), frozenset({Fragment("cxx_")})),
    "libraries": (frozenset({"libraries", "sources"}),),
    "extra_link_args": (frozenset({Fragment("ldflags")}), frozenset({Fragment("link_args")})),
}


@dataclass(frozen=True, slots=True)
class BuildArgPattern:
    """A value passed to a CUDA extension build (``CUDAExtension``, ``load``,
    ``load_inline``): ``nvcc`` / ``cxx`` compiler flags (``extra_compile_args``,
    ``extra_cuda_cflags``), ``libraries`` or ``extra_link_args``."""

    kind: ClassVar[str] = "build-arg"
    surfaces: ClassVar[frozenset[str]] = PYTHON
    #: the sites of the Python walk it reads (see portscan.kinds.python_surface)
    python_sites: ClassVar[frozenset[str]] = frozenset({"calls", "item-stores", "dict-items"})
    variables: ClassVar[frozenset[str]] = frozenset({"matched", "value", "argument"})
    argument: str
    values: tuple[str, ...]  #: globs over the string values

    @classmethod
    def read(cls, r: TableReader) -> BuildArgPattern:
        return cls(argument=r.choice("argument", BUILD_ARGUMENTS),
                   values=r.texts("values", what="value glob"))

    def token_sets(self) -> tuple[frozenset[Token], ...]:
        """``cpp_extension``, or what names the flags where they are written
        (``"nvcc"`` keys, ``extra_cuda_cflags=``, ``def nvcc_flags``, ``extra_link_args=``)."""
        return (frozenset({"cpp_extension"}),) + _TOKENS[self.argument]

    def describe(self) -> str:
        """What it matches, in one or two sentences of Markdown (the rule page's "What it flags")."""
        return (f"`{self.argument}` values matching {code_list(self.values)} given to an "
                "extension build: keywords of any call (`extra_compile_args={\"nvcc\": [...]}`, "
                "`extra_cuda_cflags=`, `nvcc_flags=`, `extra_link_args=`, `libraries=` of a build "
                "call), `args[\"nvcc\"] = [...]`, the lists returned by defs named for them "
                "(`def nvcc_flags(self)`), followed through variables, `+=`, `.append` and the "
                "module's own helpers (reported at the helper's call).")

    def accepts(self, argument: str, value: str) -> bool:
        return self.argument == argument and any(fnmatchcase(value, glob) for glob in self.values)

    # -- the Python surface (see portscan.kinds.python_surface) ---------------------------

    @classmethod
    def resolve_python(cls, rules: Sequence[tuple[Any, BuildArgPattern]], surface: PythonSurface) -> None:
        """Values given to ``CUDAExtension``/``CppExtension``/``load``/``load_inline``."""
        for argument, node, at in surface.build_values(frozenset(p.argument for _, p in rules)):
            value = surface.text(node) or ""
            for rule, p in rules:
                if p.accepts(argument, value):  # an f-string's placeholders read as {...}
                    surface.hit(rule, id(at), at, origin=node, value=value.replace("\0", "{...}"),
                                argument=argument)
