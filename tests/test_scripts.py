"""The README's main job (scripts/quickstart.py) runs and reports what it promises."""
import re
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).parents[1] / "scripts"


def run_script(*args):
    return subprocess.run([sys.executable, str(SCRIPTS / "quickstart.py"), *args], capture_output=True, text=True)


def test_quickstart_prints_shapes_parameters_and_gate():
    proc = run_script("--res", "16", "--batch", "2", "--steps", "3", "--width", "16")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "parameters=" in out
    assert "teacher-forced predictions: (2, 3, 16, 1)" in out
    assert "rollout from u_0 only: (2, 3, 16, 1)" in out
    gates = [float(g) for g in re.findall(r"g-bar = ([\d.]+)", out)]
    assert len(gates) == 2 and all(0.0 < g < 1.0 for g in gates)


@pytest.mark.parametrize("flag,value", [("--res", "0"), ("--steps", "-2")])
def test_quickstart_rejects_bad_sizes(flag, value):
    proc = run_script(flag, value)
    assert proc.returncode == 2 and f"must be an integer >= 1, got {value}" in proc.stderr


@pytest.mark.parametrize("device", ["tpu", "cuda:99"])
def test_quickstart_refuses_a_device_by_name(device):
    """As train.py and evaluate.py: a usage error naming --device and the value, not a traceback."""
    proc = run_script("--device", device)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "argument --device: device " in proc.stderr and f"'{device}'" in proc.stderr, proc.stderr
