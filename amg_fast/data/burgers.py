"""Viscous Burgers solver and the PDEBench-style 1D Burgers data-set generator.

PDE: u_t + (u^2 / 2)_x = nu u_xx on [0, L), periodic, nu exactly as given (the PDEBench-style
generator passes nu = nu_file / pi, as PDEBench's solver does with its `epsilon`).

Scheme (second-order finite volume, batched in torch float64, states are cell averages on the
cell centres x_j = (j + 1/2) L / N):
- MUSCL reconstruction with the monotonized-central (MC) limiter
  s_j = minmod(2 (u_j - u_{j-1}), (u_{j+1} - u_{j-1}) / 2, 2 (u_{j+1} - u_j)), the limiter
  PDEBench's `VLlimiter(..., alpha=2)` computes;
- local Lax-Friedrichs (Rusanov) flux for f(u) = u^2/2 with a = max(|u^-|, |u^+|) (PDEBench uses
  the Roe speed |u^- + u^+| / 2, which has no entropy fix at sonic points);
- central diffusion flux -nu (u_{j+1} - u_j) / dx;
- SSP-RK2 (Heun) in time (PDEBench: a midpoint predictor-corrector) with a per-trajectory step
  dt = cfl / (max_x |u| / dx + nu / dx^2), cut so that every output time is hit exactly.
  This harmonic combination is <= min(cfl dx / max|u|, cfl dx^2 / nu) and keeps the Courant
  number c and the diffusion number d at c + d <= cfl <= 1/2, where MUSCL-MC + Rusanov + central
  diffusion with forward Euler (hence SSP-RK2) is TVD. The plain min(...) is not: at cfl = 0.5
  with comparable limits (N = 128, nu = 1/128, u0 = sin) max|u| grew from 1 to 1.16. PDEBench
  (CFL = 0.25, dt = CFL min(dx / max|u|, dx^2 / (2 nu))) takes 19 % fewer steps on its data
  (measured: 8420 vs 10387 steps per trajectory to t = 2; frames differ by 2e-5 relative).
  max|u| never grows for viscous Burgers, so a trajectory's dt only grows.

Each trajectory runs on its own clock, so its result does not depend on which other trajectories
share its batch (or on batch_size in generate_burgers). On the CPU a small, cache-sized set of
trajectories is in flight at once and a finished one's slot is refilled with the next; on a GPU
the whole batch is in flight. The time loop is in Python (one host sync per step); every op is
vectorised over trajectories and cells, and `compile=True` runs the step through torch.compile.

Reads top to bottom: grid and validation -> finite-volume right-hand side and time stepper ->
public solver -> PDEBench initial conditions -> data-set generator.
"""
from __future__ import annotations

import math
import warnings
from typing import Callable

import numpy as np
import torch

from amg_fast._checks import check_int_range, check_rank
from amg_fast.data._arrays import as_torch_real

__all__ = [
    "grid", "solve_burgers", "pdebench_initial_conditions", "pdebench_window", "generate_burgers",
    "PDEBENCH_NU_FILE", "BURGERS_N", "BURGERS_L", "PDEBENCH_DT_SAVE", "PDEBENCH_T_FINAL",
    "PAPER_STRIDE", "PDEBENCH_CFL", "pdebench_times", "min_step_count",
]

PDEBENCH_NU_FILE = 0.001  # the "Nu" in PDEBench's file name; the PDE's nu is nu_file / pi
BURGERS_N = 1024          # cells (PDEBench's 1D Burgers files)
BURGERS_L = 1.0           # domain length, [0, 1)
PDEBENCH_DT_SAVE = 0.01   # time between saved frames
PDEBENCH_T_FINAL = 2.0    # 201 frames t = 0, 0.01, ..., 2.0
PDEBENCH_CFL = 0.25       # the CFL number of PDEBench's Burgers config
PAPER_STRIDE = 7          # the paper keeps every 7th frame: 21 frames up to t = 1.4, 20 rollout steps


def grid(N: int, L: float) -> np.ndarray:
    """Cell centres x_j = (j + 0.5) * L / N, j = 0..N-1: numpy float64 [N]."""
    check_int_range("N", N, 1)
    L = _check_real_number("L", L, low=0.0, low_open=True)
    return (np.arange(N, dtype=np.float64) + 0.5) * (L / N)


def pdebench_times() -> np.ndarray:
    """PDEBench's 201 saved times 0, 0.01, ..., 2.0: numpy float64 [201]."""
    steps = int(round(PDEBENCH_T_FINAL / PDEBENCH_DT_SAVE))
    return np.arange(steps + 1, dtype=np.float64) * PDEBENCH_DT_SAVE


# ----------------------------------------------------------------------------- validation


def _check_real_number(name: str, value, *, low: float | None = None, low_open: bool = False,
                       high: float | None = None) -> float:
    """Require a finite real number (not bool) with low <(=) value (<= high); return it as float."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        if not (isinstance(value, torch.Tensor) and value.dim() == 0 and not value.dtype.is_complex
                and value.dtype != torch.bool):
            raise TypeError(f"{name} must be a real number, got {value!r} ({type(value).__name__})")
    v = float(value)
    if not math.isfinite(v):
        raise ValueError(f"{name} must be finite, got {v}")
    if low is not None and (v <= low if low_open else v < low):
        lo = f"> {low:g}" if low_open else f">= {low:g}"
        hi = f" and <= {high:g}" if high is not None else ""
        raise ValueError(f"{name} must be {lo}{hi}, got {v:g}")
    if high is not None and v > high:
        lo = "" if low is None else (f"> {low:g} and " if low_open else f">= {low:g} and ")
        raise ValueError(f"{name} must be {lo}<= {high:g}, got {v:g}")
    return v


def _as_u0(u0) -> torch.Tensor:
    """u0: torch tensor (real float, any device) or numpy array (real float) [B, N] -> float64 tensor."""
    u0 = as_torch_real("u0", u0, "[B, N]")
    check_rank("u0", u0, 2, "[B, N]: batch of cell averages")
    B, N = u0.shape
    if B < 1 or N < 3:
        raise ValueError(f"u0 must have B >= 1 trajectories and N >= 3 cells ([B, N]), got shape {tuple(u0.shape)}")
    u = u0.detach().to(torch.float64)
    if not bool(torch.isfinite(u).all()):
        raise ValueError("u0 must be finite, got NaN or inf entries")
    return u


def _as_times(t) -> np.ndarray:
    """t: 1-D increasing output times with t[0] == 0 (list, numpy or tensor) -> numpy float64."""
    if isinstance(t, torch.Tensor):
        if t.is_complex() or t.dtype == torch.bool:
            raise TypeError(f"t must hold real numbers, got dtype {t.dtype}")
        t = t.detach().cpu().to(torch.float64).numpy()
    try:
        arr = np.asarray(t)
    except Exception as exc:  # ragged nesting and the like
        raise TypeError(f"t must be a 1-D sequence of real times, got {type(t).__name__}") from exc
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)):
        raise TypeError(f"t must be a 1-D sequence of real times, got dtype {arr.dtype}")
    arr = arr.astype(np.float64)
    if arr.ndim != 1 or arr.size < 1:
        raise ValueError(f"t must be 1-D with at least one entry (t[0] = 0), got shape {arr.shape}")
    if not np.isfinite(arr).all():
        raise ValueError("t must be finite, got NaN or inf entries")
    if arr[0] != 0.0:
        raise ValueError(f"t[0] must be 0 (the time of u0), got {arr[0]:g}")
    if arr.size > 1 and not (np.diff(arr) > 0).all():
        i = int(np.argmax(~(np.diff(arr) > 0)))
        raise ValueError(f"t must be strictly increasing, got t[{i}] = {arr[i]:g} >= t[{i + 1}] = {arr[i + 1]:g}")
    return arr


# ----------------------------------------------------------------------------- scheme


def _rhs(u: torch.Tensor, nu_dx: float, inv_dx: float) -> torch.Tensor:
    """Finite-volume right-hand side -(F_{j+1/2} - F_{j-1/2}) / dx. u [B, N] -> [B, N].

    F = Rusanov flux of the MUSCL-MC face states - nu (u_{j+1} - u_j) / dx, with two periodic
    ghost cells per side; nu_dx = nu / dx, inv_dx = 1 / dx. Written to keep the number of eager
    ops (and temporaries) low: the step is op-overhead and memory bound.
    """
    up = torch.cat([u[:, -2:], u, u[:, :2]], dim=1)  # [B, N+4]: column i holds cell i-2
    d = up[:, 1:] - up[:, :-1]                       # [B, N+3]: d[:, i] = u_{i-1} - u_{i-2}
    ad, sd = d.abs(), d.sign()
    # MC slope of cells -1..N: s = sign * min(2|dl|, 2|dr|, |dl + dr| / 2) where sign(dl) ==
    # sign(dr), else 0. With g = sign(dl) + sign(dr) in {-2, 0, 2}:
    # s / 2 = g * min(min(|dl|, |dr|) / 2, |dl + dr| / 8).
    half_s = torch.minimum(torch.minimum(ad[:, :-1], ad[:, 1:]).mul_(0.5),
                           (d[:, :-1] + d[:, 1:]).abs_().mul_(0.125)).mul_(sd[:, :-1] + sd[:, 1:])
    uc = up[:, 1:-1]                                 # cells -1..N
    a = (uc + half_s)[:, :-1]                        # left states at faces -1/2 .. N-1/2
    b = (uc - half_s)[:, 1:]                         # right states at the same faces
    # 4 F = a^2 + b^2 - 2 max(|a|, |b|) (b - a) - 4 nu (u_{j+1} - u_j) / dx
    flux4 = torch.addcmul(a * a, b, b)
    flux4.addcmul_(torch.maximum(a.abs(), b.abs()), b - a, value=-2.0)
    flux4.add_(d[:, 1:-1], alpha=-4.0 * nu_dx)
    return (flux4[:, :-1] - flux4[:, 1:]).mul_(0.25 * inv_dx)


def _ssp_rk2_step(u: torch.Tensor, dt: torch.Tensor, nu_dx: float, inv_dx: float) -> torch.Tensor:
    """Heun / SSP-RK2: u1 = u + dt L(u); u_new = (u + u1 + dt L(u1)) / 2. u [B, N], dt [B, 1]."""
    u1 = torch.addcmul(u, dt, _rhs(u, nu_dx, inv_dx))
    u2 = torch.addcmul(u1, dt, _rhs(u1, nu_dx, inv_dx))
    return u2.add_(u).mul_(0.5)


def _step(u: torch.Tensor, clock: torch.Tensor, t_next: torch.Tensor, cfl: float, inv_dx: float,
          diff_rate: float, nu_dx: float):
    """One SSP-RK2 step per trajectory with dt = cfl / (max|u| / dx + nu / dx^2), cut so as to land
    exactly on t_next. u [b, N]; clock, t_next [b] float64 ->
    (u [b, N], clock [b], hit [b] bool, flags [2] bool = (max|u| was finite everywhere, any hit))."""
    umax = u.abs().amax(dim=1)
    dt_max = cfl / (umax * inv_dx + diff_rate)                  # inf when u == 0 and nu == 0
    remaining = t_next - clock
    hit = remaining <= dt_max
    dt = torch.where(hit, remaining, dt_max)
    u = _ssp_rk2_step(u, dt[:, None], nu_dx, inv_dx)
    clock = torch.where(hit, t_next, clock + dt)
    return u, clock, hit, torch.stack([torch.isfinite(umax).all(), hit.any()])


_compiled: dict[str, Callable] = {}


def _step_fn(compile: bool) -> Callable:
    """The eager _step, or a torch.compile'd copy (all of the step fused into one loop nest) that
    falls back to eager, with a warning, if compiling fails (no C++ compiler, no Triton, ...).

    CPU kernels are compiled single-threaded (cpp.threads = 1): a 16-trajectory step is too small
    for OpenMP to pay off much (5.1 vs 7.4 us per trajectory-step in the best two-thread run
    measured on a 2-core machine), and while another process held the cores the two-thread
    kernels stalled ~25x (2.9 s instead of 0.12 s per trajectory).
    """
    if not compile:
        return _step
    if "step" not in _compiled:
        state: dict[str, Callable] = {}

        def step(*args):
            fn = state.get("fn")
            if fn is not _step:
                try:
                    if fn is None:
                        fn = state["fn"] = torch.compile(_step, options={"cpp.threads": 1})
                    return fn(*args)
                except Exception as exc:  # compilation failure: keep going eagerly
                    warnings.warn(f"amg_fast.data.burgers: torch.compile of the solver step failed "
                                  f"({type(exc).__name__}: {exc}); running eagerly", RuntimeWarning)
                    state["fn"] = _step
            return _step(*args)

        _compiled["step"] = step
    return _compiled["step"]


# Trajectories in flight at once on the CPU: at most this many values per state, so that each
# op's working set stays in L2 and below torch's intra-op threading grain (32768). At N = 1024
# (16 trajectories) this measured ~2x faster per trajectory-step than one batch of 256.
_CPU_SLOT_ELEMENTS = 16384


def solve_burgers(u0, *, L: float, nu: float, t, cfl: float = 0.25, compile: bool = False) -> torch.Tensor:
    """Solve u_t + (u^2/2)_x = nu u_xx on [0, L), periodic, for a batch of initial conditions.

    u0: [B, N] cell averages on grid(N, L): a torch tensor (any real float dtype, CPU or CUDA; the
    result stays on its device) or a numpy float array (result on the CPU).
    L > 0; nu >= 0 (used exactly as given); t: 1-D output times, t[0] == 0, strictly increasing;
    cfl in (0, 0.5]: dt = cfl / (max|u| / dx + nu / dx^2) per trajectory (see the module docstring).
    compile: run the time step through torch.compile (a one-off compile of ~5-25 s, then ~3x
    faster per step on the CPU; falls back to eager with a warning if compiling fails).
    Returns float64 [B, len(t), N] with out[:, 0] = u0. Raises FloatingPointError if the solution
    stops being finite.
    """
    u = _as_u0(u0)
    L = _check_real_number("L", L, low=0.0, low_open=True)
    nu = _check_real_number("nu", nu, low=0.0)
    times = _as_times(t)
    cfl = _check_real_number("cfl", cfl, low=0.0, low_open=True, high=0.5)
    if not isinstance(compile, (bool, np.bool_)):
        raise TypeError(f"compile must be a bool, got {compile!r} ({type(compile).__name__})")

    B, N = u.shape
    T = times.size
    out = torch.empty((B, T, N), dtype=torch.float64, device=u.device)
    out[:, 0] = u
    if T > 1:
        slots = B if u.device.type != "cpu" else max(1, _CPU_SLOT_ELEMENTS // N)
        t_out = torch.as_tensor(times, dtype=torch.float64, device=u.device)
        _integrate(u, t_out, out, slots=slots, step_fn=_step_fn(bool(compile)), L=L, nu=nu, cfl=cfl)
    return out


def min_step_count(*, nu: float, N: int = BURGERS_N, L: float = BURGERS_L, t_end: float = PDEBENCH_T_FINAL,
                   frames: int = 2, cfl: float = PDEBENCH_CFL) -> int:
    """A lower bound on solve_burgers's time steps per trajectory up to t_end, from nu alone: its
    step cfl / (max|u| / dx + nu / dx^2) is at most cfl dx^2 / nu, and each of the frames - 1
    output times is hit by a step of its own. Exact when diffusion dominates (large nu)."""
    dx = L / N
    return max(frames - 1, math.ceil(t_end * nu / (cfl * dx * dx)))


def _integrate(u0: torch.Tensor, t_out: torch.Tensor, out: torch.Tensor, *, slots: int,
               step_fn: Callable, L: float, nu: float, cfl: float) -> None:
    """Advance every row of u0 [B, N] through the output times t_out [T], writing frame i of
    trajectory b into out[b, i] (i >= 1).

    At most `slots` trajectories are in flight; each keeps its own clock, step size and next
    output index, and a finished trajectory's slot is refilled with the next waiting one, so
    the batch stays full and results do not depend on slots. Once none are waiting, finished
    trajectories leave the batch.
    """
    B, N = u0.shape
    T = t_out.numel()
    dev = u0.device
    dx = L / N
    consts = (cfl, 1.0 / dx, nu / (dx * dx), nu / dx)           # cfl, inv_dx, diff_rate, nu_dx
    s = min(slots, B)
    u = u0[:s].clone()
    rows = torch.arange(s, device=dev)                          # trajectory in each slot
    clock = torch.zeros(s, dtype=torch.float64, device=dev)     # its own time
    k = torch.ones(s, dtype=torch.long, device=dev)             # index of its next output time
    n_steps = torch.zeros(s, dtype=torch.long, device=dev)      # time steps it has taken
    waiting = s                                                 # next trajectory to start

    def fail(bad: torch.Tensor, clock: torch.Tensor, taken: torch.Tensor):
        i = int(torch.nonzero(bad)[0, 0])
        raise FloatingPointError(
            f"Burgers (nu = {nu:g}, L = {L:g}, N = {N}, cfl = {cfl:g}): the solution became non-finite in "
            f"trajectory {int(rows[i])} at step {int(taken[i]) + 1} (t = {float(clock[i]):.6g}); "
            "check u0 and nu, or lower cfl; no data was written"
        )

    while True:
        u_new, clock_new, hit, flags = step_fn(u, clock, t_out[k], *consts)
        finite, any_hit = flags.tolist()                        # the one host sync per step
        if not finite:
            fail(~torch.isfinite(u).all(dim=1), clock, n_steps - 1)
        u, clock = u_new, clock_new
        n_steps += 1
        if not any_hit:
            continue
        idx = torch.nonzero(hit)[:, 0]
        frames = u[idx]
        bad = ~torch.isfinite(frames).all(dim=1)
        if bool(bad.any()):
            fail(hit & ~torch.isfinite(u).all(dim=1), clock, n_steps - 1)
        out[rows[idx], k[idx]] = frames
        k = k + hit
        done = k >= T
        if not bool(done.any()):
            continue
        free = torch.nonzero(done)[:, 0]
        n_new = min(free.numel(), B - waiting)
        if n_new > 0:                                           # refill finished slots
            f = free[:n_new]
            u[f] = u0[waiting:waiting + n_new]
            rows[f] = torch.arange(waiting, waiting + n_new, device=dev)
            clock[f] = 0.0
            k[f] = 1
            n_steps[f] = 0
            waiting += n_new
        if n_new < free.numel():                                # nothing left to start: shrink
            keep = k < T
            if not bool(keep.any()):
                return
            u, clock, k, rows, n_steps = u[keep], clock[keep], k[keep], rows[keep], n_steps[keep]


# ----------------------------------------------------------------------------- initial conditions


def pdebench_window(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(windowed [n] bool, xL [n], xR [n]) of PDEBench's init_multi window: one uniform U per
    trajectory drives all three, as PDEBench's single key does (see pdebench_initial_conditions)."""
    u = rng.random(n)
    return u < 0.1, 0.1 + 0.35 * u, 0.55 + 0.35 * u


def pdebench_initial_conditions(n: int, *, N: int = BURGERS_N, L: float = BURGERS_L, seed,
                                k_tot: int = 4, num_choose_k: int = 2) -> np.ndarray:
    """Random initial conditions after PDEBench's `init_multi` (data_gen_NLE/utils.py) as its
    Burgers generator calls it (k_tot = 4). Returns numpy float64 [n, N] on the cell centres xc.

    Per trajectory: `selected` = sum of num_choose_k one-hot draws from 0..k_tot-1 (a wave number
    drawn twice gets weight 2); kk = 2 pi (1..k_tot) * selected / (xc[-1] - xc[0]) -- PDEBench divides
    by xc[-1] - xc[0] = L - dx, not L, so the sines are not exactly L-periodic (u(xc[0]) ==
    u(xc[-1])); reproduced. amp ~ U[0, 1], phs ~ U[0, 2 pi] [k_tot]; u = sum_k amp sin(kk x + phs)
    (unselected k have kk = 0 and add the constant amp sin(phs); reproduced). With probability 0.1
    u -> |u|; then u -> +-u (probability 1/2 each); with probability 0.1 u is multiplied by the
    window 0.5 (tanh((x - xL) / 0.01) - tanh((x - xR) / 0.01)) (absolute coordinates, as in PDEBench,
    whatever L). PDEBench draws the window's condition and both edges from one JAX key with the same
    shape, so one uniform U per trajectory sets all three (reproduced, pdebench_window): windowed iff
    U < 0.1 (its choice(p=[0.9, 0.1]) takes 1 - U > 0.9), xL = 0.1 + 0.35 U, xR = 0.55 + 0.35 U. Every
    window is thus 0.45 wide and starts in [0.1, 0.135), not xL ~ U[0.1, 0.45], xR ~ U[0.55, 0.9]
    independently as the code reads at first sight.
    Randomness: numpy.random.default_rng(seed), drawn in the order above; JAX's random stream (and
    PDEBench's other key reuses, whose draws differ in shape) cannot be reproduced, so the same seed
    does not give PDEBench's ICs, only ICs from the same distribution.
    """
    check_int_range("n", n, 1)
    check_int_range("N", N, 2)
    check_int_range("k_tot", k_tot, 1)
    check_int_range("num_choose_k", num_choose_k, 1)
    L = _check_real_number("L", L, low=0.0, low_open=True)
    rng = np.random.default_rng(seed)
    xc = grid(N, L)

    draws = rng.integers(0, k_tot, size=(n, num_choose_k))
    selected = np.zeros((n, k_tot), dtype=np.float64)
    np.add.at(selected, (np.repeat(np.arange(n), num_choose_k), draws.ravel()), 1.0)
    kk = 2.0 * np.pi * np.arange(1, k_tot + 1) * selected / (xc[-1] - xc[0])  # [n, k_tot]
    amp = rng.uniform(0.0, 1.0, size=(n, k_tot))
    phs = 2.0 * np.pi * rng.uniform(0.0, 1.0, size=(n, k_tot))
    u = np.zeros((n, N), dtype=np.float64)
    for j in range(k_tot):  # k_tot is small: loop over modes, not cells
        u += amp[:, j, None] * np.sin(kk[:, j, None] * xc[None, :] + phs[:, j, None])

    take_abs = rng.random(n) < 0.1
    u[take_abs] = np.abs(u[take_abs])
    u *= rng.choice(np.array([1.0, -1.0]), size=(n, 1))

    windowed, xL, xR = pdebench_window(rng, n)
    trns = 0.01
    win = 0.5 * (np.tanh((xc[None, :] - xL[:, None]) / trns) - np.tanh((xc[None, :] - xR[:, None]) / trns))
    u[windowed] *= win[windowed]
    return u


# ----------------------------------------------------------------------------- data set


_COMPILE_FROM_N = 64  # generate_burgers(compile=None) compiles from this many trajectories on


def generate_burgers(n: int, *, seed, nu_file: float = PDEBENCH_NU_FILE, N: int = BURGERS_N,
                     L: float = BURGERS_L, t=None, batch_size: int = 256, device="cpu",
                     progress: Callable[[int], object] | None = None, cfl: float = PDEBENCH_CFL,
                     compile: bool | None = None) -> np.ndarray:
    """PDEBench-style 1D Burgers trajectories: numpy float32 [n, len(t), N].

    ICs from pdebench_initial_conditions(n, N=N, L=L, seed=seed); nu = nu_file / pi (PDEBench's
    convention); t defaults to the 201 PDEBench frames 0, 0.01, ..., 2.0. Trajectories are solved
    with solve_burgers in batches of batch_size on device (results do not depend on batch_size);
    progress(num_done_in_batch) is called after each batch. cfl = 0.25 as in PDEBench's config.
    compile: torch.compile the time step (~3x faster per step on the CPU after a one-off compile
    of ~5-25 s); None (default) compiles when n >= 64, where that pays for itself.
    """
    check_int_range("n", n, 1)
    check_int_range("batch_size", batch_size, 1)
    nu_file = _check_real_number("nu_file", nu_file, low=0.0)
    if progress is not None and not callable(progress):
        raise TypeError(f"progress must be a callable(num_done) or None, got {type(progress).__name__}")
    times = pdebench_times() if t is None else _as_times(t)
    if compile is None:
        compile = n >= _COMPILE_FROM_N
    device = torch.device(device)
    nu = nu_file / math.pi

    u0 = pdebench_initial_conditions(n, N=N, L=L, seed=seed)
    out = np.empty((n, times.size, N), dtype=np.float32)
    for start in range(0, n, batch_size):
        stop = min(start + batch_size, n)
        sol = solve_burgers(torch.from_numpy(u0[start:stop]).to(device), L=L, nu=nu, t=times,
                            cfl=cfl, compile=compile)
        out[start:stop] = sol.to(torch.float32).cpu().numpy()
        del sol
        if progress is not None:
            progress(stop - start)
    return out
