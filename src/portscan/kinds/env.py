"""The ``env`` kind: environment variables set from Python, Dockerfiles, shell and compose."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TYPE_CHECKING

from portscan.kinds.python_surface import PythonSurface, rules_by
from portscan.bounded import Regex
from portscan.kinds.common import CI, code_list
from portscan.ruleset.prefilter import Token
from portscan.ruleset.table import IDENTIFIER, Literal, PatternError, TableReader, literal_in
from portscan.parse import lazy_libcst

if TYPE_CHECKING:
    import libcst as cst
else:
    cst = lazy_libcst()


@dataclass(frozen=True, slots=True)
class EnvPattern:
    """An environment variable set from Python: ``os.environ["X"] = v``,
    ``os.environ.setdefault("X", v)``, ``os.environ.update(X=v)``, ``os.putenv("X", v)``."""

    kind: ClassVar[str] = "env"
    surfaces: ClassVar[frozenset[str]] = frozenset({"python", "dockerfile", "shell", "compose", "makefile",
                                                    "apptainer"}) | CI
    #: the sites of the Python walk it reads (see portscan.kinds.python_surface)
    python_sites: ClassVar[frozenset[str]] = frozenset({"calls", "item-stores", "item-loads", "compares"})
    variables: ClassVar[frozenset[str]] = frozenset({"matched", "name", "value"})
    names: tuple[str, ...]
    values: tuple[Literal, ...] = ()
    regex: Regex | None = None  #: searched in a string value
    #: values that are not a match (``""``: clearing the variable restricts nothing)
    not_values: tuple[Literal, ...] = ()
    #: match reads from Python instead of sets: ``os.environ.get(X)``, ``os.getenv(X)``,
    #: ``os.environ[X]``, ``X in os.environ``
    reads: bool = False
    #: variables that make a file aware of the alternative, so nothing there is reported:
    #: with ``reads``, a read of one from Python (``ROCM_HOME``); else any mention of one in
    #: the file, set or read (``PYTORCH_ROCM_ARCH`` next to ``TORCH_CUDA_ARCH_LIST``)
    unless: tuple[str, ...] = ()

    @classmethod
    def read(cls, r: TableReader) -> EnvPattern:
        reads = r.flag("reads")
        unless = r.texts("unless", required=False, check=IDENTIFIER, what="variable name")
        pattern = cls(names=r.texts("names", check=IDENTIFIER, what="variable name"),
                      values=r.literals("values"), regex=r.regex("regex"), not_values=r.literals("not_values"),
                      reads=reads, unless=unless)
        if pattern.values and pattern.regex is not None:
            raise PatternError(r.where, "give at most one of `values` and `regex`")
        if pattern.reads and (pattern.values or pattern.regex is not None):
            raise PatternError(r.where, "`reads` matches no value: drop `values` and `regex`")
        return pattern

    def handled_in(self, text: str) -> bool:
        """Does a file name one of ``unless`` (a set rule's file-wide exception; a ``reads``
        rule's is decided among the Python reads)?"""
        return not self.reads and any(re.search(rf"(?<![\w]){re.escape(name)}(?!\w)", text) for name in self.unless)

    def token_sets(self) -> tuple[frozenset[Token], ...]:
        return tuple(frozenset({n}) for n in self.names)

    def describe(self) -> str:
        """What it matches, in one or two sentences of Markdown (the rule page's "What it flags")."""
        if self.reads:
            unless = f", in a file that reads none of {code_list(self.unless)}" if self.unless else ""
            return (f"Reading the environment variable {code_list(self.names)} from Python "
                    f"(`os.environ.get`, `os.getenv`, `os.environ[...]`, `... in os.environ`){unless}.")
        values = f" to {code_list(map(repr, self.values))}" if self.values else ""
        if self.not_values:
            values += f" (not to {code_list(map(repr, self.not_values))})"
        unless = f", in a file that names none of {code_list(self.unless)}" if self.unless else ""
        return (f"Setting the environment variable {code_list(self.names)}{values} from Python "
                f"(`os.environ[...] = ...`, `os.environ.setdefault`, `os.environ.update`, `os.putenv`){unless}.")

    def matches_env(self, name: str, value: str) -> bool:
        """On the text surfaces, where every value is a string (Python compares literals)."""
        if self.reads or name not in self.names or value in [str(v) for v in self.not_values]:
            return False
        if self.values and value not in [str(v) for v in self.values]:
            return False
        return self.regex is None or self.regex.search(value) is not None

    def accepts_python_value(self, value: object, text: str | None) -> bool:
        """In Python: ``value`` the literal set (or ``MISSING``), ``text`` its string (or None)."""
        if self.not_values and literal_in(value, self.not_values):
            return False
        if self.values and not literal_in(value, self.values):
            return False
        return self.regex is None or self.regex.search(text or "") is not None

    # -- the Python surface (see portscan.kinds.python_surface) ---------------------------

    @classmethod
    def resolve_python(cls, rules: Sequence[tuple[Any, EnvPattern]], surface: PythonSurface) -> None:
        """``os.environ[K] = v``, ``os.environ.setdefault(K, v)``, ``os.environ.update(...)``,
        ``os.putenv(K, v)`` with a listed name and an accepted value."""
        readers = [(rule, p) for rule, p in rules if p.reads]
        if readers:
            cls._resolve_reads(readers, surface)
        by_name = rules_by([(rule, p) for rule, p in rules if not p.reads], lambda p: p.names)
        if not by_name:
            return

        def hit(key: cst.BaseExpression, value: cst.BaseExpression) -> None:
            name = key.value if isinstance(key, cst.Name) else surface.text(key)
            for rule, p in by_name.get(name or "", ()):
                if p.accepts_python_value(surface.literal(value), surface.text(value)):
                    surface.hit(rule, id(key), key, name=name or "", value=surface.snippet(value))

        for chain, key, value in surface.item_stores:
            if "os.environ" in chain.scope.qualified(chain.parts):
                hit(key, value)
        for call, scope in surface.calls:
            names = surface.callee_names(call, scope)
            if "os.environ.setdefault" in names or "os.putenv" in names:
                env_key, env_value = surface.argument(call, 0, "key"), surface.argument(call, 1, "value")
                if env_key is not None and env_value is not None:
                    hit(env_key, env_value)
            elif "os.environ.update" in names:
                for arg in call.args:
                    if arg.keyword is not None:
                        hit(arg.keyword, arg.value)
                    elif isinstance(arg.value, cst.Dict):
                        for element in arg.value.elements:
                            if isinstance(element, cst.DictElement):
                                hit(element.key, element.value)

    @classmethod
    def _resolve_reads(cls, rules: Sequence[tuple[Any, EnvPattern]], surface: PythonSurface) -> None:
        """``os.environ.get(K)``, ``os.getenv(K)``, ``os.environ[K]``, ``K in os.environ``."""
        reads: list[tuple[str, cst.BaseExpression]] = []

        def environ(expr: cst.BaseExpression, scope: Any) -> bool:
            name = cst.helpers.get_full_name_for_node(expr)
            return name is not None and "os.environ" in scope.qualified(name.split("."))

        for call, scope in surface.calls:
            names = surface.callee_names(call, scope)
            if "os.environ.get" in names or "os.getenv" in names:
                key = surface.argument(call, 0, "key")
                if key is not None and (text := surface.text(key)) is not None:
                    reads.append((text, key))
        for chain, key, _ in surface.item_loads:
            text = surface.text(key)
            if text is not None and "os.environ" in chain.scope.qualified(chain.parts):
                reads.append((text, key))
        for comparison, scope in surface.compares:
            left = comparison.left
            for target in comparison.comparisons:
                text = surface.text(left)
                if (text is not None and surface.operator(target) in ("in", "not in")
                        and environ(target.comparator, scope)):
                    reads.append((text, left))
                left = target.comparator
        read_names = {name for name, _ in reads}
        for rule, p in rules:
            if read_names & set(p.unless):
                continue  # the file also looks for the alternative
            for name, node in reads:
                if name in p.names:
                    surface.hit(rule, id(node), node, name=name, value="")
