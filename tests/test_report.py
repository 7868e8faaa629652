"""The rich report: grouping, code frames, summary, and safety against hostile text."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from portscan.report.text import render_text
from portscan.scan import scan_paths

from conftest import FIXTURE


def render(result, width: int = 120) -> str:
    buffer = io.StringIO()
    render_text(result, Console(file=buffer, width=width, color_system=None, highlight=False))
    return buffer.getvalue()


def test_fixture_report_groups_by_file_with_frames_and_summary(rules) -> None:
    out = render(scan_paths([FIXTURE], rules))
    files = [line for line in out.splitlines() if line and not line.startswith((" ", "\t"))
             and line.endswith(".py")]
    assert files == ["models/vit.py", "scripts/export_tensorrt.py", "setup.py", "train.py",
                     "utils/gpu.py"]
    assert "13:18 PS202 warning `apex.amp` was removed from NVIDIA apex" in out
    assert " > 13 │ from apex import amp\n" in out
    assert "│                  ^^^\n" in out  # the underline sits under `amp`
    assert "rewrite: `with torch.amp.autocast(\"cuda\", dtype=torch.float16):`" in out
    assert "see: https://github.com/NVIDIA/apex/pull/1896" in out
    assert "75 findings in 12 of 16 files: 35 error, 26 warning, 14 info" in out
    for row in ("apex           -       12     -     12", "version        4        1     1      6"):
        assert row in out


def test_clean_scan_says_so(tmp_path: Path, rules) -> None:
    (tmp_path / "ok.py").write_text("x = 1\n")
    assert "No findings in 1 files." in render(scan_paths([tmp_path], rules))


def test_hostile_paths_and_code_cannot_inject_markup_or_escape_codes(tmp_path: Path, rules) -> None:
    name = "[bold red]evil\x1b[31m.py"
    (tmp_path / name).write_text("import pynvml  # [link=http://x]click[/link] \x1b]0;title\x07\n")
    out = render(scan_paths([tmp_path], rules))
    assert "\x1b" not in out and "\x07" not in out
    assert "[bold red]evil?[31m.py" in out
    assert "[link=http://x]click[/link]" in out


def test_errors_are_listed(tmp_path: Path, rules) -> None:
    (tmp_path / "bad.py").write_text("import pynvml\ndef f(:\n")
    out = render(scan_paths([tmp_path], rules))
    assert "Files that could not be scanned" in out
    assert "bad.py (parse): syntax error at line 2" in out
    assert "1 could not be scanned" in out
