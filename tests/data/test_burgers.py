"""Viscous Burgers solver and PDEBench-style generator: exact Cole-Hopf solutions, second-order
convergence, conservation / TVD / maximum principle, the scheme written out cell by cell, the
initial-condition recipe, input validation, numpy / torch / CUDA inputs."""
import math

import numpy as np
import pytest
import torch

from amg_fast.data import burgers as bg
from amg_fast.data.burgers import (
    PAPER_STRIDE, PDEBENCH_NU_FILE, generate_burgers, grid, pdebench_initial_conditions, pdebench_times,
    pdebench_window,
    solve_burgers,
)


# ----------------------------------------------------------------------------- exact solution


def cole_hopf_cell_averages(A: float, nu: float, N: int, times, L: float = 1.0) -> np.ndarray:
    """Exact cell averages [len(times), N] of the viscous Burgers solution from u0 = A sin(2 pi x / L).

    Cole-Hopf: u = -2 nu (log phi)_x with phi_t = nu phi_xx and phi0 = exp(-(1 / (2 nu)) int_0^x u0)
    = exp(-A L (1 - cos(2 pi x / L)) / (4 pi nu)), which is smooth and periodic, so the heat
    equation is solved exactly per Fourier mode (exp(-nu k^2 t)); phi0's coefficients decay like
    c^k / (2^k k!) with c = A L / (4 pi nu) <= 8, so N >= 512 points leave no truncation error.
    The cell average of u over [x_j, x_j + dx] is exactly -2 nu (log phi(x_j + dx) - log phi(x_j)) / dx:
    no quadrature, and no point-value approximation (which would differ by ~dx^2 u_xx / 24, up to
    ~1e-3 relative in the shock at nu = 0.01). phi is evaluated at the cell faces x_j = j dx.
    """
    xf = np.arange(N) * (L / N)
    phi0 = np.exp(-A * L * (1.0 - np.cos(2 * np.pi * xf / L)) / (4 * np.pi * nu))
    coef = np.fft.rfft(phi0)
    k = 2 * np.pi * np.fft.rfftfreq(N, d=L / N)
    avgs = []
    for t in times:
        log_phi = np.log(np.fft.irfft(coef * np.exp(-nu * k**2 * t), n=N))
        avgs.append(-2 * nu * (np.roll(log_phi, -1) - log_phi) / (L / N))
    return np.stack(avgs)


def rel_l2(a, b) -> np.ndarray:
    """||a - b|| / ||b|| over the last axis."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return np.linalg.norm(a - b, axis=-1) / np.linalg.norm(b, axis=-1)


# A = 1 breaks (inviscidly) at t = 1 / (2 pi) ~ 0.16, A = -0.5 at 1 / pi ~ 0.32: t = 0.1 is before
# both, 0.3 after the first, 0.5 after both. The two share one batch with different clocks.
@pytest.mark.parametrize("nu, N", [(0.01, 1024), (0.02, 512)], ids=["nu0.01-N1024", "nu0.02-N512"])
def test_matches_cole_hopf_before_and_after_the_shock(nu, N):
    times = [0.0, 0.1, 0.3, 0.5]
    amps = (1.0, -0.5)
    exact = np.stack([cole_hopf_cell_averages(A, nu, N, times) for A in amps])  # [2, T, N]
    sol = solve_burgers(exact[:, 0], L=1.0, nu=nu, t=times).numpy()
    err = rel_l2(sol, exact)
    assert err[:, 1:].max() <= 1e-3, f"relative L2 errors per (A, t): {err}"
    # the comparison really covers a steep front: after breaking the gradient is >= 2x the initial one
    dx = 1.0 / N
    grad = np.abs(np.diff(exact[0], axis=-1)).max(-1) / dx
    assert grad[2] >= 2 * grad[0]


def test_second_order_convergence_on_a_smooth_solution():
    times = [0.0, 0.1, 0.3]  # before and after breaking; nu = 0.01 keeps the solution smooth
    errs = {}
    for N in (128, 256, 512):
        exact = cole_hopf_cell_averages(1.0, 0.01, N, times)
        sol = solve_burgers(exact[:1], L=1.0, nu=0.01, t=times).numpy()[0]
        errs[N] = rel_l2(sol[1:], exact[1:])
    order = np.log2(errs[256] / errs[512])
    assert (order >= 1.8).all(), f"observed orders {order} from errors {errs}"
    assert (np.log2(errs[128] / errs[256]) >= 1.6).all(), errs


def test_conserves_mass_and_is_tvd_and_max_principle_on_pdebench_ics():
    N = 1024
    u0 = pdebench_initial_conditions(6, N=N, seed=11)
    u = solve_burgers(u0, L=1.0, nu=PDEBENCH_NU_FILE / math.pi, t=np.linspace(0.0, 0.5, 6))
    dx = 1.0 / N
    mass = u.sum(-1) * dx
    scale = u[:, :1].abs().sum(-1) * dx  # int |u0|: the mean of u0 can be close to 0
    assert ((mass - mass[:, :1]).abs() / scale).max() <= 1e-12
    tv = (u - u.roll(1, -1)).abs().sum(-1)
    assert (tv[:, 1:] <= tv[:, :-1] * (1 + 1e-12)).all()          # total variation never grows
    umax = u.abs().amax(-1)
    assert (umax[:, 1:] <= umax[:, :-1] * (1 + 1e-12)).all()      # nor does max |u|


# ----------------------------------------------------------------------------- the scheme itself


def written_out_rhs(u: np.ndarray, nu: float, dx: float) -> np.ndarray:
    """du_j/dt cell by cell: MC-limited MUSCL states, Rusanov flux with a = max(|uL|, |uR|),
    central diffusion flux, periodic indices."""
    N = u.size
    slope = np.zeros(N)
    for j in range(N):
        dl, dr = u[j] - u[j - 1], u[(j + 1) % N] - u[j]
        if dl * dr > 0:
            slope[j] = math.copysign(min(2 * abs(dl), 2 * abs(dr), abs(dl + dr) / 2), dl)
    flux = np.zeros(N)  # flux[j] at the face between cells j and j+1
    for j in range(N):
        ul, ur = u[j] + slope[j] / 2, u[(j + 1) % N] - slope[(j + 1) % N] / 2
        a = max(abs(ul), abs(ur))
        flux[j] = (ul**2 / 2 + ur**2 / 2) / 2 - a * (ur - ul) / 2 - nu * (u[(j + 1) % N] - u[j]) / dx
    return np.array([-(flux[j] - flux[j - 1]) / dx for j in range(N)])


@pytest.mark.parametrize("N", [3, 7, 37], ids=["N3", "N7", "N37"])
def test_rhs_matches_the_scheme_written_out(N, gen):
    u = torch.randn(3, N, generator=gen, dtype=torch.float64)
    u[2] = u[2].abs() + 0.5  # one all-positive state (upwinding from the left only)
    dx, nu = 1.0 / N, 0.03
    got = bg._rhs(u, nu / dx, 1.0 / dx).numpy()
    for b in range(3):
        want = written_out_rhs(u[b].numpy(), nu, dx)
        np.testing.assert_allclose(got[b], want, rtol=1e-12, atol=1e-12 * np.abs(want).max())


def test_constant_state_stays_constant_and_output_times_are_hit():
    u0 = torch.full((2, 16), 0.7, dtype=torch.float64)
    u0[1] = 0.0  # u == 0 and nu == 0: the advective and diffusive limits are both infinite
    out = solve_burgers(u0, L=2.0, nu=0.0, t=[0.0, 0.013, 1.0])
    assert torch.equal(out, u0[:, None].expand(2, 3, 16))


def test_frames_land_exactly_on_the_output_times():
    """Restarting from the frame at t = 0.1 and running 0.2 more must reproduce the frame at 0.3 up to
    round-off: it does only if each frame is the state at exactly its time (a frame taken a step
    late would shift the restarted run by O(dt u_t) ~ 1e-4)."""
    u0 = pdebench_initial_conditions(3, N=128, seed=8)
    nu = 0.002
    one = solve_burgers(u0, L=1.0, nu=nu, t=[0.0, 0.1, 0.3])
    restarted = solve_burgers(one[:, 1], L=1.0, nu=nu, t=[0.0, 0.2])
    assert (restarted[:, 1] - one[:, 2]).norm() <= 1e-12 * one[:, 2].norm()


def test_blow_up_raises_naming_the_trajectory():
    u0 = np.stack([np.sin(2 * np.pi * grid(32, 1.0)), 1e200 * np.sin(2 * np.pi * grid(32, 1.0))])
    with pytest.raises(FloatingPointError, match=r"non-finite in trajectory 1 .*lower cfl"):
        solve_burgers(u0, L=1.0, nu=0.01, t=[0.0, 0.1])


# ----------------------------------------------------------------------------- inputs and outputs


def test_grid_is_cell_centres():
    np.testing.assert_allclose(grid(4, 2.0), [0.25, 0.75, 1.25, 1.75], rtol=0, atol=1e-15)
    assert grid(1024, 1.0).dtype == np.float64 and grid(1024, 1.0).shape == (1024,)


@pytest.mark.parametrize("kind", ["numpy-f64", "torch-f32", "torch-f64", "torch-bf16"])
def test_numpy_and_torch_inputs_give_float64_on_cpu(kind, gen):
    base = torch.randn(3, 48, generator=gen, dtype=torch.float64)
    u0 = {"numpy-f64": base.numpy(), "torch-f32": base.float(), "torch-f64": base,
          "torch-bf16": base.bfloat16()}[kind]
    t = [0.0, 0.02, 0.05]
    t = torch.tensor(t, dtype=torch.float64) if kind.startswith("torch") else np.array(t)
    out = solve_burgers(u0, L=1.0, nu=0.01, t=t)
    assert out.dtype == torch.float64 and out.device.type == "cpu" and out.shape == (3, 3, 48)
    exact_u0 = torch.as_tensor(u0).to(torch.float64)
    assert torch.equal(out[:, 0], exact_u0)
    assert torch.equal(out, solve_burgers(exact_u0, L=1.0, nu=0.01, t=[0.0, 0.02, 0.05]))


def test_single_output_time_returns_u0():
    u0 = np.ones((2, 5), dtype=np.float32)
    out = solve_burgers(u0, L=1.0, nu=0.1, t=[0.0])
    assert out.shape == (2, 1, 5) and torch.equal(out[:, 0], torch.ones(2, 5, dtype=torch.float64))


@pytest.mark.parametrize("slots", [2, None], ids=["2-slots-refilled", "all-in-flight"])
def test_results_do_not_depend_on_the_batch(slots, monkeypatch):
    """Each trajectory has its own clock: solving it alone or in a batch gives identical numbers,
    also when finished trajectories' slots are refilled with waiting ones (CPU path)."""
    N = 64
    if slots is not None:
        monkeypatch.setattr(bg, "_CPU_SLOT_ELEMENTS", slots * N)
    u0 = pdebench_initial_conditions(5, N=N, seed=2)
    u0[3] *= 0.2  # a slow trajectory: the others finish first and free their slots
    t = [0.0, 0.05, 0.2]
    together = solve_burgers(u0, L=1.0, nu=0.002, t=t)
    alone = torch.cat([solve_burgers(u0[i:i + 1], L=1.0, nu=0.002, t=t) for i in range(5)])
    assert torch.equal(together, alone)


def _bad(**kw):
    args = dict(u0=np.zeros((2, 8)), L=1.0, nu=0.01, t=[0.0, 0.1], cfl=0.25)
    args.update(kw)
    u0 = args.pop("u0")
    return lambda: solve_burgers(u0, **args)


@pytest.mark.parametrize("call, exc, message", [
    (_bad(u0=np.zeros(8)), ValueError, r"u0 must have rank 2 \(\[B, N\].*got shape \(8,\)"),
    (_bad(u0=np.zeros((2, 8), dtype=np.int64)), TypeError, r"u0 must be a real floating-point array.*int64"),
    (_bad(u0=torch.zeros(2, 8, dtype=torch.int32)), TypeError, r"u0 must be a real floating-point tensor.*int32"),
    (_bad(u0=torch.zeros(2, 8, dtype=torch.complex64)), TypeError, r"u0 must be a real floating-point"),
    (_bad(u0=[[0.0] * 8]), TypeError, r"u0 must be a torch.Tensor or numpy.ndarray \[B, N\], got list"),
    (_bad(u0=np.zeros((2, 2))), ValueError, r"N >= 3 cells.*got shape \(2, 2\)"),
    (_bad(u0=np.full((2, 8), np.nan)), ValueError, r"u0 must be finite"),
    (_bad(L=0.0), ValueError, r"L must be > 0, got 0"),
    (_bad(L=-1), ValueError, r"L must be > 0, got -1"),
    (_bad(L=math.inf), ValueError, r"L must be finite, got inf"),
    (_bad(L="1"), TypeError, r"L must be a real number, got '1' \(str\)"),
    (_bad(nu=-1e-3), ValueError, r"nu must be >= 0, got -0.001"),
    (_bad(nu=True), TypeError, r"nu must be a real number, got True \(bool\)"),
    (_bad(t=[[0.0, 0.1]]), ValueError, r"t must be 1-D .*got shape \(1, 2\)"),
    (_bad(t=[]), ValueError, r"t must be 1-D with at least one entry"),
    (_bad(t=[0.1, 0.2]), ValueError, r"t\[0\] must be 0 \(the time of u0\), got 0.1"),
    (_bad(t=[0.0, 0.2, 0.2]), ValueError, r"t must be strictly increasing, got t\[1\] = 0.2 >= t\[2\] = 0.2"),
    (_bad(t=[0.0, np.nan]), ValueError, r"t must be finite"),
    (_bad(t=["0", "1"]), TypeError, r"t must be a 1-D sequence of real times"),
    (_bad(cfl=0.0), ValueError, r"cfl must be > 0 and <= 0.5, got 0"),
    (_bad(cfl=0.6), ValueError, r"cfl must be > 0 and <= 0.5, got 0.6"),
    (_bad(compile="yes"), TypeError, r"compile must be a bool, got 'yes'"),
    (lambda: grid(0, 1.0), ValueError, r"N must be >= 1, got 0"),
    (lambda: pdebench_initial_conditions(0, seed=0), ValueError, r"n must be >= 1, got 0"),
    (lambda: pdebench_initial_conditions(2, seed=0, k_tot=0), ValueError, r"k_tot must be >= 1, got 0"),
    (lambda: pdebench_initial_conditions(2, seed=0, N=2.5), TypeError, r"N must be an int, got 2.5"),
    (lambda: generate_burgers(2, seed=0, batch_size=0), ValueError, r"batch_size must be >= 1, got 0"),
    (lambda: generate_burgers(2, seed=0, nu_file=-1.0), ValueError, r"nu_file must be >= 0, got -1"),
    (lambda: generate_burgers(2, seed=0, progress=3), TypeError, r"progress must be a callable"),
], ids=["u0-rank1", "u0-numpy-int", "u0-torch-int", "u0-complex", "u0-list", "u0-N2", "u0-nan",
        "L-zero", "L-negative", "L-inf", "L-str", "nu-negative", "nu-bool", "t-2d", "t-empty",
        "t0-nonzero", "t-repeated", "t-nan", "t-str", "cfl-zero", "cfl-0.6", "compile-str", "grid-N0",
        "ic-n0", "ic-ktot0", "ic-N-float", "gen-batch0", "gen-nu-negative", "gen-progress-int"])
def test_bad_inputs_raise_clear_errors(call, exc, message):
    with pytest.raises(exc, match=message):
        call()


# ----------------------------------------------------------------------------- initial conditions


def test_initial_conditions_shape_and_seeding():
    a = pdebench_initial_conditions(5, N=100, seed=1)
    assert a.shape == (5, 100) and a.dtype == np.float64
    assert np.array_equal(a, pdebench_initial_conditions(5, N=100, seed=1))
    assert not np.allclose(a, pdebench_initial_conditions(5, N=100, seed=2))
    assert pdebench_initial_conditions(3, seed=0).shape == (3, 1024)


def test_initial_conditions_follow_the_pdebench_recipe():
    n, N, k_tot = 4000, 256, 4
    u = pdebench_initial_conditions(n, N=N, seed=7, k_tot=k_tot)
    x = grid(N, 1.0)
    scale = np.abs(u).max(1)
    assert scale.max() <= k_tot  # k_tot sines of amplitude <= 1
    # ~10 % are windowed: ~0 within 0.03 of both ends (window edges are >= 0.1 away, width 0.01)
    edge = (x < 0.03) | (x > 0.97)
    windowed = np.abs(u[:, edge]).max(1) <= 1e-4 * scale
    assert 0.07 <= windowed.mean() <= 0.13
    # the sign of the mean is a fair coin (random phases alone would give that) ...
    assert 0.45 <= (u.mean(1) > 0).mean() <= 0.55
    # ... and so is the sign of the single-signed ICs, which include the ~10 % that took |u|
    # (without the random sign flip ~65 % of them are positive)
    single = (u.min(1) >= 0) | (u.max(1) <= 0)
    assert 0.42 <= (u[single].mean(1) > 0).mean() <= 0.58
    # |u| of a sign-changing sum leaves single-signed ICs that touch 0 (V-shaped zeros): ~7.5 % of
    # all ICs here, ~1 % without the |u| branch
    touching = single & ~windowed & (np.abs(u).min(1) <= 0.02 * scale)
    assert 0.05 <= touching.mean() <= 0.11
    # PDEBench divides by xc[-1] - xc[0], not L: the sines repeat between the first and last centre
    plain = ~windowed
    np.testing.assert_allclose(u[plain, 0], u[plain, -1], rtol=0, atol=1e-12)
    # sign-changing, unwindowed ICs (so not |u|): wave numbers m * L / (L - dx), m in 0..2 k_tot,
    # i.e. (nearly) all energy in DFT modes 0..9
    smooth = plain & ~single
    spec = np.abs(np.fft.rfft(u[smooth], axis=1)) ** 2
    spec[:, 1:] *= 2
    assert (spec[:, :2 * k_tot + 2].sum(1) / spec.sum(1)).min() >= 0.99
    # unselected wave numbers have kk = 0 and add the constant amp sin(phs): means are O(1)
    assert np.median(np.abs(u[smooth].mean(1))) >= 0.1


# ----------------------------------------------------------------------------- generator


def test_generate_matches_solver_and_constants():
    calls = []
    t = [0.0, 0.05, 0.1]
    out = generate_burgers(3, seed=4, N=64, t=t, batch_size=2, progress=calls.append, compile=False)
    assert out.shape == (3, 3, 64) and out.dtype == np.float32
    assert calls == [2, 1]
    u0 = pdebench_initial_conditions(3, N=64, seed=4)
    want = solve_burgers(u0, L=1.0, nu=PDEBENCH_NU_FILE / math.pi, t=t).to(torch.float32).numpy()
    assert np.array_equal(out, want)
    assert np.array_equal(out, generate_burgers(3, seed=4, N=64, t=t, batch_size=3, compile=False))
    times = pdebench_times()
    assert times.shape == (201,) and times[0] == 0.0 and abs(times[-1] - 2.0) < 1e-12
    paper = times[:141:PAPER_STRIDE]
    assert paper.size == 21 and abs(paper[-1] - 1.4) < 1e-12  # 21 frames, 20 rollout steps
    assert bg.BURGERS_N == 1024 and bg.BURGERS_L == 1.0 and bg.PDEBENCH_DT_SAVE == 0.01


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # raised inside torch.compile's own imports
def test_compiled_step_matches_eager():
    """torch.compile'd step vs eager: same dt logic, round-off differences only (one compile:
    u0 and -u0 have the same max|u|, so both trajectories finish on the same step)."""
    u0 = pdebench_initial_conditions(1, N=64, seed=9)
    u0 = np.concatenate([u0, -u0])
    t = [0.0, 0.1, 0.3]
    eager = solve_burgers(u0, L=1.0, nu=0.003, t=t)
    compiled = solve_burgers(u0, L=1.0, nu=0.003, t=t, compile=True)
    assert (compiled - eager).norm() <= 1e-12 * eager.norm()


def test_compile_failure_falls_back_to_eager_with_a_warning(monkeypatch):
    def broken_compile(*args, **kwargs):
        raise RuntimeError("no C++ compiler")

    monkeypatch.setattr(bg, "_compiled", {})
    monkeypatch.setattr(torch, "compile", broken_compile)
    u0 = pdebench_initial_conditions(2, N=32, seed=1)
    with pytest.warns(RuntimeWarning, match=r"torch.compile of the solver step failed \(RuntimeError: no C\+\+ "
                                            r"compiler\); running eagerly"):
        out = solve_burgers(u0, L=1.0, nu=0.01, t=[0.0, 0.05], compile=True)
    assert torch.equal(out, solve_burgers(u0, L=1.0, nu=0.01, t=[0.0, 0.05]))


@pytest.mark.gpu
def test_cuda_input_stays_on_cuda_and_matches_cpu():
    u0 = pdebench_initial_conditions(4, N=128, seed=5)
    t = [0.0, 0.1, 0.2]
    gpu = solve_burgers(torch.from_numpy(u0).cuda().float(), L=1.0, nu=0.002, t=t)
    assert gpu.device.type == "cuda" and gpu.dtype == torch.float64
    cpu = solve_burgers(torch.from_numpy(u0).float(), L=1.0, nu=0.002, t=t)
    assert (gpu.cpu() - cpu).norm() <= 1e-10 * cpu.norm()


def test_window_edges_share_one_draw_as_pdebench():
    """PDEBench's init_multi draws the window condition, xL and xR from one key: every window is
    0.45 wide and starts in [0.1, 0.135); about 10% of trajectories are windowed."""
    windowed, xL, xR = pdebench_window(np.random.default_rng(0), 20000)
    assert np.allclose(xR - xL, 0.45)
    assert 0.09 < windowed.mean() < 0.11
    assert xL[windowed].min() >= 0.1 and xL[windowed].max() < 0.135
    assert xL[~windowed].min() >= 0.135  # not windowed: U >= 0.1


def test_windowed_initial_conditions_vanish_outside_a_045_window():
    """In the ICs themselves: where a trajectory is windowed, |u| is below 1e-3 of its peak outside
    [xL - 0.035, xR + 0.035], and the region where it is not spans about 0.45 + 2 * 0.035 (the tanh
    edges of width 0.01 reach 1e-3 at 0.01 atanh(0.998) = 0.035): ~0.51, with little spread (independent
    edge draws would give 0.2-0.8)."""
    N = 1024
    u = pdebench_initial_conditions(400, N=N, seed=5)
    x = grid(N, 1.0)
    vanishing = np.abs(u[:, x < 0.07]).max(1) < 1e-3 * np.abs(u).max(1)
    widths = []
    for row in u[vanishing]:
        alive = x[np.abs(row) > 1e-3 * np.abs(row).max()]
        assert alive.min() >= 0.07 and alive.max() <= 0.615
        widths.append(alive.max() - alive.min())
    assert 15 <= len(widths) <= 70  # ~10% of 400
    assert np.median(widths) == pytest.approx(0.45 + 2 * 0.035, abs=0.02)
    assert np.quantile(widths, 0.1) > 0.4 and max(widths) < 0.56
