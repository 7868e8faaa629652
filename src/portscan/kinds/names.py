"""The ``name`` kind: uses of a qualified name, optionally by how the value is used."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TYPE_CHECKING

from portscan.kinds.python_surface import PythonSurface, rules_by
from portscan.kinds.common import PYTHON, code_list, consumers_sentence, name_matches
from portscan.ruleset.prefilter import Token, qualified_sets, relative_import_anchor
from portscan.ruleset.table import TableReader
from portscan.parse import lazy_libcst

if TYPE_CHECKING:
    import libcst as cst
else:
    cst = lazy_libcst()

#: a carried value is followed through at most this many locals (``A = name; B = A``)
_HOPS = 3

USAGES = ("any", "truth", "operand", "tag", "other", "value")

USAGE_TEXT = {
    "truth": "only where its truth value is used (`if x`, `x is None`, `x == \"...\"`, `bool(x)`)",
    "operand": "only where it is operated on in a way that fails on `None` (`x.split()`, `x[0]`, "
               "`x >= \"11.8\"`, `int(x)`, `version.parse(x)`, `x + y`, iteration)",
    "tag": "only where an f-string writes it right after `cu` (a wheel tag or index URL: `f\"+cu{x}\"`)",
    "other": "only where it is passed, formatted, printed, assigned or returned",
    "value": "only where its value is used (operated on, passed, assigned, returned), not where it is only "
             "tested or compared (`dtype == x`, `dtype in (x, y)`)",
    "any": "",
}


@dataclass(frozen=True, slots=True)
class NamePattern:
    """A use of a qualified name, resolved through import aliases."""

    kind: ClassVar[str] = "name"
    surfaces: ClassVar[frozenset[str]] = PYTHON
    #: the sites of the Python walk it reads (see portscan.kinds.python_surface)
    python_sites: ClassVar[frozenset[str]] = frozenset({"chains"})
    variables: ClassVar[frozenset[str]] = frozenset({"matched", "name", "via"})
    names: tuple[str, ...]
    #: ``truth``: only its truth value is used (``if x``, ``x is None``, ``x == "12.1"``);
    #: ``operand``: operated on, which raises on None (``x.split()``, ``x[0]``, ``x >= "11"``,
    #: ``int(x)``, ``x + y``, iteration); ``other``: passed, formatted, assigned, returned;
    #: ``value``: anything but ``truth`` (an FP8 dtype only compared selects nothing).
    usage: str = "any"
    #: also the uses of the locals the value travels to within the module: ``V = name``,
    #: ``V = os.environ.get("X", name)``, ``D = {"k": name}`` (then ``D["k"]``), a
    #: parameter default ``def f(v=name)``, and ``W = V`` after those
    follow: bool = False
    #: the names are a library's own components: they match in the library's own tree too
    #: (its package, tests and benchmarks, or a vendored copy), where the package is first-party
    first_party: bool = False
    #: not an element of a list/tuple/set literal that also holds one of these names
    #: (``[SDPBackend.CUDNN_ATTENTION, SDPBackend.MATH]``: the others are used instead)
    unless_listed_with: tuple[str, ...] = ()
    #: the names that compute with the value (``torch._scaled_mm``, ``transformer_engine.*``):
    #: in a module that uses none of them the value is only stored or converted, and a use
    #: is ``info`` (guard ``no-consumer``)
    consumers: tuple[str, ...] = ()
    #: the names belong to a library that is CUDA-only as a whole (NVIDIA Warp): its uses
    #: through one import are one finding, at the first, the others listed in ``uses``
    per_import: bool = False

    @classmethod
    def read(cls, r: TableReader) -> NamePattern:
        return cls(names=r.dotted("names", wildcard=True), usage=r.choice("usage", USAGES, "any"),
                   follow=r.flag("follow"), first_party=r.flag("first_party"),
                   unless_listed_with=r.dotted("unless_listed_with", required=False, wildcard=True),
                   consumers=r.dotted("consumers", required=False, wildcard=True),
                   per_import=r.flag("per_import"))

    @property
    def extra_sites(self) -> frozenset[str]:
        """The sites only some patterns of the kind read (see ``python_sites``)."""
        return frozenset({"collection-members"}) if self.unless_listed_with else frozenset()

    def token_sets(self) -> tuple[frozenset[Token], ...]:
        if not self.first_party:
            return qualified_sets(self.names)
        # inside the library's own package the name may come through a relative import only
        parts = [name.removesuffix(".*").split(".") for name in self.names]
        return qualified_sets(self.names) + tuple(
            frozenset({p[-1], relative_import_anchor(p[-2:])}) for p in parts if len(p) > 1)

    def describe(self) -> str:
        """What it matches, in one or two sentences of Markdown (the rule page's "What it flags")."""
        usage = USAGE_TEXT[self.usage]
        follow = (", also through the locals it is assigned to within the module (`v = name`, "
                  "`os.environ.get(\"X\", name)`, a dict entry, a parameter default)") if self.follow else ""
        listed = (f" Not as an element of a list, tuple or set literal that also holds "
                  f"{code_list(self.unless_listed_with)}.") if self.unless_listed_with else ""
        own = (" They also match in the library's own source tree (where its package is the project's "
               "own).") if self.first_party else ""
        consumed = consumers_sentence(self.consumers)
        once = (" The uses through one import are one finding, at the first, the others listed with it."
                if self.per_import else "")
        return (f"Uses of {code_list(self.names)}, resolved through import aliases{follow}"
                + (f", {usage}." if usage else ".") + listed + own + consumed + once)

    def accepts_usage(self, usage: str) -> bool:
        """``usage`` is how a use treats the value: ``truth``, ``operand``, ``tag`` or ``other``."""
        if self.usage == "value":
            return usage != "truth"
        return self.usage in ("any", usage)

    # -- the Python surface (see portscan.kinds.python_surface) ---------------------------

    @classmethod
    def resolve_python(cls, rules: Sequence[tuple[Any, NamePattern]], surface: PythonSurface) -> None:
        """Each dotted name (and each of its prefixes) that resolves to a listed name."""
        exact = rules_by(rules, lambda p: (name for name in p.names if not name.endswith(".*")))
        wildcards = [(name, rule, p) for rule, p in rules for name in p.names if name.endswith(".*")]

        def named(qualified: str) -> Iterator[tuple[Any, NamePattern]]:
            yield from exact.get(qualified, ())
            for pattern, rule, p in wildcards:
                if name_matches(qualified, pattern):
                    yield rule, p

        followed: dict[int, tuple[cst.BaseExpression, str, list[tuple[Any, NamePattern]]]] = {}
        own_rules = any(p.first_party for _, p in rules)
        for chain in surface.chains:
            bases = chain.scope.qualified(chain.parts[:1])
            own = [b for b in chain.scope.qualified(chain.parts[:1], every_import=True) if b not in bases] \
                if own_rules else []
            for base in bases + own:
                done: set[str] = set()
                for j in range(len(chain.parts), 0, -1):
                    qualified = ".".join([base, *chain.parts[1:j]])
                    node = chain.nodes[j - 1]
                    usage = ("operand" if j < len(chain.parts)  # x.attr: attribute of the value
                             else surface.usage.get(id(node), "other"))
                    carries = j == len(chain.parts) and usage == "other"
                    for rule, p in named(qualified):
                        if base in own and not p.first_party:
                            continue
                        if carries and p.follow:
                            followed.setdefault(id(node), (node, qualified, []))[2].append((rule, p))
                        if rule.code in done or not p.accepts_usage(usage):
                            continue
                        if p.unless_listed_with and _listed_with(surface, node, chain.scope, p):
                            continue
                        done.add(rule.code)
                        surface.hit(rule, id(node), node, origin=_rebound_import(chain, base), name=qualified,
                                    via="")
        for node, qualified, carried in followed.values():
            _follow(surface, node, qualified, carried, 0, "")
        derived = [(rule, p) for rule, p in rules if p.follow and p.usage == "tag"]
        if derived:
            _derived_tags(surface, derived, {name for _, p in derived for name in p.names})


def _rebound_import(chain: Any, base: str) -> cst.CSTNode | None:
    """The one import statement that binds the chain's first name to ``base``, where the
    scope also binds that name otherwise (``if is_rocm(): CUDA_HOME = ROCM_HOME`` / ``else:
    from torch.utils.cpp_extension import CUDA_HOME``, then ``return CUDA_HOME``): the use
    holds the import's value only where the import ran, so the import's vendor branch is
    the use's too (reported as its origin)."""
    name = chain.parts[0]
    owner = chain.scope.lookup(name)
    if owner is None or len(owner.bindings.get(name, ())) < 2:
        return None
    found = [s for s in owner.imports.get(name, ()) if base in _bound_names(s, name)]
    return found[0] if len(found) == 1 else None


def _bound_names(statement: cst.CSTNode, name: str) -> set[str]:
    """What an absolute import statement binds ``name`` to (``from a import b as name``:
    ``a.b``; ``import a.b``: ``a``)."""
    if isinstance(statement, cst.ImportFrom):
        if statement.relative or statement.module is None or isinstance(statement.names, cst.ImportStar):
            return set()
        module = cst.helpers.get_full_name_for_node(statement.module) or ""
        return {f"{module}.{a.evaluated_name}" for a in statement.names
                if (a.evaluated_alias or a.evaluated_name) == name}
    if isinstance(statement, cst.Import):
        return {a.evaluated_name if a.asname is not None else a.evaluated_name.split(".")[0]
                for a in statement.names if (a.evaluated_alias or a.evaluated_name.split(".")[0]) == name}
    return set()


def _listed_with(surface: PythonSurface, node: cst.BaseExpression, scope: Any, p: NamePattern) -> bool:
    """Is ``node`` an element of a literal collection beside a use of one of
    ``p.unless_listed_with`` that the pattern itself does not name?"""
    for sibling in surface.collection_members.get(id(node), ()):
        parts = _dotted(sibling) if sibling is not node else None
        for qualified in scope.qualified(parts) if parts else ():
            if (any(name_matches(qualified, n) for n in p.unless_listed_with)
                    and not any(name_matches(qualified, n) for n in p.names)):
                return True
    return False


def _derived_tags(surface: PythonSurface, rules: list[tuple[Any, NamePattern]], names: set[str]) -> None:
    """A wheel tag written from a local whose value is worked out from one of ``names``
    (``cuda = parse(torch.version.cuda)``, ``tag = f"{cuda.major}{cuda.minor}"``, then
    ``f"+cu{tag}"``): still a CUDA tag on ROCm, where the CUDA version is None."""
    for node, scope in surface.wheel_tags:
        if not isinstance(node, cst.Name):
            continue
        source = _derived_from(surface, node.value, scope, names, 0)
        if source is not None:
            qualified, how = source
            for rule, _ in rules:
                surface.hit_unless_checked(rule, id(node), node, node.value, name=qualified,
                                           via=f" (worked out from `{qualified}`: {how})")


def _derived_from(surface: PythonSurface, name: str, scope: Any, names: set[str],
                  depth: int) -> tuple[str, str] | None:
    """(the name, the assignment) when a local's value mentions one of ``names``, directly
    or through other locals, up to :data:`_HOPS` assignments away."""
    from portscan.leancst import children  # LibCST's classes: loaded when there is a tree

    if depth >= _HOPS:
        return None
    for value, owner in surface.assigned(name, scope):
        stack: list[cst.CSTNode] = [value]
        while stack:
            node = stack.pop()
            if isinstance(node, (cst.Name, cst.Attribute)):
                parts = _dotted(node)
                if parts is not None:
                    found = next((q for q in owner.qualified(parts) if q in names), None)
                    if found is not None:
                        return found, f"`{name} = {surface.snippet(value)}`"
                    if len(parts) == 1 or isinstance(node, cst.Attribute):
                        inner = _derived_from(surface, parts[0], owner, names, depth + 1)
                        if inner is not None:
                            return inner
                    continue
            stack.extend(children(node))
    return None


def _dotted(node: cst.BaseExpression) -> list[str] | None:
    parts: list[str] = []
    while isinstance(node, cst.Attribute):
        parts.append(node.attr.value)
        node = node.value
    if not isinstance(node, cst.Name):
        return None
    return [node.value, *reversed(parts)]


def _follow(surface: PythonSurface, value: cst.BaseExpression, qualified: str,
            rules: list[tuple[Any, NamePattern]], hops: int, via: str) -> None:
    """Report the uses of the locals that ``value`` (a use of ``qualified``, or a local
    carrying it) is stored in, by how each use treats it; a use that passes the value on
    whole (``W = V``) is followed again, up to :data:`_HOPS` locals."""
    if hops >= _HOPS:
        return
    for name, scope, key, holder in surface.holders(value):
        how = via or f"`{name} = {surface.snippet(holder)}`"
        if key is not None:
            uses = [(node, surface.usage.get(id(node), "other")) for node, k in surface.item_uses(name, scope)
                    if k == key]
        else:
            uses = [(chain.nodes[0], "operand" if len(chain.parts) > 1
                     else surface.usage.get(id(chain.nodes[0]), "other")) for chain in surface.uses(name, scope)]
        for node, usage in uses:
            if usage == "other":
                _follow(surface, node, qualified, rules, hops + 1, how)
            for rule, p in rules:
                if p.accepts_usage(usage):
                    surface.hit_unless_checked(rule, id(node), node, name, name=qualified,
                                               via=f" (it holds `{qualified}`: {how})")
