"""Bad input gets a clear per-file error; the scan goes on and nothing crashes."""

from __future__ import annotations

from pathlib import Path

import pytest

from portscan.scan import scan_paths

TOKEN = "import pynvml\n"  # makes the prefilter send the file to the parser


def scan_dir(tmp_path: Path, rules, files: dict[str, bytes]):
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    (tmp_path / "zz_good.py").write_text(TOKEN)
    result = scan_paths([tmp_path], rules)
    assert [f.path for f in result.findings if f.path == "zz_good.py"] == ["zz_good.py"], \
        "the scan must go on past the bad file"
    return result


@pytest.mark.parametrize("data, kind, text", [
    (TOKEN.encode() + b"def f(:\n", "parse", "syntax error at line 2"),
    (TOKEN.encode() + b'print "hi"\n', "parse", "Python 2"),
    (TOKEN.encode() + b"x = '\xff\xfe'\n", "decode", "cannot decode as utf-8"),
    (b"# -*- coding: klingon -*-\n" + TOKEN.encode(), "decode", "bad encoding declaration"),
    (TOKEN.encode() + b"\x00\x01\x02binary", "binary", "NUL"),
    (TOKEN.encode() + b"x = " + b"(" * 5000 + b"1" + b")" * 5000 + b"\n", "parse", "too deeply"),
    (TOKEN.encode() + b"x = " + b"[" * 2000 + b"1" + b"]" * 2000 + b"\n", "parse", "too deeply"),
    (TOKEN.encode() + b"x = " + b"f(" * 2000 + b"1" + b")" * 2000 + b"\n", "parse", "too deeply"),
    (TOKEN.encode() + b"x = " + b"+".join([b"a"] * 20000) + b"\n", "parse", "too deeply"),
    (TOKEN.encode() + b"x = " + b"-" * 20000 + b"1\n", "parse", "too deeply"),
    (TOKEN.encode() + b"x = a \\\n" + b"+ a \\\n" * 20000 + b"+ a\n", "parse", "too deeply"),
    (TOKEN.encode() + b"x = (a\n" + b"+ a\n" * 20000 + b")\n", "parse", "too deeply"),
])
def test_unscannable_file_becomes_an_error(tmp_path: Path, rules, data: bytes, kind: str,
                                           text: str) -> None:
    result = scan_dir(tmp_path, rules, {"bad.py": data})
    assert [(e.path, e.kind) for e in result.errors] == [("bad.py", kind)]
    assert text in result.errors[0].message


@pytest.mark.parametrize("data", [
    b"",
    b"\n\n",
    "# -*- coding: latin-1 -*-\nimport pynvml\nname = 'caf\xe9'\n".encode("latin-1"),
    b"\xef\xbb\xbfimport pynvml\n",
    b"import pynvml\r\nx = 1\r\n",
    b"if True:\n\timport pynvml\n",
    b"import pynvml\nVOCAB = [\n" + b'    "word",\n' * 20000 + b"]\n",
    b"import pynvml\nx = '" + b"(" * 300 + b"'\n",
    b"import pynvml\nBLOB = (\n" + b'    "QUJD"\n' * 3000 + b")\n",  # deep in LibCST, flat in CPython
])
def test_odd_but_valid_files_scan(tmp_path: Path, rules, data: bytes) -> None:
    result = scan_dir(tmp_path, rules, {"odd.py": data})
    assert result.errors == ()
    expected = [] if b"pynvml" not in data else ["odd.py"]
    assert [f.path for f in result.findings if f.path == "odd.py"] == expected


def test_latin1_file_reports_the_right_position(tmp_path: Path, rules) -> None:
    data = "# -*- coding: latin-1 -*-\nx = 'é'; import pynvml\n".encode("latin-1")
    result = scan_dir(tmp_path, rules, {"l1.py": data})
    (finding,) = [f for f in result.findings if f.path == "l1.py"]
    assert (finding.span.line, finding.span.column) == (2, 17)


def test_unreadable_file_is_reported(tmp_path: Path, rules, monkeypatch) -> None:
    real = Path.read_bytes

    def read_bytes(self: Path) -> bytes:
        if self.name == "locked.py":
            raise PermissionError(13, "Permission denied")
        return real(self)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    result = scan_dir(tmp_path, rules, {"locked.py": TOKEN.encode()})
    assert [(e.path, e.kind, e.message) for e in result.errors] == [
        ("locked.py", "read", "cannot read file: Permission denied")]


def test_file_deleted_between_discovery_and_reading(tmp_path: Path, rules, monkeypatch) -> None:
    from portscan import scan as scan_module

    real = scan_module.discover

    def discover_then_delete(paths, *args):
        discovery = real(paths, *args)
        (tmp_path / "gone.py").unlink()
        return discovery

    monkeypatch.setattr(scan_module, "discover", discover_then_delete)
    result = scan_dir(tmp_path, rules, {"gone.py": TOKEN.encode()})
    assert [(e.path, e.kind) for e in result.errors] == [("gone.py", "read")]
