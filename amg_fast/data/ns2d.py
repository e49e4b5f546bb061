"""2D incompressible Navier-Stokes in vorticity form on the periodic unit torus (FNO's benchmark).

    w_t + u . grad(w) = nu lap(w) + f,   u = (psi_y, -psi_x),   -lap(psi) = w,   on [0, 1)^2 periodic,

sampled on the node grid x_i = i / N, y_j = j / N; fields are [..., X, Y] (X the first spatial
axis, numpy/torch meshgrid indexing "ij"). f is FNO's forcing 0.1 (sin 2 pi (x + y) + cos 2 pi (x + y))
and the initial vorticity FNO's Gaussian random field (gaussian_random_field).

Scheme (all trajectories of a batch together, torch float64 on the state's device, CPU or CUDA):
- pseudo-spectral: the Poisson solve and the derivatives in Fourier space (rfft2 over the last two
  axes), the product u . grad(w) on the grid;
- 2/3 dealiasing: only the modes with |n_x|, |n_y| <= K = (N - 1) // 3 (K < N/3) are kept, in the
  nonlinear term and in the state itself: the initial vorticity and the forcing are projected onto
  them. The product of two such fields aliases only onto modes outside the band, so the nonlinear
  term is the exact Galerkin truncation; it conserves enstrophy, and the enstrophy balance
  d/dt (1/2 <w^2>) = -2 nu (1/2 <|grad w|^2>) + <w f> holds up to the time-stepping error;
- viscosity exactly, through the integrating factor exp(-nu |k|^2 t) (k = 2 pi n), and advection
  plus forcing by the classical fourth-order Runge-Kutta scheme on the transformed variable
  (IF-RK4 in the form of Kassam & Trefethen 2005); FNO's generator uses Crank-Nicolson for the
  viscosity and forward Euler for the rest, at dt = 1e-4;
- a fixed step: each output interval takes ceil(interval / dt) equal steps h <= dt. The Courant
  number h (max|u| + max|v|) N must stay <= CFL_LIMIT = 1 (RK4's stability bound for the
  advection of the kept modes is ~1.35); it is checked on the initial state (a too large dt is
  refused before any work) and at every output frame.

Reads top to bottom: constants and validation -> grid, forcing, initial conditions -> spectral
operators and right-hand side -> solver -> diagnostics -> data-set generator.
"""
from __future__ import annotations

import math
from typing import Callable, NamedTuple

import numpy as np
import torch
from tqdm import tqdm

from amg_fast._checks import ArgumentError, check_int_range, check_rank
from amg_fast.data._arrays import as_torch_real
from amg_fast.data.burgers import _as_times, _check_real_number
from amg_fast.data.resample import to_resolution
from amg_fast.data.spectral import unresolved_energy_ratio_per_state

__all__ = ["grid", "fno_forcing", "gaussian_random_field", "kept_modes", "vorticity_rhs", "solve_ns2d",
           "velocity", "enstrophy", "palinstrophy", "forcing_power", "ns2d_times", "generate_ns2d",
           "NS_N", "NS_VISCOSITIES", "NS_T_END", "DEFAULT_DT", "CFL_LIMIT", "RESOLUTIONS", "FNO_ALPHA", "FNO_TAU"]

NS_N = 256                          # solver grid (FNO's data generator)
NS_VISCOSITIES = (1e-3, 1e-4)       # FNO's nu = 1e-3 (T = 50) and 1e-4 (T = 30) data sets
NS_T_END = {1e-3: 50.0, 1e-4: 30.0}
FRAME_DT = 1.0                      # one saved frame per unit time, as FNO records
FNO_ALPHA, FNO_TAU = 2.5, 7.0       # FNO's GaussianRF(2, s, alpha=2.5, tau=7)
FORCING_AMPLITUDE = 0.1
DEFAULT_DT = 2e-3
CFL_LIMIT = 1.0
RESOLUTIONS = (32, 64, 128)         # the observation resolutions f per axis


def _as_field(name: str, value) -> torch.Tensor:
    """value: torch tensor (real float, any device) or numpy array [B, N, N] -> float64 tensor."""
    value = as_torch_real(name, value, "[B, N, N]")
    check_rank(name, value, 3, "[B, N, N]: a batch of vorticity fields on the N x N grid")
    B, X, Y = value.shape
    if B < 1 or X != Y or X < 8 or X % 2:
        raise ValueError(f"{name} must be [B, N, N] with B >= 1 and N even and >= 8 (a square grid), got shape "
                         f"{tuple(value.shape)}")
    w = value.detach().to(torch.float64)
    if not bool(torch.isfinite(w).all()):
        raise ValueError(f"{name} must be finite, got NaN or inf entries")
    return w


def _check_grid_size(N) -> int:
    N = check_int_range("N", int(N) if isinstance(N, np.integer) else N, 8)
    if N % 2:
        raise ValueError(f"N (grid points per axis) must be even, got {N}")
    return N


# ----------------------------------------------------------------------------- grid, forcing, initial conditions


def grid(N: int) -> np.ndarray:
    """The node grid x_i = i / N of the unit torus, i = 0..N-1 -> float64 [N] (the same along y)."""
    return np.arange(_check_grid_size(N)) / N


def fno_forcing(N: int) -> np.ndarray:
    """FNO's forcing f(x, y) = 0.1 (sin 2 pi (x + y) + cos 2 pi (x + y)) on grid(N) x grid(N) -> float64 [N, N]."""
    x = grid(N)
    phase = 2 * np.pi * (x[:, None] + x[None, :])
    return FORCING_AMPLITUDE * (np.sin(phase) + np.cos(phase))


def gaussian_random_field(n: int, N: int = NS_N, *, seed, alpha: float = FNO_ALPHA, tau: float = FNO_TAU,
                          sigma: float | None = None) -> np.ndarray:
    """FNO's Gaussian random field (its GaussianRF in 2D) on grid(N) x grid(N) -> float64 [n, N, N].

    w(x) = Re sum_n sqrt(2) sigma (4 pi^2 |n|^2 + tau^2)^(-alpha/2) xi_n exp(2 pi i n . x), summed over
    the N x N DFT wave numbers n (per axis 0..N/2-1, -N/2..-1), without the mean mode n = 0, with
    independent complex standard normals xi_n (E|xi|^2 = 1) and sigma = tau^(alpha - 1) (FNO's
    default tau^(0.5 (2 alpha - d)) for d = 2). The field has mean 0 and covariance
    E[w(x) w(x')] = sum_n sigma^2 (4 pi^2 |n|^2 + tau^2)^(-alpha) cos(2 pi n . (x - x')).
    seed: an int or a numpy Generator (drawn from in place, so consecutive calls continue one
    stream); trajectory i does not depend on n. FNO draws with torch's generator: the distribution
    is the same, the samples are not.
    """
    n, N = check_int_range("n", n, 1), _check_grid_size(N)
    alpha = _check_real_number("alpha", alpha, low=1.0, low_open=True)
    tau = _check_real_number("tau", tau, low=0.0, low_open=True)
    sigma = tau ** (alpha - 1.0) if sigma is None else _check_real_number("sigma", sigma, low=0.0, low_open=True)
    rng = np.random.default_rng(seed)
    xi = rng.standard_normal((n, 2, N, N))  # one row per trajectory: real and imaginary parts
    wave = np.fft.fftfreq(N, d=1.0 / N)
    sqrt_eig = math.sqrt(2.0) * sigma * (4 * np.pi**2 * (wave[:, None] ** 2 + wave[None, :] ** 2) + tau**2) ** (-alpha / 2)
    sqrt_eig[0, 0] = 0.0
    coefficients = sqrt_eig * (xi[:, 0] + 1j * xi[:, 1]) / math.sqrt(2.0)
    return np.fft.ifft2(coefficients, norm="forward").real  # norm="forward": the plain sum over n


# ----------------------------------------------------------------------------- spectral operators


def kept_modes(N: int) -> int:
    """K = (N - 1) // 3: the 2/3 rule keeps the modes with |n_x|, |n_y| <= K (K < N/3)."""
    return (_check_grid_size(N) - 1) // 3


class _Operators(NamedTuple):
    """Fourier-space factors on the rfft2 grid [N, N//2 + 1] (x full, y half), on one device."""

    ikx: torch.Tensor       # 2 pi i n_x (complex128)
    iky: torch.Tensor       # 2 pi i n_y (complex128)
    lap: torch.Tensor       # -|k|^2 = -4 pi^2 |n|^2 (float64)
    inv_neg_lap: torch.Tensor  # 1 / (4 pi^2 |n|^2), 0 for n = 0: psi_hat = w_hat * inv_neg_lap
    mask: torch.Tensor      # 1 on the kept modes, else 0 (float64)


def _operators(N: int, device) -> _Operators:
    nx = torch.fft.fftfreq(N, d=1.0 / N, dtype=torch.float64, device=device)[:, None]
    ny = torch.fft.rfftfreq(N, d=1.0 / N, dtype=torch.float64, device=device)[None, :]
    k2 = 4 * math.pi**2 * (nx**2 + ny**2)
    inv = torch.where(k2 > 0, 1.0 / torch.where(k2 > 0, k2, 1.0), 0.0)
    K = kept_modes(N)
    mask = ((nx.abs() <= K) & (ny <= K)).to(torch.float64)
    return _Operators(2j * math.pi * nx, 2j * math.pi * ny, -k2, inv, mask)


def _advection_hat(w_hat: torch.Tensor, ops: _Operators, N: int) -> torch.Tensor:
    """The dealiased transform of u . grad(w), w_hat [B, N, N//2+1] -> [B, N, N//2+1]."""
    psi_hat = w_hat * ops.inv_neg_lap
    q, v, w_x, w_y = torch.fft.irfft2(torch.stack([ops.iky * psi_hat, -ops.ikx * psi_hat, ops.ikx * w_hat,
                                                   ops.iky * w_hat]), s=(N, N))
    return ops.mask * torch.fft.rfft2(q * w_x + v * w_y)


def _forcing_hat(forcing, N: int, ops: _Operators, device) -> torch.Tensor:
    """forcing "fno" | None | real [N, N] or [B, N, N] -> its kept modes, complex [(B,) N, N//2+1]."""
    if forcing is None:
        return torch.zeros((), dtype=torch.complex128, device=device)
    if isinstance(forcing, str):
        if forcing != "fno":
            raise ValueError(f"forcing must be 'fno', None or a real array [N, N], got {forcing!r}")
        forcing = fno_forcing(N)
    f = torch.as_tensor(forcing, dtype=torch.float64, device=device) if not isinstance(forcing, torch.Tensor) \
        else forcing.detach().to(device=device, dtype=torch.float64)
    if f.dim() not in (2, 3) or tuple(f.shape[-2:]) != (N, N):
        raise ValueError(f"forcing must be a real array [N, N] or [B, N, N] with N = {N}, got shape {tuple(f.shape)}")
    if not bool(torch.isfinite(f).all()):
        raise ValueError("forcing must be finite, got NaN or inf entries")
    return ops.mask * torch.fft.rfft2(f)


def vorticity_rhs(w, *, nu: float, forcing="fno") -> torch.Tensor:
    """dw/dt = -u . grad(w) + nu lap(w) + f of the semi-discrete scheme, on the grid.

    w: [B, N, N] (torch or numpy, real); forcing: "fno" (default), None (unforced) or a real array
    [N, N] / [B, N, N]. w and f are first projected onto the kept modes (as the solver does).
    Returns float64 [B, N, N] on w's device.
    """
    w = _as_field("w", w)
    nu = _check_real_number("nu", nu, low=0.0)
    N = w.shape[-1]
    ops = _operators(N, w.device)
    w_hat = ops.mask * torch.fft.rfft2(w)
    rhs = -_advection_hat(w_hat, ops, N) + nu * ops.lap * w_hat + _forcing_hat(forcing, N, ops, w.device)
    return torch.fft.irfft2(rhs, s=(N, N))


# ----------------------------------------------------------------------------- solver


def _max_speed(w_hat: torch.Tensor, ops: _Operators, N: int) -> torch.Tensor:
    """max|u| + max|v| per trajectory [B] of the vorticity w_hat [B, N, N//2+1]."""
    psi_hat = w_hat * ops.inv_neg_lap
    q, v = torch.fft.irfft2(torch.stack([ops.iky * psi_hat, -ops.ikx * psi_hat]), s=(N, N))
    return q.abs().amax(dim=(-2, -1)) + v.abs().amax(dim=(-2, -1))


def _check_courant(w_hat, ops, N: int, h: float, dt: float, when: str) -> None:
    speed = float(_max_speed(w_hat, ops, N).max())
    courant = h * speed * N
    if courant > CFL_LIMIT:
        raise ArgumentError(
            f"dt = {dt:g} is too large for the CFL limit {when}: steps of {h:g} with max|u| + max|v| = {speed:.4g} "
            f"on N = {N} give the Courant number h (max|u| + max|v|) N = {courant:.3g} > {CFL_LIMIT:g}; "
            f"use dt <= {CFL_LIMIT / (speed * N):.3g}", "dt")


def solve_ns2d(w0, *, nu: float, t, dt: float = DEFAULT_DT, forcing="fno",
               progress: Callable[[int], object] | None = None) -> torch.Tensor:
    """Solve the vorticity equation from w0 [B, N, N] on grid(N) x grid(N) to the times t.

    w0: torch tensor (any real float dtype and device) or numpy array [B, N, N], N even >= 8;
    nu >= 0; t: output times with t[0] == 0, strictly increasing; dt > 0: the largest time step
    (each output interval takes ceil(interval / dt) equal steps); forcing: "fno" (default), None,
    or a real array [N, N] / [B, N, N]. progress(k), if given, is called with k = B after each output
    frame (frames of trajectories done). Returns float64 [B, len(t), N, N] on w0's device (CPU for
    numpy input); frame 0 is w0 projected onto the kept modes (module docstring).
    Raises ValueError when dt breaks the CFL limit (on w0, before solving, or at a later frame) and
    FloatingPointError when the solution stops being finite.
    """
    w = _as_field("w0", w0)
    nu = _check_real_number("nu", nu, low=0.0)
    dt = _check_real_number("dt", dt, low=0.0, low_open=True)
    times = _as_times(t)
    B, N = w.shape[0], w.shape[-1]
    ops = _operators(N, w.device)
    f_hat = _forcing_hat(forcing, N, ops, w.device)
    if f_hat.dim() == 3 and f_hat.shape[0] != B:
        raise ValueError(f"forcing [B, N, N] must hold one field per trajectory of w0 (B = {B}), got {f_hat.shape[0]}")
    w_hat = ops.mask * torch.fft.rfft2(w)
    out = w.new_empty((B, times.size, N, N))
    out[:, 0] = torch.fft.irfft2(w_hat, s=(N, N))
    intervals = np.diff(times)
    if intervals.size:
        first = intervals[0] / max(1, math.ceil(intervals[0] / dt - 1e-9))
        _check_courant(w_hat, ops, N, first, dt, "at t = 0")

    def rhs(v_hat):
        return f_hat - _advection_hat(v_hat, ops, N)

    for i, interval in enumerate(intervals):
        steps = max(1, math.ceil(interval / dt - 1e-9))  # tolerance: 1 / 1e-3 = 1000.0000000000001
        h = interval / steps
        half = torch.exp(0.5 * h * nu * ops.lap)  # the integrating factor over h / 2
        full = half * half
        for _ in range(steps):
            a = h * rhs(w_hat)
            b = h * rhs(half * (w_hat + 0.5 * a))
            c = h * rhs(half * w_hat + 0.5 * b)
            d = h * rhs(full * w_hat + half * c)
            w_hat = full * w_hat + (full * a + 2 * half * (b + c) + d) / 6
        out[:, i + 1] = torch.fft.irfft2(w_hat, s=(N, N))
        finite = torch.isfinite(out[:, i + 1]).flatten(1).all(dim=1)
        if not bool(finite.all()):
            raise FloatingPointError(
                f"NS2D (nu = {nu:g}, N = {N}): the solution became non-finite between t = {times[i]:.6g} and "
                f"t = {times[i + 1]:.6g} (steps of {h:g}) in trajectory {int((~finite).nonzero()[0, 0])} of the batch; "
                "use a smaller dt (the CFL limit is checked at the output frames only); no data was written")
        if i + 1 < intervals.size:
            _check_courant(w_hat, ops, N, h, dt, f"at t = {times[i + 1]:.6g} (the flow sped up)")
        if progress is not None:
            progress(B)
    return out


# ----------------------------------------------------------------------------- diagnostics


def velocity(w) -> torch.Tensor:
    """The velocity (u, v) = (psi_y, -psi_x) of the vorticity w [..., N, N] -> float64 [2, ..., N, N]."""
    w = torch.as_tensor(w, dtype=torch.float64)
    N = w.shape[-1]
    ops = _operators(N, w.device)
    psi_hat = torch.fft.rfft2(w) * ops.inv_neg_lap
    return torch.fft.irfft2(torch.stack([ops.iky * psi_hat, -ops.ikx * psi_hat]), s=(N, N))


def enstrophy(w) -> torch.Tensor:
    """1/2 <w^2> (the mean over the torus) per state: w [..., N, N] -> float64 [...]."""
    w = torch.as_tensor(w, dtype=torch.float64)
    return 0.5 * w.square().mean(dim=(-2, -1))


def palinstrophy(w) -> torch.Tensor:
    """1/2 <|grad w|^2> per state, spectrally: w [..., N, N] -> float64 [...]."""
    w = torch.as_tensor(w, dtype=torch.float64)
    N = w.shape[-1]
    ops = _operators(N, w.device)
    w_hat = torch.fft.rfft2(w)
    w_x, w_y = torch.fft.irfft2(torch.stack([ops.ikx * w_hat, ops.iky * w_hat]), s=(N, N))
    return 0.5 * (w_x.square() + w_y.square()).mean(dim=(-2, -1))


def forcing_power(w, forcing) -> torch.Tensor:
    """<w f> per state (the forcing's enstrophy input): w [..., N, N], forcing [N, N] -> float64 [...]."""
    w = torch.as_tensor(w, dtype=torch.float64)
    return (w * torch.as_tensor(forcing, dtype=torch.float64, device=w.device)).mean(dim=(-2, -1))


# ----------------------------------------------------------------------------- data set


def ns2d_times(nu: float, frame_dt: float = FRAME_DT) -> np.ndarray:
    """Frame times 0, frame_dt, ..., T (FNO's T: 50 for nu = 1e-3, 30 for nu = 1e-4; 50 otherwise)."""
    t_end = NS_T_END.get(nu, NS_T_END[1e-3])
    frame_dt = _check_real_number("frame_dt", frame_dt, low=0.0, low_open=True)
    return np.arange(int(round(t_end / frame_dt)) + 1) * frame_dt


def generate_ns2d(n: int, *, nu: float, seed, N: int = NS_N, t=None, dt: float = DEFAULT_DT,
                  resolution: int | None = RESOLUTIONS[-1], omega_resolutions=RESOLUTIONS, batch_size: int = 16,
                  device=None, progress: bool | Callable[[int], object] = True) -> tuple[np.ndarray, dict[str, float]]:
    """n vorticity trajectories from FNO's random field, solved at N x N and stored at resolution x resolution.

    Initial conditions gaussian_random_field(n, N, seed=seed) (one numpy stream: results do not
    depend on batch_size); t: frame times (default ns2d_times(nu)); solved with solve_ns2d (FNO's
    forcing) in batches of batch_size on device (default: CUDA when there is a GPU, else the CPU).
    resolution: the stored grid per axis (None = N), from the N x N solution by the project's
    periodic cubic resample applied per axis (to_resolution(..., spatial_dims=2); on the node grid
    with resolution dividing N this is exact subsampling, u[..., ::N // f, ::N // f], as FNO
    subsamples its 256 x 256 data). omega_resolutions: the f whose omega_f (2D, spatial_dims=2)
    is computed from the N x N frames of all n trajectories.
    progress: True draws a tqdm bar over the n (len(t) - 1) frames, a callable is called with the
    frames done, False draws nothing.
    Returns (u float32 [n, len(t), resolution, resolution], {"omega_f_{f}": float}).
    """
    n, batch_size, N = check_int_range("n", n, 1), check_int_range("batch_size", batch_size, 1), _check_grid_size(N)
    nu = _check_real_number("nu", nu, low=0.0, low_open=True)
    times = ns2d_times(nu) if t is None else _as_times(t)
    store = N if resolution is None else check_int_range("resolution", resolution, 1, N)
    omega_fs = tuple(check_int_range("omega_resolutions entry", int(f), 1) for f in omega_resolutions)
    device = torch.device(device if device is not None else ("cuda" if torch.cuda.is_available() else "cpu"))
    rng = np.random.default_rng(seed)
    out = np.empty((n, times.size, store, store), dtype=np.float32)
    ratios = {f: [] for f in omega_fs}
    bar = tqdm(total=n * (times.size - 1), unit="frame", desc=f"ns2d nu={nu:g} N={N}") if progress is True else None
    update = bar.update if bar is not None else (progress if callable(progress) else None)
    try:
        for start in range(0, n, batch_size):
            count = min(batch_size, n - start)
            w0 = torch.from_numpy(gaussian_random_field(count, N, seed=rng)).to(device)
            frames = solve_ns2d(w0, nu=nu, t=times, dt=dt, progress=update).cpu().numpy()
            for f in omega_fs:
                ratios[f].append(unresolved_energy_ratio_per_state(frames, f, spatial_dims=2).ravel())
            out[start:start + count] = frames if store == N else to_resolution(frames, store, spatial_dims=2)
    finally:
        if bar is not None:
            bar.close()
    return out, {f"omega_f_{f}": float(np.concatenate(ratios[f]).mean()) for f in omega_fs}
