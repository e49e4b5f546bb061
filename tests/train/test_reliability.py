"""Issue 14, the CLIs: every bad input is refused with a message (exit 2, no traceback) before
anything is written, a failed attempt leaves nothing behind (or a resumable run), the same command
runs once the input is fixed, a corrupt checkpoint is named, a run directory is locked while a
process trains in it, and wall_time_s sums the segments of a resumed run. Each test (or
parametrized case) is a row of docs/reliability.md."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
from helpers import translating_waves

from amg_fast.cli import train as train_cli
from amg_fast.data.generate import dataset_path
from amg_fast.data.h5 import write_lpsda
from amg_fast.train.config import TrainConfig
from amg_fast.train.trainer import TrainingDiverged, train

ROOT = Path(__file__).parents[2]
TINY = ["--epochs", 1, "--n-train", 4, "--n-test", 2, "--width", 8, "--batch-size", 4, "--device", "cpu",
        "--eval-every", 100]
TINY_CFG = dict(res=32, n_train=4, n_test=2, batch_size=4, width=8, eval_every=100, device="cpu")


def cli(script, *args, cwd=None):
    return subprocess.run([sys.executable, str(ROOT / "scripts" / script), *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, env={**os.environ, "OMP_NUM_THREADS": "1"})


def refused(proc, message):
    """Exit code 2 and `message` in one 'error: ...' line, no traceback, no unsafe advice."""
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and "weights_only=False" not in proc.stderr, proc.stderr
    assert message in proc.stderr, proc.stderr


def write_raw(path, u, *, n_test=4, pde="ks", T=None):
    """An amg_fast-layout file written without the writers' checks (they refuse NaN and Inf)."""
    with h5py.File(path, "w") as f:
        f["u"], f["x"], f["t"] = u, np.arange(u.shape[2]) / u.shape[2], np.arange(u.shape[1]) * 0.1
        f.attrs.update({"format": "amg_fast", "pde": pde, "n_test": n_test})
    return path


def bad_file(tmp_path, kind):
    u = translating_waves(16)
    if kind == "nan":
        u[5, 2, 7] = np.nan
    if kind == "inf":
        u[1, 0, 0] = np.inf
    if kind == "T1":
        u = u[:, :1]
    kw = {"n_test0": {"n_test": 0}, "n_test_above_N": {"n_test": 99}, "burgers": {"pde": "burgers"}}.get(kind, {})
    if kind == "no-trajectories":
        u = u[:0]
        kw = {"n_test": 0}
    return write_raw(tmp_path / f"{kind}.h5", u, **kw)


# -- train.py: refused before anything is written ----------------------------------------------
BAD_DATA = {
    "nan": "nan.h5: u holds NaN or Inf values (first at index",
    "inf": "inf.h5: u holds NaN or Inf values (first at index",
    "T1": "T1.h5: 1 frame per trajectory is used (stride 1 of the ks protocol); training needs at least 2",
    "n_test0": "n_test0.h5: its test split holds no trajectories; training needs at least one",
    "n_test_above_N": "n_test_above_N.h5: attribute n_test (the test trajectories at the end of the file) must be an "
                      "integer in 0..16 (the file holds 16 trajectories), got 99",
    "no-trajectories": "no-trajectories.h5: u holds no data (shape (0, 6, 64), [N, T, X])",
    "burgers": "--pde ks: ", "n-train-above-file": "--n-train 100: ",
}


@pytest.mark.parametrize("kind", list(BAD_DATA))
def test_train_refuses_bad_data_before_creating_the_run_directory(tmp_path, kind):
    data = bad_file(tmp_path, "good" if kind == "n-train-above-file" else kind)
    extra = ["--n-train", 100] if kind == "n-train-above-file" else []
    proc = cli("train.py", "--data", data, "--out", tmp_path / "run", *TINY, *extra)
    message = {"burgers": f"--pde ks: {data} holds burgers data (its pde attribute or layout); pass --pde burgers",
               "n-train-above-file": f"--n-train 100: {data} holds 12 train trajectories; pass at most 12"}
    refused(proc, message.get(kind, BAD_DATA[kind]))
    assert not (tmp_path / "run").exists()


BAD_FLAGS = {
    "modes-above-res": (["--modes", 40], "--modes must be <= res//2 + 1 = 17 (the rfft of --res 32 has that many), got 40"),
    "unet-res-40": (["--model", "unet", "--res", 40], "--res 40: the model cannot run at this resolution: S "
                                                      "(u.shape[-2]) must be a multiple of 16"),
    "cuda-graph-on-cpu": (["--cuda-graph"], "--cuda-graph captures the training step in a CUDA graph and needs a CUDA "
                                            "device, got device cpu"),
    "lr-inf": (["--lr", "inf"], "--lr must be a finite number > 0, got inf"),
    "weight-decay-nan": (["--weight-decay", "nan"], "--weight-decay must be a finite number >= 0, got nan"),
    "device-gpu0": (["--device", "gpu0"], "--device must be 'auto', 'cpu', 'cuda' or 'cuda:N', got 'gpu0'"),
    "device-cuda-without-cuda": (["--device", "cuda"], "--device 'cuda': CUDA is not available here"),
    "nu-inf": (["--nu", "inf"], "--nu must be a finite number > 0, got inf"),
    # the fusion layer's refusals name the flags (formerly `alpha applies to fusion ...`)
    "alpha-with-residual-fusion": (["--model", "s4ffno", "--alpha", "0.5"],
                                   "--alpha applies to --fusion 'convex' or 'additive', not 'residual' (got --alpha=0.5)"),
    "convex-alpha-1.5": (["--model", "s4ffno", "--fusion", "convex", "--alpha", "1.5"],
                         "--alpha must be in [0, 1] for convex fusion, got 1.5"),
    # the setting checks name the flag typed (formerly the setting: `batch_size must be ...`)
    "epochs-0": (["--epochs", 0], "error: --epochs must be an integer >= 1, got 0"),
    "batch-size-0": (["--batch-size", 0], "error: --batch-size must be an integer >= 1, got 0"),
    "seed-negative": (["--seed", -1], "error: --seed must be in [0, 2^32) = 0..4294967295, got -1"),
    "omega-inf": (["--omega-mode", "fixed", "--omega", "inf"],
                                     "error: --omega must be a finite number >= 0 (an unresolved-energy ratio), got inf"),
}


@pytest.mark.parametrize("case", list(BAD_FLAGS))
def test_train_refuses_bad_flags_before_creating_the_run_directory(tiny_data, tmp_path, case):
    if case == "device-cuda-without-cuda" and torch.cuda.is_available():
        pytest.skip("CUDA is available here")
    args, message = BAD_FLAGS[case]
    refused(cli("train.py", "--data", tiny_data, "--out", tmp_path / "run", *TINY, *args), message)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("flag", ["--out", "--cache-dir"])
def test_train_refuses_an_out_or_cache_below_a_file(tmp_path, flag):
    (tmp_path / "afile").write_text("")
    args = ["--out", tmp_path / "afile" / "sub"] if flag == "--out" else \
        ["--cache-dir", tmp_path / "afile" / "cache", "--out", tmp_path / "run"]
    refused(cli("train.py", *args, *TINY), f"{flag} {tmp_path / 'afile'}/")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]


GENERATOR_REFUSALS = {  # settings the data generator refuses (train.py's own checks pass them)
    "ns2d-t-end-1e12": (["--pde", "ns2d", "--model", "ffno2d", "--ns-grid", "16", "--ns-t-end", "1e12"],
                        "the NS2D solver would take 3.12e+13 time steps per trajectory (each frame interval in steps of "
                        "at most dt); allowed: at most 5e+07 (a larger dt, a shorter --ns-t-end)"),
    "ns2d-n-train-1e8": (["--pde", "ns2d", "--model", "ffno2d", "--ns-grid", "16", "--n-train", "100000000"],
                         "the ns2d data set nu=0.001, --n-train=100000000, --n-test=4 (100000004 trajectories x 11 "
                         "frames x 256 points) needs about"),
    "ks-n-train-1e12": (["--n-train", "1000000000000"], "the ks data set nu=0.1, --n-train=1000000000000, --n-test=32"),
}


@pytest.mark.parametrize("case", list(GENERATOR_REFUSALS))
def test_train_announces_no_data_generation_the_generator_refuses(tmp_path, capsys, case):
    """Formerly `data: generating F (...)` was printed, then the generator refused its arguments; the
    refusal names train.py's flags (--ns-t-end, --n-train), not the generator's keywords (t_end, n_train)."""
    args, message = GENERATOR_REFUSALS[case]
    out, cache = tmp_path / "run", tmp_path / "cache"
    assert train_cli.main([*args, "--out", str(out), "--cache-dir", str(cache), "--device", "cpu"]) == 2
    printed = capsys.readouterr()
    assert message in printed.err and "data: " not in printed.out + printed.err, printed
    assert sorted(tmp_path.iterdir()) == []


RUN_DIR_REFUSALS = {  # --out of finished_run (4 + 2 trajectories, width 8), or a new directory; no --data
    "existing-run": ([], "{run} already holds a run (config.json); pass --resume to continue it or choose another --out"),
    "nothing-to-resume": (["--resume"], "{new}: nothing to resume (no config.json or checkpoint)"),
    "resume-other-settings": (["--resume", "--width", "16"], "{run}: --resume with settings that differ from the run's "
                                                              "config.json: cache_dir="),  # ..., data=..., width=8 -> 16
}


@pytest.mark.parametrize("case", list(RUN_DIR_REFUSALS))
def test_run_directory_refusals_come_before_the_data_is_generated(finished_run, tmp_path, capsys, case):
    """Formerly `data: generating ...` came first (minutes at paper scale), then the refusal: the checks that
    need only the settings and --out now run before the data is read or generated; the cache stays empty."""
    run, new, cache = finished_run[0], tmp_path / "new", tmp_path / "cache"
    cache.mkdir()
    before = sorted((p.name, p.stat().st_mtime_ns) for p in run.iterdir())
    args, message = RUN_DIR_REFUSALS[case]
    out = new if case == "nothing-to-resume" else run
    assert train_cli.main(["--out", str(out), "--cache-dir", str(cache), *map(str, TINY), *args]) == 2
    printed = capsys.readouterr()
    assert printed.err.startswith("error: " + message.format(run=run, new=new)), printed.err
    assert "width=8 -> 16" in printed.err or case != "resume-other-settings", printed.err
    assert "data:" not in printed.out + printed.err and not any(cache.iterdir()) and not new.exists(), printed
    assert sorted((p.name, p.stat().st_mtime_ns) for p in run.iterdir()) == before


def test_cached_file_with_nan_is_refused_with_how_to_regenerate(tmp_path):
    """A NaN file left in the cache by an older version is not used; --regenerate replaces it (and
    the same command then trains)."""
    cache = tmp_path / "cache"
    path = dataset_path(cache, "ks", 0.1, 4, 2, 0)
    write_lpsda(path, {"train": translating_waves(4), "test": translating_waves(2)}, np.arange(64), np.arange(6) * 0.1,
                nu=0.1, L=64.0, seeds={"train": 0, "test": 1},
                attrs={"pde": "ks", "generator_args": json.dumps({"pde": "ks", "nu": 0.1, "n_train": 4, "n_test": 2,
                                                                  "seed": 0, "method": "etdrk4"})})
    with h5py.File(path, "r+") as f:
        f["train/pde_6-64"][1, 1, 1] = np.nan
    refused(cli("train.py", "--cache-dir", cache, "--out", tmp_path / "run", *TINY),
            "train/pde_6-64 holds NaN or Inf values (first at index [1, 1, 1]); it is a cached generated file: run again with "
            "--regenerate to replace it (or delete it)")
    assert not (tmp_path / "run").exists() and path.exists()
    regenerated = cli("train.py", "--cache-dir", cache, "--out", tmp_path / "run", *TINY, "--regenerate")
    assert regenerated.returncode == 0, regenerated.stderr
    with h5py.File(path, "r") as f:  # a freshly solved KS set (its own grid), every value finite
        arrays = [f[f"{split}/{name}"][()] for split in ("train", "test") for name in f[split] if name.startswith("pde_")]
        assert arrays and all(np.isfinite(a).all() for a in arrays)
    assert (tmp_path / "run" / "results.json").exists()


def test_regenerate_refuses_a_file_of_your_own(tiny_data, tmp_path):
    """--regenerate never rewrites a --data file; refused before anything is created."""
    refused(cli("train.py", "--data", tiny_data, "--out", tmp_path / "run", *TINY, "--regenerate"),
            f"--regenerate replaces a generated data set in --cache-dir; --data {tiny_data} names a file of your own")
    assert not (tmp_path / "run").exists()


def test_regenerate_refuses_a_resumed_run(tmp_path):
    """A resumed run keeps its data: --regenerate --resume is refused, nothing created or replaced."""
    refused(cli("train.py", "--cache-dir", tmp_path / "cache", "--out", tmp_path / "run", *TINY, "--regenerate",
                "--resume"),
            "--regenerate with --resume: a resumed run must keep the data it started on")
    assert not (tmp_path / "run").exists() and not (tmp_path / "cache").exists()


# -- failures after the run directory exists, and the rerun ------------------------------------
@pytest.mark.parametrize("case", ["nan-data", "diverging-lr", "diverging-lr-in-existing-dir"])
def test_same_command_runs_once_the_input_is_fixed(tiny_data, tmp_path, case):
    """A failed attempt leaves nothing that blocks the same command (formerly: "already holds a run")."""
    out = tmp_path / "runs" / "run"
    if case == "diverging-lr-in-existing-dir":
        out.mkdir(parents=True)
        (out / "notes.txt").write_text("mine")
    data = bad_file(tmp_path, "nan") if case == "nan-data" else tiny_data
    bad = ["--lr", 1e30] if case != "nan-data" else []
    failed = cli("train.py", "--data", data, "--out", out, *TINY, *bad)
    if case == "nan-data":
        refused(failed, "holds NaN or Inf values")
    else:  # passes every check, then diverges in epoch 1, before the first checkpoint
        refused(failed, "error: test nRMSE is nan at epoch 1: the rollout's predictions are not finite; stopping (no "
                        "checkpoint yet; a lower --lr may help)")
    if case == "diverging-lr-in-existing-dir":  # what was there stays; what the attempt wrote is gone
        assert sorted(p.name for p in out.iterdir()) == [".train.lock", "notes.txt"]
    else:
        assert not (tmp_path / "runs").exists()
    if case == "nan-data":
        data = write_raw(data, translating_waves(16))  # fixed in place
    proc = cli("train.py", "--data", data, "--out", out, *TINY)
    assert proc.returncode == 0, proc.stderr
    assert json.loads((out / "results.json").read_text())["epochs"] == 1


@pytest.mark.parametrize("failure", ["disk", "diverged"])
def test_failure_after_a_checkpoint_keeps_the_run_and_says_what_helps(failure, tiny_data, tmp_path, monkeypatch):
    """A failure in epoch 2 keeps epoch 1's checkpoint. An error --resume gets past (here a full disk) says
    to resume; a diverged run, which would diverge again on resuming with its own --lr, says to train
    again elsewhere instead, and nothing about --resume."""
    import amg_fast.train.trainer as trainer

    real_loss, calls = trainer._loss, []

    def fails_in_epoch_2(*args):
        calls.append(1)
        if len(calls) > 1 and failure == "disk":
            raise OSError(28, "No space left on device")
        return real_loss(*args) * (float("nan") if len(calls) > 1 else 1.0)

    monkeypatch.setattr(trainer, "_loss", fails_in_epoch_2)
    out = tmp_path / "run"
    logs = []
    raised = OSError if failure == "disk" else TrainingDiverged
    with pytest.raises(raised) as err:
        train(TrainConfig(data=str(tiny_data), out=str(out), **{**TINY_CFG, "epochs": 2}), log=logs.append)
    assert {"config.json", "metrics.jsonl", "checkpoint.pt"} <= {p.name for p in out.iterdir()}
    hint = f"{out} keeps its last checkpoint: run the same command with --resume to continue"
    assert (hint in logs) == (failure == "disk")
    if failure == "diverged":
        assert str(err.value) == (
            f"loss is nan at epoch 2; stopping. The last good checkpoint ({out / 'checkpoint.pt'}) is kept, but "
            f"resuming would repeat the same steps (a run keeps its settings, --lr included): train again with a "
            f"lower --lr into another --out, or remove {out} first")


def test_wall_time_sums_every_segment_of_a_resumed_run(tiny_data, tmp_path, monkeypatch):
    import amg_fast.train.trainer as trainer

    real_loss, calls = trainer._loss, []

    def slow_epoch_1_then_nan(*args):  # 1 batch per epoch: epoch 1 takes >= 1 s, epoch 2 diverges
        calls.append(1)
        if len(calls) == 1:
            time.sleep(1.0)
        return real_loss(*args) * (float("nan") if len(calls) == 2 else 1.0)

    monkeypatch.setattr(trainer, "_loss", slow_epoch_1_then_nan)
    cfg = dict(data=str(tiny_data), out=str(tmp_path / "run"), **{**TINY_CFG, "epochs": 2})
    with pytest.raises(TrainingDiverged):
        train(TrainConfig(**cfg), log=lambda *a: None)
    first = torch.load(tmp_path / "run" / "checkpoint.pt", weights_only=True)["wall_time_s"]
    monkeypatch.setattr(trainer, "_loss", real_loss)
    start = time.perf_counter()
    results = train(TrainConfig(**cfg, resume=True), log=lambda *a: None)
    second = time.perf_counter() - start
    assert first >= 1.0 and first < results["wall_time_s"] <= first + second


def test_preset_counts_are_cut_to_the_file_and_the_run_resumes(tiny_data, tmp_path):
    """Without --n-train/--n-test the quick preset's 256/32 are cut to what the file holds, recorded
    so in config.json, and --resume of the same command finds the same settings."""
    cfg = dict(data=str(tiny_data), out=str(tmp_path / "run"), **{**TINY_CFG, "n_train": None, "n_test": None,
                                                                   "epochs": 1})
    train(TrainConfig(**cfg), log=lambda *a: None)
    recorded = json.loads((tmp_path / "run" / "config.json").read_text())
    assert (recorded["n_train"], recorded["n_test"]) == (12, 4)
    assert train(TrainConfig(**cfg, resume=True), log=lambda *a: None)["epochs"] == 1


# -- checkpoints (finished_run: tests/train/conftest.py) ----------------------------------------
def test_truncated_checkpoint_is_named_on_resume_and_in_evaluate(finished_run, tmp_path):
    """Formerly a traceback with torch's advice to pass weights_only=False."""
    run, data = finished_run
    copy = tmp_path / "run"
    copy.mkdir()
    for name in ("config.json", "metrics.jsonl"):
        (copy / name).write_bytes((run / name).read_bytes())
    good = (run / "checkpoint.pt").read_bytes()
    (copy / "checkpoint.pt").write_bytes(good[:len(good) // 2])
    before = {p.name: p.read_bytes() for p in copy.iterdir()}
    message = (f"{copy / 'checkpoint.pt'}: corrupt or not a checkpoint (truncated or damaged: RuntimeError: "
               "PytorchStreamReader failed reading zip archive")
    refused(cli("train.py", "--data", data, "--out", copy, "--resume", *TINY), message)
    assert {p.name: p.read_bytes() for p in copy.iterdir() if p.name != ".train.lock"} == before  # untouched
    proc = cli("evaluate.py", copy, "--data", data)
    refused(proc, message)
    assert "it cannot be evaluated: give a checkpoint.pt written by scripts/train.py" in proc.stderr
    assert "Delete it" not in proc.stderr  # evaluate's advice: a wrong file is not the run's to delete
    (copy / "checkpoint.pt").unlink()  # as the message says: the same command then starts the run over
    proc = cli("train.py", "--data", data, "--out", copy, "--resume", *TINY)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("content,why", [
    (b"not a checkpoint", "truncated or damaged: UnpicklingError"),
    (b"hello world", "truncated or damaged: KeyError"),
    (b"", "truncated or damaged: EOFError"),
    ({"model": {}, "config": {}, "payload": Path("x")}, "it holds objects other than tensors and plain containers, "
                                                        "which are not loaded"),
    ([1, 2], "holds a list, not a checkpoint dict"),
    ({"model": {}}, "missing config"),
], ids=["garbage", "garbage-2", "empty", "pickled-object", "not-a-dict", "missing-keys"])
def test_load_checkpoint_names_a_file_that_is_not_a_checkpoint(tmp_path, content, why):
    from amg_fast.train.checkpoint import CheckpointError, load_checkpoint

    path = tmp_path / "checkpoint.pt"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        torch.save(content, path)
    with pytest.raises(CheckpointError) as err:
        load_checkpoint(path)
    assert str(err.value).startswith(f"{path}: corrupt or not a checkpoint ({why}") and "Delete it" in str(err.value)


EVAL_CASES = {
    "limit-0": (["--limit", 0], "argument --limit: must be an integer >= 1, got 0"),
    "limit-negative": (["--limit", -1], "argument --limit: must be an integer >= 1, got -1"),
    "batch-size-0": (["--batch-size", 0], "argument --batch-size: must be an integer >= 1, got 0"),
    "res-16-on-an-f32-run": (["--res", 16], "--res 16: the model cannot run at this resolution: modes=16: a grid of "
                                            "16 points holds at most 9 rFFT modes (S//2+1)"),
    "device-gpu0": (["--device", "gpu0"], "error: --device must be 'auto', 'cpu', 'cuda' or 'cuda:N', got 'gpu0'"),
    "data-a-directory": (["--data", "."], "error: .: is a directory; give an HDF5 file"),
    "json-below-a-file": (["--json", "afile/e.json"], "--json afile/e.json: lies under afile, which is a file"),
    "json-a-directory": (["--json", "."], "--json .: is a directory; give a file name"),
}


@pytest.mark.parametrize("case", list(EVAL_CASES))
def test_evaluate_refuses_bad_flags(finished_run, tmp_path, case):
    run, data = finished_run
    (tmp_path / "afile").write_text("")
    args, message = EVAL_CASES[case]
    refused(cli("evaluate.py", run, "--data", data, *args, cwd=tmp_path), message)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]


def test_evaluate_runs_with_device_auto_and_refuses_a_file_that_is_not_a_checkpoint(finished_run, tmp_path):
    """--device auto was accepted by the check, then a traceback (torch.device("auto")); a run's
    config.json given as the checkpoint was met with "Delete it to start the run over"."""
    run, data = finished_run
    proc = cli("evaluate.py", run, "--data", data, "--device", "auto", "--limit", 1)
    assert proc.returncode == 0 and "rollout nRMSE" in proc.stdout, proc.stderr
    proc = cli("evaluate.py", run / "config.json", "--data", data)
    refused(proc, f"{run / 'config.json'}: corrupt or not a checkpoint (truncated or damaged: ")
    assert proc.stderr.rstrip().endswith("it cannot be evaluated: give a checkpoint.pt written by scripts/train.py, "
                                         "or its run directory (a damaged one: train or resume the run again)")


def test_evaluate_refuses_data_of_another_pde(finished_run, tmp_path):
    """A KS run evaluated on a Burgers file gave an nRMSE without a word (only 1D / 2D was checked)."""
    from amg_fast.data.h5 import write_amg_fast

    run, _ = finished_run
    burgers = tmp_path / "burgers.h5"
    write_amg_fast(burgers, translating_waves(8, T=148), np.arange(64) / 64, np.arange(148) * 0.01,
                   attrs={"pde": "burgers", "n_test": 2})
    refused(cli("evaluate.py", run, "--data", burgers), f"error: --data {burgers} holds 1D burgers trajectories; the "
            "checkpoint's model amgfno is 1D, trained on --pde ks: evaluate it on ks data")


# -- the run-directory lock, stale temp files -------------------------------------------------
def test_second_trainer_is_refused_while_the_first_trains(tiny_data, tmp_path):
    from filelock import FileLock

    out = tmp_path / "run"
    args = ["--data", tiny_data, "--out", out, *TINY, "--epochs", 100000]
    first = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "train.py"), *map(str, args)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             env={**os.environ, "OMP_NUM_THREADS": "1"})
    try:
        deadline = time.time() + 600  # generous: a loaded 2-core CI machine (xdist); stops if it exits
        while not (out / "checkpoint.pt").exists() and first.poll() is None and time.time() < deadline:
            time.sleep(0.2)
        assert (out / "checkpoint.pt").exists(), f"no checkpoint; the first trainer's exit code: {first.poll()}"
        refused(cli("train.py", *args, "--resume"),
                f"{out}: another process is training in this run directory (it holds {out / '.train.lock'}); wait "
                "for it to finish or stop it, or choose another --out")
        assert first.poll() is None  # the first one trains on
    finally:
        os.kill(first.pid, signal.SIGKILL)
        first.wait()
    lock = FileLock(str(out / ".train.lock"))  # a killed trainer's lock is free again (the kernel drops it)
    lock.acquire(timeout=0)
    lock.release()


def test_stale_temp_files_of_a_killed_trainer_are_removed_by_the_next_one(finished_run, tmp_path):
    run, data = finished_run
    copy = tmp_path / "run"
    copy.mkdir()
    for path in run.iterdir():
        (copy / path.name).write_bytes(path.read_bytes())
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = [copy / f"{name}.tmp-{dead.stdout.strip()}" for name in ("metrics.jsonl", "results.json")]
    for path in stale:
        path.write_text("partial")
    cfg = TrainConfig(**json.loads((copy / "config.json").read_text()))
    cfg.out, cfg.resume = str(copy), True
    train(cfg, log=lambda *a: None)  # finished: re-evaluates and rewrites metrics and results
    assert not any(path.exists() for path in stale)
