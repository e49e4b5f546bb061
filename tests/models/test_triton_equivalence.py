"""Whole models with backend="triton" equal backend="reference": forward, every gradient, rollout,
and 30 training steps whose loss curves agree. On CPU the kernels run in Triton's interpreter."""
import importlib

import pytest
import torch
from helpers import rel_err

from amg_fast.models import get_model
from amg_fast.train.precision import PRECISIONS, autocast, precision_scope

TOL = 2e-3  # fp32 through a stack of TF32 dots on a GPU (exact fp32 in the interpreter)
# One training step's loss and gradients (all parameters as one vector) against float64, per precision mode:
# bench/_providers.py's step tolerances (a wrong kernel is off by O(1)).
STEP_TOL = {"fp32": 5e-4, "tf32": 1e-2, "bf16": 5e-2}


def _twin_models(name, kdev, **kw):
    """The same initialisation built twice, once per backend."""
    torch.manual_seed(0)
    ref = get_model(name, backend="reference", **kw).to(kdev)
    fast = get_model(name, backend="triton", **kw).to(kdev)
    fast.load_state_dict(ref.state_dict())
    return ref, fast


MODELS = {"amgfno": dict(omega=0.3), "s4ffno": {}, "ffno": {}}


def _loss_and_grads(model, u, precision):
    """Teacher-forced one-step MSE of u [B, T + 1, S, 1] and its gradients, in the precision mode as the
    trainer runs it (matmul precision for forward and backward, autocast for the forward and the loss)."""
    with precision_scope(precision):
        with autocast(precision, u.device):
            loss = (model(u[:, :-1]) - u[:, 1:]).square().mean()
        grads = torch.autograd.grad(loss, list(model.parameters()))
    return loss, torch.cat([g.flatten() for g in grads])


@pytest.mark.gpu
@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("width,batch", [(64, 16), (128, 32)], ids=["quick", "paper"])
def test_preset_step_in_each_precision_mode_gpu(width, batch, precision, kdev, gen, poisoned):
    """The step the campaign's sweeps train (f = 32, modes 16, T = 25): the quick preset's AMGFNO (width 64,
    B = 16: issue 19's precision sweep) and the paper's (width 128, B = 32: issue 21's headline), on the Triton
    backend in each mode, against the reference in float64. The kernel tests run at H = 128 and small widths
    one op at a time; width 64 takes other tiles (the memory gate's readout at 1 pipeline stage: in bf16 the
    pattern triton 3.6 miscompiled for sm_90 in the fused feed-forward's dx, H200, 2026-11-27)."""
    ref, fast = _twin_models("amgfno", kdev, width=width, modes=16, omega=0.4352)
    u = torch.randn(batch, 26, 32, 1, generator=gen, dtype=torch.float64).to(kdev)
    loss, grads = _loss_and_grads(fast, u.float(), precision)
    loss64, grads64 = _loss_and_grads(ref.double(), u, "fp32")
    assert torch.isfinite(grads).all()
    assert rel_err(loss, loss64) <= STEP_TOL[precision], f"loss: {rel_err(loss, loss64):.2e}"
    assert rel_err(grads, grads64) <= STEP_TOL[precision], f"gradients: {rel_err(grads, grads64):.2e}"


@pytest.mark.parametrize("name", MODELS)
def test_forward_and_gradients_equal_reference(name, kdev, gen, poisoned):
    ref, fast = _twin_models(name, kdev, width=16, modes=9, **MODELS[name])
    u = torch.randn(2, 5, 32, 1, generator=gen).to(kdev)
    target = torch.randn(2, 5, 32, 1, generator=gen).to(kdev)
    outs = []
    for model in (ref, fast):
        out = model(u)
        (out - target).square().mean().backward()
        outs.append(out)
    assert rel_err(outs[1], outs[0]) <= TOL
    for (pname, p_ref), p_fast in zip(ref.named_parameters(), fast.parameters()):
        assert p_fast.grad is not None, pname
        assert rel_err(p_fast.grad, p_ref.grad) <= TOL, f"{pname}: {rel_err(p_fast.grad, p_ref.grad):.2e}"
    if name == "amgfno":
        assert float(fast.last_gate_mean) == pytest.approx(float(ref.last_gate_mean), rel=TOL)


def test_amgfno_rollout_equals_reference(kdev, gen, poisoned):
    ref, fast = _twin_models("amgfno", kdev, width=16, modes=9, omega=0.3)
    u0 = torch.randn(3, 32, 1, generator=gen).to(kdev)
    with torch.no_grad():
        assert rel_err(fast.rollout(u0, 6), ref.rollout(u0, 6)) <= TOL


def test_amgfno_training_curves_agree(kdev, gen):
    """15 Adam steps on a fixed batch (the loss falls below 0.1x its start by then, over seeds 0-4 of the
    reference): both backends lower the loss along the same curve."""
    ref, fast = _twin_models("amgfno", kdev, width=16, modes=4, omega=0.3)
    x = torch.linspace(0, 1, 33)[:-1]
    u = torch.stack([torch.sin(2 * torch.pi * (x - 0.05 * t)) for t in range(6)])[None, :, :, None]
    u = (u + 0.1 * torch.randn(u.shape, generator=gen)).to(kdev)
    curves = []
    for model in (ref, fast):
        opt = torch.optim.Adam(model.parameters(), lr=3e-3)
        losses = []
        for _ in range(15):
            opt.zero_grad()
            loss = (model(u[:, :-1]) - u[:, 1:]).square().mean()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        curves.append(torch.tensor(losses))
    assert curves[0][-1] < 0.5 * curves[0][0]  # it learns
    assert rel_err(curves[1], curves[0]) <= 1e-2, (curves[0], curves[1])


@pytest.mark.parametrize("backend", ["triton", "reference"])
def test_amgfno_memory_readout_switch_changes_no_value(backend, kdev, gen, poisoned, monkeypatch):
    """AMG_FAST_MEMORY_READOUT=fused (the readout GLU(Linear) inside the gate op, memory_gate) and
    =separate (Linear, GLU, gate_fusion) give the same output, gradients and mean gate; the separate
    path is the one the model takes by default (kernels.limits.memory_readout)."""
    memory_gate_mod = importlib.import_module("amg_fast.ops.readout_gate")

    torch.manual_seed(0)
    model = get_model("amgfno", width=16, modes=9, omega=0.3, backend=backend).to(kdev).double()
    with torch.no_grad():  # the gate's weights start at zero: perturb them so every term shows
        for p in model.gate.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=gen, dtype=p.dtype).to(kdev))
    u = torch.randn(2, 5, 32, 1, generator=gen, dtype=torch.float64).to(kdev)
    calls = []
    monkeypatch.setattr(memory_gate_mod, "memory_gate_ref",
                        (lambda f: lambda *a: calls.append("ref") or f(*a))(memory_gate_mod.memory_gate_ref))
    monkeypatch.setattr(memory_gate_mod.MemoryGateFn, "apply",
                        (lambda f: lambda *a: calls.append("fn") or f(*a))(memory_gate_mod.MemoryGateFn.apply))
    results = {}
    for mode in ("fused", "separate"):
        monkeypatch.setenv("AMG_FAST_MEMORY_READOUT", mode)
        model.zero_grad()
        out = model(u)
        out.square().sum().backward()
        results[mode] = [out, model.last_gate_mean] + [p.grad.clone() for p in model.parameters()]
    assert calls == ["fn" if backend == "triton" else "ref"]  # once, in the fused run
    for got, want in zip(results["fused"], results["separate"]):
        assert rel_err(got, want) <= 1e-10


@pytest.mark.parametrize("backend", ["triton", "reference"])
def test_encoder_and_decoder_run_their_ops_on_the_models_backend(backend, kdev, gen, monkeypatch):
    """FFNOBackbone.encode / decode go through grid_linear / composed_linear: on the Triton backend their
    kernels' Functions run (once each per forward), on the reference neither (the values: the tests above)."""
    composed = importlib.import_module("amg_fast.ops.decoder")
    grid = importlib.import_module("amg_fast.ops.encoder")
    calls = []
    for module, fn in ((composed, "ComposedLinearFn"), (grid, "GridLinearFn")):
        monkeypatch.setattr(getattr(module, fn), "apply",
                            (lambda f, n: lambda *a: calls.append(n) or f(*a))(getattr(module, fn).apply, fn))
    model = get_model("ffno", width=16, modes=4, backend=backend).to(kdev)
    model(torch.randn(2, 3, 10, 1, generator=gen).to(kdev)).sum().backward()
    assert sorted(calls) == (["ComposedLinearFn", "GridLinearFn"] if backend == "triton" else [])


@pytest.mark.parametrize("name,kw", [("ffno", dict(out_channels=9)),
                                     ("multi_input_ffno", dict(in_channels=8, out_channels=8)),
                                     ("ffno", dict(width=513, modes=2, n_blocks=1))],
                         ids=["decoder-C9", "encoder-C32", "width513"])
def test_triton_models_beyond_the_encoder_decoder_kernels_limits_still_run(name, kw, kdev, gen, monkeypatch):
    """A model built with backend="triton" (--fast-kernels) whose encoder or decoder the grid_linear /
    composed_linear kernels cannot take (C + 1 > 32 encoder columns, C > 8 outputs, width > 512) ran before
    these ops (nn.Linear) and must still run, on the reference for that layer, with the reference's values.
    The feed-forward on its cuBLASLt path: at width 513 the interpreter's row GEMMs (fp32 mode's default) took
    86 s here, and the feed-forward's paths have tests of their own."""
    monkeypatch.setenv("AMG_FAST_FFN_METHOD", "epilogue")
    kw = {"width": 16, "modes": 4, **kw}
    ref, fast = _twin_models(name, kdev, **kw)
    cin = ref.in_channels
    u = torch.randn(1, 2, 8, cin, generator=gen).to(kdev)
    outs = []
    for model in (ref, fast):
        out = model(u)
        out.square().sum().backward()
        outs.append(out)
    assert rel_err(outs[1], outs[0]) <= TOL
    for (pname, p_ref), p_fast in zip(ref.named_parameters(), fast.parameters()):
        assert rel_err(p_fast.grad, p_ref.grad) <= TOL, pname
