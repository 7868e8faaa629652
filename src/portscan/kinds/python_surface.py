"""What the Python surface hands to the kinds that read Python files.

One walk of a module records its sites (imported names, dotted names, calls,
comparisons, stores, strings) with the scope each is in, for the site kinds the file's
match kinds name in ``python_sites`` (and its patterns in ``extra_sites``, where only
some patterns of a kind read a site); the surface also resolves (what a dotted name
stands for through the module's imports and scopes, a call's arguments, the values a
local name was assigned, the strings a list can hold). A Python kind's
``resolve_python(rules, surface)`` reads the sites and reports each match with
``surface.hit``; ``portscan.match.python`` implements the surface, so a kind that
reads the sites below needs no edit there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence, Set
from typing import Any, Protocol, TYPE_CHECKING, TypeVar

from portscan.kinds.sites import ArgumentSite
from portscan.parse import lazy_libcst

if TYPE_CHECKING:
    import libcst as cst
else:
    cst = lazy_libcst()

P = TypeVar("P")

#: the sites a kind may name in ``python_sites``; the walk records only those named
SITES = frozenset({"imports", "chains", "calls", "compares", "stores", "named-stores", "item-stores", "strings",
                   "string-siblings", "dict-items", "item-loads", "conjunctions", "disjunctions",
                   "collection-members"})


class PythonSurface(Protocol):
    """The sites of one module and the resolution over them (see the module doc).
    Scopes are opaque to kinds: they pass them back to the surface, or ask them
    ``qualified(parts)`` (what a dotted chain stands for) and ``lookup(name)``."""

    @property
    def module(self) -> cst.Module: ...

    @property
    def imports(self) -> Sequence[Any]:
        """Absolute imports of other projects' modules: ``ImportedName`` records."""

    @property
    def chains(self) -> Sequence[Any]:
        """Dotted names as written: ``nodes`` (one per prefix), ``parts``, ``scope``."""

    @property
    def usage(self) -> Mapping[int, str]:
        """id(name node) -> ``truth``/``operand``/``tag`` (the value of an f-string placeholder
        right after ``cu``: a wheel tag) where its use is known (else ``other``)."""

    @property
    def calls(self) -> Sequence[tuple[cst.Call, Any]]: ...

    @property
    def compares(self) -> Sequence[tuple[cst.Comparison, Any]]: ...

    @property
    def stores(self) -> Sequence[tuple[Any, cst.BaseExpression]]:
        """(chain, value) of ``a.b.c = value``."""

    @property
    def named_stores(self) -> Sequence[tuple[cst.BaseExpression, str, cst.BaseExpression]]:
        """(target, name, value) of ``NAME = value`` / ``x.NAME = value`` for the names the
        kinds ask for (``store_names``)."""

    @property
    def item_stores(self) -> Sequence[tuple[Any, cst.BaseExpression, cst.BaseExpression]]:
        """(container chain, key, value) of ``c[key] = value`` (also ``+=``, ``.append``)."""

    @property
    def item_loads(self) -> Sequence[tuple[Any, cst.BaseExpression, cst.BaseExpression]]:
        """(container chain, key, the subscript) of ``c[key]`` reads."""

    @property
    def strings(self) -> Sequence[cst.BaseExpression]: ...

    @property
    def wheel_tags(self) -> Sequence[tuple[cst.BaseExpression, Any]]:
        """(expression, scope) of each f-string placeholder right after ``cu`` (``f"+cu{v}"``)."""

    @property
    def lookup_keys(self) -> Set[int]:
        """ids of strings used as keys to look something up (``d["k"]``, ``d.get("k")``)."""

    @property
    def string_siblings(self) -> Mapping[int, frozenset[str]]:
        """id(string) -> the string values of the list/tuple/set literal holding it (with the
        ``string-siblings`` site)."""

    @property
    def collection_members(self) -> Mapping[int, tuple[cst.BaseExpression, ...]]:
        """id(element of a list/tuple/set literal) -> the literal's elements (with the
        ``collection-members`` site)."""

    @property
    def conjunctions(self) -> Sequence[tuple[cst.BaseExpression, ...]]:
        """The operands of each outermost ``a and b and c`` chain (with the ``conjunctions``
        site)."""

    @property
    def disjunctions(self) -> Sequence[tuple[cst.BaseExpression, ...]]:
        """The operands of each outermost ``a or b or c`` chain, also one that is an operand
        of an ``and`` (with the ``disjunctions`` site)."""

    def hit(self, rule: Any, site: object, node: cst.BaseExpression, subject: object = None,
            origin: cst.CSTNode | None = None, **variables: str) -> None:
        """Report ``rule`` at ``node``; one report per rule and ``site``. Reports of one
        rule with the same ``subject`` (hashable) become one finding with its uses. An
        ``origin`` (where the reported value is written, when that is not ``node``: a
        helper's list reported at its call) lends ``node`` the guard it sits under."""

    def want_uses(self, rule: Any, statement: cst.CSTNode, local: str, scope: Any) -> None:
        """Report the attribute uses of the name an import binds (``uses = true``)."""

    def hit_unless_checked(self, rule: Any, site: object, node: cst.BaseExpression, local: str,
                           **variables: str) -> None:
        """Report like ``hit``, unless ``node`` runs under a condition that mentions the
        local name ``local`` (``if v is not None:``, ``v and v.split(".")``)."""

    # -- values that travel within the module (flow-insensitive, no calls followed) --

    def assigned(self, name: str, scope: Any) -> list[tuple[cst.BaseExpression, Any]]:
        """The whole values a local name was given (assignments, a parameter's default),
        each with the scope that binds it; nothing for a name an import binds."""

    def assignments(self, value: cst.BaseExpression) -> list[tuple[str, Any]]:
        """The local names ``value`` was assigned to whole (``X = value``, ``def f(x=value)``)."""

    def holders(self, value: cst.BaseExpression) -> list[tuple[str, Any, str | None, cst.BaseExpression]]:
        """The locals holding ``value``: (name, scope, dict key or None, the whole value
        assigned) for ``X = value``, ``X = os.environ.get("K", value)``, ``X = {"k": value}``
        and a parameter default."""

    def uses(self, name: str, scope: Any) -> list[Any]:
        """The dotted chains (``nodes``, ``parts``, ``scope``) starting with ``name`` that
        see ``scope``'s binding of it."""

    def item_uses(self, name: str, scope: Any) -> list[tuple[cst.Subscript, str]]:
        """``name["key"]`` loads seeing ``scope``'s binding: (subscript node, key)."""

    def is_module(self, scope: Any) -> bool:
        """Is ``scope`` the module's own (whose names other modules may import)?"""

    def in_message(self, node: cst.CSTNode) -> bool:
        """Is this comparison or name inside a message: a print/log/warn argument or an
        f-string placeholder?"""

    def parameter(self, name: str, scope: Any) -> tuple[cst.FunctionDef | cst.Lambda, int | None] | None:
        """(the def, positional index or None) when ``name`` is a parameter there."""

    def calls_of(self, function: cst.FunctionDef | cst.Lambda) -> list[tuple[cst.Call, Any]]:
        """Calls of a def by its plain name from where its binding is seen (same module)."""

    def callee_names(self, call: cst.Call, scope: Any, every_import: bool = False) -> list[str]: ...

    def argument(self, call: cst.Call, position: int | None, keyword: str | None) -> cst.BaseExpression | None: ...

    def argument_site(self, call: cst.Call, position: int | None, keyword: str | None) -> ArgumentSite | None: ...

    def passes_kwargs(self, call: cst.Call) -> bool: ...

    def operator(self, target: cst.ComparisonTarget) -> str:
        """``<``, ``==``, ``in``, ``is not``, ... of one comparison step."""

    def operand_source(self, expr: cst.BaseExpression, scope: Any
                       ) -> tuple[list[str], tuple[str, object] | None] | None:
        """``f()``, ``f()[i]``, ``f().attr`` or a local bound to one: (callee names, accessor)."""

    def path_ends(self, expr: cst.BaseExpression, scope: Any) -> list[str]:
        """The texts the path an expression builds can end in: a string, the last part of
        ``os.path.join(...)``, ``Path(a) / b``, ``a + b``, or a local bound to one."""

    def is_text(self, expr: cst.BaseExpression, scope: Any) -> bool:
        """Is the value one text: a string, an f-string, ``a + "s"``, a path call that
        returns a string (``os.path.join(...)``, ``os.path.dirname(...)``, ``str(...)``), or
        a local every assignment of which is one of those?"""

    def commands(self, expr: cst.BaseExpression, scope: Any) -> Iterator[tuple[str, cst.BaseExpression]]:
        """Program words of a command value, each with the node to report it at."""

    def forwarded(self, picks: Callable[[cst.Call, Any], cst.BaseExpression | None]
                  ) -> Iterator[tuple[cst.Call, Any, cst.BaseExpression]]:
        """(call, scope, argument) of calls of the module's own defs whose parameter is
        handed on to the argument ``picks`` chooses in a call (a wrapper of ``subprocess.run``)."""

    def literal_values(self, expr: cst.BaseExpression, scope: Any) -> list[cst.BaseExpression]:
        """The literal nodes a value may come from (locals, ternaries, loop variables)."""

    def setup_requirements(self) -> Iterator[tuple[cst.BaseExpression, str, str]]:
        """(node, requirement text, section) of the strings ``setup(...)`` declares."""

    def installer_requirements(self) -> Iterator[tuple[cst.BaseExpression, str, str]]:
        """(node, requirement text, ``"install"``) of what a project's installer helper is given
        at run time (``check_requirements(...)``, see ``portscan.kinds.requirement.INSTALLER_CALLS``)."""

    def requirement_rules(self, text: str, rules: Sequence[Any], section: str,
                          indexed: bool = False) -> tuple[str, list[Any]]:
        """(package, the rules a requirement text meets); ("", []) if it is none."""

    def pip_installs(self, expr: cst.BaseExpression, scope: Any
                     ) -> Iterator[tuple[str, bool, cst.BaseExpression]]:
        """(requirement, whether an index is named, node) of each ``pip install`` in a
        command value (a shell string, an argv list, ``shlex.split``, a name bound to one)."""

    def keyword_strings(self, keywords: frozenset[str]) -> frozenset[int]:
        """ids of the string literals that reach one of these keyword arguments of any call,
        themselves or in a list a local holds (``links.append(url)`` then
        ``setup(dependency_links=links)``)."""

    def build_values(self, arguments: frozenset[str]
                     ) -> Iterator[tuple[str, cst.BaseExpression, cst.BaseExpression]]:
        """(argument, string, node to report it at) of the ``nvcc``/``cxx``/``libraries``/
        ``extra_link_args`` flags the module gives an extension build, wherever written."""

    def literal(self, node: cst.BaseExpression) -> object:
        """The value of a literal expression, or the surface's MISSING marker."""

    def text(self, node: cst.BaseExpression) -> str | None:
        """The text of a string literal (no f-string parts), or None."""

    def snippet(self, node: cst.CSTNode) -> str:
        """The node's source, shortened for a message."""

    def program_name(self, word: str) -> str | None: ...

    def is_first_party(self, dotted_name: str) -> bool:
        """Does ``dotted_name`` name one of the scanned project's own modules?"""


def rules_by(rules: Sequence[tuple[Any, P]], keys: Callable[[P], Iterable[str]]) -> dict[str, list[tuple[Any, P]]]:
    """A kind's rules filed under each key their pattern lists (``p.names``,
    ``p.callees``, ...), for looking sites up by name."""
    filed: dict[str, list[tuple[Any, P]]] = {}
    for rule, p in rules:
        for key in keys(p):
            filed.setdefault(key, []).append((rule, p))
    return filed


#: str methods that keep what a text says (``get_device_name().lower()``)
_TEXT_CASE = frozenset({"lower", "upper", "casefold", "strip", "lstrip", "rstrip"})


def same_text(expr: cst.BaseExpression) -> cst.BaseExpression:
    """The text ``expr`` is with its case or padding changed (``name.strip().lower()`` is
    ``name``): one answer for where a compared value comes from and what it is about."""
    while (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute)
           and expr.func.attr.value in _TEXT_CASE and not expr.args):
        expr = expr.func.value
    return expr
