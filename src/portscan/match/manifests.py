"""Dependency manifests: requirements files, ``pyproject.toml``, ``setup.cfg`` and conda
environments, plus the requirement and index checks every surface shares.

Requirement strings are parsed with ``packaging``; every match sits on the text that
names the package, so the finding lands on the exact line of the file.
"""

from __future__ import annotations

import configparser
import dataclasses
import re
import sys
from collections.abc import Iterable, Iterator, Sequence

import yaml

from portscan.match import Match
from portscan.match.common import INDEX_OPTION, index_matches, requirement_matches
from portscan.match.levels import VENDOR_EXTRA, VENDOR_BRANCH
from portscan.match.yamlfiles import compose_yaml, mapping_get, scalar_items, sequence_items
from portscan.ruleset.schema import Rule

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

_INCLUDE_OPTION = re.compile(r"^(?:-r|--requirement|-c|--constraint)(?:\s+|=)(\S+)")

# ------------------------------------------------------------------ requirements files


def logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """(offset, text) of each line with ``\\`` continuations joined and comments removed."""
    offset = 0
    pending: tuple[int, str] | None = None
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        start = offset
        offset += len(line)
        if pending is not None:
            start, body = pending[0], pending[1] + " " * (len(line) - len(line.lstrip())) + body.lstrip()
            pending = None
        if body.endswith("\\"):
            pending = (start, body[:-1])
            continue
        comment = re.search(r"(^|\s)#", body)
        yield start, body[: comment.start()] if comment else body
    if pending is not None:
        yield pending


def requirements_includes(text: str) -> list[str]:
    """Files named by ``-r`` / ``-c`` lines, relative to the requirements file."""
    found = []
    for _, line in logical_lines(text):
        include = _INCLUDE_OPTION.match(line.strip())
        if include:
            found.append(include.group(1))
    return found


def match_requirements(text: str, rules: Sequence[Rule]) -> list[Match]:
    matches: list[Match] = []
    # pip applies a file's index options to every requirement in it, wherever they stand
    indexed = any(INDEX_OPTION.match(line.strip()) for _, line in logical_lines(text))
    for start, line in logical_lines(text):
        body = line.strip()
        if not body:
            continue
        offset = start + line.index(body)
        index = INDEX_OPTION.match(body)
        if index:
            url = index.group(1)
            matches += index_matches(url, offset + body.index(url), rules)
        elif body.startswith(("-e ", "--editable ", "--editable=")):
            target = body.split(None, 1)[1] if " " in body else body.split("=", 1)[1]
            matches += requirement_matches(target, offset + body.index(target), rules)
        elif not body.startswith("-"):
            requirement = re.split(r"\s+--?\w", body, maxsplit=1)[0]  # per-line pip options
            matches += requirement_matches(requirement, offset, rules, indexed=indexed)
    return matches


# ------------------------------------------------------------------ pyproject.toml


def _table_offset(text: str, table: str) -> int:
    """Where ``[table]`` starts (its parent's header for inline tables), else 0."""
    while table:
        header = re.search(rf"(?m)^\s*\[{re.escape(table)}\]\s*(#.*)?$", text)
        if header:
            return header.start()
        table = table.rpartition(".")[0]
    return 0


def _find_string(text: str, value: str, after: int = 0) -> int | None:
    """Offset of ``value`` written as a quoted TOML string at or after ``after``."""
    for quote in ('"', "'"):
        found = text.find(f"{quote}{value}{quote}", after)
        if found >= 0:
            return found + 1
    return None


def match_pyproject(text: str, rules: Sequence[Rule]) -> list[Match]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return []
    # (requirement, section, the table it is written under): each string is looked for
    # from its own table's header on, so one listed in two tables lands on the right line
    strings: list[tuple[str, str, str, bool]] = []  # ..., and whether an extra named for one vendor's builds holds it
    project = data.get("project", {})
    strings += [(s, "install", "project", False) for s in project.get("dependencies", [])
                if isinstance(s, str)]
    for table, groups in (("project.optional-dependencies", project.get("optional-dependencies", {})),
                          ("dependency-groups", data.get("dependency-groups", {}))):
        for name, group in groups.items() if isinstance(groups, dict) else ():
            vendor = VENDOR_EXTRA.search(str(name)) is not None
            items = group if isinstance(group, list) else []
            strings += [(s, "optional", table, vendor) for s in items if isinstance(s, str)]
    strings += [(s, "build", "build-system", False) for s in data.get("build-system", {}).get("requires", [])
                if isinstance(s, str)]
    matches: list[Match] = []
    cursor: dict[tuple[str, str], int] = {}
    for value, section, table, vendor in strings:
        start = cursor.get((value, table), _table_offset(text, table))
        at = _find_string(text, value, start)
        if at is not None:
            cursor[(value, table)] = at + len(value)
            matches += _extra_matches(value, at, rules, section, vendor)
    tool = data.get("tool", {})
    poetry = tool.get("poetry", {})
    tables = [poetry.get("dependencies", {}), poetry.get("dev-dependencies", {})]
    tables += [group.get("dependencies", {}) for group in poetry.get("group", {}).values()]
    for table in tables:
        for name, spec in table.items():
            if name == "python":
                continue
            key = re.search(rf"(?m)^\s*[\"']?{re.escape(name)}[\"']?\s*=", text)
            if key is None:
                continue
            at = key.start() + len(key.group(0)) - len(key.group(0).lstrip())
            matches += requirement_matches(_poetry_requirement(name, spec), at, rules)
    uv = tool.get("uv", {})
    poetry_specs = [spec for table in tables if isinstance(table, dict) for spec in table.values()]
    uv_sources = uv.get("sources", {})
    urls = [s.get("url") for s in _used(poetry.get("source", []), "priority", _named(poetry_specs, "source"))]
    uv_specs = list(uv_sources.values()) if isinstance(uv_sources, dict) else []
    used = _used(uv.get("index", []), "explicit", _named(uv_specs, "index"))
    urls += [s.get("url") for s in used]
    urls += [s.get("url") for s in tool.get("pdm", {}).get("source", []) if isinstance(s, dict)]
    vendor_urls = {s.get("url") for s in used
                   if s.get("explicit") is True and _for_vendor_extras(uv_specs, s.get("name"))}
    for url in urls:
        if isinstance(url, str):
            at = _find_string(text, url)
            if at is not None:
                matches += _one_vendors(index_matches(url, at, rules), url in vendor_urls)
    return _single_line(matches, text)


def _for_vendor_extras(specs: Iterable[object], index: object) -> bool:
    """Do uv's sources take packages from the explicit index ``index`` only for extras (or
    dependency groups) named for one vendor's builds (``{ index = "torch-cuda", extra =
    "cuda" }``)? Then only a user who asks for that extra installs from it."""
    extras = [e.get("extra", e.get("group")) for spec in specs for e in (spec if isinstance(spec, list) else [spec])
              if isinstance(e, dict) and e.get("index") == index]
    return bool(extras) and all(isinstance(x, str) and VENDOR_EXTRA.search(x) is not None for x in extras)


def _used(indexes: object, explicit_key: str, named: set[str]) -> list[dict[str, object]]:
    """The package indexes a resolver may take packages from: an explicit one (uv's
    ``explicit = true``, Poetry's ``priority = "explicit"``) only where a source names it,
    since nothing else is ever looked up there."""
    if not isinstance(indexes, list):
        return []
    return [i for i in indexes if isinstance(i, dict)
            and (i.get(explicit_key) not in (True, "explicit") or i.get("name") in named)]


def _named(specs: Iterable[object], key: str) -> set[str]:
    """The index names package specs pin to, each spec a table or a list of them: uv's
    ``torch = [{ index = "x" }]`` (``key`` ``"index"``), Poetry's ``torch = {source = "x"}``
    (``"source"``)."""
    entries = [e for spec in specs for e in (spec if isinstance(spec, list) else [spec])]
    return {e[key] for e in entries if isinstance(e, dict) and isinstance(e.get(key), str)}


def _extra_matches(value: str, at: int, rules: Sequence[Rule], section: str, vendor: bool) -> list[Match]:
    """A requirement's matches; in an extra named for one vendor's builds (``vendor``) they
    are vendor-branch code: an AMD user installs another extra, or this one, made for AMD."""
    return _one_vendors(requirement_matches(value, at, rules, section=section), vendor)


def _one_vendors(found: list[Match], vendor: bool) -> list[Match]:
    """``found`` as vendor-branch matches where they serve one vendor's builds only."""
    return [dataclasses.replace(m, guard=VENDOR_BRANCH) for m in found] if vendor else found


def _poetry_requirement(name: str, spec: object) -> str:
    """A Poetry dependency as a PEP 508 string (``torch = {version = "2.0.1+cu118"}``)."""
    if isinstance(spec, str):
        version = spec.strip()
        if re.fullmatch(r"[\d.]+(\+[\w.]+)?", version):
            return f"{name}=={version}"
        return name
    if isinstance(spec, dict):
        extras = spec.get("extras") or []
        head = f"{name}[{','.join(extras)}]" if extras else name
        if "git" in spec:
            return f"{head} @ git+{spec['git']}"
        if "url" in spec:
            return f"{head} @ {spec['url']}"
        version = str(spec.get("version", "")).strip()
        if re.fullmatch(r"[\d.]+(\+[\w.]+)?", version):
            return f"{head}=={version}"
        return head
    return name


def _single_line(matches: list[Match], text: str) -> list[Match]:
    """Poetry findings sit on the dependency's key: keep each span on that line."""
    fixed = []
    for m in matches:
        end = text.find("\n", m.start)
        end = len(text) if end < 0 else end
        fixed.append(Match(m.rule, m.start, min(m.end, end), m.variables, m.guard))
    return fixed


# ------------------------------------------------------------------ setup.cfg


def match_setup_cfg(text: str, rules: Sequence[Rule]) -> list[Match]:
    parser = configparser.RawConfigParser()
    try:
        parser.read_string(text)
    except configparser.Error:
        return []
    values: list[tuple[str, str, bool]] = []  # (requirement, section, in an extra named for one vendor)
    for key, section in (("install_requires", "install"), ("setup_requires", "build")):
        if parser.has_option("options", key):
            values += [(v, section, False) for v in parser.get("options", key).splitlines()]
    if parser.has_section("options.extras_require"):
        for name, value in parser.items("options.extras_require"):
            vendor = VENDOR_EXTRA.search(name) is not None
            values += [(v, "optional", vendor) for v in value.splitlines()]
    matches: list[Match] = []
    cursor: dict[str, int] = {}
    for value, section, vendor in ((v.strip(), s, n) for v, s, n in values):
        if not value or value.startswith("#"):
            continue
        key = {"install": "install_requires", "build": "setup_requires"}.get(section, "")
        option = re.search(rf"(?m)^\s*{key}\s*=", text) if key else None
        start = cursor.get(section, option.start() if option else 0)
        at = text.find(value, start)
        if at >= 0:
            cursor[section] = at + len(value)
            matches += _extra_matches(value, at, rules, section, vendor)
    return matches


# ------------------------------------------------------------------ conda environments


def match_conda(text: str, rules: Sequence[Rule]) -> list[Match]:
    root = compose_yaml(text)
    if root is None:
        return []
    matches: list[Match] = []
    for channel in scalar_items(mapping_get(root, "channels")):
        matches += index_matches(channel.value, channel.start_mark.index, rules, channel=True)
    for node in sequence_items(mapping_get(root, "dependencies")):
        if isinstance(node, yaml.ScalarNode):
            matches += requirement_matches(node.value, node.start_mark.index, rules, conda=True)
        else:
            for item in scalar_items(mapping_get(node, "pip")):
                option = INDEX_OPTION.match(item.value)
                if option:
                    url = option.group(1)
                    matches += index_matches(url, item.start_mark.index + item.value.index(url), rules)
                else:
                    matches += requirement_matches(item.value, item.start_mark.index, rules)
    return matches
