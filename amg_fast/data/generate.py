"""Build the paper's data sets: solve, write the community layout, store omega_f.

KS -> one LPSDA-layout file with groups `train` and `test`; Burgers -> one PDEBench-layout file
(the last n_test trajectories are the test split). Each split is drawn from its own seed
(numpy SeedSequence(seed).spawn). omega_f for f in OMEGA_RESOLUTIONS is computed from the
high-resolution training split only, over the frames the paper uses, and stored as root
attributes `omega_f_{f}`. A finished file records its generator arguments; asking again for the
same arguments skips the work. A solution that stops being finite raises a FloatingPointError
naming the PDE, nu, the step and the time (the solvers keep their step: the error says which
settings are stable), and no file is written.
"""
from __future__ import annotations

import json
import math
import time
from pathlib import Path

import h5py
import numpy as np

from amg_fast._files import check_writable_dir
from amg_fast.data import burgers, ks
from amg_fast.data.datasets import PAPER_FRAMES
from amg_fast.data.h5 import write_lpsda, write_pdebench
from amg_fast.data.spectral import unresolved_energy_ratio

__all__ = ["generate_dataset", "dataset_path", "split_seeds", "OMEGA_RESOLUTIONS", "PDES"]

OMEGA_RESOLUTIONS = (32, 64, 128)
PDES = ("ks", "burgers")


def split_seeds(seed: int) -> dict[str, int]:
    """Independent 32-bit seeds for the train and test splits from one user seed."""
    train, test = np.random.SeedSequence(seed).spawn(2)
    return {"train": int(train.generate_state(1)[0]), "test": int(test.generate_state(1)[0])}


def dataset_path(out_dir, pde: str, nu: float, n_train: int, n_test: int, seed: int) -> Path:
    """KS: ks_nu{nu}_train{n}_test{n}_seed{s}.h5; Burgers: PDEBench's name with the same suffix."""
    suffix = f"_train{n_train}_test{n_test}_seed{seed}"
    name = f"ks_nu{nu:g}{suffix}.h5" if pde == "ks" else f"1D_Burgers_Sols_Nu{nu:g}{suffix}.hdf5"
    return Path(out_dir) / name


def default_n_test(pde: str, n_train: int) -> int:
    """KS: 256 (the paper's); Burgers: 10% of the total (2048 train -> 228 test)."""
    return 256 if pde == "ks" else math.ceil(n_train / 9)


def omega_table(u_train: np.ndarray, pde: str) -> dict[str, float]:
    stride, n_frames = PAPER_FRAMES[pde]
    frames = u_train[:, ::stride][:, :n_frames]
    return {f"omega_f_{f}": unresolved_energy_ratio(frames, f) for f in OMEGA_RESOLUTIONS}


def _recorded_args(path: Path) -> dict | None:
    try:
        with h5py.File(path, "r") as f:
            return json.loads(f.attrs["generator_args"])
    except (OSError, KeyError, ValueError):
        return None


def generate_dataset(pde: str, *, nu: float, n_train: int, n_test: int | None = None, seed: int = 0,
                     out_dir="data", device: str = "cpu", method: str = "etdrk4", batch_size: int = 256,
                     overwrite: bool = False, progress=None) -> tuple[Path, dict]:
    """Generate (or find) one data set. Returns (path, summary with wall time, rate, omega_f)."""
    if pde not in PDES:
        raise ValueError(f"pde must be one of {PDES}, got {pde!r}")
    if not (isinstance(nu, (int, float)) and math.isfinite(nu) and nu > 0):
        raise ValueError(f"nu must be a finite number > 0, got {nu!r}")
    n_test = default_n_test(pde, n_train) if n_test is None else n_test
    for name, value in (("n_train", n_train), ("n_test", n_test), ("batch_size", batch_size)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an int >= 1, got {value!r}")
    if pde == "burgers" and method != "etdrk4":
        raise ValueError(f"method applies to KS only ('etdrk4' or 'radau'); Burgers has one solver, got {method!r}")
    args = {"pde": pde, "nu": nu, "n_train": n_train, "n_test": n_test, "seed": seed, "method": method}
    path = dataset_path(out_dir, pde, nu, n_train, n_test, seed)
    check_writable_dir("output directory", out_dir)  # before solving, which can take minutes
    if path.exists() and not overwrite:
        recorded = _recorded_args(path)
        if recorded == args:
            with h5py.File(path, "r") as f:
                omega = {k: float(v) for k, v in f.attrs.items() if k.startswith("omega_f_")}
            return path, {"skipped": True, "path": str(path), **omega}
        raise FileExistsError(f"{path} exists with other generator arguments ({recorded}); "
                              f"remove it, choose another --out, or pass --overwrite")
    seeds = split_seeds(seed)
    start = time.perf_counter()
    if pde == "ks":
        splits = {name: ks.generate_ks(n, nu=nu, seed=seeds[name], method=method, batch_size=batch_size,
                                       device=device, progress=progress)
                  for name, n in (("train", n_train), ("test", n_test))}
        omega = omega_table(splits["train"], pde)
        attrs = {"pde": "ks", "generator_args": json.dumps(args), **omega}
        write_lpsda(path, splits, ks.grid(ks.KS_N, ks.KS_L), ks.KS_TIMES, nu=nu, L=ks.KS_L, seeds=seeds, attrs=attrs)
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
