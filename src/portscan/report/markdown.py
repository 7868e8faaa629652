"""``--format markdown``: a migration report a team lead can act on.

It opens with a readiness verdict, lists the blockers (errors) first, then every
category with counts and a rough effort, says what is auto-fixable, and ends with
the files that could not be scanned.
"""

from __future__ import annotations

from collections import Counter
from itertools import groupby
from pathlib import Path, PurePosixPath

from portscan.filekinds import file_kind, kind_label
from portscan.kinds.rocm_wheels import rocm_wheels
from portscan.report import clean, fix_counts, guard_note, uses_note
from portscan.model import Finding, ScanResult, Severity

#: file kinds that pip or conda read to install the project
MANIFEST_KINDS = frozenset({"requirements", "pyproject", "setupcfg", "conda"})

#: Engineer-hours per (rule, file) pair, by severity: the effort heuristic, stated in
#: the report. An error usually means replacing a dependency or a code path; a
#: warning means checking behaviour or swapping an API; info needs no change.
EFFORT_HOURS = {Severity.ERROR: 2.0, Severity.WARNING: 0.5, Severity.INFO: 0.0}
SIZES = ((2.0, "S"), (8.0, "M"), (24.0, "L"))


def _cell(text: str) -> str:
    return clean(text.replace("|", "\\|").replace("\n", " "))


def _where(finding: Finding) -> str:
    return f"`{clean(finding.path)}:{finding.span.line}`"


def effort_hours(findings: list[Finding]) -> float:
    """Hours for a group of findings: each (rule, file) pair counts once, at its severity."""
    pairs = {(f.rule, f.path): f.severity for f in findings}
    return sum(EFFORT_HOURS[severity] for severity in pairs.values())


def size(hours: float) -> str:
    if hours == 0:
        return "-"
    return next((label for limit, label in SIZES if hours <= limit), "XL")


def verdict(result: ScanResult) -> str:
    counts = Counter(f.severity for f in result.findings)
    if counts[Severity.ERROR]:
        return (f"**Not ready: {counts[Severity.ERROR]} blocker(s).** These fail on ROCm and must "
                "be changed before the code can run on AMD GPUs.")
    if counts[Severity.WARNING]:
        return (f"**Runs with changes: no blockers, {counts[Severity.WARNING]} warning(s).** The code "
                "should run on ROCm, but behaves differently, runs slower, or needs other packages.")
    return "**Ready:** nothing found that fails or behaves differently on ROCm."


def render_markdown(result: ScanResult) -> str:
    findings = list(result.findings)
    counts = Counter(f.severity for f in findings)
    name = Path(result.root).name or result.root
    out = [
        f"# ROCm migration report: {name}",
        "",
        verdict(result),
        "",
        f"Scanned {result.files_scanned} files: {len(findings)} findings "
        f"({counts[Severity.ERROR]} error, {counts[Severity.WARNING]} warning, "
        f"{counts[Severity.INFO]} info) in {len({f.path for f in findings})} files"
        + (f"; {len(result.errors)} files could not be scanned." if result.errors else "."),
        "",
    ]
    blockers = [f for f in findings if f.severity is Severity.ERROR]
    out += ["## Blockers", ""]
    if blockers:
        out += ["| where | rule | problem | rewrite |", "|---|---|---|---|"]
        out += [f"| {_where(f)} | {f.rule} {f.name} | {_cell(f.message)} | {_cell(f.rewrite)} |"
                for f in blockers]
    else:
        out.append("None.")
    out += ["", "## By category", "",
            "| category | error | warning | info | effort |", "|---|---|---|---|---|"]
    by_category = {c: list(g) for c, g in groupby(sorted(findings, key=lambda f: f.category),
                                                  key=lambda f: f.category)}
    total = 0.0
    for category, group in by_category.items():
        c = Counter(f.severity for f in group)
        hours = effort_hours(group)
        total += hours
        out.append(f"| {category} | {c[Severity.ERROR]} | {c[Severity.WARNING]} | {c[Severity.INFO]} "
                   f"| {size(hours)} (~{hours:g} h) |")
    out += ["", f"Estimated total: ~{total:g} engineer-hours. Heuristic: each rule counts once per "
            f"file, {EFFORT_HOURS[Severity.ERROR]:g} h for an error, "
            f"{EFFORT_HOURS[Severity.WARNING]:g} h for a warning, nothing for info; sizes S <= 2 h, "
            "M <= 8 h, L <= 24 h, XL above. Treat it as an order of magnitude.", ""]
    for category, group in by_category.items():
        out += [f"### {category}", ""]
        for f in sorted(group, key=lambda f: (-f.severity.rank, f.path, f.span.line)):
            notes = guard_note(f) + uses_note(f)
            out.append(f"- **{f.severity.value}** {_where(f)} {f.rule}: {_cell(f.message)}{notes}")
        out.append("")
    if result.extensions:
        out += ["## CUDA extensions", "",
                "| extension | declared at | sources | kernel findings |", "|---|---|---|---|"]
        out += [f"| {_cell(e.name)} | `{e.path}:{e.line}` | "
                f"{', '.join(f'`{s}`' for s in (*e.sources, *e.headers)) or '-'} | {e.findings} |"
                for e in result.extensions]
        out.append("")
    out += install_recipe(findings)
    safe, unsafe = fix_counts(findings)
    out += ["## Auto-fixable", "",
            f"{safe + unsafe} of {len(findings)} findings have an automatic fix: {safe} safe "
            f"(`portscan fix`), {unsafe} that change behaviour and need review "
            "(`portscan fix --unsafe-fixes`). A fix leaves shapes of code it does not handle to you; "
            "every finding above carries a suggested rewrite.", ""]
    out += fixable_by_kind(findings)
    if result.notes:
        out += ["## Notes", ""] + [f"- {_cell(note)}" for note in result.notes] + [""]
    if result.errors:
        out += ["## Files that could not be scanned", ""]
        out += [f"- `{e.path}` ({e.kind}): {_cell(e.message)}" for e in result.errors]
        out.append("")
    return "\n".join(out)


def fixable_by_kind(findings: list[Finding]) -> list[str]:
    """The auto-fixable split by file kind, as ``portscan fix`` summarises it: a row per
    kind (Python first) with its findings that a safe fix, an unsafe fix or only a
    person ports."""
    if not findings:
        return []
    rows: dict[str, Counter[str]] = {}
    for f in findings:
        rows.setdefault(kind_label(f.path), Counter())[f.fix or "by hand"] += 1
    out = ["| files | findings | safe fix | unsafe fix | by hand |", "|---|---:|---:|---:|---:|"]
    for label, counts in sorted(rows.items(), key=lambda row: (row[0] != "Python", row[0].lower())):
        out.append(f"| {_cell(label)} | {counts.total()} | {counts['safe']} | {counts['unsafe']} | "
                   f"{counts['by hand']} |")
    return out + [""]


def _manifest(finding: Finding) -> bool:
    return finding.path.endswith("setup.py") or file_kind(PurePosixPath(finding.path)) in MANIFEST_KINDS


def install_recipe(findings: list[Finding]) -> list[str]:
    """"Installing on a ROCm machine": shown when the packaging rules found something.

    pip replaces an installed ROCm torch with PyPI's CUDA build whenever a requirement
    cannot be met by it, so the recipe installs torch from PyTorch's ROCm index first and
    then the project against it, pinned by a constraints file; the requirements that
    stand in the way are listed with their lines."""
    packaging = [f for f in findings if f.category == "packaging"]
    if not packaging:
        return []
    torch = rocm_wheels("torch")
    version, index = torch.newest() if torch else ("<version>", "rocm<version>")
    blockers = sorted((f for f in packaging if _manifest(f) and f.severity is not Severity.INFO),
                      key=Finding.sort_key)
    out = ["## Installing on a ROCm machine", "",
           "`pip install -e .` or `pip install -r requirements.txt` replaces an installed ROCm "
           "build of torch with PyPI's torch, which on Linux is the CUDA build, whenever a "
           "requirement cannot be met by the installed one (a bound the ROCm build misses, a "
           "`+cu12x` pin, a package that pins its own torch). Install torch from PyTorch's ROCm "
           "index first, then the project against it:", "",
           "```bash",
           f"pip install torch=={version} --index-url https://download.pytorch.org/whl/{index}"
           "  # other releases: https://pytorch.org/get-started/previous-versions/",
           "pip freeze | grep -iE '^(torch|torchvision|torchaudio|pytorch-triton-rocm)==' "
           "> rocm-constraints.txt",
           "pip install -c rocm-constraints.txt -r requirements.txt  # or: pip install -c "
           "rocm-constraints.txt -e .",
           "```", "",
           "With the constraints file pip stops with a conflict instead of swapping torch. "
           "Add `--no-build-isolation` when the build needs torch (an isolated build fetches "
           "the CUDA torch), and install a package whose own pins pull the CUDA torch with "
           "`--no-deps`, or its ROCm build from the same index."]
    if blockers:
        out += ["", "Requirements that stand in the way:", ""]
        out += [f"- {_where(f)} {f.rule}: {_cell(f.message)}" for f in blockers]
    return out + [""]
