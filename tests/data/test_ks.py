"""KS solver: ETDRK4 step-size convergence study, parity with the paper's Radau pipeline, exact
linear solutions, the paper's initial conditions, the generator, input types and bad input.

Error metric throughout: max over trajectories and frames of ||u - u_ref||_2 / ||u_ref||_2 (norm over x).
"""
from functools import lru_cache

import numpy as np
import pytest
import torch

from amg_fast.data.ks import (DEFAULT_DT, KS_L, KS_N, KS_TIMES, KS_VISCOSITIES, generate_ks, grid,
                              random_initial_conditions, solve_ks)

STUDY_ICS = random_initial_conditions(3, seed=0)  # [3, 512] on L = 64
NU_IDS = [f"nu{nu}" for nu in KS_VISCOSITIES]


def max_frame_error(u: torch.Tensor, ref: torch.Tensor) -> float:
    return float(((u - ref).norm(dim=-1) / ref.norm(dim=-1)).max())


@lru_cache(maxsize=None)
def study_solution(nu: float, dt: float) -> torch.Tensor:
    """ETDRK4 on STUDY_ICS over the paper's 26 frames, cached across tests: [3, 26, 512]."""
    return solve_ks(STUDY_ICS, L=KS_L, nu=nu, t=KS_TIMES, dt=dt)


def test_grid():
    x = grid(8, 2.0)
    assert x.dtype == np.float64 and x.tolist() == [0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75]
    assert np.array_equal(grid(np.int64(8), 2), x)  # numpy ints, as read from HDF5 attributes


@pytest.mark.parametrize("nu", KS_VISCOSITIES, ids=NU_IDS)
def test_default_step_meets_1e_minus_6_against_4x_finer_step(nu):
    err = max_frame_error(study_solution(nu, DEFAULT_DT), study_solution(nu, DEFAULT_DT / 4))
    assert err <= 1e-6, f"nu={nu}: default dt={DEFAULT_DT} error {err:.2e}"


@pytest.mark.parametrize("nu", [0.075, 0.1], ids=["nu0.075", "nu0.1"])
def test_fourth_order_convergence(nu):
    """Slope of log error vs log dt over dt = 2, 1, 1/2 x DEFAULT_DT against DEFAULT_DT / 8."""
    dts = np.array([2.0, 1.0, 0.5]) * DEFAULT_DT
    ref = study_solution(nu, DEFAULT_DT / 8)
    errors = [max_frame_error(study_solution(nu, dt), ref) for dt in dts]
    order = np.polyfit(np.log(dts), np.log(errors), 1)[0]
    assert 3.5 <= order <= 4.5, f"nu={nu}: errors {errors}, fitted order {order:.2f}"


@pytest.mark.parametrize("nu", [0.075, 0.1], ids=["nu0.075", "nu0.1"])
def test_radau_pipeline_matches_etdrk4(nu):
    """The paper's pipeline (scipy Radau, no dealiasing) vs ETDRK4 over the full t range.

    The gap is the 2/3 rule dropping modes N/3..N/2 (still ~1e-5 of u at nu = 0.075), not time stepping.
    """
    radau = solve_ks(STUDY_ICS[:1], L=KS_L, nu=nu, t=KS_TIMES, method="radau")
    assert max_frame_error(radau, study_solution(nu, DEFAULT_DT)[:1]) <= 1e-5


@pytest.mark.parametrize("N", [64, 63], ids=["N64", "N63-odd"])
@pytest.mark.parametrize("method", ["etdrk4", "radau"])
def test_small_amplitude_wave_follows_the_linear_symbol(method, N):
    """u0 = eps sin(k x): the mode-k amplitude is eps exp((k^2 - nu k^4) t) up to O(eps^3)."""
    L, nu, eps, n = 64.0, 0.1, 1e-3, 10  # k = 0.98: a growing mode
    k, x, t = 2 * np.pi * n / L, grid(N, L), np.array([0.0, 0.5, 1.0])
    u = solve_ks(eps * np.sin(k * x)[None], L=L, nu=nu, t=t, method=method)
    amplitude = 2 * (u[0].numpy() * np.sin(k * x)).mean(axis=-1)
    np.testing.assert_allclose(amplitude, eps * np.exp((k**2 - nu * k**4) * t), rtol=1e-6)


def test_mean_is_conserved():
    u0 = torch.from_numpy(random_initial_conditions(2, N=128, seed=3)) + 0.3
    u = solve_ks(u0, L=KS_L, nu=0.1, t=KS_TIMES[:4])
    assert torch.allclose(u.mean(dim=-1), torch.full((2, 4), 0.3, dtype=torch.float64), rtol=0, atol=1e-12)


def test_output_times_need_not_be_multiples_of_dt():
    """Each interval takes ceil(interval / dt) equal steps: t = 0.05 reached via 0.013 or directly."""
    u0 = random_initial_conditions(2, N=128, seed=4)
    via = solve_ks(u0, L=KS_L, nu=0.1, t=[0.0, 0.013, 0.05], dt=0.01)
    direct = solve_ks(u0, L=KS_L, nu=0.1, t=[0.0, 0.05], dt=0.01)
    assert max_frame_error(via[:, -1:], direct[:, -1:]) <= 1e-7


@pytest.mark.parametrize("kind", ["numpy-float64", "torch-float64", "numpy-float32", "torch-float32",
                                  "torch-bfloat16"])
def test_input_kinds_give_float64_on_cpu(kind):
    """Any real float input is solved as its float64 value; frame 0 is u0."""
    lib, dtype = kind.split("-")
    u0 = torch.from_numpy(random_initial_conditions(2, N=128, seed=5)).to(getattr(torch, dtype))
    out = solve_ks(u0.numpy() if lib == "numpy" else u0, L=KS_L, nu=0.1, t=KS_TIMES[:3])
    assert out.shape == (2, 3, 128) and out.dtype == torch.float64 and out.device.type == "cpu"
    assert torch.equal(out[:, 0], u0.double())
    assert torch.equal(out, solve_ks(u0.double(), L=KS_L, nu=0.1, t=KS_TIMES[:3]))


@pytest.mark.parametrize("as_type", [list, np.asarray, lambda t: torch.tensor(t, dtype=torch.float64)],
                         ids=["list", "numpy", "tensor"])
def test_times_as_list_numpy_or_tensor(as_type):
    u0 = random_initial_conditions(1, N=128, seed=6)
    expected = solve_ks(u0, L=KS_L, nu=0.1, t=KS_TIMES[:3])
    assert torch.equal(solve_ks(u0, L=KS_L, nu=0.1, t=as_type([0.0, 0.1, 0.2])), expected)


@pytest.mark.gpu
def test_cuda_input_stays_on_cuda_and_matches_cpu():
    u0 = torch.from_numpy(random_initial_conditions(4, seed=6))
    out = solve_ks(u0.cuda(), L=KS_L, nu=0.1, t=KS_TIMES[:6])
    assert out.device.type == "cuda"
    assert max_frame_error(out.cpu(), solve_ks(u0, L=KS_L, nu=0.1, t=KS_TIMES[:6])) <= 1e-12


def test_initial_conditions_reproducible_per_seed_and_prefix_stable():
    a = random_initial_conditions(5, seed=11)
    assert a.shape == (5, KS_N) and a.dtype == np.float64
    assert np.array_equal(a, random_initial_conditions(5, seed=11))
    assert np.array_equal(a[:3], random_initial_conditions(3, seed=11))
    assert not np.allclose(a, random_initial_conditions(5, seed=12))


def test_initial_condition_statistics():
    """Zero mean, only wave numbers 1..8, each equally likely; E[u0^2] = 21 E[A^2] / 2 = 0.875."""
    u0 = random_initial_conditions(2000, N=64, seed=0)
    assert np.abs(u0.mean(axis=-1)).max() <= 1e-12
    assert np.abs(u0).max() <= 21 * 0.5
    power = np.abs(np.fft.rfft(u0, axis=-1)) ** 2
    assert power[:, 9:].max() <= 1e-20 * power.max()
    mode_power = power[:, 1:9].mean(axis=0)
    assert np.allclose(mode_power, mode_power.mean(), rtol=0.1)
    assert np.mean(u0**2) == pytest.approx(0.875, rel=0.05)


def test_generate_ks_matches_solve_ks_for_any_batch_size():
    kwargs = dict(nu=0.1, seed=9, N=128, t=KS_TIMES[:3])
    done = []
    data = generate_ks(5, batch_size=2, progress=done.append, **kwargs)
    assert data.shape == (5, 3, 128) and data.dtype == np.float64 and done == [2, 2, 1]
    assert np.array_equal(data, generate_ks(5, batch_size=5, **kwargs))
    u0 = random_initial_conditions(5, N=128, seed=9)
    assert np.array_equal(data, solve_ks(u0, L=KS_L, nu=0.1, t=KS_TIMES[:3]).numpy())
    assert not np.allclose(data, generate_ks(5, **{**kwargs, "seed": 10}))


GOOD = dict(u0=np.zeros((1, 16)), L=1.0, nu=0.1, t=[0.0, 0.1])


@pytest.mark.parametrize("change,exc,match", [
    (dict(u0=np.zeros(16)), ValueError, r"u0 must have rank 2 \(\[B, N\]"),
    (dict(u0=np.zeros((0, 16))), ValueError, r"u0 must have B >= 1 and N >= 2 .*got shape \(0, 16\)"),
    (dict(u0=np.zeros((1, 16), dtype=np.int64)), TypeError, "u0 must be a real floating-point tensor .*int64"),
    (dict(u0=[[0.0] * 16]), TypeError, "u0 must be a torch.Tensor or numpy.ndarray .*got list"),
    (dict(u0=np.full((1, 16), np.nan)), ValueError, "u0 must be finite"),
    (dict(L=0.0), ValueError, "L must be a finite number > 0, got 0.0"),
    (dict(nu=-0.1), ValueError, "nu must be a finite number > 0, got -0.1"),
    (dict(nu="0.1"), TypeError, "nu must be a real number > 0, got '0.1'"),
    (dict(t=[[0.0, 0.1]]), ValueError, r"t must be 1-D and non-empty .*got shape \(1, 2\)"),
    (dict(t=[]), ValueError, r"t must be 1-D and non-empty .*got shape \(0,\)"),
    (dict(t=[0.1, 0.2]), ValueError, r"t must start at t\[0\] == 0 .*got t\[0\] = 0.1"),
    (dict(t=[0.0, 0.2, 0.2]), ValueError, "t must be strictly increasing"),
    (dict(method="rk4"), ValueError, r"method must be one of \('etdrk4', 'radau'\), got 'rk4'"),
    (dict(dt=0), ValueError, "dt must be a finite number > 0, got 0"),
    (dict(method="radau", dt=0.01), ValueError, "dt must be None for method='radau'"),
], ids=["u0-rank1", "u0-empty", "u0-int", "u0-list", "u0-nan", "L-zero", "nu-negative", "nu-str", "t-2d",
        "t-empty", "t-not-from-0", "t-repeated", "method-unknown", "dt-zero", "dt-with-radau"])
def test_solve_ks_bad_input(change, exc, match):
    with pytest.raises(exc, match=match):
        solve_ks(**{**GOOD, **change})


@pytest.mark.parametrize("call,exc,match", [
    (lambda: grid(0, 1.0), ValueError, "N must be >= 1, got 0"),
    (lambda: grid(8, -1.0), ValueError, "L must be a finite number > 0, got -1.0"),
    (lambda: random_initial_conditions(0, seed=0), ValueError, "n must be >= 1, got 0"),
    (lambda: random_initial_conditions(2, N=8.0, seed=0), TypeError, "N must be an int"),
    (lambda: generate_ks(2, nu=0.1, seed=0, batch_size=0), ValueError, "batch_size must be >= 1, got 0"),
    (lambda: generate_ks(2, nu=0.0, seed=0, N=16), ValueError, "nu must be a finite number > 0, got 0.0"),
], ids=["grid-N0", "grid-L-negative", "ic-n0", "ic-N-float", "generate-batch0", "generate-nu0"])
def test_helpers_bad_input(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_generate_ks_burn_in_and_initial_condition_options():
    """burn_in: the frames of a longer solve from the same ICs; terms / max_wavenumber / amplitude
    shape the ICs (the S4FFNO authors' generator: 10 sines, k <= 7)."""
    kwargs = dict(nu=0.1, seed=9, N=128)
    shifted = generate_ks(2, t=KS_TIMES[:3], burn_in=0.2, **kwargs)
    long = generate_ks(2, t=KS_TIMES[:5], **kwargs)
    assert max_frame_error(torch.from_numpy(shifted), torch.from_numpy(long[:, 2:])) <= 1e-9
    u0 = random_initial_conditions(200, N=128, seed=1, terms=10, max_wavenumber=7, amplitude=0.25)
    spectrum = np.abs(np.fft.rfft(u0, axis=-1))
    assert spectrum[:, 8:].max() < 1e-9 * spectrum.max() and spectrum[:, 7].max() > 0
    assert np.abs(u0).max() <= 10 * 0.25 + 1e-12
    assert np.array_equal(random_initial_conditions(3, seed=2), random_initial_conditions(3, seed=2, terms=21,
                                                                                          max_wavenumber=8))
