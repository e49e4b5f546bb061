"""Issue 14, ops and models: empty dimensions, foreign dtypes, N = 0, chi outside [0, 1], bogus
backends and non-finite inputs are refused with messages that name the argument and the value.
Each test is a row of docs/reliability.md."""
import pytest
import torch

from amg_fast.models import available_models, get_model
from amg_fast.ops import gate_fusion, s4d_scan, spectral_conv1d

SMALL = dict(width=8, modes=4)


def model(name, **kw):
    kw = {**SMALL, **kw}
    if name in ("factformer", "unet"):
        kw.pop("modes")
    torch.manual_seed(0)
    return get_model(name, **kw)


@pytest.mark.parametrize("shape", [(0, 3, 16, 1), (2, 0, 16, 1), (2, 3, 0, 1)], ids=["B0", "T0", "S0"])
@pytest.mark.parametrize("name", ["ffno", "amgfno", "unet"])
def test_models_refuse_empty_dimensions(name, shape):
    with pytest.raises(ValueError, match=rf"u must have no empty dimension \(\[B, T, S, C\]\), got shape "
                                         rf"\({shape[0]}, {shape[1]}, {shape[2]}, 1\)"):
        model(name)(torch.zeros(shape))


@pytest.mark.parametrize("name, shape, axis", [("amgfno", (2, 3, 32, 1), -2), ("ffno2d", (1, 2, 40, 32, 1), -2)],
                         ids=["1d", "2d-y"])
def test_models_name_modes_when_the_grid_is_too_coarse_for_them(name, shape, axis):
    """modes = 20 on a 32-point axis (at most 17 rFFT modes): the model's `modes`, not the op's weight.shape[0]."""
    with pytest.raises(ValueError, match=rf"modes=20: a grid of {shape[axis]} points holds at most "
                                         rf"{shape[axis] // 2 + 1} rFFT modes \(S//2\+1\) along axis {axis} of the "
                                         rf"input; build the model with modes <= {shape[axis] // 2 + 1}, or give it a "
                                         r"grid of at least 38 points"):
        model(name, modes=20)(torch.randn(shape))


def test_rollout_refuses_an_empty_batch():
    with pytest.raises(ValueError, match=r"u0 must have no empty dimension \(\[B, S, C\]\), got shape \(0, 16, 1\)"):
        model("s4ffno").rollout(torch.zeros(0, 16, 1), 2)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16], ids=["fp64", "fp16"])
def test_models_refuse_a_foreign_float_dtype(dtype):
    net = model("amgfno")
    with pytest.raises(TypeError, match=rf"u has dtype {dtype} but the model's parameters are torch.float32; the "
                                        "model does not cast"):
        net(torch.zeros(1, 3, 16, 1, dtype=dtype))
    with pytest.raises(TypeError, match=rf"u0 has dtype {dtype} but the model's parameters are torch.float32"):
        net.rollout(torch.zeros(1, 16, 1, dtype=dtype), 2)
    assert net.double()(torch.zeros(1, 3, 16, 1, dtype=torch.float64)).dtype == torch.float64  # as advised


@pytest.mark.parametrize("name", ["ffno", "s4ffno", "amgfno", "gkt"])
def test_bogus_backend_refused_at_build(name):
    with pytest.raises(ValueError, match=r"backend must be one of \('auto', 'triton', 'reference'\), got 'bogus'"):
        model(name, backend="bogus")


@pytest.mark.parametrize("shape", [(0, 4, 16, 8), (2, 4, 0, 8)], ids=["B0", "S0"])
def test_spectral_conv_refuses_empty_dimensions(shape):
    with pytest.raises(ValueError, match=r"x must have no empty dimension \(\[..., S, H_in\]\)"):
        spectral_conv1d(torch.zeros(shape), torch.zeros(3, 8, 8, 2))


def test_s4d_scan_refuses_n_zero_and_an_empty_time_axis():
    u, d = torch.zeros(2, 5, 4, 3), torch.zeros(3)
    with pytest.raises(ValueError, match=r"lam must hold N >= 1 poles \(\[H, N, 2\]\), got shape \(3, 0, 2\)"):
        s4d_scan(u, torch.zeros(3, 0, 2), torch.zeros(3, 0, 2), d)
    with pytest.raises(ValueError, match=r"u must have no empty dimension .* got shape \(2, 0, 4, 3\)"):
        s4d_scan(u[:, :0], torch.zeros(3, 2, 2), torch.zeros(3, 2, 2), d)


@pytest.mark.parametrize("chi", [1.5, -0.1, float("nan"), float("inf")], ids=["above-1", "negative", "nan", "inf"])
def test_gate_fusion_refuses_chi_outside_the_unit_interval(chi):
    h = torch.zeros(2, 4)
    with pytest.raises(ValueError, match=r"chi must be finite and in \[0, 1\], got "):
        gate_fusion(h, h, torch.zeros(4, 4), torch.zeros(4, 4), torch.zeros(4), torch.tensor(chi))
    with pytest.raises(ValueError, match=r"chi must be finite and in \[0, 1\]"):  # per batch too
        gate_fusion(h, h, torch.zeros(4, 4), torch.zeros(4, 4), torch.zeros(4), torch.tensor([0.5, chi]))


def test_memory_model_spreads_a_nan_frame_unless_check_finite():
    """Documented: causality holds for finite inputs only; check_finite=True names the frame."""
    net = model("s4ffno")
    u = torch.randn(1, 6, 16, 1)
    u[:, 3] = float("nan")
    with torch.no_grad():
        assert torch.isnan(net(u)[:, 0]).all()  # frame 0 is NaN too: the FFT convolution over time
        with pytest.raises(ValueError, match=r"u: frame 3 \(u\[:, 3\]\) holds NaN or Inf \(check_finite=True\)"):
            net(u, check_finite=True)
        assert torch.isfinite(net(u[:, :3], check_finite=True)).all()


@pytest.mark.parametrize("name", available_models())
def test_rollout_check_finite_stops_at_the_first_non_finite_step(name):
    net = model(name, **({"omega": 0.1} if name.startswith("amgfno") else {}))
    grid = (16,) * net.spatial_dims
    calls = []
    real_step = net.step

    def step_with_inf_at_3(u_t, state, **kw):
        calls.append(1)
        out, state = real_step(u_t, state, **kw)
        return (out * float("inf") if len(calls) == 3 else out), state

    net.step = step_with_inf_at_3
    with torch.no_grad(), pytest.raises(FloatingPointError, match=r"rollout: the prediction of step 3 of 5 holds NaN "
                                                                    r"or Inf \(check_finite=True\); stopped there"):
        net.rollout(torch.randn(1, *grid, 1), 5, check_finite=True)
    assert len(calls) == 3
    with pytest.raises(ValueError, match=r"u0 holds NaN or Inf \(check_finite=True\)"):
        net.rollout(torch.full((1, *grid, 1), float("nan")), 2, check_finite=True)
