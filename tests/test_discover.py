"""Which files a scan reads: default excludes, environments, .gitignore, symlinks."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from portscan.discover import UsageError, discover, first_party_modules


def touch(root: Path, *names: str) -> None:
    for name in names:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x = 1\n")


def found(root: Path, *paths: Path) -> list[str]:
    return [s.rel for s in discover(list(paths) or [root]).files]


def test_walks_python_files_in_order_and_skips_tool_directories(tmp_path: Path) -> None:
    touch(tmp_path, "b.py", "a.py", "pkg/c.py", "notes.txt", ".git/hooks/x.py", "build/lib/d.py",
          "dist/e.py", "__pycache__/f.py", "node_modules/g.py", "proj.egg-info/h.py",
          ".tox/py/i.py")
    assert found(tmp_path) == ["a.py", "b.py", "pkg/c.py"]


def test_skips_virtual_and_conda_environments_by_marker(tmp_path: Path) -> None:
    touch(tmp_path, "main.py", "myenv/pyvenv.cfg", "myenv/lib/site.py", "conda/conda-meta/x.json",
          "conda/lib/y.py", ".venv/z.py")
    assert found(tmp_path) == ["main.py"]


def test_respects_nested_gitignore_with_negation(tmp_path: Path) -> None:
    touch(tmp_path, "keep.py", "gen/out.py", "gen/keep_me.py", "sub/local.py", "sub/tmp_x.py")
    (tmp_path / ".gitignore").write_text("gen/*\n!gen/keep_me.py\n*.log\n")
    (tmp_path / "sub" / ".gitignore").write_text("tmp_*.py\n")
    assert found(tmp_path) == ["gen/keep_me.py", "keep.py", "sub/local.py"]


def test_explicit_files_are_scanned_and_deduplicated(tmp_path: Path) -> None:
    touch(tmp_path, "a.py", "b.py", "readme.md")
    paths = [tmp_path / "a.py", tmp_path / "a.py", tmp_path / "readme.md", tmp_path]
    assert [s.path.name for s in discover(paths).files] == ["a.py", "b.py"]


def test_missing_path_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no such file or directory"):
        discover([tmp_path / "missing"])


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symlinks")
def test_symlinks_do_not_leave_the_tree_or_loop(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    touch(outside, "secret.py")
    root = tmp_path / "repo"
    touch(root, "main.py", "pkg/mod.py")
    (root / "loop").symlink_to(root, target_is_directory=True)
    (root / "linked_dir").symlink_to(outside, target_is_directory=True)
    (root / "escape.py").symlink_to(outside / "secret.py")
    (root / "alias.py").symlink_to(root / "main.py")
    (root / "dangling.py").symlink_to(root / "gone.py")
    assert found(root) == ["alias.py", "main.py", "pkg/mod.py"]


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root reads everything")
def test_unreadable_directory_is_reported_and_the_walk_goes_on(tmp_path: Path) -> None:
    touch(tmp_path, "a.py", "locked/b.py")
    (tmp_path / "locked").chmod(0)
    try:
        result = discover([tmp_path])
    finally:
        (tmp_path / "locked").chmod(0o755)
    assert [s.rel for s in result.files] == ["a.py"]
    assert [(e.path, e.kind) for e in result.errors] == [("locked", "read")]


def test_first_party_modules(tmp_path: Path) -> None:
    touch(tmp_path, "train.py", "apex/__init__.py", "scripts/run.py", "src/mypkg/__init__.py",
          "src/tool.py", "my-script.py")
    assert first_party_modules(tmp_path) == {"train", "apex", "mypkg", "tool"}


def test_a_scripts_sibling_modules_are_first_party(tmp_path: Path, rules) -> None:
    from portscan.scan import scan_paths

    touch(tmp_path, "tools/pynvml.py")  # a vendored shim next to the script
    (tmp_path / "tools" / "report.py").write_text("import pynvml\n")
    (tmp_path / "other.py").write_text("import pynvml\n")
    result = scan_paths([tmp_path], rules)
    assert [(f.path, f.rule) for f in result.findings] == [("other.py", "PS602")]


def test_inside_a_package_an_absolute_import_is_the_library_not_the_sibling(tmp_path: Path, rules) -> None:
    """``mypkg/engine.py`` beside ``mypkg/tensorrt.py``: ``import tensorrt`` is NVIDIA's
    library (Python 3 imports are absolute), ``from . import tensorrt`` the sibling; in a
    script directory (no ``__init__.py``) the plain import finds the sibling."""
    from portscan.scan import scan_paths

    touch(tmp_path, "mypkg/__init__.py", "mypkg/tensorrt.py", "scripts/tensorrt.py")
    (tmp_path / "mypkg" / "engine.py").write_text("import tensorrt\n")
    (tmp_path / "mypkg" / "local.py").write_text("from . import tensorrt\n")
    (tmp_path / "scripts" / "export.py").write_text("import tensorrt\n")
    result = scan_paths([tmp_path], rules)
    assert [(f.path, f.rule) for f in result.findings] == [("mypkg/engine.py", "PS101")]


def test_a_package_scanned_as_the_root_does_not_make_its_modules_top_level(tmp_path: Path) -> None:
    touch(tmp_path, "__init__.py", "tensorrt.py", "src/tool.py")
    assert first_party_modules(tmp_path) == {"tool"}


def test_the_extensions_a_projects_setup_builds_are_its_own(tmp_path: Path, rules, monkeypatch) -> None:
    """A project that builds ``scaled_masked_softmax_cuda`` itself (kernels vendored from
    apex, as many training repos do) imports its own kernel, not apex's: the import is
    first-party, while another project importing that name still gets apex's rule."""
    from portscan.discover import built_extensions
    from portscan.scan import scan_paths

    project = tmp_path / "project"
    project.mkdir()
    (project / "setup.py").write_text(
        "from setuptools import setup\n"
        "from torch.utils.cpp_extension import BuildExtension, CUDAExtension, CppExtension\n"
        "ext = [CUDAExtension('scaled_masked_softmax_cuda', ['csrc/softmax.cpp', 'csrc/softmax.cu']),\n"
        "       CppExtension(name='mypkg._C', sources=['csrc/ops.cpp']),\n"
        "       CUDAExtension(name=f'{NAME}_cuda', sources=[])]\n"
        "setup(name='mypkg', ext_modules=ext, cmdclass={'build_ext': BuildExtension})\n")
    (project / "model.py").write_text("import scaled_masked_softmax_cuda\n")
    assert built_extensions(project) == {"scaled_masked_softmax_cuda", "mypkg"}
    assert "scaled_masked_softmax_cuda" in first_party_modules(project)
    assert [f for f in scan_paths([project], rules).findings if f.path == "model.py"] == []
    monkeypatch.chdir(project)  # pre-commit: file names, from the repository root
    assert scan_paths([Path("model.py")], rules).findings == ()
    other = tmp_path / "other"
    other.mkdir()
    (other / "model.py").write_text("import scaled_masked_softmax_cuda\n")
    assert [f.rule for f in scan_paths([other], rules).findings] == ["PS208"]


def test_a_setup_py_that_does_not_parse_builds_nothing(tmp_path: Path) -> None:
    from portscan.discover import built_extensions

    (tmp_path / "setup.py").write_text("print 'python 2'\nCUDAExtension('x_cuda', [])\n")
    assert built_extensions(tmp_path) == frozenset()


def test_a_files_package_is_named_by_the_init_files_above_it(tmp_path: Path) -> None:
    from portscan.discover import FirstParty, package_name

    touch(tmp_path, "xformers/__init__.py", "xformers/ops/__init__.py", "xformers/ops/fmha/__init__.py",
          "scripts/run.py", "xformers/ops/fmha/bad-name/__init__.py")
    assert package_name(tmp_path / "xformers" / "ops" / "fmha") == "xformers.ops.fmha"
    assert package_name(tmp_path / "scripts") == ""
    assert package_name(tmp_path / "xformers" / "ops" / "fmha" / "bad-name") == ""
    own = FirstParty(tmp_path)(tmp_path / "xformers" / "ops")
    assert own == {"xformers"} and own.package == "xformers.ops"


def test_relative_imports_in_a_librarys_own_package_reach_its_rules(tmp_path: Path, rules) -> None:
    """PS705 (xFormers' CUDA-only ops) holds in xFormers' own tree, where ``from . import
    cutlass`` is ``xformers.ops.fmha.cutlass``; the same code in a script directory, where the
    package is unknown, stays the project's own."""
    from portscan.scan import scan_paths

    touch(tmp_path, "xformers/__init__.py", "xformers/ops/__init__.py", "xformers/ops/fmha/__init__.py",
          "xformers/ops/fmha/cutlass.py")
    table = "from . import cutlass\n\nOPS = [\n    cutlass.FwOp,\n]\n"
    (tmp_path / "xformers" / "ops" / "fmha" / "dispatch.py").write_text(table)
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "dispatch.py").write_text(table)
    result = scan_paths([tmp_path], rules)
    assert [(f.path, f.rule, f.span.line) for f in result.findings] == [
        ("xformers/ops/fmha/dispatch.py", "PS705", 4)]
