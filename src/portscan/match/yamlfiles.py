"""YAML files (docker-compose, conda environments) read as node graphs with positions.

``yaml.compose`` with the safe loader builds nodes without constructing any Python
object, and every node knows its character offsets.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import yaml
from yaml import Node

from portscan.match import Match
from portscan.parse import SourceError
from portscan.match.commands import SHELLS, Command, Word, commands
from portscan.match.common import command_matches, env_matches, image_matches
from portscan.match.containers import substitute
from portscan.kinds.yamlkeys import YamlPattern
from portscan.ruleset.schema import Rule


def compose_yaml(text: str) -> Node | None:
    """The root node of the first document, or None for empty or invalid YAML."""
    try:
        return yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return None


def compose_yaml_or_error(text: str) -> Node | None:
    """The root node of the first document (None when empty); invalid YAML raises a
    per-file parse error naming the line, for files whose tool rejects invalid YAML too
    (CI definitions), so that a file portscan could not read is reported, not skipped."""
    try:
        return yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise SourceError("parse", f"invalid YAML{where}: {exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise SourceError("parse", f"invalid YAML: {exc}") from None


def mapping_get(node: Node | None, key: str) -> Node | None:
    if isinstance(node, yaml.MappingNode):
        for key_node, value in node.value:
            if key_node.value == key:
                return value
    return None


def sequence_items(node: Node | None) -> list[Node]:
    """The items of a sequence node; nothing for any other node (a file may hold a
    scalar where a list belongs)."""
    return list(node.value) if isinstance(node, yaml.SequenceNode) else []


def scalar_items(node: Node | None) -> list[yaml.ScalarNode]:
    """The scalar items of a sequence node."""
    return [item for item in sequence_items(node) if isinstance(item, yaml.ScalarNode)]


def walk(node: Node | None, path: Sequence[str]) -> Iterator[tuple[str, Node]]:
    """Nodes at a dotted path (``*`` = any key or item), with the concrete path."""
    if node is None:
        return
    if not path:
        yield "", node
        return
    head, rest = path[0], path[1:]
    if isinstance(node, yaml.MappingNode):
        for key_node, value in node.value:
            if head in ("*", key_node.value):
                for sub, found in walk(value, rest):
                    yield ".".join(filter(None, [key_node.value, sub])), found
    elif isinstance(node, yaml.SequenceNode) and head == "*":
        for i, item in enumerate(node.value):
            for sub, found in walk(item, rest):
                yield ".".join(filter(None, [str(i), sub])), found


def _scalar(node: Node) -> object:
    """A scalar's value with YAML 1.1 core types (``true``, numbers) as Python values."""
    try:
        return yaml.safe_load(yaml.serialize(node))
    except yaml.YAMLError:
        return node.value


def _value_matches(node: Node, values: Sequence[object]) -> bool:
    if not values:
        return True
    if isinstance(node, yaml.ScalarNode):
        return _scalar(node) in values or node.value in values
    if isinstance(node, yaml.SequenceNode):
        return any(_value_matches(item, values) for item in node.value)
    return False


def _span(node: Node) -> tuple[int, int]:
    return node.start_mark.index, node.end_mark.index


def yaml_matches(root: Node, rules: Sequence[Rule]) -> list[Match]:
    """Matches of ``yaml`` rules: each path whose value is one of the rule's values."""
    matches = []
    for rule in rules:
        p = rule.pattern
        if not isinstance(p, YamlPattern):
            continue
        for path in p.paths:
            *above, key = path.split(".")
            for parent_path, parent in walk(root, above):
                for concrete, node in walk(parent, [key]):
                    if _value_matches(node, p.values):
                        start, end = _span(node)
                        text = node.value if isinstance(node, yaml.ScalarNode) else ""
                        also = tuple(_span(found)[0] for name in p.also
                                     for found in [mapping_get(parent, name)] if found is not None)
                        matches.append(Match(rule, start, end, {"path": ".".join(filter(None, [parent_path, concrete])),
                                                                "value": text}, also=also))
    return matches


def match_compose(text: str, rules: Sequence[Rule]) -> list[Match]:
    """docker-compose files: ``image:``, environment variables and ``yaml`` rules."""
    root = compose_yaml(text)
    if root is None:
        return []
    matches = yaml_matches(root, rules)
    if any(hasattr(r.pattern, "matches_image") for r in rules):  # an ImageKind
        for _, node in walk(root, ["services", "*", "image"]):
            if isinstance(node, yaml.ScalarNode):
                start, end = _span(node)
                raw = text[start:end]
                at = start + max(raw.find(node.value), 0)
                # ${IMAGE:-nvidia/cuda:12.1.0-base}: compose interpolation's default
                matches += image_matches(substitute(node.value, {}), at, rules, length=len(node.value))
    for key in ("command", "entrypoint", "healthcheck.test"):
        for _, node in walk(root, ["services", "*", *key.split(".")]):
            matches += command_matches(_compose_commands(node, text), rules)
    env_rules = [r for r in rules if hasattr(r.pattern, "matches_env")]  # an EnvKind
    for _, node in walk(root, ["services", "*", "environment"]):
        if isinstance(node, yaml.SequenceNode):  # - KEY=value
            for item in scalar_items(node):
                name, _, value = item.value.partition("=")
                matches += env_matches(name.strip(), value, item.start_mark.index, env_rules)
        elif isinstance(node, yaml.MappingNode):  # KEY: value
            for key, value in node.value:
                matches += env_matches(key.value, getattr(value, "value", ""),
                                       key.start_mark.index, env_rules)
    return matches


def _compose_commands(node: Node, text: str) -> list[Command]:
    """``command:``/``entrypoint:``/``healthcheck.test``: a string is a shell line, a list
    is an argv (healthcheck's leading ``CMD``/``CMD-SHELL`` dropped), each at its offsets."""
    if isinstance(node, yaml.ScalarNode):
        return list(_scalar_commands(node, text))
    items = scalar_items(node)
    if items and items[0].value in ("CMD-SHELL", "NONE"):
        return [c for item in items[1:] for c in _scalar_commands(item, text)]
    if items and items[0].value == "CMD":
        items = items[1:]
    if len(items) >= 3 and items[0].value.rsplit("/", 1)[-1] in SHELLS and \
            items[1].value in ("-c", "-lc", "-ec"):  # ["bash", "-c", "nvidia-smi && ..."]
        return [c for item in items[2:3] for c in _scalar_commands(item, text)]
    words = []
    for item in items:
        start, end = _span(item)
        at = start + max(text[start:end].find(item.value), 0)
        words.append(Word(item.value, at, at + len(item.value)))
    return [Command((), tuple(words))] if words else []


def _scalar_commands(node: yaml.ScalarNode, text: str) -> Iterator[Command]:
    """The shell commands of a scalar, at their offsets in the file: the value is found in
    the raw text whole (plain and quoted scalars) or line by line (block scalars)."""
    start, end = _span(node)
    raw = text[start:end]
    found = raw.find(node.value)
    if found >= 0:
        yield from commands(node.value, start + found)
        return
    cursor = 0
    for line in node.value.splitlines():
        at = raw.find(line, cursor) if line else -1
        if at < 0:
            continue
        cursor = at + len(line)
        yield from commands(line, start + at)
