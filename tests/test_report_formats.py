"""SARIF, GitHub annotation and concise output."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import FIXTURE
from portscan.fix.engine import fix_source
from portscan.model import Confidence, FileError, Finding, ScanResult, Severity, Span
from portscan.parse import LineIndex
from portscan.report.concise import render_concise
from portscan.report.github import render_github
from portscan.fix.engine import changed_blocks
from portscan.report.sarif import neutral_message, render_sarif, replacements
from portscan.ruleset.loader import RuleSet, load_rules
from portscan.scan import scan_paths

SCHEMA = Path(__file__).parent / "data" / "sarif-schema-2.1.0.json"
LEVELS = {"error": "error", "warning": "warning", "info": "note"}


@pytest.fixture(scope="module")
def ruleset() -> RuleSet:
    return load_rules()


@pytest.fixture(scope="module")
def fixture_scan(ruleset: RuleSet) -> ScanResult:
    return scan_paths([FIXTURE], ruleset)


@pytest.fixture(scope="module")
def fixture_sarif_text(fixture_scan: ScanResult, ruleset: RuleSet) -> str:
    return render_sarif(fixture_scan, ruleset, "9.8.7")


@pytest.fixture(scope="module")
def fixture_sarif(fixture_sarif_text: str) -> dict:
    return json.loads(fixture_sarif_text)


def validate(document: dict) -> None:
    import jsonschema

    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    validator_class = jsonschema.validators.validator_for(schema)  # the draft the schema declares
    validator_class.check_schema(schema)
    errors = sorted(validator_class(schema).iter_errors(document), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors[:10])


def finding(rule: str = "PS999", severity: Severity = Severity.ERROR, path: str = "a.py", line: int = 1,
            message: str = "something is CUDA-only", **changes: object) -> Finding:
    base = Finding(rule=rule, name="some-rule", severity=severity, category="misc", confidence=Confidence.HIGH,
                   path=path, span=Span(line, 5, line, 9), message=message, rewrite="do it differently",
                   references=("https://example.org/doc",), fingerprint=f"fp-{rule}-{path}-{line}")
    return replace(base, **changes)  # type: ignore[arg-type]


def apply_replacements(text: str, replacements: list[dict]) -> str:
    """Apply SARIF replacements (line/column regions, columns in code points) to ``text``."""
    index = LineIndex(text)

    def offset(line: int, column: int) -> int:
        return index.starts[line - 1] + column - 1 if line <= len(index.starts) else len(text)

    edits = []
    for r in replacements:
        region = r["deletedRegion"]
        start = offset(region["startLine"], region["startColumn"])
        end = offset(region["endLine"], region["endColumn"])
        edits.append((start, end, r.get("insertedContent", {}).get("text", "")))
    for start, end, inserted in sorted(edits, reverse=True):
        text = text[:start] + inserted + text[end:]
    return text


# --- SARIF ---------------------------------------------------------------------------


def test_sarif_of_the_fixture_is_valid(fixture_sarif: dict, fixture_scan: ScanResult) -> None:
    validate(fixture_sarif)
    assert fixture_sarif["$schema"] == "https://json.schemastore.org/sarif-2.1.0.json"
    assert fixture_sarif["version"] == "2.1.0"
    (run,) = fixture_sarif["runs"]
    driver = run["tool"]["driver"]
    assert driver["name"] == "portscan" and driver["version"] == "9.8.7"
    assert "informationUri" not in driver
    assert len(run["results"]) == len(fixture_scan.findings) > 20
    assert run["invocations"] == [{"executionSuccessful": True, "toolExecutionNotifications": []}]


def test_sarif_output_is_indented_json_with_a_newline(fixture_sarif_text: str) -> None:
    text = fixture_sarif_text
    assert text.endswith("}\n") and text.startswith('{\n  "$schema"')


def test_sarif_rules_carry_metadata(fixture_sarif: dict, fixture_scan: ScanResult, ruleset: RuleSet) -> None:
    run = fixture_sarif["runs"][0]
    descriptors = run["tool"]["driver"]["rules"]
    ids = [d["id"] for d in descriptors]
    assert ids == sorted({f.rule for f in fixture_scan.findings})
    for descriptor in descriptors:
        rule = ruleset.by_code[descriptor["id"]]
        assert descriptor["name"] == rule.name
        short = descriptor["shortDescription"]["text"]
        assert short and "${" not in short and "$" not in short.replace("$$", "") and len(short) <= 1024
        assert descriptor["fullDescription"]["text"] == rule.rocm[:1023] + ("…" if len(rule.rocm) > 1024 else "")
        assert len(descriptor["fullDescription"]["text"]) <= 1024
        assert descriptor["help"]["text"] == rule.rewrite
        markdown = descriptor["help"]["markdown"]
        assert markdown.startswith(f"# {rule.code} {rule.name}\n") and "<!--" not in markdown.splitlines()[0]
        assert descriptor["helpUri"] == rule.references[0]
        assert descriptor["defaultConfiguration"]["level"] == LEVELS[rule.severity.value]
        props = descriptor["properties"]
        assert props["tags"] == [rule.category, "rocm"]
        assert props["precision"] == rule.confidence.value
        assert props["problem.severity"] == {"error": "error", "warning": "warning",
                                             "info": "recommendation"}[rule.severity.value]
    levels = {d["id"]: d["defaultConfiguration"]["level"] for d in descriptors}
    assert {"error", "warning", "note"} <= set(levels.values())


def test_short_description_neutralises_template_variables() -> None:
    assert neutral_message("`${module}` costs $$5 via $name") == "`<module>` costs $5 via <name>"
    assert neutral_message("`${matched}` is None") == "`<expression>` is None"


def test_sarif_results_point_at_the_findings(fixture_sarif: dict, fixture_scan: ScanResult) -> None:
    run = fixture_sarif["runs"][0]
    descriptors = run["tool"]["driver"]["rules"]
    root_uri = run["originalUriBaseIds"]["%SRCROOT%"]["uri"]
    assert root_uri == FIXTURE.as_uri() + "/"
    assert run["columnKind"] == "unicodeCodePoints"
    for result, f in zip(run["results"], fixture_scan.findings, strict=True):
        assert result["ruleId"] == f.rule
        assert descriptors[result["ruleIndex"]]["id"] == f.rule
        assert result["level"] == LEVELS[f.severity.value]
        assert result["message"]["text"].startswith(f.message)
        (location,) = result["locations"]
        artifact = location["physicalLocation"]["artifactLocation"]
        assert artifact == {"uri": f.path, "uriBaseId": "%SRCROOT%"}
        assert not artifact["uri"].startswith("/") and not re.match(r"^[a-z]+:", artifact["uri"])
        region = location["physicalLocation"]["region"]
        assert region == {"startLine": f.span.line, "startColumn": f.span.column,
                          "endLine": f.span.end_line, "endColumn": f.span.end_column}
        assert region["startLine"] >= 1 and region["startColumn"] >= 1
        assert (region["endLine"], region["endColumn"]) > (region["startLine"], region["startColumn"])
    guarded = [r for r, f in zip(run["results"], fixture_scan.findings, strict=True) if f.guard]
    assert guarded and all(r["message"]["text"].endswith(")") and "(guarded: " in r["message"]["text"]
                           for r in guarded)


def test_sarif_fingerprints_are_unique(fixture_sarif: dict) -> None:
    hashes = [r["partialFingerprints"]["primaryLocationLineHash"] for r in fixture_sarif["runs"][0]["results"]]
    assert len(hashes) == len(set(hashes))
    assert all(re.fullmatch(r"[0-9a-f]+:[0-9]+", h) for h in hashes)


def test_sarif_counts_repeated_fingerprints(ruleset: RuleSet, tmp_path: Path) -> None:
    same = [finding(line=3, fingerprint="abc"), finding(line=9, fingerprint="abc"), finding(line=5, fingerprint="def")]
    document = json.loads(render_sarif(ScanResult(str(tmp_path), 1, tuple(same)), ruleset, "1"))
    validate(document)
    hashes = [r["partialFingerprints"]["primaryLocationLineHash"] for r in document["runs"][0]["results"]]
    assert hashes == ["abc:1", "abc:2", "def:1"]
    # PS999 is in no rule set: its metadata comes from the finding
    assert document["runs"][0]["tool"]["driver"]["rules"][0]["id"] == "PS999"


def test_sarif_fix_on_a_fixable_finding(fixture_sarif: dict, fixture_scan: ScanResult,
                                        ruleset: RuleSet) -> None:
    pairs = list(zip(fixture_sarif["runs"][0]["results"], fixture_scan.findings, strict=True))
    result, f = next((r, f) for r, f in pairs if f.path == "utils/gpu.py" and f.rule == "PS602")
    assert f.fix == "safe" and result["properties"] == {"portscan/fix": "safe"}
    (fix,) = result["fixes"]
    assert fix["description"]["text"] == "portscan fix"
    (change,) = fix["artifactChanges"]
    assert change["artifactLocation"] == {"uri": "utils/gpu.py", "uriBaseId": "%SRCROOT%"}
    inserted = "".join(r.get("insertedContent", {}).get("text", "") for r in change["replacements"])
    assert "except ImportError" in inserted and "import pynvml" in inserted
    # the replacements turn the file into what `portscan fix` writes for this rule
    text = (FIXTURE / "utils" / "gpu.py").read_text(encoding="utf-8")
    expected = fix_source(text, "utils/gpu.py", ruleset.select(["PS602"])).fixed
    assert expected != text
    assert apply_replacements(text, change["replacements"]) == expected

    unsafe = [r for r, f in pairs if f.fix == "unsafe" and "fixes" in r]
    assert unsafe and all(r["fixes"][0]["description"]["text"] == "portscan fix --unsafe-fixes" for r in unsafe)


def test_sarif_no_fix_on_a_non_fixable_finding(fixture_sarif: dict, fixture_scan: ScanResult) -> None:
    pairs = list(zip(fixture_sarif["runs"][0]["results"], fixture_scan.findings, strict=True))
    result, f = next((r, f) for r, f in pairs if f.path == "utils/gpu.py" and f.rule == "PS601")
    assert f.fix is None
    assert "fixes" not in result and "properties" not in result
    assert all("fixes" not in r for r, f in pairs if f.fix is None)


def test_sarif_fix_hunks_belong_to_their_finding(fixture_sarif: dict, fixture_scan: ScanResult) -> None:
    """A fix shows only the changes near its finding, never those of another finding
    of its rule (the engine says which changes are whose; imports may be shared)."""
    pairs = list(zip(fixture_sarif["runs"][0]["results"], fixture_scan.findings, strict=True))
    for result, f in pairs:
        for fix in result.get("fixes", []):
            for r in fix["artifactChanges"][0]["replacements"]:
                region = r["deletedRegion"]
                others = [o for _, o in pairs if o is not f and o.path == f.path and o.rule == f.rule]
                near_me = region["startLine"] <= f.span.end_line + 3 and region["endLine"] >= f.span.line - 3
                near_other = any(region["startLine"] <= o.span.end_line + 3 and region["endLine"] >= o.span.line - 3
                                 for o in others)
                assert near_me or not near_other, (f, region)


@pytest.mark.parametrize(("old", "new"), [
    ("a\nb\nc\n", "a\nB\nc\n"),
    ("a\nb\nc\n", "a\nc\n"),
    ("a\nb\nc\n", "a\nb\n"),  # delete the last line
    ("a\nb\nc\n", "a\nb\nc\nd\n"),  # append at the end
    ("a\nb\nc", "a\nb\nC"),  # no final newline
    ("a\nb\nc", "a\nb\nc\n"),
    ("a\r\nb\r\nc\r\n", "x\r\na\r\nc\r\n"),
    ("import x\n\ndef f():\n    return x.y()\n", "try:\n    import x\nexcept ImportError:\n    x = None\n\n"
                                                  "def f():\n    return x.y()\n"),
    ("é = 1\nü = 2\n", "é = 1\nü = 3\nnew = 4\n"),
])
def test_replacements_reproduce_the_new_text(old: str, new: str) -> None:
    """The engine's changed blocks, as SARIF replacements, turn the old text into the new."""
    blocks = changed_blocks(old, new)
    assert blocks
    found = replacements(old, new, blocks)
    assert len(found) == len(blocks)
    assert apply_replacements(old, found) == new
    for r in found:
        region = r["deletedRegion"]
        assert region["startLine"] >= 1 and region["startColumn"] >= 1


def test_sarif_reports_file_errors(ruleset: RuleSet, tmp_path: Path) -> None:
    (tmp_path / "bad.py").write_text("import pynvml\n\ndef broken(:\n    pass\n", encoding="utf-8")
    (tmp_path / "with space.py").write_text("import pynvml\n\n\ndef f():\n    return pynvml.x()\n",
                                            encoding="utf-8")
    result = scan_paths([tmp_path], ruleset)
    assert [e.path for e in result.errors] == ["bad.py"] and result.findings
    document = json.loads(render_sarif(result, ruleset, "1"))
    validate(document)
    run = document["runs"][0]
    (invocation,) = run["invocations"]
    assert invocation["executionSuccessful"] is True  # a parse error is the file's problem, not ours
    (note,) = invocation["toolExecutionNotifications"]
    assert note["level"] == "warning"
    assert note["message"]["text"].startswith("bad.py: syntax error")
    assert note["locations"][0]["physicalLocation"]["artifactLocation"] == {"uri": "bad.py",
                                                                            "uriBaseId": "%SRCROOT%"}
    uris = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in run["results"]}
    assert uris == {"with%20space.py"}
    assert any("fixes" in r for r in run["results"])

    internal = replace(result, errors=(FileError("x.py", "internal", "internal error (KeyError)"),))
    document = json.loads(render_sarif(internal, ruleset, "1"))
    validate(document)
    (invocation,) = document["runs"][0]["invocations"]
    assert invocation["executionSuccessful"] is False
    assert invocation["toolExecutionNotifications"][0]["level"] == "error"


def test_sarif_without_findings_is_valid(ruleset: RuleSet, tmp_path: Path) -> None:
    document = json.loads(render_sarif(ScanResult(str(tmp_path), 0), ruleset, "1"))
    validate(document)
    assert document["runs"][0]["results"] == [] and document["runs"][0]["tool"]["driver"]["rules"] == []


def test_sarif_omits_fixes_when_the_file_is_gone(ruleset: RuleSet, tmp_path: Path) -> None:
    f = finding(rule="PS602", path="missing.py", fix="safe")
    document = json.loads(render_sarif(ScanResult(str(tmp_path), 1, (f,)), ruleset, "1"))
    validate(document)
    (result,) = document["runs"][0]["results"]
    assert "fixes" not in result and result["properties"] == {"portscan/fix": "safe"}


# --- GitHub annotations --------------------------------------------------------------


def test_github_annotation_and_escaping() -> None:
    f = finding(path="dir,x/a:b.py", line=7, message="50% of a,b: fails\r\nnext", guard="try-fallback",
                rule="PS101", name="tensorrt-import", severity=Severity.WARNING)
    assert render_github(ScanResult("/r", 1, (f,))) == (
        "::warning file=dir%2Cx/a%3Ab.py,line=7,endLine=7,col=5,endColumn=9,title=PS101 tensorrt-import"
        "::50%25 of a,b: fails%0D%0Anext (guarded: try-fallback)\n")


def test_github_levels_and_file_errors() -> None:
    findings = (finding(severity=Severity.INFO, path="z.py"), finding(severity=Severity.ERROR, path="y.py"))
    errors = (FileError("bad.py", "parse", "syntax error at line 1, column 5: oops"),)
    lines = render_github(ScanResult("/r", 3, findings, errors)).splitlines()
    assert lines == [
        "::error file=bad.py,title=portscan::could not scan: syntax error at line 1, column 5: oops",
        "::error file=y.py,line=1,endLine=1,col=5,endColumn=9,title=PS999 some-rule::something is CUDA-only",
        "::notice file=z.py,line=1,endLine=1,col=5,endColumn=9,title=PS999 some-rule::something is CUDA-only",
    ]
    assert render_github(ScanResult("/r", 0)) == ""


def test_github_caps_each_level_and_says_how_many_are_left_out() -> None:
    findings = ([finding(severity=Severity.ERROR, path=f"e{i:02}.py") for i in range(11)]
                + [finding(severity=Severity.WARNING, path=f"w{i}.py") for i in range(3)]
                + [finding(severity=Severity.INFO, path=f"n{i:02}.py") for i in range(12)])
    errors = (FileError("broken.py", "decode", "cannot decode"),)
    lines = render_github(ScanResult("/r", 30, tuple(reversed(findings)), errors)).splitlines()
    by_level = [line.split(" ", 1)[0].split("::")[1] for line in lines]
    assert by_level[:10] == ["error"] * 10 and by_level[10:13] == ["warning"] * 3
    assert by_level[13:] == ["notice"] * 10  # 9 findings and the summary
    assert lines[0].startswith("::error file=broken.py,title=portscan::")
    assert [line.split(",", 1)[0] for line in lines[1:10]] == [f"::error file=e{i:02}.py" for i in range(9)]
    assert lines[13].startswith("::notice file=n00.py,")
    # 12 errors -> 10 shown; 12 notices -> 9 shown (one slot for the summary)
    assert lines[-1] == ("::notice::portscan: 5 more findings are not shown as annotations; "
                         "upload SARIF (portscan scan --format sarif) to see them all")
    assert len(lines) == 23


def test_github_cap_is_configurable() -> None:
    findings = tuple(finding(severity=Severity.WARNING, path=f"w{i}.py") for i in range(4))
    lines = render_github(ScanResult("/r", 4, findings), per_level=3).splitlines()
    assert len(lines) == 4 and lines[-1].startswith("::notice::portscan: 1 more finding is not shown")
    assert "more" not in render_github(ScanResult("/r", 4, findings), per_level=4)


# --- concise -------------------------------------------------------------------------


def test_concise_lines() -> None:
    findings = (finding(path="src/a.py", line=3),
                finding(path="b.py", line=12, severity=Severity.WARNING, guard="vendor-branch", fix="safe"),
                finding(path="c.py", severity=Severity.INFO, fix="unsafe"))
    errors = (FileError("bad.py", "parse", "syntax error\nat line 1"),)
    assert render_concise(ScanResult("/r", 4, findings, errors)) == (
        "src/a.py:3:5: PS999 [error] something is CUDA-only\n"
        "b.py:12:5: PS999 [warning] something is CUDA-only (guarded: vendor-branch) [fix]\n"
        "c.py:1:5: PS999 [info] something is CUDA-only [unsafe fix]\n"
        "bad.py: error: syntax error at line 1\n")
    assert render_concise(ScanResult("/r", 0)) == ""


def test_concise_of_the_fixture(fixture_scan: ScanResult) -> None:
    lines = render_concise(fixture_scan).splitlines()
    assert len(lines) == len(fixture_scan.findings)
    assert all(re.fullmatch(r"[^:]+:\d+:\d+: PS\d{3} \[(error|warning|info)\] .+", line) for line in lines)
    assert "utils/gpu.py:6:8: PS602 [error] `pynvml` binds NVIDIA's NVML" in render_concise(fixture_scan)


def test_sarif_fixes_come_from_the_cache_when_the_file_is_unchanged(
        fixture_scan: ScanResult, fixture_sarif: dict, ruleset: RuleSet, tmp_path: Path, monkeypatch) -> None:
    """With a cache folder a file's fixes are kept: the second log is the same without
    running the fix engine, and both equal the log made without a cache."""
    from portscan.report import sarif as sarif_module

    first = json.loads(render_sarif(fixture_scan, ruleset, "9.8.7", cache=tmp_path))
    assert first == fixture_sarif and any("fixes" in r for r in first["runs"][0]["results"])
    def no_fixing(root: Path, texts: dict[str, str], rules: RuleSet) -> dict:
        assert not texts, f"fixed {sorted(texts)} again"
        return {}

    monkeypatch.setattr(sarif_module, "_fix", no_fixing)
    assert json.loads(render_sarif(fixture_scan, ruleset, "9.8.7", cache=tmp_path)) == first
