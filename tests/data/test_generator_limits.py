"""Issue 23 item 6 and 9, data side: every size, step, seed and device of the generator is checked
before any allocation or solving, with the limit in the message, and a refusal writes nothing;
trajectories of a bool or complex dtype are refused naming the file. Each test is a row of
docs/reliability.md."""
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
from helpers import translating_waves

from amg_fast._machine import available_memory, format_bytes
from amg_fast.cli import generate as generate_cli
from amg_fast.data import burgers, generate, ks
from amg_fast.data.datasets import TrajectoryDataset
from amg_fast.data.h5 import DataFileError, read_trajectories

ROOT = Path(__file__).parents[2]
SEED_LIMIT = "must be in [0, 2^32) = 0..4294967295, got"

# generate_data.py arguments -> the message (abridged); each run must refuse before any work. The
# messages name the flags typed (the library's refusals name the keyword arguments: frame_dt, grid).
REFUSED = {
    "ks-frame-dt-1e-9": (["--pde", "ks", "--ks-frame-dt", "1e-9"],
                         "--ks-frame-dt=1e-09, --ks-t-end=2.5, --ks-burn-in=0: the KS solver would take 2.5e+09 time "
                         "steps per trajectory (its step is min(0.00125, --ks-frame-dt) = 1e-09: at least one per "
                         "frame); allowed: at most 5e+07 (a larger --ks-frame-dt, a shorter --ks-t-end or --ks-burn-in)"),
    "ks-t-end-not-a-multiple": (["--pde", "ks", "--ks-t-end", "1", "--ks-frame-dt", "0.3"],
                                "--ks-t-end must be a multiple of --ks-frame-dt, got --ks-t-end=1.0, --ks-frame-dt=0.3"),
    "ks-ic-terms-0": (["--pde", "ks", "--ks-ic-terms", "0"], "--ks-ic-terms must be an int >= 1, got 0"),
    "batch-size-0": (["--pde", "ks", "--batch-size", "0"], "--batch-size must be an int >= 1, got 0"),
    "ks-burn-in-1e6": (["--pde", "ks", "--ks-burn-in", "1e6"], "the KS solver would take 8e+08 time steps per trajectory"),
    "n-train-1e12": (["--pde", "ks", "--n-train", "1000000000000"],
                     "the ks data set nu=0.1, --n-train=1000000000000, --n-test=256 (1000000000256 trajectories x 26 "
                     "frames x 512 points) needs about"),
    "ks-frame-dt-1e-5": (["--pde", "ks", "--ks-frame-dt", "1e-5"], "(2304 trajectories x 250001 frames x 512 points) "
                                                                   "needs about 9.78 TiB of memory"),
    "burgers-nu-1e10": (["--pde", "burgers", "--nu", "1e10"],
                        "nu=1e+10 (the Burgers file's Nu; the PDE's nu is Nu/pi = 3.18e+09): the solver's step is at "
                        "most cfl dx^2 / nu = 7.49e-17 (cfl 0.25, dx = 1/1024), so reaching t = 2 takes at least "
                        "2.67e+16 time steps per trajectory; allowed: at most 5e+07 steps, i.e. nu <= 18.7"),
    "seed-negative": (["--pde", "ks", "--seed", "-1"], f"--seed {SEED_LIMIT} -1"),
    "seed-2^32": (["--pde", "ks", "--seed", str(2**32)], f"--seed {SEED_LIMIT} 4294967296"),
    "seed-1e20": (["--pde", "ks", "--seed", str(10**20)], f"seed {SEED_LIMIT} 100000000000000000000"),
    "nu-negative": (["--pde", "ks", "--nu", "-1"], "error: --nu must be a finite number > 0, got -1.0"),  # was: nu must
    "burgers-method-radau": (["--pde", "burgers", "--method", "radau"],
                             "error: --method applies to KS only ('etdrk4' or 'radau'); burgers has one solver, got 'radau'"),
    "device-gpu0": (["--pde", "ks", "--device", "gpu0"], "--device must be 'auto', 'cpu', 'cuda' or 'cuda:N', got 'gpu0'"),
    "device-cuda-without-cuda": (["--pde", "ks", "--device", "cuda"], "device 'cuda': CUDA is not available here"),
    "ns2d-dt-1e-9": (["--pde", "ns2d", "--ns-dt", "1e-9"],
                     "--ns-dt=1e-09, frames over t in [0, 50]: the NS2D solver would take 5e+10 time steps per "
                     "trajectory (each frame interval in steps of at most --ns-dt); allowed: at most 5e+07 (a larger "
                     "--ns-dt, a shorter --ns-t-end)"),
    "ns2d-grid-65536": (["--pde", "ns2d", "--ns-grid", "65536", "--n-train", "8"],
                        "the ns2d data set nu=0.001, --n-train=8, --n-test=2 (10 trajectories x 51 frames x 16384 "
                        "points) needs about"),
    "ns2d-grid-odd": (["--pde", "ns2d", "--ns-grid", "99"],
                      "error: --ns-grid (the ns2d solver's points per axis) must be an even int >= 8, got 99"),
    "ns2d-frames-1": (["--pde", "ns2d", "--ns-frames", "1"],
                      "--ns-frames (the states saved per ns2d trajectory) must be an int >= 2, got 1"),
    "ns2d-ks-option": (["--pde", "ns2d", "--ks-t-end", "5"],  # was "ks_options apply to KS only, got {'t_end': 5.0}"
                       "--ks-t-end: generator options of --pde ks only; got --pde ns2d"),
    "ks-ns2d-option": (["--pde", "ks", "--ns-grid", "32", "--ns-dt", "0.01"],
                       "--ns-grid, --ns-dt: generator options of --pde ns2d only; got --pde ks"),
    # issue 22 review: the default frames (one per time unit) of a huge t_end were built before the step
    # count (a MemoryError traceback at 1e12, numpy's "Maximum allowed size exceeded" at 1e300)
    "ns2d-t-end-1e12": (["--pde", "ns2d", "--ns-t-end", "1e12"],
                        "--ns-dt=0.002, frames over t in [0, 1e+12]: the NS2D solver would take 5e+14 time steps per "
                        "trajectory (each frame interval in steps of at most --ns-dt); allowed: at most 5e+07"),
    "ns2d-t-end-1e300": (["--pde", "ns2d", "--ns-t-end", "1e300"],
                         "frames over t in [0, 1e+300]: the NS2D solver would take 5e+302 time steps per trajectory"),
    "ns2d-t-end-1e308": (["--pde", "ns2d", "--ns-t-end", "1e308"],  # frames beyond a float: tqdm's total overflowed
                         "frames over t in [0, 1e+308]: the NS2D solver would take 5.00e+310 time steps per trajectory"),
    "ns2d-frames-1e8": (["--pde", "ns2d", "--ns-t-end", "1", "--ns-frames", "100000001"],
                        "the NS2D solver would take 1e+08 time steps per trajectory"),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_generate_refuses_before_any_work(tmp_path, capsys, case):
    """In-process main(): exit 2, one `error:` line with the limit, no exception, nothing written
    (formerly: 74 s to 24 GB, MemoryError tracebacks, minutes of solving, a data set for seed 1e20)."""
    if case == "device-cuda-without-cuda" and torch.cuda.is_available():
        pytest.skip("CUDA is available here")
    if case == "ks-frame-dt-1e-5" and (available_memory() or (0,))[0] > 9 * 2**40:
        pytest.skip("this machine has more than 9 TiB available")
    args, message = REFUSED[case]
    assert generate_cli.main([*args, "--out", str(tmp_path / "gen")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and message in err, err  # no progress bar drawn first
    assert not (tmp_path / "gen").exists()


def test_a_refusal_while_solving_names_the_flag(tmp_path, capsys):
    """The 2D solver's Courant check (after the first frames) names --ns-dt; nothing is written. The
    library's message names its keyword argument dt."""
    args = ["--pde", "ns2d", "--ns-grid", "16", "--ns-dt", "1", "--ns-t-end", "2", "--ns-frames", "3", "--n-train", "1",
            "--n-test", "1", "--out", str(tmp_path / "gen")]
    assert generate_cli.main(args) == 2
    err = capsys.readouterr().err.splitlines()[-1]
    assert re.fullmatch(r"error: --ns-dt = 1 is too large for the CFL limit at t = \S+: .*; use --ns-dt <= \S+", err), err
    assert not (tmp_path / "gen").exists()
    with pytest.raises(ValueError, match=r"^dt = 1 is too large for the CFL limit .*; use dt <= "):
        generate.generate_dataset("ns2d", nu=1e-3, n_train=1, n_test=1, out_dir=tmp_path / "api",
                                  ns2d_options={"grid": 16, "dt": 1.0, "t_end": 2.0, "frames": 3})


def test_argument_error_names_flags_only_where_the_message_names_the_argument():
    from amg_fast._checks import ArgumentError

    err = ArgumentError("frames (the states saved) must be >= 2; ns_t_end, t_end=5, dt = 0.1, frame_dt: frames", "frames",
                        "t_end", "dt")
    flags = {"frames": "--ns-frames", "t_end": "--ns-t-end", "grid": "--ns-grid"}  # dt: no flag in this CLI
    assert err.naming(flags) == ("--ns-frames (the states saved) must be >= 2; ns_t_end, --ns-t-end=5, dt = 0.1, "
                                 "frame_dt: --ns-frames")
    assert str(err).startswith("frames (the states saved)") and isinstance(err, ValueError)
    assert ArgumentError("grid must be even", "grid").naming({}) == "grid must be even"
    for path in ("/d/field.h5", "field.h5", "/field/f.h5"):  # a path is never renamed
        assert ArgumentError(f"{path}: field 'x' is not one of its fields", "field").naming({"field": "--field"}) == \
            f"{path}: --field 'x' is not one of its fields"


def test_generate_refusal_in_a_fresh_process_is_quick_and_small(tmp_path):
    """The headline case as a user runs it: --ks-frame-dt 1e-9 is refused with no traceback (the
    frames are counted, never built)."""
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "generate_data.py"), "--pde", "ks", "--ks-frame-dt",
                           "1e-9", "--out", str(tmp_path / "gen")], capture_output=True, text=True,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "allowed: at most 5e+07" in proc.stderr
    assert not (tmp_path / "gen").exists()


def test_memory_and_disk_limits_name_the_estimate_and_what_the_machine_has(tmp_path, monkeypatch):
    """The estimate is compared with what the machine has (here a pretend 1 MiB, then 1 KiB of disk);
    nothing is written. A cached file with the same arguments is found without the check."""
    size = generate.dataset_size("ks", nu=0.1, n_train=2, n_test=1)
    monkeypatch.setattr(generate, "available_memory", lambda: (2**20, "a test's limit"))
    with pytest.raises(ValueError) as err:
        generate.generate_dataset("ks", nu=0.1, n_train=2, n_test=1, out_dir=tmp_path / "gen")
    assert str(err.value) == (
        f"the ks data set nu=0.1, n_train=2, n_test=1 (3 trajectories x 26 frames x 512 points) needs about "
        f"{format_bytes(size.memory_bytes)} of memory to generate (an estimate: the solutions, the solver's batch, "
        "omega_f's transform); allowed: at most what this machine has available, 1 MiB (a test's limit); ask for fewer "
        "trajectories or frames")
    monkeypatch.setattr(generate, "available_memory", lambda: None)  # unknown: the check is skipped
    monkeypatch.setattr(generate, "free_disk", lambda path: 1024)
    with pytest.raises(ValueError, match=rf"its file would take {format_bytes(size.file_bytes)}; output directory "
                                         rf".*gen has 1 KiB free"):
        generate.generate_dataset("ks", nu=0.1, n_train=2, n_test=1, out_dir=tmp_path / "gen")
    assert not (tmp_path / "gen").exists()
    monkeypatch.undo()
    path, first = generate.generate_dataset("ks", nu=0.1, n_train=2, n_test=1, out_dir=tmp_path / "gen")
    monkeypatch.setattr(generate, "available_memory", lambda: (0, "none left"))
    assert generate.generate_dataset("ks", nu=0.1, n_train=2, n_test=1, out_dir=tmp_path / "gen")[1]["skipped"]


@pytest.mark.parametrize("pde", ["ks", "burgers"])
def test_dataset_size_counts_what_the_generator_writes(tmp_path, pde):
    """frames, points and file bytes are those of the file generated (float32 trajectories)."""
    nu = 0.1 if pde == "ks" else 0.001
    options = {"t_end": 0.4, "frame_dt": 0.2} if pde == "ks" else None
    size = generate.dataset_size(pde, nu=nu, n_train=2, n_test=1, ks_options=options)
    path, _ = generate.generate_dataset(pde, nu=nu, n_train=2, n_test=1, out_dir=tmp_path, ks_options=options)
    with h5py.File(path, "r") as f:
        arrays = [f[k] for k in ("train/pde_3-512", "test/pde_3-512")] if pde == "ks" else [f["tensor"]]
        assert sum(a.size * a.dtype.itemsize for a in arrays) == size.file_bytes
        assert {a.shape[1:] for a in arrays} == {(size.frames, size.points)}
    assert size.memory_bytes > size.file_bytes


def test_ns2d_size_and_steps_follow_the_solver(tmp_path, monkeypatch):
    """dataset_size("ns2d") counts the solver's steps (each RK4 step evaluates the advection 4 times),
    the stored frames and points (min(grid, 128) per axis) and the file's bytes."""
    from amg_fast.data import ns2d

    options = {"grid": 16, "t_end": 1.0, "frames": 3, "dt": 0.3}  # two intervals of 0.5: ceil(0.5 / 0.3) = 2 steps each
    size = generate.dataset_size("ns2d", nu=1e-3, n_train=2, n_test=1, ns2d_options=options)
    assert (size.steps, size.frames, size.points) == (4, 3, 16 * 16)
    calls = []
    advection = ns2d._advection_hat
    monkeypatch.setattr(ns2d, "_advection_hat", lambda *a: calls.append(1) or advection(*a))
    path, _ = generate.generate_dataset("ns2d", nu=1e-3, n_train=2, n_test=1, out_dir=tmp_path, ns2d_options=options)
    assert len(calls) == 4 * size.steps * 2  # both splits, one batch each
    with h5py.File(path, "r") as f:
        assert f["tensor"].shape == (3, size.frames, 16, 16) and f["tensor"].size * 4 == size.file_bytes
    big = generate.dataset_size("ns2d", nu=1e-4, n_train=2, n_test=1, ns2d_options={"grid": 256})
    assert (big.frames, big.points, big.steps) == (31, 128 * 128, 15000)  # FNO's T = 30 at dt 2e-3
    assert big.memory_bytes > big.file_bytes


@pytest.mark.parametrize("t_end,frame_dt,burn_in,steps", [
    (2.5, 0.1, 0.0, 2000),       # 25 intervals x 80 steps of the default 0.00125
    (2.5, 0.001, 0.0, 2500),     # a frame spacing below the step: one step per frame
    (0.4, 0.2, 0.5, 400 + 320),  # burn-in 0.5 / 0.00125, then 2 intervals x 160
    (0.999, 0.003, 0.0, 999),    # ceil(0.003 / 0.00125) = 3 steps per interval, 333 intervals
], ids=["default", "frames-below-dt", "burn-in", "uneven"])
def test_ks_step_count_follows_the_solver(t_end, frame_dt, burn_in, steps):
    assert ks.etdrk4_step_count(t_end, frame_dt, burn_in) == steps


def test_ks_frames_are_counted_not_built():
    assert ks.ks_frame_count(2.5, 1e-9) == 2_500_000_001
    assert len(ks.ks_times(2.5, 0.1)) == ks.ks_frame_count(2.5, 0.1) == 26


def test_burgers_step_bound_is_below_the_solver_and_tight_when_diffusion_dominates(monkeypatch):
    """min_step_count never exceeds the steps solve_burgers takes; for a large nu it is within 5%."""
    calls = []
    real_step = burgers._step

    def counted(*args):
        calls.append(1)
        return real_step(*args)

    monkeypatch.setattr(burgers, "_step", counted)
    N, L, t_end, nu = 64, 1.0, 0.05, 0.5
    u0 = 0.1 * np.sin(2 * np.pi * burgers.grid(N, L))[None]
    burgers.solve_burgers(u0, L=L, nu=nu, t=np.linspace(0, t_end, 3))
    bound = burgers.min_step_count(nu=nu, N=N, L=L, t_end=t_end, frames=3)
    assert bound <= len(calls) <= 1.05 * bound + 2
    assert burgers.min_step_count(nu=0.0, frames=201) == 200  # one step per output time at least


@pytest.mark.parametrize("seed,why", [(-1, f"seed {SEED_LIMIT} -1"), (2.5, "seed must be an integer in [0, 2^32), got 2.5"),
                                       (True, "seed must be an integer in [0, 2^32), got True")],
                         ids=["negative", "float", "bool"])
def test_generate_refuses_a_bad_seed_in_the_api(tmp_path, seed, why):
    with pytest.raises(ValueError, match=re.escape(why)):
        generate.generate_dataset("ks", nu=0.1, n_train=2, n_test=1, seed=seed, out_dir=tmp_path / "gen")
    assert not (tmp_path / "gen").exists()


def _raw_amg_fast(path, u):
    with h5py.File(path, "w") as f:
        f["u"], f["x"], f["t"] = u, np.arange(u.shape[2]) / u.shape[2], np.arange(u.shape[1]) * 0.1
        f.attrs.update({"format": "amg_fast", "pde": "ks", "n_test": 4})


def _raw_lpsda(path, u):
    with h5py.File(path, "w") as f:
        g = f.create_group("train")
        g["pde_6-64"], g["x"], g["t"] = u, np.broadcast_to(np.arange(64) / 64, (len(u), 64)), \
            np.broadcast_to(np.arange(6) * 0.1, (len(u), 6))


@pytest.mark.parametrize("layout", ["amg_fast", "lpsda"])
@pytest.mark.parametrize("dtype", [bool, np.complex128, np.dtype("S4")], ids=["bool", "complex", "bytes"])
def test_trajectories_of_a_non_real_dtype_are_refused_naming_the_file(tmp_path, layout, dtype):
    """Formerly a TypeError traceback from the resampler, naming no file."""
    u = translating_waves(16)
    u = (u > 0) if dtype is bool else u.astype(dtype)
    path = tmp_path / f"{layout}.h5"
    (_raw_amg_fast if layout == "amg_fast" else _raw_lpsda)(path, u)
    name = "u" if layout == "amg_fast" else "train/pde_6-64"
    message = rf"{path}: dataset '{name}' has dtype {np.dtype(dtype)}; allowed: real numbers \(a float or integer dtype\)"
    with pytest.raises(DataFileError, match=message):
        TrajectoryDataset(path, 32)
    with pytest.raises(DataFileError, match=message):
        read_trajectories(path)


def test_integer_trajectories_are_still_read(tmp_path):
    path = tmp_path / "int.h5"
    _raw_amg_fast(path, np.round(100 * translating_waves(16)).astype(np.int16))
    u, _ = TrajectoryDataset(path, 32)[0]
    assert u.dtype == torch.float32 and math.isfinite(float(u.abs().max())) and float(u.abs().max()) > 1


def test_available_memory_takes_the_smaller_of_meminfo_and_the_cgroup_limit(monkeypatch):
    from amg_fast import _machine

    assert 0 < available_memory()[0] <= os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")  # this machine
    cgroup = {"/sys/fs/cgroup/memory.max": 4 * 2**30, "/sys/fs/cgroup/memory.current": 2**30}
    monkeypatch.setattr(_machine, "_meminfo_available", lambda: 8 * 2**30)
    monkeypatch.setattr(_machine, "_read_int", cgroup.get)
    assert available_memory() == (3 * 2**30, "the cgroup limit /sys/fs/cgroup/memory.max less its usage")
    cgroup["/sys/fs/cgroup/memory.max"] = None  # "max": no limit
    assert available_memory() == (8 * 2**30, "MemAvailable in /proc/meminfo")


@pytest.mark.parametrize("n,text", [(1023, "1023 B"), (1536, "1.5 KiB"), (2**20 - 1, "1024 KiB"), (1.5e9, "1.4 GiB"),
                                    (477 * 2**50, "477 PiB"), (2**62, "4096 PiB")])
def test_format_bytes(n, text):
    assert format_bytes(n) == text
