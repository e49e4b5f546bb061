"""scripts/fidelity.py (docs/fidelity.md): a smoke sweep through train.py, its table, the omega readings."""
import csv
import subprocess
import sys
from pathlib import Path

import numpy as np
from helpers import translating_waves

from amg_fast.data.h5 import write_amg_fast

SCRIPT = Path(__file__).parents[1] / "scripts" / "fidelity.py"


def fidelity(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True)


def test_run_and_table(tmp_path):
    data = tmp_path / "tiny.h5"
    write_amg_fast(data, translating_waves(10, T=4), np.arange(64) / 64, np.arange(4) * 0.1,
                   attrs={"pde": "ks", "n_test": 2})
    stale = tmp_path / "sw" / "ffno_base_e1_seed0"  # a failed run's leftovers: trained again from scratch
    stale.mkdir(parents=True)
    (stale / "train.log").write_text("error: ...")
    proc = fidelity("run", "--out", tmp_path / "sw", "--models", "ffno", "--variants", "base", "norm-inc@tiny",
                    "--seeds", 0, "--epochs", 1, "--data", f"tiny={data}", "--",
                    "--n-train", 8, "--n-test", 2, "--width", 8, "--batch-size", 4, "--res", 16)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2 runs" in proc.stdout
    again = fidelity("run", "--out", tmp_path / "sw", "--models", "ffno", "--variants", "base", "norm-inc@tiny",
                     "--seeds", 0, "--epochs", 1, "--data", f"tiny={data}")
    assert "0 runs" in again.stdout  # finished runs are skipped
    table = fidelity("table", "--out", tmp_path / "sw")
    assert table.returncode == 0, table.stderr
    assert "| ffno | base | 1 | 1 |" in table.stdout and "| ffno | norm-inc@tiny | 1 | 1 |" in table.stdout
    rows = list(csv.DictReader(open(tmp_path / "sw" / "table.csv")))
    assert len(rows) == 2 and {"nrmse", "one_step", "amp25", "train_loss", "test_loss"} <= set(rows[0])


def test_unknown_variant_and_omega_readings(tmp_path):
    proc = fidelity("run", "--out", tmp_path, "--variants", "fourier")
    assert proc.returncode != 0 and "unknown variant 'fourier'" in proc.stderr
    omega = fidelity("omega", "--n", 1, "--nu", 0.1)
    assert omega.returncode == 0, omega.stderr
    assert omega.stdout.count("| 0.1 |") == 8 and "s4ffno IC [0, 5], dt 0.2 (26 frames)" in omega.stdout
