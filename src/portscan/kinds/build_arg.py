"""The ``build-arg`` kind: values passed to a CUDA extension build."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, ClassVar

from portscan.kinds.python_surface import PythonSurface
from portscan.kinds.common import PYTHON, code_list
from portscan.ruleset.prefilter import Token
from portscan.ruleset.table import TableReader

BUILD_ARGUMENTS = ("nvcc", "cxx", "libraries", "extra_link_args")


@dataclass(frozen=True, slots=True)
class BuildArgPattern:
    """A value passed to a CUDA extension build (``CUDAExtension``, ``load``,
    ``load_inline``): ``nvcc`` / ``cxx`` compiler flags (``extra_compile_args``,
    ``extra_cuda_cflags``), ``libraries`` or ``extra_link_args``."""

    kind: ClassVar[str] = "build-arg"
    surfaces: ClassVar[frozenset[str]] = PYTHON
    #: the sites of the Python walk it reads (see portscan.kinds.python_surface)
    python_sites: ClassVar[frozenset[str]] = frozenset({"calls", "item-stores"})
    variables: ClassVar[frozenset[str]] = frozenset({"matched", "value", "argument"})
    argument: str
    values: tuple[str, ...]  #: globs over the string values

    @classmethod
    def read(cls, r: TableReader) -> BuildArgPattern:
        return cls(argument=r.choice("argument", BUILD_ARGUMENTS),
                   values=r.texts("values", what="value glob"))

    def token_sets(self) -> tuple[frozenset[Token], ...]:
        return (frozenset({"cpp_extension"}),)

    def describe(self) -> str:
        """What it matches, in one or two sentences of Markdown (the rule page's "What it flags")."""
        return (f"`{self.argument}` values matching {code_list(self.values)} given to "
                "`CUDAExtension`, `CppExtension`, `load` or `load_inline`, followed through "
                "variables, `+=` and `.append`.")

    def accepts(self, argument: str, value: str) -> bool:
        return self.argument == argument and any(fnmatchcase(value, glob) for glob in self.values)

    # -- the Python surface (see portscan.kinds.python_surface) ---------------------------

    @classmethod
    def resolve_python(cls, rules: Sequence[tuple[Any, BuildArgPattern]], surface: PythonSurface) -> None:
        """Values given to ``CUDAExtension``/``CppExtension``/``load``/``load_inline``."""
        for call, scope in surface.extension_calls():
            for argument in {p.argument for _, p in rules}:
                for node in surface.build_values(call, argument, scope):
                    value = surface.text(node) or ""
                    for rule, p in rules:
                        if p.accepts(argument, value):
                            surface.hit(rule, id(node), node, value=value, argument=argument)
