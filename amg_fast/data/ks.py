"""Kuramoto-Sivashinsky solver and data-set generator (paper appendix, eq. app-ks).

    u_t + u u_x + u_xx + nu u_xxxx = 0 on [0, L), periodic, sampled on x_j = j L / N.

In Fourier space (k = 2 pi n / L) this is v_t = Lk v + N(v) with the linear symbol
Lk = k^2 - nu k^4 and the nonlinear term N(v) = -0.5 i k FFT(u^2).

Two methods:

- "etdrk4" (default): the fourth-order exponential time-differencing Runge-Kutta scheme of Cox &
  Matthews in the form of Kassam & Trefethen (2005): the stiff linear part is integrated exactly,
  the phi-function coefficients are contour means over CONTOUR_POINTS = 32 points on the upper
  half of unit circles around each h Lk (complex128). The nonlinear term is dealiased with the
  2/3 rule (zeroed for n >= N/3). All trajectories of a batch advance together in torch float64
  on u0's device with a fixed step: each output interval takes ceil(interval / dt) equal steps.
- "radau": after the paper's pipeline (LPSDA's generator), one trajectory at a time: method of
  lines with pseudospectral (numpy FFT) derivatives, u_t = -u_xx - nu u_xxxx - u u_x (no
  dealiasing), integrated by scipy.integrate.solve_ivp(method="Radau", atol=rtol=1e-9, t_eval=t).
  One difference: LPSDA's psdiff (scipy.fftpack.diff) zeroes the Nyquist mode of every derivative;
  here only u_x drops it, u_xx and u_xxxx keep it (k^2, k^4 at n = N/2). We pass the analytic dense
  N x N Jacobian (circulant linear part - diag(u_x) - diag(u) D1, D1 the spectral derivative
  matrix), which makes it tractable at N = 512.

Accuracy (L = 64, N = 512, the 26 frames t = 0, 0.1, ..., 2.5, ICs from random_initial_conditions;
error = max over ICs and frames of ||u - u_ref||_2 / ||u_ref||_2 over x). DEFAULT_DT = 0.00125
is the largest of 0.01, 0.005, 0.0025, 0.00125 meeting 1e-6 against dt / 4 for all three
viscosities with margin: on 64 ICs nu = 0.075: 2.5e-7, nu = 0.1: 3.6e-8, nu = 0.125: 1.0e-8
(dt = 0.0025 gives 3.3e-6 at nu = 0.075). Fitted order over dt = 0.0025, 0.00125, 0.000625:
3.8-3.9. tests/data/test_ks.py keeps this study. ETDRK4 vs Radau: nu = 0.125: <= 3e-8,
nu = 0.1: 1.6e-7 to 3.5e-7, nu = 0.075: 3.8e-6 to 6.4e-6 (3 ICs). That gap is the 2/3 rule, not
the time step: modes N/3 <= n <= N/2 still hold ~1e-5 of u at nu = 0.075 (against an N = 1024
reference Radau at N = 512 is within 1e-9, ETDRK4 within the numbers just given).
Speed on 2 CPU cores (idle machine, nu = 0.1): batched ETDRK4 about 10 ms per trajectory at the
default step (generate_ks: 2304 trajectories in about 25 s), Radau about 1 s per trajectory
(0.7 to 1.3 s). torch's two intra-op threads slow down many-fold while other jobs hold a core.
"""
from __future__ import annotations

import math

import numpy as np
import torch
from scipy.integrate import solve_ivp

from amg_fast._checks import ArgumentError, check_int_range, check_rank, check_real_float
from amg_fast.data._arrays import as_numpy_real

__all__ = ["grid", "solve_ks", "random_initial_conditions", "generate_ks", "ks_times", "ks_frame_count",
           "etdrk4_step_count", "METHODS", "DEFAULT_DT", "KS_TIMES", "KS_L", "KS_N", "KS_VISCOSITIES"]

METHODS = ("etdrk4", "radau")
DEFAULT_DT = 0.00125
CONTOUR_POINTS = 32
RADAU_TOL = 1e-9
KS_TIMES = np.linspace(0.0, 2.5, 26)
KS_L = 64.0
KS_N = 512
KS_VISCOSITIES = (0.075, 0.1, 0.125)
IC_TERMS = 21  # i = 0..20 in the paper's initial condition
IC_MAX_WAVENUMBER = 8
IC_AMPLITUDE = 0.5  # A_i ~ U[-0.5, 0.5]


def _check_positive(name: str, value) -> float:
    """Require a finite real number > 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a real number > 0, got {value!r} ({type(value).__name__})")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


def _check_times(t) -> np.ndarray:
    """t (list, numpy or tensor) -> float64 numpy [T], 1-D, t[0] == 0, strictly increasing."""
    t = as_numpy_real("t", t)
    if t.ndim != 1 or t.size == 0:
        raise ValueError(f"t must be 1-D and non-empty (output times [T]), got shape {t.shape}")
    if not np.all(np.isfinite(t)):
        raise ValueError(f"t must be finite, got {t}")
    if t[0] != 0:
        raise ValueError(f"t must start at t[0] == 0 (the initial condition), got t[0] = {t[0]}")
    if np.any(np.diff(t) <= 0):
        raise ValueError(f"t must be strictly increasing, got {t}")
    return t


def _check_count(name: str, value, low: int = 1) -> int:
    """check_int_range that also takes numpy integers (as read from HDF5 attributes)."""
    return check_int_range(name, int(value) if isinstance(value, np.integer) else value, low)


def _as_state(u0) -> torch.Tensor:
    """u0 (torch tensor on any device, or numpy array) [B, N] -> float64 tensor [B, N]."""
    if isinstance(u0, np.ndarray):
        u0 = torch.from_numpy(np.ascontiguousarray(u0))
    elif not isinstance(u0, torch.Tensor):
        raise TypeError(f"u0 must be a torch.Tensor or numpy.ndarray [B, N], got {type(u0).__name__}")
    check_real_float("u0", u0)
    check_rank("u0", u0, 2, "[B, N]: B initial conditions on N grid points")
    if u0.shape[0] < 1 or u0.shape[1] < 2:
        raise ValueError(f"u0 must have B >= 1 and N >= 2 ([B, N]), got shape {tuple(u0.shape)}")
    u0 = u0.detach().to(torch.float64)
    if not bool(torch.isfinite(u0).all()):
        raise ValueError("u0 must be finite, got NaN or inf entries")
    return u0


def grid(N: int, L: float) -> np.ndarray:
    """The KS grid x_j = j L / N, j = 0..N-1 -> float64 [N]."""
    N = _check_count("N", N)
    return np.arange(N) * (_check_positive("L", L) / N)


def solve_ks(u0, *, L: float, nu: float, t, method: str = "etdrk4", dt: float | None = None) -> torch.Tensor:
    """Solve u_t + u u_x + u_xx + nu u_xxxx = 0 (periodic on [0, L)) from u0 [B, N] on grid(N, L).

    u0: torch tensor (any real float dtype and device) or numpy array [B, N]; t: output times [T]
    with t[0] == 0, strictly increasing. method: "etdrk4" (batched, on u0's device, fixed step
    dt, default DEFAULT_DT) or "radau" (scipy, one trajectory at a time; dt must be None).
    Returns float64 [B, T, N] on u0's device (CPU for numpy input); frame 0 is u0.
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    state = _as_state(u0)
    L, nu, t = _check_positive("L", L), _check_positive("nu", nu), _check_times(t)
    if method == "radau":
        if dt is not None:
            raise ValueError(f"dt must be None for method='radau' (adaptive step), got {dt!r}")
        return _solve_radau(state, L, nu, t)
    return _solve_etdrk4(state, L, nu, t, DEFAULT_DT if dt is None else _check_positive("dt", dt))


def _wavenumbers(N: int, L: float, device=None) -> torch.Tensor:
    """k = 2 pi n / L for the rfft modes n = 0..N//2 -> float64 [N//2 + 1]."""
    return torch.arange(N // 2 + 1, dtype=torch.float64, device=device) * (2 * math.pi / L)


def _etdrk4_coefficients(lin: torch.Tensor, g: torch.Tensor, h: float) -> tuple[torch.Tensor, ...]:
    """Kassam-Trefethen coefficients for step h, linear symbol lin [K] and nonlinear factor g [K].

    Returns (E, E2, Q, f1, f2, f3), each [K]: E = exp(h lin), E2 = exp(h lin / 2) (float64) and the
    phi-function combinations Q, f1, f2, f3 (complex128, g folded in) as contour means over
    CONTOUR_POINTS points on unit circles around each h * lin.
    """
    j = torch.arange(1, CONTOUR_POINTS + 1, dtype=torch.float64, device=lin.device)
    r = torch.exp(1j * math.pi * (j - 0.5) / CONTOUR_POINTS)
    z = h * lin[:, None] + r  # [K, M]
    ez = torch.exp(z)

    def contour_mean(numerator: torch.Tensor, power: int) -> torch.Tensor:
        return h * g * (numerator / z**power).mean(dim=1).real

    Q = contour_mean(torch.exp(z / 2) - 1, 1)
    f1 = contour_mean(-4 - z + ez * (4 - 3 * z + z**2), 3)
    f2 = contour_mean(2 + z + ez * (z - 2), 3)
    f3 = contour_mean(-4 - 3 * z - z**2 + ez * (4 - z), 3)
    return torch.exp(h * lin), torch.exp(h * lin / 2), Q, f1, f2, f3


def _solve_etdrk4(u0: torch.Tensor, L: float, nu: float, t: np.ndarray, dt: float) -> torch.Tensor:
    """Batched ETDRK4: u0 float64 [B, N] -> float64 [B, T, N] on u0's device.

    With N(v) = g w(v), w(v) = rfft(irfft(v)^2), g = -0.5 i k zeroed for |n| >= N/3 (2/3 rule),
    one step is a = E2 v + Q N(v), b = E2 v + Q N(a), c = E2 a + Q (2 N(b) - N(v)),
    v <- E v + f1 N(v) + 2 f2 (N(a) + N(b)) + f3 N(c)   (g folded into Q, f1, f2, f3).
    """
    B, N = u0.shape
    k = _wavenumbers(N, L, u0.device)
    g = -0.5j * k * (torch.arange(N // 2 + 1, device=u0.device) < N / 3)

    def w(v: torch.Tensor) -> torch.Tensor:
        return torch.fft.rfft(torch.fft.irfft(v, n=N).square_())

    out = u0.new_empty(B, len(t), N)
    out[:, 0] = u0
    v = torch.fft.rfft(u0)
    steps_done = 0
    for i, interval in enumerate(np.diff(t)):
        steps = _interval_steps(interval, dt)
        E, E2, Q, f1, f2, f3 = _etdrk4_coefficients(k**2 - nu * k**4, g, interval / steps)

        def advance(v):
            E2v, wv = E2 * v, w(v)
            a = torch.addcmul(E2v, Q, wv)
            wa = w(a)
            wb = w(torch.addcmul(E2v, Q, wa))
            wc = w(torch.addcmul(E2 * a, Q, 2 * wb - wv))
            return (E * v).addcmul_(f1, wv).addcmul_(f2, wa + wb, value=2).addcmul_(f3, wc)

        v_start = v
        for _ in range(steps):
            v = advance(v)
        out[:, i + 1] = torch.fft.irfft(v, n=N)
        if not bool(torch.isfinite(out[:, i + 1]).all()):  # one check per output frame
            _etdrk4_blow_up(advance, v_start, steps, steps_done, t[i], interval / steps, nu, L)
        steps_done += steps
    return out


def _etdrk4_blow_up(advance, v, steps: int, steps_done: int, t0: float, h: float, nu: float, L: float):
    """Replay the failed output interval from its start v one step at a time and raise a
    FloatingPointError naming the first step whose state is not finite."""
    for j in range(1, steps + 1):
        v = advance(v)
        bad = ~torch.isfinite(v).all(dim=-1)
        if bool(bad.any()) or j == steps:
            trajectory = int(torch.nonzero(bad)[0, 0]) if bool(bad.any()) else None
            raise FloatingPointError(
                f"KS (nu = {nu:g}, L = {L:g}): the ETDRK4 solution became non-finite at step {steps_done + j} "
                f"(t = {t0 + j * h:.6g}, dt = {h:g})"
                + (f" in trajectory {trajectory} of the batch" if trajectory is not None else "")
                + "; the fixed-step scheme is unstable for this nu: use the paper's nu (0.075, 0.1, 0.125) "
                "or a larger one, a smaller dt, or method='radau'; no data was written")


def _solve_radau(u0: torch.Tensor, L: float, nu: float, t: np.ndarray) -> torch.Tensor:
    """Method of lines + scipy Radau after the paper's pipeline (module docstring: the Nyquist mode
    differs from LPSDA's psdiff), one trajectory at a time: float64 [B, N] -> [B, T, N]."""
    N = u0.shape[1]
    k = _wavenumbers(N, L).numpy()
    lin = k**2 - nu * k**4
    ik = 1j * k
    if N % 2 == 0:
        ik[-1] = 0  # the first derivative of the Nyquist mode is zero for real signals
    eye = np.eye(N)
    linear_matrix = np.fft.irfft(lin[:, None] * np.fft.rfft(eye, axis=0), n=N, axis=0)
    d1 = np.fft.irfft(ik[:, None] * np.fft.rfft(eye, axis=0), n=N, axis=0)

    def rhs(_, u):
        v = np.fft.rfft(u)
        return np.fft.irfft(lin * v, n=N) - u * np.fft.irfft(ik * v, n=N)

    def jacobian(_, u):
        return linear_matrix - np.diag(d1 @ u) - u[:, None] * d1

    out = np.empty((u0.shape[0], len(t), N))
    for b, y0 in enumerate(u0.cpu().numpy()):
        sol = solve_ivp(rhs, (0.0, t[-1]), y0, method="Radau", t_eval=t, atol=RADAU_TOL, rtol=RADAU_TOL,
                        jac=jacobian)
        finite = np.isfinite(sol.y).all(axis=0)
        if not sol.success or not finite.all():
            when = sol.t[np.argmin(finite)] if not finite.all() else sol.t[-1] if sol.t.size else 0.0
            raise FloatingPointError(f"KS (nu = {nu:g}, L = {L:g}): the Radau solution of trajectory {b} failed "
                                     f"after t = {when:.6g} ({sol.message.rstrip('.')}; non-finite states: "
                                     f"{int((~finite).sum())}); no data was written")
        out[b] = sol.y.T
    return torch.from_numpy(out).to(u0.device)


def random_initial_conditions(n: int, *, L: float = KS_L, N: int = KS_N, seed, terms: int = IC_TERMS,
                              max_wavenumber: int = IC_MAX_WAVENUMBER, amplitude: float = IC_AMPLITUDE) -> np.ndarray:
    """The paper's KS initial conditions -> float64 [n, N] on grid(N, L).

    u0(x) = sum_{i=0}^{20} A_i sin(2 pi k_i x / L + phi_i), A_i ~ U[-0.5, 0.5], k_i ~ U{1..8},
    phi_i ~ U[0, 2 pi], independently per trajectory, from numpy.random.default_rng(seed).
    Trajectory i does not depend on n (the first m of n ICs are the m ICs of the same seed).
    terms, max_wavenumber, amplitude change the number of sines (21), the largest k_i (8) and the
    half-width a of A_i ~ U[-a, a] (0.5): the S4FFNO authors' generator (their LPSDA fork) draws
    10 sines with k_i in {1..7} (numpy randint(1, 8) excludes 8); see docs/fidelity.md.
    """
    n, x = _check_count("n", n), grid(N, L)
    terms, max_wavenumber = _check_count("terms", terms), _check_count("max_wavenumber", max_wavenumber)
    amplitude = _check_positive("amplitude", amplitude)
    draws = np.random.default_rng(seed).random((n, 3, terms))  # one row per trajectory
    amplitude = (draws[:, 0] - 0.5) * (2 * amplitude)
    wavenumber = 1 + np.floor(max_wavenumber * draws[:, 1])
    phase = 2 * np.pi * draws[:, 2]
    u0 = np.zeros((n, N))
    for i in range(terms):
        u0 += amplitude[:, i, None] * np.sin(2 * np.pi / L * wavenumber[:, i, None] * x + phase[:, i, None])
    return u0


def ks_frame_count(t_end: float = 2.5, frame_dt: float = 0.1) -> int:
    """T, the number of frames 0, frame_dt, ..., t_end (checked, nothing allocated: a tiny frame_dt
    is refused by the generator's size checks before ks_times builds them)."""
    t_end, frame_dt = _check_positive("t_end", t_end), _check_positive("frame_dt", frame_dt)
    count = t_end / frame_dt
    if abs(count - round(count)) > 1e-9 * max(1.0, count):
        raise ArgumentError(f"t_end must be a multiple of frame_dt, got t_end={t_end}, frame_dt={frame_dt}", "t_end",
                            "frame_dt")
    return int(round(count)) + 1


def ks_times(t_end: float = 2.5, frame_dt: float = 0.1) -> np.ndarray:
    """Frame times 0, frame_dt, ..., t_end (KS_TIMES for the defaults) -> float64 [T]."""
    return np.linspace(0.0, t_end, ks_frame_count(t_end, frame_dt))


def _interval_steps(interval: float, dt: float) -> int:
    """The ETDRK4 steps of one output interval: ceil(interval / dt), at least 1 (a tolerance keeps
    0.1 / 0.01 = 10.000000000000002 at 10 steps)."""
    return max(1, math.ceil(interval / dt - 1e-6))


def etdrk4_step_count(t_end: float = 2.5, frame_dt: float = 0.1, burn_in: float = 0.0, dt: float = DEFAULT_DT) -> int:
    """Time steps per trajectory of generate_ks(method="etdrk4") for these frames: the burn-in
    interval, then every frame interval in ceil(frame_dt / dt) steps (at least one per frame, so the
    step is min(dt, frame_dt)). Computed without building the frames."""
    intervals = ks_frame_count(t_end, frame_dt) - 1
    return (_interval_steps(burn_in, dt) if burn_in > 0 else 0) + intervals * _interval_steps(frame_dt, dt)


def generate_ks(n: int, *, nu: float, seed, L: float = KS_L, N: int = KS_N, t=KS_TIMES, method: str = "etdrk4",
                batch_size: int = 256, device="cpu", progress=None, burn_in: float = 0.0, ic_terms: int = IC_TERMS,
                ic_max_wavenumber: int = IC_MAX_WAVENUMBER, ic_amplitude: float = IC_AMPLITUDE) -> np.ndarray:
    """n KS trajectories from random_initial_conditions(n, L=L, N=N, seed=seed) -> float64 [n, len(t), N].

    Solves batch_size trajectories at a time with solve_ks on device; progress, if given, is
    called with the number of trajectories finished after each batch (e.g. tqdm's update).
    burn_in > 0 integrates that long before the first saved frame (frame j is the state at
    burn_in + t[j]); ic_terms, ic_max_wavenumber, ic_amplitude go to random_initial_conditions.
    """
    _check_count("batch_size", batch_size)
    t = _check_times(t)
    if isinstance(burn_in, bool) or not isinstance(burn_in, (int, float)) or not math.isfinite(burn_in) or burn_in < 0:
        raise ValueError(f"burn_in must be a finite number >= 0, got {burn_in!r}")
    solve_t = np.concatenate([[0.0], burn_in + t]) if burn_in > 0 else t
    u0 = random_initial_conditions(n, L=L, N=N, seed=seed, terms=ic_terms, max_wavenumber=ic_max_wavenumber,
                                   amplitude=ic_amplitude)
    out = np.empty((n, len(t), N))
    for start in range(0, n, batch_size):
        batch = torch.from_numpy(u0[start:start + batch_size]).to(device)
        solved = solve_ks(batch, L=L, nu=nu, t=solve_t, method=method)
        out[start:start + len(batch)] = (solved[:, 1:] if burn_in > 0 else solved).cpu().numpy()
        if progress is not None:
            progress(len(batch))
    return out
