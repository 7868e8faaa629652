"""The worked example of docs/rule-format.md ("Adding a match kind") works as written:
its module, added to the registry, is a kind that rule files can use, with nothing
else edited."""

from __future__ import annotations

import importlib.util
import re
import sys
import textwrap
from pathlib import Path

import pytest

from portscan import kinds
from portscan.ruleset.loader import RuleSet
from portscan.ruleset.schema import parse_rule
from portscan.scan import scan_source

DOCS = Path(__file__).resolve().parents[1] / "docs" / "rule-format.md"


def worked_example() -> str:
    """The ``src/portscan/kinds/include.py`` code block of the docs."""
    text = DOCS.read_text(encoding="utf-8")
    section = text[text.index("## Adding a match kind"):text.index("## Adding a file kind")]
    block = re.search(r"`src/portscan/kinds/include\.py`, new:\n\n(?P<code> +```python\n.*?\n +```)", section, re.S)
    assert block, "the worked example's code block moved"
    code = textwrap.dedent(block["code"])
    return code.split("\n", 1)[1].rsplit("```", 1)[0]


def test_the_docs_include_kind_is_one_module_and_one_registry_line(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "include.py"  # the new module, as the docs write it
    path.write_text(worked_example(), encoding="utf-8")
    spec = importlib.util.spec_from_file_location("docs_include_kind", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    include = module.IncludePattern
    monkeypatch.setitem(kinds.KINDS, include.kind, include)  # the registry line
    rule = parse_rule({
        "code": "PS990", "name": "cublas-include", "category": "kernels", "severity": "warning",
        "confidence": "high", "message": "`${matched}` is a cuBLAS header", "rocm": "r", "rewrite": "w",
        "references": ["https://example.org"], "match": {"kind": "include", "headers": ["cublas*.h"]},
        "bad": [{"source": "x", "path": "k.cu"}], "good": [{"source": "x", "path": "k.cu"}],
    }, "inline")
    source = '#include <cuda_runtime.h>\n#include <cublas_v2.h>\n// #include <cublasLt.h>\n'
    (finding,) = scan_source(source, "csrc/k.cu", RuleSet([rule]))
    assert (finding.rule, finding.span.line, finding.message) == ("PS990", 2, "`cublas_v2.h` is a cuBLAS header")
