"""The ``[fix]`` table of a rule file: what a fix does and how safe it is.

A fix is data like the rest of the rule. Four kinds exist:

``replace``
    rewrite a use of a qualified name to another one, mapping the call's arguments
    (positional binding, renames, dropped and required arguments, arguments the
    source passed implicitly) and managing the imports;
``guard-import``
    wrap a module-level import in ``try``/``except ImportError`` so the module still
    imports where the package is missing;
``delete``
    remove the statement that holds the finding;
``transform``
    a named transform written in Python (:mod:`portscan.fix.transforms`), for
    rewrites that span statements;
``text``
    a named rewrite of the matched text itself (:mod:`portscan.match.textfix`), for
    files that are not Python: requirement pins and index URLs in manifests,
    container definitions, CI and shell scripts.

Literal values in a fix (``add``, ``require``, ``when``) are TOML values; they are
written into the code as literals, never evaluated.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any

from packaging.version import InvalidVersion, Version

from portscan.ruleset.table import DOTTED, IDENTIFIER, Literal, PatternError, TableReader, to_literal

#: the reason given for a fix that is there but unsafe, when unsafe fixes are off
NEEDS_UNSAFE = "unsafe fix: apply with --unsafe-fixes"
FIX_KINDS = ("replace", "guard-import", "delete", "transform", "text")
BARE = ("skip", "rename", "call")
_TRANSFORM_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
#: an LLVM AMDGPU target, as ``target.arch`` spells it
GFX_NAME = re.compile(r"^gfx[0-9a-f]{3,4}$")

if TYPE_CHECKING:
    from portscan.config import Target

#: the named transforms :mod:`portscan.fix.transforms` provides, declared here so that
#: loading rules checks names without importing the fixer (a test keeps the two equal)
TRANSFORM_NAMES = frozenset({"apex-amp", "cuda-version-none", "hip-nvcc-flags", "cuda-home-toolkit",
                             "nvidia-gate", "fp8-fnuz"})
#: the named text rewrites :mod:`portscan.match.textfix` provides (a test keeps the two equal)
TEXT_REWRITE_NAMES = frozenset({"rocm-pin", "rocm-index", "rocm-arch", "rocm-devices",
                                "rocm-compose-devices", "amd-smi", "rocm-image", "rocm-conda", "rocm-cupy",
                                "rocm-amdsmi"})


class Tier(str, Enum):
    """Fix applicability, as in Ruff."""

    SAFE = "safe"  #: behaviour identical on NVIDIA and on ROCm; ``portscan fix`` applies it
    UNSAFE = "unsafe"  #: may change behaviour or needs review; only with ``--unsafe-fixes``


@dataclass(frozen=True, slots=True)
class Case:
    """Pick another target when the call passes these literal arguments."""

    when: Mapping[str, Literal]
    to: str


@dataclass(frozen=True, slots=True)
class Replace:
    """Rewrite uses of ``names`` (all the rule's names when empty) to ``to``."""

    to: str
    names: tuple[str, ...] = ()
    #: the source callable's parameters in positional order; positional arguments are
    #: bound to these names. Empty: positional arguments are kept as written.
    parameters: tuple[str, ...] = ()
    #: target parameters written positionally, in this order; the rest as keywords
    positional: tuple[str, ...] = ()
    rename: Mapping[str, str] = field(default_factory=dict)
    drop: frozenset[str] = frozenset()  #: source arguments removed (their effect is lost)
    #: source arguments that must be absent or one of these literals, else no fix (an
    #: absent one is checked at its ``source_defaults`` value when it has one)
    require: Mapping[str, tuple[Literal, ...]] = field(default_factory=dict)
    #: the source callable's defaults that ``require`` needs to see when the call omits
    #: them (apex ``FusedSGD`` leaves ``set_grad_none=False``; torch sets grads to None)
    source_defaults: Mapping[str, Literal] = field(default_factory=dict)
    #: per source parameter, how the rewrite accounts for it and why (with a source):
    #: every parameter in ``parameters`` has one, so no option is dropped unexplained
    options: Mapping[str, str] = field(default_factory=dict)
    #: attributes and methods of the source's object that the target's lacks: a use of
    #: one anywhere in the module (``model.disable_allreduce()``) declines the rewrite
    source_only: tuple[str, ...] = ()
    #: target arguments written when the call does not pass them (source defaults that
    #: differ from the target's, a device type)
    add: Mapping[str, Literal] = field(default_factory=dict)
    cases: tuple[Case, ...] = ()
    #: a use that is not called: leave it (``skip``), ``rename`` it, or make it a ``call``
    bare: str = "skip"
    #: the oldest torch that has what this entry writes (``"2.3"``); a project that
    #: allows an older one keeps its code (see :mod:`portscan.match.floor`). Empty: any.
    torch: str = ""

    def target(self, arguments: Mapping[str, object]) -> str:
        for case in self.cases:
            if all(k in arguments and _same(arguments[k], v) for k, v in case.when.items()):
                return case.to
        return self.to


def _same(value: object, wanted: Literal) -> bool:
    return type(value) is type(wanted) and value == wanted


@dataclass(frozen=True, slots=True)
class FixExample:
    """``before`` must become ``after`` (unchanged when ``after`` is None)."""

    before: str
    after: str | None
    name: str = ""
    #: the file the example is read as (its name picks the file kind); Python when empty
    path: str = ""
    #: fixed with ``--unsafe-fixes``: a site whose fix is unsafe under a rule whose tier is
    #: safe (a transform that decides its tier per site); always so for an unsafe rule
    unsafe: bool = False


@dataclass(frozen=True, slots=True)
class FixSpec:
    tier: Tier
    why: str  #: why this tier
    kind: str
    replace: tuple[Replace, ...] = ()
    transform: str = ""  #: the named transform (``transform``) or text rewrite (``text``)
    examples: tuple[FixExample, ...] = ()
    #: the oldest torch that has what the fix writes, for every use (a transform's
    #: ``torch.amp.GradScaler``); entries may need more. Empty: any.
    torch: str = ""
    #: the target GPUs (gfx names) what the fix writes is right for; it applies only when
    #: ``target.arch`` is one of them (the OCP-to-fnuz FP8 dtypes: gfx942). Empty: any.
    arch: tuple[str, ...] = ()
    #: Python modules the project's code may import: while any of its Python files imports
    #: one, the fix waits for that code change (``nvidia-ml-py`` -> ``amdsmi`` while code
    #: imports ``pynvml``; see :func:`portscan.discover.project_imports`). Empty: no such wait.
    code_first: tuple[str, ...] = ()

    def code_first_declined(self, imported: Mapping[str, str]) -> str | None:
        """Why the fix waits, given the modules the project imports and where (None: it does not)."""
        waiting = [m for m in self.code_first if m in imported]
        if not waiting:
            return None
        return (f"the project's code imports {waiting[0]} ({imported[waiting[0]]}): port that code first, "
                "then this rewrite applies")

    def arch_declined(self, target: Target | None) -> str | None:
        """Why the fix does not apply for ``target`` (None: it does)."""
        if not self.arch or (target is not None and target.arch in self.arch):
            return None
        named = "no target.arch is set" if target is None or target.arch is None else \
            f"the target is {target.arch}"
        return (f"what this fix writes is right on {', '.join(self.arch)} only and {named}: set "
                "`[target] arch` in the config or pass --target-arch")

    def replacement_for(self, qualified: str) -> Replace | None:
        for entry in self.replace:
            if not entry.names or qualified in entry.names:
                return entry
        return None


def _dotted(r: TableReader, key: str) -> str:
    value = r.text(key)
    if not DOTTED.match(value):
        raise PatternError(r.key(key), f"{value!r} is not a dotted name")
    return value


def _identifiers(r: TableReader, key: str) -> tuple[str, ...]:
    values = r.texts(key, required=False, check=IDENTIFIER, what="parameter name")
    if len(set(values)) != len(values):
        raise PatternError(r.key(key), "names a parameter twice")
    return values


def _literal_table(r: TableReader, key: str) -> dict[str, Literal]:
    table = r.raw(key, False)
    if table is None:
        return {}
    if not isinstance(table, dict):
        raise PatternError(r.key(key), "expected a table of argument = literal")
    out = {}
    for name, value in table.items():
        if not IDENTIFIER.match(name):
            raise PatternError(r.key(f"{key}.{name}"), "not a parameter name")
        out[name] = to_literal(value, r.key(f"{key}.{name}"))
    return out


def _read_replace(data: Any, where: str) -> Replace:
    r = TableReader(data, where)
    to = _dotted(r, "to")
    names = r.dotted("names", required=False)
    parameters = _identifiers(r, "parameters")
    positional = _identifiers(r, "positional")
    rename_raw = r.raw("rename", False) or {}
    if not isinstance(rename_raw, dict) or not all(
            isinstance(v, str) and IDENTIFIER.match(v) and IDENTIFIER.match(k)
            for k, v in rename_raw.items()):
        raise PatternError(r.key("rename"), "expected a table of old_name = \"new_name\"")
    drop = frozenset(_identifiers(r, "drop"))
    require_raw = _literal_table(r, "require")
    require = {k: v if isinstance(v, tuple) else (v,) for k, v in require_raw.items()}
    add = _literal_table(r, "add")
    cases = []
    for i, table in enumerate(r.raw("cases", False) or []):
        cr = TableReader(table, r.key(f"cases[{i}]"))
        case = Case(when=_literal_table(cr, "when"), to=_dotted(cr, "to"))
        if not case.when:
            raise PatternError(cr.key("when"), "a case needs at least one argument")
        cr.finish()
        cases.append(case)
    bare = r.choice("bare", BARE, "skip")
    source_defaults = _literal_table(r, "source_defaults")
    options = _options(r)
    source_only = _identifiers(r, "source_only")
    torch = _torch_version(r)
    r.finish()
    for name in (*rename_raw, *drop, *require, *source_defaults, *options):
        if parameters and name not in parameters:
            raise PatternError(r.key("parameters"), f"does not list {name!r}")
    unexplained = [name for name in parameters if name not in options]
    if unexplained:
        raise PatternError(r.key("options"), f"says nothing of {unexplained[0]!r}: every parameter "
                                             "needs a line on how the rewrite maps it")
    return Replace(to=to, names=names, parameters=parameters, positional=positional,
                   rename=dict(rename_raw), drop=drop, require=require, add=add,
                   cases=tuple(cases), bare=bare, source_defaults=source_defaults,
                   options=options, source_only=source_only, torch=torch)


def _options(r: TableReader) -> dict[str, str]:
    table = r.raw("options", False) or {}
    if not isinstance(table, dict) or not all(isinstance(k, str) and IDENTIFIER.match(k) and isinstance(v, str)
                                              and v.strip() for k, v in table.items()):
        raise PatternError(r.key("options"), "expected a table of parameter = \"how it is mapped, and why\"")
    return {k: " ".join(v.split()) for k, v in table.items()}


def _torch_version(r: TableReader) -> str:
    """``torch = "2.3"``: a release number, checked here so a typo is a rule-file error."""
    value = r.text("torch", required=False)
    try:
        version = Version(value) if value else None
    except InvalidVersion:
        version = None
    if value and (version is None or version.local is not None or version.is_prerelease):
        raise PatternError(r.key("torch"), f"{value!r} is not a torch release number such as \"2.3\"")
    return value


def _read_examples(data: Any, key: str) -> tuple[FixExample, ...]:
    if not isinstance(data, list) or not data:
        raise PatternError(key, "a fix needs at least one [[fix.example]] with before and after")
    examples = []
    for i, table in enumerate(data):
        r = TableReader(table, f"{key}[{i}]")
        after = r.raw("after", False)
        if after is not None and not isinstance(after, str):
            raise PatternError(r.key("after"), "expected a string")
        examples.append(FixExample(before=r.text("before"), after=after,
                                   name=r.text("name", required=False), path=r.text("path", required=False),
                                   unsafe=r.flag("unsafe")))
        r.finish()
    if all(e.after is None for e in examples):
        raise PatternError(key, "at least one example must show a change (give `after`)")
    return tuple(examples)


def read_fix(data: Any, rule_names: tuple[str, ...]) -> FixSpec:
    """Parse a ``[fix]`` table. ``rule_names`` are the rule's qualified names, which
    ``replace.names`` must come from."""
    r = TableReader(data, "fix")
    tier = Tier(r.choice("tier", tuple(t.value for t in Tier)))
    why = r.text("why")
    kind = r.choice("kind", FIX_KINDS)
    replace: tuple[Replace, ...] = ()
    transform = ""
    if kind == "replace":
        entries = r.raw("replace", True)
        if not isinstance(entries, list) or not entries:
            raise PatternError("fix.replace", "expected at least one [[fix.replace]] table")
        replace = tuple(_read_replace(e, f"fix.replace[{i}]") for i, e in enumerate(entries))
        for i, entry in enumerate(replace):
            stray = [n for n in entry.names if n not in rule_names]
            if stray:
                raise PatternError(f"fix.replace[{i}].names", f"{stray[0]!r} is not in match.names")
    elif kind == "transform":
        transform = r.text("transform")
        if not _TRANSFORM_NAME.match(transform):
            raise PatternError("fix.transform", f"{transform!r} is not a kebab-case transform name")
    elif kind == "text":
        transform = r.choice("rewrite", tuple(sorted(TEXT_REWRITE_NAMES)))
    torch = _torch_version(r)
    arch = r.texts("arch", required=False, check=GFX_NAME, what="gfx architecture name")
    code_first = r.texts("code-first", required=False, check=DOTTED, what="module name")
    examples = _read_examples(r.raw("example", True), "fix.example")
    if kind == "text" and not all(e.path and not e.path.endswith(".py") for e in examples):
        raise PatternError("fix.example", "a text fix rewrites files that are not Python: give each "
                                          "example the `path` of one (requirements.txt, Dockerfile, ...)")
    r.finish()
    return FixSpec(tier=tier, why=" ".join(why.split()), kind=kind, replace=replace,
                   transform=transform, examples=examples, torch=torch, arch=arch, code_first=code_first)
