"""The closed set of match kinds a rule file's ``[match]`` may use: one module each.

A kind's module holds its frozen dataclass, which reads itself strictly from the
``[match]`` table (``read``, unknown keys are errors), states the message variables it
provides (``variables``), the file kinds it applies to (``surfaces``), the literal tokens
a file must contain for it to possibly match (``token_sets``, the prefilter), what it
matches in words (``describe``, the rule page), and how it finds its matches in the
sites its surfaces hand it (Python kinds: ``python_sites`` and ``resolve_python``, see
:mod:`portscan.kinds.python_surface`). :data:`Pattern` below is the registry:
one line per kind. ``docs/rule-format.md`` ("Adding a match kind") walks through one.
"""

from __future__ import annotations

from typing import Any, get_args

from portscan.kinds.action import ActionPattern
from portscan.kinds.assign import AssignPattern
from portscan.kinds.build_arg import BuildArgPattern
from portscan.kinds.calls import CallPattern
from portscan.kinds.cmake import CMakePattern
from portscan.kinds.command import CommandPattern
from portscan.kinds.compare import ComparePattern
from portscan.kinds.cuda_api import CudaApiPattern
from portscan.kinds.env import EnvPattern
from portscan.kinds.image import ImagePattern
from portscan.kinds.imports import ImportPattern
from portscan.kinds.index import IndexPattern
from portscan.kinds.kernel import KernelPattern
from portscan.kinds.keyword import KeywordPattern
from portscan.kinds.names import NamePattern
from portscan.kinds.requirement import RequirementPattern
from portscan.kinds.spawn import SubprocessPattern
from portscan.kinds.strings import StringPattern
from portscan.kinds.submodule import SubmodulePattern
from portscan.kinds.yamlkeys import YamlPattern
from portscan.ruleset.table import TableReader

#: every kind, in the order the rule-format table lists them
Pattern = (
    ImportPattern
    | NamePattern
    | CallPattern
    | ComparePattern
    | AssignPattern
    | EnvPattern
    | StringPattern
    | SubprocessPattern
    | RequirementPattern
    | IndexPattern
    | ImagePattern
    | CommandPattern
    | YamlPattern
    | KernelPattern
    | CudaApiPattern
    | BuildArgPattern
    | ActionPattern
    | SubmodulePattern
    | CMakePattern
    | KeywordPattern
)

#: kind name (``[match] kind``) -> its class, from :data:`Pattern`
KINDS: dict[str, type[Pattern]] = {cls.kind: cls for cls in get_args(Pattern)}


def read_pattern(data: Any) -> Pattern:
    """Parse a ``[match]`` table; raises :class:`~portscan.ruleset.table.PatternError`
    naming the bad key."""
    r = TableReader(data, "match")
    kind = r.choice("kind", tuple(KINDS))
    pattern = KINDS[kind].read(r)
    r.finish()
    return pattern
