"""The kinds of file portscan reads, one table entry each.

An entry says which paths it claims, which matcher reads its text, how its comments
are written (for suppressions) and which Markdown fence shows its examples (for the
rule pages). Match kinds name the file kinds they apply to in ``surfaces``; a test
checks those names against this table. ``docs/rule-format.md`` ("Adding a file kind")
walks through adding one.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from portscan.match import Match
from portscan.parse import parse_for_matching
from portscan.ruleset.schema import Rule

_YAML = (".yml", ".yaml")


@dataclass(frozen=True, slots=True)
class MatchContext:
    """What a matcher may need besides the text and the rules."""

    first_party: frozenset[str] = frozenset()  #: the project's own top-level modules
    hipify: frozenset[str] | None = None  #: CUDA names hipify maps (None: table unavailable)
    parser: str = "ast"  #: how Python is parsed (see :data:`portscan.parse.PARSERS`)
    #: the folders of the file's path below the scan root (``("lmcache", "integration", "vllm")``)
    folders: tuple[str, ...] = ()


#: a file's text and the rules that apply to it -> their matches
Matcher = Callable[[str, Sequence[Rule], MatchContext], list[Match]]


@dataclass(frozen=True, slots=True)
class FileKind:
    name: str  #: what ``surfaces`` and ``SourcePath.kind`` call it
    label: str  #: what reports call its files, in the plural (``Dockerfiles``)
    claims: Callable[[PurePath], bool]  #: does a file at this path have this kind?
    matcher: Matcher
    comment: str = "#"  #: what starts a line comment
    #: comments come from Python's tokenizer (so ``#`` inside strings is no comment)
    tokenized: bool = False
    fence: str = "text"  #: the Markdown code-fence language of its examples
    #: the matcher gets only the rules the literal prefilter keeps (see ``RuleSet.candidates``)
    prefiltered: bool = False
    #: a cheap test a text must pass for the matcher to find anything (C++: a CUDA token);
    #: a scan settles a file that fails it without reading it further
    may_match: Callable[[str], bool] = lambda text: True


def _function(module: str, name: str) -> Callable[..., Any]:
    """``module.name``, imported on first use: a scan imports the matchers of the file
    kinds it meets, not all of them (a pre-commit run on a few ``.py`` files needs no YAML
    or CMake reader)."""
    return getattr(importlib.import_module(module), name)  # type: ignore[no-any-return]


def _python(text: str, rules: Sequence[Rule], context: MatchContext) -> list[Match]:
    from portscan.match.python import match_python  # libcst: only when there is something to parse

    return match_python(parse_for_matching(text, context.parser), rules, context.first_party, context.folders)


def _cuda(text: str, rules: Sequence[Rule], context: MatchContext) -> list[Match]:
    return _function("portscan.match.kernels", "match_cuda")(text, rules, context.hipify)  # type: ignore[no-any-return]


def _cpp(text: str, rules: Sequence[Rule], context: MatchContext) -> list[Match]:
    return _function("portscan.match.kernels", "match_cpp")(text, rules, context.hipify)  # type: ignore[no-any-return]


def _mentions_cuda(text: str) -> bool:
    return bool(_function("portscan.match.kernels", "mentions_cuda")(text))


def _text(module: str, name: str) -> Matcher:
    """A matcher that needs nothing but the text and the rules: ``portscan.match.<module>.<name>``."""
    return lambda text, rules, context: _function(f"portscan.match.{module}", name)(text, rules)  # type: ignore[no-any-return]


def _suffix(*suffixes: str) -> Callable[[PurePath], bool]:
    return lambda path: path.suffix.lower() in suffixes


def _requirements(path: PurePath) -> bool:
    """``*requirements*.txt``, ``*constraints*.txt``, ``requirements/*.txt``, and the
    pip-compile inputs they are generated from (``requirements*.in``, same syntax)."""
    lower = path.name.lower()
    if path.suffix.lower() == ".in":
        return "requirements" in lower or path.parent.name == "requirements"
    return path.suffix.lower() == ".txt" and ("requirements" in lower or "constraints" in lower
                                              or path.parent.name == "requirements")


#: suffixes of files that only mention Dockerfiles in their name (docs, lists, scripts)
_NOT_CONTAINER = (".md", ".rst", ".txt", ".json", ".yml", ".yaml", ".toml", ".sh", ".html", ".lock")
#: backups, which no build reads
_BACKUP = ("old", "bak", "orig", "backup")


def _dockerfile(path: PurePath) -> bool:
    """``Dockerfile``, ``Dockerfile.*``, ``*.Dockerfile``, ``Containerfile``, and the
    ``_``/``-`` spellings projects use (``Dockerfile_cuda``, ``Qwen2VL_Dockerfile``)."""
    lower = path.name.lower()
    if lower.endswith(_NOT_CONTAINER):
        return False
    parts = re.split(r"[._-]", lower)
    named = parts[0] in ("dockerfile", "containerfile") or parts[-1] in ("dockerfile", "containerfile")
    return named and parts[-1] not in _BACKUP


def _apptainer(path: PurePath) -> bool:
    """``Singularity``, ``Apptainer``, ``Singularity.*``, ``*.def`` (read only when the
    text has a ``Bootstrap:`` header)."""
    lower = path.name.lower()
    return lower.split(".")[0] in ("singularity", "apptainer") or path.suffix.lower() == ".def"


def _yaml_stem(path: PurePath) -> str | None:
    suffix = path.suffix.lower()
    return path.name.lower()[: -len(suffix)] if suffix in _YAML else None


def _compose(path: PurePath) -> bool:
    """``docker-compose*.yml``, ``compose*.yml`` (and ``.yaml``)."""
    stem = _yaml_stem(path)
    return stem is not None and stem.startswith(("docker-compose", "compose"))


def _conda(path: PurePath) -> bool:
    """``environment*.yml``, ``conda*.yml``, ``env.yml``, ``conda-env.yml`` (and ``.yaml``)."""
    stem = _yaml_stem(path)
    return stem is not None and (stem.startswith(("environment", "conda")) or stem in ("env", "conda-env"))


def _ci(path: PurePath) -> bool:
    """``.github/workflows/*.yml``, ``action.yml`` under ``.github``, ``.gitlab-ci.yml`` and
    ``*.gitlab-ci.yml``, ``azure-pipelines*.yml``, ``.azure-pipelines/**.yml`` (and ``.yaml``)."""
    stem = _yaml_stem(path)
    if stem is None:
        return False
    parts = path.parts
    return ((path.parent.name == "workflows" and path.parent.parent.name == ".github")
            or (stem == "action" and ".github" in parts)
            or stem == ".gitlab-ci" or stem.endswith(".gitlab-ci")
            or stem.startswith("azure-pipelines") or ".azure-pipelines" in parts)


def _jenkinsfile(path: PurePath) -> bool:
    """``Jenkinsfile``, ``*.Jenkinsfile``."""
    lower = path.name.lower()
    return lower == "jenkinsfile" or lower.endswith(".jenkinsfile")


_PACKAGE_CONFIG = re.compile(r"(?i).+(?:config|config-version|configversion|targets(?:-\w+)?)\.cmake$")


def _cmake(path: PurePath) -> bool:
    """``CMakeLists.txt`` and ``*.cmake``, except an installed package's CMake files
    (under ``share/cmake/``, ``lib/cmake/``: a dependency's, not the project's build) and
    package config files (``FooConfig.cmake``, ``foo-config.cmake``, ``FooTargets.cmake``:
    generated for the package's users)."""
    if path.name != "CMakeLists.txt" and not (path.suffix.lower() == ".cmake"
                                              and not _PACKAGE_CONFIG.match(path.name)):
        return False
    parts = [p.lower() for p in path.parts[:-1]]
    return not any(a in ("share", "lib", "lib64") and b == "cmake" for a, b in zip(parts, parts[1:], strict=False))


def _makefile(path: PurePath) -> bool:
    """``Makefile``, ``GNUmakefile``, ``makefile``, ``*.mk``."""
    return path.name in ("Makefile", "GNUmakefile", "makefile") or path.suffix == ".mk"


#: every file kind; a path has the first kind that claims it
FILE_KINDS: tuple[FileKind, ...] = (
    FileKind("python", "Python", _suffix(".py"), _python, tokenized=True, fence="python", prefiltered=True),
    FileKind("cuda", "CUDA sources", _suffix(".cu", ".cuh"), _cuda, comment="//", fence="cpp"),
    #: read only when the text holds a CUDA token (``portscan.match.kernels.mentions_cuda``)
    FileKind("cpp", "C++ sources", _suffix(".cpp", ".cc", ".cxx", ".c++", ".h", ".hh", ".hpp", ".hxx"), _cpp,
             comment="//", fence="cpp", may_match=_mentions_cuda),
    FileKind("shell", "shell scripts", _suffix(".sh", ".bash"), _text("shell", "match_shell"), fence="bash"),
    FileKind("cmake", "CMake files", _cmake, _text("cmake", "match_cmake"), fence="cmake"),
    FileKind("makefile", "Makefiles", _makefile, _text("makefiles", "match_makefile"), fence="makefile"),
    FileKind("requirements", "requirements files", _requirements, _text("manifests", "match_requirements")),
    FileKind("pyproject", "pyproject.toml", lambda path: path.name == "pyproject.toml",
             _text("manifests", "match_pyproject"), fence="toml"),
    FileKind("setupcfg", "setup.cfg", lambda path: path.name == "setup.cfg",
             _text("manifests", "match_setup_cfg"), fence="ini"),
    FileKind("dockerfile", "Dockerfiles", _dockerfile, _text("containers", "match_dockerfile"), fence="dockerfile"),
    FileKind("apptainer", "Apptainer definitions", _apptainer, _text("containers", "match_apptainer"),
             fence="singularity"),
    FileKind("ci", "CI definitions", _ci, _text("ci", "match_ci"), fence="yaml"),
    FileKind("jenkinsfile", "Jenkinsfiles", _jenkinsfile, _text("ci", "match_jenkinsfile"), comment="//",
             fence="groovy"),
    FileKind("gitmodules", ".gitmodules", lambda path: path.name == ".gitmodules",
             _text("gitmodules", "match_gitmodules"), fence="ini"),
    FileKind("compose", "compose files", _compose, _text("yamlfiles", "match_compose"), fence="yaml"),
    FileKind("conda", "conda environments", _conda, _text("manifests", "match_conda"), fence="yaml"),
)
BY_NAME: dict[str, FileKind] = {kind.name: kind for kind in FILE_KINDS}


def file_kind(path: PurePath) -> str | None:
    """The name of the file kind a path has, or None if portscan does not read it."""
    return next((kind.name for kind in FILE_KINDS if kind.claims(path)), None)


def kind_label(path: str) -> str:
    """What reports call the files of a path's kind (``Dockerfiles``); ``other files``
    for a path no kind claims."""
    kind = file_kind(PurePath(path))
    return BY_NAME[kind].label if kind is not None else "other files"
