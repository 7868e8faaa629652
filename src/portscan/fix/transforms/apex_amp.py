"""apex amp -> ``torch.amp``: ``amp.initialize`` + ``amp.scale_loss`` in their common shapes.

Before::

    model, optimizer = amp.initialize(model, optimizer, opt_level="O1")
    for x, y in loader:
        loss = criterion(model(x), y)
        optimizer.zero_grad()
        with amp.scale_loss(loss, optimizer) as scaled_loss:
            scaled_loss.backward()
        torch.nn.utils.clip_grad_norm_(amp.master_params(optimizer), 1.0)
        optimizer.step()

After::

    scaler = torch.amp.GradScaler("cuda")
    for x, y in loader:
        with torch.amp.autocast("cuda", dtype=torch.float16):
            loss = criterion(model(x), y)
        optimizer.zero_grad()
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_((p for group in optimizer.param_groups for p in group["params"]), 1.0)
        scaler.step(optimizer)
        scaler.update()

The shape this handles: one ``amp.initialize(model, optimizer, ...)`` assignment, at
module level or in the function that also holds every ``with amp.scale_loss(loss,
opt) as s: s.backward()`` and an ``opt.step()`` for each optimizer. The statements
that compute each loss before its ``scale_loss``, in its loop (or function) body -- the
forward pass and the loss, found by following the loss's data flow back -- go under
autocast; what comes after the loss (logging, ``zero_grad``) stays outside. A run-time
``opt_level`` or ``enabled=`` becomes the scaler's ``enabled`` and autocast follows
``scaler.is_enabled()``; an ``initialize`` under a condition gets a disabled scaler
before it, as apex passes the loss through when amp was never initialized. Gradient
clipping after ``scale_loss`` saw unscaled gradients under apex, so ``scaler.unscale_(opt)``
is written before it.

Anything else that uses apex amp in the module (``amp.state_dict()``, ``half_function``,
``num_losses``, a fixed ``loss_scale``, O3, ``delay_unscale``) leaves the whole module
to the user: a partial port would not run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import libcst as cst
from packaging.version import Version

from portscan.fix.rewrite import EQUAL, FixContext, single_small
from portscan.ruleset.fixspec import NEEDS_UNSAFE, Tier
from portscan.fix.transforms.base import TransformResult, decline_all
from portscan.match import Match
from portscan.match.fixsites import binding_conflict, probing
from portscan.match.syntax import Walker, dotted, literal
from portscan.ruleset.table import MISSING

AMP = "apex.amp"
INITIALIZE = {"apex.amp.initialize", "apex.amp.frontend.initialize"}
SCALE_LOSS = {"apex.amp.scale_loss", "apex.amp.handle.scale_loss"}
MASTER_PARAMS = {"apex.amp.master_params", "apex.amp._amp_state.master_params"}
#: calls that only steer apex's O1 casts: left in place here, deleted by their own rule's
#: fix (apex-amp-function-casts) once nothing else in the module uses apex amp
CASTS = {"apex.amp.register_half_function", "apex.amp.register_float_function",
         "apex.amp.register_promote_function"}
CLIPPING = {"torch.nn.utils.clip_grad_norm_", "torch.nn.utils.clip_grad_value_",
            "torch.nn.utils.clip_grad.clip_grad_norm_", "torch.nn.utils.clip_grad.clip_grad_value_"}
#: initialize() keywords that only tune apex's O2 and have no meaning under autocast
IGNORED_OPTIONS = {"keep_batchnorm_fp32", "master_weights", "verbosity"}
SCALER_NAMES = ("scaler", "grad_scaler", "amp_scaler")
#: since when ``torch.amp.<name>`` takes a device type (``torch.amp.autocast("cuda")`` 1.12,
#: ``torch.amp.GradScaler("cuda")`` 2.3); below it the CUDA forms are written
#: (``torch.cuda.amp.GradScaler()`` 1.6, ``torch.cuda.amp.autocast(dtype=...)`` 1.10, the
#: rule files' floor for this transform), which behave the same on NVIDIA and on ROCm
DEVICE_FORMS = {"autocast": Version("1.12"), "GradScaler": Version("2.3")}


class Decline(Exception):
    """The module is not in a shape this transform handles."""


@dataclass
class _Plan:
    """Statement-level edits, keyed by the original nodes of the pass's tree."""

    replace: dict[cst.CSTNode, Callable[[Any], list[Any]]] = field(default_factory=dict)
    before: dict[cst.CSTNode, list[Any]] = field(default_factory=dict)
    expressions: dict[cst.CSTNode, cst.BaseExpression] = field(default_factory=dict)
    #: block -> (first, last) statement indices to put under autocast
    wraps: dict[cst.CSTNode, list[tuple[int, int]]] = field(default_factory=dict)


def _code(ctx: FixContext, node: cst.CSTNode) -> str:
    return "".join(ctx.module.code_for_node(node).split())


def _argument(call: cst.Call, index: int, keyword: str) -> cst.Arg | None:
    for i, arg in enumerate(call.args):
        if arg.keyword is not None and arg.keyword.value == keyword:
            return arg
        if arg.keyword is None and not arg.star and i == index:
            return arg
    return None


def _amp_references(ctx: FixContext) -> list[tuple[str, cst.CSTNode]]:
    """Every use of apex amp in the module: (qualified name, outermost node)."""
    uses: list[tuple[str, cst.CSTNode]] = []
    for node in _imports(ctx.module):
        scope = ctx.scope(node)
        for alias in node.names if not isinstance(node.names, cst.ImportStar) else ():
            local = alias.evaluated_alias or alias.evaluated_name.split(".")[0]
            base = _bound_module(node, alias)
            if base is None or not (AMP.startswith(base) or base.startswith(AMP)):
                continue
            owner = scope.lookup(local)
            conflict = binding_conflict((local, tuple(owner.bindings[local]))) if owner is not None else None
            conflict = conflict or probing(ctx, node, local)
            if conflict is not None:
                raise Decline(conflict)
            for use, _ in ctx.names.uses(local, scope):
                chain_node, parts = _chain(ctx, use)
                qualified = ".".join([base, *parts])
                if qualified == AMP or qualified.startswith(AMP + "."):
                    uses.append((qualified, chain_node))
    return uses


def _imports(module: cst.Module) -> list[cst.Import | cst.ImportFrom]:
    found: list[cst.Import | cst.ImportFrom] = []

    class Collect(Walker):
        def visit_Import(self, node: cst.Import) -> None:
            found.append(node)

        def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
            if not node.relative:
                found.append(node)

    Collect().walk(module)
    return found


def _bound_module(node: cst.Import | cst.ImportFrom, alias: cst.ImportAlias) -> str | None:
    if isinstance(node, cst.Import):
        return alias.evaluated_name if alias.evaluated_alias else alias.evaluated_name.split(".")[0]
    if node.module is None:
        return None
    return f"{cst.helpers.get_full_name_for_node(node.module)}.{alias.evaluated_name}"


def _chain(ctx: FixContext, node: cst.CSTNode) -> tuple[cst.CSTNode, list[str]]:
    parts: list[str] = []
    parent = ctx.parent(node)
    while isinstance(parent, cst.Attribute) and parent.value is node:
        parts.append(parent.attr.value)
        node = parent
        parent = ctx.parent(node)
    return node, parts


def _function(ctx: FixContext, node: cst.CSTNode) -> cst.CSTNode:
    """The function whose body runs ``node`` (the module at top level)."""
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, cst.Lambda | cst.ClassDef):
            raise Decline("apex amp is used inside a lambda or a class body")
        if isinstance(ancestor, cst.FunctionDef):
            return ancestor
    return ctx.module


def _block_child(ctx: FixContext, node: cst.CSTNode, stop: Callable[[cst.CSTNode], bool]
                 ) -> tuple[cst.CSTNode, int]:
    """The innermost block for which ``stop(block's owner)`` holds, and the index of the
    statement in it that contains ``node``."""
    child = node
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, cst.IndentedBlock | cst.Module):
            owner = ctx.parent(ancestor) if isinstance(ancestor, cst.IndentedBlock) else ancestor
            if owner is not None and stop(owner):
                return ancestor, list(ancestor.body).index(child)  # type: ignore[arg-type]
        child = ancestor
    raise Decline("could not place the statement")


def _statement_of(ctx: FixContext, node: cst.CSTNode) -> cst.BaseStatement:
    statement = ctx.statement(node)
    if statement is None:
        raise Decline("could not place the statement")
    return statement


class _Builder:
    """Works out the rewrite of one module, or raises :class:`Decline`."""

    def __init__(self, ctx: FixContext) -> None:
        self.ctx = ctx
        self.plan = _Plan()

    def amp_api(self, name: str, at: cst.CSTNode) -> tuple[cst.BaseExpression, list[cst.Arg]]:
        """``torch.amp.<name>`` and its ``"cuda"`` argument, or ``torch.cuda.amp.<name>``
        where the project's torch floor predates the device-type form."""
        floor = self.ctx.torch_floor
        if floor is None or floor >= DEVICE_FORMS[name]:
            return self.expression(f"torch.amp.{name}", at), [cst.Arg(cst.SimpleString('"cuda"'))]
        return self.expression(f"torch.cuda.amp.{name}", at), []

    def expression(self, qualified: str, at: cst.CSTNode) -> cst.BaseExpression:
        reference = self.ctx.reference(qualified, at)
        if reference is None:
            raise Decline(f"`{qualified.split('.')[0]}` means something else here")
        return reference

    def build(self) -> None:
        uses = _amp_references(self.ctx)
        if not uses:
            raise Decline("no apex amp use found")
        initializes, scales, masters = [], [], []
        for qualified, node in uses:
            parent = self.ctx.parent(node)
            if not (isinstance(parent, cst.Call) and parent.func is node):
                raise Decline(f"`{qualified}` is used without being called")
            if qualified in INITIALIZE:
                initializes.append(parent)
            elif qualified in SCALE_LOSS:
                scales.append(parent)
            elif qualified in MASTER_PARAMS:
                masters.append(parent)
            elif qualified in CASTS:
                continue
            else:
                raise Decline(f"`{qualified}` has no automatic torch.amp rewrite")
        if len(initializes) != 1:
            raise Decline("needs exactly one amp.initialize(...) in the module"
                          if initializes else "amp.initialize is not in this module")
        if not scales:
            raise Decline("no amp.scale_loss in this module")
        self.function = _function(self.ctx, initializes[0])
        for call in [*scales, *masters]:
            where = _function(self.ctx, call)
            if where is not self.function and self.function is not self.ctx.module \
                    and self.function not in self.ctx.ancestors(where):
                raise Decline("amp.scale_loss is in another function than amp.initialize (not a closure "
                              "of it): the scaler would have to be passed along by hand")
        self.functions = {_function(self.ctx, call) for call in scales} | {self.function}
        scaler, enabled, conditional = self.initialize(initializes[0])
        optimizers = [self.scale_loss(call, scaler) for call in scales]
        steps = self.steps(scales, optimizers, scaler)
        self.clipping(masters, optimizers, scaler, steps)
        self.autocast(scales, scaler, enabled or conditional)

    # -- amp.initialize -> GradScaler ---------------------------------------------------

    def initialize(self, call: cst.Call) -> tuple[str, bool, bool]:
        ctx = self.ctx
        statement = _statement_of(ctx, call)
        small = single_small(statement)
        if not isinstance(small, cst.Assign) or small.value is not call or len(small.targets) != 1:
            raise Decline("amp.initialize is not assigned as `model, optimizer = amp.initialize(...)`")
        model, optimizer = _argument(call, 0, "models"), _argument(call, 1, "optimizers")
        if model is None or optimizer is None:
            raise Decline("amp.initialize without an optimizer has no loss scaler to create")
        for arg in (model, optimizer):
            if isinstance(arg.value, cst.List | cst.Tuple):
                raise Decline("amp.initialize with lists of models or optimizers")
        enabled_parts: list[cst.BaseExpression] = []
        for arg in call.args:
            if arg.keyword is None or arg.keyword.value in ("models", "optimizers"):
                if arg.star:
                    raise Decline("amp.initialize is called with *args or **kwargs")
                continue
            key, value = arg.keyword.value, literal(arg.value)
            if key in IGNORED_OPTIONS:
                continue
            if key == "opt_level":
                if value in ("O1", "O2"):
                    continue
                if value == "O0":
                    enabled_parts.append(cst.Name("False"))
                elif value is MISSING:
                    enabled_parts.append(cst.parse_expression(
                        f"{ctx.module.code_for_node(arg.value)} != \"O0\""))
                else:
                    raise Decline(f"opt_level {value!r} has no torch.amp equivalent")
            elif key == "enabled":
                if value is not True:
                    enabled_parts.append(arg.value.with_changes(lpar=(), rpar=()))
            elif key == "loss_scale" and value == "dynamic":
                continue
            else:
                raise Decline(f"amp.initialize(..., {key}=...) has no torch.amp equivalent")
        scaler = self.scaler_name()
        grad_scaler, arguments = self.amp_api("GradScaler", call)
        if enabled_parts:
            enabled = enabled_parts[0]
            for part in enabled_parts[1:]:
                enabled = cst.BooleanOperation(enabled, cst.And(), part)
            arguments.append(cst.Arg(enabled, keyword=cst.Name("enabled"), equal=EQUAL))
        create = _line(cst.Assign([cst.AssignTarget(cst.Name(scaler))], cst.Call(grad_scaler, arguments)))
        target = small.targets[0].target
        pair = cst.Tuple([cst.Element(model.value), cst.Element(optimizer.value)], lpar=[], rpar=[])
        same = isinstance(target, cst.Tuple) and len(target.elements) == 2 and all(
            _code(ctx, t.value) == _code(ctx, a.value)
            for t, a in zip(target.elements, (model, optimizer), strict=True))

        def rewrite(updated: Any) -> list[Any]:
            lines: list[Any] = [] if same else [_line(cst.Assign([cst.AssignTarget(target)], pair))]
            lines.append(create)
            lines[0] = lines[0].with_changes(leading_lines=updated.leading_lines)
            return lines

        self.plan.replace[statement] = rewrite
        self.ctx.release_imports(call.func)
        conditional = False
        block, index = _block_child(ctx, statement, lambda owner: owner is self.function)
        top = block.body[index]  # type: ignore[attr-defined]
        if top is not statement:  # under if/try: a disabled scaler for the other path
            conditional = True
            self.plan.before.setdefault(top, []).append(_line(cst.Assign(
                [cst.AssignTarget(cst.Name(scaler))],
                cst.Call(grad_scaler.deep_clone(), [
                    *self.amp_api("GradScaler", call)[1],
                    cst.Arg(cst.Name("False"), keyword=cst.Name("enabled"), equal=EQUAL)]))))
        return scaler, bool(enabled_parts), conditional

    def scaler_name(self) -> str:
        scopes = [self.ctx.scope(f if f is self.ctx.module else f.body.body[0])  # type: ignore[attr-defined]
                  for f in self.functions]
        for name in SCALER_NAMES:
            if all(scope.lookup(name) is None for scope in scopes):
                return name
        raise Decline("the names for a GradScaler are all taken")

    # -- with amp.scale_loss(...) as s: s.backward() ------------------------------------

    def scale_loss(self, call: cst.Call, scaler: str) -> cst.BaseExpression:
        ctx = self.ctx
        item = ctx.parent(call)
        with_node = ctx.parent(item) if isinstance(item, cst.WithItem) else None
        if not isinstance(item, cst.WithItem) or not isinstance(with_node, cst.With) \
                or len(with_node.items) != 1 or item.asname is None:
            raise Decline("amp.scale_loss is not used as `with amp.scale_loss(loss, optimizer) as s:`")
        name = item.asname.name
        statements = list(with_node.body.body)
        small: cst.CSTNode | None = None
        if len(statements) == 1:
            small = statements[0] if isinstance(with_node.body, cst.SimpleStatementSuite) \
                else single_small(statements[0])
        backward = small.value if isinstance(small, cst.Expr) else None
        if not (isinstance(backward, cst.Call) and isinstance(backward.func, cst.Attribute)
                and backward.func.attr.value == "backward" and isinstance(name, cst.Name)
                and isinstance(backward.func.value, cst.Name) and backward.func.value.value == name.value):
            raise Decline("the body of `with amp.scale_loss(...)` does more than `.backward()`")
        loss, optimizer = _argument(call, 0, "loss"), _argument(call, 1, "optimizers")
        if loss is None or optimizer is None:
            raise Decline("amp.scale_loss without a loss and an optimizer")
        for arg in call.args:
            key = arg.keyword.value if arg.keyword is not None else None
            harmless = key in ("delay_unscale", "loss_id") and literal(arg.value) in (False, 0)
            if key is not None and key not in ("loss", "optimizers") and not harmless:
                raise Decline(f"amp.scale_loss(..., {key}=...) has no torch.amp rewrite")
        scaled = cst.Call(cst.Attribute(cst.Name(scaler), cst.Name("scale")),
                          [cst.Arg(loss.value.with_changes(lpar=(), rpar=()))])
        new = _line(cst.Expr(backward.with_changes(func=backward.func.with_changes(value=scaled))))
        self.plan.replace[with_node] = lambda updated: [new.with_changes(leading_lines=updated.leading_lines)]
        self.ctx.release_imports(call.func)
        return optimizer.value

    # -- optimizer.step() -> scaler.step(optimizer); scaler.update() --------------------

    def steps(self, scales: list[cst.Call], optimizers: list[cst.BaseExpression], scaler: str
              ) -> list[cst.BaseStatement]:
        ctx = self.ctx
        wanted = {_code(ctx, o) for o in optimizers}
        found: set[str] = set()
        statements: list[cst.BaseStatement] = []
        for function in {_function(ctx, call) for call in scales}:
            for statement in _statements(function):
                small = single_small(statement)
                call = small.value if isinstance(small, cst.Expr) else None
                if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute)
                        and call.func.attr.value == "step"):
                    continue
                receiver = _code(ctx, call.func.value)
                if receiver not in wanted:
                    continue
                if call.args:
                    raise Decline("`optimizer.step(...)` with a closure has no GradScaler rewrite")
                found.add(receiver)
                target = call.func.value

                def rewrite(updated: Any, target: cst.BaseExpression = target) -> list[Any]:
                    step = _line(cst.Expr(cst.Call(cst.Attribute(cst.Name(scaler), cst.Name("step")),
                                                   [cst.Arg(target.deep_clone())])))
                    update = _line(cst.Expr(cst.Call(cst.Attribute(cst.Name(scaler), cst.Name("update")))))
                    return [step.with_changes(leading_lines=updated.leading_lines), update]

                self.plan.replace[statement] = rewrite
                statements.append(statement)
        missing = wanted - found
        if missing:
            raise Decline(f"no `{sorted(missing)[0]}.step()` next to amp.scale_loss")
        return statements

    # -- clipping: amp.master_params(opt) and clip_grad_*_ need unscaled gradients ------

    def clipping(self, masters: list[cst.Call], optimizers: list[cst.BaseExpression], scaler: str,
                 steps: list[cst.BaseStatement]) -> None:
        """apex unscales gradients when ``scale_loss`` exits, so clipping saw true gradients:
        ``scaler.unscale_(opt)`` goes before it. That is only right where clipping runs once
        per ``scaler.step`` -- before the step, in the step's own block."""
        ctx = self.ctx
        statements: dict[cst.BaseStatement, cst.BaseExpression] = {}
        for call in masters:
            argument = _argument(call, 0, "optimizer")
            if argument is None or len(call.args) != 1:
                raise Decline("amp.master_params(...) without exactly one optimizer")
            self.plan.expressions[call] = _params_of(argument.value)
            self.ctx.release_imports(call.func)
            statements.setdefault(_statement_of(ctx, call), argument.value)
        if not masters:  # clipping model.parameters() right after scale_loss also saw unscaled grads
            distinct = {_code(ctx, o): o for o in optimizers}
            for function in self.functions:
                for statement in _statements(function):
                    if _calls_any(ctx, statement, CLIPPING):
                        if len(distinct) != 1:
                            raise Decline("gradient clipping with several optimizers")
                        statements[statement] = next(iter(distinct.values()))
        seen_blocks: set[int] = set()
        where = ctx.positions(list(statements))
        for statement in sorted(statements, key=lambda s: where[id(s)].start.line):
            if not any(_runs_before(ctx, statement, step) for step in steps):
                what = "gradient clipping" if _calls_any(ctx, statement, CLIPPING) else \
                    f"`amp.master_params(...)` (line {ctx.line(statement)})"
                raise Decline(f"{what} does not run once before each optimizer.step() (gradient "
                              "accumulation?), so where to unscale the gradients is not clear; port it by hand")
            block = ctx.parent(statement)
            if id(block) in seen_blocks:
                continue
            seen_blocks.add(id(block))
            unscale = _line(cst.Expr(cst.Call(cst.Attribute(cst.Name(scaler), cst.Name("unscale_")),
                                              [cst.Arg(statements[statement].deep_clone())])))
            self.plan.before.setdefault(statement, []).append(unscale)

    # -- the forward pass under autocast -------------------------------------------------

    def autocast(self, scales: list[cst.Call], scaler: str, follow_scaler: bool) -> None:
        """Put the statements that compute each loss under autocast, and only those: in the
        innermost block (up to the loop or function body) where a statement before
        ``scale_loss`` assigns the loss, from the first statement the loss depends on (data
        flow back from the loss through that block's assignments) to the last one that
        assigns it. Logging, timing and ``zero_grad`` after the loss stay outside; the walk
        back stops at the block's start or at a statement the rewrite touches."""
        ctx = self.ctx
        busy = set(self.plan.replace) | set(self.plan.before)
        for call in scales:
            loss = _argument(call, 0, "loss")
            assert loss is not None
            names = _reads(loss.value)
            region = None
            blocked: tuple[cst.CSTNode, cst.CSTNode] | None = None  # (the loss's statement, what stops the walk)
            for block, index in _enclosing_blocks(ctx, call):
                body = list(block.body)  # type: ignore[attr-defined]
                lower = index
                while lower > 0:
                    candidate = body[lower - 1]
                    if _docstring(candidate) or isinstance(candidate, cst.FunctionDef | cst.ClassDef) \
                            or any(ctx.contains(candidate, b) for b in busy) or _has_global(candidate):
                        break
                    lower -= 1
                writes = [_writes(statement) for statement in body[:index]]  # walked once per block
                assigning = [i for i in range(lower, index) if _touches(writes[i], names)]
                if assigning:
                    region = (block, _first_needed(body, writes, lower, assigning[-1], names), assigning[-1] + 1)
                    break
                earlier = [i for i in range(lower) if _touches(writes[i], names)]
                if earlier and blocked is None:
                    blocked = (body[earlier[-1]], body[lower - 1])
            if region is None:
                raise Decline(self.no_forward_pass(call, names, blocked))
            block, first, end = region
            regions = self.plan.wraps.setdefault(block, [])
            if (first, end) not in regions:
                regions.append((first, end))
        autocast, arguments = self.amp_api("autocast", scales[0])
        arguments.append(cst.Arg(self.expression("torch.float16", scales[0]), keyword=cst.Name("dtype"), equal=EQUAL))
        if follow_scaler:
            arguments.append(cst.Arg(cst.parse_expression(f"{scaler}.is_enabled()"),
                                     keyword=cst.Name("enabled"), equal=EQUAL))
        self.autocast_call = cst.Call(autocast, arguments)

    def no_forward_pass(self, call: cst.Call, names: set[str],
                        blocked: tuple[cst.CSTNode, cst.CSTNode] | None) -> str:
        """Why no autocast region was found for ``call``, as the search saw it."""
        ctx = self.ctx
        by_hand = "; put its forward pass under autocast by hand"
        if blocked is not None:
            loss, stop = blocked
            first = ctx.module.code_for_node(stop).strip().splitlines()[0]
            return (f"the loss is computed at line {ctx.line(loss)}, but `{first}` (line {ctx.line(stop)}) "
                    "stands between it and amp.scale_loss and is itself rewritten or a definition" + by_hand)
        function = _function(ctx, call)
        if isinstance(function, cst.FunctionDef):
            params = {p.name.value for p in (*function.params.posonly_params, *function.params.params,
                                             *function.params.kwonly_params)}
            if names & params:
                return (f"the loss comes into `{function.name.value}` as an argument, so the forward pass "
                        "is elsewhere" + by_hand)
        return "no statement before amp.scale_loss in its loop or function computes the loss" + by_hand


def _enclosing_blocks(ctx: FixContext, node: cst.CSTNode) -> list[tuple[cst.CSTNode, int]]:
    """(block, index of the statement holding ``node``), innermost first, up to the body of
    the loop or function (or the module) that runs it."""
    found: list[tuple[cst.CSTNode, int]] = []
    child = node
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, cst.IndentedBlock | cst.Module):
            found.append((ancestor, list(ancestor.body).index(child)))  # type: ignore[arg-type]
            owner = ctx.parent(ancestor) if isinstance(ancestor, cst.IndentedBlock) else ancestor
            if isinstance(owner, cst.For | cst.While | cst.FunctionDef | cst.Module):
                break
        child = ancestor
    return found


def _first_needed(body: list[cst.CSTNode], writes: list[set[str]], lower: int, last: int, names: set[str]) -> int:
    """The index of the first statement in ``body[lower:last + 1]`` that what ``body[last]``
    (the loss) reads depends on, following assignments backwards (``writes``: what each
    statement of ``body`` assigns, as :func:`_writes` found it)."""
    needed = set(names)
    first = last
    for i in range(last, lower - 1, -1):
        if i == last or _touches(writes[i], needed):
            needed |= _reads(body[i])
            first = i
    return first


def _touches(written: set[str], needed: set[str]) -> bool:
    """Does assigning ``written`` change one of ``needed``? (``self.x`` changes ``self``
    and ``self.x.y``; ``self.step`` leaves ``self.model`` alone.)"""
    return any(w == n or n.startswith(w + ".") or w.startswith(n + ".") for w in written for n in needed)


def _reads(node: cst.CSTNode) -> set[str]:
    """The names and dotted chains (``self.model``) in the code under ``node``."""
    found: set[str] = set()

    class Reads(Walker):
        def visit_Attribute(self, attribute: cst.Attribute) -> bool:
            chain = dotted(attribute)
            if chain is None:
                self.walk(attribute.value)  # f(x).loss reads f and x, not a name `loss`
            else:
                found.add(".".join(chain[1]))
            return False

        def visit_Name(self, name: cst.Name) -> None:
            found.add(name.value)

    Reads().walk(node)
    return found


def _writes(statement: cst.CSTNode) -> set[str]:
    """What a statement assigns, looking into its blocks but not into nested defs: names,
    and the chain an attribute or item assignment changes (``self.step``, ``batch``)."""
    found: set[str] = set()

    class Targets(Walker):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return False

        def visit_ClassDef(self, node: cst.ClassDef) -> bool:
            return False

        def _store(self, node: cst.AssignTarget | cst.AugAssign | cst.AnnAssign | cst.For | cst.AsName
                   | cst.NamedExpr) -> None:
            found.update(_target(node.name if isinstance(node, cst.AsName) else node.target))

        visit_AssignTarget = visit_AugAssign = visit_AnnAssign = visit_For = visit_AsName = _store
        visit_NamedExpr = _store

    Targets().walk(statement)
    return found


def _target(target: cst.CSTNode) -> set[str]:
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, cst.Tuple | cst.List):
        return {name for element in target.elements for name in _target(element.value)}
    if isinstance(target, cst.StarredElement):
        return _target(target.value)
    if isinstance(target, cst.Attribute):
        chain = dotted(target)
        return {".".join(chain[1])} if chain is not None else _target(target.value)
    if isinstance(target, cst.Subscript):
        return _target(target.value)
    return set()


def _runs_before(ctx: FixContext, statement: cst.CSTNode, step: cst.CSTNode) -> bool:
    """Does ``statement`` run once before ``step``: inside a statement that precedes the step
    in the step's own block, not within a loop there?"""
    block = ctx.parent(step)
    body = list(getattr(block, "body", ()))
    for ancestor in [statement, *ctx.ancestors(statement)]:
        if ctx.parent(ancestor) is block:
            return ancestor in body and body.index(ancestor) < body.index(step)
        if isinstance(ancestor, cst.For | cst.While | cst.FunctionDef):
            return False
    return False


def _line(statement: cst.BaseSmallStatement) -> cst.SimpleStatementLine:
    return cst.SimpleStatementLine([statement])


def _params_of(optimizer: cst.BaseExpression) -> cst.BaseExpression:
    source = cst.Module([]).code_for_node(optimizer.with_changes(lpar=(), rpar=()))
    return cst.parse_expression(f'(p for group in {source}.param_groups for p in group["params"])')


def _docstring(statement: cst.CSTNode) -> bool:
    small = single_small(statement)
    return isinstance(small, cst.Expr) and isinstance(small.value, cst.SimpleString | cst.ConcatenatedString)


def _has_global(statement: cst.CSTNode) -> bool:
    small = single_small(statement)
    return isinstance(small, cst.Global | cst.Nonlocal)


def _calls_any(ctx: FixContext, statement: cst.CSTNode, names: set[str]) -> bool:
    found = False

    class Find(Walker):
        def visit_Call(self, node: cst.Call) -> None:
            nonlocal found
            chain = dotted(node.func)
            if chain is None:
                return
            for qualified in _qualify(ctx, node.func, chain[1]):
                found = found or qualified in names

    if not isinstance(statement, cst.BaseCompoundStatement):
        Find().walk(statement)
    return found


def _qualify(ctx: FixContext, node: cst.CSTNode, parts: list[str]) -> list[str]:
    return ctx.scope(node).qualified(parts, every_import=True)


def _statements(function: cst.CSTNode) -> list[cst.BaseStatement]:
    """Every statement that runs in ``function``'s own body (not in nested defs)."""
    found: list[cst.BaseStatement] = []

    class Collect(Walker):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is function

        def visit_ClassDef(self, node: cst.ClassDef) -> bool:
            return False

        def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> bool:
            found.append(node)
            return False

    Collect().walk(function)
    return found


class _Apply(cst.CSTTransformer):
    def __init__(self, plan: _Plan, autocast: cst.Call) -> None:
        self.plan = plan
        self.autocast = autocast

    def on_leave(self, original: cst.CSTNode, updated: cst.CSTNode):  # type: ignore[override]
        if original in self.plan.expressions:
            return self.plan.expressions[original]
        if isinstance(updated, cst.IndentedBlock | cst.Module):
            return updated.with_changes(body=self._body(original, updated))
        return updated

    def _body(self, original: cst.CSTNode, updated: cst.IndentedBlock | cst.Module) -> list[Any]:
        groups: list[list[Any]] = []
        for old, new in zip(original.body, updated.body, strict=True):  # type: ignore[attr-defined]
            lines: list[Any] = self.plan.replace[old](new) if old in self.plan.replace else [new]
            before = self.plan.before.get(old, [])
            if before:  # comments above the statement move above what is inserted
                lines = [before[0].with_changes(leading_lines=lines[0].leading_lines), *before[1:],
                         lines[0].with_changes(leading_lines=()), *lines[1:]]
            groups.append(lines)
        for first, last in sorted(self.plan.wraps.get(original, []), reverse=True):
            inner = [line for group in groups[first:last] for line in group]
            leading = inner[0].leading_lines
            inner[0] = inner[0].with_changes(leading_lines=())
            wrapped = cst.With([cst.WithItem(self.autocast.deep_clone())], cst.IndentedBlock(inner),
                               leading_lines=leading)
            groups[first:last] = [[wrapped]]
        return [line for group in groups for line in group]


def apex_amp(ctx: FixContext, matches: Sequence[Match], unsafe: bool) -> TransformResult:
    if not unsafe:
        return decline_all(matches, NEEDS_UNSAFE)
    builder = _Builder(ctx)
    try:
        builder.build()
    except Decline as exc:
        return decline_all(matches, str(exc))
    module = ctx.module.visit(_Apply(builder.plan, builder.autocast_call))
    return TransformResult(module, tuple((m, Tier.UNSAFE) for m in matches))
