"""Kinds match plain site values, without a parse: a few of their decisions, directly."""

from __future__ import annotations

from portscan.kinds.calls import ArgCondition
from portscan.kinds.command import CommandPattern
from portscan.kinds.compare import ComparePattern
from portscan.kinds.requirement import RequirementPattern
from portscan.kinds.sites import ArgumentSite, RequirementSite
from portscan.ruleset.table import MISSING


def test_a_presence_condition_does_not_guess_through_kwargs() -> None:
    absent = ArgCondition(keyword="backend", position=None, present=False)
    assert absent.accepts(None, hidden=False)
    assert not absent.accepts(None, hidden=True)
    assert not absent.accepts(ArgumentSite("x", "x"), hidden=False)


def test_a_contains_condition_reads_the_items_of_a_literal_collection() -> None:
    condition = ArgCondition(keyword="providers", position=None, contains=("CUDAExecutionProvider",))
    assert condition.accepts(ArgumentSite(MISSING, None, ("CPUExecutionProvider", "CUDAExecutionProvider")), False)
    assert not condition.accepts(ArgumentSite("CUDAExecutionProvider", "CUDAExecutionProvider"), False)


def test_a_comparison_needs_the_accessor_the_rule_names() -> None:
    pattern = ComparePattern(callees=("torch.cuda.get_device_capability",), indices=(0,), values=(8,))
    names = ["torch.cuda.get_device_capability"]
    assert pattern.matched_callee(names, ("index", 0), ">=", 8) == names[0]
    assert pattern.matched_callee(names, ("index", 1), ">=", 8) is None
    assert pattern.matched_callee(names, ("attr", "major"), ">=", 8) is None
    assert pattern.matched_callee(names, None, ">=", MISSING) is None


def test_a_requirement_matches_by_normalised_name_section_and_local_label() -> None:
    pattern = RequirementPattern(names=("torch",), local_versions=("cu*",), sections=("install",))
    assert pattern.matches_requirement(RequirementSite("torch", (), ("cu118",), None, "install"))
    assert not pattern.matches_requirement(RequirementSite("torch", (), ("rocm6.2",), None, "install"))
    assert not pattern.matches_requirement(RequirementSite("torch", (), ("cu118",), None, "build"))


def test_a_command_reports_its_first_matching_argument_after_the_subcommand() -> None:
    pattern = CommandPattern(programs=("docker",), args=("--gpus*",), subcommands=("run",))
    assert pattern.matching_argument("docker", ["run", "--rm", "--gpus=all", "--gpus", "x"]) == 2
    assert pattern.matching_argument("docker", ["build", "--gpus=all"]) is None
    assert pattern.matching_argument("podman", ["run", "--gpus=all"]) is None
