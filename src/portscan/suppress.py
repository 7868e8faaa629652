"""Inline suppressions: ``# noqa: PS101``, ``# portscan: ignore[PS101]``, and file-level
``# portscan: ignore-file[PS101]``.

Codes are required: a bare ``# noqa`` (which other linters understand) silences no
portscan finding, and codes of other tools in the same comment are left to them. A
line comment applies to findings that start or end on its line (for a statement over
several lines, put it on the first or the last). In Python only real comments count
(the tokenizer tells them from strings); in other files ``#`` (``//`` in CUDA/C++)
starts the comment. Suppressions that silence nothing can be listed
(``--report-unused-noqa``).
"""

from __future__ import annotations

import dataclasses

import io
import re
import tokenize
from collections.abc import Collection, Iterable, Iterator

from portscan.filekinds import BY_NAME
from portscan.model import Finding, Suppression
from portscan.parse import split_lines

_CODE = re.compile(r"\b[A-Z]{2,8}[0-9]{3}\b")
_NOQA = re.compile(r"(?i)\bnoqa\s*:\s*(?P<codes>[A-Z]{1,8}[0-9]{1,3}(?:[\s,]+[A-Z]{1,8}[0-9]{1,3})*)")
_IGNORE = re.compile(r"portscan\s*:\s*ignore\s*\[(?P<codes>[^\]]*)\]")
_FILE = re.compile(r"portscan\s*:\s*(?:ignore-file\s*\[(?P<bracket>[^\]]*)\]|noqa\s*:\s*(?P<list>[A-Z0-9,\s]+))")


def comments(text: str, kind: str) -> Iterator[tuple[int, str]]:
    """(line, comment text) for every comment in a file of this kind."""
    file = BY_NAME.get(kind)
    if file is not None and file.tokenized:
        try:
            for token in tokenize.generate_tokens(io.StringIO(text).readline):
                if token.type == tokenize.COMMENT:
                    yield token.start[0], token.string
            return
        except (tokenize.TokenError, SyntaxError, IndentationError):
            pass  # fall back to the plain line scan below
    marker = file.comment if file is not None else "#"
    for number, line in enumerate(split_lines(text), start=1):
        index = line.find(marker)
        if index >= 0:
            yield number, line[index:]


#: a comment that may suppress: ``noqa:`` or ``portscan:`` (not a mere mention, such as the
#: ``see `portscan explain PS602``` that fixes write)
_CANDIDATE = re.compile(r"(?:#|//)[^\n]*?(?i:noqa|portscan)\s*:[^\n]*")


def suppressions(text: str, path: str, kind: str, known: Collection[str] | None = None) -> list[Suppression]:
    """Every portscan code a comment in the file silences (only ``known`` codes, if given).
    Lines are screened with a regex first; the tokenizer runs only when one of them
    names a code, so files full of other tools' ``# noqa: F401`` stay cheap."""
    if "noqa" not in text and "portscan" not in text:
        return []
    named = {c for line in _CANDIDATE.findall(text) for c in _CODE.findall(line)}
    if not named or (known is not None and not named & set(known)):
        return []
    found: list[Suppression] = []
    for line, comment in comments(text, kind):
        for match in _FILE.finditer(comment):
            codes = match.group("bracket") if match.group("bracket") is not None else match.group("list")
            found += [Suppression(path, line, code, file=True) for code in _CODE.findall(codes or "")]
        if _FILE.search(comment):
            continue
        for pattern in (_NOQA, _IGNORE):
            for match in pattern.finditer(comment):
                found += [Suppression(path, line, code) for code in _CODE.findall(match.group("codes"))]
    return [f for f in found if known is None or f.code in known]


def covers(suppression: Suppression, code: str, first_line: int, last_line: int) -> bool:
    """Does ``suppression`` silence a finding of ``code`` that starts on ``first_line``
    and ends on ``last_line``? File-level ones cover every line."""
    return suppression.code == code and (suppression.file or suppression.line in (first_line, last_line))


def apply(findings: Iterable[Finding], found: list[Suppression]
          ) -> tuple[tuple[Finding, ...], list[Suppression]]:
    """(findings left, suppressions that silenced nothing)."""
    if not found:
        return tuple(findings), []
    used: set[Suppression] = set()
    kept = []
    for finding in findings:
        matching = [s for s in found if covers(s, finding.rule, finding.span.line, finding.span.end_line)]
        if matching:
            used.update(matching)
            continue
        if finding.uses:  # a comment on a use's line silences that use, not the finding
            silencing = [(use, s) for use in finding.uses for s in found if covers(s, finding.rule, use[0], use[0])]
            used.update(s for _, s in silencing)
            silenced = {use for use, _ in silencing}
            if silenced:
                finding = dataclasses.replace(finding, uses=tuple(u for u in finding.uses if u not in silenced))
        kept.append(finding)
    return tuple(kept), [s for s in found if s not in used]
