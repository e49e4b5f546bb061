"""Ctrl-C in every command-line tool (scripts/*.py, the same mains as the amg-fast-* console
scripts): SIGINT while it works ends it with exit status 130 and one line saying what was kept and
how to continue, no traceback, and nothing half-written."""
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import translating_waves

from amg_fast.data.h5 import write_amg_fast
from amg_fast.experiments import runner
from amg_fast.train.config import TrainConfig
from amg_fast.train.trainer import train

SCRIPTS = Path(__file__).parents[1] / "scripts"
WAIT_S = 300  # only catches a hang: on a loaded 2-core machine a start can take tens of seconds


class Running:
    """A script in a subprocess, its stdout and stderr collected as they come (tqdm's bar has no newline)."""

    def __init__(self, script, *args, cwd=None):
        # its own process group, so that a failed test kills the workers a tool started too (a reproduce.py
        # driver killed at the deadline left its worker training 100000 epochs on one of the two cores)
        self.proc = subprocess.Popen([sys.executable, str(SCRIPTS / script), *map(str, args)], cwd=cwd,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, process_group=0)
        self.out = {"stdout": b"", "stderr": b""}
        self.readers = [threading.Thread(target=self._read, args=(name,), daemon=True) for name in self.out]
        for reader in self.readers:
            reader.start()

    def _read(self, name):
        stream = getattr(self.proc, name)
        while chunk := os.read(stream.fileno(), 4096):
            self.out[name] += chunk

    def text(self, name="stdout") -> str:
        return self.out[name].decode(errors="replace")

    def interrupt_when(self, ready, what: str) -> tuple[int, str, str]:
        """SIGINT once ready() holds (the tool is working); -> (exit status, stdout, stderr)."""
        deadline = time.monotonic() + WAIT_S
        try:
            while not ready():
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"never saw {what} (exit status {self.proc.poll()}):\n{self.text()}\n"
                                f"{self.text('stderr')}")
                time.sleep(0.02)
            self.proc.send_signal(signal.SIGINT)
            code = self.proc.wait(timeout=WAIT_S)
        finally:  # the tool and its workers where the test failed; else what the tool left running
            left_running = kill_group(self.proc.pid)
            self.proc.wait()
        for reader in self.readers:
            reader.join(timeout=10)
        assert not left_running, f"the tool exited and left processes of its own running (killed now):\n{self.text()}"
        return code, self.text(), self.text("stderr")


def kill_group(group: int) -> bool:
    """SIGKILL to every process of the process group; False when none was left."""
    try:
        os.killpg(group, signal.SIGKILL)
    except ProcessLookupError:
        return False
    return True


def the_line(code: int, stdout: str, stderr: str) -> str:
    """Exit status 130, no traceback, and the last line of stderr is the one "interrupted: ..." line."""
    assert code == 130, (code, stdout, stderr)
    assert "Traceback" not in stdout + stderr and "KeyboardInterrupt" not in stdout + stderr, stdout + stderr
    lines = [line for line in re.split(r"[\r\n]", stderr) if line.strip()]
    assert [line for line in lines if line.startswith("interrupted:")] == lines[-1:], stderr
    return lines[-1]


def temp_files(folder: Path) -> list[Path]:
    return list(Path(folder).rglob("*.tmp-*"))


TRAIN = ["--model", "ffno", "--n-train", "8", "--n-test", "4", "--epochs", "1000", "--width", "8",
         "--batch-size", "4", "--eval-every", "1000"]


def test_train_keeps_its_checkpoint_and_says_how_to_resume(tmp_path):
    out = tmp_path / "run"
    run = Running("train.py", *TRAIN, "--cache-dir", tmp_path / "cache", "--out", out)
    code, stdout, stderr = run.interrupt_when(lambda: "epoch    2" in run.text(), "epoch 2")
    line = the_line(code, stdout, stderr)
    assert "--resume" not in stdout  # the one line says how to continue (the run directory's hint did too)
    epoch = torch.load(out / "checkpoint.pt", weights_only=True)["epoch"]
    assert epoch >= 2 and line.startswith(f"interrupted: run directory {out} keeps the checkpoint of epoch {epoch} "
                                          "of 1000; continue with: python ")
    command = shlex.split(line.split("continue with: ", 1)[1])
    assert command[1:] == [str(SCRIPTS / "train.py"), *TRAIN, "--cache-dir", str(tmp_path / "cache"), "--out",
                           str(out), "--resume"]
    assert not (out / "results.json").exists() and not temp_files(tmp_path)


def test_train_before_its_first_checkpoint_leaves_nothing(tmp_path):
    out = tmp_path / "run"
    run = Running("train.py", *TRAIN, "--checkpoint-every", "1000", "--cache-dir", tmp_path / "cache", "--out", out)
    line = the_line(*run.interrupt_when(lambda: "epoch    1" in run.text(), "epoch 1"))
    assert line == (f"interrupted: no checkpoint was written yet, so nothing was kept in {out}; run the same command "
                    "to start again")
    assert not out.exists() and not temp_files(tmp_path)  # the directory this attempt created is removed


def test_evaluate_writes_nothing(tmp_path):
    data = tmp_path / "waves.h5"  # 4092 train trajectories: rolling them out one by one takes a while
    write_amg_fast(data, translating_waves(4096), np.arange(64) / 64, np.arange(6) * 0.1,
                   attrs={"pde": "ks", "n_test": 4})
    train(TrainConfig(data=str(data), out=str(tmp_path / "run"), model="ffno", epochs=1, res=32, n_train=8,
                      n_test=4, batch_size=4, width=8, modes=8, device="cpu"), log=lambda *a: None)
    result = tmp_path / "eval.json"
    run = Running("evaluate.py", tmp_path / "run", "--data", data, "--split", "train", "--batch-size", "1",
                  "--json", result)
    line = the_line(*run.interrupt_when(lambda: "evaluating" in run.text(), "the evaluation start"))
    assert line.startswith(f"interrupted: nothing was written (--json {result} is written when the evaluation "
                           "finishes); run it again with: python ")
    assert not result.exists() and not temp_files(tmp_path)


def test_generate_leaves_no_partial_file_and_says_a_rerun_skips_complete_ones(tmp_path):
    out = tmp_path / "data"
    run = Running("generate_data.py", "--pde", "ks", "--n-train", "4096", "--n-test", "4", "--batch-size", "32",
                  "--out", out)
    solving = re.compile(r"\|\s*[1-9]\d*/4100")  # the progress bar has counted solved trajectories
    line = the_line(*run.interrupt_when(lambda: solving.search(run.text("stderr")), "progress"))
    path = out / "ks_nu0.1_train4096_test4_seed0.h5"
    assert line.startswith(f"interrupted: {path} was not written (no partial file is left; the data sets already in "
                           f"{out} are complete and a rerun skips them); generate it with: python ")
    assert not path.exists() and not temp_files(tmp_path)


def test_reproduce_stops_its_workers_and_says_how_to_continue(tmp_path):
    """SIGINT to the driver alone (a terminal's Ctrl-C reaches the workers too; they ignore the
    second SIGINT): the driver stops its worker, which keeps the run's checkpoint."""
    out = tmp_path / "sweep"
    args = ["run", "table2", "--preset", "cpu", "--out", out, "--where", "model=ffno", "pde=ks", "nu=0.1", "res=32"]
    run_dir = out / "runs" / "ffno_ks_nu0.1_f32_seed0"
    run = Running("reproduce.py", *args)
    line = the_line(*run.interrupt_when(lambda: (run_dir / "checkpoint.pt").exists(), "the run's first checkpoint"))
    assert line == ("interrupted: 0 of 1 runs done, 1 partial (each resumes from its last checkpoint); continue with: "
                    + shlex.join(["python", str(SCRIPTS / "reproduce.py"), *map(str, args)]))
    assert runner.run_state(run_dir) == "partial"  # the worker has exited (its lock is free); not an error
    log = (run_dir / runner.LOG_FILE).read_text()
    assert f"interrupted: {run_dir} stopped (its last checkpoint is kept; the next `reproduce.py run` resumes it)" \
        in log and "Traceback" not in log, log
    assert torch.load(run_dir / "checkpoint.pt", weights_only=True)["epoch"] >= 1 and not temp_files(tmp_path)


def test_reproduce_interrupted_before_a_runs_first_checkpoint_says_it_starts_again(tmp_path):
    """Formerly counted as "1 died" (a killed worker?) in the interrupted line."""
    out = tmp_path / "sweep"
    args = ["run", "table2", "--preset", "smoke", "--set", "epochs=100000", "checkpoint_every=100000", "--out", out,
            "--where", "model=ffno", "pde=ks", "nu=0.1", "res=32"]
    run_dir = out / "runs" / "ffno_ks_nu0.1_f32+checkpoint_every=100000+epochs=100000_seed0"
    run = Running("reproduce.py", *args)
    line = the_line(*run.interrupt_when(lambda: (run_dir / "metrics.jsonl").exists(), "the run's first epoch"))
    assert line.startswith("interrupted: 0 of 1 runs done, 0 partial (each resumes from its last checkpoint), 1 "
                           "stopped before a checkpoint (each starts again); continue with: "), line
    assert not (run_dir / "checkpoint.pt").exists() and not temp_files(tmp_path)


def test_a_reader_that_goes_away_ends_the_command_quietly(tmp_path):
    """`reproduce.py plan ... | head -n 1`: exit 141 (as a shell tool's SIGPIPE), no BrokenPipeError traceback."""
    # ~120 kB of plan output: more than a pipe's buffer holds, so the writer meets the closed pipe
    proc = subprocess.Popen([sys.executable, str(SCRIPTS / "reproduce.py"), "plan", "all", "--preset", "paper",
                             "--seeds", *map(str, range(10)), "--out", str(tmp_path / "sweep")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert "runs at preset paper" in proc.stdout.readline()  # read one line, then close the pipe
    proc.stdout.close()
    stderr = proc.stderr.read()
    assert proc.wait(timeout=120) == 141, stderr
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr


CONSOLE_SCRIPTS = Path(sys.executable).parent  # where pip put the amg-fast-* console scripts of this install


@pytest.mark.parametrize("script", ["train.py", "evaluate.py", "generate_data.py", "reproduce.py", "amg-fast-train",
                                    "amg-fast-evaluate", "amg-fast-generate", "amg-fast-reproduce"])
def test_ctrl_c_while_a_script_is_still_importing_its_libraries(tmp_path, script):
    """Formerly a KeyboardInterrupt traceback from inside torch's import (2 s here, longer on a cold
    machine); the console scripts printed one until their entry point became amg_fast._entry (it
    imported amg_fast.cli.<tool>, and torch with it, before any handler). A stand-in torch on
    PYTHONPATH marks the moment the tool imports it, then waits."""
    command = [str(CONSOLE_SCRIPTS / script)] if script.startswith("amg-fast-") else [sys.executable,
                                                                                     str(SCRIPTS / script)]
    importing = tmp_path / "importing"
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text(
        f"import pathlib, time\npathlib.Path({str(importing)!r}).touch()\ntime.sleep(120)\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.Popen([*command, "--help"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + WAIT_S
    while not importing.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=WAIT_S)
    assert the_line(proc.returncode, stdout, stderr) == (f"interrupted: {script} was still starting (importing its "
                                                         "libraries); nothing was written; run it again")


SWALLOWING_WORK = '''
import sys, time
from amg_fast._interrupt import run_interruptible

class Slow:  # its finalizer is where almost all of the time goes: a SIGINT lands inside it
    def __del__(self):
        t = time.perf_counter()
        while time.perf_counter() - t < 0.01:
            pass

def work():
    print("working", flush=True)
    t = time.monotonic()
    while time.monotonic() - t < 60:
        Slow()
    print("finished", flush=True)
    return 0

sys.exit(run_interruptible(work, lambda: "nothing to keep"))
'''


def test_an_interrupt_a_finalizer_swallowed_is_delivered_again():
    """Python cannot raise out of a __del__ or a weakref callback (torch and matplotlib run many):
    a Ctrl-C that landed there was printed as "Exception ignored ... KeyboardInterrupt", and the work
    went on to the end with SIGINT ignored (seen on `reproduce.py report`)."""
    proc = subprocess.Popen([sys.executable, "-c", SWALLOWING_WORK], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    assert proc.stdout.readline() == "working\n"
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=WAIT_S)
    assert the_line(proc.returncode, stdout, stderr) == "interrupted: nothing to keep"
    assert "Exception ignored" not in stderr and "finished" not in stdout


def test_ctrl_c_after_the_tool_finished_while_python_shuts_down(tmp_path):
    """scripts/_starting.run_cli: once main() has returned, SIGINT is ignored (formerly a traceback
    from an atexit callback, seen after `reproduce.py export`); the tool's exit status stands."""
    exiting = tmp_path / "exiting"
    (tmp_path / "finishing_tool.py").write_text(
        "import atexit, pathlib, time\n"
        f"def _shutdown():\n    pathlib.Path({str(exiting)!r}).touch()\n    time.sleep(3)\n"
        "def main():\n    atexit.register(_shutdown)\n    return 0\n")
    code = f"import sys; sys.path[:0] = [{str(SCRIPTS)!r}, {str(tmp_path)!r}]; import _starting; " \
           "_starting.run_cli('finishing_tool')"
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + WAIT_S
    while not exiting.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=WAIT_S)
    assert proc.returncode == 0 and stderr == "", stderr
