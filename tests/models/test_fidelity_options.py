"""The opt-in fidelity options of docs/fidelity.md: fourierflow's shared spectral weights,
weight-normalised Linears and decoder input (FFNO family), and the Normalized wrapper
(input/output normalisation, increment prediction)."""
import pytest
import torch
from helpers import rel_err

from amg_fast.models import Normalized, count_parameters, get_model

FAMILY = ["ffno", "multi_input_ffno", "s4ffno", "amgfno"]
SMALL = dict(in_channels=1, out_channels=1, width=16, modes=4)
OPTIONS = {
    "share": dict(share_weights=True),
    "wn": dict(weight_norm=True),
    "lastblock": dict(decoder_input="last_block"),
    "all": dict(share_weights=True, weight_norm=True, decoder_input="last_block"),
}


def small_model(name, **kw):
    torch.manual_seed(0)
    extra = {"omega": 0.083} if name == "amgfno" else {}
    return get_model(name, **{**SMALL, **extra, **kw}).double()


@pytest.mark.parametrize("name", FAMILY)
def test_shared_spectral_weights_are_one_parameter(name):
    plain, shared = small_model(name), small_model(name, share_weights=True)
    weights = {id(block.spectral.weight) for block in shared.blocks}
    assert len(weights) == 1
    k, h = SMALL["modes"], SMALL["width"]
    assert count_parameters(plain) - count_parameters(shared) == (len(shared.blocks) - 1) * k * h * h * 2
    u = torch.randn(2, 3, 32, 1, dtype=torch.float64)
    shared(u).square().sum().backward()
    assert shared.blocks[0].spectral.weight.grad is shared.blocks[3].spectral.weight.grad


@pytest.mark.parametrize("name", FAMILY)
def test_weight_norm_starts_as_the_plain_model(name):
    """w = g v / ||v|| with g = ||v|| at initialisation: the same function as without weight norm
    (to fp32 round-off: g and v are split from the fp32 weights before .double())."""
    plain, normed = small_model(name), small_model(name, weight_norm=True)
    u = torch.randn(2, 4, 32, 1, dtype=torch.float64)
    assert rel_err(normed(u), plain(u)) <= 1e-6
    names = {n for n, _ in normed.named_parameters()}
    assert "encoder.parametrizations.weight.original0" in names  # the gain g
    assert "blocks.0.feed_forward.0.parametrizations.weight.original1" in names  # the direction v
    assert "decoder.1.parametrizations.weight.original0" in names


def test_last_block_decoder_reads_the_feed_forward_output():
    model = small_model("ffno", decoder_input="last_block")
    u = torch.randn(2, 3, 32, 1, dtype=torch.float64)
    h = model.encode(u)
    for block in model.blocks[:-1]:
        h = block(h)
    expected = model.decode(model.blocks[-1].feed_forward(model.blocks[-1].spectral(h)))
    assert rel_err(model(u), expected) <= 1e-14
    assert rel_err(model(u), small_model("ffno")(u)) > 1e-3  # not the residual stream's decoding


@pytest.mark.parametrize("name", FAMILY)
@pytest.mark.parametrize("option", list(OPTIONS))
def test_options_keep_the_sequence_contract(name, option):
    """Rollout step k equals the teacher-forced model on u_0 and the earlier predictions; causal."""
    model = small_model(name, **OPTIONS[option])
    u0 = torch.randn(2, 32, 1, dtype=torch.float64)
    preds = model.rollout(u0, 4)
    for k in range(4):
        history = torch.cat([u0[:, None], preds[:, :k]], dim=1)
        assert rel_err(preds[:, k], model(history)[:, -1]) <= 1e-12
    u = torch.randn(2, 5, 32, 1, dtype=torch.float64)
    v = u.clone()
    v[:, 3] += 1.0
    assert rel_err(model(v)[:, :3], model(u)[:, :3]) <= 1e-13


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(decoder_input="residual"), ValueError, r"decoder_input must be one of \('stream', 'last_block'\)"),
    (dict(share_weights=1), TypeError, "share_weights must be a bool, got 1"),
    (dict(weight_norm="yes"), TypeError, "weight_norm must be a bool"),
    (dict(share_weights=True, modes=None), ValueError, "share_weights=True needs modes given up front"),
], ids=["decoder-input", "share-int", "wn-str", "share-lazy"])
def test_bad_options(kwargs, error, match):
    with pytest.raises(error, match=match):
        get_model("s4ffno", **{**SMALL, **kwargs})


# -- Normalized -----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["ffno", "amgfno", "multi_input_ffno"])
def test_normalized_with_identity_statistics_is_the_model(name):
    inner = small_model(name)
    u = torch.randn(2, 4, 32, 1, dtype=torch.float64)
    wrapped = Normalized(inner).double()
    assert rel_err(wrapped(u), inner(u)) == 0
    assert rel_err(wrapped.rollout(u[:, 0], 3), inner.rollout(u[:, 0], 3)) == 0
    inc = Normalized(inner, increment=True).double()
    assert rel_err(inc(u), u + inner(u)) <= 1e-15


def test_normalized_maps_inputs_and_outputs():
    inner = small_model("s4ffno")
    wrapped = Normalized(inner, in_mean=0.5, in_std=2.0, out_mean=-0.125, out_std=0.25, increment=True).double()
    u = torch.randn(2, 4, 32, 1, dtype=torch.float64)
    expected = u + inner((u - 0.5) / 2.0) * 0.25 - 0.125  # binary-exact statistics (fp32 buffers)
    assert rel_err(wrapped(u), expected) <= 1e-14
    u0 = u[:, 0]
    preds = wrapped.rollout(u0, 4)
    for k in range(4):  # the rollout feeds back physical states, carrying the memory
        history = torch.cat([u0[:, None], preds[:, :k]], dim=1)
        assert rel_err(preds[:, k], wrapped(history)[:, -1]) <= 1e-12


def test_normalized_reads_through_amgfno_gate_and_round_trips_its_state():
    inner = small_model("amgfno")
    wrapped = Normalized(inner, in_mean=0.1, in_std=1.5, out_mean=0.0, out_std=0.2, increment=True).double()
    u = torch.randn(2, 4, 32, 1, dtype=torch.float64)
    wrapped(u)
    assert wrapped.gate_mean == inner.gate_mean is not None
    wrapped.rollout(u[:, 0], 3)
    assert wrapped.last_gate_mean is inner.last_gate_mean
    copy = Normalized(small_model("amgfno"), increment=True).double()
    copy.load_state_dict(wrapped.state_dict())
    assert float(copy.in_std) == 1.5 and float(copy.out_std) == pytest.approx(0.2)
    assert rel_err(copy(u), wrapped(u)) == 0


@pytest.mark.parametrize("kwargs, match", [
    (dict(in_std=0.0), r"in_std must be finite and > 0, got \[0.0\]"),
    (dict(out_std=float("nan")), "out_std must be finite and > 0"),
    (dict(in_mean=[0.0, 1.0]), r"in_mean must hold one value per channel \(1\), got 2 values"),
], ids=["std-zero", "std-nan", "mean-channels"])
def test_normalized_bad_statistics(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Normalized(small_model("ffno"), **kwargs)
