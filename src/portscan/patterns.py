"""The closed set of match kinds a rule file may use, parsed strictly from TOML.

Each pattern is a frozen value that knows three things: how to read itself from a
``[match]`` table (unknown keys are errors), which message variables it provides,
and which literal tokens a file must contain for the pattern to possibly match
(the prefilter that lets portscan skip parsing most files).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from portscan.bounded import Regex
from portscan.ruleset.prefilter import Fragment, Token, import_anchor, qualified_sets, regex_fragments, segment_sets
from portscan.ruleset.table import IDENTIFIER, Literal, PatternError, TableReader

_WORDISH = re.compile(r"^\w[\w.-]*\w$|^\w$")
_PROGRAM = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+-]*$")
_YAML_PATH = re.compile(r"^(\*|[\w-]+)(\.(\*|[\w-]+))*$")

#: Written with the call on the left: ``f() in (...)`` is "in"; ``"x" in f()`` is "contains".
COMPARE_OPERATORS = ("<", "<=", ">", ">=", "==", "!=", "in", "not in", "contains", "not contains")
USAGES = ("any", "truth", "operand", "other")
#: File kinds (see portscan.discover.file_kind) each pattern kind applies to.
PYTHON = frozenset({"python"})
MANIFESTS = frozenset({"requirements", "pyproject", "setupcfg", "conda", "python", "dockerfile",
                       "shell"})
BUILD_ARGUMENTS = ("nvcc", "cxx", "libraries", "extra_link_args")
REQUIREMENT_SECTIONS = ("install", "optional", "build")
#: CUDA runtime, driver and library API identifiers (not macros) in kernel sources.
CUDA_API_IDENTIFIERS = (r"\b(?:cuda[A-Z]\w*|cu[A-Z][a-z]\w*|cublas(?:Lt)?[A-Z]\w*|curand[A-Z]\w*"
                        r"|cusparse(?:Lt)?[A-Z]\w*|cufft[A-Z]\w*|cusolver\w*|nvrtc[A-Z]\w*"
                        r"|cudnn[A-Z]\w*|nvtx[A-Z]\w*)\b")

#: Calls that start a process; their first argument is a command line or argv list.
DEFAULT_SPAWN_CALLEES = (
    "subprocess.run",
    "subprocess.call",
    "subprocess.check_call",
    "subprocess.check_output",
    "subprocess.Popen",
    "subprocess.getoutput",
    "subprocess.getstatusoutput",
    "os.system",
    "os.popen",
    "os.execv",
    "os.execvp",
    "os.execvpe",
    "os.execl",
    "os.execlp",
    "os.spawnv",
    "os.spawnvp",
    "os.spawnl",
    "os.spawnlp",
    "asyncio.create_subprocess_exec",
    "asyncio.create_subprocess_shell",
)



def name_matches(qualified: str, pattern: str) -> bool:
    """``torch.version.cuda`` matches itself; ``apex.amp.*`` matches names below ``apex.amp``."""
    if pattern.endswith(".*"):
        return qualified.startswith(pattern[:-1])
    return qualified == pattern


def is_at_or_below(name: str, module: str) -> bool:
    """``apex.amp.handle`` is below ``apex``; ``apex_utils`` is not."""
    return name == module or name.startswith(module + ".")



@dataclass(frozen=True, slots=True)
class ImportPattern:
    """``import m``, ``import m.sub as x``, ``from m import n``, ``from p import m``."""

    kind: ClassVar[str] = "import"
    surfaces: ClassVar[frozenset[str]] = PYTHON
    variables: ClassVar[frozenset[str]] = frozenset({"matched", "module"})
    modules: tuple[str, ...]
    #: when the import is guarded (``try``/``except ImportError``), also report each
    #: attribute use of the names it binds, unless a condition on the name guards it
    uses: bool = False

    @classmethod
    def read(cls, r: TableReader) -> ImportPattern:
        uses = r.raw("uses", False)
        if uses is not None and not isinstance(uses, bool):
            raise PatternError(r.key("uses"), "expected true or false")
        return cls(modules=r.dotted("modules"), uses=bool(uses))

    def token_sets(self) -> tuple[frozenset[Token], ...]:
        """The module's segments, and an import statement naming its package."""
        return tuple(segments | {import_anchor(module)}
                     for segments, module in zip(segment_sets(self.modules), self.modules, strict=True))


@dataclass(frozen=True, slots=True)
class NamePattern:
    """A use of a qualified name, resolved through import aliases."""

    kind: ClassVar[str] = "name"
    surfaces: ClassVar[frozenset[str]] = PYTHON
    variables: ClassVar[frozenset[str]] = frozenset({"matched", "name"})
    names: tuple[str, ...]
    #: ``truth``: only its truth value is used (``if x``, ``x is None``, ``x == "12.1"``);
    #: ``operand``: operated on, which raises on None (``x.split()``, ``x[0]``, ``x >= "11"``,
    #: ``int(x)``, ``x + y``, iteration); ``other``: passed, formatted, assigned, returned.
    usage: str = "any"

    @classmethod
    def read(cls, r: TableReader) -> NamePattern:
        return cls(names=r.dotted("names", wildcard=True), usage=r.choice("usage", USAGES, "any"))

    def token_sets(self) -> tuple[frozenset[Token], ...]:
        return qualified_sets(self.names)


@dataclass(frozen=True, slots=True)
class ArgCondition:
    """A constraint on one argument, found by keyword or by position (0-based)."""

    keyword: str | None
    position: int | None
    equals: tuple[Literal, ...] = ()
    contains: tuple[Literal, ...] = ()
    present: bool | None = None
    regex: Regex | None = None  #: searched in a string-literal argument

    def needed_tokens(self) -> tuple[Token, ...]:
        """Tokens one of which a matching argument puts in the file (empty: unknown)."""
        values = self.equals + self.contains
        if values:
            words = tuple(v for v in values if isinstance(v, str) and _WORDISH.match(v))
            return words if len(words) == len(values) else ()
        if self.regex is not None:
            return regex_fragments(self.regex, quoted=True)
        return ()

    @classmethod
    def read(cls, r: TableReader) -> ArgCondition:
        keyword = r.raw("keyword", False)
        position = r.raw("position", False)
        if keyword is None and position is None:
            raise PatternError(r.where, "an argument condition needs `keyword`, `position` or both")
        if keyword is not None and (not isinstance(keyword, str) or not keyword.isidentifier()):
            raise PatternError(r.key("keyword"), "expected an identifier")
        if position is not None and (isinstance(position, bool) or not isinstance(position, int)
                                     or position < 0):
            raise PatternError(r.key("position"), "expected an integer >= 0")
        present = r.raw("present", False)
        if present is not None and not isinstance(present, bool):
            raise PatternError(r.key("present"), "expected true or false")
        condition = cls(keyword, position, r.literals("equals"), r.literals("contains"), present,
                        r.regex("regex"))
        given = sum((bool(condition.equals), bool(condition.contains), present is not None,
                     condition.regex is not None))
        if given != 1:
            raise PatternError(r.where, "give exactly one of `equals`, `contains`, `present`, `regex`")
        return condition


@dataclass(frozen=True, slots=True)
class CallPattern:
    """A call of a qualified name, optionally constrained by literal argument values."""

    kind: ClassVar[str] = "call"
    surfaces: ClassVar[frozenset[str]] = PYTHON
    variables: ClassVar[frozenset[str]] = frozenset({"matched", "name"})
    callees: tuple[str, ...]
    args: tuple[ArgCondition, ...] = ()

    @classmethod
    def read(cls, r: TableReader) -> CallPattern:
        callees = r.dotted("callees", wildcard=True)
        raw_args = r.raw("args", False) or []
        if not isinstance(raw_args, list):
            raise PatternError(r.key("args"), "expected an array of tables")
        args = []
        for i, table in enumerate(raw_args):
            sub = TableReader(table, f"{r.key('args')}[{i}]")
            args.append(ArgCondition.read(sub))
            sub.finish()
        return cls(callees=callees, args=tuple(args))

    def token_sets(self) -> tuple[frozenset[Token], ...]:
        """The callee's segments, plus one of the values an argument must have
        (``backend="tensorrt"`` needs "tensorrt" in the file), when they can be told."""
        sets: tuple[frozenset[Token], ...] = qualified_sets(self.callees)
        for condition in self.args:
            needed = condition.needed_tokens()
            if needed:
                sets = tuple(s | {token} for s in sets for token in needed)
        return sets


@dataclass(frozen=True, slots=True)
class ComparePattern:
    """A comparison whose operand is a qualified call (or its ``[i]`` / ``.attr``)."""

    kind: ClassVar[str] = "compare"
    surfaces: ClassVar[frozenset[str]] = PYTHON
    variables: ClassVar[frozenset[str]] = frozenset({"matched", "name", "value"})
    callees: tuple[str, ...]
    attributes: tuple[str, ...] = ()  #: operand must be ``call().attr`` with one of these
    operators: tuple[str, ...] = ()  #: empty: any operator
    values: tuple[Literal, ...] = ()  #: empty: any other operand
    #: for indexed operands (``f()[i]``, or ``a, b = f()``): the indices that count;
    #: empty: any. The whole value (``f() >= (9, 0)``) always counts.
    indices: tuple[int, ...] = ()

    @classmethod
    def read(cls, r: TableReader) -> ComparePattern:
        operators = r.texts("operators", required=False, what="operator")
        for op in operators:
            if op not in COMPARE_OPERATORS:
                raise PatternError(r.key("operators"),
                                   f"{op!r} is not one of {', '.join(COMPARE_OPERATORS)}")
        attributes = r.texts("attributes", required=False, what="identifier")
        for attr in attributes:
            if not attr.isidentifier():
                raise PatternError(r.key("attributes"), f"{attr!r} is not an identifier")
        indices = r.literals("indices")
        if any(isinstance(i, bool) or not isinstance(i, int) or i < 0 for i in indices):
            raise PatternError(r.key("indices"), "expected a list of integers >= 0")
        return cls(
            callees=r.dotted("callees", wildcard=True),
            attributes=attributes,
            operators=operators,
            values=r.literals("values"),
            indices=tuple(int(i) for i in indices),  # type: ignore[arg-type]
        )

    def token_sets(self) -> tuple[frozenset[Token], ...]:
        return qualified_sets(self.callees)


@dataclass(frozen=True, slots=True)
class AssignPattern:
    """Assignment to a qualified attribute (``targets``, resolved through imports), or to
    a plain variable or attribute by its own name (``names``, e.g. ``WARP_SIZE``),
    optionally of given literal values."""

    kind: ClassVar[str] = "assign"
    surfaces: ClassVar[frozenset[str]] = PYTHON
    variables: ClassVar[frozenset[str]] = frozenset({"matched", "name", "value"})
    targets: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    values: tuple[Literal, ...] = ()

    @classmethod
    def read(cls, r: TableReader) -> AssignPattern:
        pattern = cls(targets=r.dotted("targets", required=False),
                      names=r.texts("names", required=False, check=IDENTIFIER, what="identifier"),
                      values=r.literals("values"))
        if bool(pattern.targets) == bool(pattern.names):
            raise PatternError(r.where, "give exactly one of `targets` and `names`")
        return pattern

    def token_sets(self) -> tuple[frozenset[Token], ...]:
        return qualified_sets(self.targets) + tuple(frozenset({n}) for n in self.names)


@dataclass(frozen=True, slots=True)
class EnvPattern:
    """An environment variable set from Python: ``os.environ["X"] = v``,
    ``os.environ.setdefault("X", v)``, ``os.environ.update(X=v)``, ``os.putenv("X", v)``."""

    kind: ClassVar[str] = "env"
    surfaces: ClassVar[frozenset[str]] = frozenset({"python", "dockerfile", "shell", "compose"})
    variables: ClassVar[frozenset[str]] = frozenset({"matched", "name", "value"})
    names: tuple[str, ...]
    values: tuple[Literal, ...] = ()
    regex: Regex | None = None  #: searched in a string value

    @classmethod
    def read(cls, r: TableReader) -> EnvPattern:
        pattern = cls(names=r.texts("names", check=IDENTIFIER, what="variable name"),
                      values=r.literals("values"), regex=r.regex("regex"))
        if pattern.values and pattern.regex is not None:
            raise PatternError(r.where, "give at most one of `values` and `regex`")
        return pattern

    def token_sets(self) -> tuple[frozenset[Token], ...]:
        return tuple(frozenset({n}) for n in self.names)


@dataclass(frozen=True, slots=True)
class StringPattern:
    """A string literal with one of the given values, anywhere but a docstring
    (``"CUDAExecutionProvider"`` in a providers list built elsewhere), unless the
    list or tuple literal holding it also holds one of ``unless``."""

    kind: ClassVar[str] = "string"
    surfaces: ClassVar[frozenset[str]] = PYTHON
    variables: ClassVar[frozenset[str]] = frozenset({"matched", "value"})
    values: tuple[str, ...]
    unless: tuple[str, ...] = ()

    @classmethod
    def read(cls, r: TableReader) -> StringPattern:
        return cls(values=r.texts("values", check=_WORDISH, what="word-like string"),
                   unless=r.texts("unless", required=False))

    def token_sets(self) -> tuple[frozenset[Token], ...]:
        return tuple(frozenset({v}) for v in self.values)


@dataclass(frozen=True, slots=True)
class SubprocessPattern:
    """A program name in the command passed to a process-spawning call."""

    kind: ClassVar[str] = "subprocess"
    surfaces: ClassVar[frozenset[str]] = frozenset({"python", "dockerfile", "shell"})
    variables: ClassVar[frozenset[str]] = frozenset({"matched", "program"})
    programs: tuple[str, ...]
    callees: tuple[str, ...] = DEFAULT_SPAWN_CALLEES

    @classmethod
    def read(cls, r: TableReader) -> SubprocessPattern:
        programs = r.texts("programs", check=_PROGRAM, what="program name")
        callees = r.dotted("callees", required=False) or DEFAULT_SPAWN_CALLEES
        return cls(programs=programs, callees=callees)

    def token_sets(self) -> tuple[frozenset[Token], ...]:
        return tuple(frozenset({p}) for p in self.programs)


def glob_prefix(glob: str) -> str:
    """The literal text before a glob's first wildcard."""
    return re.split(r"[*?\[]", glob, maxsplit=1)[0]


def normalize_name(name: str) -> str:
    """PEP 503 normalisation: ``Torch_TensorRT`` and ``torch-tensorrt`` are one package."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True, slots=True)
class RequirementPattern:
    """A package requirement in any manifest: requirements files, ``pyproject.toml``,
    ``setup.py``/``setup.cfg``, conda ``environment.yml``, and ``pip install`` lines in
    Dockerfiles and shell scripts. Names are globs over PEP 503-normalised names."""

    kind: ClassVar[str] = "requirement"
    surfaces: ClassVar[frozenset[str]] = MANIFESTS
    variables: ClassVar[frozenset[str]] = frozenset({"matched", "package", "requirement"})
    names: tuple[str, ...]
    extras: tuple[str, ...] = ()  #: globs; one extra must match (``tensorflow[and-cuda]``)
    local_versions: tuple[str, ...] = ()  #: globs over a pin's local label (``+cu118``)
    url: Regex | None = None  #: searched in a direct reference (``@ git+https://...``)
    #: where the requirement sits: ``install`` (run-time dependencies), ``optional``
    #: (extras, dependency groups), ``build`` (``build-system.requires``, ``setup_requires``)
    sections: tuple[str, ...] = REQUIREMENT_SECTIONS

    @classmethod
    def read(cls, r: TableReader) -> RequirementPattern:
        names = tuple(normalize_name(n) for n in r.texts("names", what="package glob"))
        sections = r.texts("sections", required=False, what="section") or REQUIREMENT_SECTIONS
        for section in sections:
            if section not in REQUIREMENT_SECTIONS:
                raise PatternError(r.key("sections"),
                                   f"{section!r} is not one of {', '.join(REQUIREMENT_SECTIONS)}")
        return cls(names=names, extras=r.texts("extras", required=False, what="extra glob"),
                   local_versions=r.texts("local_versions", required=False, what="version glob"),
                   url=r.regex("url"), sections=sections)

    def token_sets(self) -> tuple[frozenset[Token], ...]:
        # only setup.py reaches the Python prefilter: it must call setup() and name the
        # package at the start of a requirement string (or give a matching URL)
        sets: list[frozenset[Token]] = [
            frozenset({"setup", keyword, Fragment(prefix, True, quoted=True)} if prefix else {"setup", keyword})
            for prefix in {glob_prefix(n).split("-")[0] for n in self.names}
            for keyword in SETUP_REQUIREMENT_SECTIONS]
        if self.url is not None:
            fragments = regex_fragments(self.url)
            if fragments:  # the direct reference must match too
                sets = [s | {f} for s in sets for f in fragments]
        return tuple(sets)


#: setup() keywords that hold requirements, with the manifest section each counts as
SETUP_REQUIREMENT_SECTIONS = {"install_requires": "install", "setup_requires": "build",
                              "tests_require": "optional", "extras_require": "optional"}


@dataclass(frozen=True, slots=True)
class IndexPattern:
    """A package index or channel: ``--index-url``/``--extra-index-url``/``--find-links``
    in requirements files and ``pip install`` lines, index URLs in ``pyproject.toml``,
    and conda channels."""

    kind: ClassVar[str] = "index"
    surfaces: ClassVar[frozenset[str]] = MANIFESTS - PYTHON
    variables: ClassVar[frozenset[str]] = frozenset({"matched", "url"})
    urls: tuple[str, ...] = ()  #: globs over URLs
    channels: tuple[str, ...] = ()  #: conda channel names

    @classmethod
    def read(cls, r: TableReader) -> IndexPattern:
        pattern = cls(urls=r.texts("urls", required=False, what="URL glob"),
                      channels=r.texts("channels", required=False, what="channel name"))
        if not pattern.urls and not pattern.channels:
            raise PatternError(r.where, "give `urls`, `channels` or both")
        return pattern

    def token_sets(self) -> tuple[frozenset[Token], ...]:
        return ()


@dataclass(frozen=True, slots=True)
class ImagePattern:
    """A container base image: Dockerfile ``FROM`` and compose ``image:``."""

    kind: ClassVar[str] = "image"
    surfaces: ClassVar[frozenset[str]] = frozenset({"dockerfile", "compose"})
    variables: ClassVar[frozenset[str]] = frozenset({"matched", "image"})
    images: tuple[str, ...]  #: globs over ``registry/namespace/name`` (no tag)
    tags: tuple[str, ...] = ()  #: globs over the tag

    @classmethod
    def read(cls, r: TableReader) -> ImagePattern:
        return cls(images=r.texts("images", what="image glob"),
                   tags=r.texts("tags", required=False, what="tag glob"))

    def token_sets(self) -> tuple[frozenset[Token], ...]:
        return ()


@dataclass(frozen=True, slots=True)
class CommandPattern:
    """A program run with given arguments in a shell script or a Dockerfile ``RUN``
    (``docker run --gpus all``)."""

    kind: ClassVar[str] = "command"
    surfaces: ClassVar[frozenset[str]] = frozenset({"dockerfile", "shell"})
    variables: ClassVar[frozenset[str]] = frozenset({"matched", "program", "arg"})
    programs: tuple[str, ...]
    args: tuple[str, ...]  #: globs; any argument matching one reports
    subcommands: tuple[str, ...] = ()  #: the first argument must be one of these (``run``)

    @classmethod
    def read(cls, r: TableReader) -> CommandPattern:
        return cls(programs=r.texts("programs", check=_PROGRAM, what="program name"),
                   args=r.texts("args", what="argument glob"),
                   subcommands=r.texts("subcommands", required=False, what="subcommand"))

    def token_sets(self) -> tuple[frozenset[Token], ...]:
        return ()


@dataclass(frozen=True, slots=True)
class YamlPattern:
    """A key in a YAML file (compose or conda), by dotted path; ``*`` stands for any
    mapping key or list item (``services.*.deploy.resources.reservations.devices.*.driver``)."""

    kind: ClassVar[str] = "yaml"
    surfaces: ClassVar[frozenset[str]] = frozenset({"compose", "conda"})
    variables: ClassVar[frozenset[str]] = frozenset({"matched", "path", "value"})
    paths: tuple[str, ...]
    values: tuple[Literal, ...] = ()  #: scalar values; a list value matches if it holds one

    @classmethod
    def read(cls, r: TableReader) -> YamlPattern:
        return cls(paths=r.texts("paths", check=_YAML_PATH, what="dotted key path"),
                   values=r.literals("values"))

    def token_sets(self) -> tuple[frozenset[Token], ...]:
        return ()


@dataclass(frozen=True, slots=True)
class KernelPattern:
    """A regular expression over CUDA/C++ kernel sources (``.cu``, ``.cuh`` and the C++
    files an extension builds), with comments and string literals blanked out first."""

    kind: ClassVar[str] = "kernel"
    surfaces: ClassVar[frozenset[str]] = frozenset({"cuda"})
    variables: ClassVar[frozenset[str]] = frozenset({"matched"})
    regex: Regex

    @classmethod
    def read(cls, r: TableReader) -> KernelPattern:
        regex = r.regex("regex")
        if regex is None:
            raise PatternError(r.key("regex"), "missing required key")
        return cls(regex=regex)

    def token_sets(self) -> tuple[frozenset[Token], ...]:
        return ()


@dataclass(frozen=True, slots=True)
class CudaApiPattern:
    """CUDA API identifiers in kernel sources that PyTorch's hipify table does not map
    to HIP (the shipped copy of that table, ``portscan.match.hipify``)."""

    kind: ClassVar[str] = "cuda-api"
    surfaces: ClassVar[frozenset[str]] = frozenset({"cuda"})
    variables: ClassVar[frozenset[str]] = frozenset({"matched"})
    identifiers: Regex = Regex(CUDA_API_IDENTIFIERS)

    @classmethod
    def read(cls, r: TableReader) -> CudaApiPattern:
        return cls(identifiers=r.regex("identifiers") or Regex(CUDA_API_IDENTIFIERS))

    def token_sets(self) -> tuple[frozenset[Token], ...]:
        return ()


@dataclass(frozen=True, slots=True)
class BuildArgPattern:
    """A value passed to a CUDA extension build (``CUDAExtension``, ``load``,
    ``load_inline``): ``nvcc`` / ``cxx`` compiler flags (``extra_compile_args``,
    ``extra_cuda_cflags``), ``libraries`` or ``extra_link_args``."""

    kind: ClassVar[str] = "build-arg"
    surfaces: ClassVar[frozenset[str]] = PYTHON
    variables: ClassVar[frozenset[str]] = frozenset({"matched", "value", "argument"})
    argument: str
    values: tuple[str, ...]  #: globs over the string values

    @classmethod
    def read(cls, r: TableReader) -> BuildArgPattern:
        return cls(argument=r.choice("argument", BUILD_ARGUMENTS),
                   values=r.texts("values", what="value glob"))

    def token_sets(self) -> tuple[frozenset[Token], ...]:
        return (frozenset({"cpp_extension"}),)


Pattern = (ImportPattern | NamePattern | CallPattern | ComparePattern | AssignPattern
           | EnvPattern | StringPattern | SubprocessPattern | RequirementPattern | IndexPattern
           | ImagePattern | CommandPattern | YamlPattern | KernelPattern | CudaApiPattern
           | BuildArgPattern)

#: kind name -> reader; an explicit literal, not a registry filled by imports.
PATTERN_KINDS: dict[str, Callable[[TableReader], Pattern]] = {
    cls.kind: cls.read
    for cls in (ImportPattern, NamePattern, CallPattern, ComparePattern, AssignPattern,
                EnvPattern, StringPattern, SubprocessPattern, RequirementPattern, IndexPattern,
                ImagePattern, CommandPattern, YamlPattern, KernelPattern, CudaApiPattern,
                BuildArgPattern)
}


def read_pattern(data: Any) -> Pattern:
    """Parse a ``[match]`` table; raises :class:`PatternError` naming the bad key."""
    r = TableReader(data, "match")
    kind = r.choice("kind", tuple(PATTERN_KINDS))
    pattern = PATTERN_KINDS[kind](r)
    r.finish()
    return pattern
