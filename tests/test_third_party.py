"""Third-party knowledge (issue 17, item 5): flash-attn's separate CUDA extensions and
raw extension calls, FAISS on the GPU, MS-AMP, ONNX Runtime and CUDA wheels installed
from Python at run time, and bitsandbytes judged by the version the project requires."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from portscan.kinds.ceiling import only_below
from portscan.ruleset.loader import load_rule_file, load_rules
from portscan.ruleset.schema import RuleFileError
from portscan.scan import scan_paths, scan_source

from conftest import REPO, inline_rule

RAG = REPO / "fixtures" / "rag-service"

EXPECTED = [
    ("pyproject.toml", 17, 6, "PS856", "warning", None),               # bitsandbytes>=0.45.2,<0.45.5 on Linux
    ("rag_service/finetune.py", 3, 8, "PS706", "warning", None),       # import bitsandbytes: raised by PS856
    ("rag_service/finetune.py", 6, 8, "PS734", "error", None),         # import msamp
    ("rag_service/installer.py", 9, 15, "PS857", "warning", None),     # ".../whl/cu121" for a pip command
    ("rag_service/installer.py", 13, 15, "PS807", "error", None),      # "onnxruntime-gpu" if cuda available
    ("rag_service/installer.py", 23, 15, "PS801", "error", None),      # os.system("pip install ...+cu121")
    ("rag_service/reranker.py", 7, 12, "PS733", "warning", "fallback"),  # import dropout_layer_norm (guarded)
    ("rag_service/reranker.py", 12, 10, "PS733", "warning", "fallback"),  # from rotary_emb import ... (guarded)
    ("rag_service/reranker.py", 16, 8, "PS701", "warning", None),      # import flash_attn_2_cuda
    ("rag_service/reranker.py", 20, 11, "PS736", "warning", None),     # flash_attn_gpu.fwd(...)
    ("rag_service/retrieval.py", 14, 15, "PS718", "warning", None),    # StandardGpuResources()
    ("rag_service/retrieval.py", 15, 17, "PS718", "warning", None),    # index_cpu_to_gpu
    ("rag_service/retrieval.py", 16, 9, "PS718", "warning", None),     # GpuParameterSpace()
    ("rag_service/retrieval.py", 21, 11, "PS718", "warning", None),    # StandardGpuResources()
    ("rag_service/retrieval.py", 22, 12, "PS718", "warning", None),    # knn_gpu
    ("rag_service/retrieval.py", 26, 14, "PS735", "warning", None),    # Kmeans(..., gpu=True)
]


@pytest.fixture(scope="module")
def rules():
    return load_rules()


def test_every_finding_of_the_rag_service_fixture(rules) -> None:
    result = scan_paths([RAG], rules)
    found = [(f.path, f.span.line, f.span.column, f.rule, f.severity.value, f.guard)
             for f in result.findings]
    assert found == EXPECTED
    assert result.errors == ()


def _codes(source: str, rules, path: str = "example.py") -> list[tuple[int, int, str, str]]:
    return [(f.span.line, f.span.column, f.rule, f.severity.value)
            for f in scan_source(textwrap.dedent(source), path, rules)]


# -- bitsandbytes by the version the project allows --------------------------------------

@pytest.mark.parametrize(("specifier", "below"), [
    ("==0.45.3", True), ("<0.45.5,>=0.45.2", True), ("~=0.44.0", True), ("==0.48.*", True),
    ("<=0.48.2", True), ("<0.49.0", True), ("==0.43.1+cu121", True),
    ("", False), (">=0.45", False), ("<0.50", False), ("==0.49.0", False), ("~=0.48", False),
    ("!=0.48.0", False), ("==0.49.*", False), ("<=0.49.0", False), ("===weird", False),
])
def test_only_below(specifier: str, below: bool) -> None:
    assert only_below(specifier, "0.49.0") is below


def _project(tmp_path: Path, requirement: str | None) -> Path:
    (tmp_path / "train.py").write_text("import bitsandbytes as bnb\n"
                                       "try:\n    import bitsandbytes\nexcept ImportError:\n"
                                       "    bitsandbytes = None\n")
    if requirement is not None:
        (tmp_path / "requirements.txt").write_text(requirement + "\n")
    return tmp_path


@pytest.mark.parametrize(("requirement", "import_severity"), [
    ("bitsandbytes==0.45.3", "warning"), ("bitsandbytes>=0.45.1", "info"), (None, "info")])
def test_bitsandbytes_imports_warn_only_where_the_project_pins_a_release_without_rocm(
        tmp_path: Path, rules, requirement: str | None, import_severity: str) -> None:
    result = scan_paths([_project(tmp_path, requirement)], rules)
    imports = [(f.span.line, f.severity.value) for f in result.findings if f.rule == "PS706"]
    # the guarded one is one step lower: bitsandbytes has ROCm releases
    assert imports == [(1, import_severity), (3, "info")]
    pins = [f.span.line for f in result.findings if f.rule == "PS856"]
    assert pins == ([1] if import_severity == "warning" else [])


def test_escalate_must_raise_and_name_known_rules(tmp_path: Path) -> None:
    base = (REPO / "rules" / "libraries" / "bitsandbytes-rocm-backend.toml").read_text()
    lowered = base.replace('severity = "warning"\n\n[match]', 'severity = "info"\n\n[match]')
    path = tmp_path / "bitsandbytes-rocm-backend.toml"
    path.write_text(lowered)
    with pytest.raises(RuleFileError, match="escalate.severity"):
        load_rule_file(path)
    assert inline_rule("XY101", {"kind": "name", "names": ["a.b"]}).escalate is None


def test_the_below_key_needs_a_version() -> None:
    with pytest.raises(RuleFileError, match="below"):
        inline_rule("XY102", {"kind": "requirement", "names": ["bitsandbytes"], "below": "soon"})


# -- packages and wheel indexes installed from Python --------------------------------------

def test_pip_installs_from_python_are_requirements(rules) -> None:
    source = """\
    import os
    import shlex
    import subprocess
    import sys

    import torch

    pkg = "onnxruntime-migraphx" if torch.version.hip else "onnxruntime-gpu"
    subprocess.check_call([sys.executable, "-m", "pip", "install", pkg])
    cmd = f"{sys.executable} -m pip install onnxruntime-gpu=={VERSION}"
    subprocess.check_call(shlex.split(cmd))
    subprocess.check_call(["bash", "-c", "pip install faiss-gpu"])
    subprocess.check_call([sys.executable, "-m", "pip", "install", "onnxruntime", "faiss-cpu"])
    os.system("echo pip install onnxruntime-gpu")
    """
    assert _codes(source, rules.select(["PS807", "PS818"]), "setup_env.py") == [
        (8, 56, "PS807", "info"),      # the CUDA arm of a vendor branch
        (11, 35, "PS807", "error"),    # f"{sys.executable} -m pip install ..." through shlex.split(cmd)
        (12, 38, "PS818", "error"),    # bash -c "pip install faiss-gpu"
    ]


def test_cuda_wheel_urls_and_pins_in_python_strings(rules) -> None:
    source = '''\
    """Run: pip install torch --index-url https://download.pytorch.org/whl/cu121"""
    INDEXES = {"12.1": "https://download.pytorch.org/whl/cu121",
               "rocm6.4": "https://download.pytorch.org/whl/rocm6.4"}
    url = f"https://download.pytorch.org/whl/cu{CUDA}"
    pins = ["torch==2.1.0+cu118", "torch==2.4.0+rocm6.1", f"torchaudio=={V}+cu{C}"]
    '''
    assert _codes(source, rules.select(["PS857", "PS858"])) == [
        (2, 20, "PS857", "warning"), (4, 7, "PS857", "warning"),
        (5, 9, "PS858", "warning"), (5, 55, "PS858", "warning")]


def test_a_string_regex_must_start_with_literal_text() -> None:
    with pytest.raises(RuleFileError, match="literal text"):
        inline_rule("XY103", {"kind": "string", "regex": r"\w+\.pytorch\.org"})
    with pytest.raises(RuleFileError, match="exactly one"):
        inline_rule("XY104", {"kind": "string", "regex": "abc", "values": ["abc"]})


def test_a_regex_rule_needs_its_rare_literals_in_the_file_to_be_parsed(rules) -> None:
    """PS858 starts with `torch`, in nearly every file of a PyTorch project; the `+cu` it
    also needs keeps the files without it from the parser (the torch-tree scan time)."""
    from portscan.ruleset.prefilter import Fragment

    (sets,) = {s for r in rules.rules if r.code == "PS858" for s in r.pattern.token_sets()}
    assert Fragment("+cu") in sets and Fragment("torch") in sets
    assert not rules.select(["PS858"]).candidates("import torch\nx = 'torch==2.1.0'\n")
