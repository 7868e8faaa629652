"""The ``import`` kind: imports of a module or anything below it, also lazy ones: a
string that is exactly a dotted path to a class below the module
(``opt_class="apex.optimizers.FusedSGD"``, ``{"_target_": "apex.optimizers.FusedAdam"}``)
or the name given to ``importlib.import_module``."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TYPE_CHECKING

from portscan.kinds.python_surface import PythonSurface
from portscan.kinds.common import PYTHON, code_list, is_at_or_below
from portscan.ruleset.prefilter import Fragment, Token, import_anchor, segment_sets
from portscan.ruleset.table import PatternError, TableReader
from portscan.parse import lazy_libcst

if TYPE_CHECKING:
    import libcst as cst
else:
    cst = lazy_libcst()

#: a full dotted path, ``pkg.mod.Class``: a module below the package and a name in it
#: (``"cutlass.Float32"``, a name one level down, is as often a code-generation string)
_DOTTED_PATH = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*){2,}")
_DOTTED_NAME = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
#: calls whose first argument names a module to import
_IMPORTERS = ("importlib.import_module", "__import__")
#: optional-import helpers, read by name wherever they come from (MONAI's and lmms-eval's
#: ``optional_import``, mmengine's ``try_import``, a project's own): ``trt, ok =
#: optional_import("tensorrt")`` imports the module or binds a stand-in, as a ``try``
#: whose handler falls back does; the module is the first argument (or ``module=``), a
#: name in it ``name=``
IMPORT_HELPERS = frozenset({"optional_import", "try_import", "import_optional", "safe_import",
                            "maybe_import", "import_or_none", "try_import_module"})


def is_dotted_name(text: str) -> bool:
    """Is ``text`` a module path (``torch_tensorrt``, ``apex.normalization``)?"""
    return _DOTTED_NAME.fullmatch(text) is not None


def lazy_import_path(text: str | None) -> bool:
    """Is ``text`` a dotted path naming a class (``apex.optimizers.FusedSGD``), not prose,
    a file name or a logger name (``logging.getLogger("vllm.config")``, ``"vllm.utils"``)?"""
    if text is None or _DOTTED_PATH.fullmatch(text) is None:
        return False
    return text.rsplit(".", 1)[1][0].isupper()


def _may_name(node: cst.BaseExpression, roots: set[str]) -> bool:
    """A cheap look at the source of a string literal before its value is worked out:
    does it hold a dot and one of the packages?"""
    raw = node.value if isinstance(node, cst.SimpleString) else ""
    return "." in raw and " " not in raw and any(root in raw for root in roots)


@dataclass(frozen=True, slots=True)
class ImportPattern:
    """``import m``, ``import m.sub as x``, ``from m import n``, ``from p import m``."""

    kind: ClassVar[str] = "import"
    surfaces: ClassVar[frozenset[str]] = PYTHON
    #: the sites of the Python walk it reads (see portscan.kinds.python_surface)
    python_sites: ClassVar[frozenset[str]] = frozenset({"imports", "strings", "calls", "compares"})
    variables: ClassVar[frozenset[str]] = frozenset({"matched", "module"})
    modules: tuple[str, ...]
    #: list each use of the names it binds in the import's finding (``m.f()``, and ``f()``
    #: after ``from m import f``), unless a condition on the name guards it
    uses: bool = False
    #: availability checks that ask whether the library is installed *and* usable on the
    #: running GPU's vendor (transformers' ``is_flash_attn_2_available``, which accepts
    #: ROCm builds): an import under ``if probe():`` is only tried where it works, so it is
    #: guarded like one in a ``try`` whose handler falls back (guard ``fallback``)
    probes: tuple[str, ...] = ()
    #: what presence flags call the library besides its module's name, lower case without
    #: underscores (``flashattn3``, ``flashattnhopper``, ``fa3`` for FlashAttention-3, whose
    #: module is ``flash_attn_interface``): an import under ``if HAS_FLASH_ATTN_HOPPER:`` is
    #: guarded like one under ``if HAS_FLASH_ATTN_INTERFACE:``
    flag_names: tuple[str, ...] = ()
    #: modules and names below ``modules`` that run on any GPU and so are no finding
    #: (xFormers' attention-mask classes, pure Python: ``xformers.ops.fmha.attn_bias``)
    not_modules: tuple[str, ...] = ()

    @classmethod
    def read(cls, r: TableReader) -> ImportPattern:
        uses = r.raw("uses", False)
        if uses is not None and not isinstance(uses, bool):
            raise PatternError(r.key("uses"), "expected true or false")
        probes = r.texts("probes", required=False, what="function name")
        for name in probes:
            if not name.isidentifier():
                raise PatternError(r.key("probes"), f"{name!r} is not an identifier")
        flag_names = r.texts("flag_names", required=False, what="lower-case name without underscores")
        for name in flag_names:
            if not name.isalnum() or name != name.lower():
                raise PatternError(r.key("flag_names"), f"{name!r} is not a lower-case name without underscores")
        modules = r.dotted("modules")
        not_modules = r.dotted("not_modules", required=False)
        for name in not_modules:
            if not any(is_at_or_below(name, module) and name != module for module in modules):
                raise PatternError(r.key("not_modules"), f"{name!r} is not below one of the modules")
        return cls(modules=modules, uses=bool(uses), probes=probes, flag_names=flag_names,
                   not_modules=not_modules)

    def token_sets(self) -> tuple[frozenset[Token], ...]:
        """The module's segments, with an import statement naming its package, or a
        string starting with its dotted path (a lazy import), or one given to
        ``import_module`` / ``__import__``."""
        sets: list[frozenset[Token]] = []
        for segments, module in zip(segment_sets(self.modules), self.modules, strict=True):
            path = Fragment(module if "." in module else module + ".", quoted=True)
            sets += [segments | {import_anchor(module)}, segments | {path},
                     segments | {"import_module", Fragment(module, quoted=True)},
                     segments | {"__import__", Fragment(module, quoted=True)},
                     segments | {Fragment("import("), Fragment(module, quoted=True)}]  # a helper
        return tuple(sets)

    def describe(self) -> str:
        """What it matches, in one or two sentences of Markdown (the rule page's "What it flags")."""
        return f"Imports of {code_list(self.modules)} or any module below them, however spelled " \
               "(`import m`, `import m.sub as x`, `from m import n`), and lazy imports: a string " \
               "that is a dotted path to a class below them (`\"m.sub.Class\"`) or a module name given " \
               "to `importlib.import_module`, or to an optional-import helper (`trt, ok = " \
               "optional_import(\"tensorrt\")`, `try_import`; guarded like an import whose `try` falls " \
               "back, guard `fallback`)." + (
                   f" An import under `if` {code_list(self.probes)}`():` (an availability check that accepts "
                   "the library's ROCm build) is guarded like one in a `try` whose handler falls back "
                   "(guard `fallback`)." if self.probes else "") + (
                   f" So is one under `if` a presence flag that names {code_list(self.flag_names)} "
                   "(`if HAS_FLASH_ATTN_HOPPER:`)." if self.flag_names else "") + (
                   f" Not {code_list(self.not_modules)} or anything below them, which run on any GPU."
                   if self.not_modules else "")

    def covers(self, name: str) -> bool:
        """Is ``name`` one of the modules or below one (``apex.amp`` under ``apex``), and
        not one of ``not_modules`` or below one?"""
        return (any(is_at_or_below(name, module) for module in self.modules)
                and not any(is_at_or_below(name, module) for module in self.not_modules))

    # -- the Python surface (see portscan.kinds.python_surface) ---------------------------

    @classmethod
    def resolve_python(cls, rules: Sequence[tuple[Any, ImportPattern]], surface: PythonSurface) -> None:
        """An import of a covered module, reported on the ``from`` module when the module
        itself is covered, else on the imported name; once per statement and rule."""
        for site in surface.imports:
            for rule, p in rules:
                if not p.covers(site.full):
                    continue
                if site.local is None:  # from x import *
                    surface.hit(rule, (id(site.statement), site.full), site.module_node, module=site.full)
                    if p.uses:  # its free names are its uses (when it is the module's one star import)
                        surface.want_uses(rule, site.statement, "*", site.scope)
                    continue
                if site.module_node is not None and p.covers(site.module):
                    surface.hit(rule, (id(site.statement), site.full), site.module_node, module=site.module)
                else:
                    surface.hit(rule, (id(site.statement), site.full), site.alias_node, module=site.full)
                if p.uses:
                    surface.want_uses(rule, site.statement, site.local, site.scope)
        cls._resolve_lazy(rules, surface)

    @classmethod
    def _resolve_lazy(cls, rules: Sequence[tuple[Any, ImportPattern]], surface: PythonSurface) -> None:
        """Strings that are a covered dotted path (``"apex.optimizers.FusedSGD"``) and
        module names given to ``importlib.import_module``/``__import__``; never a key
        looked up (``sys.modules["apex.amp"]``), a side of a comparison
        (``"apex.amp" in sys.modules``) or the project's own modules."""
        imported: dict[int, str] = {}
        for call, scope in surface.calls:
            func = call.func
            last = (func.attr.value if isinstance(func, cst.Attribute)
                    else func.value if isinstance(func, cst.Name) else "")
            if last not in ("import_module", "__import__"):
                continue
            names = surface.callee_names(call, scope)
            if not names and isinstance(call.func, cst.Name) and scope.lookup(call.func.value) is None:
                names = [call.func.value]  # the builtin __import__
            if any(n in _IMPORTERS for n in names):
                argument = surface.argument(call, 0, "name")
                text = surface.text(argument) if argument is not None else None
                if text is not None and is_dotted_name(text):
                    imported[id(argument)] = text
        roots = {module.split(".", 1)[0] for _, p in rules for module in p.modules}
        candidates = [(node, text) for node in surface.strings
                      if (id(node) in imported or _may_name(node, roots))
                      and (text := imported.get(id(node)) or surface.text(node)) is not None
                      and (id(node) in imported or lazy_import_path(text))]
        if not candidates:
            return
        compared = {id(side) for comparison, _ in surface.compares
                    for side in (comparison.left, *(t.comparator for t in comparison.comparisons))}
        for node, text in candidates:
            if id(node) in surface.lookup_keys or id(node) in compared or surface.is_first_party(text):
                continue
            for rule, p in rules:
                if p.covers(text):
                    surface.hit(rule, id(node), node, module=text)
