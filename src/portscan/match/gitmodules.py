"""``.gitmodules``: the submodules a repository pulls in, with the position of each ``url``.

Git's config syntax (``[submodule "name"]`` sections of ``key = value`` lines) is read
line by line rather than with ``configparser``, which loses positions and rejects the
tab-indented, duplicate-tolerant files git writes. Unreadable lines are skipped.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from portscan.match import Match
from portscan.ruleset.schema import Rule

_SECTION = re.compile(r'^\s*\[\s*submodule\s+"(?P<name>[^"]*)"\s*\]')
_OTHER_SECTION = re.compile(r"^\s*\[")
_OPTION = re.compile(r"^(?P<indent>\s*)(?P<key>[A-Za-z][\w-]*)\s*=\s*(?P<value>.*?)\s*$")
_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*://(?:[^@/]*@)?", re.IGNORECASE)
_SCP = re.compile(r"^(?:[^@/]+@)?(?P<host>[^:/]+):(?!//)")


@dataclass(frozen=True, slots=True)
class Submodule:
    name: str
    path: str
    url: str
    start: int  #: offset of the url value in the file
    end: int


def repository(url: str) -> str:
    """``https://github.com/NVIDIA/cutlass.git``, ``git@github.com:NVIDIA/cutlass`` ->
    ``github.com/nvidia/cutlass`` (relative URLs stay as written, lower case)."""
    text = _SCHEME.sub("", url.strip())
    if text == url.strip():
        text = _SCP.sub(lambda m: m.group("host") + "/", text, count=1)
    text = text.rstrip("/")
    return text.removesuffix(".git").lower()


def _value(raw: str) -> tuple[str, int]:
    """A config value without its quotes or trailing comment, and its offset in ``raw``."""
    if raw.startswith('"'):
        close = raw.find('"', 1)
        return (raw[1:close], 1) if close > 0 else (raw[1:], 1)
    comment = re.search(r"\s[#;]", raw)
    return (raw[: comment.start()] if comment else raw).rstrip(), 0


def submodules(text: str) -> Iterator[Submodule]:
    """Each ``[submodule]`` section that has a ``url``, in file order."""
    name: str | None = None
    fields: dict[str, tuple[str, int, int]] = {}
    offset = 0

    def flush() -> Iterator[Submodule]:
        if name is not None and "url" in fields:
            url, start, end = fields["url"]
            yield Submodule(name, fields.get("path", ("", 0, 0))[0], url, start, end)

    for line in text.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        section = _SECTION.match(body)
        if section or _OTHER_SECTION.match(body):
            yield from flush()
            name, fields = (section.group("name"), {}) if section else (None, {})
        elif name is not None and (option := _OPTION.match(body)):
            value, skip = _value(option.group("value"))
            start = offset + option.start("value") + skip
            fields.setdefault(option.group("key").lower(), (value, start, start + len(value)))
        offset += len(line)
    yield from flush()


def match_gitmodules(text: str, rules: Sequence[Rule]) -> list[Match]:
    """Matches of ``submodule`` rules, at each matching submodule's ``url`` value."""
    found = list(submodules(text))
    repositories = [repository(s.url) for s in found]
    matches = []
    for rule in rules:
        accepts = getattr(rule.pattern, "matches_submodule", None)  # a SubmodulePattern
        if accepts is None:
            continue
        for submodule, repo in zip(found, repositories, strict=True):
            if accepts(repo, repositories):
                matches.append(Match(rule, submodule.start, submodule.end, {
                    "url": submodule.url, "submodule": submodule.name, "repository": repo}))
    return matches
