"""The project's declared torch floor: read from its manifests, and fixes that need a
newer torch declined (issue 19, item 6)."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from portscan.cli import main
from portscan.match.floor import ANY_AGE, Floor, floor_declined, lowest_allowed, project_floor
from portscan.ruleset.loader import load_rule_file, load_rules
from portscan.ruleset.schema import RuleFileError
from portscan.scan import scan_paths

TRAIN = '''\
import torch

model = torch.nn.Linear(4, 4)
scaler = torch.cuda.amp.GradScaler()
with torch.cuda.amp.autocast():
    loss = model(torch.ones(4)).sum()
'''


def project(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


@pytest.mark.parametrize("specifier, lowest", [
    (">=1.8", "1.8"),
    (">=1.8,<3", "1.8"),
    ("==2.1.0+cu118", "2.1.0"),
    ("~=2.2", "2.2"),
    ("==2.1.*", "2.1"),
    (">=1.9,>1.8", "1.9"),  # a conjunction: the highest lower bound
    (">=2.0.0a0", "2.0.0"),
    ("<2", "0"),  # no lower bound: any age
    ("!=1.9", "0"),
    ("", None),  # unconstrained
])
def test_lowest_allowed(specifier: str, lowest: str | None) -> None:
    found = lowest_allowed(SpecifierSet(specifier))
    assert (str(found) if found is not None else None) == lowest


def test_the_lowest_declaration_wins_across_manifests(tmp_path: Path) -> None:
    root = project(tmp_path, {
        "pyproject.toml": '[build-system]\nrequires = ["setuptools", "torch==1.6"]\n\n'
                          '[project]\nname = "demo"\ndependencies = [\n    "numpy",\n    "torch>=2.1",\n]\n\n'
                          '[project.optional-dependencies]\ngpu = ["torch>=1.13,<3"]\n',
        "requirements.txt": "numpy\n# the training stack\ntorch>=1.11  # tested\n",
        "requirements/cuda.txt": "--extra-index-url https://download.pytorch.org/whl/cu118\ntorch==2.0.1+cu118\n",
        "setup.py": 'from setuptools import setup\n\nREQUIRES = ["tqdm", "torch>=1.10"]\n'
                    'setup(name="demo", install_requires=REQUIRES)\n',
        "setup.cfg": "[metadata]\nname = demo\n\n[options]\ninstall_requires =\n    torch>=1.12\n",
    })
    # the build requirement (torch==1.6) is the build's environment, not the run's
    assert project_floor(root) == Floor(Version("1.10"), "setup.py:3", "torch>=1.10")
    (root / "setup.py").unlink()
    assert project_floor(root) == Floor(Version("1.11"), "requirements.txt:3", "torch>=1.11")


def test_poetry_caret_constraints_have_a_floor(tmp_path: Path) -> None:
    root = project(tmp_path, {"pyproject.toml": '[tool.poetry]\nname = "demo"\n\n'
                                                '[tool.poetry.dependencies]\npython = "^3.9"\ntorch = "^1.8"\n'})
    floor = project_floor(root)
    assert floor is not None and (floor.version, floor.where) == (Version("1.8"), "pyproject.toml:6")


def test_no_floor_without_a_torch_version(tmp_path: Path) -> None:
    assert project_floor(project(tmp_path / "none", {"requirements.txt": "numpy\n"})) is None
    assert project_floor(project(tmp_path / "bare", {"requirements.txt": "torch\ntorchvision\n"})) is None
    assert project_floor(tmp_path / "empty") is None


def test_an_upper_bound_alone_allows_torch_of_any_age(tmp_path: Path) -> None:
    floor = project_floor(project(tmp_path, {"requirements-dev.txt": "torch<2\n"}))
    assert floor is not None and floor.version == ANY_AGE
    assert floor.describe() == "the project allows torch of any age (`torch<2`, requirements-dev.txt:1)"


def test_malformed_manifests_do_not_crash(tmp_path: Path) -> None:
    root = project(tmp_path, {
        "requirements.txt": "torch>=>1.8\ntorch @ \n-e .\n--hash=sha256:abc\ntorch>=1.9\n",
        "pyproject.toml": "[project\ndependencies = [",
        "setup.py": "setup(install_requires=[\n",
        "setup.cfg": "[options\ninstall_requires = torch>=1.0\n",
    })
    assert project_floor(root) == Floor(Version("1.9"), "requirements.txt:5", "torch>=1.9")


def test_setup_py_is_read_never_run(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    root = project(tmp_path, {"setup.py": f'open({str(marker)!r}, "w").close()\n'
                                          'from setuptools import setup\nsetup(install_requires=["torch>=1.8"])\n'})
    assert project_floor(root) == Floor(Version("1.8"), "setup.py:3", "torch>=1.8")
    assert not marker.exists()


def test_the_fix_declines_below_its_torch(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = project(tmp_path, {"requirements.txt": "numpy\nhydra-core\ntorch>=1.8\n", "train.py": TRAIN})
    assert main(["fix", str(root)]) == 1
    out = capsys.readouterr().out
    assert (root / "train.py").read_text() == TRAIN
    assert ("train.py:4 PS316 cuda-amp-deprecated: `torch.amp.GradScaler` needs torch >= 2.3; "
            "the project allows torch 1.8 (requirements.txt:3)") in out
    assert "train.py:5 PS316 cuda-amp-deprecated: `torch.amp.autocast` needs torch >= 1.12" in out


def test_each_entry_has_its_own_floor(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """torch 2.0 has ``torch.amp.autocast`` but not ``torch.amp.GradScaler``."""
    root = project(tmp_path, {"setup.py": 'from setuptools import setup\nsetup(install_requires=["torch>=2.0,<3"])\n',
                              "train.py": TRAIN})
    main(["fix", str(root)])
    fixed = (root / "train.py").read_text()
    assert 'with torch.amp.autocast("cuda"):' in fixed and "torch.cuda.amp.GradScaler()" in fixed
    assert "`torch.amp.GradScaler` needs torch >= 2.3; the project allows torch 2.0 (setup.py:2)" \
        in capsys.readouterr().out


@pytest.mark.parametrize("declared", ["torch>=2.4\n", "torch\n", "numpy\n"])
def test_the_fix_applies_at_or_above_its_torch_or_without_a_floor(tmp_path: Path, declared: str) -> None:
    root = project(tmp_path, {"requirements.txt": declared, "train.py": TRAIN})
    main(["fix", str(root)])
    fixed = (root / "train.py").read_text()
    assert 'scaler = torch.amp.GradScaler("cuda")' in fixed and 'torch.amp.autocast("cuda")' in fixed


def test_the_scan_marks_only_what_fix_would_rewrite(tmp_path: Path) -> None:
    rules = load_rules()

    def marks(requirement: str) -> list[str | None]:
        root = project(tmp_path / requirement.strip("<>=~."), {"requirements.txt": requirement, "train.py": TRAIN})
        return [f.fix for f in scan_paths([root], rules).findings if f.rule == "PS316"]

    assert marks("torch>=1.8") == [None, None]  # every entry needs more: nothing to promise
    assert marks("torch>=2.4") == ["safe", "safe"]
    # entries differ (autocast 1.12, GradScaler 2.3): the marks stay; fix names the one it leaves
    assert marks("torch>=2.0") == ["safe", "safe"]


def test_a_transform_has_a_floor_of_its_own() -> None:
    spec = load_rules().by_code["PS216"].fix
    assert spec is not None and spec.torch == "1.10"  # torch.cuda.amp's forms below 2.3
    floor = Floor(Version("1.9"), "setup.py:9", "torch>=1.9")
    assert floor_declined(spec, "apex.amp.initialize", floor) == (
        "the `apex-amp` fix needs torch >= 1.10; the project allows torch 1.9 (setup.py:9)")
    assert floor_declined(spec, "apex.amp.initialize", Floor(Version("1.10"), "setup.py:9", "torch>=1.10")) is None
    assert floor_declined(spec, "apex.amp.initialize", None) is None


FIX_RULE = '''
code = "XY101"
name = "demo-rule"
category = "demo"
severity = "warning"
confidence = "medium"
message = "`${name}` is a demo"
rocm = "What happens on ROCm."
rewrite = "What to write instead."
references = ["https://example.org/doc"]

[match]
kind = "name"
names = ["demo.old"]

[[bad]]
source = """
import demo
# expect
demo.old()
"""

[[good]]
source = "x = 1"

[fix]
tier = "safe"
why = "the same call"
kind = "replace"

[[fix.replace]]
to = "demo.new"
torch = "2.3"

[[fix.example]]
before = "import demo\\ndemo.old()\\n"
after = "import demo\\ndemo.new()\\n"
'''


def test_the_torch_a_fix_needs_is_read_from_the_rule(tmp_path: Path) -> None:
    (tmp_path / "demo-rule.toml").write_text(FIX_RULE)
    rule = load_rule_file(tmp_path / "demo-rule.toml")
    assert rule.fix is not None and rule.fix.replace[0].torch == "2.3"


@pytest.mark.parametrize("value", ['"two"', '"2.3+cu118"', '"2.4rc1"', "2.3"])
def test_a_bad_torch_version_is_a_rule_file_error(tmp_path: Path, value: str) -> None:
    (tmp_path / "demo-rule.toml").write_text(FIX_RULE.replace('torch = "2.3"', f"torch = {value}"))
    with pytest.raises(RuleFileError) as info:
        load_rule_file(tmp_path / "demo-rule.toml")
    assert info.value.key == "fix.replace[0].torch"
