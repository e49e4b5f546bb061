"""Dynamo captures whole models and the public ops without graph breaks (fullgraph=True).

Runs on CPU with the "eager" compile backend: it checks tracing (what CUDA graphs and
torch.compile need), not code generation. The Triton kernels themselves cannot be traced on CPU
(the interpreter needs real tensors), so the op test swaps the autograd Function for the reference.
"""
from types import SimpleNamespace

import pytest
import torch
from helpers import rel_err

from amg_fast.layers import AdaptiveMemoryGate
from amg_fast.models import get_model
from amg_fast.ops import spectral_conv as spectral_mod
from amg_fast.ops import spectral_conv1d


@pytest.mark.parametrize("name", ["amgfno", "s4ffno", "ffno"])
def test_model_forward_traces_as_one_graph(name):
    torch.manual_seed(0)
    kw = {"omega": 0.2} if name == "amgfno" else {}
    model = get_model(name, width=16, modes=8, backend="reference", **kw)
    u = torch.randn(2, 4, 32, 1)
    compiled = torch.compile(model, backend="eager", fullgraph=True)
    assert rel_err(compiled(u), model(u)) <= 1e-6


@pytest.mark.parametrize("omega", ["per-batch", "0-dim", "none"])
@pytest.mark.parametrize("name", ["amgfno", "amgfno2d"])
def test_amgfno_traces_with_omega_passed_per_call(name, omega):
    """omega at call time as a [B] or 0-dim tensor (the trainer's batch mode passes omega.mean()), and a model
    built without omega compiled before any eager call (its one-time warning is not traced), as one graph."""
    torch._dynamo.reset()  # each case compiles the same code objects afresh (dynamo's recompile limit is 8)
    torch.manual_seed(0)
    model = get_model(name, width=8, modes=4, backend="reference",
                      **({} if omega == "none" else {"omega": 0.3}))
    u = torch.randn(2, 3, 9, 1) if name == "amgfno" else torch.randn(2, 3, 8, 8, 1)
    kw = {"per-batch": {"omega": torch.tensor([0.1, 0.5])}, "0-dim": {"omega": torch.tensor(0.2)}, "none": {}}[omega]
    compiled = torch.compile(model, backend="eager", fullgraph=True)
    got = compiled(u, **kw)
    assert rel_err(got, model(u, **kw)) <= 1e-6


def test_public_op_prelude_traces_with_backend_triton(monkeypatch):
    """Validation, backend resolution, autocast and nvtx of spectral_conv1d trace without a break."""
    monkeypatch.setattr(spectral_mod, "SpectralConv1dFn",
                        SimpleNamespace(apply=lambda x, w, transform, dim: spectral_mod.spectral_conv1d_ref(x, w, dim)))
    x, w = torch.randn(3, 32, 8), torch.randn(9, 8, 8, 2)
    compiled = torch.compile(lambda a, b: spectral_conv1d(a, b, backend="triton"), backend="eager", fullgraph=True)
    assert rel_err(compiled(x, w), spectral_mod.spectral_conv1d_ref(x, w)) <= 1e-6


def test_gate_omega_survives_a_state_dict_round_trip():
    gate = AdaptiveMemoryGate(8, omega=0.3)
    fresh = AdaptiveMemoryGate(8)
    fresh.load_state_dict(gate.state_dict())
    assert torch.equal(fresh.chi(), gate.chi()) and float(fresh.chi().detach()) != 1.0
