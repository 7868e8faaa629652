"""The file-kind table: which paths each kind claims, and that the match kinds' surfaces
name real file kinds."""

from __future__ import annotations

from pathlib import PurePosixPath

import pytest

from portscan.filekinds import BY_NAME, FILE_KINDS, file_kind
from portscan.kinds import KINDS
from portscan.suppress import comments

CLAIMS = {
    "train.py": "python", "pkg/Mod.PY": "python", "requirements.py": "python",
    "kernel.cu": "cuda", "inc/kernel.CUH": "cuda", "a.cpp": "cpp", "inc/warp.hpp": "cpp", "ops.h": "cpp", "a.c": None,
    "run.sh": "shell", "x.bash": "shell", "Dockerfile.sh": "shell",
    "requirements.txt": "requirements", "dev-requirements.txt": "requirements",
    "constraints-cpu.txt": "requirements", "requirements/base.txt": "requirements", "notes.txt": None,
    "pyproject.toml": "pyproject", "sub/pyproject.toml": "pyproject", "Pyproject.toml": None,
    "setup.cfg": "setupcfg", "tox.ini": None,
    "Dockerfile": "dockerfile", "dockerfile.rocm": "dockerfile", "cuda.Dockerfile": "dockerfile",
    "Containerfile": "dockerfile", "dockerfiles.txt": None, "Dockerfile-old": None,
    "docker-compose.yml": "compose", "compose.prod.yaml": "compose",
    "environment.yml": "conda", "environment-gpu.yaml": "conda", "env.yml": "conda",
    "conda-env.yaml": "conda", "conda.yml": "conda", "config.yml": None, "envs.yml": None,
}


@pytest.mark.parametrize(("path", "kind"), sorted(CLAIMS.items()))
def test_a_path_has_the_first_kind_that_claims_it(path: str, kind: str | None) -> None:
    assert file_kind(PurePosixPath(path)) == kind


def test_every_surface_of_every_match_kind_is_a_file_kind() -> None:
    for pattern in KINDS.values():
        assert pattern.surfaces <= set(BY_NAME), pattern.kind


def test_every_file_kind_has_a_match_kind() -> None:
    surfaces = set().union(*(pattern.surfaces for pattern in KINDS.values()))
    assert {kind.name for kind in FILE_KINDS} <= surfaces


def test_comments_follow_the_file_kind() -> None:
    assert list(comments('x = "# no"  # yes\n', "python")) == [(1, "# yes")]
    assert list(comments("int x; // PS901\n# define Y\n", "cuda")) == [(1, "// PS901")]
    assert list(comments("RUN x  # y\n", "dockerfile")) == [(1, "# y")]


def test_every_kind_on_the_cuda_surface_matches_kernel_sources() -> None:
    """The cuda surface hands each of its kinds a KernelSource and nothing else."""
    from portscan.kinds.sites import KernelKind

    for pattern in KINDS.values():
        if "cuda" in pattern.surfaces:
            assert issubclass(pattern, KernelKind), pattern.kind


def test_the_sites_some_patterns_ask_for_are_ones_the_walk_records(rules) -> None:
    """``extra_sites`` (``alongside``, ``unless_listed_with``) name sites of the walk."""
    from portscan.kinds.python_surface import SITES

    extra = {site for rule in rules.rules for site in getattr(rule.pattern, "extra_sites", ())}
    assert extra and extra <= SITES


def test_every_kind_on_the_python_surface_resolves_its_own_sites() -> None:
    """A Python kind without ``resolve_python`` would silently match nothing; the sites
    it reads must be ones the walk records."""
    from portscan.kinds.python_surface import SITES

    for pattern in KINDS.values():
        if "python" in pattern.surfaces:
            assert callable(getattr(pattern, "resolve_python", None)), pattern.kind
            assert pattern.python_sites and pattern.python_sites <= SITES, pattern.kind
            extra = getattr(pattern, "extra_sites", None)
            assert extra is None or isinstance(extra, property), pattern.kind
        else:
            assert not hasattr(pattern, "resolve_python"), pattern.kind


@pytest.mark.parametrize(("method", "protocol"), [
    ("match_kernel", "KernelKind"), ("matches_requirement", "RequirementKind"),
    ("matches_index", "IndexKind"), ("matches_env", "EnvKind"), ("matches_image", "ImageKind"),
    ("matches_program", "ProgramKind"), ("matching_argument", "ArgumentKind"),
])
def test_a_kind_that_reads_a_site_implements_its_protocol(method: str, protocol: str) -> None:
    """The text surfaces pick kinds by the method they have; the protocol is its contract."""
    from portscan.kinds import sites

    readers = [pattern for pattern in KINDS.values() if hasattr(pattern, method)]
    assert readers
    assert all(issubclass(pattern, getattr(sites, protocol)) for pattern in readers)
