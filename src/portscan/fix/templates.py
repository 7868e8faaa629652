"""The declarative fixes: ``replace``, ``guard-import`` and ``delete``.

Each takes one match and returns an :class:`Edit` (a node and what replaces it) or a
:class:`Declined` that says why this shape of code is left to the user.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import libcst as cst

from portscan.fix.rewrite import EQUAL, Declined, Edit, FixContext, single_small
from portscan.ruleset.fixspec import FixSpec, Replace
from portscan.match import Match
from portscan.match.fixsites import bound_names, guard_import_declined
from portscan.match.syntax import dotted, literal
from portscan.ruleset.table import MISSING, Literal, literal_in

Template = Callable[[FixContext, Match, FixSpec], "Edit | Declined | None"]


def literal_node(value: Literal) -> cst.BaseExpression:
    """A TOML value written as Python source."""
    if isinstance(value, bool):
        return cst.Name("True" if value else "False")
    if isinstance(value, str):
        return cst.SimpleString(json.dumps(value))
    if isinstance(value, (int, float)):
        return cst.parse_expression(repr(value))
    return cst.Tuple([cst.Element(literal_node(v)) for v in value])


# ----------------------------------------------------------------------------- replace


def replace(ctx: FixContext, match: Match, spec: FixSpec) -> Edit | Declined:
    node = match.node
    assert isinstance(node, cst.BaseExpression)
    entry = spec.replacement_for(match.variables.get("name", ""))
    assert entry is not None
    parent = ctx.parent(node)
    if isinstance(parent, cst.Call) and parent.func is node:
        return _replace_call(ctx, match, spec, entry, parent)
    waiting = _unrewritten_call(ctx, match)
    if waiting is not None:
        return Declined(match, waiting)
    reference = ctx.reference(entry.to, node)  # a rename, or a call written for a decorator
    if reference is None:
        return Declined(match, f"`{entry.to.split('.')[0]}` means something else here")
    ctx.release_imports(node)
    if entry.bare == "call":
        args = [cst.Arg(literal_node(v), keyword=cst.Name(k), equal=EQUAL) for k, v in entry.add.items()]
        return Edit(node, cst.Call(reference, args), match, spec.tier)
    return Edit(node, reference, match, spec.tier)


def _replace_call(ctx: FixContext, match: Match, spec: FixSpec, entry: Replace,
                  call: cst.Call) -> Edit | Declined:
    bound: dict[str, cst.Arg] = {}
    kept_positional: list[cst.Arg] = []
    for index, arg in enumerate(call.args):
        if arg.star:
            return Declined(match, "the call passes *args or **kwargs")
        if arg.keyword is None:
            if not entry.parameters:
                kept_positional.append(arg)
                continue
            if index >= len(entry.parameters):
                return Declined(match, "more positional arguments than the signature has")
            bound[entry.parameters[index]] = arg
        else:
            name = arg.keyword.value
            if entry.parameters and name not in entry.parameters:
                return Declined(match, f"unknown argument `{name}`")
            bound[name] = arg
    values = {name: literal(arg.value) for name, arg in bound.items()}
    for name in [*entry.require, *(n for case in entry.cases for n in case.when)]:
        if name not in bound:
            if name in entry.require and name in entry.source_defaults:
                default = entry.source_defaults[name]
                if not literal_in(default, entry.require[name]):
                    shown = ctx.module.code_for_node(literal_node(default))
                    why = entry.options.get(name)
                    return Declined(match, f"`{name}` is left at its default `{shown}`, which the replacement "
                                           "cannot keep" + (f": {why}" if why else ""))
            continue
        shown = ctx.module.code_for_node(bound[name].value)
        if values[name] is MISSING:
            return Declined(match, f"`{name}={shown}` is decided at run time; the fix needs a literal")
        if name in entry.require and not literal_in(values[name], entry.require[name]):
            return Declined(match, f"`{name}={shown}` has no equivalent in the replacement"
                                   + (f": {entry.options[name]}" if name in entry.options else ""))
    target = entry.target({k: v for k, v in values.items() if v is not MISSING})
    reference = ctx.reference(target, call)
    if reference is None:
        return Declined(match, f"`{target.split('.')[0]}` means something else here")
    consumed = entry.drop | {name for case in entry.cases for name in case.when}
    arguments: dict[str, cst.Arg] = {}
    for name, arg in bound.items():
        if name in consumed:
            continue
        new_name = entry.rename.get(name, name)
        arguments[new_name] = arg.with_changes(keyword=cst.Name(new_name), equal=EQUAL) \
            if arg.keyword is None else arg.with_changes(keyword=cst.Name(new_name))
    for name, value in entry.add.items():
        arguments.setdefault(name, cst.Arg(literal_node(value), keyword=cst.Name(name), equal=EQUAL))
    leading = [n for n in entry.positional[:next((i for i, n in enumerate(entry.positional)
                                                  if n in entry.parameters), len(entry.positional))]]
    # positional as far as the call passed them so, after inserted leading ones ("cuda")
    was_positional = {name for name, arg in bound.items() if arg.keyword is None} | set(leading)
    positional: list[cst.Arg] = []
    for name in entry.positional:
        if name not in arguments or name not in was_positional:
            break
        positional.append(arguments.pop(name).with_changes(keyword=None, equal=cst.MaybeSentinel.DEFAULT))
    laid = _layout(call, [*positional, *kept_positional, *arguments.values()])
    new_args = _realign(ctx, match, call, reference, laid)
    ctx.release_imports(call.func)
    return Edit(call, call.with_changes(func=reference, args=new_args), match, spec.tier)


def _unrewritten_call(ctx: FixContext, match: Match) -> str | None:
    """A use that is not called (``isinstance(model, DDP)``, a decorator) follows the calls
    of the same name: renamed only once none is left, so it never disagrees with an object
    the module still builds the old way. (A call rewritten in this pass is gone in the next.)"""
    name = match.variables.get("name", "")
    for other in ctx.matches:
        called = ctx.parent(other.node)
        if other.rule is match.rule and other.variables.get("name", "") == name \
                and isinstance(called, cst.Call) and called.func is other.node:
            return (f"`{ctx.module.code_for_node(called.func)}(...)` (line {ctx.line(called)}) is not "
                    "rewritten (yet), so its other uses stay as they are")
    return None


def _layout(call: cst.Call, args: list[cst.Arg]) -> list[cst.Arg]:
    """Commas and line breaks for the rewritten arguments, as the user wrote the call. An
    argument kept from the call keeps its comma (and the comment after it); one added, or
    the call's last one moved before an added one, takes the separator before the call's
    last argument, comment-free; whatever ended the call (a trailing comma, ``)`` on a line
    of its own) still ends it. (A rewritten argument keeps its value node: that is how an
    argument is told from an added one.)"""
    if not args:
        return []
    original = list(call.args)
    at = {id(arg.value): i for i, arg in enumerate(original)}
    separator = _separator(call)
    nothing = cst.SimpleWhitespace("")
    end_comma: cst.Comma | cst.MaybeSentinel = original[-1].comma if original else cst.MaybeSentinel.DEFAULT
    end_space: cst.BaseParenthesizableWhitespace = original[-1].whitespace_after_arg if original else nothing
    ending = _line_end(end_comma, end_space)  # the last argument's line break, comment and all
    last = len(original) - 1
    if at.get(id(args[-1].value), -1) != last and ending is not None:  # the comment is not the new last's
        end_comma, end_space = _plain_comma(end_comma), _without_comment(end_space)
    laid = []
    for i, arg in enumerate(args):
        where = at.get(id(arg.value))
        if i == len(args) - 1:
            comma, after = end_comma, end_space
        elif where is not None and where < last:
            comma, after = arg.comma, arg.whitespace_after_arg
        elif where is not None and ending is not None and isinstance(separator.whitespace_after,
                                                                         cst.ParenthesizedWhitespace):
            comma = separator.with_changes(whitespace_after=separator.whitespace_after.with_changes(
                first_line=ending.first_line, empty_lines=ending.empty_lines))
            after = nothing
        else:
            comma, after = separator, nothing
        laid.append(arg.with_changes(comma=comma, whitespace_after_arg=after))
    return laid


def _separator(call: cst.Call) -> cst.Comma:
    """The comma for a new place between arguments: the one before the call's last
    argument, else the line break before its first (``f(\\n    x\\n)``), else ``, ``."""
    original = list(call.args)
    if len(original) >= 2 and isinstance(original[-2].comma, cst.Comma):
        return original[-2].comma.with_changes(whitespace_after=_without_comment(original[-2].comma.whitespace_after))
    if original and isinstance(call.whitespace_before_args, cst.ParenthesizedWhitespace):
        return cst.Comma(whitespace_after=_without_comment(call.whitespace_before_args))
    return cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))


def _line_end(comma: cst.Comma | cst.MaybeSentinel, after: cst.BaseParenthesizableWhitespace
              ) -> cst.ParenthesizedWhitespace | None:
    """The line break after the call's last argument (before ``)``), if there is one."""
    if isinstance(comma, cst.Comma) and isinstance(comma.whitespace_after, cst.ParenthesizedWhitespace):
        return comma.whitespace_after
    return after if isinstance(after, cst.ParenthesizedWhitespace) else None


def _without_comment(space: cst.BaseParenthesizableWhitespace) -> cst.BaseParenthesizableWhitespace:
    """``space`` with no comment, blank lines or trailing spaces before its line break."""
    if isinstance(space, cst.ParenthesizedWhitespace):
        return space.with_changes(first_line=cst.TrailingWhitespace(newline=space.first_line.newline),
                                  empty_lines=())
    return space


def _plain_comma(comma: cst.Comma | cst.MaybeSentinel) -> cst.Comma | cst.MaybeSentinel:
    if isinstance(comma, cst.Comma):
        return comma.with_changes(whitespace_after=_without_comment(comma.whitespace_after))
    return comma


def _realign(ctx: FixContext, match: Match, call: cst.Call, func: cst.BaseExpression,
             args: list[cst.Arg]) -> list[cst.Arg]:
    """Continuation lines aligned with the call's opening parenthesis (``f(a,\\n  b)`` with
    ``b`` under ``a``), and lines indented past it, move with it when the callee's name
    changes length; hanging indents stay where they are. The columns come from the
    match's offsets and the blocks' indents, not from locating nodes (one code generation
    per call would make a file of many calls quadratic)."""
    if not call.args or isinstance(call.whitespace_before_args, cst.ParenthesizedWhitespace) \
            or not any(_breaks_line(arg) for arg in args):
        return args
    shift = len(cst.Module([]).code_for_node(func)) - len(ctx.module.code_for_node(call.func))
    if shift == 0 or match.node is not call.func or call.func.lpar:  # type: ignore[attr-defined]
        return args
    after_func = call.whitespace_after_func
    before_args = call.whitespace_before_args
    column = ctx.lines.position(match.end)[1] - 1 + len(getattr(after_func, "value", "")) + 1 \
        + len(getattr(before_args, "value", ""))
    indent = sum(len(block.indent if block.indent is not None else ctx.module.default_indent)
                 for block in ctx.ancestors(call) if isinstance(block, cst.IndentedBlock))

    def moved(indented: bool, space: cst.SimpleWhitespace) -> cst.SimpleWhitespace:
        spaces = space.value
        if spaces.strip(" ") or (indent if indented else 0) + len(spaces) < column:
            return space
        return cst.SimpleWhitespace(" " * max(0, len(spaces) + shift))

    class Shift(cst.CSTTransformer):
        def leave_ParenthesizedWhitespace(self, original: cst.ParenthesizedWhitespace,
                                          updated: cst.ParenthesizedWhitespace) -> cst.ParenthesizedWhitespace:
            return updated.with_changes(last_line=moved(updated.indent, updated.last_line))

        def leave_EmptyLine(self, original: cst.EmptyLine, updated: cst.EmptyLine) -> cst.EmptyLine:
            if updated.comment is None:  # a comment on a line of its own moves; blank lines stay empty
                return updated
            return updated.with_changes(whitespace=moved(updated.indent, updated.whitespace))

    return [arg.visit(Shift()) if _breaks_line(arg) else arg for arg in args]  # type: ignore[misc]


def _breaks_line(arg: cst.Arg) -> bool:
    """Does the argument, or the comma after it, hold a line break?"""
    return "\n" in cst.Module([]).code_for_node(arg)


# ----------------------------------------------------------------------------- guard-import


def guard_import(ctx: FixContext, match: Match, spec: FixSpec) -> Edit | Declined | None:
    if not any(isinstance(a, cst.Import | cst.ImportFrom) for a in ctx.ancestors(match.node)):
        return None  # a use of the imported name, reported once the import is guarded
    reason = guard_import_declined(match.node, ctx)  # the scan decided the same (see fixsites)
    if reason is not None:
        return Declined(match, reason)
    line = ctx.statement(match.node)  # type: ignore[arg-type]
    assert isinstance(line, cst.SimpleStatementLine)
    statement = line.body[0]
    assert isinstance(statement, (cst.Import, cst.ImportFrom))
    names = bound_names(statement)
    fallback = [cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(n))], cst.Name("None"))])
                for n in names]
    comment = f"# not available on ROCm: see `portscan explain {match.rule.code}`"
    guarded = cst.Try(
        body=cst.IndentedBlock([line.with_changes(leading_lines=())]),
        handlers=[cst.ExceptHandler(
            body=cst.IndentedBlock(fallback, header=cst.TrailingWhitespace(
                whitespace=cst.SimpleWhitespace("  "), comment=cst.Comment(comment))),
            type=cst.Name("ImportError"))],
        leading_lines=line.leading_lines,
    )
    return Edit(line, guarded, match, spec.tier)


# ----------------------------------------------------------------------------- delete


def delete(ctx: FixContext, match: Match, spec: FixSpec) -> Edit | Declined:
    """Remove ``f(...)`` standing alone as a statement, or ``x.attr = value`` where the
    match is the assigned attribute; ``pass`` is left when the block would be empty."""
    line = ctx.statement(match.node)  # type: ignore[arg-type]
    small = single_small(line)
    if isinstance(small, cst.Expr):
        value = small.value
        alone = value is match.node or (isinstance(value, cst.Call) and value.func is match.node)
    elif isinstance(small, cst.Assign):
        alone = any(t.target is match.node for t in small.targets)
    else:
        alone = False
    if not alone:
        return Declined(match, "only a call or an assignment that is a whole statement is deleted")
    assert isinstance(line, cst.SimpleStatementLine)
    needed = _still_needed(ctx, match)
    if needed is not None:
        return Declined(match, needed)
    ctx.release_imports(match.node)  # apex's import, not those of the arguments
    block = ctx.parent(line)
    if isinstance(block, cst.IndentedBlock) and len(block.body) == 1:
        return Edit(line, line.with_changes(body=[cst.Pass()]), match, spec.tier)
    return Edit(line, cst.RemoveFromParent(), match, spec.tier)


def _still_needed(ctx: FixContext, match: Match) -> str | None:
    """Why a call is kept: the module still uses what it configures for anything the same
    rule does not delete (``amp.register_half_function`` while ``amp.initialize`` stays)."""
    chain = dotted(match.node)  # type: ignore[arg-type]
    if chain is None:
        return None
    first = chain[0][0]
    assert isinstance(first, cst.Name)
    owner = ctx.scope(first).lookup(first.value)
    if owner is None:
        return None
    covered = [m.node for m in ctx.matches if m.rule is match.rule]
    for use, _ in ctx.names.uses(first.value, owner):
        if not any(ctx.contains(node, use) for node in covered):
            outer: cst.CSTNode = use
            while isinstance(ctx.parent(outer), cst.Attribute):
                outer = ctx.parent(outer)  # type: ignore[assignment]
            return (f"`{first.value}` stays in this module (`{ctx.module.code_for_node(outer)}` at line "
                    f"{ctx.line(use)}), and this call configures it; deleted once nothing else uses it")
    return None


TEMPLATES: dict[str, Template] = {"replace": replace, "guard-import": guard_import, "delete": delete}
