"""The four core models (the FFNO family): registry, gate, fusions, memory, modes, the decoder. The contract
every model keeps (shapes, causality, rollout, gradients, bad input) is in test_model_contract.py."""
import pytest
import torch
from helpers import rel_err

from amg_fast.models import AMGFNO1d, FFNO1d, available_models, count_parameters, get_model

CORE = ["ffno", "multi_input_ffno", "s4ffno", "amgfno"]
SMALL = dict(in_channels=1, out_channels=1, width=16, modes=4)


def small_model(name, **kw):
    torch.manual_seed(0)
    extra = {"omega": 0.083} if name == "amgfno" else {}
    return get_model(name, **{**SMALL, **extra, **kw}).double()


def test_registry_lists_the_core_models():
    assert set(CORE) <= set(available_models())


def test_unknown_model_name():
    with pytest.raises(ValueError, match=r"unknown model name 'fno'; available: amgfno, amgfno2d, factformer, ffno, "):
        get_model("fno")


def transplant_to_ffno(model):
    ffno = FFNO1d(**SMALL).double()
    missing, unexpected = ffno.load_state_dict(model.state_dict(), strict=False)
    assert not missing and all(k.startswith(("memory.", "gate.", "fusion.")) for k in unexpected)
    return ffno


def test_amgfno_with_gate_forced_to_zero_is_ffno_without_memory():
    model = small_model("amgfno")
    with torch.no_grad():
        model.gate.b.fill_(-1e4)  # content gate -> exactly 0
    u = torch.randn(2, 6, 32, 1, dtype=torch.float64)
    ffno = transplant_to_ffno(model)
    assert torch.equal(model(u), ffno(u))
    assert torch.equal(model.rollout(u[:, 0], 4), ffno.rollout(u[:, 0], 4))
    assert model.gate_mean == 0.0
    with torch.no_grad():
        model.gate.b.zero_()
    assert not torch.allclose(model(u), ffno(u))  # the memory branch does matter when the gate is open


def test_s4ffno_convex_alpha_zero_is_ffno():
    model = small_model("s4ffno", fusion="convex", alpha=0.0)
    u = torch.randn(2, 5, 32, 1, dtype=torch.float64)
    assert torch.equal(model(u), transplant_to_ffno(model)(u))


def test_s4ffno_fusions_differ():
    u = torch.randn(1, 5, 32, 1, dtype=torch.float64)
    outs = [small_model("s4ffno", fusion=f, alpha=a)(u) for f, a in (("residual", None), ("convex", 0.5),
                                                                       ("additive", 0.5))]
    assert not torch.allclose(outs[0], outs[1]) and not torch.allclose(outs[0], outs[2])


def test_amgfno_records_mean_gate_for_forward_and_rollout():
    model = small_model("amgfno")
    u = torch.randn(2, 5, 32, 1, dtype=torch.float64)
    model(u)
    chi = float(torch.sigmoid(2.0 * torch.log(torch.tensor(0.083 + 1e-8)) + model.gate.b_omega.detach().float()))
    assert model.gate_mean == pytest.approx(0.5 * chi, rel=1e-6)  # zero-initialised content gate
    with torch.no_grad():
        model.gate.w_h.normal_()
    model.rollout(u[:, 0], 3)
    g_rollout = model.gate_mean
    _, gs = [], []
    state, cur = model.initial_state(u[:, 0]), u[:, 0]
    for _ in range(3):  # recompute g-bar by hand: mean over steps of the mean gate
        h = model._head(cur)
        z, state = model.memory.step(h, state)
        out, g = model.gate(h, z)
        gs.append(g.detach().mean().item())
        cur = model._tail(out)
    assert g_rollout == pytest.approx(sum(gs) / 3, rel=1e-10)


def test_amgfno_per_batch_omega_matches_fixed_omega_per_sample():
    model = small_model("amgfno")
    u = torch.randn(2, 4, 32, 1, dtype=torch.float64)
    omegas = torch.tensor([0.5, 0.001], dtype=torch.float64)
    batch = model(u, omega=omegas)
    rolled = model.rollout(u[:, 0], 3, omega=omegas)
    for i, w in enumerate(omegas.tolist()):
        model.gate.set_omega(w)
        assert rel_err(batch[i:i + 1], model(u[i:i + 1])) <= 1e-12
        assert rel_err(rolled[i:i + 1], model.rollout(u[i:i + 1, 0], 3)) <= 1e-12
    with pytest.raises(ValueError, match="omega per batch must have 2 values"):
        model(u, omega=torch.tensor([0.1, 0.2, 0.3]))


def test_amgfno_without_frequency_gate():
    model = small_model("amgfno", freq_gate=False)
    model(torch.randn(1, 3, 32, 1, dtype=torch.float64))
    assert model.gate_mean == pytest.approx(0.5)


def test_s4d_memory_model_with_4096_steps_stays_finite():
    torch.manual_seed(0)
    model = get_model("amgfno", **SMALL, omega=0.5)
    y = model(torch.randn(1, 4096, 32, 1))
    assert torch.isfinite(y).all()


@pytest.mark.parametrize("name", CORE)
def test_modes_above_the_grid_are_refused(name):
    """The FFNO family's modes K must fit the grid (the other bad inputs: test_model_contract.py)."""
    model = get_model(name, **SMALL)
    with pytest.raises(ValueError, match=r"modes=4: a grid of 4 points holds at most 3 rFFT modes \(S//2\+1\)"):
        model(torch.zeros(2, 3, 4, 1))


def test_amgfno_bad_omega():
    with pytest.raises(ValueError, match=r"omega must be finite and >= 0 .* got -0.5"):
        AMGFNO1d(omega=-0.5)


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
def test_composed_decoder_equals_the_two_linears(bias):
    """decode() runs the decoder's two Linears as one: the same outputs and gradients as applying
    them in turn (float64, to round-off), also without biases."""
    from torch import nn

    from amg_fast.models.base import composed_linears

    torch.manual_seed(0)
    first, second = nn.Linear(24, 16, bias=bias).double(), nn.Linear(16, 3, bias=bias).double()
    x = torch.randn(2, 5, 9, 24, dtype=torch.float64, requires_grad=True)
    got, want = composed_linears(first, second, x), second(first(x))
    assert torch.allclose(got, want, rtol=1e-12, atol=1e-12)
    params = [x, *first.parameters(), *second.parameters()]
    dy = torch.randn_like(want)
    for g, w in zip(torch.autograd.grad(got, params, dy), torch.autograd.grad(want, params, dy)):
        assert torch.allclose(g, w, rtol=1e-10, atol=1e-12)
    model = get_model("ffno", width=16, modes=4).double()
    h = torch.randn(2, 3, 8, 16, dtype=torch.float64)
    assert torch.allclose(model.decode(h), model.decoder(h), rtol=1e-12, atol=1e-12)


def test_parameters_of_a_lazy_model_are_counted_after_its_first_forward():
    """modes=None: the spectral weights appear at the first forward; counting before is refused by name."""
    model = get_model("amgfno", width=8, omega=0.2)
    with pytest.raises(ValueError, match=r"AMGFNO1d was built with modes=None.*run one forward first"):
        count_parameters(model)
    model(torch.randn(1, 2, 16, 1))
    assert count_parameters(model) == count_parameters(get_model("amgfno", width=8, modes=8, omega=0.2))
