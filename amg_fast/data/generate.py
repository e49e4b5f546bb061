"""Build the paper's data sets: solve, write the community layout, store omega_f.

KS -> one LPSDA-layout file with groups `train` and `test`; Burgers -> one PDEBench-layout file
(the last n_test trajectories are the test split); 2D Navier-Stokes (ns2d) -> one PDEBench 2D file
[N, T, X, Y] (the last n_test trajectories are the test split), solved on a grid x grid mesh
(NS2D_OPTIONS) and stored at min(grid, 128) per axis. Each split is drawn from its own seed
(numpy SeedSequence(seed).spawn). omega_f for f in OMEGA_RESOLUTIONS is computed from the
high-resolution training split only, over the frames the paper uses, and stored as root
attributes `omega_f_{f}`. A finished file records its generator arguments; asking again for the
same arguments skips the work. A solution that stops being finite raises a FloatingPointError
naming the PDE, nu, the step and the time (the solvers keep their step: the error says which
settings are stable), and no file is written. ns2d stores omega_f for f in NS2D_OMEGA_RESOLUTIONS,
computed over all saved frames of the training split on the solver's grid.
"""
from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import h5py
import numpy as np
import torch

from amg_fast._checks import ArgumentError, check_seed, resolve_device
from amg_fast._files import check_writable_dir
from amg_fast._machine import available_memory, format_bytes, free_disk
from amg_fast.data import burgers, ks, ns2d
from amg_fast.data.datasets import PAPER_FRAMES
from amg_fast.data.h5 import write_lpsda, write_pdebench
from amg_fast.data.spectral import unresolved_energy_ratio

__all__ = ["generate_dataset", "dataset_path", "split_seeds", "OMEGA_RESOLUTIONS", "PDES", "KS_OPTIONS",
           "check_ks_options", "default_n_test", "omega_table", "DatasetSize", "dataset_size", "MAX_SOLVER_STEPS",
           "SPATIAL_DIMS", "NS2D_OPTIONS", "NS2D_OMEGA_RESOLUTIONS", "NS2D_STORED_MAX", "check_ns2d_options",
           "ns2d_frame_times", "ns2d_step", "default_batch_size"]

OMEGA_RESOLUTIONS = (32, 64, 128)
PDES = ("ks", "burgers", "ns2d")
SPATIAL_DIMS = {"ks": 1, "burgers": 1, "ns2d": 2}  # the spatial axes of each PDE's trajectories
# KS generator options and their defaults (the paper's appendix as we read it); docs/fidelity.md
# measures which reading reproduces the paper's omega_f. Non-default values name the file.
KS_OPTIONS = {"ic_terms": ks.IC_TERMS, "ic_max_wavenumber": ks.IC_MAX_WAVENUMBER, "ic_amplitude": ks.IC_AMPLITUDE,
              "burn_in": 0.0, "t_end": 2.5, "frame_dt": 0.1}
_KS_OPTION_TAGS = {"ic_terms": "terms", "ic_max_wavenumber": "kmax", "ic_amplitude": "amp", "burn_in": "burnin",
                   "t_end": "tend", "frame_dt": "dt"}


def _with_defaults(pde: str, options: dict | None, defaults: dict) -> dict:
    """A generator's options over its defaults (None: the default); unknown keys raise ValueError."""
    options = dict(options or {})
    unknown = sorted(set(options) - set(defaults))
    if unknown:
        raise ValueError(f"unknown {pde} generator option(s) {unknown}; allowed: {sorted(defaults)}")
    return {**defaults, **{k: v for k, v in options.items() if v is not None}}


def check_ks_options(options: dict | None) -> dict:
    """The KS generator options with defaults filled in; unknown keys or bad values raise ValueError."""
    full = _with_defaults("KS", options, KS_OPTIONS)
    for key in ("ic_terms", "ic_max_wavenumber"):
        if isinstance(full[key], bool) or not isinstance(full[key], int) or full[key] < 1:
            raise ArgumentError(f"{key} must be an int >= 1, got {full[key]!r}", key)
    for key in ("ic_amplitude", "t_end", "frame_dt", "burn_in"):
        value = full[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                or value < 0 or (value == 0 and key != "burn_in"):
            raise ArgumentError(f"{key} must be a finite number {'>= 0' if key == 'burn_in' else '> 0'}, got {value!r}",
                                key)
    ks.ks_frame_count(full["t_end"], full["frame_dt"])  # t_end a multiple of frame_dt (nothing allocated)
    return full


# 2D Navier-Stokes generator options and their defaults: the solver's grid per axis (FNO's 256), the last
# frame time (None: FNO's T, 50 at nu = 1e-3 and 30 at nu = 1e-4), the saved frames, evenly spaced over
# [0, t_end] (None: one per time unit, FNO's), the solver's time step (None: 2e-3 x 256 / grid, the
# Courant number of the module's default step at 256). Non-default values name the file.
NS2D_OPTIONS = {"grid": ns2d.NS_N, "t_end": None, "frames": None, "dt": None}
_NS2D_OPTION_TAGS = {"grid": "N", "t_end": "tend", "frames": "frames", "dt": "dt"}
NS2D_STORED_MAX = 128  # the stored grid per axis: min(grid, 128), the largest observation resolution
NS2D_OMEGA_RESOLUTIONS = (16, 32, 64, 128)


def check_ns2d_options(options: dict | None) -> dict:
    """The ns2d generator options with defaults filled in; unknown keys or bad values raise ValueError."""
    full = _with_defaults("ns2d", options, NS2D_OPTIONS)
    grid, frames = full["grid"], full["frames"]
    if isinstance(grid, bool) or not isinstance(grid, int) or grid < 8 or grid % 2:
        raise ArgumentError(f"grid (the ns2d solver's points per axis) must be an even int >= 8, got {grid!r}", "grid")
    if frames is not None and (isinstance(frames, bool) or not isinstance(frames, int) or frames < 2):
        raise ArgumentError(f"frames (the states saved per ns2d trajectory) must be an int >= 2, got {frames!r}",
                            "frames")
    for key in ("t_end", "dt"):
        value = full[key]
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not math.isfinite(value) or value <= 0):
            raise ArgumentError(f"{key} must be a finite number > 0, got {value!r}", key)
    return full


def _ns2d_t_end(nu: float, options: dict) -> float:
    """The last frame time of an ns2d data set (checked options): t_end, else FNO's T for nu."""
    return options["t_end"] if options["t_end"] is not None else ns2d.NS_T_END.get(nu, ns2d.NS_T_END[1e-3])


def _ns2d_frame_count(nu: float, options: dict) -> int:
    """The saved frames of an ns2d data set (checked options), counted without building them."""
    frames = options["frames"]
    return frames if frames is not None else max(2, int(round(_ns2d_t_end(nu, options) / ns2d.FRAME_DT)) + 1)


def ns2d_frame_times(nu: float, options: dict) -> np.ndarray:
    """The saved frame times of an ns2d data set: `frames` evenly spaced over [0, t_end] (checked options)."""
    return np.linspace(0.0, _ns2d_t_end(nu, options), _ns2d_frame_count(nu, options))


def ns2d_step(options: dict) -> float:
    """The ns2d solver's largest time step (checked options): dt, else DEFAULT_DT x NS_N / grid."""
    return options["dt"] if options["dt"] is not None else ns2d.DEFAULT_DT * ns2d.NS_N / options["grid"]


def _ns2d_step_count(nu: float, options: dict) -> int:
    """The solver's time steps per trajectory (checked options): each of the frames - 1 equal intervals
    takes ceil(interval / dt) steps (at least one), as solve_ns2d takes them; counted, not built."""
    intervals = _ns2d_frame_count(nu, options) - 1
    return intervals * max(1, math.ceil(_ns2d_t_end(nu, options) / intervals / ns2d_step(options) - 1e-9))


def _option_tag(options: dict, defaults: dict, tags: dict) -> str:
    """'' for the defaults, else e.g. '_N128_frames11' (the non-default options, in the defaults' order)."""
    return "".join(f"_{tags[k]}{options[k]:g}" for k in defaults if options[k] != defaults[k])


def _ks_tag(options: dict) -> str:
    """'' for the defaults, else e.g. '_terms10_kmax7_tend5' (the non-default options, in KS_OPTIONS order)."""
    return _option_tag(options, KS_OPTIONS, _KS_OPTION_TAGS)


def split_seeds(seed: int) -> dict[str, int]:
    """Independent 32-bit seeds for the train and test splits from one user seed."""
    train, test = np.random.SeedSequence(seed).spawn(2)
    return {"train": int(train.generate_state(1)[0]), "test": int(test.generate_state(1)[0])}


def dataset_path(out_dir, pde: str, nu: float, n_train: int, n_test: int, seed: int,
                 ks_options: dict | None = None, ns2d_options: dict | None = None) -> Path:
    """KS: ks_nu{nu}[_{options}]_train{n}_test{n}_seed{s}.h5 (non-default ks_options named, e.g.
    _terms10_kmax7_tend5); Burgers: PDEBench's name with the same suffix; ns2d:
    ns2d_nu{nu}[_{options}]_train{n}_test{n}_seed{s}.h5 (non-default ns2d_options named, e.g. _N128_frames11)."""
    suffix = f"_train{n_train}_test{n_test}_seed{seed}"
    if pde == "ks":
        name = f"ks_nu{nu:g}{_ks_tag(check_ks_options(ks_options))}{suffix}.h5"
    elif pde == "ns2d":
        name = f"ns2d_nu{nu:g}{_option_tag(check_ns2d_options(ns2d_options), NS2D_OPTIONS, _NS2D_OPTION_TAGS)}{suffix}.h5"
    else:
        name = f"1D_Burgers_Sols_Nu{nu:g}{suffix}.hdf5"
    return Path(out_dir) / name


def default_n_test(pde: str, n_train: int) -> int:
    """KS: 256 (the paper's); Burgers: 10% of the total (2048 train -> 228 test); ns2d: a sixth of the
    total (FNO's 1000 train / 200 test)."""
    return 256 if pde == "ks" else math.ceil(n_train / (5 if pde == "ns2d" else 9))


def default_batch_size(pde: str) -> int:
    """Trajectories solved together: 256 (1D), 16 (ns2d: a batch of 256 x 256 fields is large)."""
    return 16 if pde == "ns2d" else 256


def omega_table(u_train: np.ndarray, pde: str) -> dict[str, float]:
    stride, n_frames = PAPER_FRAMES[pde]
    frames = u_train[:, ::stride][:, :n_frames]
    return {f"omega_f_{f}": unresolved_energy_ratio(frames, f) for f in OMEGA_RESOLUTIONS}


# At most this many solver time steps per trajectory. The default KS set takes 2000 and PDEBench's
# most viscous Burgers file (Nu = 4) at least 1.07e7; a mistyped nu or frame spacing (Burgers
# --nu 1e10: 2.7e16 steps) would run for days instead of being refused.
MAX_SOLVER_STEPS = 5 * 10**7


@dataclass(frozen=True)
class DatasetSize:
    """What generating one data set takes: frames T and grid points N per trajectory, solver time
    steps per trajectory (KS: exact for ETDRK4, the same count bounds Radau's simulated time;
    Burgers: a lower bound from nu), the file's bytes and the generator's peak memory in bytes
    (an estimate: the solutions while solving, the solver's batch, omega_f's transform, the
    float32 copies written)."""

    frames: int
    points: int
    steps: int
    file_bytes: int
    memory_bytes: int


def dataset_size(pde: str, *, nu: float, n_train: int, n_test: int, batch_size: int | None = None,
                 ks_options: dict | None = None, ns2d_options: dict | None = None) -> DatasetSize:
    """The size of generate_dataset's work for these arguments, computed without allocating it
    (ns2d: points = the stored grid's X * Y; steps = the solver's steps per trajectory)."""
    n = n_train + n_test
    batch = min(batch_size or default_batch_size(pde), max(n_train, n_test))
    if pde == "ns2d":
        options = check_ns2d_options(ns2d_options)
        T, N = _ns2d_frame_count(nu, options), options["grid"]  # counted: a huge t_end is refused, not built
        stored, steps = min(N, NS2D_STORED_MAX) ** 2, _ns2d_step_count(nu, options)
        elements = n * T * stored
        # float32 frames of both splits and the writer's concatenated copy, then the solver's batch: its
        # float64 [B, T, N, N] output (and the periodic spline's coefficients, ~6 more copies, when it is
        # resampled), omega_f's FFT of its frames (chunks of 2^22 values: complex128 and two float64
        # arrays), the solver's work arrays and the initial field's draw (~34 [B, N, N] float64 arrays;
        # bench/probe_generate_memory.py measured the sum within 5%).
        omega_states = min(batch * T, max(1, 2**22 // (N * N)))
        transient = batch * T * N * N * 8 * (1 if stored == N * N else 7) + omega_states * N * N * 32 \
            + batch * N * N * 8 * 34
        return DatasetSize(frames=T, points=stored, steps=steps, file_bytes=elements * 4,
                           memory_bytes=elements * 8 + transient)
    if pde == "ks":
        options = check_ks_options(ks_options)
        T, N = ks.ks_frame_count(options["t_end"], options["frame_dt"]), ks.KS_N
        steps = ks.etdrk4_step_count(options["t_end"], options["frame_dt"], options["burn_in"])
        elements = n * T * N
        # float64 solutions of both splits, then the larger of: the solver's batch (its [B, T + 1, N]
        # output and ~16 spectral stage arrays [B, N/2 + 1] complex), omega_f's FFT of the training
        # split (complex128 + two float64 arrays) and the float32 copies the writer stores; the ICs.
        transient = max(batch * (T + 1) * N * 8 + batch * N * 16 * 16, n_train * T * N * 32, elements * 4)
        memory = elements * 8 + transient + max(n_train, n_test) * (N + 3 * options["ic_terms"]) * 8
    else:
        T, N = burgers.pdebench_times().size, burgers.BURGERS_N
        steps = burgers.min_step_count(nu=nu / math.pi, frames=T)
        elements = n * T * N
        omega_frames = PAPER_FRAMES["burgers"][1]
        # float32 solutions of both splits, then the larger of: the solver's batch (float64 [B, T, N]
        # and its float32 copy), omega_f's FFT of the training frames (a float64 copy, complex128,
        # float64) and the concatenated file tensor; the ICs.
        transient = max(batch * T * N * 12, n_train * omega_frames * N * 32, elements * 4)
        memory = elements * 4 + transient + max(n_train, n_test) * N * 8
    return DatasetSize(frames=T, points=N, steps=steps, file_bytes=elements * 4, memory_bytes=memory)


def _describe(pde: str, nu: float, n_train: int, n_test: int, size: DatasetSize) -> str:
    return (f"the {pde} data set nu={nu:g}, n_train={n_train}, n_test={n_test} ({n_train + n_test} trajectories x "
            f"{size.frames} frames x {size.points} points)")


def _count(n: int) -> str:
    """n as '5e+14' (3 digits), also past a float's range (a t_end of 1e308 counts ~1e311 steps)."""
    try:
        return f"{n:.3g}"
    except OverflowError:
        return f"{Decimal(n):.3g}"


def _check_steps(pde: str, nu: float, options: dict, size: DatasetSize) -> None:
    """Refuse a solver run of more than MAX_SOLVER_STEPS steps per trajectory, naming what sets them."""
    if size.steps <= MAX_SOLVER_STEPS:
        return
    if pde == "ns2d":
        raise ArgumentError(
            f"dt={ns2d_step(options):g}, frames over t in [0, {_ns2d_t_end(nu, options):g}]: the NS2D solver "
            f"would take {_count(size.steps)} time steps per trajectory (each frame interval in steps of at most dt); "
            f"allowed: at most {MAX_SOLVER_STEPS:.3g} (a larger dt, a shorter t_end)", "dt", "t_end")
    if pde == "ks":
        dt = min(ks.DEFAULT_DT, options["frame_dt"])
        raise ArgumentError(
            f"frame_dt={options['frame_dt']:g}, t_end={options['t_end']:g}, burn_in={options['burn_in']:g}: the KS "
            f"solver would take {size.steps:.3g} time steps per trajectory (its step is min({ks.DEFAULT_DT:g}, "
            f"frame_dt) = {dt:g}: at least one per frame); allowed: at most {MAX_SOLVER_STEPS:.3g} (a larger frame_dt, "
            f"a shorter t_end or burn_in)", "frame_dt", "t_end", "burn_in")
    dx, cfl = burgers.BURGERS_L / burgers.BURGERS_N, burgers.PDEBENCH_CFL
    largest = MAX_SOLVER_STEPS * cfl * dx * dx * math.pi / burgers.PDEBENCH_T_FINAL
    raise ValueError(
        f"nu={nu:g} (the Burgers file's Nu; the PDE's nu is Nu/pi = {nu / math.pi:.3g}): the solver's step is at most "
        f"cfl dx^2 / nu = {cfl * dx * dx * math.pi / nu:.3g} (cfl {cfl:g}, dx = 1/{burgers.BURGERS_N}), so reaching "
        f"t = {burgers.PDEBENCH_T_FINAL:g} takes at least {size.steps:.3g} time steps per trajectory; allowed: at most "
        f"{MAX_SOLVER_STEPS:.3g} steps, i.e. nu <= {largest:.3g}")


def _check_room(out_dir, what: str, size: DatasetSize) -> None:
    """Refuse a data set whose estimated memory exceeds what this machine has available now, or whose
    file exceeds the free space of out_dir (nothing has been allocated or written yet)."""
    memory = available_memory()
    if memory is not None and size.memory_bytes > memory[0]:
        raise ArgumentError(f"{what} needs about {format_bytes(size.memory_bytes)} of memory to generate (an "
                            f"estimate: the solutions, the solver's batch, omega_f's transform); allowed: at most what "
                            f"this machine has available, {format_bytes(memory[0])} ({memory[1]}); ask for fewer "
                            f"trajectories or frames", "n_train", "n_test")
    free = free_disk(out_dir)
    if size.file_bytes > free:
        raise ValueError(f"{what}: its file would take {format_bytes(size.file_bytes)}; output directory {out_dir} has "
                         f"{format_bytes(free)} free")


def _recorded_args(path: Path) -> dict | None:
    try:
        with h5py.File(path, "r") as f:
            return json.loads(f.attrs["generator_args"])
    except (OSError, KeyError, ValueError):
        return None


def generate_dataset(pde: str, *, nu: float, n_train: int, n_test: int | None = None, seed: int = 0,
                     out_dir="data", device: str = "cpu", method: str = "etdrk4", batch_size: int | None = None,
                     overwrite: bool = False, progress=None, ks_options: dict | None = None,
                     ns2d_options: dict | None = None, on_start=None) -> tuple[Path, dict]:
    """Generate (or find) one data set. Returns (path, summary with wall time, rate, omega_f).

    ks_options (KS only): generator options, keys of KS_OPTIONS (initial-condition terms, largest
    wave number and amplitude; burn-in before the first frame; t_end and frame_dt of the saved
    frames). omega_f is computed over all saved frames of the training split. ns2d_options (ns2d
    only): keys of NS2D_OPTIONS (solver grid, t_end, frames, dt). seed: an integer in [0, 2^32);
    device: "cpu", "cuda", "cuda:N" or "auto"; batch_size: trajectories solved together (default
    default_batch_size(pde)); progress(k): called as trajectories (1D) or frames of trajectories
    (ns2d) are done; on_start(path): called once every check has passed, just before solving starts
    (not when a finished file is reused), e.g. to announce the work.

    Before any allocation or solving, every argument is checked (ValueError naming it, its value
    and what is allowed): the solver's time steps per trajectory against MAX_SOLVER_STEPS and,
    when the file must be generated, dataset_size's memory estimate against what the machine has
    available (amg_fast._machine) and the file's size against out_dir's free disk."""
    if pde not in PDES:
        raise ValueError(f"pde must be one of {PDES}, got {pde!r}")
    if not (isinstance(nu, (int, float)) and math.isfinite(nu) and nu > 0):
        raise ArgumentError(f"nu must be a finite number > 0, got {nu!r}", "nu")
    n_test = default_n_test(pde, n_train) if n_test is None else n_test
    batch_size = default_batch_size(pde) if batch_size is None else batch_size
    for name, value in (("n_train", n_train), ("n_test", n_test), ("batch_size", batch_size)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ArgumentError(f"{name} must be an int >= 1, got {value!r}", name)
    seed = check_seed("seed", seed)
    device = resolve_device(str(device))
    if pde != "ks" and method != "etdrk4":
        raise ArgumentError(f"method applies to KS only ('etdrk4' or 'radau'); {pde} has one solver, got {method!r}",
                            "method")
    if pde != "ks" and ks_options:
        raise ValueError(f"ks_options apply to KS only, got {ks_options!r} for {pde}")
    if pde != "ns2d" and ns2d_options:
        raise ValueError(f"ns2d_options apply to ns2d only, got {ns2d_options!r} for {pde}")
    args = {"pde": pde, "nu": nu, "n_train": n_train, "n_test": n_test, "seed": seed, "method": method}
    options = check_ks_options(ks_options) if pde == "ks" else check_ns2d_options(ns2d_options) if pde == "ns2d" else {}
    if pde == "ns2d":  # one solver: no method recorded
        del args["method"]
        args["ns2d_options"] = options
    elif options and options != KS_OPTIONS:  # recorded only when used: files made before keep matching
        args["ks_options"] = options
    size = dataset_size(pde, nu=nu, n_train=n_train, n_test=n_test, batch_size=batch_size, ks_options=ks_options,
                        ns2d_options=ns2d_options)
    _check_steps(pde, nu, options, size)
    path = dataset_path(out_dir, pde, nu, n_train, n_test, seed, ks_options, ns2d_options)
    check_writable_dir("output directory", out_dir)  # before solving, which can take minutes
    if path.exists() and not overwrite:
        recorded = _recorded_args(path)
        if recorded == args:
            with h5py.File(path, "r") as f:
                omega = {k: float(v) for k, v in f.attrs.items() if k.startswith("omega_f_")}
            return path, {"skipped": True, "path": str(path), **omega}
        raise FileExistsError(f"{path} exists with other generator arguments ({recorded}); "
                              f"remove it, choose another --out, or pass --overwrite")
    _check_room(out_dir, _describe(pde, nu, n_train, n_test, size), size)
    if on_start is not None:
        on_start(path)
    seeds = split_seeds(seed)
    start = time.perf_counter()
    if pde == "ks":
        t = ks.ks_times(options["t_end"], options["frame_dt"])
        splits = {name: ks.generate_ks(n, nu=nu, seed=seeds[name], method=method, batch_size=batch_size,
                                       device=device, progress=progress, t=t, burn_in=options["burn_in"],
                                       ic_terms=options["ic_terms"], ic_max_wavenumber=options["ic_max_wavenumber"],
                                       ic_amplitude=options["ic_amplitude"])
                  for name, n in (("train", n_train), ("test", n_test))}
        omega = omega_table(splits["train"], pde)
        attrs = {"pde": "ks", "generator_args": json.dumps(args), **omega}
        write_lpsda(path, splits, ks.grid(ks.KS_N, ks.KS_L), options["burn_in"] + t, nu=nu, L=ks.KS_L, seeds=seeds,
                    attrs=attrs)
    elif pde == "ns2d":
        omega = _generate_ns2d(path, nu, {"train": n_train, "test": n_test}, seeds, options, args, batch_size, device,
                               progress)
    else:
        parts = [burgers.generate_burgers(n, seed=seeds[name], nu_file=nu, batch_size=batch_size, device=device,
                                          progress=progress) for name, n in (("train", n_train), ("test", n_test))]
        omega = omega_table(parts[0], pde)
        attrs = {"pde": "burgers", "nu": nu / math.pi, "n_test": n_test, "seed_train": seeds["train"],
                 "seed_test": seeds["test"], "generator_args": json.dumps(args), **omega}
        t = np.arange(parts[0].shape[1]) * burgers.PDEBENCH_DT_SAVE
        write_pdebench(path, np.concatenate(parts), burgers.grid(burgers.BURGERS_N, burgers.BURGERS_L), t,
                       nu_file=nu, attrs=attrs)
    wall = time.perf_counter() - start
    return path, {"skipped": False, "path": str(path), "wall_time_s": wall,
                  "trajectories_per_s": (n_train + n_test) / wall, **omega}


def _generate_ns2d(path: Path, nu: float, counts: dict[str, int], seeds: dict[str, int], options: dict, args: dict,
                   batch_size: int, device, progress) -> dict[str, float]:
    """Solve both splits on the options' grid, write the PDEBench 2D file (train then test, n_test
    stored) at min(grid, NS2D_STORED_MAX) per axis; returns the training split's omega_f."""
    t, N = ns2d_frame_times(nu, options), options["grid"]
    stored, dt = min(N, NS2D_STORED_MAX), ns2d_step(options)
    parts, omegas = [], []
    for name, n in counts.items():
        u, omega = ns2d.generate_ns2d(n, nu=nu, seed=seeds[name], N=N, t=t, dt=dt, resolution=stored,
                                      omega_resolutions=NS2D_OMEGA_RESOLUTIONS, batch_size=batch_size, device=device,
                                      progress=progress if progress is not None else False)
        parts.append(u)
        omegas.append(omega)
    attrs = {"pde": "ns2d", "nu": nu, "n_test": counts["test"], "seed_train": seeds["train"], "seed_test": seeds["test"],
             "solver_grid": N, "solver_dt": dt, "generator_args": json.dumps(args), **omegas[0]}
    x = ns2d.grid(stored)
    write_pdebench(path, np.concatenate(parts), x, t, y=x, attrs=attrs)
    return omegas[0]
