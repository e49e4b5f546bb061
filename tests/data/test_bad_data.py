"""Issue 14, data side: no generator or writer stores non-finite data, omega_f refuses NaN states,
malformed split attributes are named, and stale temp files of dead writers are cleaned up.
Each test is a row of docs/reliability.md."""
import os
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
from helpers import translating_waves

from amg_fast._files import atomic_write_text, remove_stale_temps
from amg_fast.data.datasets import TrajectoryDataset
from amg_fast.data.h5 import DataFileError, write_amg_fast, write_lpsda, write_pdebench
from amg_fast.data.ks import solve_ks
from amg_fast.data.spectral import unresolved_energy_ratio

ROOT = Path(__file__).parents[2]


def test_ks_generator_blow_up_is_an_error_and_writes_nothing(tmp_path):
    """generate_data.py --nu 0.001: ETDRK4 is unstable there; the error names PDE, nu, step, time."""
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "generate_data.py"), "--pde", "ks", "--nu", "0.001",
                           "--n-train", "2", "--n-test", "1", "--batch-size", "1", "--out", str(tmp_path / "gen")],
                          capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "error: KS (nu = 0.001, L = 64): the ETDRK4 solution became non-finite at step 129 (t = 0.16125" \
        in proc.stderr and "no data was written" in proc.stderr
    assert not (tmp_path / "gen").exists() or not any((tmp_path / "gen").iterdir())


def test_solve_ks_names_the_first_non_finite_step():
    u0 = np.sin(2 * np.pi * np.arange(64) / 64)[None] * 1e3
    with pytest.raises(FloatingPointError, match=r"KS \(nu = 0.01, L = 64\): .* non-finite at step \d+ \(t = "):
        solve_ks(u0, L=64.0, nu=0.01, t=np.linspace(0, 1.0, 3), dt=0.05)


@pytest.mark.parametrize("writer", ["amg_fast", "pdebench", "lpsda"])
@pytest.mark.parametrize("bad", [np.nan, np.inf, 1e300], ids=["nan", "inf", "beyond-float32"])
def test_writers_refuse_non_finite_data(tmp_path, writer, bad):
    u = translating_waves(2)
    u[1, 2, 3] = bad
    path = tmp_path / "out.h5"
    x, t = np.arange(64) / 64, np.arange(6) * 0.1
    write = {"amg_fast": lambda: write_amg_fast(path, u, x, t),
             "pdebench": lambda: write_pdebench(path, u, x, t, nu_file=0.001),
             "lpsda": lambda: write_lpsda(path, {"train": u}, x, t, nu=0.1, L=1.0, seeds={"train": 0})}[writer]
    if writer == "amg_fast" and bad == 1e300:  # keeps float64: 1e300 is finite there
        write()
        return
    with pytest.raises(DataFileError, match=r"refusing to write .*out.h5: .* holds NaN or Inf values \(first at index "
                                            r"\[1, 2, 3\]\)"):
        write()
    assert list(tmp_path.iterdir()) == []


def test_omega_f_refuses_non_finite_states():
    u = np.ones((3, 64))
    u[1, 5] = np.nan
    with pytest.raises(ValueError, match=r"u holds NaN or Inf values \(1 of 3 states\): omega_f is undefined"):
        unresolved_energy_ratio(u, 32)


def _raw_pdebench(path, u, **attrs):
    with h5py.File(path, "w") as f:
        f["tensor"] = u
        f["x-coordinate"] = (np.arange(u.shape[2]) + 0.5) / u.shape[2]
        f["t-coordinate"] = np.arange(u.shape[1] + 1) * 0.1
        f.attrs.update(attrs)


@pytest.mark.parametrize("n_test", [-1, 17, 2.5], ids=["negative", "above-N", "not-int"])
def test_n_test_attribute_out_of_range_is_named(tmp_path, n_test):
    path = tmp_path / "f.h5"
    _raw_pdebench(path, translating_waves(16), pde="ks", n_test=n_test)
    with pytest.raises(DataFileError, match=rf"f.h5: attribute n_test .* must be an integer in 0..16 \(the file holds "
                                            rf"16 trajectories\), got {n_test}"):
        TrajectoryDataset(path, 32)


def test_file_without_trajectories_is_named(tmp_path):
    path = tmp_path / "empty.h5"
    _raw_pdebench(path, np.zeros((0, 6, 64)), pde="ks")
    with pytest.raises(DataFileError, match=r"empty.h5: tensor holds no data \(shape \(0, 6, 64\), \[N, T, X\]\)"):
        TrajectoryDataset(path, 32)


def test_stale_temp_files_of_dead_writers_are_removed(tmp_path):
    target = tmp_path / "config.json"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = tmp_path / f"config.json.tmp-{dead.stdout.strip()}"
    live = tmp_path / f"config.json.tmp-{os.getppid()}"  # a running process: its write is in flight
    other = tmp_path / "metrics.jsonl.tmp-1234567"
    for path in (stale, live, other):
        path.write_text("partial")
    atomic_write_text(target, "{}\n")
    assert target.read_text() == "{}\n" and not stale.exists() and live.exists() and other.exists()
    assert remove_stale_temps(tmp_path / "metrics.jsonl") == [other]
