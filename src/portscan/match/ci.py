"""CI definitions: GitHub Actions workflows and composite actions, GitLab CI, Azure
Pipelines (all YAML) and Jenkinsfiles.

One walk over the YAML node graph (:func:`portscan.match.yamlfiles.compose_yaml`, which
keeps positions) collects the sites the other surfaces already know how to check:

- scripts (``run:``, ``script:``/``before_script:``/``after_script:``, Azure ``bash:``,
  the ``with: script:`` of a reusable-workflow job), read as shell by
  :mod:`portscan.match.commands` on their text *as written in the file*, so a finding in a
  ``run: |`` block lands on its own line and column;
- container images (``container:``, ``image:``, GitLab ``services:``, ``uses: docker://``);
- environment variables (``env:``, ``variables:``);
- actions (``uses:``), for ``action`` rules; ``yaml`` rules see the whole tree.

Variables a CI system substitutes before the shell or the runner sees the text are
expanded with the values the file gives them: ``${{ matrix.cuda }}`` from the job's
``strategy.matrix`` (and ``include`` entries), ``${{ env.X }}``/``$X`` from ``env:``,
``$X``/``${X}``/``$(X)`` from GitLab/Azure ``variables:`` and ``parallel: matrix:``.
Each expansion is checked and a finding is reported once, at the text that uses the
variable (the use site is what a port edits or routes through a ROCm matrix entry; a
matrix entry on its own feeds nothing and is not reported).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import yaml
from yaml import Node

from portscan.kinds.action import ActionPattern
from portscan.match import Match
from portscan.match.commands import Command, Word, commands, lex
from portscan.match.common import command_matches, env_matches, image_matches, presence_tested
from portscan.match.levels import VENDOR_BRANCH
from portscan.match.yamlfiles import compose_yaml_or_error, mapping_get, sequence_items, walk, yaml_matches
from portscan.ruleset.schema import Rule

#: keys whose value is a shell script (or a list of script lines)
_SCRIPT_KEYS = frozenset({"run", "script", "before_script", "after_script", "bash"})
#: ``shell:`` values (GitHub) under which ``run:`` is not a POSIX shell script
_NOT_SHELL = ("pwsh", "powershell", "python", "cmd", "node")
#: ``uses:``/``task:`` values whose ``with:``/``inputs:`` ``script`` is not shell
_FOREIGN_SCRIPT = re.compile(r"github-script|powershell|pwsh|azurecli|python", re.IGNORECASE)
_EXPR = re.compile(r"\$\{\{\s*(?P<gh>[\w.-]+)\s*\}\}|\$\((?P<az>\w+)\)|\$\{(?P<br>\w+)\}"
                   r"|\$(?P<bare>[A-Za-z_]\w*)")
_MAX_EXPANSIONS = 16
#: a value or condition that names the ROCm side (``rocm6.2``, ``matrix.gpu == 'rocm'``)
_VENDOR_TEXT = re.compile(r"(?i)\b(rocm|hip)")

Scope = Mapping[str, tuple[str, ...]]  #: variable name -> the values it may take


@dataclass(frozen=True, slots=True)
class Site:
    """A scalar to check, the variables in scope where it sits, and whether it sits under
    an ``if:`` that tests for ROCm (a vendor branch, as in Python)."""

    node: yaml.ScalarNode
    scope: Scope
    vendor: bool = False


@dataclass(frozen=True, slots=True)
class Sites:
    """What the walk found."""

    scripts: list[Site] = field(default_factory=list)
    images: list[Site] = field(default_factory=list)
    env: list[tuple[Site, str]] = field(default_factory=list)  #: the key, the value
    actions: list[Site] = field(default_factory=list)
    #: ``container: {image: ..., options: --gpus all}``: options GitHub and Azure pass to
    #: ``docker create``
    docker_options: list[Site] = field(default_factory=list)


# ------------------------------------------------------------------ variables


def _scalar_text(node: Node | None) -> str | None:
    return node.value if isinstance(node, yaml.ScalarNode) and "${{" not in node.value else None


def _env_values(node: Node | None) -> Iterator[tuple[yaml.ScalarNode, str | None]]:
    """``KEY: value`` (GitHub ``env``, GitLab/Azure ``variables``), GitLab's
    ``KEY: {value: v}`` and Azure's ``- name: KEY`` / ``value: v`` list."""
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode):
                text = _scalar_text(mapping_get(value, "value")) if isinstance(value, yaml.MappingNode) \
                    else _scalar_text(value)
                yield key, text
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            key = mapping_get(item, "name")
            if isinstance(key, yaml.ScalarNode):
                yield key, _scalar_text(mapping_get(item, "value"))


def _add(scope: dict[str, tuple[str, ...]], name: str, value: str | None) -> None:
    if value is not None and value not in scope.get(name, ()):
        scope[name] = (*scope.get(name, ()), value)


def _matrix(node: Node | None, scope: dict[str, tuple[str, ...]]) -> None:
    """GitHub ``matrix: {cuda: [...], include: [{...}]}`` (``matrix.X``) and Azure
    ``matrix: {name: {VAR: value}}`` (``VAR``)."""
    if not isinstance(node, yaml.MappingNode):
        return
    for key, value in node.value:
        if key.value == "exclude":
            continue
        if key.value == "include" and isinstance(value, yaml.SequenceNode):
            for item in value.value:
                for inner, text in _env_values(item):
                    _add(scope, f"matrix.{inner.value}", text)
        elif isinstance(value, yaml.SequenceNode):
            for item in value.value:
                _add(scope, f"matrix.{key.value}", _scalar_text(item))
        elif isinstance(value, yaml.MappingNode):  # Azure: one job configuration
            for inner, text in _env_values(value):
                _add(scope, inner.value, text)


def _gitlab_matrix(node: Node | None, scope: dict[str, tuple[str, ...]]) -> None:
    """GitLab ``parallel: {matrix: [{CUDA: ["11.8", "12.1"]}, ...]}``."""
    for entry in sequence_items(mapping_get(node, "matrix")):
        if isinstance(entry, yaml.MappingNode):
            for key, value in entry.value:
                items = value.value if isinstance(value, yaml.SequenceNode) else [value]
                for item in items:
                    _add(scope, key.value, _scalar_text(item))


def _input_defaults(node: Node | None, scope: dict[str, tuple[str, ...]]) -> None:
    """Composite-action and ``workflow_call``/``workflow_dispatch`` inputs: ``inputs.X``
    takes its ``default`` (the value a caller that passes nothing gets)."""
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if isinstance(value, yaml.MappingNode):
                _add(scope, f"inputs.{key.value}", _scalar_text(mapping_get(value, "default")))


def _scope_of(node: yaml.MappingNode, parent: Scope) -> Scope:
    """``parent`` plus the variables this mapping defines for everything below it: the
    matrix first, so that ``env: {CUDA: ${{ matrix.cuda }}}`` takes the matrix's values."""
    keys = {key.value: value for key, value in node.value if isinstance(key, yaml.ScalarNode)}
    if not keys.keys() & {"env", "variables", "strategy", "parallel", "inputs"}:
        return parent
    scope = dict(parent)
    _input_defaults(keys.get("inputs"), scope)
    _matrix(mapping_get(keys.get("strategy"), "matrix"), scope)
    _gitlab_matrix(keys.get("parallel"), scope)
    for name in ("env", "variables"):
        for key, raw in _env_values(keys.get(name)):
            texts = [raw] if raw is not None else []
            value = mapping_get(keys.get(name), key.value)
            if raw is None and isinstance(value, yaml.ScalarNode):  # set from the matrix
                texts = [e.text for e in expansions(value.value, scope) if e.offsets is not None]
            for text in texts:
                _add(scope, key.value, text)
                _add(scope, f"env.{key.value}", text)
    return scope


@dataclass(frozen=True, slots=True)
class Expansion:
    """A text with known variables substituted: ``offsets`` gives, for each character
    (and the end), its offset in the original (None: nothing substituted); ``vendor``
    the original spans of variables that also take a ROCm value (a CUDA/ROCm matrix)."""

    text: str
    offsets: list[int] | None = None
    vendor: tuple[tuple[int, int], ...] = ()


def expansions(text: str, scope: Scope) -> list[Expansion]:
    """``text`` once per combination of the values of the variables it uses that
    ``scope`` knows (at most ``_MAX_EXPANSIONS``); ``[Expansion(text)]`` when none."""
    refs = []
    for found in _EXPR.finditer(text) if "$" in text else ():
        name = found.group("gh") or found.group("az") or found.group("br") or found.group("bare")
        if name in scope:
            refs.append((found, name))
    if not refs:
        return [Expansion(text)]
    vendor = tuple(found.span() for found, name in refs
                   if any(_VENDOR_TEXT.search(value) for value in scope[name]))
    names = sorted({name for _, name in refs})
    result = []
    for combination in itertools.islice(itertools.product(*(scope[n] for n in names)), _MAX_EXPANSIONS):
        chosen = dict(zip(names, combination, strict=True))
        parts: list[str] = []
        offsets: list[int] = []
        position = 0
        for found, name in refs:
            parts += [text[position:found.start()], chosen[name]]
            offsets += [*range(position, found.start()), *[found.start()] * len(chosen[name])]
            position = found.end()
        parts.append(text[position:])
        offsets += [*range(position, len(text) + 1)]
        result.append(Expansion("".join(parts), offsets, vendor))
    return result


# ------------------------------------------------------------------ the walk


def _script_items(node: Node) -> Iterator[yaml.ScalarNode]:
    if isinstance(node, yaml.ScalarNode):
        yield node
    elif isinstance(node, yaml.SequenceNode):  # GitLab: a list of lines, nested lists allowed
        for item in node.value:
            yield from _script_items(item)


def _is_shell_run(step: yaml.MappingNode) -> bool:
    shell = _scalar_text(mapping_get(step, "shell")) or ""
    return not shell.strip().lower().startswith(_NOT_SHELL)


def _walk(node: Node, scope: Scope, sites: Sites, foreign: bool = False, vendor: bool = False) -> None:
    if isinstance(node, yaml.SequenceNode):
        for item in node.value:
            _walk(item, scope, sites, vendor=vendor)
        return
    if not isinstance(node, yaml.MappingNode):
        return
    scope = _scope_of(node, scope)
    condition = mapping_get(node, "if")
    vendor = vendor or (isinstance(condition, yaml.ScalarNode) and bool(_VENDOR_TEXT.search(condition.value)))
    owner = " ".join(filter(None, (_scalar_text(mapping_get(node, k)) for k in ("uses", "task"))))
    options = mapping_get(node, "options")
    if isinstance(options, yaml.ScalarNode) and mapping_get(node, "image") is not None:
        sites.docker_options.append(Site(options, scope, vendor))
    for key, value in node.value:
        name = key.value if isinstance(key, yaml.ScalarNode) else ""
        if name in _SCRIPT_KEYS and not (name == "run" and not _is_shell_run(node)) \
                and not (name == "script" and foreign):
            sites.scripts.extend(Site(item, scope, vendor) for item in _script_items(value))
        elif name in ("image", "container") and isinstance(value, yaml.ScalarNode):
            sites.images.append(Site(value, scope, vendor))
        elif name == "image" and isinstance(value, yaml.MappingNode):  # GitLab {name: ...}
            image = mapping_get(value, "name")
            if isinstance(image, yaml.ScalarNode):
                sites.images.append(Site(image, scope, vendor))
        elif name == "services" and isinstance(value, yaml.SequenceNode):  # GitLab
            for item in value.value:
                image = item if isinstance(item, yaml.ScalarNode) else mapping_get(item, "name")
                if isinstance(image, yaml.ScalarNode):
                    sites.images.append(Site(image, scope, vendor))
        elif name == "uses" and isinstance(value, yaml.ScalarNode):
            sites.actions.append(Site(value, scope, vendor))
            if value.value.startswith("docker://"):
                sites.images.append(Site(value, scope, vendor))
        if name in ("env", "variables"):
            sites.env.extend((Site(k, scope, vendor), v or "") for k, v in _env_values(value))
        if isinstance(value, (yaml.MappingNode, yaml.SequenceNode)):
            _walk(value, scope, sites,
                  foreign=name in ("with", "inputs") and bool(_FOREIGN_SCRIPT.search(owner)),
                  vendor=vendor)


# ------------------------------------------------------------------ scripts as written


def _fold(body: str, indent: int) -> str:
    """A ``>`` block: line breaks between same-indented text lines become spaces."""
    lines = body.split("\n")
    out = []
    for i, line in enumerate(lines[:-1]):
        following = lines[i + 1]
        joins = (line.strip() and following.strip()
                 and len(line) - len(line.lstrip(" ")) == indent
                 and len(following) - len(following.lstrip(" ")) == indent)
        out.append(line + (" " if joins else "\n"))
    return "".join(out) + lines[-1]


def embedded_text(source: str, node: yaml.ScalarNode) -> tuple[str, int]:
    """A scalar's text as written in the file, and its offset: the same length as the
    source it covers (indentation and quotes kept or blanked, folded line breaks turned
    into spaces), so an offset into it plus the returned offset is an offset into the file."""
    start, end = node.start_mark.index, node.end_mark.index
    if node.style in ("|", ">"):
        header_end = source.find("\n", start, end)
        if header_end < 0:
            return "", end
        body_start = header_end + 1
        kept: list[str] = []
        indent: int | None = None
        for line in source[body_start:end].splitlines(keepends=True):
            if line.strip():
                width = len(line) - len(line.lstrip(" "))
                if indent is None:
                    indent = width
                elif width < indent:
                    break  # a comment or key after the block
            kept.append(line)
        body = "".join(kept)
        return (_fold(body, indent or 0) if node.style == ">" else body), body_start
    if node.style in ('"', "'"):
        return source[start + 1:end - 1].replace("\n", " "), start + 1
    return source[start:end].replace("\n", " "), start


def _relocate(match: Match, expansion: Expansion, base: int, vendor: bool) -> Match:
    """A match in an expanded text, moved to the original text at ``base``; guarded as a
    vendor branch when the site is, or when it covers a variable that also takes a ROCm value."""
    start, end = match.start, match.end
    if expansion.offsets is not None:
        last = len(expansion.offsets) - 1
        start, end = expansion.offsets[min(start, last)], expansion.offsets[min(end, last)]
        end = max(end, start + 1)
    if vendor or any(a < end and start < b for a, b in expansion.vendor):
        guard: str | None = VENDOR_BRANCH
    else:
        guard = match.guard
    return Match(match.rule, base + start, base + end, match.variables, guard)


def _script_matches(source: str, site: Site, rules: Sequence[Rule]) -> Iterator[Match]:
    text, base = embedded_text(source, site.node)
    for expansion in expansions(text, site.scope):
        for match in command_matches(commands(expansion.text), rules, tested=presence_tested(expansion.text)):
            yield _relocate(match, expansion, base, site.vendor)


def _image_matches(source: str, site: Site, rules: Sequence[Rule]) -> Iterator[Match]:
    text, base = embedded_text(source, site.node)
    reference = text.strip().removeprefix("docker://")
    base += text.index(reference) if reference else 0
    for expansion in expansions(reference, site.scope):
        for match in image_matches(expansion.text, 0, rules):
            whole = Match(match.rule, 0, len(expansion.text), match.variables)
            yield _relocate(whole, expansion, base, site.vendor)


def _docker_option_matches(source: str, site: Site, rules: Sequence[Rule]) -> list[Match]:
    """Container ``options:`` read as the arguments of ``docker create`` (``--gpus all``)."""
    text, base = embedded_text(source, site.node)
    create = (Word("docker", base, base), Word("create", base, base))
    return _guarded(list(command_matches([Command((), create + tuple(lex(text, base)))], rules)),
                    site.vendor)


def _guarded(matches: list[Match], vendor: bool) -> list[Match]:
    return [Match(m.rule, m.start, m.end, m.variables, VENDOR_BRANCH) for m in matches] if vendor else matches


def _dedupe(matches: Iterator[Match]) -> list[Match]:
    """One finding per rule and place (each expansion of a site reports the same place)."""
    seen: set[tuple[str, int, int]] = set()
    kept = []
    for match in matches:
        key = (match.rule.code, match.start, match.end)
        if key not in seen:
            seen.add(key)
            kept.append(match)
    return kept


def _reads_scripts(rule: Rule) -> bool:
    p = rule.pattern
    return any(hasattr(p, method) for method in ("matches_env", "matching_argument", "matches_requirement",
                                                   "matches_index", "matches_program"))


def match_ci(text: str, rules: Sequence[Rule]) -> list[Match]:
    """GitHub Actions, GitLab CI and Azure Pipelines YAML; invalid YAML is a parse error."""
    root = compose_yaml_or_error(text)
    if root is None:
        return []
    sites = Sites()
    triggers: dict[str, tuple[str, ...]] = {}
    for _, inputs in walk(root, ["on", "*", "inputs"]):
        _input_defaults(inputs, triggers)
    _walk(root, triggers, sites)
    found: list[Match] = []
    shell_rules = [r for r in rules if _reads_scripts(r)]
    if shell_rules:
        for site in sites.scripts:
            found += _script_matches(text, site, shell_rules)
        for site in sites.docker_options:
            found += _docker_option_matches(text, site, shell_rules)
    image_rules = [r for r in rules if hasattr(r.pattern, "matches_image")]  # ImageKinds
    if image_rules:
        for site in sites.images:
            found += _image_matches(text, site, image_rules)
    env_rules = [r for r in rules if hasattr(r.pattern, "matches_env")]  # EnvKinds
    for site, value in sites.env:
        found += _guarded(env_matches(site.node.value, value, site.node.start_mark.index, env_rules),
                          site.vendor)
    for rule in rules:
        if isinstance(rule.pattern, ActionPattern):
            for site in sites.actions:
                if rule.pattern.matches_action(site.node.value):
                    found += _guarded([Match(rule, site.node.start_mark.index, site.node.end_mark.index,
                                             {"action": site.node.value})], site.vendor)
    return yaml_matches(root, rules) + _dedupe(iter(found))


# ------------------------------------------------------------------ Jenkinsfiles

#: ``sh '...'``, ``sh """..."""``, ``sh(script: '...')``, ``sh label: 'x', script: '...'``
_SH_STEP = re.compile(r"\bsh\s*\(?\s*(?:(?:label|encoding)\s*:\s*(?:'[^'\n]*'|\"[^\"\n]*\")\s*,\s*)*"
                      r"(?:(?:returnStdout|returnStatus)\s*:\s*\w+\s*,\s*)*(?:script\s*:\s*)?"
                      r"(?P<quote>'''|\"\"\"|'|\")")
_JENKINS_IMAGE = re.compile(r"\bimage\s*\(?\s*(?P<quote>['\"])(?P<image>[^'\"\s]+)(?P=quote)")
_JENKINS_ENV_BLOCK = re.compile(r"\benvironment\s*\{(?P<body>[^{}]*)\}")
_JENKINS_ENV = re.compile(r"(?m)^\s*(?P<name>[A-Za-z_]\w*)\s*=\s*(?P<quote>['\"])(?P<value>[^'\"\n]*)(?P=quote)")
_GROOVY_COMMENT = re.compile(r"(?m)^[ \t]*//[^\n]*|/\*.*?\*/", re.DOTALL)
_JENKINS_DOCKER_ARGS = re.compile(r"\bargs\s*(?P<quote>['\"])(?P<args>[^'\"\n]*)(?P=quote)")


def _string_end(text: str, start: int, quote: str) -> int:
    """Where the Groovy string opened before ``start`` closes (``len(text)`` if never)."""
    if len(quote) == 3:
        close = text.find(quote, start)
        return len(text) if close < 0 else close
    i = start
    while i < len(text) and text[i] not in (quote, "\n"):
        i += 2 if text[i] == "\\" else 1
    return min(i, len(text))


def match_jenkinsfile(text: str, rules: Sequence[Rule]) -> list[Match]:
    """The shell of ``sh '...'`` / ``sh \"\"\"...\"\"\"`` / ``sh(script: '...')`` steps,
    ``docker { image '...' }`` / ``docker.image('...')`` and ``environment { X = '...' }``."""
    code = _GROOVY_COMMENT.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
    matches: list[Match] = []
    for step in _SH_STEP.finditer(code):
        start = step.end()
        end = _string_end(code, start, step.group("quote"))
        matches += command_matches(commands(code[start:end], start), rules, tested=presence_tested(code[start:end]))
    for image in _JENKINS_IMAGE.finditer(code):
        matches += image_matches(image.group("image"), image.start("image"), rules)
    for options in _JENKINS_DOCKER_ARGS.finditer(code):  # `docker { args '--gpus all' }`: docker run's
        at = options.start("args")
        run = (Word("docker", at, at), Word("run", at, at))
        matches += command_matches([Command((), run + tuple(lex(options.group("args"), at)))], rules)
    env_rules = [r for r in rules if hasattr(r.pattern, "matches_env")]
    for block in _JENKINS_ENV_BLOCK.finditer(code):
        for setting in _JENKINS_ENV.finditer(block.group("body")):
            at = block.start("body") + setting.start("name")
            matches += env_matches(setting.group("name"), setting.group("value"), at, env_rules)
    return matches
