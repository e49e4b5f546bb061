"""2D Navier-Stokes (vorticity) solver and generator: exact solutions (Taylor-Green decay, the forced
shell), the nonlinear term against its analytic formula, the enstrophy balance, fourth order in
time, FNO's random field against an explicit sum and its spectrum, the generator's resampling,
omega_f and batching, and every refusal."""
import math

import numpy as np
import pytest
import torch
from scipy.integrate import simpson

from amg_fast.data import ns2d
from amg_fast.data.resample import to_resolution
from amg_fast.data.spectral import unresolved_energy_ratio


def mesh(N):
    x = ns2d.grid(N)
    return np.meshgrid(x, x, indexing="ij")


@pytest.mark.parametrize("n", [1, 3], ids=lambda n: f"n{n}")
def test_taylor_green_vortex_decays_as_exp_minus_2_nu_k2_t(n):
    """w = A sin(k x) sin(k y), k = 2 pi n, is a steady Euler flow; unforced it decays as
    exp(-2 nu k^2 t) keeping its shape: every frame equals that field to round-off."""
    X, Y = mesh(32)
    A, nu, t = 1.3, 1e-2, np.array([0.0, 0.25, 0.5, 1.0])
    shape = np.sin(2 * np.pi * n * X) * np.sin(2 * np.pi * n * Y)
    out = ns2d.solve_ns2d(A * shape[None], nu=nu, t=t, dt=1e-2, forcing=None)[0].numpy()
    amplitude = A * np.exp(-2 * nu * (2 * np.pi * n) ** 2 * t)
    assert np.abs(out - amplitude[:, None, None] * shape).max() <= 1e-12 * A
    assert amplitude[-1] < 0.5 * A  # the decay is large enough to be seen


def test_forced_shell_relaxes_to_the_steady_state():
    """FNO's forcing lies on the shell |n|^2 = 2; a state on that shell stays there (no nonlinear
    transfer), so w(t) = w_s + (w0 - w_s) exp(-8 pi^2 nu t) with w_s = f / (8 pi^2 nu): checks the
    forcing's amplitude and sign."""
    X, Y = mesh(32)
    nu, t = 1e-2, np.array([0.0, 0.5, 1.0, 2.0])
    w0 = 0.3 * np.cos(2 * np.pi * (X - Y)) + 0.2 * np.sin(2 * np.pi * (X + Y))
    steady = ns2d.fno_forcing(32) / (8 * np.pi**2 * nu)
    exact = steady + (w0 - steady) * np.exp(-8 * np.pi**2 * nu * t)[:, None, None]
    out = ns2d.solve_ns2d(w0[None], nu=nu, t=t, dt=1e-2)[0].numpy()
    assert np.abs(out - exact).max() <= 1e-10 * np.abs(exact).max()


def test_right_hand_side_against_the_analytic_formula():
    """w = sin(2 pi x) cos(4 pi y) + cos(6 pi x) (two shells: a non-zero u . grad w):
    psi, u = psi_y, v = -psi_x and grad w written out by hand."""
    X, Y = mesh(32)
    s1, c1, s2 = np.sin(2 * np.pi * X), np.cos(2 * np.pi * X), np.sin(4 * np.pi * Y)
    w1, w2 = s1 * np.cos(4 * np.pi * Y), np.cos(6 * np.pi * X)
    k1, k2 = 4 * np.pi**2 * 5, 4 * np.pi**2 * 9  # |k|^2 of the two modes
    u = -4 * np.pi * s1 * s2 / k1
    v = -2 * np.pi * c1 * np.cos(4 * np.pi * Y) / k1 + 6 * np.pi * np.sin(6 * np.pi * X) / k2
    w_x = 2 * np.pi * c1 * np.cos(4 * np.pi * Y) - 6 * np.pi * np.sin(6 * np.pi * X)
    w_y = -4 * np.pi * s1 * s2
    nu = 3e-3
    expected = -(u * w_x + v * w_y) - nu * (k1 * w1 + k2 * w2) + ns2d.fno_forcing(32)
    got = ns2d.vorticity_rhs((w1 + w2)[None], nu=nu)[0].numpy()
    assert np.abs(u * w_x + v * w_y).max() > 0.1  # the advection term is really exercised
    assert np.abs(got - expected).max() <= 1e-12 * np.abs(expected).max()


@pytest.fixture(scope="module")
def random_run():
    """Two random states (FNO's field x 10) at N = 32, nu = 1e-3, forced, 101 frames over [0, 1]."""
    w0 = 10 * ns2d.gaussian_random_field(2, 32, seed=3)
    t = np.linspace(0.0, 1.0, 101)
    return t, ns2d.solve_ns2d(w0, nu=1e-3, t=t, dt=5e-3)


def test_enstrophy_balance(random_run):
    """E = 1/2 <w^2>, P = 1/2 <|grad w|^2>: E(1) - E(0) = int (-2 nu P + <w f>) dt (Simpson over the
    frames). The dealiased nonlinear term conserves enstrophy, so only quadrature and time-stepping
    errors remain; the same balance with nu P in place of 2 nu P misses by tens of percent."""
    t, out = random_run
    nu, f = 1e-3, ns2d.fno_forcing(32)
    E, P, F = (q.numpy() for q in (ns2d.enstrophy(out), ns2d.palinstrophy(out), ns2d.forcing_power(out, f)))
    change = E[:, -1] - E[:, 0]
    scale = simpson(2 * nu * P, x=t, axis=1) + np.abs(simpson(F, x=t, axis=1))
    assert np.all(np.abs(change - simpson(-2 * nu * P + F, x=t, axis=1)) <= 1e-7 * scale)
    assert np.all(np.abs(change - simpson(-nu * P + F, x=t, axis=1)) > 0.1 * np.abs(change))


def test_state_stays_in_the_dealiased_band(random_run):
    _, out = random_run
    K = ns2d.kept_modes(32)
    spectrum = np.abs(np.fft.fft2(out.numpy()))
    n = np.abs(np.fft.fftfreq(32, d=1 / 32))
    outside = (n[:, None] > K) | (n[None, :] > K)
    assert K == 10 and spectrum[..., outside].max() <= 1e-12 * spectrum.max()


def test_fourth_order_in_time():
    w0 = 20 * ns2d.gaussian_random_field(1, 32, seed=4)  # max|u| + max|v| ~ 1.3: the nonlinearity matters
    ref = ns2d.solve_ns2d(w0, nu=1e-3, t=[0.0, 1.0], dt=1.25e-3)[:, -1]
    errors = [float((ns2d.solve_ns2d(w0, nu=1e-3, t=[0.0, 1.0], dt=dt)[:, -1] - ref).norm() / ref.norm())
              for dt in (0.02, 0.01, 0.005)]
    orders = np.log2(np.array(errors[:-1]) / np.array(errors[1:]))
    assert errors[0] > 1e-6 and np.all((orders > 3.7) & (orders < 4.3)), (errors, orders)


def test_gaussian_random_field_is_the_explicit_sum():
    """The field against an explicit double sum over FNO's wave numbers, from the same normal draws."""
    N, alpha, tau = 8, ns2d.FNO_ALPHA, ns2d.FNO_TAU
    sigma = tau ** (0.5 * (2 * alpha - 2))  # FNO: tau^(0.5 (2 alpha - dim))
    field = ns2d.gaussian_random_field(2, N, seed=11)
    xi = np.random.default_rng(11).standard_normal((2, 2, N, N))
    waves = list(range(N // 2)) + list(range(-N // 2, 0))
    X, Y = mesh(N)
    expected = np.zeros((2, N, N))
    for i, nx in enumerate(waves):
        for j, ny in enumerate(waves):
            if nx == ny == 0:
                continue
            coefficient = math.sqrt(2) * sigma * (4 * math.pi**2 * (nx**2 + ny**2) + tau**2) ** (-alpha / 2)
            xi_n = (xi[:, 0, i, j] + 1j * xi[:, 1, i, j]) / math.sqrt(2)  # E|xi_n|^2 = 1
            expected += (coefficient * xi_n[:, None, None] * np.exp(2j * np.pi * (nx * X + ny * Y))).real
    assert np.abs(field - expected).max() <= 1e-12 * np.abs(expected).max()


def test_gaussian_random_field_spectrum_and_streams():
    """E|w_hat_n|^2 = sigma^2 (4 pi^2 |n|^2 + tau^2)^(-alpha) for n != 0, zero mean mode; trajectory i
    does not depend on n, and a Generator passed in continues one stream."""
    N, alpha, tau = 16, ns2d.FNO_ALPHA, ns2d.FNO_TAU
    w = ns2d.gaussian_random_field(400, N, seed=5)
    power = (np.abs(np.fft.fft2(w)) / N**2) ** 2
    n = np.fft.fftfreq(N, d=1 / N)
    expected = tau ** (2 * alpha - 2) * (4 * np.pi**2 * (n[:, None] ** 2 + n[None, :] ** 2) + tau**2) ** (-alpha)
    ratio = power.mean(0) / expected
    assert power[:, 0, 0].max() <= 1e-20
    ratio[0, 0] = 1.0
    assert abs(ratio.mean() - 1) < 0.03 and np.all(np.abs(ratio - 1) < 0.35), (ratio.mean(), ratio.min(), ratio.max())
    assert np.array_equal(ns2d.gaussian_random_field(3, N, seed=5)[:2], ns2d.gaussian_random_field(2, N, seed=5))
    rng = np.random.default_rng(6)
    parts = np.concatenate([ns2d.gaussian_random_field(2, N, seed=rng), ns2d.gaussian_random_field(1, N, seed=rng)])
    assert np.array_equal(parts, ns2d.gaussian_random_field(3, N, seed=6))


def test_generate_resamples_per_axis_and_is_independent_of_batching():
    kw = dict(nu=1e-3, seed=7, N=16, t=[0.0, 0.1, 0.2], dt=0.01, omega_resolutions=(4, 8), progress=False)
    calls = []
    u, omega = ns2d.generate_ns2d(3, resolution=8, batch_size=2, **{**kw, "progress": calls.append})
    full, omega_full = ns2d.generate_ns2d(3, resolution=None, batch_size=3, **kw)
    assert u.shape == (3, 3, 8, 8) and u.dtype == np.float32 and full.shape == (3, 3, 16, 16)
    assert np.array_equal(u, full[..., ::2, ::2])  # node grid: the per-axis cubic resample subsamples exactly
    assert np.array_equal(u, to_resolution(full, 8, spatial_dims=2))
    assert sum(calls) == 3 * 2  # frames done
    assert omega == omega_full and 0 < omega["omega_f_8"] < omega["omega_f_4"] < 1
    w0 = ns2d.gaussian_random_field(3, 16, seed=np.random.default_rng(7))
    frames = ns2d.solve_ns2d(w0, nu=1e-3, t=kw["t"], dt=0.01).numpy()
    assert np.array_equal(full, frames.astype(np.float32))
    assert omega["omega_f_4"] == pytest.approx(unresolved_energy_ratio(frames, 4, spatial_dims=2), rel=1e-12)


@pytest.mark.slow
def test_generate_at_256_a_few_steps():
    """The data set's own grid: 256 x 256 solved, stored at f = 64, omega_f falling with f."""
    u, omega = ns2d.generate_ns2d(2, nu=1e-4, seed=0, t=[0.0, 0.02, 0.04], resolution=64, progress=False)
    assert u.shape == (2, 3, 64, 64) and np.isfinite(u).all()
    assert 0 < omega["omega_f_128"] < omega["omega_f_64"] < omega["omega_f_32"] < 0.1


def test_progress_bar_default(capsys):
    ns2d.generate_ns2d(1, nu=1e-3, seed=0, N=8, t=[0.0, 0.1], dt=0.05, resolution=8, omega_resolutions=(4,))
    assert "ns2d nu=0.001 N=8" in capsys.readouterr().err


# ----------------------------------------------------------------------------- refusals


def test_too_large_a_time_step_is_refused_before_solving():
    w0 = 100 * ns2d.gaussian_random_field(1, 16, seed=0)  # max|u| + max|v| ~ 6
    with pytest.raises(ValueError, match=r"dt = 0.05 is too large for the CFL limit at t = 0: .* Courant number "
                                         r"h \(max\|u\| \+ max\|v\|\) N = [\d.]+ > 1; use dt <= 0.01"):
        ns2d.solve_ns2d(w0, nu=1e-3, t=[0.0, 1.0], dt=0.05)


def test_a_flow_that_speeds_up_past_the_cfl_limit_is_stopped_at_a_frame():
    w0 = 1e-3 * ns2d.gaussian_random_field(1, 16, seed=0)
    with pytest.raises(ValueError, match=r"at t = 1 \(the flow sped up\)"):
        ns2d.solve_ns2d(w0, nu=1e-3, t=[0.0, 1.0, 2.0], dt=0.05, forcing=100 * ns2d.fno_forcing(16))


def test_non_finite_solution_raises():
    w0 = 1e-3 * ns2d.gaussian_random_field(1, 16, seed=0)
    with pytest.raises(FloatingPointError, match=r"NS2D \(nu = 0.001, N = 16\): the solution became non-finite "
                                                 r"between t = 0 and t = 5 .* in trajectory 0 .*no data was written"):
        ns2d.solve_ns2d(w0, nu=1e-3, t=[0.0, 5.0], dt=0.05, forcing=1e4 * ns2d.fno_forcing(16))


@pytest.mark.parametrize("kwargs,error,match", [
    (dict(w0=np.zeros((1, 16, 12))), ValueError, r"w0 must be \[B, N, N\] with B >= 1 and N even and >= 8 .*"
                                                 r"got shape \(1, 16, 12\)"),
    (dict(w0=np.zeros((1, 7, 7))), ValueError, r"N even and >= 8"),
    (dict(w0=np.zeros((16, 16))), ValueError, r"w0 must have rank 3 \(\[B, N, N\]"),
    (dict(w0=np.full((1, 8, 8), np.nan)), ValueError, "w0 must be finite"),
    (dict(w0=np.zeros((1, 8, 8), dtype=np.int64)), TypeError, "w0 must be a real floating-point array"),
    (dict(nu=-1e-3), ValueError, "nu must be >= 0, got -0.001"),
    (dict(dt=0.0), ValueError, "dt must be > 0, got 0"),
    (dict(t=[0.5, 1.0]), ValueError, r"t\[0\] must be 0"),
    (dict(forcing="kolmogorov"), ValueError, "forcing must be 'fno', None or a real array"),
    (dict(forcing=np.zeros((4, 4))), ValueError, r"forcing must be a real array \[N, N\] or \[B, N, N\] with N = 8"),
    (dict(forcing=np.zeros((3, 8, 8))), ValueError, r"one field per trajectory of w0 \(B = 1\), got 3"),
], ids=["not-square", "odd-small", "rank", "nan", "int", "nu", "dt", "t0", "forcing-name", "forcing-shape",
        "forcing-batch"])
def test_solver_bad_input(kwargs, error, match):
    args = {"w0": np.zeros((1, 8, 8)), "nu": 1e-3, "t": [0.0, 0.1], "dt": 0.01, **kwargs}
    with pytest.raises(error, match=match):
        ns2d.solve_ns2d(args.pop("w0"), **args)


@pytest.mark.parametrize("kwargs,match", [
    (dict(N=10 + 1), "N .* must be even, got 11"),
    (dict(N=4), "N must be >= 8, got 4"),
    (dict(resolution=32), "resolution must be in 1..16, got 32"),
    (dict(batch_size=0), "batch_size must be >= 1, got 0"),
    (dict(nu=0.0), "nu must be > 0, got 0"),
], ids=["odd-N", "small-N", "resolution", "batch", "nu0"])
def test_generator_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ns2d.generate_ns2d(1, **{"nu": 1e-3, "seed": 0, "N": 16, "t": [0.0, 0.1], "progress": False, **kwargs})
