"""Checks shared by the non-Python surfaces: requirements, package indexes, environment
variables, container images and shell commands. Each reads a site (a requirement, a URL,
``NAME=value``, an image reference, a command) and asks every kind that matches such
sites (:mod:`portscan.kinds.sites`) whether it does; it returns :class:`Match` values at
the offsets it is given, so every surface reports on the exact text. A kind says which
sites it reads by the methods it has; the checks test for the method (``hasattr``), as
a protocol ``isinstance`` check would cost microseconds per rule and site."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence

from urllib.parse import unquote

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from portscan.match import Match
from portscan.match.commands import Command, Word, pip_arguments
from portscan.match.levels import HANDLED
from portscan.kinds.common import normalize_name
from portscan.kinds.sites import RequirementSite
from portscan.ruleset.schema import Rule

_CONDA_SPEC = re.compile(r"^\s*(?:[\w.-]+::)?(?P<name>[A-Za-z0-9_][\w.-]*)\s*(?P<rest>.*)$")
_EGG = re.compile(r"[#&]egg=([\w.-]+)")
INDEX_OPTION = re.compile(r"^(?:-i|--index-url|--extra-index-url|-f|--find-links)(?:\s+|=)([^\s;]+)")

def _parse(text: str) -> Requirement | None:
    try:
        return Requirement(text)
    except InvalidRequirement:
        return None


def _url_requirement(text: str) -> Requirement | None:
    """``git+https://github.com/NVIDIA/apex.git#egg=apex``, bare VCS URLs, and wheel URLs
    (``.../torch-2.0.0%2Bcu118-cp310-...whl``, read as a ``==`` pin of that version)."""
    if "://" not in text:
        return None
    filename = unquote(text.split("#")[0].split("?")[0].rsplit("/", 1)[-1])
    if filename.endswith(".whl"):
        try:
            wheel_name, version, _, _ = parse_wheel_filename(filename)
        except (InvalidWheelFilename, InvalidVersion):
            return None
        return _parse(f"{wheel_name}=={version}")
    egg = _EGG.search(text)
    name = egg.group(1) if egg else text.split("#")[0].rstrip("/").rsplit("/", 1)[-1]
    name = re.sub(r"\.git$", "", name.split("@", 1)[0])  # repo.git@<commit or tag>
    return _parse(f"{name} @ {text}") if re.fullmatch(r"[\w.-]+", name or "") else None


def _local_labels(requirement: Requirement) -> list[str]:
    labels = []
    for spec in requirement.specifier:
        if spec.operator in ("==", "==="):
            try:
                local = Version(spec.version.rstrip(".*")).local
            except InvalidVersion:
                continue
            if local:
                labels.append(local)
    return labels


def parse_requirement(text: str, conda: bool = False) -> Requirement | None:
    """A requirement string, a VCS URL with ``#egg=``, or (``conda``) a conda spec."""
    stripped = text.strip()
    requirement = _parse(stripped) or _url_requirement(stripped)
    if requirement is None and conda:
        spec = _CONDA_SPEC.match(stripped)
        if spec:  # conda specs: name[=version[=build]]; the build string stands in for +local
            version, _, build = spec.group("rest").lstrip("=<>!~ ").partition("=")
            build = build.strip("*")
            version = version.strip("*") or ("0" if build else "")
            local = f"+{build}" if build and re.fullmatch(r"[\w.]+", build) else ""
            requirement = _parse(f"{spec.group('name')}=={version}{local}" if version
                                 and re.fullmatch(r"[\w.]+", version) else spec.group("name"))
    return requirement


#: what a ROCm machine reports for the platform markers (ROCm wheels are Linux-only)
_LINUX = {"sys_platform": "linux", "platform_system": "Linux", "os_name": "posix"}


def _never_on_linux(requirement: Requirement) -> bool:
    """``xformers ; platform_system == 'Windows'`` is never installed on a ROCm machine.
    Only markers about the platform (and no extras) are decided; anything else counts."""
    marker = requirement.marker
    text = str(marker) if marker is not None else ""
    if not text or "extra" in text or not any(name in text for name in _LINUX):
        return False
    try:
        return not marker.evaluate(_LINUX)  # type: ignore[union-attr]
    except Exception:  # an undefined or odd marker variable: do not guess
        return False


def requirement_rules(requirement: Requirement, rules: Sequence[Rule], section: str = "install",
                      indexed: bool = False, images: tuple[str, ...] = (),
                      source_build: bool = False) -> Iterator[Rule]:
    """Rules whose requirement pattern this requirement meets (``indexed``: named on a
    ``pip install`` line that gives an index; ``images``: the container's base images;
    ``source_build``: on a ``pip install --no-build-isolation`` line).
    A requirement whose markers exclude Linux meets none: ROCm machines run Linux."""
    if _never_on_linux(requirement):
        return
    site = RequirementSite(normalize_name(requirement.name),
                           tuple(normalize_name(e) for e in requirement.extras),
                           tuple(_local_labels(requirement)), requirement.url, section,
                           str(requirement.specifier), indexed, images, source_build)
    for rule in rules:
        accepts = getattr(rule.pattern, "matches_requirement", None)  # a RequirementKind
        if accepts is not None and accepts(site):
            yield rule


def requirement_matches(text: str, start: int, rules: Sequence[Rule], conda: bool = False,
                        section: str = "install", indexed: bool = False,
                        images: tuple[str, ...] = (), source_build: bool = False) -> list[Match]:
    """Matches for one requirement string found at offset ``start``."""
    stripped = text.strip()
    if not stripped:
        return []
    start += len(text) - len(text.lstrip())
    requirement = parse_requirement(stripped, conda)
    if requirement is None:
        return []
    variables = {"package": requirement.name, "requirement": stripped}
    return [Match(rule, start, start + len(stripped), dict(variables))
            for rule in requirement_rules(requirement, rules, section, indexed, images, source_build)]


def index_matches(url: str, start: int, rules: Sequence[Rule], channel: bool = False
                  ) -> list[Match]:
    """Matches for an index URL (or a conda channel) found at offset ``start``."""
    matches = []
    for rule in rules:
        accepts = getattr(rule.pattern, "matches_index", None)  # an IndexKind
        if accepts is not None and accepts(url, channel):
            matches.append(Match(rule, start, start + len(url), {"url": url}))
    return matches



def env_matches(name: str, value: object, start: int, rules: Sequence[Rule]) -> list[Match]:
    """Matches of ``env`` rules for ``name=value`` set at offset ``start`` (non-Python
    surfaces, where every value is text)."""
    text = str(value)
    return [Match(rule, start, start + len(name), {"name": name, "value": text})
            for rule in rules if hasattr(rule.pattern, "matches_env")  # an EnvKind
            and rule.pattern.matches_env(name, text)]


def split_image(reference: str) -> tuple[str, str]:
    """``nvcr.io/nvidia/pytorch:24.01-py3@sha256:...`` -> (``nvcr.io/nvidia/pytorch``, ``24.01-py3``)."""
    name = reference.split("@", 1)[0]
    slash = name.rfind("/")
    colon = name.rfind(":")
    if colon > slash:
        return name[:colon], name[colon + 1:]
    return name, ""


def image_name(reference: str) -> str:
    """``docker.io/library/python:3.11`` -> ``python``: the name image globs are matched on."""
    return split_image(reference)[0].removeprefix("docker.io/").removeprefix("library/")


def image_matches(reference: str, start: int, rules: Sequence[Rule], length: int | None = None
                  ) -> list[Match]:
    """Matches of ``image`` rules for an image reference found at offset ``start``
    (``length``: of the text written there, when ``reference`` was resolved from it).
    A name still holding a variable is not matched; a tag may (``pytorch/pytorch:${VER}-cuda``
    is a CUDA image whatever ``VER`` is, and tag globs see the ``${...}`` text)."""
    name, tag = split_image(reference)
    if "$" in name:
        return []  # the image itself comes from a variable that was not resolved
    bare = name.removeprefix("docker.io/").removeprefix("library/")
    end = start + (len(reference) if length is None else length)
    return [Match(rule, start, end, {"image": reference})
            for rule in rules if hasattr(rule.pattern, "matches_image")  # an ImageKind
            and rule.pattern.matches_image(name, bare, tag)]


#: a test of whether a program is installed, in a condition or a ``||``/``&&`` chain:
#: ``command -v nvidia-smi``, ``which nvidia-smi``, ``type -P nvidia-smi``, ``hash nvidia-smi``
_PRESENCE_TEST = re.compile(r"""(?:\bcommand[ \t]+-[vV]|\bwhich|\btype(?:[ \t]+-[aPpt]+)?|\bhash)"""
                            r"""[ \t]+["']?([\w.+-]+)""")


def presence_tested(text: str) -> frozenset[str]:
    """The programs a script asks about before it runs them (``if ! command -v nvidia-smi
    &>/dev/null; then return; fi``): it copes with their absence, as ``nvidia-smi || true``
    does."""
    return frozenset(m.group(1) for m in _PRESENCE_TEST.finditer(text)) if text else frozenset()


def command_matches(commands: Iterable[Command], rules: Sequence[Rule],
                    conda_channels: bool = True, images: tuple[str, ...] = (),
                    tested: frozenset[str] = frozenset()) -> Iterator[Match]:
    """Everything a shell command can trip: the program it runs (``subprocess`` rules),
    its arguments (``command`` rules), variables it sets (``env`` rules) and the packages
    and indexes of ``pip install`` / ``conda install`` (``requirement``/``index`` rules).
    ``images``: the base images of the container definition the commands run in;
    ``tested``: programs the script tests for before it runs them (:func:`presence_tested`),
    whose runs are handled like ``nvidia-smi || true``."""
    env_rules = [r for r in rules if hasattr(r.pattern, "matches_env")]  # EnvKinds
    for command in commands:
        for word in command.assignments:
            name, _, value = word.value.partition("=")
            yield from env_matches(name, value, word.start, env_rules)
        if not command.words:
            continue
        program = command.program
        head = command.words[0]
        args = command.args
        for rule in rules:
            p = rule.pattern
            if hasattr(p, "matches_program"):  # a ProgramKind
                if p.matches_program(program):
                    yield Match(rule, head.start, head.end, {"program": program},
                                HANDLED if command.tolerated or program in tested else None)
            elif hasattr(p, "matches_env"):  # an EnvKind
                if program in ("docker", "podman", "nerdctl"):
                    yield from _container_env(command, rule)
            elif hasattr(p, "matching_argument"):  # an ArgumentKind
                found = p.matching_argument(program, [arg.value for arg in args])
                if found is not None:
                    arg = args[found]
                    yield Match(rule, arg.start, arg.end, {"program": program, "arg": arg.value})
        pip = pip_arguments(command)
        if pip is not None:
            requirements, indexes = pip
            source_build = any(w.value == "--no-build-isolation" for w in command.words)
            for word in requirements:
                yield from requirement_matches(word.value, word.start, rules, indexed=bool(indexes),
                                               images=images, source_build=source_build)
            for word in indexes:
                yield from index_matches(word.value, word.start, rules)
        elif conda_channels and program in ("conda", "mamba", "micromamba") and \
                [w.value for w in command.args[:1]] == ["install"]:
            yield from _conda_install(command.args[1:], rules)


def _container_env(command: Command, rule: Rule) -> Iterator[Match]:
    """``docker run -e KEY=value`` / ``--env KEY=value``: variables set in the container."""
    args = command.args
    for i, word in enumerate(args):
        if word.value in ("-e", "--env") and i + 1 < len(args):
            setting = args[i + 1]
        elif word.value.startswith("--env="):
            setting = Word(word.value[len("--env="):], word.end - len(word.value) + 6, word.end)
        else:
            continue
        name, eq, value = setting.value.partition("=")
        if eq:
            yield from env_matches(name, value, setting.start, [rule])


def _conda_install(words: Sequence[Word], rules: Sequence[Rule]) -> Iterator[Match]:
    skip = False
    for i, word in enumerate(words):
        if skip:
            skip = False
            continue
        if word.value in ("-c", "--channel") and i + 1 < len(words):
            channel = words[i + 1]
            yield from index_matches(channel.value, channel.start, rules, channel=True)
            skip = True
        elif word.value in ("-n", "--name", "-p", "--prefix"):
            skip = True
        elif not word.value.startswith("-"):
            yield from requirement_matches(word.value, word.start, rules, conda=True)
