"""Python matcher: one libcst traversal per file runs every rule at once.

The traversal records scopes with their bindings and the candidate sites each
pattern kind cares about, as typed records (:class:`ImportSite`, :class:`CallSite`,
:class:`CompareSite`, :class:`AttributeStore`, :class:`NamedStore`, :class:`ItemStore`,
dotted-name chains, strings, guarded :class:`Region` s). Qualified names are resolved
afterwards, only for those candidates, with the whole file's bindings known, so a name
used above the import that binds it resolves the way Python would resolve it at run
time. Rules reach the walk through :class:`_Index`, filed by kind (:data:`_INDEXERS`);
each kind decides on the plain values the resolver reads off its sites (see
:mod:`portscan.kinds`).

Resolution follows libcst's ``QualifiedNameProvider`` semantics where they matter:
flow-insensitive, any import binding of a name counts (``try: import x`` /
``except ImportError: x = None``), parameters and local assignments shadow imports,
class bodies are not visible from methods, relative and first-party imports never
resolve to third-party names, star imports are not resolved.
"""

from __future__ import annotations

import builtins
import posixpath
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
import dataclasses
import functools
from dataclasses import dataclass
from typing import Any, NamedTuple, get_args

import libcst as cst

from portscan.match import Match
from portscan.match.fixsites import Parents, decline_reasons, site_tiers
from portscan.match.levels import VENDOR_EXTRA
from portscan.match.guards import (
    FALLBACK,
    FALLBACK_EQUIVALENT,
    FORMAT_DEFINED,
    GUARD_ORDER,
    HANDLED,
    INTEGRATION,
    MESSAGE_ONLY,
    NO_CONSUMER,
    TUNING,
    TYPE_CHECKING,
    VENDOR_BRANCH,
    CUDA_DEVICE_TYPES,
    ROCM_DEVICE_TYPES,
    boolean_operands,
    Substitute,
    caught_by,
    handles,
    adapts,
    block_bindings,
    formats_named,
    handler_bindings,
    handler_falls_back,
    is_type_checking,
    is_toolkit_check,
    flags_package,
    is_vendor_check,
    names_compared_with,
    mentions_rocm,
    presence_flags,
    vendor_flag_values,
)
from portscan.match.locate import locate
from portscan.model import package_of
from portscan.parse import LineIndex
from portscan.match.syntax import (
    ATTRIBUTE,
    NAME,
    Walker,
    children,
    SHELLS,
    dotted,
    literal,
    picks_numbers,
    program_name,
    shell_programs,
    source_snippet,
    small_statements,
    string_text,
    tuple_items,
)
from portscan.kinds.common import is_at_or_below
from portscan.kinds.python_surface import same_text
from portscan.kinds.sites import ArgumentSite
from portscan.match.commands import Command, Word, commands as shell_commands, pip_arguments
from portscan.match.common import parse_requirement, requirement_rules
from portscan.kinds import Pattern
from portscan.kinds.imports import IMPORT_HELPERS, is_dotted_name
from portscan.kinds.requirement import INSTALLER_CALLS, SETUP_REQUIREMENT_SECTIONS
from portscan.ruleset.schema import Rule

#: comparison operators by class name (a view's classes are LibCST's, subclassed)
_OPERATORS = {
    "LessThan": "<", "LessThanEqual": "<=", "GreaterThan": ">", "GreaterThanEqual": ">=", "Equal": "==",
    "NotEqual": "!=", "In": "in", "NotIn": "not in", "Is": "is", "IsNot": "is not",
}
#: Where CUDA extensions are declared; their sources are linked to the kernel scan.
EXTENSION_BUILDERS = frozenset({
    "torch.utils.cpp_extension.CUDAExtension", "torch.utils.cpp_extension.CppExtension",
    "torch.utils.cpp_extension.load", "torch.utils.cpp_extension.load_inline",
})
#: The builders whose calls declare an extension with sources of its own.
_DECLARING_BUILDERS = EXTENSION_BUILDERS - {"torch.utils.cpp_extension.load_inline"}
#: Calls whose arguments are messages (printed, logged, warned): a value only shown there
#: decides nothing
_MESSAGE_CALLS = frozenset({"print", "debug", "info", "warning", "warn", "error", "exception", "critical",
                            "log", "warning_once", "info_once", "warn_once", "debug_once", "print_rank_0",
                            "rank_zero_info", "rank_zero_warn", "rank_zero_debug"})
#: the message calls that only inform: not ``error``/``exception``/``critical``, which may end
#: the run (``parser.error(...)`` exits) or report what stops it
_HINT_CALLS = _MESSAGE_CALLS - {"error", "exception", "critical"}
#: an f-string's text just before a placeholder that makes it a CUDA wheel tag (``+cu{v}``)
_WHEEL_TAG = re.compile(r"(?:^|[^A-Za-z0-9])cu$")
#: environment lookups whose default is the value when the variable is unset
_ENV_GETTERS = frozenset({"os.environ.get", "os.getenv"})
#: Keywords that carry build flags at any call (torch's ``load``, op builders, setup helpers).
_FLAG_KEYWORDS = {
    "nvcc": ("extra_cuda_cflags", "nvcc_flags", "nvcc_args", "extra_nvcc_flags", "nvcc_extra_args"),
    "cxx": ("extra_cflags", "cxx_flags", "cxx_args"),
    "libraries": ("libraries",),
    "extra_link_args": ("extra_link_args", "extra_ldflags"),
}
#: Defs whose returned lists are build flags, by name (``def nvcc_flags(self)``, ``def cxx_args(self)``).
_FLAG_DEFS = {
    "nvcc": re.compile(r"nvcc", re.IGNORECASE),
    "cxx": re.compile(r"^(?:get_)?cxx_(?:flags|args)$"),
    "extra_link_args": re.compile(r"ldflags|link_args"),
}
#: ``extra_compile_args`` keys: the flags of one compiler
_COMPILER_KEYS = frozenset({"nvcc", "cxx"})
_CUDA_EXTENSION = "torch.utils.cpp_extension.CUDAExtension"
#: the calls that are a package's ``setup()``
_SETUP_CALLS = frozenset({"setuptools.setup", "distutils.core.setup"})
#: setuptools' own extension declarations (``libraries=`` there is linked too)
_SETUP_EXTENSIONS = frozenset({"setuptools.Extension", "setuptools.extension.Extension",
                               "distutils.core.Extension", "distutils.extension.Extension"})
#: keywords that make a call an extension build, whatever its callee
_BUILD_KEYWORDS = frozenset({"sources", "extra_compile_args", "extra_cuda_cflags", "extra_link_args",
                             "extra_ldflags"})
#: Calls that fail on None: numeric and sequence conversions and version parsers.
_CONVERSIONS = frozenset({"int", "float", "len", "tuple", "list", "sorted", "iter", "parse",
                          "Version", "LooseVersion", "StrictVersion", "parse_version"})


# --------------------------------------------------------------------------- scopes


class Scope:
    """Names bound in one scope. A binding is the imported qualified name, or None
    for anything else (parameter, assignment, def, class, relative import)."""

    __slots__ = ("parent", "is_class", "bindings", "values", "loop_items", "global_names", "first_party",
                 "imports", "helper_imports", "params", "param_order", "returns")

    def __init__(self, parent: Scope | None, is_class: bool = False) -> None:
        self.parent = parent
        self.is_class = is_class
        self.bindings: dict[str, list[str | None]] = {}
        #: name -> (assigned expression, tuple-unpack index or None); for light dataflow
        self.values: dict[str, list[tuple[cst.BaseExpression, int | None]]] = {}
        #: name -> list/tuple/set literals a ``for`` loop or comprehension takes it from
        self.loop_items: dict[str, list[cst.BaseExpression]] = {}
        self.global_names: set[str] = set()
        #: name -> what first-party imports of it bind when the project's own modules are
        #: not told apart (extension declarations resolve ``torch`` in torch's own tree)
        self.first_party: dict[str, list[str]] = {}
        #: name -> the import statements that bind it here (for the fixes' import bookkeeping)
        self.imports: dict[str, list[cst.Import | cst.ImportFrom]] = {}
        #: name -> the optional-import helper calls that bind it here (``trt, ok =
        #: optional_import("tensorrt")``): imports for the matcher, not for the fixes
        self.helper_imports: dict[str, list[cst.Assign]] = {}
        #: parameter name -> (the def, its position among positional parameters or None)
        self.params: dict[str, tuple[cst.FunctionDef | cst.Lambda, int | None]] = {}
        #: a def's body scope: its positional parameters in order, and what its ``return``
        #: statements give
        self.param_order: list[str] = []
        self.returns: list[cst.BaseExpression] = []

    def bind(self, name: str, qualified: str | None = None, first_party: str | None = None) -> None:
        self.bindings.setdefault(name, []).append(qualified)
        if first_party is not None:
            self.first_party.setdefault(name, []).append(first_party)

    def binders(self, name: str) -> list[cst.Import | cst.ImportFrom | cst.Assign]:
        """The statements that import ``name`` here: import statements, then
        optional-import helper calls."""
        return [*self.imports.get(name, ()), *self.helper_imports.get(name, ())]

    def lookup(self, name: str) -> Scope | None:
        """The scope whose binding of ``name`` a use in this scope sees."""
        scope: Scope | None = self
        if name in self.global_names:
            while scope is not None and scope.parent is not None:
                scope = scope.parent
        first = True
        while scope is not None:
            if (first or not scope.is_class) and name in scope.bindings:
                return scope
            first = False
            scope = scope.parent
        return None

    def qualified(self, parts: Sequence[str], every_import: bool = False) -> list[str]:
        """Qualified names a dotted chain ``parts`` can stand for (imports only; with
        ``every_import``, first-party imports too)."""
        owner = self.lookup(parts[0])
        if owner is None:
            return []
        rest = ".".join(parts[1:])
        bound = [q for q in owner.bindings[parts[0]] if q is not None]
        if every_import:
            bound += owner.first_party.get(parts[0], ())
        return sorted({(f"{q}.{rest}" if rest else q) for q in bound})


# --------------------------------------------------------------------------- index


class _Index:
    """The candidate rules of one file grouped by the Python kind that matches them (in
    the registry's order), and what the walk must record for them."""

    def __init__(self, rules: Sequence[Rule]) -> None:
        grouped: dict[type, list[tuple[Rule, Any]]] = {}
        for rule in rules:
            if hasattr(type(rule.pattern), "resolve_python"):  # a kind with Python sites
                grouped.setdefault(type(rule.pattern), []).append((rule, rule.pattern))
        self.kinds: list[tuple[Any, list[tuple[Rule, Any]]]] = [
            (kind, grouped[kind]) for kind in get_args(Pattern) if kind in grouped]
        #: the sites the kinds read (see portscan.kinds.python_surface.SITES)
        self.sites: frozenset[str] = frozenset(site for kind, _ in self.kinds for site in kind.python_sites) | {
            site for _, pairs in self.kinds for _, p in pairs for site in getattr(p, "extra_sites", ())}
        #: bare names whose stores a kind asks for (``store_names``)
        self.store_names: frozenset[str] = frozenset(
            name for _, pairs in self.kinds for _, p in pairs for name in getattr(p, "store_names", tuple)())
        #: whether a rule declares the exceptions it raises (guard ``handled``), and whether
        #: one reads number-only conditions as tuning (guard ``tuning``)
        self.raises = any(rule.raises for rule in rules)
        self.tuning = any(_tunes(rule) for rule in rules)
        #: every candidate rule's ``equivalents``: what a local picked in a ``try`` may fall
        #: back to (``LN = apex.normalization.FusedLayerNorm`` / ``LN = torch.nn.LayerNorm``
        #: makes ``import apex`` lose nothing too)
        self.equivalents: tuple[str, ...] = tuple(sorted({e for rule in rules for e in rule.equivalents}))
        #: every candidate rule's availability ``probes`` (``if is_flash_attn_2_available():``)
        self.probes: frozenset[str] = frozenset(name for rule in rules for name in _probes(rule))
        #: whether an import rule is a candidate (``if`` tests that guard imports are recorded)
        self.imports = any(rule.pattern.kind == "import" for rule in rules)
        #: every candidate rule's ``formats`` (defs and branches named for one are recorded)
        self.formats: frozenset[str] = frozenset(f for rule in rules for f in rule.formats)


# --------------------------------------------------------------------------- sites


@dataclass(frozen=True, slots=True)
class _Chain:
    """A dotted name as written (``torch.version.cuda``): its nodes, its parts, its scope."""

    nodes: list[cst.BaseExpression]
    parts: list[str]
    scope: Scope


class ImportedName(NamedTuple):
    """A name an absolute import of another project's module binds (the import kind
    decides which rules cover it)."""

    statement: cst.Import | cst.ImportFrom | cst.Assign  #: an Assign: an optional-import helper's
    full: str  #: the imported name in full (``from x import *``: the module)
    alias_node: cst.BaseExpression | None  #: the alias as written (None: a star import)
    module: str  #: the ``from`` module ("" for ``import x``)
    module_node: cst.BaseExpression | None  #: the ``from`` module as written
    local: str | None  #: the name bound (None: a star import)
    scope: Scope


class UsedImport(NamedTuple):
    """An import whose attribute uses its rule wants reported (``uses = true``)."""

    rule: Rule
    statement: cst.CSTNode
    local: str  #: the name the import binds
    scope: Scope


class CallSite(NamedTuple):
    call: cst.Call
    scope: Scope


class CompareSite(NamedTuple):
    comparison: cst.Comparison
    scope: Scope


class AttributeStore(NamedTuple):
    """``a.b.c = value``: a store into a dotted chain (resolved later)."""

    chain: _Chain
    value: cst.BaseExpression


class NamedStore(NamedTuple):
    """``NAME = value`` or ``x.NAME = value``, known by the stored name alone."""

    target: cst.BaseExpression
    name: str
    value: cst.BaseExpression


class ItemStore(NamedTuple):
    """``container[key] = value`` on a dotted container (also ``+=`` and ``.append``)."""

    chain: _Chain
    key: cst.BaseExpression
    value: cst.BaseExpression


class Region(NamedTuple):
    """Code under a guard (see :mod:`portscan.match.guards`)."""

    node: cst.CSTNode
    guard: str


class FallbackTry(NamedTuple):
    """A ``try`` whose handlers fall back: its body, what the handlers bind, the scope."""

    body: cst.BaseSuite
    substitutes: dict[str, list[Substitute]]
    scope: Scope


class NameCheck(NamedTuple):
    """Code under a condition that mentions these names (``if pynvml is not None:``)."""

    node: cst.CSTNode
    names: frozenset[str]


# --------------------------------------------------------------------------- traversal


class _Collector(Walker):
    """Single pass: bindings per scope, plus the candidate sites of every kind."""

    def __init__(self, index: _Index, first_party: frozenset[str], extensions: bool = False) -> None:
        super().__init__()
        self.index = index
        self.first_party = first_party
        self.package = package_of(first_party)  #: for relative imports
        #: also collect what extension declarations need (every call)
        self.extensions = extensions
        self.wants_calls = "calls" in index.sites or extensions
        self.module_scope = Scope(None)
        self.scope = self.module_scope
        #: id(def, lambda, class or comprehension) -> the scope its body runs in
        self.opened: dict[int, Scope] = {}
        #: id(node) -> "truth" or "operand" for names whose use is known (default: "other")
        self.usage: dict[int, str] = {}
        self.chains: list[_Chain] = []
        self.calls: list[CallSite] = []
        self.compares: list[CompareSite] = []
        self.assigns: list[AttributeStore] = []
        self.named_assigns: list[NamedStore] = []
        #: for os.environ and extension build arguments
        self.item_assigns: list[ItemStore] = []
        self.strings: list[cst.BaseExpression] = []
        #: ids of strings used as keys to look something up (``d["k"]``, ``d.get("k")``)
        self.lookup_keys: set[int] = set()
        #: id(string literal) -> the string values of the list/tuple/set literal holding it
        self.string_siblings: dict[int, frozenset[str]] = {}
        #: the operands of each outermost ``a and b and c`` chain
        self.conjunctions: list[tuple[cst.BaseExpression, ...]] = []
        #: the operands of each outermost ``a or b or c`` chain, also one inside an ``and``
        self.disjunctions: list[tuple[cst.BaseExpression, ...]] = []
        #: id(element of a list/tuple/set literal) -> the literal's elements
        self.collection_members: dict[int, tuple[cst.BaseExpression, ...]] = {}
        self.regions: list[Region] = []
        #: names the module compares with "hip"/"rocm", and the branches and chains of tests
        #: comparing a name with "cuda": vendor-branch where the name is one of the former
        self.rocm_compared: set[str] = set()
        self.cuda_compared: list[tuple[frozenset[str], tuple[cst.CSTNode, ...]]] = []
        self.fallback_tries: list[FallbackTry] = []
        #: availability ``if``s with an ``else``, as tries: the ``else`` binds the body's imports otherwise
        self.fallback_ifs: list[FallbackTry] = []
        #: defs, classes and ``if`` bodies named for a data format (``def quantize_nvfp4``,
        #: ``if dtype == DType.NVFP4:``), with the formats they name (see ``_Index.formats``)
        self.format_regions: list[tuple[cst.CSTNode, frozenset[str]]] = []
        #: (name, scope, literal) of ``NAME = (a, b)`` / ``[...]`` / ``{...}`` assignments, and
        #: the ids of names tested against (``x in NAME``, ``isinstance(x, NAME)``)
        self.literal_sets: list[tuple[str, Scope, cst.Tuple | cst.List | cst.Set]] = []
        self.tested_containers: set[int] = set()
        #: the ids of the types a value is tested against (``isinstance(m, te.Linear)``,
        #: each item of ``issubclass(c, (a.X, b.Y))``)
        self.type_operands: set[int] = set()
        #: the ids of the exception types a handler catches (``except pynvml.NVMLError:``)
        self.handled_types: set[int] = set()
        #: the tests of conditions that only choose numbers (see syntax.picks_numbers)
        self.number_choices: list[cst.BaseExpression] = []
        #: the body of each ``if`` that asks whether a package is there, with the availability
        #: probes a rule names that its test calls (``if is_flash_attn_2_available():``) and the
        #: presence flags it reads, folded (``if HAS_FLASH_ATTN:``; see
        #: :func:`portscan.match.guards.presence_flags`)
        self.availability_ifs: list[tuple[cst.CSTNode, frozenset[str], frozenset[str]]] = []
        #: tests of an ``if`` whose branches only print or log (``if major >= 8: logger.info(...)``)
        self.message_choices: list[cst.BaseExpression] = []
        #: (body, what its handlers catch without re-raising) of every ``try`` that catches
        self.catching_tries: list[tuple[cst.CSTNode, frozenset[str]]] = []
        self._flattened: set[int] = set()
        self._in_disjunction: set[int] = set()
        self.imported: list[ImportedName] = []
        #: (scope, name) of each ``del name``
        self.deleted: set[tuple[int, str]] = set()
        self.use_imports: list[UsedImport] = []
        self.name_checks: list[NameCheck] = []
        #: ``from m import *`` statements: with exactly one, a free name comes from it
        self.star_imports = 0
        #: ids of comparisons and names inside a message (print/log arguments, f-string
        #: placeholders), and how deep the walk is inside one
        self.in_message: set[int] = set()
        self._message_depth = 0
        #: f-string placeholders right after ``cu`` (wheel tags): (expression, scope)
        self.wheel_tags: list[tuple[cst.BaseExpression, Scope]] = []
        #: ``name["key"]`` loads: (subscript, name node, key text, scope)
        self.key_loads: list[tuple[cst.Subscript, cst.Name, str, Scope]] = []
        #: ``container[key]`` reads on a dotted container (the node itself as the value)
        self.item_loads: list[ItemStore] = []
        self._stored: set[int] = set()
        #: (name, body scope) of every def, in source order
        self.defs: list[tuple[str, Scope]] = []
        #: (id(scope), name) -> the body scopes of the defs that bind the name there (helpers
        #: are followed into them); kept here, not in the scope: a scope holding its children
        #: and held by them is a cycle only the garbage collector frees
        self.functions: dict[tuple[int, str], list[Scope]] = {}
        #: (key text, value, scope) of dict literal items with a string key (``{"nvcc": [...]}``)
        self.dict_items: list[tuple[str, cst.BaseExpression, Scope]] = []

    # -- helpers -----------------------------------------------------------------

    def _visit(self, node: cst.CSTNode | None) -> None:
        if node is not None:
            self.walk(node)

    def _push(self, owner: cst.CSTNode, is_class: bool = False) -> Scope:
        self.scope = Scope(self.scope, is_class)
        self.opened[id(owner)] = self.scope
        return self.scope

    def _pop(self) -> None:
        assert self.scope.parent is not None
        self.scope = self.scope.parent

    def _bind_target(self, target: cst.BaseExpression, value: cst.BaseExpression | None,
                     index: int | None = None) -> None:
        """Bind the names a store target introduces; visit the loads inside it."""
        if isinstance(target, cst.Name):
            # `global CAP` then `CAP = ...` in a function stores the module's CAP
            scope = self.module_scope if target.value in self.scope.global_names else self.scope
            scope.bind(target.value)
            if value is not None:
                scope.values.setdefault(target.value, []).append((value, index))
        elif isinstance(target, (cst.Tuple, cst.List)):
            for i, element in enumerate(target.elements):
                inner = element.value
                if isinstance(element, cst.StarredElement):
                    self._bind_target(inner, None)
                else:
                    self._bind_target(inner, value if index is None else None, i)
        elif isinstance(target, cst.StarredElement):
            self._bind_target(target.value, None)
        elif isinstance(target, cst.Attribute) and dotted(target) is not None:
            pass  # a store into a dotted chain loads nothing
        elif isinstance(target, cst.Attribute):
            self._visit(target.value)
        else:
            self._visit(target)

    def _loop_items(self, target: cst.BaseExpression, iterable: cst.BaseExpression) -> None:
        """``for w in [4, 8, 32]`` (or ``for w in WIDTHS``, a name assigned such a literal):
        what the loop variable takes its values from."""
        if isinstance(target, cst.Name) and isinstance(iterable, (cst.List, cst.Tuple, cst.Set, cst.Name)):
            self.scope.loop_items.setdefault(target.value, []).append(iterable)

    def _bind_params(self, params: cst.Parameters, owner: cst.FunctionDef | cst.Lambda) -> None:
        """Bind the parameters, with their defaults as values they may hold."""
        positional = (*params.posonly_params, *params.params)
        for i, param in enumerate((*positional, *params.kwonly_params)):
            self.scope.bind(param.name.value)
            self.scope.params[param.name.value] = (owner, i if i < len(positional) else None)
            if param.default is not None:
                self.scope.values.setdefault(param.name.value, []).append((param.default, None))
        for star in (params.star_arg, params.star_kwarg):
            if isinstance(star, cst.Param):
                self.scope.bind(star.name.value)

    def _visit_annotation(self, annotation: cst.BaseExpression) -> None:
        """A type hint written as a string (``op: "cutlass_library.gemm_op.GemmOperation"``)
        names a type for checkers; it is no string site (no lazy import, no value)."""
        if not isinstance(annotation, (cst.SimpleString, cst.ConcatenatedString)):
            self._visit(annotation)

    def _visit_param_defaults(self, params: cst.Parameters) -> None:
        for param in (*params.posonly_params, *params.params, *params.kwonly_params,
                      params.star_arg, params.star_kwarg):
            if isinstance(param, cst.Param):
                if param.annotation is not None:
                    self._visit_annotation(param.annotation.annotation)
                self._visit(param.default)

    def _mark_operand(self, expr: cst.BaseExpression) -> None:
        """Record a name that is operated on (``x[0]``, ``x + y``, ``x < y``, ``int(x)``)."""
        if isinstance(expr, (cst.Name, cst.Attribute, cst.Subscript)):
            self.usage.setdefault(id(expr), "operand")

    def _mark_test(self, expr: cst.BaseExpression) -> None:
        """Record names used only for their truth value (``if x``, ``not x``, ``x is None``)."""
        while True:
            if isinstance(expr, (cst.Name, cst.Attribute, cst.Subscript)):
                self.usage[id(expr)] = "truth"
                return
            if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
                expr = expr.expression
            elif isinstance(expr, cst.BooleanOperation):
                self._mark_test(expr.left)
                expr = expr.right
            elif (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name)
                  and (expr.func.value == "bool" and len(expr.args) == 1
                       or expr.func.value == "hasattr" and len(expr.args) == 2)):
                expr = expr.args[0].value
            else:
                return

    def _is_first_party(self, dotted_name: str) -> bool:
        return dotted_name.split(".", 1)[0] in self.first_party

    # -- scopes and bindings -----------------------------------------------------

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        self._mark_format(node, node.name)
        for decorator in node.decorators:
            self._visit(decorator.decorator)
        self._visit_param_defaults(node.params)
        if node.returns is not None:
            self._visit_annotation(node.returns.annotation)
        self.scope.bind(node.name.value)
        outer = self.scope
        body = self._push(node)
        self.functions.setdefault((id(outer), node.name.value), []).append(body)
        self.defs.append((node.name.value, body))
        self._bind_params(node.params, node)
        params = node.params
        body.param_order = [p.name.value for p in (*params.posonly_params, *params.params)]
        self._visit(node.body)
        self._pop()
        return False

    def _mark_format(self, node: cst.CSTNode, named: cst.CSTNode) -> None:
        """Record ``node`` when ``named`` (a def's name, a condition) names a data format
        of a candidate rule's ``formats``."""
        if self.index.formats:
            found = formats_named(named, self.index.formats)
            if found:
                self.format_regions.append((node, found))

    def visit_Return(self, node: cst.Return) -> bool:
        if node.value is not None:
            self.scope.returns.append(node.value)
        return True

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        self._visit_param_defaults(node.params)
        self._push(node)
        self._bind_params(node.params, node)
        self._visit(node.body)
        self._pop()
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        self._mark_format(node, node.name)
        for decorator in node.decorators:
            self._visit(decorator.decorator)
        for arg in (*node.bases, *node.keywords):
            self._visit(arg.value)
        self.scope.bind(node.name.value)
        self._push(node, is_class=True)
        self._visit(node.body)
        self._pop()
        return False

    def _visit_comprehension(self, node: cst.BaseComp, for_in: cst.CompFor, *results: cst.BaseExpression
                             ) -> bool:
        self._push(node)
        comp: cst.CompFor | None = for_in
        while comp is not None:
            self._bind_target(comp.target, None)
            self._loop_items(comp.target, comp.iter)
            self._mark_operand(comp.iter)  # iterated, as in a `for` statement
            self._visit(comp.iter)
            for condition in comp.ifs:
                self._mark_test(condition.test)
                self._visit(condition.test)
            comp = comp.inner_for_in
        for result in results:
            self._visit(result)
        self._pop()
        return False

    def visit_ListComp(self, node: cst.ListComp) -> bool:
        return self._visit_comprehension(node, node.for_in, node.elt)

    def visit_SetComp(self, node: cst.SetComp) -> bool:
        return self._visit_comprehension(node, node.for_in, node.elt)

    def visit_GeneratorExp(self, node: cst.GeneratorExp) -> bool:
        return self._visit_comprehension(node, node.for_in, node.elt)

    def visit_DictComp(self, node: cst.DictComp) -> bool:
        return self._visit_comprehension(node, node.for_in, node.key, node.value)

    def visit_Global(self, node: cst.Global) -> bool:
        self.scope.global_names.update(item.name.value for item in node.names)
        return False

    def visit_Nonlocal(self, node: cst.Nonlocal) -> bool:
        return False

    def visit_Del(self, node: cst.Del) -> bool:
        target = node.target
        for name in (e.value for e in target.elements) if isinstance(target, (cst.Tuple, cst.List)) else [target]:
            if isinstance(name, cst.Name):  # `del flash_attn_func` right after importing it: a probe
                self.deleted.add((id(self.scope), name.value))
        return False

    def visit_Assign(self, node: cst.Assign) -> bool:
        if any(isinstance(t.target, (cst.Tuple, cst.List)) for t in node.targets):
            self._mark_operand(node.value)  # unpacking iterates the value
        self._visit(node.value)
        for target in node.targets:
            self._store(target.target, node.value)
            if isinstance(target.target, cst.Name) and isinstance(node.value, (cst.Tuple, cst.List, cst.Set)):
                self.literal_sets.append((target.target.value, self.scope, node.value))
        if "imports" in self.index.sites and len(node.targets) == 1 and isinstance(node.value, cst.Call):
            self._helper_import(node, node.targets[0].target, node.value)
        return False

    def _helper_import(self, node: cst.Assign, target: cst.BaseExpression, call: cst.Call) -> None:
        """``trt, ok = optional_import("tensorrt")``, ``xformers = try_import("xformers")``:
        an import through an optional-import helper (``portscan.kinds.imports.IMPORT_HELPERS``,
        by name), binding its first target. The helper binds a stand-in where the import
        fails, as a ``try`` whose handler falls back does: the statement is guarded so."""
        if _callee_name(call) not in IMPORT_HELPERS:
            return
        if isinstance(target, (cst.Tuple, cst.List)) and target.elements:
            target = target.elements[0].value
        argument = _argument(call, 0, "module")
        module = string_text(argument) if argument is not None else None
        named = _argument(call, None, "name")
        name = string_text(named) if named is not None else None
        if (not isinstance(target, cst.Name) or target.value == "_" or module is None
                or not is_dotted_name(module) or self._is_first_party(module)):
            return
        full = f"{module}.{name}" if name and is_dotted_name(name) else module
        self.scope.helper_imports.setdefault(target.value, []).append(node)
        self.imported.append(ImportedName(node, full, argument, "", None, target.value, self.scope))
        self.regions.append(Region(node, FALLBACK))

    def visit_AnnAssign(self, node: cst.AnnAssign) -> bool:
        self._visit_annotation(node.annotation.annotation)
        self._visit(node.value)
        self._store(node.target, node.value)
        return False

    def visit_AugAssign(self, node: cst.AugAssign) -> bool:
        self._visit(node.value)
        if isinstance(node.operator, cst.AddAssign):
            self._record_item(node.target, node.value)
        if isinstance(node.target, cst.Name):
            self.scope.bind(node.target.value)
            if isinstance(node.operator, cst.AddAssign):  # flags += ["-O3"]: more values
                self.scope.values.setdefault(node.target.value, []).append((node.value, None))
        elif dotted(node.target) is None:
            self._visit(node.target)
        return False

    def _store(self, target: cst.BaseExpression, value: cst.BaseExpression | None) -> None:
        if value is not None:
            self._record_store(target, value)
        self._bind_target(target, value)

    def _record_store(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        index = self.index
        chain = dotted(target) if isinstance(target, cst.Attribute) else None
        if chain is not None and "stores" in index.sites:
            self.assigns.append(AttributeStore(_Chain(chain[0], chain[1], self.scope), value))
        own_name = (target.value if isinstance(target, cst.Name)
                    else target.attr.value if isinstance(target, cst.Attribute) else None)
        if own_name in index.store_names:
            self.named_assigns.append(NamedStore(target, own_name, value))
        self._record_item(target, value)

    def _record_item(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        """``os.environ["K"] = v`` and ``args["nvcc"] = [...]`` (also ``+=``, ``.append``)."""
        self._stored.add(id(target))  # a store, not a load (``item-loads``)
        if "item-stores" not in self.index.sites:
            return
        if (isinstance(target, cst.Subscript) and len(target.slice) == 1
                and isinstance(target.slice[0].slice, cst.Index)):
            container = dotted(target.value)
            if container is not None:
                self.item_assigns.append(ItemStore(_Chain(container[0], container[1], self.scope),
                                                   target.slice[0].slice.value, value))

    def visit_For(self, node: cst.For) -> bool:
        self._mark_operand(node.iter)
        self._visit(node.iter)
        self._bind_target(node.target, None)
        self._loop_items(node.target, node.iter)
        self._visit(node.body)
        self._visit(node.orelse)
        return False

    def visit_WithItem(self, node: cst.WithItem) -> bool:
        self._visit(node.item)
        if node.asname is not None:
            self._bind_target(node.asname.name, None)
        return False

    def visit_ExceptHandler(self, node: cst.ExceptHandler | cst.ExceptStarHandler) -> bool:
        self._visit(node.type)
        if node.type is not None:
            self.handled_types.update(map(id, tuple_items(node.type)))
        if node.name is not None:
            self._bind_target(node.name.name, None)
        self._visit(node.body)
        return False

    visit_ExceptStarHandler = visit_ExceptHandler

    def visit_NamedExpr(self, node: cst.NamedExpr) -> bool:
        self._visit(node.value)
        self._bind_target(node.target, node.value)
        return False

    # -- imports -------------------------------------------------------------------

    def visit_Import(self, node: cst.Import) -> bool:
        for alias in node.names:
            full = alias.evaluated_name
            local = self._is_first_party(full)
            if alias.asname is not None:
                self.scope.bind(alias.evaluated_alias or full, None if local else full, full if local else None)
            else:
                top = full.split(".", 1)[0]
                self.scope.bind(top, None if local else top, top if local else None)
            self.scope.imports.setdefault(alias.evaluated_alias or full.split(".", 1)[0], []).append(node)
            if not local and "imports" in self.index.sites:
                self.imported.append(ImportedName(node, full, alias.name, "", None,
                                                  alias.evaluated_alias or full.split(".", 1)[0], self.scope))
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        relative = bool(node.relative)
        module = "" if node.module is None else cst.helpers.get_full_name_for_node(node.module) or ""
        if relative:  # the project's own, named absolutely where the file's package is known
            module = absolute_module(self.package, len(node.relative), module) or ""
            own = bool(module)
        else:
            own = module != "__future__" and self._is_first_party(module)
        local = relative or module == "__future__" or own
        if isinstance(node.names, cst.ImportStar):
            self.star_imports += 1
            if not local and "imports" in self.index.sites:
                self.imported.append(ImportedName(node, module, None, module, node.module, None, self.scope))
            return False
        for alias in node.names:
            name = alias.evaluated_name
            full = f"{module}.{name}" if module else name
            self.scope.bind(alias.evaluated_alias or name, None if local else full, full if own else None)
            self.scope.imports.setdefault(alias.evaluated_alias or name, []).append(node)
            if not local and "imports" in self.index.sites:
                self.imported.append(ImportedName(node, full, alias.name, module, node.module,
                                                  alias.evaluated_alias or name, self.scope))
        return False

    # -- expressions ---------------------------------------------------------------

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        chain = dotted(node)
        if chain is None:
            self._mark_operand(node.value)  # d["k"].split(): an attribute of the item
            self._visit(node.value)
        else:
            self.chains.append(_Chain(chain[0], chain[1], self.scope))
            if self._message_depth:
                self.in_message.add(id(chain[0][0]))
        return False

    def visit_Name(self, node: cst.Name) -> bool:
        self.chains.append(_Chain([node], [node.value], self.scope))
        if self._message_depth:
            self.in_message.add(id(node))
        return False

    def visit_FormattedString(self, node: cst.FormattedString) -> bool:
        """A string site (the ``string`` kind's regexes read f-strings); ``f"+cu{v}"``: a
        placeholder right after ``cu`` makes a wheel tag of the value. The placeholders
        are expressions with sites of their own."""
        if "strings" in self.index.sites:
            self.strings.append(node)
        previous = ""
        for part in node.parts:
            if isinstance(part, cst.FormattedStringText):
                previous = part.value
                continue
            if (isinstance(part, cst.FormattedStringExpression) and _WHEEL_TAG.search(previous)
                    and isinstance(part.expression, (cst.Name, cst.Attribute))
                    and not self._message_depth):  # print(f"cu{v}") only shows it
                self.usage[id(part.expression)] = "tag"
                self.wheel_tags.append((part.expression, self.scope))
            previous = ""
        return True

    def visit_FormattedStringExpression(self, node: cst.FormattedStringExpression) -> bool:
        self._message_depth += 1
        self._visit(node.expression)
        for part in node.format_spec or ():
            self._visit(part)
        self._message_depth -= 1
        return False

    def visit_Call(self, node: cst.Call) -> bool:
        func = node.func
        callee = _callee_name(node)
        if callee == "bool" and len(node.args) == 1 or callee == "hasattr" and len(node.args) == 2:
            self._mark_test(node)  # `hasattr(spconv, "__version__")` asks about `spconv`, as a test does
        elif callee in ("isinstance", "issubclass") and len(node.args) == 2:
            types = node.args[1].value
            self.tested_containers.add(id(types))
            self.type_operands.update(map(id, tuple_items(types)))
        elif callee in _CONVERSIONS and node.args and not node.args[0].star:
            self._mark_operand(node.args[0].value)
        elif callee in ("get", "pop") and isinstance(func, cst.Attribute) and node.args:
            self.lookup_keys.add(id(node.args[0].value))
        elif callee == "dict" and isinstance(func, cst.Name) and "collection-members" in self.index.sites:
            # dict(flash=SDPBackend.FLASH_ATTENTION, cudnn=...) is the literal {"flash": ..., "cudnn": ...}
            members = tuple(arg.value for arg in node.args if arg.keyword is not None)
            self.collection_members.update((id(member), members) for member in members)
        elif (callee in ("append", "extend", "insert") and isinstance(func, cst.Attribute)
              and node.args):
            item = node.args[-1].value  # flags.append("-O3"), flags.extend([...]): more values
            added = item if callee == "extend" else cst.List([cst.Element(item)])
            if isinstance(func.value, cst.Name):
                self.scope.values.setdefault(func.value.value, []).append((added, None))
            else:
                self._record_item(func.value, added)  # args["nvcc"].append("-O3")
        if self.wants_calls:
            self.calls.append(CallSite(node, self.scope))
            if self._message_depth:  # print(name.startswith("A100")) only shows a test
                self.in_message.add(id(node))
        self._visit(node.func)
        message = callee in _MESSAGE_CALLS
        self._message_depth += message
        for arg in node.args:
            self._visit(arg.value)
        self._message_depth -= message
        return False

    def visit_Expr(self, node: cst.Expr) -> bool:
        return string_text(node.value) is None  # a bare string is a docstring or a comment

    def visit_SimpleString(self, node: cst.SimpleString) -> bool:
        if "strings" in self.index.sites:
            self.strings.append(node)
        return False

    def visit_ConcatenatedString(self, node: cst.ConcatenatedString) -> bool:
        if "strings" in self.index.sites:
            self.strings.append(node)
        return False

    def _visit_collection(self, node: cst.List | cst.Tuple | cst.Set) -> bool:
        """Remember which strings share a literal collection (``["MIGraphX...", "CUDA..."]``)."""
        if "string-siblings" in self.index.sites:
            members: list[cst.BaseExpression] = []
            for element in node.elements:
                value = element.value
                if isinstance(value, cst.Tuple) and value.elements:  # ("Provider", {options})
                    value = value.elements[0].value
                members.append(value)
            texts = frozenset(t for t in map(string_text, members) if t is not None)
            for member in members:  # nested literals add to what the outer one said
                self.string_siblings[id(member)] = self.string_siblings.get(id(member), texts) | texts
        if "collection-members" in self.index.sites:
            elements = tuple(element.value for element in node.elements)
            self.collection_members.update((id(element), elements) for element in elements)
        return True

    visit_List = visit_Tuple = visit_Set = _visit_collection

    def visit_Dict(self, node: cst.Dict) -> bool:
        """``{"nvcc": [...]}``: extension build flags are keyed by compiler wherever the dict is.
        Its keys and values are the members of one literal collection, as a list's items are
        (``{torch.float8_e4m3fn: tl.float8e4nv, torch.float8_e4m3fnuz: tl.float8e4b8}``)."""
        if "collection-members" in self.index.sites:
            members = tuple(part for element in node.elements if isinstance(element, cst.DictElement)
                            for part in (element.key, element.value))
            self.collection_members.update((id(member), members) for member in members)
        if "dict-items" in self.index.sites:
            for element in node.elements:
                if isinstance(element, cst.DictElement):
                    key = string_text(element.key)
                    if key is not None:
                        self.dict_items.append((key, element.value, self.scope))
        return True

    def visit_Subscript(self, node: cst.Subscript) -> bool:
        self._mark_operand(node.value)
        if isinstance(node.value, cst.Name) and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
            key = string_text(node.slice[0].slice.value)
            if key is not None:
                self.key_loads.append((node, node.value, key, self.scope))
        for element in node.slice:  # options["CUDAExecutionProvider"] looks a key up
            if isinstance(element.slice, cst.Index):
                self.lookup_keys.add(id(element.slice.value))
        if ("item-loads" in self.index.sites and id(node) not in self._stored and len(node.slice) == 1
                and isinstance(node.slice[0].slice, cst.Index)):
            container = dotted(node.value)
            if container is not None:  # os.environ["CUDA_HOME"] read
                self.item_loads.append(ItemStore(_Chain(container[0], container[1], self.scope),
                                                 node.slice[0].slice.value, node))
        return True

    def visit_Arg(self, node: cst.Arg) -> bool:
        self._visit(node.value)
        return False

    def visit_Comparison(self, node: cst.Comparison) -> bool:
        left = node.left
        for target in node.comparisons:
            op = _OPERATORS.get(type(target.operator).__name__)
            right = target.comparator
            if op in ("is", "is not", "==", "!="):
                for side, other in ((left, right), (right, left)):
                    if op in ("==", "!=") or (isinstance(other, cst.Name) and other.value == "None"):
                        self._mark_test(side)
            elif op in ("in", "not in"):
                self._mark_test(left)
                self._mark_operand(right)
                self.tested_containers.add(id(right))
                if isinstance(right, (cst.List, cst.Tuple, cst.Set)):  # x in (a, b): a and b only compared
                    for element in right.elements:
                        if isinstance(element, cst.Element):
                            self._mark_test(element.value)
            else:
                self._mark_operand(left)
                self._mark_operand(right)
            left = right
        self.rocm_compared |= names_compared_with(node, ROCM_DEVICE_TYPES)
        if "compares" in self.index.sites:
            self.compares.append(CompareSite(node, self.scope))
            if self._message_depth:
                self.in_message.add(id(node))
        return True

    def visit_UnaryOperation(self, node: cst.UnaryOperation) -> bool:
        if isinstance(node.operator, cst.Not):
            self._mark_test(node.expression)
        else:
            self._mark_operand(node.expression)
        return True

    def visit_BooleanOperation(self, node: cst.BooleanOperation) -> bool:
        if isinstance(node.operator, cst.Or):
            self._mark_test(node.left)  # `x or default`: a falsy x is replaced
        # `v is not None and v.split(".")`: the right side runs only after the left's check
        self.name_checks.append(NameCheck(node.right, _names_in(node.left)))
        if id(node) not in self._flattened:
            operands = boolean_operands(node)
            self._flattened.update(id(n) for n in _nested_boolean_operations(node))
            if "conjunctions" in self.index.sites and isinstance(node.operator, cst.And):
                self.conjunctions.append(tuple(_junction(node, cst.And)))
            if any(is_vendor_check(operand) for operand in operands):
                # `torch.version.cuda is not None and cap >= (9, 0)`: the whole chain
                # is vendor-aware, the check itself included
                self.regions.extend(Region(operand, VENDOR_BRANCH) for operand in operands)
            else:  # `is_fp8 and DEVICE_TYPE == "cuda"`, where the module also tests `DEVICE_TYPE == "hip"`
                if named := _cuda_compared(node):
                    self.cuda_compared.append((named, tuple(operands)))
        if ("disjunctions" in self.index.sites and isinstance(node.operator, cst.Or)
                and id(node) not in self._in_disjunction):
            self._in_disjunction.update(id(n) for n in _junction_nodes(node, cst.Or))
            self.disjunctions.append(tuple(_junction(node, cst.Or)))
        return True

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> bool:
        formatting = isinstance(node.operator, cst.Modulo) and string_text(node.left) is not None
        self._mark_operand(node.left)
        if not formatting:  # "%s" % x prints None happily
            self._mark_operand(node.right)
        return True

    def visit_StarredElement(self, node: cst.StarredElement) -> bool:
        self._mark_operand(node.value)  # *x
        return True

    def _visit_condition(self, node: cst.If | cst.While | cst.IfExp | cst.Assert) -> bool:
        self._mark_test(node.test)
        if not isinstance(node, cst.Assert):
            names = _names_in(node.test)
            self.name_checks.extend(NameCheck(b, names) for b in (node.body, node.orelse) if b is not None)
        if self.index.imports and isinstance(node, cst.If):
            probes, flags = _called(node.test) & self.index.probes, presence_flags(node.test)
            if probes or flags:
                self.availability_ifs.append((node.body, probes, flags))
                if isinstance(node.orelse, cst.Else):  # `else: from mmcv.ops import X`: what X is then
                    self.fallback_ifs.append(FallbackTry(node.body, block_bindings([node.orelse.body]), self.scope))
        if isinstance(node, cst.If):
            self._mark_format(node.body, node.test)
        if isinstance(node, (cst.If, cst.IfExp)):
            if isinstance(node, cst.If) and is_type_checking(node.test):
                self.regions.append(Region(node.body, TYPE_CHECKING))
            elif is_vendor_check(node.test) or is_toolkit_check(node.test):
                branches = (node.body, node.orelse)
                self.regions.extend(Region(b, VENDOR_BRANCH) for b in branches if b is not None)
                if isinstance(node, cst.If) and (isinstance(node.orelse, cst.If) and is_vendor_check(node.orelse.test)
                                                 or any(mentions_rocm(b) for b in branches if b is not None)):
                    # `if torch.version.cuda: ... elif torch.version.hip: ...` dispatches by vendor,
                    # as does `if torch.version.cuda is None: v = "ROCm " + torch.version.hip`:
                    # the test is no "GPU present" check
                    self.regions.append(Region(node.test, VENDOR_BRANCH))
            elif named := _cuda_compared(node.test):  # vendor-branch where the module tests the name for hip too
                self.cuda_compared.append((named, (node.test, node.body) + ((node.orelse,) if node.orelse else ())))
            if self.index.tuning and picks_numbers(node):
                self.number_choices.append(node.test)
            elif self.index.tuning and isinstance(node, cst.If) and _only_reports(node):
                self.message_choices.append(node.test)
        return True

    visit_If = visit_While = visit_IfExp = visit_Assert = _visit_condition

    def _visit_block(self, node: cst.Module | cst.IndentedBlock) -> bool:
        """`if torch.version.hip: return ...` makes the rest of the block the other branch;
        a ``torch.version.cuda`` flag assigned beside a ``torch.version.hip`` one is a vendor test."""
        body = node.body
        self.regions.extend(Region(value, VENDOR_BRANCH) for value in vendor_flag_values(body))
        tests = [s.test if isinstance(s, cst.If) and is_vendor_check(s.test) else None for s in body]
        # `if torch.version.cuda: ...` then `if torch.version.hip: ...`: a dispatch as well
        self.regions.extend(Region(test, VENDOR_BRANCH) for i, test in enumerate(tests) if test is not None
                            and any(t is not None for t in tests[max(i - 1, 0):i] + tests[i + 1:i + 2]))
        vendor = False
        for i, statement in enumerate(body):
            if not (isinstance(statement, cst.If) and statement.orelse is None
                    and _ends_in_jump(statement.body)):
                continue
            names = _names_in(statement.test)
            self.name_checks.extend(NameCheck(rest, names) for rest in body[i + 1:])
            if not vendor and is_vendor_check(statement.test) and not is_toolkit_check(statement.test):
                self.regions.extend(Region(rest, VENDOR_BRANCH) for rest in body[i + 1:])
                vendor = True
        return True

    visit_Module = visit_IndentedBlock = _visit_block

    def device_type_regions(self) -> list[Region]:
        """The branches of ``if DEVICE_TYPE == "cuda":`` (and the chains holding such a test)
        for a name the module also compares with ``"hip"``/``"rocm"``: the project's own
        device-type variable, ``"hip"`` on ROCm, so the test asks for NVIDIA."""
        return [Region(node, VENDOR_BRANCH) for named, nodes in self.cuda_compared
                if not named.isdisjoint(self.rocm_compared) for node in nodes]

    def visit_Try(self, node: cst.Try | cst.TryStar) -> bool:
        caught = caught_by(node.handlers) if self.index.raises else frozenset()
        if caught:
            self.catching_tries.append((node.body, caught))
        if any(handler_falls_back(handler) for handler in node.handlers):
            self.regions.append(Region(node.body, FALLBACK))
            self.fallback_tries.append(FallbackTry(node.body, handler_bindings(node.handlers), self.scope))
        return True

    visit_TryStar = visit_Try


# --------------------------------------------------------------------------- matching


class _Resolver:
    """Turns the collected sites into hits, now that every binding is known: each
    Python kind present resolves its rules over the sites (``resolve_python``); this
    is the surface they read (:class:`portscan.kinds.python_surface.PythonSurface`)."""

    def __init__(self, module: cst.Module, collector: _Collector) -> None:
        self.module = module
        self.c = collector
        #: (rule, site key, node to report, variables)
        self.hits: list[tuple[Rule, object, cst.BaseExpression, dict[str, str]]] = []
        # the sites, as the surface names them
        self.imports, self.chains, self.usage = collector.imported, collector.chains, collector.usage
        self.calls, self.compares = collector.calls, collector.compares
        self.stores, self.named_stores = collector.assigns, collector.named_assigns
        self.item_stores, self.strings = collector.item_assigns, collector.strings
        self.item_loads = collector.item_loads
        self.lookup_keys, self.string_siblings = collector.lookup_keys, collector.string_siblings
        self.conjunctions, self.collection_members = collector.conjunctions, collector.collection_members
        self.disjunctions = collector.disjunctions
        self.wheel_tags = collector.wheel_tags
        #: id(node reported) -> the local whose check (``if v is not None:``) drops the report
        self.unless_checked: dict[int, str] = {}
        #: id(node reported) -> its subject (see :meth:`hit`)
        self.subjects: dict[int, object] = {}
        #: id(reported node) -> where the value it reports is written, when that is elsewhere (a
        #: helper's flag list reported at the helper's call): a guard there guards the report
        self.origins: dict[int, cst.CSTNode] = {}
        #: code resolution finds to be a vendor branch: the lists of ``extras_require`` entries
        #: named for NVIDIA builds (``"cuda": [...]``), which a guard covers like the walk's regions
        self.regions: list[Region] = []

    def run(self) -> None:
        self._mark_listed_only()
        for kind, rules in self.c.index.kinds:
            kind.resolve_python(rules, self)

    def _mark_listed_only(self) -> None:
        """The items of a literal tuple/list/set whose local is only tested against
        (``x in SUPPORTED``, ``isinstance(x, SUPPORTED)``) or shown in messages are only
        compared: an accepted-dtype list chooses nothing. Within the module only: a
        module-level list imported elsewhere is judged by its uses here."""
        tested = self.c.tested_containers

        def only_tested(chain: _Chain) -> bool:
            return len(chain.parts) == 1 and (id(chain.nodes[0]) in tested or self.in_message(chain.nodes[0]))

        for name, scope, items in self.c.literal_sets:
            uses = self.uses(name, scope)
            if uses and all(only_tested(chain) for chain in uses):
                for element in items.elements:
                    if isinstance(element, cst.Element):
                        self.usage.setdefault(id(element.value), "truth")

    # -- reports ----------------------------------------------------------------

    def hit(self, rule: Rule, site: object, node: cst.BaseExpression, subject: object = None,
            origin: cst.CSTNode | None = None, **variables: str) -> None:
        self.hits.append((rule, site, node, variables))
        if subject is not None:
            self.subjects[id(node)] = subject
        if origin is not None and origin is not node:
            self.origins[id(node)] = origin

    def want_uses(self, rule: Rule, statement: cst.CSTNode, local: str, scope: Scope) -> None:
        self.c.use_imports.append(UsedImport(rule, statement, local, scope))

    def hit_unless_checked(self, rule: Rule, site: object, node: cst.BaseExpression, local: str,
                           **variables: str) -> None:
        self.unless_checked[id(node)] = local
        self.hit(rule, site, node, None, None, **variables)

    # -- values that travel within the module -------------------------------------

    def assigned(self, name: str, scope: Scope) -> list[tuple[cst.BaseExpression, Scope]]:
        return [(value, owner) for (value, unpack), owner in _values(scope, name) if unpack is None]

    def assignments(self, value: cst.BaseExpression) -> list[tuple[str, Scope]]:
        return [(name, scope) for name, scope, key, whole in self.holders(value) if whole is value]

    @functools.cached_property
    def _held_by(self) -> dict[int, list[tuple[str, Scope, str | None, cst.BaseExpression]]]:
        """id(expr) -> the locals holding its value: assigned it whole, as the default of
        ``os.environ.get``/``os.getenv``, or as a dict literal's entry (with its key)."""
        found: dict[int, list[tuple[str, Scope, str | None, cst.BaseExpression]]] = {}
        for scope in (self.c.module_scope, *self.c.opened.values()):
            for name, values in scope.values.items():
                if any(q is not None for q in scope.bindings.get(name, ())):
                    continue
                for value, unpack in values:
                    if unpack is not None:
                        continue
                    found.setdefault(id(value), []).append((name, scope, None, value))
                    if (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)
                            and value.func.attr.value in ("get", "getenv")
                            and _ENV_GETTERS & set(self.callee_names(value, scope))):
                        default = _argument(value, 1, "default")
                        if default is not None:
                            found.setdefault(id(default), []).append((name, scope, None, value))
                    elif isinstance(value, cst.Dict):
                        for element in value.elements:
                            key = string_text(element.key) if isinstance(element, cst.DictElement) else None
                            if key is not None:
                                found.setdefault(id(element.value), []).append((name, scope, key, value))
        return found

    def holders(self, value: cst.BaseExpression) -> list[tuple[str, Scope, str | None, cst.BaseExpression]]:
        return self._held_by.get(id(value), [])

    @functools.cached_property
    def _uses_by_name(self) -> dict[str, list[_Chain]]:
        found: dict[str, list[_Chain]] = {}
        for chain in self.c.chains:
            found.setdefault(chain.parts[0], []).append(chain)
        return found

    def uses(self, name: str, scope: Scope) -> list[Any]:
        return [chain for chain in self._uses_by_name.get(name, ()) if chain.scope.lookup(name) is scope]

    def item_uses(self, name: str, scope: Scope) -> list[tuple[cst.Subscript, str]]:
        return [(node, key) for node, base, key, at in self.c.key_loads
                if base.value == name and at.lookup(name) is scope]

    def is_module(self, scope: Scope) -> bool:
        return scope is self.c.module_scope

    def in_message(self, node: cst.CSTNode) -> bool:
        return id(node) in self.c.in_message

    def parameter(self, name: str, scope: Scope) -> tuple[cst.FunctionDef | cst.Lambda, int | None] | None:
        owner = scope.lookup(name)
        return owner.params.get(name) if owner is not None else None

    def calls_of(self, function: cst.FunctionDef | cst.Lambda) -> list[tuple[cst.Call, Scope]]:
        body = self.c.opened.get(id(function))
        if not isinstance(function, cst.FunctionDef) or body is None or body.parent is None:
            return []
        name, binder = function.name.value, body.parent
        return [(call, scope) for call, scope in self.c.calls
                if isinstance(call.func, cst.Name) and call.func.value == name and scope.lookup(name) is binder]

    # -- resolution -------------------------------------------------------------

    def callee_names(self, call: cst.Call, scope: Scope, every_import: bool = False) -> list[str]:
        chain = dotted(call.func)
        return scope.qualified(chain[1], every_import) if chain is not None else []

    def argument(self, call: cst.Call, position: int | None, keyword: str | None) -> cst.BaseExpression | None:
        return _argument(call, position, keyword)

    def argument_site(self, call: cst.Call, position: int | None, keyword: str | None) -> ArgumentSite | None:
        return _argument_site(call, position, keyword)

    def passes_kwargs(self, call: cst.Call) -> bool:
        return any(arg.star == "**" for arg in call.args)

    def operator(self, target: cst.ComparisonTarget) -> str:
        return _OPERATORS.get(type(target.operator).__name__, "")

    def commands(self, expr: cst.BaseExpression, scope: Scope) -> Iterator[tuple[str, cst.BaseExpression]]:
        return self._commands(expr, scope, 0)

    def path_ends(self, expr: cst.BaseExpression, scope: Scope) -> list[str]:
        return self._program_paths(expr, scope, 0)

    def is_text(self, expr: cst.BaseExpression, scope: Scope, depth: int = 0) -> bool:
        if depth > 4:
            return False
        if isinstance(expr, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
            return True
        if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add):
            return self.is_text(expr.left, scope, depth + 1) or self.is_text(expr.right, scope, depth + 1)
        if isinstance(expr, cst.Call):
            return bool(set(self.callee_names(expr, scope)) & _TEXT_CALLS) or (
                isinstance(expr.func, cst.Name) and expr.func.value == "str" and scope.lookup("str") is None)
        if isinstance(expr, cst.Name):
            values = [(value, owner) for (value, unpack), owner in _values(scope, expr.value) if unpack is None]
            return bool(values) and all(self.is_text(v, owner, depth + 1) for v, owner in values)
        return False

    def operand_source(self, expr: cst.BaseExpression, scope: Scope
                       ) -> tuple[list[str], tuple[str, object] | None] | None:
        return self._operand_source(expr, scope, 0)

    def literal_values(self, expr: cst.BaseExpression, scope: Scope) -> list[cst.BaseExpression]:
        return _literal_values(expr, scope)

    def requirement_rules(self, text: str, rules: Sequence[Rule], section: str,
                          indexed: bool = False) -> tuple[str, list[Rule]]:
        requirement = parse_requirement(text)
        if requirement is None:
            return "", []
        return requirement.name, list(requirement_rules(requirement, rules, section, indexed))

    def pip_installs(self, expr: cst.BaseExpression, scope: Scope
                     ) -> Iterator[tuple[str, bool, cst.BaseExpression]]:
        return self._pip_installs(expr, scope, 0)

    def literal(self, node: cst.BaseExpression) -> object:
        return literal(node)

    def text(self, node: cst.BaseExpression) -> str | None:
        return string_text(node)

    def snippet(self, node: cst.CSTNode) -> str:
        return source_snippet(self.module, node)

    def program_name(self, word: str) -> str | None:
        return program_name(word)

    def is_first_party(self, dotted_name: str) -> bool:
        return self.c._is_first_party(dotted_name)

    def setup_requirements(self) -> Iterator[tuple[cst.BaseExpression, str, str]]:
        """(string node, text, section) of ``setup(install_requires=[...],
        extras_require={...}, setup_requires=[...])``."""
        for call, scope in self.c.calls:
            names = self.callee_names(call, scope)
            if not _SETUP_CALLS & set(names):
                continue
            for arg in call.args:
                keyword = arg.keyword.value if arg.keyword is not None else ""
                values: list[cst.BaseExpression] = []
                section = SETUP_REQUIREMENT_SECTIONS.get(keyword)
                if section is not None and keyword != "extras_require":
                    values = [arg.value]
                elif keyword == "extras_require":
                    for key, value in self._extras_lists(arg.value, scope):
                        values.append(value)
                        if key is not None and VENDOR_EXTRA.search(key):  # `"cuda": [...]`, `"rocm": [...]`
                            self.regions.append(Region(value, VENDOR_BRANCH))
                for value in values:
                    for node in self._string_items(value, scope):
                        yield node, string_text(node) or "", section or "install"

    def installer_requirements(self) -> Iterator[tuple[cst.BaseExpression, str, str]]:
        """(string node, text, section ``"install"``) of the requirements a project's own installer helper is given
        at run time, as its first argument: ``check_requirements(("onnx", "onnxruntime-gpu"
        if cuda else "onnxruntime"))``, ultralytics' check that pip-installs what is missing.
        Read by the helper's name as written (the project's own, usually in another module)."""
        for call, scope in self.c.calls:
            first = call.args[0] if call.args else None
            if _callee_name(call) in INSTALLER_CALLS and first is not None and first.keyword is None and not first.star:
                for node in self._string_items(first.value, scope):
                    yield node, string_text(node) or "", "install"

    def _extras_lists(self, expr: cst.BaseExpression, scope: Scope
                      ) -> Iterator[tuple[str | None, cst.BaseExpression]]:
        """(extra name where it is a literal, list) of what an ``extras_require`` value maps
        extras to: a dict literal's values, or a name bound to one and filled item by item
        (``extra_deps = {}``, ``extra_deps["gpu"] = ["flash-attn==2.6.3"]``, as llm-foundry
        and composer do)."""
        if isinstance(expr, cst.Dict):
            yield from ((string_text(e.key), e.value) for e in expr.elements if isinstance(e, cst.DictElement))
        elif isinstance(expr, cst.Name):
            owner = scope.lookup(expr.value)
            for (value, unpack), _ in _values(scope, expr.value):
                if unpack is None and isinstance(value, cst.Dict):
                    yield from self._extras_lists(value, scope)
            yield from ((string_text(key), value) for chain, key, value in self.c.item_assigns
                        if chain.parts == [expr.value] and owner is not None
                        and chain.scope.lookup(expr.value) is owner)

    def keyword_strings(self, keywords: frozenset[str]) -> frozenset[int]:
        return frozenset(id(node) for call, scope in self.c.calls for arg in call.args
                         if arg.keyword is not None and arg.keyword.value in keywords
                         for node, _ in self._flag_items(arg.value, scope, 0, None, set(), unpacked=True))

    def extensions(self) -> list[tuple[cst.Call, str, tuple[str, ...]]]:
        """(call, name, source globs) of each ``CUDAExtension(name, sources=[...])``,
        ``CppExtension(...)`` and ``load(...)`` call; the project's own modules are not
        told apart here (torch's own tree declares extensions through ``torch``)."""
        found: list[tuple[cst.Call, str, tuple[str, ...]]] = []
        for call, scope in self.c.calls:
            names = set(self.callee_names(call, scope, every_import=True))
            if not names & _DECLARING_BUILDERS:
                continue
            name_arg = _argument(call, 0, "name")
            name = string_text(name_arg) if name_arg is not None else None
            sources_arg = _argument(call, 1, "sources")
            sources = self._source_paths(sources_arg, scope) if sources_arg is not None else []
            found.append((call, name or "<unnamed>", tuple(dict.fromkeys(s for s in sources if s))))
        return found

    def _commands(self, expr: cst.BaseExpression, scope: Scope, depth: int,
                  report: cst.BaseExpression | None = None
                  ) -> Iterator[tuple[str, cst.BaseExpression]]:
        """Program words of a command: a string, an argv list, ``shlex.split(...)`` or
        ``text.split()``, or a name bound to one of those (then reported at the name, where the call uses it).
        A program written as a path expression (``[CUDA_HOME + "/bin/nvcc", "-V"]``,
        ``os.path.join(cuda_home, "bin", "nvcc")``, ``shutil.which("nvidia-smi")``, a local
        bound to one, ``f'"{nvcc}" -V'``) is read as the path it ends in."""
        text = string_text(expr)
        if text is not None:
            for program in shell_programs(text):
                if program == "\0" and isinstance(expr, cst.FormattedString):
                    placeholder = next((p for p in expr.parts if isinstance(p, cst.FormattedStringExpression)),
                                       None)
                    for path in self._program_paths(placeholder.expression, scope, depth) if placeholder else ():
                        yield path, report or expr
                else:
                    yield program, report or expr
        elif isinstance(expr, (cst.List, cst.Tuple)) and expr.elements:
            first = expr.elements[0]
            if not isinstance(first, cst.Element):
                return
            word = string_text(first.value)
            if word is None:
                for path in self._program_paths(first.value, scope, depth):
                    yield path, report or first.value
                return
            rest = [string_text(e.value) if isinstance(e, cst.Element) else None
                    for e in expr.elements[1:3]]
            if posixpath.basename(word) in SHELLS and len(rest) == 2 and rest[0] in ("-c", "-lc"):
                yield from self._commands(expr.elements[2].value, scope, depth + 1, report)
            else:
                yield word, report or first.value
        elif isinstance(expr, cst.Call) and "shlex.split" in self.callee_names(expr, scope):
            inner = _argument(expr, 0, "s")
            if inner is not None:
                yield from self._commands(inner, scope, depth + 1, report)
        elif (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "split"
              and not expr.args and depth < 3):
            yield from self._commands(expr.func.value, scope, depth + 1, report)  # CMD.split(), "nvidia-smi -L".split()
        elif (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "join"
              and string_text(expr.func.value) == " " and len(expr.args) == 1 and depth < 3):
            yield from self._commands(expr.args[0].value, scope, depth + 1, report)  # " ".join(argv)
        elif isinstance(expr, cst.Name) and depth < 3:
            for (value, unpack), owner in _values(scope, expr.value):
                if unpack is None:
                    yield from self._commands(value, owner, depth + 1, report or expr)

    def _pip_installs(self, expr: cst.BaseExpression, scope: Scope, depth: int,
                      report: cst.BaseExpression | None = None
                      ) -> Iterator[tuple[str, bool, cst.BaseExpression]]:
        """Requirements of the ``pip install`` commands in a command value, each as
        (text, whether the command names an index, the node to report it at): a shell
        string, an argv list (``sys.executable`` is a Python), ``shlex.split(...)``, or a
        name bound to one of those."""
        text = string_text(expr)
        if text is not None:
            for command in shell_commands(text):
                yield from _pip_requirements(command, lambda word: report or expr)
        elif isinstance(expr, (cst.List, cst.Tuple)) and expr.elements:
            nodes = [e.value for e in expr.elements if isinstance(e, cst.Element)]
            if len(nodes) < len(expr.elements):
                return  # a starred element: the words cannot be counted
            values = [_argv_word(node) for node in nodes]
            if len(values) >= 3 and posixpath.basename(values[0]) in SHELLS and values[1] in ("-c", "-lc"):
                yield from self._pip_installs(nodes[2], scope, depth + 1, report)
                return
            command = Command((), tuple(Word(v, i, i + 1) for i, v in enumerate(values)))
            if pip_arguments(command) is None:
                return
            for i, node in enumerate(nodes):  # a package chosen elsewhere: each string it may be
                if values[i] == "\0" and i >= 2:
                    for choice in self._choices(node, scope):
                        text = string_text(choice) or ""
                        words = (*command.words[:i], Word(text, i, i + 1), *command.words[i + 1:])
                        yield from _pip_requirements(Command((), words), functools.partial(
                            _chosen_node, at=i, chosen=choice, nodes=nodes, report=report))
            yield from _pip_requirements(command, lambda word: report or nodes[word.start])
        elif isinstance(expr, cst.Call) and "shlex.split" in self.callee_names(expr, scope):
            inner = _argument(expr, 0, "s")
            if inner is not None:
                yield from self._pip_installs(inner, scope, depth + 1, report)
        elif isinstance(expr, cst.Name) and depth < 3:
            for (value, unpack), owner in _values(scope, expr.value):
                if unpack is None:
                    yield from self._pip_installs(value, owner, depth + 1, report or expr)

    def _choices(self, expr: cst.BaseExpression, scope: Scope, depth: int = 0) -> Iterator[cst.BaseExpression]:
        """The string literals an argv element may be: either arm of ``a if c else b``, or
        what a local name was assigned (``pkg = "onnxruntime-gpu" if cuda else "onnxruntime"``)."""
        if string_text(expr) is not None:
            yield expr
        elif isinstance(expr, cst.IfExp):
            yield from self._choices(expr.body, scope, depth)
            yield from self._choices(expr.orelse, scope, depth)
        elif isinstance(expr, cst.Name) and depth < 3:
            for (value, unpack), owner in _values(scope, expr.value):
                if unpack is None:
                    yield from self._choices(value, owner, depth + 1)

    def forwarded(self, picks: Callable[[cst.Call, Scope], cst.BaseExpression | None]
                  ) -> Iterator[tuple[cst.Call, Scope, cst.BaseExpression]]:
        """(call, scope, argument) of the calls of the module's own defs that hand the
        argument on, through a parameter, to what ``picks`` chooses in a call (the command
        of ``subprocess.run``): ``def sh(cmd): return subprocess.run(cmd, shell=True)``
        makes ``sh("nvidia-smi -L")`` one; wrappers of wrappers too, two levels deep."""
        sinks = [(scope, expr) for call, scope in self.c.calls if (expr := picks(call, scope)) is not None]
        seen: set[int] = set()
        for _ in range(2):
            wrappers = dict(p for _, p in ((s, _parameter_of(e, s)) for s, e in sinks) if p is not None)
            if not wrappers:
                return
            sinks = []
            for call, scope in self.c.calls:
                for body in self._called_defs(call, scope) if id(call) not in seen else ():
                    index = wrappers.get(id(body))
                    if index is None:
                        continue
                    name = body.param_order[index]
                    if isinstance(call.func, cst.Attribute):  # self.run(cmd): self is bound already
                        index -= 1
                    argument = _argument(call, index if index >= 0 else None, name)
                    if argument is not None:
                        seen.add(id(call))
                        sinks.append((scope, argument))
                        yield call, scope, argument

    def _program_paths(self, expr: cst.BaseExpression, scope: Scope, depth: int) -> list[str]:
        """The path texts an argv word written as an expression ends in: ``a + "/bin/nvcc"``,
        ``Path(h) / "nvcc"``, ``os.path.join(h, "bin", "nvcc")``, ``shutil.which("nvcc")``,
        ``str(...)``, or a local bound to one (only the last part is read: the program)."""
        if depth > 4:
            return []
        text = string_text(expr)
        if text is not None:
            return [text]
        if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.Add, cst.Divide)):
            return self._program_paths(expr.right, scope, depth + 1)
        if isinstance(expr, cst.Name):
            return [path for (value, unpack), owner in _values(scope, expr.value) if unpack is None
                    for path in self._program_paths(value, owner, depth + 1)]
        if isinstance(expr, cst.Call):
            names = set(self.callee_names(expr, scope))
            builtin = expr.func.value if isinstance(expr.func, cst.Name) and scope.lookup(expr.func.value) is None \
                else None
            args = [a.value for a in expr.args if a.keyword is None and not a.star]
            if not args:
                return []
            if names & _PATH_JOINS:
                return self._program_paths(args[-1], scope, depth + 1)
            if names & _PROGRAM_LOOKUPS or builtin == "str" or names & _PATH_PASSTHROUGH:
                return self._program_paths(args[0], scope, depth + 1)
        return []

    def _operand_source(self, expr: cst.BaseExpression, scope: Scope,
                        depth: int) -> tuple[list[str], tuple[str, object] | None] | None:
        """``f()``, ``f()[i]``, ``f().attr``, or a local name bound to one of those; and
        ``major * 10 + minor`` of those, an SM number: ``("sm", the major's accessor)``.
        A text's case or padding changed (``name.lower()``) is still that text."""
        accessor: tuple[str, object] | None = None
        expr = same_text(expr)
        if isinstance(expr, cst.IfExp):  # f() if torch.cuda.is_available() else (0, 0)
            return (self._operand_source(expr.body, scope, depth)
                    or self._operand_source(expr.orelse, scope, depth))
        if (isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add)
                and isinstance(expr.left, cst.BinaryOperation) and isinstance(expr.left.operator, cst.Multiply)):
            factor, major = expr.left.right, expr.left.left
            if not (isinstance(factor, cst.Integer) and factor.value == "10"):
                factor, major = major, factor
            if not (isinstance(factor, cst.Integer) and factor.value == "10"):
                return None
            high = self._operand_source(major, scope, depth)
            low = self._operand_source(expr.right, scope, depth)
            if high is None or low is None or not set(high[0]) & set(low[0]):
                return None
            return high[0], ("sm", high[1])
        if isinstance(expr, cst.Subscript) and len(expr.slice) == 1:
            index = expr.slice[0].slice
            if isinstance(index, cst.Index) and isinstance(index.value, cst.Integer):
                accessor = ("index", int(index.value.evaluated_value))
                expr = expr.value
        elif isinstance(expr, cst.Attribute) and isinstance(expr.value, (cst.Call, cst.Name)):
            accessor = ("attr", expr.attr.value)
            expr = expr.value
        if isinstance(expr, cst.Call):
            names = self.callee_names(expr, scope)
            return (names, accessor) if names else None
        if isinstance(expr, cst.Name) and depth < 3:
            for value, owner in _values(scope, expr.value):
                value_expr, unpack = value
                inner = self._operand_source(value_expr, owner, depth + 1)
                if inner is None:
                    continue
                names, inner_accessor = inner
                if inner_accessor is not None and inner_accessor[0] == "sm":
                    if accessor is not None or unpack is not None:
                        continue
                    return names, inner_accessor
                if unpack is not None:
                    if inner_accessor is not None:
                        continue
                    inner_accessor = ("index", unpack)
                if accessor is not None and inner_accessor is not None:
                    continue
                return names, accessor or inner_accessor
        return None

    def _string_items(self, expr: cst.BaseExpression, scope: Scope, depth: int = 0,
                      every_import: bool = False) -> Iterator[cst.BaseExpression]:
        """String literals a list-valued expression can hold: list/tuple literals, names
        bound (or ``+=``-ed, ``.append``-ed) in scope, ``a + b``, both arms of ``x if c else y``,
        and the arguments of helper calls such as ``append_nvcc_threads([...])``."""
        for node, _ in self._flag_items(expr, scope, depth, None, None, every_import):
            yield node

    def _flag_items(self, expr: cst.BaseExpression, scope: Scope, depth: int,
                    report: cst.BaseExpression | None, followed: set[int] | None,
                    every_import: bool = False, unpacked: bool = False
                    ) -> Iterator[tuple[cst.BaseExpression, cst.BaseExpression]]:
        """(string, node to report it at) of what ``_string_items`` reads; with ``followed``
        (the ids of the defs entered), a call of the module's own function also gives what
        its ``return`` statements do, reported at the call (where the flags reach the build,
        and where a vendor branch around the call is seen); with ``unpacked``, a local
        unpacked from such a call (``requires, links = parse()``) gives the item at its
        place in the tuples the function returns."""
        if depth > 6:
            return
        if string_text(expr) is not None:
            yield expr, report or expr
        elif isinstance(expr, (cst.List, cst.Tuple, cst.Set)):
            for element in expr.elements:
                yield from self._flag_items(element.value, scope, depth + 1, report, followed, every_import, unpacked)
        elif isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add):
            yield from self._flag_items(expr.left, scope, depth + 1, report, followed, every_import, unpacked)
            yield from self._flag_items(expr.right, scope, depth + 1, report, followed, every_import, unpacked)
        elif isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Modulo) \
                and string_text(expr.left) is not None:  # "-ccbin=%s" % cc: the flag is the template's
            yield expr.left, report or expr.left
        elif (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "format"
              and string_text(expr.func.value) is not None):  # "-ccbin={}".format(cc)
            yield expr.func.value, report or expr.func.value
        elif isinstance(expr, cst.IfExp):
            yield from self._flag_items(expr.body, scope, depth + 1, report, followed, every_import, unpacked)
            yield from self._flag_items(expr.orelse, scope, depth + 1, report, followed, every_import, unpacked)
        elif isinstance(expr, cst.Name):
            for (value, unpack), owner in _values(scope, expr.value, every_import):
                if unpack is None:
                    yield from self._flag_items(value, owner, depth + 1, report, followed, every_import, unpacked)
                elif unpacked and isinstance(value, cst.Call):
                    for body in self._called_defs(value, owner):
                        for returned in body.returns:
                            items = returned.elements if isinstance(returned, (cst.Tuple, cst.List)) else ()
                            if unpack < len(items) and isinstance(items[unpack], cst.Element):
                                yield from self._flag_items(items[unpack].value, body, depth + 1, report, followed,
                                                            every_import, unpacked)
        elif isinstance(expr, cst.Call):
            for arg in expr.args:
                if arg.keyword is None and not arg.star:
                    yield from self._flag_items(arg.value, scope, depth + 1, report, followed, every_import, unpacked)
            if followed is None:
                return
            for body in self._called_defs(expr, scope):
                followed.add(id(body))
                for value in body.returns:
                    yield from self._flag_items(value, body, depth + 1, report or expr, followed, unpacked=unpacked)

    def _called_defs(self, call: cst.Call, scope: Scope) -> list[Scope]:
        """The body scopes of the module's own defs a call may run: ``helper(...)`` for a
        def the name is bound to (and nothing else), ``self.method(...)`` / ``cls.method(...)``
        for a method of the enclosing class."""
        func = call.func
        if isinstance(func, cst.Name):
            owner = scope.lookup(func.value)
            if owner is None or any(q is not None for q in owner.bindings[func.value]):
                return []
            return self.c.functions.get((id(owner), func.value), [])
        if (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)
                and func.value.value in ("self", "cls")):
            owner = scope.lookup(func.value.value)  # the method's own scope binds self
            cls = owner.parent if owner is not None else None
            if cls is not None and cls.is_class:
                return self.c.functions.get((id(cls), func.attr.value), [])
        return []

    def _builders(self, call: cst.Call, scope: Scope) -> set[str]:
        """What a call's callee stands for, through a local alias too
        (``Extension = CppExtension if cpu else CUDAExtension``)."""
        names = set(self.callee_names(call, scope))
        if not names and isinstance(call.func, cst.Name):
            stack: list[tuple[cst.BaseExpression, Scope]] = [(call.func, scope)]
            for _ in range(8):
                if not stack:
                    break
                expr, where = stack.pop()
                if isinstance(expr, cst.IfExp):
                    stack += [(expr.body, where), (expr.orelse, where)]
                    continue
                chain = dotted(expr)
                if chain is None:
                    continue
                names.update(where.qualified(chain[1]))
                if isinstance(expr, cst.Name):
                    stack += [(value, owner) for (value, unpack), owner in _values(where, expr.value)
                              if unpack is None]
        return names

    def build_values(self, arguments: frozenset[str]
                     ) -> Iterator[tuple[str, cst.BaseExpression, cst.BaseExpression]]:
        """(argument, string, node to report it at) of the flags an extension build gets,
        wherever they are written: keywords of any call (``extra_cuda_cflags=``,
        ``nvcc_flags=``, ``extra_link_args=``, ...; ``libraries=`` only in a build call),
        ``{"nvcc": [...]}`` dicts and ``args["nvcc"] = ...`` stores, a plain
        ``extra_compile_args`` list of an extension builder (``CUDAExtension`` hands it
        to nvcc too), and the lists returned by defs named for them (an op builder's
        ``def nvcc_flags(self)``) that no call in the module was followed into; values are
        followed through locals, ``+``, ``.append``/``.extend`` and the module's own helpers."""
        followed: set[int] = set()
        #: the values of ``setup(extra_compile_args={"nvcc": [...]})``: setuptools drops an
        #: option it does not know ("Unknown distribution option"), so they reach no compiler
        dropped: set[int] = set()
        for call, scope in self.c.calls:
            keywords = {arg.keyword.value: arg.value for arg in call.args if arg.keyword is not None}
            keywords.update(self._unpacked_keywords(call, scope, keywords))
            if not keywords:
                continue
            builders = self._builders(call, scope)
            compile_args = keywords.get("extra_compile_args")
            if isinstance(compile_args, cst.Dict) and builders & _SETUP_CALLS:
                dropped.update(id(e.value) for e in compile_args.elements if isinstance(e, cst.DictElement))
            declares = bool(builders & (EXTENSION_BUILDERS | _SETUP_EXTENSIONS))
            for argument in arguments:
                for keyword in _FLAG_KEYWORDS[argument]:
                    value = keywords.get(keyword)
                    if value is None or (argument == "libraries" and not declares
                                         and not _BUILD_KEYWORDS & keywords.keys()):
                        continue
                    for node, at in self._flag_items(value, scope, 0, None, followed):
                        yield argument, node, at
            if compile_args is not None and declares and not self._dicts(compile_args, scope):
                # the list form: CUDAExtension gives it to the host compiler and to nvcc alike
                takers = {"cxx", "nvcc"} if _CUDA_EXTENSION in builders else {"cxx"}
                for argument in arguments & takers:
                    for node, at in self._flag_items(compile_args, scope, 0, None, followed):
                        yield argument, node, at
        for key, value, scope in self.c.dict_items:
            if id(value) in dropped:
                continue
            if key in arguments and key in _COMPILER_KEYS:
                for node, at in self._flag_items(value, scope, 0, None, followed):
                    yield key, node, at
        for chain, key_node, value in self.c.item_assigns:
            stored = string_text(key_node)
            if stored is not None and stored in arguments and stored in _COMPILER_KEYS:
                for node, at in self._flag_items(value, chain.scope, 0, None, followed):
                    yield stored, node, at
        returned: list[tuple[int, str, cst.BaseExpression, cst.BaseExpression]] = []
        for name, body in self.c.defs:
            for argument in arguments:
                pattern = _FLAG_DEFS.get(argument)
                if pattern is not None and pattern.search(name):
                    returned += [(id(body), argument, node, at) for value in body.returns
                                 for node, at in self._flag_items(value, body, 0, None, followed)]
        if returned:
            # a def the module calls is reported where a build gets its flags (followed),
            # or not at all: its flags go somewhere seen that is no build (a direct nvcc
            # command line, say); only an op builder's method called from elsewhere is left
            called = {id(body) for call, scope in self.c.calls for body in self._called_defs(call, scope)}
            for body_id, argument, node, at in returned:
                if body_id not in called and body_id not in followed:
                    yield argument, node, at

    def _unpacked_keywords(self, call: cst.Call, scope: Scope, given: Mapping[str, cst.BaseExpression]
                           ) -> dict[str, cst.BaseExpression]:
        """The keywords a call gets from ``**d`` where ``d`` is a dict literal of this scope
        (``args = {"extra_cuda_cflags": [...]}`` then ``load(name, sources, **args)``);
        a keyword given outright wins, as Python would reject the call otherwise."""
        found: dict[str, cst.BaseExpression] = {}
        for arg in call.args:
            if arg.star != "**":
                continue
            for written in self._dicts(arg.value, scope):
                for element in written.elements:
                    key = string_text(element.key) if isinstance(element, cst.DictElement) else None
                    if key is not None and key.isidentifier() and key not in given:
                        found.setdefault(key, element.value)
        return found

    def _dicts(self, expr: cst.BaseExpression, scope: Scope) -> list[cst.Dict]:
        if isinstance(expr, cst.Dict):
            return [expr]
        if isinstance(expr, cst.Name):
            return [value for (value, unpack), _ in _values(scope, expr.value)
                    if unpack is None and isinstance(value, cst.Dict)]
        return []

    def _source_paths(self, expr: cst.BaseExpression, scope: Scope, depth: int = 0,
                      bound: Mapping[str, list[str]] | None = None) -> list[str]:
        """The paths a ``sources=`` expression names, relative to the declaring file:
        string items as ``_string_items`` reads them, with ``os.path.join(...)``,
        ``Path(a) / b``, ``glob.glob(...)``, ``Path(d).glob(p)`` and list comprehensions
        over them evaluated to path text (``bound``: the loop variables of the enclosing
        comprehensions), and the directory of ``__file__`` read as the declaring file's
        own (``""``). Unknown parts and calls give nothing, not a wrong path."""
        if depth > 12:
            return []
        text = string_text(expr)
        if text is not None:
            return [text]
        if _mentions_file(expr):
            return [""]
        if isinstance(expr, (cst.List, cst.Tuple, cst.Set)):
            return [p for e in expr.elements for p in self._source_paths(e.value, scope, depth + 1, bound)]
        if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add):
            return [*self._source_paths(expr.left, scope, depth + 1, bound),
                    *self._source_paths(expr.right, scope, depth + 1, bound)]
        if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Divide):
            return _joined([self._source_paths(expr.left, scope, depth + 1, bound),
                            self._source_paths(expr.right, scope, depth + 1, bound)])
        if isinstance(expr, cst.IfExp):
            return [*self._source_paths(expr.body, scope, depth + 1, bound),
                    *self._source_paths(expr.orelse, scope, depth + 1, bound)]
        if isinstance(expr, (cst.ListComp, cst.GeneratorExp, cst.SetComp)):
            items = self._source_paths(expr.for_in.iter, scope, depth + 1, bound)  # filters keep a subset
            target = expr.for_in.target
            if expr.for_in.inner_for_in is not None or not isinstance(target, cst.Name):
                return items
            return self._source_paths(expr.elt, scope, depth + 1, {**(bound or {}), target.value: items})
        if isinstance(expr, cst.Name) and bound and expr.value in bound:
            return bound[expr.value]
        if isinstance(expr, cst.Name):
            return [p for (value, unpack), owner in _values(scope, expr.value, every_import=True)
                    if unpack is None for p in self._source_paths(value, owner, depth + 1, bound)]
        if isinstance(expr, cst.Call):
            return self._call_paths(expr, scope, depth, bound)
        return []

    def _call_paths(self, call: cst.Call, scope: Scope, depth: int,
                    bound: Mapping[str, list[str]] | None) -> list[str]:
        names = set(self.callee_names(call, scope, every_import=True))
        args = [a.value for a in call.args if a.keyword is None and not a.star]
        parts = [self._source_paths(a, scope, depth + 1, bound) for a in args]
        if names & _PATH_JOINS:
            return _joined(parts)
        builtin = call.func.value if isinstance(call.func, cst.Name) and scope.lookup(call.func.value) is None \
            else None
        if names & _PATH_PASSTHROUGH or builtin in _PATH_PASSTHROUGH:
            return parts[0] if parts else []
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value in ("glob", "rglob") and args:
            base = self._source_paths(func.value, scope, depth + 1, bound)
            patterns = parts[0] if func.attr.value == "glob" else [f"**/{p}" for p in parts[0]]
            return _joined([base, patterns])
        if isinstance(func, cst.Attribute) and func.attr.value in _PATH_METHODS:
            return self._source_paths(func.value, scope, depth + 1, bound)
        return []


#: calls that join path parts (``os.path.join("csrc", "*.cu")``, ``Path("csrc", "ops.cu")``)
_PATH_JOINS = frozenset({"os.path.join", "posixpath.join", "ntpath.join", "pathlib.Path", "pathlib.PurePath",
                         "pathlib.PosixPath", "pathlib.PurePosixPath"})
#: calls whose value names the same files as their first argument
_PATH_PASSTHROUGH = frozenset({"glob.glob", "glob.iglob", "sorted", "list", "str", "os.path.abspath",
                               "os.path.realpath", "os.path.normpath", "os.fspath"})
#: calls that return one text (a path as ``str``)
_TEXT_CALLS = frozenset({"os.path.join", "posixpath.join", "ntpath.join", "os.path.abspath", "os.path.realpath",
                         "os.path.normpath", "os.path.dirname", "os.path.basename", "os.path.expanduser",
                         "os.path.expandvars", "os.fspath", "os.getcwd"})
#: calls that find a program on the ``PATH`` (their argument names it)
_PROGRAM_LOOKUPS = frozenset({"shutil.which", "distutils.spawn.find_executable"})
#: ``Path`` methods that keep the files a path names
_PATH_METHODS = frozenset({"resolve", "absolute", "as_posix", "expanduser"})


def _mentions_file(expr: cst.BaseExpression) -> bool:
    """``os.path.dirname(os.path.abspath(__file__))``, ``Path(__file__).parent``: the
    declaring file's directory (only these shapes: ``__file__`` itself names a file)."""
    if isinstance(expr, cst.Call):
        names = dotted(expr.func)
        callee = names[1] if names is not None else []
        if callee[-1:] == ["dirname"] and expr.args:
            return _names_file(expr.args[0].value)
        return False
    if isinstance(expr, cst.Attribute) and expr.attr.value == "parent":
        return _names_file(expr.value)
    return False


def _names_file(expr: cst.BaseExpression) -> bool:
    """``__file__``, ``abspath(__file__)``, ``Path(__file__)``, ``Path(__file__).resolve()``."""
    while isinstance(expr, cst.Call):
        if isinstance(expr.func, cst.Attribute) and expr.func.attr.value in _PATH_METHODS:
            expr = expr.func.value
        elif expr.args:
            expr = expr.args[0].value
        else:
            return False
    return isinstance(expr, cst.Name) and expr.value == "__file__"


def _joined(parts: list[list[str]], limit: int = 64) -> list[str]:
    """Every way of joining one alternative of each part with ``/`` ("" is the declaring
    directory); nothing when a part is unknown."""
    joined = [""]
    for options in parts:
        if not options:
            return []
        joined = [f"{a}/{b}" if a and b else a or b for a in joined for b in options][:limit]
    return [p for p in joined if p]


def _literal_values(expr: cst.BaseExpression, scope: Scope) -> list[cst.BaseExpression]:
    """The literal nodes an argument's value may come from: itself, what a local name was
    assigned, or the items of the literal a loop variable ranges over (written in the
    loop, or the literal a name holds: ``for s in STATEMENTS``)."""
    if isinstance(expr, cst.IfExp):
        return [*_literal_values(expr.body, scope), *_literal_values(expr.orelse, scope)]
    if not isinstance(expr, cst.Name):
        return [expr]
    found = [value for (value, unpack), _ in _values(scope, expr.value) if unpack is None]
    owner = scope.lookup(expr.value)
    if owner is None:
        return found
    for iterable in owner.loop_items.get(expr.value, ()):
        collections = [iterable] if not isinstance(iterable, cst.Name) else \
            [value for (value, unpack), _ in _values(owner, iterable.value) if unpack is None]
        for collection in collections:
            if isinstance(collection, (cst.List, cst.Tuple, cst.Set)):
                found += [element.value for element in collection.elements if isinstance(element, cst.Element)]
    return found


def _argv_word(node: cst.BaseExpression) -> str:
    """An argv element's text; ``sys.executable`` is a Python, anything else unknown (``\\0``)."""
    text = string_text(node)
    if text is not None:
        return text
    if isinstance(node, cst.Attribute) and node.attr.value == "executable" \
            and isinstance(node.value, cst.Name) and node.value.value == "sys":
        return "python"
    return "\0"


def _chosen_node(word: Word, at: int, chosen: cst.BaseExpression, nodes: Sequence[cst.BaseExpression],
                 report: cst.BaseExpression | None) -> cst.BaseExpression:
    """Where an argv word is reported: the chosen string for the element it stands for."""
    return chosen if word.start == at else report or nodes[word.start]


def _placeholder_version(value: str) -> str:
    """``onnxruntime-gpu=={ver}`` (an f-string) -> ``onnxruntime-gpu``: the package is
    known even where its version is not; a placeholder in the name stays unknown."""
    if "\0" not in value:
        return value
    name = value
    for separator in "=<>~!;[@ ":
        name = name.split(separator, 1)[0]
    return name if name and "\0" not in name else value


def _pip_requirements(command: Command, node_of: Callable[[Word], cst.BaseExpression]
                      ) -> Iterator[tuple[str, bool, cst.BaseExpression]]:
    """(requirement, indexed, node) of a ``pip install`` command; nothing for another one."""
    words = tuple(dataclasses.replace(w, value=_placeholder_version(w.value)) for w in command.words)
    if words and words[0].value == "\0" and [w.value for w in words[1:4]] == ["-m", "pip", "install"]:
        words = (dataclasses.replace(words[0], value="python"), *words[1:])  # f"{sys.executable} -m pip"
    found = pip_arguments(Command(command.assignments, words))
    if found is not None:
        requirements, indexes = found
        for word in requirements:
            yield word.value, bool(indexes), node_of(word)


def _values(scope: Scope, name: str, every_import: bool = False
            ) -> Iterator[tuple[tuple[cst.BaseExpression, int | None], Scope]]:
    """What a name that no import binds was assigned (with ``every_import``, no
    first-party import either)."""
    owner = scope.lookup(name)
    if (owner is not None and all(q is None for q in owner.bindings[name])
            and not (every_import and name in owner.first_party)):
        for value in owner.values.get(name, ()):
            yield value, owner


def _parameter_of(expr: cst.BaseExpression, scope: Scope) -> tuple[int, int] | None:
    """(id of the def's body scope, index) when ``expr`` is a parameter of the def it is
    in, as such or split/joined (``cmd``, ``shlex.split(cmd)``, ``cmd.split()``, ``" ".join(cmd)``)."""
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
        func, attr = expr.func, expr.func.attr.value
        shlex_split = attr == "split" and isinstance(func.value, cst.Name) and func.value.value == "shlex"
        joined = attr == "join" and string_text(func.value) is not None
        if (shlex_split or joined) and expr.args:
            expr = expr.args[0].value
        elif attr == "split":
            expr = func.value
    if not isinstance(expr, cst.Name):
        return None
    owner = scope.lookup(expr.value)
    if owner is None or expr.value not in owner.param_order:
        return None
    return id(owner), owner.param_order.index(expr.value)


def _argument(call: cst.Call, position: int | None, keyword: str | None) -> cst.BaseExpression | None:
    if keyword is not None:
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value == keyword:
                return arg.value
    if position is not None:
        positional = 0
        for arg in call.args:
            if arg.star:
                return None  # *args hides which argument sits at this position
            if arg.keyword is not None:
                continue
            if positional == position:
                return arg.value
            positional += 1
    return None


def _argument_site(call: cst.Call, position: int | None, keyword: str | None) -> ArgumentSite | None:
    """The argument at ``keyword`` or ``position`` as a kind's condition reads it."""
    value = _argument(call, position, keyword)
    if value is None:
        return None
    items: list[object] = []
    if isinstance(value, (cst.List, cst.Tuple, cst.Set)):
        for element in value.elements:
            item = element.value
            if isinstance(item, cst.Tuple) and item.elements:
                item = item.elements[0].value  # ORT's ("Provider", {options}) form
            items.append(literal(item))
    return ArgumentSite(literal(value), string_text(value), tuple(items))



def _only_reports(node: cst.If) -> bool:
    """Do an ``if``'s branches (``elif``/``else`` included) do nothing but print or log?
    Then its test decides a message (``if major >= 8: logger.info("bf16 is supported")``),
    not what runs."""
    branches: list[cst.BaseSuite] = [node.body]
    rest = node.orelse
    while isinstance(rest, cst.If):  # elif
        branches.append(rest.body)
        rest = rest.orelse
    if rest is not None:  # else
        branches.append(rest.body)
    statements = [s for branch in branches for s in small_statements(branch)]
    calls = [s.value for s in statements if isinstance(s, cst.Expr) and isinstance(s.value, cst.Call)]
    return bool(calls) and len(calls) + sum(isinstance(s, cst.Pass) for s in statements) == len(statements) \
        and all(_callee_name(call) in _HINT_CALLS for call in calls)


def _callee_name(call: cst.Call) -> str:
    func = call.func
    return func.value if isinstance(func, cst.Name) else func.attr.value if isinstance(func, cst.Attribute) else ""


def _names_in(test: cst.CSTNode) -> frozenset[str]:
    """Plain names a condition mentions (``pynvml`` in ``if pynvml is None``)."""
    names: set[str] = set()
    stack = [test]
    while stack:
        node = stack.pop()
        if type(node) in NAME:
            names.add(node.value)  # type: ignore[attr-defined]
        elif type(node) in ATTRIBUTE:
            stack.append(node.value)  # type: ignore[attr-defined]
        else:
            stack.extend(children(node))
    return frozenset(names)


#: calls that leave the block as a ``raise`` does (a skipped test, an exit)
_LEAVING_CALLS = frozenset({"pytest.skip", "pytest.xfail", "pytest.exit", "pytest.fail", "sys.exit", "os._exit",
                            "exit", "quit", "self.skipTest"})


def _ends_in_jump(block: cst.BaseSuite) -> bool:
    """Does a block always leave (return, raise, continue, break, ``pytest.skip(...)``,
    ``sys.exit(...)``) at its end?"""
    last = block.body[-1] if block.body else None
    if isinstance(last, cst.SimpleStatementLine):
        last = last.body[-1] if last.body else None
    if isinstance(last, cst.Expr) and isinstance(last.value, cst.Call):
        chain = dotted(last.value.func)
        return chain is not None and ".".join(chain[1]) in _LEAVING_CALLS
    return isinstance(last, (cst.Return, cst.Raise, cst.Continue, cst.Break))


def absolute_module(package: str, level: int, module: str) -> str | None:
    """What ``from <level dots><module> import ...`` names inside ``package``
    (``xformers.ops.fmha``, 1, "" -> ``xformers.ops.fmha``); None when the package is
    unknown or the dots climb above it."""
    parts = package.split(".") if package else []
    if level > len(parts):
        return None
    return ".".join([*parts[: len(parts) - level + 1], *([module] if module else [])])


def _junction(node: cst.BaseExpression, operator: type) -> list[cst.BaseExpression]:
    """The operands of a chain of one boolean operator, flattened: with ``cst.And``,
    ``a and (b and c) and (c or d)`` is ``[a, b, c, c or d]``."""
    if not isinstance(node, cst.BooleanOperation) or not isinstance(node.operator, operator):
        return [node]
    return _junction(node.left, operator) + _junction(node.right, operator)


def _junction_nodes(node: cst.BaseExpression, operator: type) -> list[cst.BooleanOperation]:
    """The boolean operations :func:`_junction` flattens, ``node`` among them."""
    if not isinstance(node, cst.BooleanOperation) or not isinstance(node.operator, operator):
        return []
    return [node, *_junction_nodes(node.left, operator), *_junction_nodes(node.right, operator)]


def _nested_boolean_operations(node: cst.BooleanOperation) -> list[cst.BooleanOperation]:
    found = []
    stack: list[cst.BaseExpression] = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, cst.BooleanOperation) and not item.lpar:
            found.append(item)
            stack.extend((item.left, item.right))
    return found


def _drop_superseded(hits: list[tuple[Rule, object, cst.BaseExpression, dict[str, str]]]
                     ) -> list[tuple[Rule, object, cst.BaseExpression, dict[str, str]]]:
    superseded = {(code, site) for rule, site, _, _ in hits for code in rule.supersedes}
    return [hit for hit in hits if (hit[0].code, hit[1]) not in superseded]


def match_python(module: cst.Module, rules: Sequence[Rule], first_party: frozenset[str] = frozenset(),
                 folders: Sequence[str] = ()) -> list[Match]:
    """Every match of ``rules`` in a parsed module, located by character offsets; ``folders``:
    those of the module's path below the scan root."""
    return ModuleWalk(module, rules, first_party, folders=folders).matches()


@dataclass(frozen=True, slots=True)
class ExtensionDecl:
    """A CUDA/C++ extension declared in Python: its name, where, and its source globs."""

    name: str
    offset: int  #: character offset of the declaring call
    sources: tuple[str, ...]  #: as written (paths or glob patterns), relative to the file


class ModuleWalk:
    """One walk of a parsed module for ``rules``: with ``extensions``, the extensions it
    declares are read off the same walk at once (a built-in site: calls to
    :data:`EXTENSION_BUILDERS`); the rule matches come from :meth:`matches`."""

    def __init__(self, module: cst.Module, rules: Sequence[Rule], first_party: frozenset[str] = frozenset(),
                 extensions: bool = False, folders: Sequence[str] = ()) -> None:
        self.module = module
        self.folders = tuple(folders)
        self.collector = _Collector(_Index(rules), first_party, extensions)
        self.collector.walk(module)
        self.resolver = _Resolver(module, self.collector)
        self._matches: list[Match] | None = None
        self.extensions: tuple[ExtensionDecl, ...] = ()
        if extensions:
            found = self.resolver.extensions()
            starts = locate(module, [call for call, _, _ in found])
            self.extensions = tuple(ExtensionDecl(name, starts[id(call)][0], sources)
                                    for call, name, sources in found)

    def matches(self) -> list[Match]:
        """Every match of the rules, located by character offsets (worked out once)."""
        if self._matches is None:
            self._matches = _matches(self.module, self.collector, self.resolver, self.folders)
        return list(self._matches)

    @functools.cached_property
    def names(self) -> Names:
        """What names mean in this module, for the fixes (the same scopes matched it)."""
        return Names(self.collector)


class Names:
    """The walk's scopes and name uses, as the fixes ask for them: the one name
    resolver behind matching and fixing (a use and the scope that binds it are found
    the same way for both). Like the matcher, it is flow-insensitive: every binding of
    a name in a scope counts, wherever it is."""

    def __init__(self, collector: _Collector) -> None:
        self.module = collector.module_scope
        self._fallback_tries = collector.fallback_tries
        self._opened = collector.opened
        self._chains = collector.chains
        #: id(node of a dotted chain) -> the scope it is evaluated in
        self._at = {id(node): chain.scope for chain in collector.chains for node in chain.nodes}
        #: id(outermost node of a dotted chain) -> the chain
        self._outer = {id(chain.nodes[-1]): chain for chain in collector.chains}
        #: (name, id(scope)) -> its uses, as :meth:`uses` found them (scopes live as long as this)
        self._uses: dict[tuple[str, int], list[tuple[cst.Name, Scope]]] = {}

    def scope_at(self, node: cst.CSTNode, parent: Callable[[cst.CSTNode], cst.CSTNode | None]) -> Scope:
        """The scope ``node`` is evaluated in: that of its name chain, else that of the
        innermost def, lambda, class or comprehension whose body holds it (climbing
        with ``parent``), else the module's."""
        if isinstance(node, cst.Call):
            node = node.func
        known = self._at.get(id(node))
        if known is not None:
            return known
        child, above = node, parent(node)
        while above is not None:
            opened = self._opened.get(id(above))
            if opened is not None and _runs_inside(above, child):
                return opened
            child, above = above, parent(above)
        return self.module

    @functools.cached_property
    def _chains_by_name(self) -> dict[str, list[_Chain]]:
        found: dict[str, list[_Chain]] = {}
        for chain in self._chains:
            found.setdefault(chain.parts[0], []).append(chain)
        return found

    def uses(self, name: str, scope: Scope) -> list[tuple[cst.Name, Scope]]:
        """Each use of ``name`` that sees ``scope``'s binding of it: (the name node,
        the scope the use is in)."""
        key = (name, id(scope))
        if key not in self._uses:
            self._uses[key] = [(chain.nodes[0], chain.scope)  # type: ignore[misc]
                               for chain in self._chains_by_name.get(name, ()) if chain.scope.lookup(name) is scope]
        return list(self._uses[key])

    @functools.cached_property
    def emptied_fallbacks(self) -> int:
        """How many ``try`` bodies with a fallback handler hold nothing but ``pass`` (what
        a fix must never leave: the handler can no longer run)."""
        return sum(1 for t in self._fallback_tries if _only_pass(t.body))

    @functools.cached_property
    def free(self) -> frozenset[str]:
        """Names used where no scope of the module binds them: builtins, star imports'
        names, and undefined names (what a fix must never add to)."""
        return frozenset(chain.parts[0] for chain in self._chains if chain.scope.lookup(chain.parts[0]) is None)

    @functools.cached_property
    def from_imports(self) -> frozenset[str]:
        """Names used where an import binds them (in the scope the use sees)."""
        found = set()
        for chain in self._chains:
            owner = chain.scope.lookup(chain.parts[0])
            if owner is not None and owner.imports.get(chain.parts[0]):
                found.add(chain.parts[0])
        return frozenset(found)

    def imports_used(self, node: cst.CSTNode) -> list[tuple[str, cst.Import | cst.ImportFrom]]:
        """The dotted names used inside ``node`` (``torch.cuda.amp``), each with an
        import statement that binds its first part where it is used."""
        found: list[tuple[str, cst.Import | cst.ImportFrom]] = []
        stack = [node]
        while stack:
            current = stack.pop()
            chain = self._outer.get(id(current))
            if chain is None:
                stack += children(current)
                continue
            owner = chain.scope.lookup(chain.parts[0])
            if owner is not None:
                found += [(".".join(chain.parts), statement) for statement in owner.imports.get(chain.parts[0], ())]
        return found  # (a dotted chain holds nothing but its names)

    @functools.cached_property
    def module_imports(self) -> dict[str, str]:
        """Each module-level name that only absolute imports of one name bind, with the
        qualified name it stands for (see :meth:`imported`)."""
        return {local: bound for local in self.module.bindings if (bound := self.imported(local)) is not None}

    def imported(self, name: str) -> str | None:
        """The qualified name a module-level ``name`` stands for when only absolute
        imports of that one name bind it (the project's own modules included)."""
        bound = self.module.bindings.get(name)
        if not bound:
            return None
        own = self.module.first_party.get(name, [])
        if bound.count(None) != len(own):
            return None  # bound by something other than an import too
        qualified = {q for q in bound if q is not None} | set(own)
        return qualified.pop() if len(qualified) == 1 else None


def _only_pass(body: cst.CSTNode) -> bool:
    smalls = small_statements(body) if isinstance(body, cst.BaseSuite) else []
    return bool(smalls) and all(isinstance(small, cst.Pass) for small in smalls)


def _runs_inside(owner: cst.CSTNode, child: cst.CSTNode) -> bool:
    """Does ``child`` of ``owner`` run in the scope ``owner`` opens? (A def's
    decorators, defaults and annotations run outside it, its body inside.)"""
    if isinstance(owner, cst.FunctionDef | cst.ClassDef | cst.Lambda):
        return child is owner.body
    return True


def _tunes(rule: Rule) -> bool:
    """Does the rule read a test that only picks numbers as tuning (guard ``tuning``)?"""
    return getattr(rule.pattern, "tuning", False)


def _consumers(rule: Rule) -> tuple[str, ...]:
    """The names that compute with what the rule matches (guard ``no-consumer`` where the
    module uses none of them)."""
    return getattr(rule.pattern, "consumers", ())


def _cuda_compared(test: cst.BaseExpression) -> frozenset[str]:
    """The names a test compares with ``"cuda"``, itself or in its ``and``/``or`` chain."""
    operands = boolean_operands(test) if isinstance(test, cst.BooleanOperation) else [test]
    return frozenset().union(*(names_compared_with(o, CUDA_DEVICE_TYPES) for o in operands))


def _uses_any(collector: _Collector, names: tuple[str, ...]) -> bool:
    """Does the module use or import a name at or below one of ``names`` (``import
    torchao`` counts for ``torchao.*``)?"""
    def listed(qualified: str) -> bool:
        return any(is_at_or_below(qualified, name[:-2]) if name.endswith(".*") else qualified == name
                   for name in names)

    scopes: set[Scope] = set()
    for chain in collector.chains:
        if any(listed(q) for q in chain.scope.qualified(chain.parts)):
            return True
        scope: Scope | None = chain.scope
        while scope is not None and scope not in scopes:
            scopes.add(scope)
            scope = scope.parent
    return any(q is not None and listed(q) for scope in scopes for bound in scope.bindings.values() for q in bound)


def _probes(rule: Rule) -> tuple[str, ...]:
    """The availability checks under whose ``if`` an import of the rule's modules is only
    tried where the library is installed (guard ``fallback``, as in a ``try``)."""
    return getattr(rule.pattern, "probes", ())


def _called(test: cst.BaseExpression) -> frozenset[str]:
    """The last names of the functions a test calls (``is_flash_attn_2_available`` in
    ``if is_torch_available() and utils.is_flash_attn_2_available():``)."""
    names = set()
    stack: list[cst.CSTNode] = [test]
    while stack:
        node = stack.pop()
        chain = dotted(node.func) if isinstance(node, cst.Call) else None
        if chain is not None:
            names.add(chain[1][-1])
        stack.extend(children(node))
    return frozenset(names)


def _silent(rule: Rule) -> bool:
    """Does what the rule finds go wrong without raising (a text test that is false on
    ROCm), so that a ``try`` around it copes with nothing (no guard ``fallback``)?"""
    return getattr(rule.pattern, "silent", False)


def _matches(module: cst.Module, collector: _Collector, resolver: _Resolver,
             folders: Sequence[str] = ()) -> list[Match]:
    resolver.run()
    hits = _drop_superseded(resolver.hits)
    reports = _report_nodes(hits)
    if not reports:
        return []
    regions = collector.regions + collector.device_type_regions() + resolver.regions
    uses = _use_candidates(collector)
    unless = resolver.unless_checked
    checks = collector.name_checks if uses or unless else []
    bindings = _Bindings(collector, reports)
    helpers = _helper_mentions(module, collector, regions)
    raising = any(rule.raises for rule, *_ in reports)  # guard `handled` may apply
    tuned = any(_tunes(rule) for rule, *_ in reports)  # guard `tuning` may apply
    offsets = locate(module, [node for _, _, node, _ in reports] + [node for node, _ in regions]
                     + [stmt for _, stmt, _, _ in uses] + [node for _, _, node, _ in uses]
                     + [node for node, _ in checks] + bindings.statements()
                     + [t.body for t in collector.fallback_tries]
                     + [body for body, _, _ in collector.availability_ifs]
                     + [node for node, _ in collector.format_regions]
                     + ([body for body, _ in collector.catching_tries] if raising else [])
                     + (collector.number_choices + collector.message_choices if tuned else [])
                     + [n for body, mentions in helpers for n in (body, *mentions)]
                     + list(resolver.origins.values()))
    guarded = [(offsets[id(node)], guard) for node, guard in regions if id(node) in offsets]
    guarded += _vendor_only_helpers(helpers, guarded, offsets)

    catching = [(offsets[id(body)], caught) for body, caught in collector.catching_tries if id(body) in offsets]
    formatted = [(offsets[id(node)], found) for node, found in collector.format_regions]

    choices = [offsets[id(test)] for test in collector.number_choices if id(test) in offsets]
    messages = [offsets[id(test)] for test in collector.message_choices if id(test) in offsets]
    consumed = {names: _uses_any(collector, names) for names in {_consumers(rule) for rule, *_ in reports} if names}

    def guard_at(start: int, end: int, rule: Rule | None = None) -> str | None:
        guards = {guard for (g_start, g_end), guard in guarded if g_start <= start and end <= g_end}
        if rule is not None and _silent(rule):
            guards.discard(FALLBACK)
        if rule is not None and rule.raises and any(s <= start and end <= e and handles(caught, rule.raises)
                                                    for (s, e), caught in catching):
            guards.add(HANDLED)  # `try: torch.version.cuda.split(".") except AttributeError: ...`
        if rule is not None and _tunes(rule) and any(s <= start and end <= e for s, e in choices):
            guards.add(TUNING)  # `BLOCK = 128 if cap >= (8, 0) else 64`: the comparison picks a number
        if rule is not None and _tunes(rule) and any(s <= start and end <= e for s, e in messages):
            guards.add(MESSAGE_ONLY)  # `if major >= 8: logger.info("bf16 would be faster")`
        if rule is not None and _consumers(rule) and not consumed[_consumers(rule)]:
            guards.add(NO_CONSUMER)  # an FP8 dtype only cast or stored: nothing computes with it here
        if rule is not None and rule.formats and any(s <= start and end <= e and not found.isdisjoint(rule.formats)
                                                     for (s, e), found in formatted):
            guards.add(FORMAT_DEFINED)  # `def quantize_nvfp4(...)`: its E4M3 scales are the format's own
        return next((g for g in GUARD_ORDER if g in guards), None)

    tries = _Tries(collector.fallback_tries + collector.fallback_ifs, offsets)
    availability_ifs = [(offsets[id(body)], probes, flags) for body, probes, flags in collector.availability_ifs
                        if id(body) in offsets]
    checked = [(offsets[id(node)], names) for node, names in checks if id(node) in offsets]
    matches = []
    #: id(import statement) -> the guard of its import findings
    import_guards: dict[int, str | None] = {}
    for rule, site, node, variables in reports:
        start, end = offsets[id(node)]
        local = unless.get(id(node))
        if local is not None and any(s <= start and end <= e and local in names for (s, e), names in checked):
            continue  # `if version is not None: version.split(".")`
        variables.setdefault("matched", source_snippet(module, node))
        guard = guard_at(start, end, rule)
        origin = resolver.origins.get(id(node))
        if guard is None and origin is not None and id(origin) in offsets:
            guard = guard_at(*offsets[id(origin)], rule)  # the value is written under a guard
            if isinstance(origin, (cst.Import, cst.ImportFrom)) and guard != VENDOR_BRANCH:
                guard = None  # an import that may fail in a `try` still binds the name on ROCm
        statement = bindings.import_statement(rule, site)
        folded = False
        if statement is not None and guard is None and any(
                s <= start and end <= e and (not probes.isdisjoint(_probes(rule))
                                             or flags_package(flags, variables.get("module", ""),
                                                              getattr(rule.pattern, "flag_names", ())))
                for (s, e), probes, flags in availability_ifs):
            guard = FALLBACK  # `if is_flash_attn_2_available():` / `if HAS_FLASH_ATTN:` then the import
        if statement is not None:  # an import rule's own statement
            if guard == FALLBACK and (tries.substituted(statement, bindings.locals(statement), rule.equivalents,
                                                        bindings, collector.index.equivalents)
                                      or bindings.probes_only(statement)):
                guard = FALLBACK_EQUIVALENT
            if guard in (None, FALLBACK) and adapts(folders, variables.get("module", "")):
                guard = INTEGRATION  # `integration/tensorrt_llm/adapter.py` imports tensorrt_llm
            import_guards.setdefault(id(statement), guard)
        else:
            statement = bindings.use_statement(node)
            if statement is not None and tries.rebinds(statement, bindings.first_name(node)):
                folded = True  # `FusedAdam(...)` where the handler binds FusedAdam as well
        binding = offsets[id(statement)][0] if statement is not None else None
        matches.append(Match(rule, start, end, variables, guard, node, binding=binding, folded=folded,
                             subject=resolver.subjects.get(id(node))))
    for i, m in enumerate(matches):  # a folded use without a guard of its own takes its import's
        if m.folded and m.guard is None:
            statement = bindings.use_statement(m.node)
            guard = import_guards.get(id(statement), FALLBACK) if statement is not None else FALLBACK
            matches[i] = dataclasses.replace(m, guard=guard)
    facts = functools.cache(lambda: _Facts(module, collector))
    matches = [dataclasses.replace(m, declined=reason) if reason else m
               for m, reason in zip(matches, decline_reasons(matches, facts), strict=True)]
    matches = [dataclasses.replace(m, tier=tier) if tier else m
               for m, tier in zip(matches, site_tiers(matches, facts), strict=True)]
    for rule, used_at, node, variables in uses:
        start, end = offsets[id(node)]
        local = variables["local"]
        if any(s <= start and end <= e and local in names for (s, e), names in checked):
            continue  # `if pynvml is not None:` and the like
        variables = {"module": variables["module"], "matched": source_snippet(module, node)}
        guard = guard_at(start, end) or import_guards.get(id(used_at))
        matches.append(Match(rule, start, end, variables, guard, node, fixable=False,
                             binding=offsets[id(used_at)][0], folded=True))
    return matches


class _Facts:
    """The walk's view of the whole module for :func:`portscan.match.fixsites.decline_reasons`
    (see :class:`portscan.match.fixsites.Facts`); each index is built on first use."""

    def __init__(self, module: cst.Module, collector: _Collector) -> None:
        self.module = module
        self.collector = collector

    @functools.cached_property
    def _parents(self) -> Parents:
        return Parents(self.module)

    @functools.cached_property
    def _chains(self) -> tuple[dict[int, _Chain], dict[int, _Chain]]:
        """(every node of a chain, the outermost node of a chain) -> the chain"""
        chains = self.collector.chains
        return ({id(n): chain for chain in chains for n in chain.nodes},
                {id(chain.nodes[-1]): chain for chain in chains})

    @functools.cached_property
    def _names(self) -> Names:
        return Names(self.collector)

    @functools.cached_property
    def _attributes(self) -> dict[str, list[cst.Attribute]]:
        found: dict[str, list[cst.Attribute]] = {}
        for node in self._parents.all():
            if isinstance(node, cst.Attribute):
                found.setdefault(node.attr.value, []).append(node)
        return found

    @functools.cached_property
    def _lines(self) -> LineIndex:
        return LineIndex(self.module.code)  # only for a decline's message: rare

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        return self._parents.get(node)

    def bindings(self, node: cst.CSTNode) -> tuple[str, tuple[str | None, ...]] | None:
        chain = self._chains[0].get(id(node))
        owner = chain.scope.lookup(chain.parts[0]) if chain is not None else None
        return None if owner is None or chain is None else (chain.parts[0], tuple(owner.bindings[chain.parts[0]]))

    def qualify(self, node: cst.CSTNode) -> list[str]:
        chain = self._chains[1].get(id(node))
        return chain.scope.qualified(chain.parts) if chain is not None else []

    def imports_used(self, node: cst.CSTNode) -> list[tuple[str, cst.Import | cst.ImportFrom]]:
        return self._names.imports_used(node)

    def attributes(self, name: str) -> list[cst.Attribute]:
        return self._attributes.get(name, [])

    def import_time_use(self, name: str) -> cst.CSTNode | None:
        module = self._names.module
        return next((use for use, where in self._names.uses(name, module) if where is module or where.is_class),
                    None)

    def line(self, node: cst.CSTNode) -> int:
        return self._lines.position(locate(self.module, [node])[id(node)][0])[0]

    def first(self, nodes: Sequence[cst.CSTNode]) -> cst.CSTNode:
        starts = locate(self.module, nodes)  # one counting pass for all of them
        return min(nodes, key=lambda n: starts[id(n)][0])

    def code(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node)


#: module attributes that describe the module rather than use it
_METADATA = frozenset({"__version__", "__file__", "__path__", "__name__"})
#: an upper-case attribute is a constant (``trt.DataType.HALF``, ``pynvml.NVML_CLOCK_SM``):
#: reading it runs nothing, so it is no use of its own
_CONSTANT = re.compile(r"[A-Z][A-Z0-9_]*")


def _is_import(rule: Rule, site: object) -> bool:
    """An import rule's site: (id(statement), imported name)."""
    return rule.pattern.kind == "import" and isinstance(site, tuple)


class _Bindings:
    """Which import statement each report comes from: an import rule's own statement,
    or the import that binds the first name of a dotted use (one that an import rule
    reports, when several bind it)."""

    def __init__(self, collector: _Collector, reports: Sequence[tuple[Rule, object, cst.BaseExpression,
                                                                       dict[str, str]]]) -> None:
        self._collector = collector
        self._statements = {id(site.statement): site.statement for site in collector.imported}
        self._locals: dict[int, list[str]] = {}
        for site in collector.imported:
            if site.local is not None:
                self._locals.setdefault(id(site.statement), []).append(site.local)
        self._reported = {site[0] for rule, site, _, _ in reports if isinstance(site, tuple) and _is_import(rule, site)}
        wanted = {id(node) for rule, site, node, _ in reports if not _is_import(rule, site)}
        self._chains: dict[int, _Chain] = {}
        per_import = any(getattr(rule.pattern, "per_import", False) for rule, _, _, _ in reports)
        # else no use has an import to join
        if wanted and (self._reported or per_import or collector.fallback_tries or collector.fallback_ifs):
            for chain in collector.chains:
                for node in chain.nodes:
                    if id(node) in wanted:
                        self._chains[id(node)] = chain
        self._uses: dict[int, cst.Import | cst.ImportFrom | cst.Assign | None] = {
            key: self._binding(chain) for key, chain in self._chains.items()}

    def _binding(self, chain: _Chain) -> cst.Import | cst.ImportFrom | cst.Assign | None:
        owner = chain.scope.lookup(chain.parts[0])
        candidates = owner.binders(chain.parts[0]) if owner is not None else []
        reported = [s for s in candidates if id(s) in self._reported]
        chosen = reported or candidates
        return chosen[0] if chosen else None

    def statements(self) -> list[cst.CSTNode]:
        found: list[cst.CSTNode] = [self._statements[key] for key in self._reported]
        return found + [s for s in self._uses.values() if s is not None]

    def import_statement(self, rule: Rule, site: object) -> cst.Import | cst.ImportFrom | cst.Assign | None:
        return self._statements.get(site[0]) if isinstance(site, tuple) and _is_import(rule, site) else None

    def use_statement(self, node: cst.CSTNode) -> cst.Import | cst.ImportFrom | cst.Assign | None:
        return self._uses.get(id(node))

    def first_name(self, node: cst.CSTNode) -> str:
        return self._chains[id(node)].parts[0]

    def locals(self, statement: cst.CSTNode) -> list[str]:
        return self._locals.get(id(statement), [])

    def try_aliases(self, statement: cst.CSTNode, found: FallbackTry) -> set[str] | None:
        """The locals the ``try`` body assigns the names ``statement`` binds to (``LN =
        apex.normalization.FusedLayerNorm``), or None where a name is used any other way
        (or nowhere): then the import does more than pick a class."""
        names = set(self.locals(statement))
        if not names:
            return None
        assigned = {id(small.value): small.targets[0].target.value
                    for small in small_statements(found.body)
                    if isinstance(small, cst.Assign) and len(small.targets) == 1
                    and isinstance(small.targets[0].target, cst.Name)}
        aliases: set[str] = set()
        used: set[str] = set()
        for chain in self._chains_of(statement, names):
            alias = assigned.get(id(chain.nodes[-1]))
            if alias is None:
                return None
            aliases.add(alias)
            used.add(chain.parts[0])
        return aliases if used == names else None

    def _chains_of(self, statement: cst.CSTNode, names: set[str]) -> Iterator[_Chain]:
        """The dotted uses of ``names`` that ``statement`` binds (another binding of the
        same name in another scope is not its use)."""
        for chain in self._collector.chains:
            name = chain.parts[0]
            if name in names and (owner := chain.scope.lookup(name)) is not None \
                    and statement in owner.binders(name):
                yield chain

    def probes_only(self, statement: cst.CSTNode) -> bool:
        """Is every name ``statement`` binds used, and only to probe it: its metadata
        (``vllm.__version__`` in an environment report), or as a type a value is tested
        against (``te is not None and isinstance(m, te.LayerNormMLP)``: no object of a
        type from a missing module exists), beside tests of the name's truth, or deleted
        (``del flash_attn_func``: imported only to see that the import works)? Then a
        failed import loses a line of a report or a branch nothing can reach, no feature."""
        names = set(self.locals(statement))
        if not names:
            return False
        collector = self._collector
        # `from flash_attn import flash_attn_func` then `del flash_attn_func`: imported to be dropped
        used = {site.local for site in collector.imported if site.statement is statement and site.local in names
                and (id(site.scope), site.local) in collector.deleted}
        for chain in self._chains_of(statement, names):
            if len(chain.parts) == 1 and collector.usage.get(id(chain.nodes[0])) == "truth":
                continue  # `if te is not None`: asks whether the import worked
            if not (len(chain.parts) >= 2 and (chain.parts[1] in _METADATA
                                               or id(chain.nodes[-1]) in collector.type_operands)):
                return False
            used.add(chain.parts[0])
        return used == names


class _Tries:
    """The falling-back ``try`` blocks, by position: what their handlers bind the names
    the imports in them bind."""

    def __init__(self, tries: Sequence[FallbackTry], offsets: Mapping[int, tuple[int, int]]) -> None:
        self._tries = sorted(((offsets[id(t.body)], t) for t in tries if id(t.body) in offsets),
                             key=lambda item: item[0][1] - item[0][0])
        self._offsets = offsets

    def innermost(self, statement: cst.CSTNode) -> FallbackTry | None:
        if id(statement) not in self._offsets:
            return None
        start, end = self._offsets[id(statement)]
        return next((t for (s, e), t in self._tries if s <= start and end <= e), None)

    def rebinds(self, statement: cst.CSTNode, name: str) -> bool:
        """Does the handler of the ``try`` around ``statement`` bind ``name`` too?"""
        found = self.innermost(statement)
        return found is not None and name in found.substitutes

    def substituted(self, statement: cst.CSTNode, names: Sequence[str], equivalents: Sequence[str],
                    bindings: _Bindings | None = None, any_equivalents: Sequence[str] = ()) -> bool:
        """Does the handler bind every name ``statement`` imports to one of ``equivalents``?
        With ``bindings``: or, where the name's only uses are assignments in the ``try`` to
        locals (``LN = apex.normalization.FusedLayerNorm``), does it bind each such local to
        one of ``any_equivalents`` (``except ImportError: LN = torch.nn.LayerNorm``)?"""
        found = self.innermost(statement)
        if found is None or not names:
            return False

        def bound_to_equivalent(name: str, wanted: Sequence[str]) -> bool:
            return any(s.full in wanted if s.full else
                       bool(s.parts) and bool(set(wanted).intersection(found.scope.qualified(s.parts)))
                       for s in found.substitutes.get(name, ()))

        if equivalents and all(bound_to_equivalent(name, equivalents) for name in names):
            return True
        aliases = bindings.try_aliases(statement, found) if bindings is not None and any_equivalents else None
        return bool(aliases) and all(bound_to_equivalent(a, any_equivalents) for a in aliases or ())


def _helper_mentions(module: cst.Module, collector: _Collector, regions: Sequence[Region]
                     ) -> list[tuple[cst.CSTNode, list[cst.Name]]]:
    """(body, mentions) of each private module-level function (``def _check_nvidia(...)``)
    the module mentions, when the module has vendor branches at all."""
    if not any(guard == VENDOR_BRANCH for _, guard in regions):
        return []
    helpers = {s.name.value: s for s in module.body
               if isinstance(s, cst.FunctionDef) and s.name.value.startswith("_")}
    if not helpers:
        return []
    mentions: dict[str, list[cst.Name]] = {}
    top = collector.module_scope
    for chain in collector.chains:
        name = chain.parts[0]
        if name in helpers and chain.scope.lookup(name) is top:
            mentions.setdefault(name, []).append(chain.nodes[0])  # type: ignore[arg-type]
    return [(helpers[name].body, found) for name, found in mentions.items()]


def _vendor_only_helpers(helpers: list[tuple[cst.CSTNode, list[cst.Name]]],
                         guarded: list[tuple[tuple[int, int], str]],
                         offsets: dict[int, tuple[int, int]]) -> list[tuple[tuple[int, int], str]]:
    """A private helper mentioned only inside vendor branches (``if "nvidia" in name:
    _check_nvidia_connectivity()``) runs only on that vendor: its body is a vendor branch
    too. One level: a helper reached only through another such helper is not followed."""
    branches = [span for span, guard in guarded if guard == VENDOR_BRANCH]
    found = []
    for body, mentions in helpers:
        spans = [offsets.get(id(m)) for m in mentions]
        if all(span is not None and any(s <= span[0] and span[1] <= e for s, e in branches) for span in spans):
            found.append((offsets[id(body)], VENDOR_BRANCH))
    return found


#: the local a star import binds, for :meth:`_Resolver.want_uses`
STAR = "*"
#: names every module has without binding them
_BUILTINS = frozenset(dir(builtins)) | {"__file__", "__name__", "__doc__", "__spec__", "__path__",
                                         "__package__", "__loader__", "__builtins__", "__annotations__"}


def _use_candidates(collector: _Collector
                    ) -> list[tuple[Rule, cst.CSTNode, cst.BaseExpression, dict[str, str]]]:
    """Attribute uses (``pynvml.nvmlInit``) of names bound by imports whose rule asks
    for them: (rule, import statement, use node, variables)."""
    if not collector.use_imports:
        return []
    wanted: dict[str, list[tuple[Rule, cst.CSTNode, Scope]]] = {}
    for rule, statement, local, scope in collector.use_imports:
        wanted.setdefault(local, []).append((rule, statement, scope))
    found = []
    star = wanted.get(STAR, []) if collector.star_imports == 1 else []
    for chain in collector.chains:
        if star and chain.parts[0] not in _BUILTINS and chain.scope.lookup(chain.parts[0]) is None:
            for rule, statement, _ in star:  # `nvmlInit()` after `from pynvml import *`
                module = statement.module if isinstance(statement, cst.ImportFrom) else None
                source = (cst.helpers.get_full_name_for_node(module) or "") if module is not None else ""
                found.append((rule, statement, chain.nodes[-1],
                              {"local": chain.parts[0], "module": ".".join([source, *chain.parts])}))
            continue
        if chain.parts[0] not in wanted or (len(chain.parts) > 1 and (chain.parts[1] in _METADATA
                                                                      or _CONSTANT.fullmatch(chain.parts[-1]))) \
                or id(chain.nodes[-1]) in collector.handled_types:
            # `trt.__version__` and `trt.DataType.HALF` work wherever the import did; `except NVMLError:` copes
            continue
        owner = chain.scope.lookup(chain.parts[0])
        for rule, statement, scope in wanted[chain.parts[0]]:
            # `pynvml.nvmlInit()`, and `nvmlInit()` after `from pynvml import nvmlInit`
            if owner is scope and (len(chain.parts) > 1 or isinstance(statement, cst.ImportFrom)):
                qualified = chain.scope.qualified(chain.parts)
                found.append((rule, statement, chain.nodes[-1],
                              {"local": chain.parts[0], "module": qualified[0] if qualified
                               else ".".join(chain.parts)}))
    return found


def _report_nodes(hits: Iterable[tuple[Rule, object, cst.BaseExpression, dict[str, str]]]
                  ) -> list[tuple[Rule, object, cst.BaseExpression, dict[str, str]]]:
    """One report per rule and site; imports: one per statement and rule, placed on
    the ``from`` module when the module itself falls under the rule."""
    reports: list[tuple[Rule, object, cst.BaseExpression, dict[str, str]]] = []
    seen: set[tuple[str, object]] = set()
    for rule, site, node, variables in hits:
        # an import site is (statement, imported name): report once per statement
        key = (rule.code, site[0] if isinstance(site, tuple) else site)
        if key in seen:
            continue
        seen.add(key)
        reports.append((rule, site, node, variables))
    return reports


def find_extensions(module: cst.Module) -> tuple[ExtensionDecl, ...]:
    """``CUDAExtension(name, sources=[...])``, ``CppExtension(...)`` and ``load(...)``
    calls, resolved through imports like every other call (see :class:`ModuleWalk`)."""
    return ModuleWalk(module, (), extensions=True).extensions
