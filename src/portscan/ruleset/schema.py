"""The rule file's schema: :class:`Rule` and its parts, validated strictly from TOML.

A rule file is data. It is parsed with ``tomllib``; nothing in it is evaluated as
code (literals in ``[match]`` are TOML values, messages are ``string.Template``
strings with a closed set of variables). Any problem is a :class:`RuleFileError`
that names the file and the key.
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from packaging.specifiers import SpecifierSet

from portscan.config import Target, specifier
from portscan.model import Confidence, Severity
from portscan.kinds import Pattern, read_pattern
from portscan.ruleset.fixspec import TRANSFORM_NAMES, FixSpec, read_fix
from portscan.ruleset.table import IDENTIFIER, PatternError, TableReader

_CODE = re.compile(r"^[A-Z]{2,8}[0-9]{3}$")
_KEBAB = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
_URL = re.compile(r"^https://\S+$")
_EXCEPTION = re.compile(r"^[A-Z][A-Za-z0-9_]*$")
_FORMAT = re.compile(r"^[a-z][a-z0-9]*$")
_DISTRIBUTION_GLOB = re.compile(r"^[a-z0-9][a-z0-9._*-]*$")
_ARCH_GLOB = re.compile(r"^gfx[0-9a-f*?]+$")
MESSAGE_MAX = 160


class RuleFileError(ValueError):
    """A rule file cannot be used. ``str()`` reads ``path: key: problem``."""

    def __init__(self, path: str, key: str, problem: str) -> None:
        super().__init__(f"{path}: {key}: {problem}" if key else f"{path}: {problem}")
        self.path = path
        self.key = key
        self.problem = problem


@dataclass(frozen=True, slots=True)
class Example:
    """Embedded example code. In ``bad`` examples, a line holding only ``# expect``
    marks the next code line as one where the rule must report."""

    source: str
    name: str = ""
    path: str = "example.py"
    #: the project's own top-level modules, as a scan of the example's project sees them
    first_party: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class TargetOverride:
    """``[[targets]]``: on a matching target the rule reports at ``severity`` (None: not
    at all), for the stated reason."""

    arch: tuple[str, ...]  #: glob patterns such as ``gfx11*``; empty: any arch
    rocm: SpecifierSet | None  #: e.g. ``>=7.0``; None: any release
    severity: Severity | None
    why: str


@dataclass(frozen=True, slots=True)
class Escalation:
    """``[escalate]``: where the same scan also reports one of ``when`` (a project-level
    fact such as a requirement that pins a library below its first ROCm release), this
    rule's findings are reported at ``severity`` (guards still lower it from there)."""

    when: tuple[str, ...]  #: rule codes
    severity: Severity


@dataclass(frozen=True, slots=True)
class Rule:
    code: str
    name: str
    category: str
    severity: Severity
    confidence: Confidence
    message: str  #: ``string.Template``; variables come from the pattern kind
    rocm: str  #: what happens on ROCm
    rewrite: str  #: the suggested ROCm-safe rewrite
    references: tuple[str, ...]
    pattern: Pattern
    supersedes: tuple[str, ...]  #: codes this more specific rule replaces at the same place
    bad: tuple[Example, ...]
    good: tuple[Example, ...]
    origin: str  #: the file it was loaded from
    fix: FixSpec | None = None  #: ``None``: the rewrite is a suggestion only
    targets: tuple[TargetOverride, ...] = ()
    digest: str = ""  #: hash of the rule file's bytes (cache keys)
    #: qualified names that do the same job without CUDA (import rules only): a ``try``
    #: whose handler binds the imported name to one of them loses nothing on ROCm, so the
    #: import is ``info`` (guard ``fallback-equivalent``), see docs/rule-format.md#guards
    equivalents: tuple[str, ...] = ()
    escalate: Escalation | None = None
    #: the exceptions a matched use raises on ROCm (``AttributeError`` for
    #: ``torch.version.cuda.split()``): a ``try`` whose handler catches one of them (or
    #: ``Exception``, or a bare ``except``) without re-raising copes with ROCm, so the
    #: finding is ``info`` (guard ``handled``), see docs/rule-format.md#guards
    raises: tuple[str, ...] = ()
    #: import rules only: the severity of an import a ``try`` handler falls back from
    #: (guard ``fallback``) where one step below the rule's own says too much: a library
    #: built only for the newest NVIDIA architectures (FlashAttention-3 for Hopper) is
    #: absent on most NVIDIA GPUs as well, so a project that guards it already runs
    #: without it everywhere else, AMD's GPUs included
    guarded_severity: Severity | None = None
    #: Python rules only: the data formats that define the matched value themselves,
    #: lower-case and without underscores (``nvfp4``: its block scales are OCP E4M3 by
    #: definition): in a def or class named for one, or a branch whose test names one, a
    #: match is ``info`` (guard ``format-defined``), see docs/rule-format.md#guards
    formats: tuple[str, ...] = ()
    #: distributions that are ROCm builds of the library the rule is about, as lower-case
    #: globs (``cupy-rocm-*``): where the project's own manifests list one, the library
    #: works on ROCm there and the rule's findings are ``info`` (guard ``rocm-build``)
    rocm_builds: tuple[str, ...] = ()

    def severity_for(self, target: Target | None) -> Severity | None:
        """The severity on ``target`` (None: the rule does not apply there)."""
        if target is not None and target.is_set:
            for override in self.targets:
                if target.matches(override.arch, override.rocm):
                    return override.severity
        return self.severity

    def render_message(self, variables: Mapping[str, str]) -> str:
        return string.Template(self.message).safe_substitute(variables)



def _template_variables(template: str) -> set[str]:
    names = set()
    for match in string.Template.pattern.finditer(template):
        if match.group("invalid") is not None:
            raise ValueError(f"stray `$` at offset {match.start()} (write `$$` for a dollar)")
        name = match.group("named") or match.group("braced")
        if name:
            names.add(name)
    return names


def prose(text: str) -> str:
    """Rule prose is hard-wrapped in TOML: join each paragraph into one line."""
    paragraphs = re.split(r"\n\s*\n", text.strip())
    return "\n\n".join(" ".join(p.split()) for p in paragraphs if p.strip())


def _read_examples(data: Any, key: str) -> tuple[Example, ...]:
    if not isinstance(data, list) or not data:
        raise PatternError(key, "expected at least one [[" + key + "]] example")
    examples = []
    for i, table in enumerate(data):
        r = TableReader(table, f"{key}[{i}]")
        examples.append(Example(source=r.text("source"), name=r.text("name", required=False),
                                path=r.text("path", required=False, default="example.py"),
                                first_party=r.texts("first_party", required=False, check=IDENTIFIER,
                                                    what="module name")))
        r.finish()
    return tuple(examples)


#: fix kind -> the match kinds it can work from
_FIX_NEEDS = {"replace": ("name",), "guard-import": ("import",)}
#: text rewrite -> the match kinds whose matched text it can read
_TEXT_NEEDS = {"rocm-pin": ("requirement",), "rocm-index": ("index",), "rocm-arch": ("env",),
               "rocm-devices": ("command",),
               "rocm-compose-devices": ("yaml",), "amd-smi": ("subprocess",),
               "rocm-image": ("image",), "rocm-conda": ("requirement",),
               "rocm-cupy": ("requirement",), "rocm-amdsmi": ("requirement",)}


def _read_fix(data: Any, pattern: Pattern) -> FixSpec | None:
    if data is None:
        return None
    names = tuple(getattr(pattern, "names", ()))
    fix = read_fix(data, names)
    if fix.kind == "text":
        if not set(pattern.surfaces) - {"python"}:
            raise PatternError("fix.kind", f"a text fix rewrites files that are not Python; a {pattern.kind} "
                                           "rule reads Python only")
        rewrites = _TEXT_NEEDS[fix.transform]
        if pattern.kind not in rewrites:
            raise PatternError("fix.rewrite", f"{fix.transform} rewrites what a {' or '.join(rewrites)} rule "
                                              f"matches, not a {pattern.kind} rule's")
        return fix
    if "python" not in pattern.surfaces:
        raise PatternError("fix", f"fixes of kind {fix.kind} rewrite Python; a {pattern.kind} rule has none")
    needs = _FIX_NEEDS.get(fix.kind)
    if needs is not None and pattern.kind not in needs:
        raise PatternError("fix.kind", f"a {fix.kind} fix needs a {' or '.join(needs)} rule, "
                                       f"not {pattern.kind}")
    if fix.kind == "transform" and fix.transform not in TRANSFORM_NAMES:
        raise PatternError("fix.transform", f"no transform named {fix.transform!r}; "
                                            f"known: {', '.join(sorted(TRANSFORM_NAMES))}")
    return fix


def _read_targets(data: Any) -> tuple[TargetOverride, ...]:
    if data is None:
        return ()
    if not isinstance(data, list) or not data:
        raise PatternError("targets", "expected one or more [[targets]] tables")
    overrides = []
    for i, table in enumerate(data):
        r = TableReader(table, f"targets[{i}]")
        arch = r.texts("arch", required=False, check=_ARCH_GLOB, what="gfx target pattern")
        rocm_text = r.text("rocm", required=False)
        try:
            rocm = specifier(rocm_text) if rocm_text else None
        except ValueError as exc:
            raise PatternError(r.key("rocm"), f"not a version condition: {exc}") from None
        if not arch and rocm is None:
            raise PatternError(r.key("arch"), "give arch and/or rocm")
        severity = r.choice("severity", (*(s.value for s in Severity), "off"))
        overrides.append(TargetOverride(arch, rocm, None if severity == "off" else Severity(severity),
                                        prose(r.text("why"))))
        r.finish()
    return tuple(overrides)


def _read_escalation(data: Any, severity: Severity) -> Escalation | None:
    if data is None:
        return None
    if not isinstance(data, dict):
        raise PatternError("escalate", "expected a table with `when` and `severity`")
    r = TableReader(data, "escalate")
    when = r.texts("when", check=_CODE, what="rule code")
    raised = Severity(r.choice("severity", tuple(s.value for s in Severity)))
    if raised.rank <= severity.rank:
        raise PatternError(r.key("severity"), f"must be above the rule's severity ({severity.value})")
    r.finish()
    return Escalation(when, raised)


def parse_rule(data: Mapping[str, Any], origin: str) -> Rule:
    """Validate one decoded rule file. Raises :class:`RuleFileError`."""
    try:
        r = TableReader(dict(data), "")
        code = r.text("code")
        if not _CODE.match(code):
            raise PatternError("code", f"{code!r} is not a code like PS101")
        name = r.text("name")
        category = r.text("category")
        for key, value in (("name", name), ("category", category)):
            if not _KEBAB.match(value):
                raise PatternError(key, f"{value!r} is not kebab-case")
        severity = Severity(r.choice("severity", tuple(s.value for s in Severity)))
        confidence = Confidence(r.choice("confidence", tuple(c.value for c in Confidence)))
        message = r.text("message")
        if "\n" in message.strip() or len(message) > MESSAGE_MAX:
            raise PatternError("message", f"must be one line of at most {MESSAGE_MAX} characters")
        references = r.texts("references", check=_URL, what="https URL")
        supersedes = r.texts("supersedes", required=False, check=_CODE, what="rule code")
        pattern = read_pattern(r.raw("match", True))
        equivalents = r.dotted("equivalents", required=False)
        if equivalents and pattern.kind != "import":
            raise PatternError("equivalents", f"only import rules take equivalents, not {pattern.kind} rules")
        try:
            unknown = _template_variables(message) - pattern.variables
        except ValueError as exc:
            raise PatternError("message", str(exc)) from None
        if unknown:
            raise PatternError("message", f"unknown variable ${{{sorted(unknown)[0]}}}; "
                               f"{pattern.kind} rules offer {', '.join(sorted(pattern.variables))}")
        guarded = r.raw("guarded_severity", False)
        if guarded is not None:
            if pattern.kind != "import":
                raise PatternError("guarded_severity", f"only import rules take it, not {pattern.kind} rules")
            if guarded not in ("info", "warning") or Severity(guarded).rank >= severity.rank:
                raise PatternError("guarded_severity",
                                   f"expected a severity below {severity.value!r}, got {guarded!r}")
        formats = r.texts("formats", required=False, check=_FORMAT, what="format name such as nvfp4")
        if formats and "python" not in pattern.surfaces:
            raise PatternError("formats", f"only Python rules take formats, not {pattern.kind} rules")
        rocm_builds = r.texts("rocm_builds", required=False, check=_DISTRIBUTION_GLOB,
                              what="lower-case distribution name or glob")
        fix = _read_fix(r.raw("fix", False), pattern)
        targets = _read_targets(r.raw("targets", False))
        rule = Rule(
            code=code, name=name, category=category, severity=severity, confidence=confidence,
            message=message.strip(), rocm=prose(r.text("rocm")),
            rewrite=prose(r.text("rewrite")), references=references, pattern=pattern,
            supersedes=supersedes, bad=_read_examples(r.raw("bad", True), "bad"),
            good=_read_examples(r.raw("good", True), "good"), origin=origin, fix=fix,
            targets=targets, equivalents=equivalents,
            raises=r.texts("raises", required=False, check=_EXCEPTION, what="exception class name"),
            escalate=_read_escalation(r.raw("escalate", False), severity),
            guarded_severity=Severity(guarded) if guarded is not None else None, formats=formats,
            rocm_builds=rocm_builds,
        )
        r.finish()
        return rule
    except PatternError as exc:
        raise RuleFileError(origin, exc.key, exc.problem) from None
