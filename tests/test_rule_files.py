"""The rule-file format: strict loading, and a lint of the built-in rule pack."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from portscan.ruleset.schema import RuleFileError
from portscan.ruleset.loader import RuleSetError, builtin_rules_dir, load_rule_file, load_rules

#: The hundreds digit of a built-in code names its category (and its folder).
CATEGORIES = {"1": "inference", "2": "apex", "3": "backends", "4": "version", "5": "hardware",
              "6": "tooling", "7": "libraries", "8": "packaging", "9": "kernels"}

VALID = '''
code = "XY101"
name = "demo-rule"
category = "demo"
severity = "warning"
confidence = "medium"
message = "`${matched}` is a demo"
rocm = "What happens on ROCm."
rewrite = "What to write instead."
references = ["https://example.org/doc"]

[match]
kind = "name"
names = ["demo.thing"]

[[bad]]
source = """
import demo
# expect
demo.thing
"""

[[good]]
source = "x = 1"
'''


def write(tmp_path: Path, text: str, name: str = "demo-rule.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def error_for(tmp_path: Path, text: str) -> RuleFileError:
    with pytest.raises(RuleFileError) as info:
        load_rule_file(write(tmp_path, text))
    return info.value


def test_valid_file_loads(tmp_path: Path) -> None:
    rule = load_rule_file(write(tmp_path, VALID))
    assert (rule.code, rule.name, rule.pattern.kind) == ("XY101", "demo-rule", "name")


def match_as(pattern: str):
    """An edit that gives VALID this ``[match]`` body instead of its name pattern."""
    return lambda t: t.replace('kind = "name"\nnames = ["demo.thing"]', pattern)


@pytest.mark.parametrize("edit, key, problem", [
    (lambda t: t.replace('severity = "warning"', 'severity = "fatal"'), "severity", "expected one of"),
    (lambda t: t.replace('confidence = "medium"\n', ""), "confidence", "missing required key"),
    (lambda t: t.replace('references = ["https://example.org/doc"]', 'references = ["http://x"]'),
     "references", "not a valid https URL"),
    (lambda t: 'colour = "red"\n' + t, "colour", "unknown key"),
    (lambda t: t + 'colour = "red"\n', "good[0].colour", "unknown key"),
    (lambda t: t.replace('kind = "name"', 'kind = "name"\nunknown = 1'), "match.unknown", "unknown key"),
    (lambda t: t.replace('confidence = "medium"', 'confidence = "medium"\nraises = ["not an exception"]'),
     "raises", "not a valid exception class name"),
    (match_as('kind = "compare"\ncallees = ["torch.cuda.get_device_capability"]\ntuning = "yes"'),
     "match.tuning", "expected true or false"),
    (lambda t: t.replace('kind = "name"', 'kind = "regexp"'), "match.kind", "expected one of"),
    (lambda t: t.replace('names = ["demo.thing"]', 'names = ["demo..thing"]'), "match.names",
     "not a dotted name"),
    (lambda t: t.replace('code = "XY101"', 'code = "101"'), "code", "not a code"),
    (lambda t: t.replace('name = "demo-rule"', 'name = "Demo_Rule"'), "name", "not kebab-case"),
    (lambda t: t.replace("${matched}", "${nope}"), "message", "unknown variable ${nope}"),
    (lambda t: t.replace("`${matched}` is a demo", "costs $5"), "message", "stray `$`"),
    (lambda t: t.replace('[[good]]\nsource = "x = 1"', ""), "good", "missing required key"),
    (lambda t: "good = []\n" + t.replace('[[good]]\nsource = "x = 1"', ""), "good", "at least one"),
    (match_as('kind = "call"\ncallees = ["demo.f"]\n[[match.args]]\nkeyword = "x"\nregex = "("'),
     "match.args[0].regex", "invalid regular expression"),
    (match_as('kind = "call"\ncallees = ["demo.f"]\n[[match.args]]\nkeyword = "x"'),
     "match.args[0]", "give exactly one of"),
    (match_as('kind = "compare"\ncallees = ["demo.f"]\noperators = ["=~"]'),
     "match.operators", "is not one of"),
    (match_as('kind = "string"\nvalues = ["CUDA out of memory"]'),
     "match.values", "not a valid word-like string"),
    (match_as('kind = "string"\ntested = "yes"\nvalues = ["CUDA out of memory"]'),
     "match.tested", "expected true or false"),
    (match_as('kind = "string"\ntested = true\nvalues = ["two\\nlines"]'),
     "match.values", "not a valid one-line text"),
    (match_as('kind = "string"\nvalues = ["CUDA"]\nalongside = ["out of memory"]'),
     "match.alongside", "only with `tested = true`"),
    (match_as('kind = "string"\nvalues = ["CUDA"]\nunless_type_tested = ["torch.OutOfMemoryError"]'),
     "match.unless_type_tested", "only with `tested = true`"),
    (match_as('kind = "string"\ntested = true\nvalues = ["CUDA"]\nunless_type_tested = ["torch..Error"]'),
     "match.unless_type_tested", "not a dotted name"),
    (match_as('kind = "name"\nnames = ["demo.thing"]\nunless_listed_with = ["demo..other"]'),
     "match.unless_listed_with", "not a dotted name"),
    (match_as('kind = "call"\ncallees = ["demo.f"]\n[[match.args]]\nposition = 0\nregex = "a"\npath_regex = "b"'),
     "match.args[0]", "give exactly one of"),
    (match_as('kind = "call"\ncallees = ["demo.f"]\n[[match.args]]\nkeyword = "paths"\ntext = false'),
     "match.args[0].text", "only `text = true`"),
    (match_as('kind = "call"\ncallees = ["demo.f"]\n[[match.args]]\nkeyword = "paths"\ntext = true\nregex = "a"'),
     "match.args[0]", "give exactly one of"),
    (match_as('kind = "call"\ncallees = ["demo.f"]\n[[match.args]]\nkeyword = "gpu"'
              '\ncalls = ["torch.cuda.is_available"]\ncontains = ["a"]'),
     "match.args[0]", "give exactly one of"),
    (match_as('kind = "call"\ncallees = ["demo.f"]\n[[match.args]]\nkeyword = "gpu"\ncalls = ["torch..cuda"]'),
     "match.args[0].calls", "not a dotted name"),
    (match_as('kind = "import"\nmodules = ["demo"]\nnot_modules = ["other.masks"]'),
     "match.not_modules", "not below one of the modules"),
    (match_as('kind = "import"\nmodules = ["demo"]\nnot_modules = ["demo"]'),
     "match.not_modules", "not below one of the modules"),
    (match_as('kind = "kernel"\nregex = "cudnn"\napi_prefixes = ["cudnn*"]'),
     "match.api_prefixes", "not a valid identifier prefix"),
    (match_as('kind = "name"\nnames = ["demo.thing"]\nper_import = "yes"'),
     "match.per_import", "expected true or false"),
    (match_as('kind = "name"\nnames = ["demo.thing"]\nfirst_party = 1'),
     "match.first_party", "expected true or false"),
    (lambda t: t.replace('[[good]]\nsource = "x = 1"', '[[good]]\nsource = "x = 1"\nfirst_party = ["a.b"]'),
     "good[0].first_party", "not a valid module name"),
])
def test_invalid_files_name_the_file_and_key(tmp_path: Path, edit, key: str, problem: str) -> None:
    error = error_for(tmp_path, edit(VALID))
    assert error.key == key
    assert problem in error.problem
    assert str(error).startswith(f"{tmp_path / 'demo-rule.toml'}: {key}: ")


def test_invalid_toml_names_the_file(tmp_path: Path) -> None:
    error = error_for(tmp_path, 'code = "XY101\n')
    assert "invalid TOML" in str(error) and str(tmp_path / "demo-rule.toml") in str(error)


def test_load_rules_reports_every_broken_file_at_once(tmp_path: Path) -> None:
    write(tmp_path, VALID.replace('severity = "warning"', 'severity = "x"'), "a.toml")
    write(tmp_path, "not toml [", "b.toml")
    write(tmp_path, VALID, "c.toml")
    with pytest.raises(RuleSetError) as info:
        load_rules([tmp_path])
    assert [Path(e.path).name for e in info.value.errors] == ["a.toml", "b.toml"]


def test_duplicate_codes_and_unknown_supersedes_are_errors(tmp_path: Path) -> None:
    write(tmp_path, VALID, "a.toml")
    write(tmp_path, VALID.replace('name = "demo-rule"', 'name = "other"')
          .replace('rewrite =', 'supersedes = ["XY999"]\nrewrite ='), "b.toml")
    with pytest.raises(RuleSetError) as info:
        load_rules([tmp_path])
    problems = sorted((e.key, e.problem) for e in info.value.errors)
    assert problems == [("code", f"'XY101' is already used by {tmp_path / 'a.toml'}"),
                        ("supersedes", "no rule XY999")]


def test_rule_files_are_data_not_code(tmp_path: Path) -> None:
    """Values that look like code are kept as text, never evaluated."""
    marker = tmp_path / "evaluated"
    text = VALID.replace('rewrite = "What to write instead."',
                         f'rewrite = "__import__(\'pathlib\').Path({str(marker)!r}).touch()"')
    rule = load_rule_file(write(tmp_path, text))
    assert "__import__" in rule.rewrite and not marker.exists()


# --------------------------------------------------------------------- the built-in pack


BUILTIN = load_rules()


@pytest.mark.parametrize("rule", BUILTIN.rules, ids=[r.code for r in BUILTIN.rules])
def test_builtin_rule_is_well_formed(rule) -> None:
    path = Path(rule.origin)
    assert path.stem == rule.name, "the file is named after the rule"
    assert re.fullmatch(r"PS\d{3}", rule.code)
    assert CATEGORIES[rule.code[2]] == rule.category == path.parent.name
    assert rule.references and all(u.startswith("https://") for u in rule.references)
    assert rule.rocm and rule.rewrite
    assert not rule.message.endswith(".")


def test_builtin_rules_dir_holds_the_repository_rules() -> None:
    """A non-editable install ships rules/ as portscan/rules; both hold the same files."""
    repo_rules = Path(__file__).resolve().parents[1] / "rules"
    shipped = sorted(p.relative_to(builtin_rules_dir()).as_posix()
                     for p in builtin_rules_dir().rglob("*.toml"))
    assert shipped == sorted(p.relative_to(repo_rules).as_posix() for p in repo_rules.rglob("*.toml"))
    assert len(shipped) == len(BUILTIN)
