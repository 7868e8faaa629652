"""Rewrites that claim the same behaviour, checked numerically on CPU.

Each test runs the real fix on apex-era code, executes the rewritten code, and
compares it with the reference formula apex documents (its CUDA kernels' math),
using apex's defaults where the call leaves them out.
"""

from __future__ import annotations

import pytest

from portscan.fix.engine import fix_source
from portscan.ruleset.loader import load_rules

torch = pytest.importorskip("torch")

RULES = load_rules()


def rewritten(source: str, **names: object) -> dict[str, object]:
    """Fix ``source`` (unsafe tier included), check no apex is left, run it."""
    result = fix_source(source, "snippet.py", RULES, unsafe=True)
    assert result.error is None and result.changed, result
    assert "apex" not in result.fixed, result.fixed
    namespace: dict[str, object] = dict(names)
    exec(compile(result.fixed, "snippet.py", "exec"), namespace)  # noqa: S102 - our own fixed snippet
    return namespace


def apex_adam_reference(p, grads, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                        adam_w_mode=True):
    """apex's multi_tensor_adam math (csrc/multi_tensor_adam.cu), in float64."""
    p = p.double().clone()
    m = torch.zeros_like(p)
    v = torch.zeros_like(p)
    b1, b2 = betas
    for t, g in enumerate(grads, start=1):
        g = g.double()
        if not adam_w_mode:
            g = g + weight_decay * p
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        update = (m / (1 - b1 ** t)) / ((v / (1 - b2 ** t)).sqrt() + eps)
        if adam_w_mode:
            update = update + weight_decay * p
        p = p - lr * update
    return p


def run_optimizer(make, start, grads):
    param = torch.nn.Parameter(start.double().clone())
    optimizer = make([param])
    for g in grads:
        param.grad = g.double().clone()
        optimizer.step()
    return param.detach()


@pytest.fixture()
def problem():
    generator = torch.Generator().manual_seed(0)
    start = torch.randn(64, generator=generator)
    grads = [torch.randn(64, generator=generator) for _ in range(20)]
    return start, grads


def test_fused_adam_defaults_become_adamw_with_apex_weight_decay(problem) -> None:
    start, grads = problem
    ns = rewritten("from apex.optimizers import FusedAdam\n"
                   "def make(params):\n    return FusedAdam(params, lr=1e-2)\n")
    got = run_optimizer(ns["make"], start, grads)
    want = apex_adam_reference(start, grads, lr=1e-2)  # apex default: weight_decay=0, AdamW mode
    assert torch.allclose(got, want, rtol=0, atol=1e-12)
    # without the explicit weight_decay=0.0, AdamW's default 0.01 would differ
    plain = run_optimizer(lambda ps: torch.optim.AdamW(ps, lr=1e-2), start, grads)
    assert not torch.allclose(plain, want, rtol=0, atol=1e-6)


def test_fused_adam_decoupled_decay(problem) -> None:
    start, grads = problem
    ns = rewritten("import apex\ndef make(params):\n"
                   "    return apex.optimizers.FusedAdam(params, 3e-3, betas=(0.8, 0.99), weight_decay=0.1)\n")
    got = run_optimizer(ns["make"], start, grads)
    want = apex_adam_reference(start, grads, lr=3e-3, betas=(0.8, 0.99), weight_decay=0.1)
    assert torch.allclose(got, want, rtol=0, atol=1e-12)


def test_fused_adam_l2_mode_becomes_adam(problem) -> None:
    start, grads = problem
    ns = rewritten("from apex.optimizers import FusedAdam\ndef make(params):\n"
                   "    return FusedAdam(params, lr=1e-2, adam_w_mode=False, weight_decay=0.1)\n")
    optimizer = ns["make"]([torch.nn.Parameter(torch.zeros(1))])
    assert type(optimizer) is torch.optim.Adam
    got = run_optimizer(ns["make"], start, grads)
    want = apex_adam_reference(start, grads, lr=1e-2, weight_decay=0.1, adam_w_mode=False)
    assert torch.allclose(got, want, rtol=0, atol=1e-12)


def apex_sgd_reference(p, grads, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False):
    """apex's multi_tensor_sgd math with wd_after_momentum=False (torch.optim.SGD's update)."""
    p = p.double().clone()
    buf = None
    for g in grads:
        g = g.double() + weight_decay * p
        if momentum:
            buf = g.clone() if buf is None else momentum * buf + (1 - dampening) * g
            g = g + momentum * buf if nesterov else buf
        p = p - lr * g
    return p


def test_fused_sgd_becomes_sgd(problem) -> None:
    start, grads = problem
    ns = rewritten("from apex.optimizers import FusedSGD\ndef make(params):\n"
                   "    return FusedSGD(params, 0.05, momentum=0.9, weight_decay=1e-3, nesterov=True,\n"
                   "                    set_grad_none=True)\n")
    got = run_optimizer(ns["make"], start, grads)
    want = apex_sgd_reference(start, grads, 0.05, momentum=0.9, weight_decay=1e-3, nesterov=True)
    assert torch.allclose(got, want, rtol=0, atol=1e-12)


def test_fused_rms_norm_keeps_apex_eps() -> None:
    ns = rewritten("import apex.normalization.fused_layer_norm as fln\nnorm = fln.FusedRMSNorm(32)\n")
    norm = ns["norm"]
    assert isinstance(norm, torch.nn.RMSNorm) and norm.eps == 1e-5
    with torch.no_grad():
        norm.weight.copy_(torch.linspace(0.5, 1.5, 32))
    x = 1e-3 * torch.randn(4, 32, generator=torch.Generator().manual_seed(1))
    # apex's manual_rms_norm: x * rsqrt(mean(x^2) + eps) * weight, eps defaulting to 1e-5
    want = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * norm.weight
    assert torch.allclose(norm(x), want, rtol=1e-6, atol=1e-7)
    # torch's own default eps (machine epsilon) gives visibly different output here
    default = torch.nn.RMSNorm(32)
    with torch.no_grad():
        default.weight.copy_(norm.weight)
    assert not torch.allclose(default(x), want, rtol=1e-3, atol=0)


def test_fused_layer_norm_is_layer_norm() -> None:
    ns = rewritten("from apex.normalization import FusedLayerNorm\nnorm = FusedLayerNorm(16, eps=1e-6)\n")
    norm = ns["norm"]
    x = torch.randn(3, 16, generator=torch.Generator().manual_seed(2))
    mean = x.mean(-1, keepdim=True)
    var = x.var(-1, unbiased=False, keepdim=True)
    want = (x - mean) / torch.sqrt(var + 1e-6) * norm.weight + norm.bias
    assert torch.allclose(norm(x), want, atol=1e-6)


@pytest.mark.filterwarnings("ignore:.*CUDA is not available")
def test_cuda_amp_forms_build_the_same_objects() -> None:
    source = ("import torch\nfrom torch.cuda.amp import GradScaler, autocast\n"
              "scaler = GradScaler(2.0 ** 10, 3.0, 0.25, 100, {enabled})\n"
              "ctx = autocast({enabled}, torch.bfloat16, False)\n")
    for enabled in (False, True):
        with pytest.warns(FutureWarning):  # the deprecated forms, as written before the fix
            old: dict[str, object] = {}
            exec(source.format(enabled=enabled), old)  # noqa: S102
        new = rewritten(source.format(enabled=enabled))
        assert type(new["scaler"]) is torch.amp.GradScaler and type(new["ctx"]) is torch.amp.autocast
        assert vars(new["scaler"]) == vars(old["scaler"])
        assert vars(new["ctx"]) == vars(old["ctx"])
