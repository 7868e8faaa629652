"""Shell scripts: a program the script tests for before running it is handled."""

from __future__ import annotations

from portscan.match.common import presence_tested
from portscan.scan import scan_source


def test_a_program_the_script_tests_for_first_is_handled(rules) -> None:
    """`if ! command -v nvidia-smi; then return 0; fi` (LMCache's CI helpers): the script
    copes with the program's absence, as `nvidia-smi || true` does; a script that does not
    ask stays an error."""
    checked = ("if ! command -v nvidia-smi &>/dev/null; then\n    echo 'no GPU check'\n    return 0\nfi\n"
               "gpus=$(nvidia-smi --query-gpu=index --format=csv,noheader)\n")
    found = [(f.span.line, f.severity.value, f.guard) for f in scan_source(checked, "ci/helpers.sh", rules)
             if f.rule == "PS601"]
    assert found == [(5, "info", "handled")]
    for test in ("which nvidia-smi >/dev/null || exit 0\n", "hash nvidia-smi 2>/dev/null && ",
                 "type -P nvidia-smi >/dev/null && "):
        text = test + "nvidia-smi -L\n"
        assert {f.guard for f in scan_source(text, "run.sh", rules) if f.rule == "PS601"} == {"handled"}
    plain = "gpus=$(nvidia-smi -L | wc -l)\n"
    assert [f.severity.value for f in scan_source(plain, "run.sh", rules) if f.rule == "PS601"] == ["error"]
    assert presence_tested("command -V foo; which 'bar'") == {"foo", "bar"}


def test_a_program_run_through_a_variable_is_that_program(rules) -> None:
    """f5-tts's ``TRTEXEC="/usr/src/tensorrt/bin/trtexec"`` then ``${TRTEXEC} --onnx=...``
    runs trtexec, as a Makefile's ``$(NVCC)`` runs nvcc; a value that is not a literal, or
    a name assigned after the command, tells nothing."""
    script = """\
#!/bin/bash
TRTEXEC="/usr/src/tensorrt/bin/trtexec"
export NVCC=/usr/local/cuda/bin/nvcc
${TRTEXEC} --onnx=model.onnx --saveEngine=model.plan
"$NVCC" -O3 -c kernel.cu
SMI=$(command -v nvidia-smi)
$SMI -L
$LATER --help
LATER=nvidia-smi
TRTEXEC=echo
$TRTEXEC done
"""
    found = [(f.span.line, f.rule) for f in scan_source(script, "scripts/build_engine.sh", rules)
             if f.rule in ("PS106", "PS407", "PS601")]
    assert found == [(4, "PS106"), (5, "PS407")]
