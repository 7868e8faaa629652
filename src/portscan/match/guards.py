"""Guards: code that already copes with ROCm is reported at a lower severity.

The Python matcher records *guarded regions* while it walks a file; a finding whose
range lies inside one takes the guard's name and a lowered severity:

``type-checking``
    under ``if TYPE_CHECKING:`` -- never runs -- reported as ``info``.
``vendor-branch``
    in a branch of an ``if``/``elif``/ternary whose condition checks the GPU vendor
    (``torch.version.hip``, ``torch.version.cuda``, ``gcnArchName``, a name such
    as ``is_rocm``/``IS_HIP``/``is_nvidia``, a call of a predicate named ``is_cuda``
    (``current_platform.is_cuda()``), or a string naming a vendor: ``"nvidia" in gpu_name``,
    ``provider == "TensorrtExecutionProvider"``),
    in the body of a private module-level function mentioned only inside such
    branches, after ``if <vendor check>: return ...`` (or ``raise``, ``pytest.skip(...)``,
    ``sys.exit(...)``) in the same block, the check itself where an ``elif`` or the next
    ``if`` checks the vendor too (a dispatch), or anywhere in an ``and``/``or`` chain that contains such a check
    (``torch.version.cuda is not None and cap >= (9, 0)``) -- the author handles ROCm
    explicitly -- reported as ``info``.
``fallback``
    in the body of a ``try`` with a handler that catches the failure (a bare
    ``except``, ``ImportError``, ``Exception``, ``OSError``, ...) and does not just
    re-raise -- the code degrades instead of crashing, but the feature is silently
    lost on ROCm -- one step lower (error -> warning -> info), imports included. Also an
    import under ``if`` a presence flag naming its package (``if HAS_FLASH_ATTN:``, the
    flag such a ``try`` sets) or an availability check the rule names (its ``probes``).
``handled``
    in the body of a ``try`` whose handler catches one of the exceptions the rule says
    its matched use raises on ROCm (the rule's ``raises``; ``Exception`` or a bare
    ``except`` as well) and does more than re-raise (``try: v = torch.version.cuda.split(".")``
    ``except AttributeError: v = None``) -- the ROCm case is the one handled -- ``info``.
    In shell (scripts, ``RUN`` lines, CI steps): a program run as ``nvidia-smi || true``
    or ``|| :`` -- its failure stops nothing -- ``info`` (:mod:`portscan.match.common`).
``tuning``
    a capability test whose branches only assign numbers (``BLOCK = 128 if cap >= (8, 0)
    else 64``): a tile size, warp or stage count is picked, no feature -- ``info``.
``no-consumer``
    a value used in a module that uses none of the rule's ``consumers`` (an OCP FP8
    dtype where nothing computes in FP8: it is only created, cast, stored or viewed,
    which works on every ROCm GPU) -- ``info``.
``integration``
    an import of a library in a module inside a folder named for it, itself inside a
    folder of adapters (``integration``, ``plugins``, ``adapters``, ``connectors``,
    ``sources``: ``lmcache/integration/tensorrt_llm/adapter.py`` importing
    ``tensorrt_llm``, ``sources/vllm/driver.py`` importing ``vllm``): the project's
    adapter for that library, loaded where the library itself runs -- ``info``. Not for
    a folder named for the platform (``devices/cuda/`` importing cuda-python's ``cuda``).
``format-defined``
    in a def or class named for a data format the rule's ``formats`` lists, or the body
    of an ``if`` whose test names one (``def quantize_nvfp4``, ``if dtype == DType.NVFP4:``):
    the format itself fixes the value (NVFP4's block scales are OCP E4M3, whatever the
    GPU) -- ``info``.
``fallback-equivalent``
    an import in such a ``try`` whose handler binds every name it imports to one of
    the rule's ``equivalents`` (``except ImportError: LayerNorm = torch.nn.LayerNorm``
    for apex's ``FusedLayerNorm``) -- nothing is lost -- reported as ``info``.

A value reported somewhere other than where it is written (a flag list a helper returns,
reported at the helper's call) takes the guard of the place it is written when its own
place has none.

The vendor test is a syntactic heuristic, stated here so users can predict it.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import libcst as cst

from portscan.leancst import exactly
from portscan.match.syntax import ATTRIBUTE, children, dotted, small_statements, string_text, tuple_items
from portscan.match.levels import (  # noqa: F401 - re-exported
    FALLBACK,
    FALLBACK_EQUIVALENT,
    FORMAT_DEFINED,
    INTEGRATION,
    GUARD_ORDER,
    HANDLED,
    MESSAGE_ONLY,
    NO_CONSUMER,
    TUNING,
    TYPE_CHECKING,
    VENDOR_BRANCH,
    ROCM_WORD,
    VENDOR_CALL,
    VENDOR_TEXT,
    VENDOR_WORD,
    guarded_severity,
)

#: Exceptions whose handler means "this may fail on some machines, and we cope".
FALLBACK_EXCEPTIONS = frozenset({
    "ImportError", "ModuleNotFoundError", "Exception", "BaseException", "OSError",
    "FileNotFoundError", "RuntimeError", "AttributeError", "TypeError", "ValueError",
    "CalledProcessError", "SubprocessError", "NVMLError", "AssertionError",
})
#: folders named for the platform, not for a library a module there adapts
_PLATFORM_FOLDERS = frozenset({"cuda", "nvidia", "gpu"})


#: folders that hold a project's adapters for other libraries, one subfolder per library
_ADAPTER_FOLDERS = frozenset({"integration", "integrations", "plugin", "plugins", "adapter", "adapters",
                              "connector", "connectors", "sources"})


def adapts(folders: Sequence[str], module: str) -> bool:
    """Is a module in ``folders`` (its path's folders below the scan root) the project's
    adapter for the library ``module`` names: is one folder named for the library, inside
    one that holds adapters (``integration/tensorrt_llm/``)? A project's ``triton/`` folder
    of kernels written in Triton is its own code, not a plug-in that Triton loads."""
    top = module.split(".", 1)[0].lower()
    if not top or top in _PLATFORM_FOLDERS:
        return False
    names = [folder.lower().replace("-", "_") for folder in folders]
    return any(name == top and parent in _ADAPTER_FOLDERS for parent, name in itertools.pairwise(names))


def formats_named(node: cst.CSTNode, formats: frozenset[str]) -> frozenset[str]:
    """Which of ``formats`` (lower case, no underscores) the names, attributes and strings
    of ``node`` spell (``scale_activations_nvfp4``, ``DType.NVFP4``, ``"nv_fp4"``)."""
    found: set[str] = set()
    stack = [node]
    while stack:
        item = stack.pop()
        kind = type(item)
        text = (item.value if kind in _NAME_OR_STRING else  # type: ignore[attr-defined]
                item.attr.value if kind in ATTRIBUTE else None)  # type: ignore[attr-defined]
        if text is not None:
            word = text.lower().replace("_", "")
            found.update(f for f in formats if f in word)
        stack.extend(children(item))
    return frozenset(found)


def is_type_checking(test: cst.BaseExpression) -> bool:
    chain = dotted(test)
    return chain is not None and chain[1][-1] == "TYPE_CHECKING"


#: the builds ``torch.version`` names
_BUILDS = (["version", "hip"], ["version", "cuda"])
#: a string that names the ROCm side (``"ROCm version: "``, ``"not supported on AMD GPUs"``)
_ROCM_TEXT = re.compile(r"(?i)\b(rocm|hip)|\b(amd|radeon|instinct)\b")


_CALL, _NAME_OR_ATTRIBUTE = exactly(cst.Call), exactly(cst.Name, cst.Attribute)
_NAME_OR_STRING = exactly(cst.Name, cst.SimpleString)
_SIMPLE_STRING, _FORMATTED_TEXT = exactly(cst.SimpleString), exactly(cst.FormattedStringText)


def _names_vendor(expr: cst.CSTNode, builds: tuple[list[str], ...], text: re.Pattern[str],
                  word: re.Pattern[str], called: re.Pattern[str] | None = None) -> bool:
    """Does ``expr`` name a vendor: ``torch.version.<build>`` for one of ``builds``, a name
    part ``word`` finds (``is_rocm``/``IS_HIP``), a call of a function whose name ``called``
    matches, or a string (an f-string's text included) that ``text`` finds?"""
    stack: list[cst.CSTNode] = [expr]
    while stack:
        node = stack.pop()
        kind = type(node)
        if called is not None and kind in _CALL:
            callee = dotted(node.func)  # type: ignore[attr-defined]
            if callee is not None and called.search(callee[1][-1]):
                return True
        if kind in _NAME_OR_ATTRIBUTE:
            chain = dotted(node)  # type: ignore[arg-type]
            if chain is not None:
                parts = chain[1]
                if parts[-2:] in builds or any(word.search(part) for part in parts):
                    return True
                continue
            if kind in ATTRIBUTE and word.search(node.attr.value):  # type: ignore[attr-defined]
                return True
        elif kind in _SIMPLE_STRING or kind in _FORMATTED_TEXT:
            value = string_text(node) if kind in _SIMPLE_STRING else node.value  # type: ignore[arg-type, attr-defined]
            if value is not None and text.search(value):
                return True
            continue
        stack.extend(children(node))
    return False


#: a flag that says a package imported (``HAS_FLASH_ATTN``, ``IS_SPCONV2_AVAILABLE``,
#: ``env_info["has_flash_attn"]``), as a probe's ``try: import x`` / ``except ImportError``
#: sets it; ``use_x`` is a choice, not a probe
_PRESENCE_FLAG = re.compile(r"(?i)^_*(has|have)_|_(available|installed|found)$")


def presence_flags(test: cst.BaseExpression) -> frozenset[str]:
    """The presence flags an ``if`` test reads un-negated (names, attributes, string keys;
    not the functions it calls), folded (lower case, no underscores): ``if HAS_FLASH_ATTN:`` gives ``hasflashattn``."""
    found = set()
    stack: list[cst.CSTNode] = [test]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not):
            continue  # `if not HAS_X:` is the path without the package
        if isinstance(node, cst.Call):  # `is_x_available()` is a check of another kind (`probes`)
            stack.extend(a.value for a in node.args)
            continue
        word = (node.value if isinstance(node, cst.Name) else node.attr.value if isinstance(node, cst.Attribute)
                else string_text(node) if isinstance(node, cst.SimpleString) else None)
        if word and _PRESENCE_FLAG.search(word):
            found.add(word.lower().replace("_", ""))
        stack.extend(children(node))
    return frozenset(found)


def flags_package(flags: frozenset[str], module: str, names: Sequence[str] = ()) -> bool:
    """Does one of these folded presence flags name ``module``'s package
    (``hasflashattn`` for ``flash_attn.bert_padding``), or one of the other ``names`` the
    library goes by (``hasflashattnhopper`` for ``flash_attn_interface``)?"""
    package = module.split(".")[0].lower().replace("_", "")
    called = [n for n in (package, *names) if n]
    return any(name in flag for flag in flags for name in called)


def is_vendor_check(expr: cst.CSTNode) -> bool:
    """Does this condition ask which GPU vendor (or build) it runs on?"""
    return _names_vendor(expr, _BUILDS, VENDOR_TEXT, VENDOR_WORD, VENDOR_CALL)


#: the values a project's own device-type variable takes for the two GPU builds
ROCM_DEVICE_TYPES = frozenset({"hip", "rocm"})
CUDA_DEVICE_TYPES = frozenset({"cuda"})


def names_compared_with(expr: cst.CSTNode, texts: frozenset[str]) -> frozenset[str]:
    """The names (a name, or an attribute's last part) that the comparison ``expr`` tests
    for equality or membership against a string in ``texts`` (any case):
    ``DEVICE_TYPE == "hip"``, ``self.device_type in ("cuda", "hip")``. A project's own
    device-type variable that is compared with ``"hip"`` somewhere in the module is
    ``"hip"`` on ROCm, so its ``== "cuda"`` tests ask for NVIDIA (unsloth-zoo's
    ``DEVICE_TYPE``), unlike ``tensor.device.type == "cuda"``, which ROCm passes."""
    if not isinstance(expr, cst.Comparison):
        return frozenset()
    found = set()
    left = expr.left
    for target in expr.comparisons:
        right = target.comparator
        if isinstance(target.operator, (cst.Equal, cst.NotEqual, cst.In, cst.NotIn)):
            for side, other in ((left, right), (right, left)):
                if isinstance(other, cst.SimpleString):
                    values: list[cst.BaseExpression] = [other]
                elif isinstance(other, (cst.Tuple, cst.List, cst.Set)):
                    values = [e.value for e in other.elements]
                else:
                    continue  # most comparisons: nothing to read
                named = side.value if isinstance(side, cst.Name) else side.attr.value if isinstance(
                    side, cst.Attribute) else None
                if named and any((string_text(v) or "").lower() in texts for v in values):
                    found.add(named)
        left = right
    return frozenset(found)


def mentions_rocm(node: cst.CSTNode) -> bool:
    """Does this code name the ROCm side: ``torch.version.hip``, a name like ``is_rocm``,
    a string saying ROCm, HIP or AMD? A vendor test whose branch does knows both sides."""
    return _names_vendor(node, _BUILDS[:1], _ROCM_TEXT, ROCM_WORD)


def build_flag(expr: cst.BaseExpression, which: str) -> bool:
    """Is ``expr`` a truth test of ``torch.version.<which>`` (``"hip"`` or ``"cuda"``) and
    nothing else: ``... is not None``, ``... is None``, ``bool(...)``, ``not ...``?"""
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
        expr = expr.expression
    elif isinstance(expr, cst.Call) and len(expr.args) == 1 and isinstance(expr.func, cst.Name) \
            and expr.func.value == "bool":
        expr = expr.args[0].value
    elif isinstance(expr, cst.Comparison) and len(expr.comparisons) == 1:
        target = expr.comparisons[0]
        if not (isinstance(target.operator, (cst.Is, cst.IsNot)) and isinstance(target.comparator, cst.Name)
                and target.comparator.value == "None"):
            return False
        expr = expr.left
    chain = dotted(expr) if isinstance(expr, cst.Attribute) else None
    return chain is not None and chain[1][-2:] == ["version", which]


def vendor_flag_values(body: Sequence[cst.BaseStatement]) -> list[cst.BaseExpression]:
    """The ``torch.version.cuda`` flags a block assigns beside a ``torch.version.hip``
    flag, in one run of assignments on consecutive lines (``IS_ROCM = torch.version.hip
    is not None`` then ``IS_CUDA = torch.version.cuda is not None``): a flag pair that
    tells the builds apart, the vendor test PS402's rewrite asks for, not a "GPU build
    present" check."""
    found: list[cst.BaseExpression] = []
    run: list[cst.BaseExpression] = []
    for statement in (*body, None):
        value = _assigned_value(statement)
        if value is not None and run and not _after_blank_line(statement):
            run.append(value)
            continue
        if any(build_flag(v, "hip") for v in run):
            found += [v for v in run if build_flag(v, "cuda")]
        run = [value] if value is not None else []
    return found


def _after_blank_line(statement: cst.BaseStatement | None) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and any(
        line.comment is None for line in statement.leading_lines)


def _assigned_value(statement: cst.BaseStatement | None) -> cst.BaseExpression | None:
    """The value of a one-assignment statement line (``X = ...``, ``X: bool = ...``)."""
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return None
    small = statement.body[0]
    return small.value if isinstance(small, (cst.Assign, cst.AnnAssign)) else None


#: names that hold the CUDA toolkit's location: None (or unset) wherever there is no CUDA
_TOOLKIT_NAMES = frozenset({"CUDA_HOME", "CUDA_PATH"})


def is_toolkit_check(expr: cst.CSTNode) -> bool:
    """Does this condition test where the CUDA toolkit is (``CUDA_HOME is not None``)?
    torch's ``CUDA_HOME`` is None on ROCm builds, so the branches under such a test are
    vendor branches; the test itself stays what it is (a gate that skips the GPU build on
    ROCm), and unlike a vendor check it makes neither an ``and``/``or`` chain vendor-aware
    nor the code after ``if CUDA_HOME is None: raise ...`` (that gate stops the ROCm build;
    what follows is what a port has to change once it is lifted) -- not even when it picks
    the toolkit by vendor, as ``cuda-home-toolkit`` writes it:
    ``if (ROCM_HOME if IS_HIP_EXTENSION else CUDA_HOME) is None: raise ...``."""
    stack: list[cst.CSTNode] = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.Name, cst.Attribute)):
            chain = dotted(node)
            if chain is not None and chain[1][-1] in _TOOLKIT_NAMES:
                return True
            if chain is not None:
                continue
        stack.extend(children(node))
    return False


def _caught(handler: cst.ExceptHandler | cst.ExceptStarHandler) -> frozenset[str]:
    """The exception names (last dotted part) a handler catches; ``"*"`` when bare."""
    if handler.type is None:
        return frozenset({"*"})
    return frozenset(chain[1][-1] for chain in map(dotted, tuple_items(handler.type)) if chain is not None)


def handler_falls_back(handler: cst.ExceptHandler | cst.ExceptStarHandler) -> bool:
    """A handler that catches a plausible failure and does something other than re-raise."""
    return bool(_caught(handler) & (FALLBACK_EXCEPTIONS | {"*"})) and not only_raises(handler)


def caught_by(handlers: Sequence[cst.ExceptHandler | cst.ExceptStarHandler]) -> frozenset[str]:
    """What the handlers that do more than re-raise catch (``"*"``: a bare ``except``)."""
    return frozenset().union(*(_caught(h) for h in handlers if not only_raises(h)))


def handles(caught: frozenset[str], raises: Sequence[str]) -> bool:
    """Do handlers catching ``caught`` catch one of ``raises``?"""
    return bool(caught & {"*", "Exception", "BaseException", *raises})


def only_raises(handler: cst.ExceptHandler | cst.ExceptStarHandler) -> bool:
    """Does an ``except`` handler do nothing but raise (so nothing runs without what the
    ``try`` failed to do)?"""
    statements = small_statements(handler.body)
    return bool(statements) and all(isinstance(s, cst.Raise) for s in statements)


def boolean_operands(node: cst.BooleanOperation) -> list[cst.BaseExpression]:
    """``a and b or c`` flattened to its operands."""
    operands: list[cst.BaseExpression] = []
    stack: list[cst.BaseExpression] = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, cst.BooleanOperation) and not item.lpar:
            stack.append(item.right)
            stack.append(item.left)
        else:
            operands.append(item)
    return operands


@dataclass(frozen=True, slots=True)
class Substitute:
    """What a handler binds a name to: a dotted name as written (``parts``, qualified
    later through the scope), a name it imports (``full``), or neither (``None``,
    ``False``, a def or class of the project's own: nothing equivalent)."""

    parts: tuple[str, ...] = ()
    full: str = ""


def handler_bindings(handlers: Sequence[cst.ExceptHandler | cst.ExceptStarHandler]
                     ) -> dict[str, list[Substitute]]:
    """The names the falling-back handlers bind, and to what (``if``/``else`` inside a
    handler included): what the ``try``'s imports become when they fail."""
    return block_bindings([h.body for h in handlers if handler_falls_back(h)])


def block_bindings(blocks: list[cst.BaseSuite]) -> dict[str, list[Substitute]]:
    """The names ``blocks`` bind (nested ``if``/``else`` included), and to what: a
    handler's, or the ``else`` of ``if HAS_SPCONV: from spconv import X``."""
    found: dict[str, list[Substitute]] = {}
    while blocks:
        block = blocks.pop()
        lines = block.body if isinstance(block, cst.IndentedBlock) else [block]
        for line in lines:
            statements = line.body if isinstance(line, (cst.SimpleStatementLine, cst.SimpleStatementSuite)) \
                else [line]
            for statement in statements:
                for name, substitute in _binds(statement, blocks):
                    found.setdefault(name, []).append(substitute)
    return found


def _binds(statement: cst.CSTNode, blocks: list[cst.BaseSuite]) -> Iterator[tuple[str, Substitute]]:
    if isinstance(statement, cst.If):
        blocks.append(statement.body)
        if statement.orelse is not None:
            blocks.append(statement.orelse.body)
    elif isinstance(statement, (cst.Assign, cst.AnnAssign)):
        targets = ([t.target for t in statement.targets] if isinstance(statement, cst.Assign)
                   else [statement.target])
        chain = dotted(statement.value) if statement.value is not None else None
        substitute = Substitute(parts=tuple(chain[1])) if chain is not None else Substitute()
        for target in targets:
            if isinstance(target, cst.Name):
                yield target.value, substitute
    elif isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
        yield statement.name.value, Substitute()
    elif isinstance(statement, cst.Import):
        for alias in statement.names:
            if alias.asname is not None:
                yield alias.evaluated_alias or alias.evaluated_name, Substitute(full=alias.evaluated_name)
    elif isinstance(statement, cst.ImportFrom) and not statement.relative and statement.module is not None \
            and not isinstance(statement.names, cst.ImportStar):
        module = cst.helpers.get_full_name_for_node(statement.module) or ""
        for alias in statement.names:
            yield (alias.evaluated_alias or alias.evaluated_name,
                   Substitute(full=f"{module}.{alias.evaluated_name}"))
