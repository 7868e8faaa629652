"""`portscan fix --unsafe-fixes` run unattended on real code: each defect found when it
was run on real repositories, as a regression test shaped like the code it came from.

The promise under test: a rewrite keeps every path of the code working (NVIDIA's
included), or it is declined with a reason that names what blocks it, and every
skipped site is listed."""

from __future__ import annotations

import ast
import importlib
import textwrap

import libcst as cst
import pytest

from portscan.fix import engine
from portscan.fix.engine import fix_source
from portscan.fix.rewrite import Edit
from portscan.ruleset.loader import RuleSet
from portscan.ruleset.table import PatternError
from portscan.ruleset.fixspec import read_fix


def fixed(rules: RuleSet, source: str, unsafe: bool = True):
    result = fix_source(textwrap.dedent(source).lstrip("\n"), "train.py", rules, unsafe=unsafe)
    assert result.error is None, result.error
    ast.parse(result.fixed)
    assert not _bare_pass_try(result.fixed)
    return result


def _bare_pass_try(text: str) -> bool:
    return any(isinstance(node, ast.Try) and all(isinstance(s, ast.Pass) for s in node.body)
               for node in ast.walk(ast.parse(text)))


def reasons(result) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for n in result.not_fixed:
        found.setdefault(n.rule, []).append(n.reason)
    return found


# ----------------------------------------------------------------------------- 1. use sites


APEX_DDP_TOGGLED = """
import torch
from apex.parallel import DistributedDataParallel as DDP


def train(args, model, loader, optimizer):
    model = DDP(model, delay_allreduce=True)
    for step, (x, y) in enumerate(loader):
        sync = (step + 1) % args.accumulate == 0
        if sync:
            model.enable_allreduce()
        else:
            model.disable_allreduce()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        if sync:
            optimizer.step()
            optimizer.zero_grad()
"""


def test_ddp_is_kept_where_the_module_toggles_apex_allreduce(rules) -> None:
    result = fixed(rules, APEX_DDP_TOGGLED)
    assert not result.changed
    (reason,) = reasons(result)["PS222"]
    assert "`model.enable_allreduce` (line 10)" in reason and "has no `enable_allreduce`" in reason


def test_ddp_without_apex_only_uses_is_rewritten(rules) -> None:
    source = APEX_DDP_TOGGLED.replace("model.enable_allreduce()", "pass").replace("model.disable_allreduce()", "pass")
    result = fixed(rules, source)
    assert "model = torch.nn.parallel.DistributedDataParallel(model)" in result.fixed
    assert "apex" not in result.fixed


def test_a_bare_use_follows_its_calls(rules) -> None:
    """`isinstance(model, DDP)` renamed while `DDP(...)` stays apex's would be False."""
    source = """
    from apex.parallel import DistributedDataParallel as DDP

    def wrap(model):
        model = DDP(model, gradient_average=False)
        return model

    def unwrap(model):
        return model.module if isinstance(model, DDP) else model
    """
    result = fixed(rules, source)
    assert not result.changed
    ddp = reasons(result)["PS222"]
    assert any("gradient_average=False" in r for r in ddp)
    assert any("`DDP(...)` (line 4) is not rewritten" in r for r in ddp)


# ----------------------------------------------------------------------------- 2. every binding


def test_autocast_bound_per_vendor_is_left_alone(rules) -> None:
    """The safe tier once gave the MUSA branch CUDA's autocast and emptied both imports."""
    source = """
    import torch
    from utils import is_musa_available

    if is_musa_available():
        from torch_musa.core.amp import autocast
    else:
        from torch.cuda.amp import autocast


    def forward_step(model, batch):
        # mixed precision on either vendor
        with autocast(dtype=torch.bfloat16):
            return model(**batch)
    """
    result = fixed(rules, source, unsafe=False)
    assert not result.changed
    (reason,) = reasons(result)["PS316"]
    assert "`autocast` is bound in more than one way" in reason and "torch_musa.core.amp.autocast" in reason


def test_an_optimizer_chosen_through_an_import_chain_is_left_alone(rules) -> None:
    source = """
    try:
        from transformer_engine.pytorch.optimizers import FusedAdam as Adam
    except ImportError:
        try:
            from apex.optimizers import FusedAdam as Adam
        except ImportError:
            from torch.optim import AdamW as Adam


    def configure_optimizers(model, lr):
        return Adam(model.parameters(), lr=lr, weight_decay=0.1)
    """
    result = fixed(rules, source)
    assert not result.changed
    assert any("more than one way" in r for r in reasons(result)["PS209"])


def test_a_fallback_definition_keeps_its_try(rules) -> None:
    source = """
    try:
        from torch.cuda.amp import autocast
    except ImportError:
        from contextlib import contextmanager

        @contextmanager
        def autocast(enabled=True):
            yield


    def evaluate(model, x):
        with autocast():
            return model(x)
    """
    result = fixed(rules, source, unsafe=False)
    assert not result.changed
    (reason,) = reasons(result)["PS316"]
    assert "fallback" in reason


def test_a_probing_import_is_not_emptied(rules) -> None:
    """`try: from apex... import DDP; HAS_APEX = True` is a probe: removing the import would
    make the flag always true; rewriting only the branch changes nothing where apex is missing."""
    source = """
    import torch

    try:
        from apex.parallel import DistributedDataParallel as ApexDDP
        HAS_APEX = True
    except ImportError:
        HAS_APEX = False


    def wrap(model, local_rank):
        if HAS_APEX:
            return ApexDDP(model)
        return torch.nn.parallel.DistributedDataParallel(model, device_ids=[local_rank])
    """
    result = fixed(rules, source)
    assert not result.changed
    (reason,) = reasons(result)["PS222"]
    assert "the `try` at line 4" in reason


def test_an_import_that_only_raises_still_goes(rules) -> None:
    source = """
    try:
        from apex.normalization import FusedLayerNorm
    except ImportError:
        raise ImportError("install apex")


    class Block:
        def __init__(self, dim):
            self.norm = FusedLayerNorm(dim, eps=1e-6)
    """
    result = fixed(rules, source)
    assert "self.norm = torch.nn.LayerNorm(dim, eps=1e-6)" in result.fixed
    assert "try" not in result.fixed and "apex" not in result.fixed


# ----------------------------------------------------------------------------- 3. nothing needed removed


AMP_KEPT = """
import torch
from apex import amp

amp.register_half_function(torch, "einsum")


def train(model, optimizer, loader):
    model, optimizer = amp.initialize(model, optimizer, opt_level="O1", loss_scale=128.0)
    for x in loader:
        loss = model(x).sum()
        with amp.scale_loss(loss, optimizer) as scaled_loss:
            scaled_loss.backward()
        optimizer.step()
"""


def test_cast_registrations_stay_while_apex_amp_does(rules) -> None:
    result = fixed(rules, AMP_KEPT)
    assert not result.changed
    found = reasons(result)
    assert "`amp` stays in this module (`amp.initialize` at line 8)" in found["PS221"][0]
    assert "loss_scale" in found["PS216"][0]


def test_cast_registrations_go_once_apex_amp_is_ported(rules) -> None:
    result = fixed(rules, AMP_KEPT.replace(", loss_scale=128.0", ""))
    assert "register_half_function" not in result.fixed and "apex" not in result.fixed
    assert 'scaler = torch.amp.GradScaler("cuda")' in result.fixed
    assert {a.rule for a in result.applied} >= {"PS216", "PS218", "PS221"}


def test_a_pass_that_leaves_an_imported_name_undefined_is_rejected(rules, monkeypatch) -> None:
    """The resolver's check after each pass: a fix bug that removes an import still in use
    (here: a template that deletes the import line) leaves the file as it was."""
    source = "from apex.optimizers import FusedAdam\n\nopt = FusedAdam(params)\n"

    def remove_the_import(ctx, match, spec):
        line = ctx.module.body[0]
        return Edit(line, cst.RemoveFromParent(), match, spec.tier)

    monkeypatch.setitem(engine.TEMPLATES, "replace", remove_the_import)
    result = fix_source(source, "a.py", rules, unsafe=True)
    assert not result.changed and "`FusedAdam` used but no longer defined" in (result.error or "")


# ----------------------------------------------------------------------------- 4. every option


def test_fused_adam_keeping_gradients_zeroed_is_declined(rules) -> None:
    source = """
    from apex.optimizers import FusedAdam


    def build_optimizer(model, cfg):
        return FusedAdam(model.parameters(), lr=cfg.lr, betas=(0.9, 0.98), set_grad_none=False)
    """
    result = fixed(rules, source)
    assert not result.changed
    (reason,) = reasons(result)["PS209"]
    assert "`set_grad_none=False`" in reason and "zero_grad" in reason


def test_fused_sgd_default_zero_grad_is_declined(rules) -> None:
    source = """
    from apex.optimizers import FusedSGD

    optimizer = FusedSGD(model.parameters(), lr=0.1, momentum=0.9, materialize_master_grads=False)
    """
    result = fixed(rules, source)
    assert not result.changed
    (reason,) = reasons(result)["PS213"]
    assert "`set_grad_none` is left at its default `False`" in reason


def test_capturable_has_a_torch_equivalent(rules) -> None:
    source = """
    from apex.optimizers import FusedAdam

    optimizer = FusedAdam(model.parameters(), lr=1e-4, capturable=True)
    """
    result = fixed(rules, source)
    assert "torch.optim.AdamW(model.parameters(), lr=1e-4, capturable=True, weight_decay=0.0)" in result.fixed


def test_every_replace_parameter_needs_a_mapping() -> None:
    table = {"tier": "unsafe", "why": "w", "kind": "replace",
             "replace": [{"to": "torch.optim.SGD", "parameters": ["params", "lr"],
                          "options": {"params": "kept positionally"}}],
             "example": [{"before": "a", "after": "b"}]}
    with pytest.raises(PatternError, match="says nothing of 'lr'"):
        read_fix(table, ())


def test_options_document_every_parameter_of_the_rule_pack(rules) -> None:
    for rule in rules.rules:
        for entry in rule.fix.replace if rule.fix else ():
            assert set(entry.options) == set(entry.parameters), rule.code


def test_source_only_attributes_are_missing_on_the_target(rules) -> None:
    """Each apex-only name a rule blocks on really is absent from the torch class it
    rewrites to (else the check would decline valid code)."""
    torch = pytest.importorskip("torch")
    assert torch is not None
    checked = 0
    for rule in rules.rules:
        for entry in rule.fix.replace if rule.fix else ():
            root, *path = entry.to.split(".")
            target = importlib.import_module(root)
            for part in path:
                target = getattr(target, part)
            for name in entry.source_only:
                assert not hasattr(target, name), f"{rule.code}: {entry.to} has {name}"
                checked += 1
    assert checked >= 20


# ----------------------------------------------------------------------------- 7. every skip listed


def test_guarded_sites_are_listed(rules) -> None:
    source = """
    import torch


    def train_step(model, batch, scaler):
        try:
            with torch.cuda.amp.autocast():
                loss = model(batch)
        except RuntimeError as exc:
            if "out of memory" not in str(exc):
                raise
            torch.cuda.empty_cache()
            return None
        return loss
    """
    result = fixed(rules, source, unsafe=False)
    assert not result.changed
    (note,) = result.not_fixed
    assert note.line == 6 and "guarded: fallback" in note.reason


def test_clipping_is_not_blamed_where_there_is_none(rules) -> None:
    source = """
    from apex import amp


    def train(model, optimizer, loader, accumulate):
        model, optimizer = amp.initialize(model, optimizer, opt_level="O1")
        for i, x in enumerate(loader):
            loss = model(x)
            with amp.scale_loss(loss, optimizer) as scaled_loss:
                scaled_loss.backward()
            for p in amp.master_params(optimizer):
                p.grad /= accumulate
            if i % accumulate == 0:
                optimizer.step()
    """
    result = fixed(rules, source)
    assert not result.changed
    text = " ".join(n.reason for n in result.not_fixed)
    assert "clipping" not in text and "`amp.master_params(...)` (line 10)" in text


# ----------------------------------------------------------------------------- found by the harness


def test_a_fallback_probe_inside_a_function_is_not_emptied(rules) -> None:
    """A local `try: from apex... except ImportError: fused = False` once became `try: pass`."""
    source = """
    from torch.optim import Adam


    def make_optimizer(params, lr, fused=True):
        try:
            from apex.optimizers import FusedAdam
        except ImportError:
            fused = False
        if fused:
            return FusedAdam(params, lr=lr)
        return Adam(params, lr=lr)
    """
    result = fixed(rules, source)
    assert not result.changed
    assert any("the `try` at line 6" in r for r in reasons(result)["PS209"])


def test_a_module_is_not_left_half_ported(rules) -> None:
    """Rewriting the constructors but not `isinstance(m, FusedSGD)` would leave apex imported
    and the check false; FusedAdam's target depends on its arguments, so it cannot be renamed
    and the module is declined whole."""
    source = """
    from apex.optimizers import FusedAdam


    def build(model):
        return FusedAdam(model.parameters(), lr=1e-4)


    def is_fused(optimizer):
        return isinstance(optimizer, FusedAdam)
    """
    result = fixed(rules, source)
    assert not result.changed
    assert any("`FusedAdam` at line 9 stays as it is" in r for r in reasons(result)["PS209"])


def test_a_loss_passed_in_is_named_as_the_reason(rules) -> None:
    source = """
    from apex import amp


    def train_step(model, optimizer, loss):
        model, optimizer = amp.initialize(model, optimizer, opt_level="O1")
        with amp.scale_loss(loss, optimizer) as scaled_loss:
            scaled_loss.backward()
        optimizer.step()
    """
    result = fixed(rules, source)
    assert not result.changed
    assert {n.reason for n in result.not_fixed} == {
        "the loss comes into `train_step` as an argument, so the forward pass is elsewhere; "
        "put its forward pass under autocast by hand"}


def test_a_loss_cut_off_by_a_rewritten_step_is_named(rules) -> None:
    source = """
    from apex import amp


    def train(model, optimizer, loader):
        model, optimizer = amp.initialize(model, optimizer, opt_level="O1")
        for x in loader:
            loss = model(x)
            optimizer.step()
            with amp.scale_loss(loss, optimizer) as scaled_loss:
                scaled_loss.backward()
    """
    result = fixed(rules, source)
    assert not result.changed
    text = " ".join(n.reason for n in result.not_fixed)
    assert "the loss is computed at line 7, but `optimizer.step()` (line 8) stands between" in text


# ----------------------------------------------------------------------------- 6. the torch floor


def test_apex_amp_below_torch_2_3_writes_the_cuda_forms(rules) -> None:
    """A project that allows torch 1.12 gets `torch.cuda.amp.*`, which that torch has (and
    ROCm's too); `torch.amp.GradScaler("cuda")` would not import there."""
    from packaging.version import Version

    from portscan.match.floor import Floor

    source = textwrap.dedent("""
    from apex import amp


    def train(model, optimizer, loader):
        model, optimizer = amp.initialize(model, optimizer, opt_level="O1")
        for x in loader:
            loss = model(x).mean()
            with amp.scale_loss(loss, optimizer) as scaled_loss:
                scaled_loss.backward()
            optimizer.step()
    """).lstrip("\n")
    def at(version: str):
        return fix_source(source, "train.py", rules, unsafe=True, floor=Floor(Version(version), "setup.py:9", "x"))

    old = at("1.10")
    assert "scaler = torch.cuda.amp.GradScaler()" in old.fixed
    assert "with torch.cuda.amp.autocast(dtype=torch.float16):" in old.fixed
    middle = at("1.12")
    assert "scaler = torch.cuda.amp.GradScaler()" in middle.fixed
    assert 'with torch.amp.autocast("cuda", dtype=torch.float16):' in middle.fixed
    assert 'scaler = torch.amp.GradScaler("cuda")' in at("2.4").fixed
    ancient = at("1.8")
    assert not ancient.changed and all("needs torch >= 1.10" in n.reason for n in ancient.not_fixed)


def test_a_pass_that_empties_a_fallback_try_is_rejected(rules, monkeypatch) -> None:
    """The engine's own check: whatever a fix does, a `try` with a fallback never ends as
    `pass` (here a broken template empties the probe's body)."""
    source = textwrap.dedent("""
    try:
        import pynvml
    except ImportError:
        pynvml = None
    import torch

    scaler = torch.cuda.amp.GradScaler()
    """).lstrip("\n")

    def empty_the_try(ctx, match, spec):
        statement = ctx.module.body[0]
        return Edit(statement.body.body[0], cst.SimpleStatementLine([cst.Pass()]), match, spec.tier)

    monkeypatch.setitem(engine.TEMPLATES, "replace", empty_the_try)
    result = fix_source(source, "a.py", rules)
    assert not result.changed and "holding only `pass`" in (result.error or "")
