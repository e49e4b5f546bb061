"""Training and evaluation: loss goes down, metric anchors, rollout-only evaluation, resume
after kill -9, DDP on CPU, the quick default, and every bad input or fault."""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import translating_waves

from amg_fast.data.h5 import write_amg_fast
from amg_fast.models.base import SequenceModel
from amg_fast.train.config import TrainConfig, resolve_config
from amg_fast.train.evaluate import evaluate
from amg_fast.train.trainer import RunDirError, TrainingDiverged, train
from amg_fast.train.rundir import RunDir

ROOT = Path(__file__).parents[2]
TINY = dict(res=32, n_train=12, n_test=4, batch_size=4, width=16, modes=8, eval_every=100, device="cpu")


def run_cli(script, *args, env=None, **kw):
    return subprocess.run([sys.executable, str(ROOT / "scripts" / script), *map(str, args)], capture_output=True,
                          text=True, env={**os.environ, **(env or {})}, **kw)


def test_tiny_run_lowers_the_loss_and_writes_the_run_directory(tiny_data, tmp_path):
    out = tmp_path / "run"
    lines = []
    results = train(TrainConfig(data=str(tiny_data), out=str(out), epochs=8, **TINY), log=lines.append)
    assert any("; output --normalize --increment; device cpu" in line for line in lines)  # the run says it
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    # the default --normalize --increment (since 2026-12-01) starts lower and ends 0.58x the first epoch's here
    assert len(rows) == 8 and rows[-1]["train_loss"] < 0.7 * rows[0]["train_loss"]
    assert {"epoch", "train_loss", "lr", "gate_mean", "time_s"} <= set(rows[0]) and "test_nrmse" in rows[-1]
    saved = json.loads((out / "results.json").read_text())
    assert saved["nrmse"] == results["nrmse"] and 0 < saved["nrmse"] < 1 and len(saved["nrmse_per_step"]) == 5
    assert {"nrmse", "nrmse_per_step", "gate_mean", "params", "wall_time_s", "device"} <= set(saved)
    assert saved["gate_mean_last20_epochs"] == pytest.approx(np.mean([r["gate_mean"] for r in rows]))
    rollout = np.load(out / "rollout.npz")
    assert rollout["pred"].shape == rollout["true"].shape == (4, 5, 32)
    assert json.loads((out / "config.json").read_text())["epochs"] == 8
    assert torch.load(out / "checkpoint.pt", weights_only=True)["epoch"] == 8


class Shift(SequenceModel):
    """Predicts the next state by shifting one cell (exact for translating_waves at S = 64)."""

    def __init__(self, scale=1.0):
        super().__init__()
        self.scale = scale

    def forward(self, u):
        return self.scale * torch.roll(u, 1, dims=2)

    def step(self, u_t, state):
        return self.scale * torch.roll(u_t, 1, dims=1), state


class Cheater(SequenceModel):
    """Perfect under teacher forcing with the whole sequence (it reads u_{t+1}); at rollout it
    only has its own predictions and repeats the state."""

    def forward(self, u):
        return torch.cat([u[:, 1:], u[:, -1:]], dim=1)

    def step(self, u_t, state):
        return u_t, state


def loader(n=6, T=6):
    u = torch.tensor(translating_waves(n, T), dtype=torch.float64)[..., None]
    return [(u, torch.zeros(n))], u


def test_nrmse_anchors_perfect_and_zero_predictor():
    batches, _ = loader()
    assert evaluate(Shift(), batches, "cpu").nrmse == pytest.approx(0.0, abs=1e-12)
    assert evaluate(Shift(scale=0.0), batches, "cpu").nrmse == pytest.approx(1.0, abs=1e-12)


def test_evaluation_rolls_out_from_u0_only():
    batches, u = loader()
    result = evaluate(Cheater(), batches, "cpu")
    persistence = ((u[:, :1] - u[:, 1:]).flatten(2).norm(dim=-1) / u[:, 1:].flatten(2).norm(dim=-1)).mean()
    assert result.nrmse == pytest.approx(float(persistence), rel=1e-12) and result.nrmse > 0.1
    assert np.allclose(result.pred, np.broadcast_to(u[:, :1, :, 0].numpy(), result.pred.shape))


def test_resume_after_kill_9_matches_an_uninterrupted_run(tiny_data, tmp_path):
    args = ["--data", tiny_data, "--epochs", 6, "--res", 32, "--n-train", 12, "--n-test", 4, "--batch-size", 4,
            "--width", 16, "--modes", 8, "--eval-every", 3, "--device", "cpu", "--seed", 3]
    assert run_cli("train.py", *args, "--out", tmp_path / "full").returncode == 0
    killed = tmp_path / "killed"
    proc = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "train.py"), *map(str, args), "--out", str(killed)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 600  # generous: a loaded 2-core CI machine (xdist) is slow to start a run
    while time.time() < deadline and proc.poll() is None:
        metrics = killed / "metrics.jsonl"
        if metrics.exists() and len(metrics.read_text().splitlines()) >= 2:
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.05)
    assert proc.wait() == -signal.SIGKILL, "the run finished before it could be killed"
    assert not (killed / "results.json").exists()
    resumed = run_cli("train.py", *args, "--out", killed, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed" in resumed.stdout
    full, again = (json.loads((d / "results.json").read_text()) for d in (tmp_path / "full", killed))
    assert again["nrmse"] == pytest.approx(full["nrmse"], rel=1e-6)
    rows = [[json.loads(x) for x in (d / "metrics.jsonl").read_text().splitlines()] for d in (tmp_path / "full", killed)]
    assert [r["train_loss"] for r in rows[1]] == pytest.approx([r["train_loss"] for r in rows[0]], rel=1e-6)


TIMINGS = {"time_s", "eval_s", "checkpoint_s"}  # metrics.jsonl's measured seconds (each run measures its own)
RESULT_TIMINGS = {"wall_time_s", "train_time_s", "eval_time_s", "checkpoint_time_s"}


def same_but_timings(resumed: list[dict], full: list[dict], timings: set[str]) -> None:
    """The same rows with the same fields; equal values (rel 1e-6) except the timings, which are present."""
    assert [sorted(row) for row in resumed] == [sorted(row) for row in full]
    for row, expected in zip(resumed, full):
        for key in set(row) - timings:
            numbers = isinstance(expected[key], (float, list))  # a number or a per-step list; others exactly
            assert row[key] == (pytest.approx(expected[key], rel=1e-6) if numbers else expected[key]), key
        assert all(row[key] >= 0 for key in timings & set(row))


def test_a_resumed_run_ends_with_the_metrics_and_results_of_an_uninterrupted_run(tiny_data, tmp_path):
    """Formerly every --resume lost the last checkpoint's checkpoint_s (the checkpoint holds the history as it
    was before its own save was timed, and resume rewrote metrics.jsonl from it), so results.json's
    checkpoint_time_s changed. A run stopped right after epoch 2's checkpoint and metrics (what kill -9 there
    leaves), then resumed, and a finished run resumed again, match an uninterrupted run field by field."""
    cfg = dict(data=str(tiny_data), epochs=3, **{**TINY, "eval_every": 1})
    train(TrainConfig(**cfg, out=str(tmp_path / "full")), log=lambda *a: None)

    class Killed(BaseException):
        pass

    def kill_after_epoch_2(line):  # the log line follows the epoch's checkpoint and metrics.jsonl
        if line.startswith("epoch    2"):
            raise Killed
    stopped = tmp_path / "stopped"
    with pytest.raises(Killed):
        train(TrainConfig(**cfg, out=str(stopped)), log=kill_after_epoch_2)
    on_disk = (stopped / "metrics.jsonl").read_text().splitlines()
    assert torch.load(stopped / "checkpoint.pt", weights_only=True)["epoch"] == 2 and len(on_disk) == 2
    train(TrainConfig(**cfg, out=str(stopped), resume=True), log=lambda *a: None)

    def read(run):
        return ([json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()],
                json.loads((run / "results.json").read_text()))
    (full_rows, full_results), (rows, results) = read(tmp_path / "full"), read(stopped)
    same_but_timings(rows, full_rows, TIMINGS)
    assert all("checkpoint_s" in row and "eval_s" in row for row in rows)
    assert [json.dumps(row) for row in rows[:2]] == on_disk  # the epochs before the stop keep their measured times
    same_but_timings([results], [full_results], RESULT_TIMINGS)
    assert results["checkpoint_time_s"] == sum(row["checkpoint_s"] for row in rows)

    finished = (stopped / "metrics.jsonl").read_text(), results
    train(TrainConfig(**cfg, out=str(stopped), resume=True), log=lambda *a: None)  # a finished run: evaluated again
    assert (stopped / "metrics.jsonl").read_text() == finished[0]
    again = json.loads((stopped / "results.json").read_text())
    same_but_timings([again], [finished[1]], {"wall_time_s"})  # the only field a second evaluation changes


def test_resume_with_an_unreadable_metrics_jsonl_rewrites_it_from_the_checkpoint(tiny_data, tmp_path):
    """metrics.jsonl is only read for the measured times: a damaged one does not block --resume, says so, and
    is rewritten from the checkpoint's history (the last checkpoint's checkpoint_s is then unknown)."""
    cfg = dict(data=str(tiny_data), out=str(tmp_path / "run"), epochs=2, **TINY)
    train(TrainConfig(**cfg), log=lambda *a: None)
    (tmp_path / "run" / "metrics.jsonl").write_text('{"epoch": 1}\nnot json\n')
    logs = []
    train(TrainConfig(**cfg, resume=True), log=logs.append)
    assert any(line.endswith("metrics.jsonl: line 2 is not JSON (Expecting value: line 1 column 1 (char 0)): "
                             "rewritten from the checkpoint's history") for line in logs), logs
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [row["epoch"] for row in rows] == [1, 2] and "checkpoint_s" in rows[0] and "checkpoint_s" not in rows[1]


def test_ddp_two_gloo_processes_agree(tiny_data, tmp_path):
    out = tmp_path / "ddp"
    # timeout: only a hang guard (a loaded 2-core CI machine runs 2 xdist workers beside these 2 ranks);
    # --standalone: a free port of its own (a fixed one could collide with another run on the machine)
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                           str(ROOT / "scripts" / "train.py"), "--data", str(tiny_data), "--epochs", "2", "--res", "32",
                           "--n-train", "12", "--n-test", "4", "--batch-size", "4", "--width", "16", "--modes", "8",
                           "--device", "cpu", "--out", str(out)], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads((out / "results.json").read_text())
    assert results["world_size"] == 2 and results["ddp_ranks_agree"] is True
    assert proc.stdout.count("epoch    1") == 1  # only rank 0 logs


def test_quick_default_reduced_variant(tmp_path):
    """The no-flag command's path (generated KS data in a cache, AMGFNO, results table), made small."""
    proc = run_cli("train.py", "--n-train", 4, "--n-test", 2, "--epochs", 1, "--width", 8, "--batch-size", 4,
                   "--cache-dir", tmp_path / "cache", "--out", tmp_path / "quick", "--fast-kernels", "--device", "cpu",
                   env={"TRITON_INTERPRET": "0"})  # a plain CPU machine, as in the README's main command
    assert proc.returncode == 0, proc.stderr
    assert "the Triton kernels cannot run here (tensors are on cpu" in proc.stdout
    assert "falling back to the PyTorch reference" in proc.stdout
    assert "| amgfno | ks | 0.1 | 32 |" in proc.stdout
    assert len(list((tmp_path / "cache").glob("ks_nu0.1_*.h5"))) == 1
    evaluated = run_cli("evaluate.py", tmp_path / "quick", "--json", tmp_path / "e.json")  # no --data: the run's
    assert evaluated.returncode == 0, evaluated.stderr
    data = json.loads((tmp_path / "e.json").read_text())["data"]
    assert Path(data) == next((tmp_path / "cache").glob("ks_nu0.1_*.h5"))


def test_fast_kernels_train_through_the_triton_ops(tmp_path):
    """--fast-kernels runs the Triton kernels (here in the interpreter) and matches the reference run. Three frames
    (two rollout steps): the interpreter's time goes into the evaluations' rollouts."""
    data = tmp_path / "short.h5"
    write_amg_fast(data, translating_waves(6, T=3), np.arange(64) / 64, np.arange(3) * 0.1,
                   attrs={"pde": "ks", "n_test": 2})
    logs = []
    kw = dict(data=str(data), epochs=1, **{**TINY, "n_train": 4, "n_test": 2, "width": 16, "modes": 4})
    fast = train(TrainConfig(out=str(tmp_path / "fast"), fast_kernels=True, **kw), log=logs.append)
    ref = train(TrainConfig(out=str(tmp_path / "ref"), **kw), log=lambda *a: None)
    assert any("--fast-kernels: running the Triton kernels on cpu" in str(m) for m in logs)
    assert fast["nrmse"] == pytest.approx(ref["nrmse"], rel=1e-3)


def test_evaluate_script_matches_training_results(tiny_data, tmp_path):
    out = tmp_path / "run"
    results = train(TrainConfig(data=str(tiny_data), out=str(out), epochs=2, **TINY), log=lambda *a: None)
    for data in (["--data", tiny_data], []):  # without --data: the run's own
        proc = run_cli("evaluate.py", out / "checkpoint.pt", *data, "--json", tmp_path / "e.json")
        assert proc.returncode == 0, proc.stderr
        assert json.loads((tmp_path / "e.json").read_text())["nrmse"] == pytest.approx(results["nrmse"], rel=1e-6)
    moved = tiny_data.rename(tmp_path / "moved.h5")
    proc = run_cli("evaluate.py", out / "checkpoint.pt")
    assert proc.returncode == 2 and proc.stderr.strip() == (
        f"error: the run trained on {tiny_data} (--data), which is not there now: pass --data FILE"), proc.stderr
    assert run_cli("evaluate.py", out / "checkpoint.pt", "--data", moved).returncode == 0


def test_evaluate_refuses_a_run_data_path_recorded_relative(tiny_data, tmp_path, monkeypatch):
    """A relative --data (or --cache-dir) is relative to where train.py ran, unknown to evaluate.py: refused
    by name rather than looked up (a same-named file elsewhere would be evaluated silently)."""
    monkeypatch.chdir(tmp_path)
    train(TrainConfig(data=tiny_data.name, out="run", epochs=1, **TINY), log=lambda *a: None)
    proc = run_cli("evaluate.py", tmp_path / "run", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.strip() == (
        "error: the run trained on tiny.h5 (--data), a path relative to the directory train.py ran in: "
        "pass --data FILE"), proc.stderr


@pytest.mark.parametrize(
    "change,error,match",
    [
        ({"data": "missing.h5"}, ValueError, "missing.h5: no such file"),
        ({"res": 128}, ValueError, r"resolution must be in 1..64 \(the data's resolution\), got 128"),
        ({"model": "fno"}, ValueError, "unknown model 'fno'"),
        ({"alpha": 0.5}, ValueError, "--alpha applies to --model s4ffno / s4ffno2d only"),
        ({"model": "ffno", "no_freq_gate": True}, ValueError, "apply to --model amgfno / amgfno2d only"),
        ({"epochs": 0}, ValueError, "epochs must be an integer >= 1, got 0"),
        ({"precision": "fp16"}, ValueError, r"precision must be one of \('fp32', 'tf32', 'bf16'\), got 'fp16'"),
        ({"checkpoint_every": 0}, ValueError, "checkpoint_every must be an integer >= 1, got 0"),
        ({"eval_batch_size": -1}, ValueError, "eval_batch_size must be an integer >= 1, got -1"),
        ({"model": "ffno", "omega": 0.5}, ValueError, r"--omega \(a fixed omega_f instead of the data's\) applies "
                                                       "to --model amgfno"),
        ({"omega": -1.0}, ValueError, "omega must be a finite number >= 0"),
    ],
    ids=["missing-file", "res-above-data", "unknown-model", "alpha-with-amgfno", "freq-gate-with-ffno", "epochs-0",
         "precision-fp16", "checkpoint-every-0", "eval-batch-size-negative", "omega-with-ffno", "omega-negative"],
)
def test_bad_configs(tiny_data, tmp_path, change, error, match):
    cfg = TrainConfig(**{**TINY, "data": str(tiny_data), "out": str(tmp_path / "run"), "epochs": 1, **change})
    with pytest.raises(error, match=match):
        train(cfg, log=lambda *a: None)


def test_malformed_data_file(tmp_path):
    bad = tmp_path / "bad.h5"
    bad.write_text("not hdf5")
    proc = run_cli("train.py", "--data", bad, "--epochs", 1, "--out", tmp_path / "run")
    assert proc.returncode == 2 and "bad.h5: not a readable HDF5 file" in proc.stderr


def test_nan_loss_stops_with_the_epoch_and_keeps_the_last_checkpoint(tiny_data, tmp_path, monkeypatch):
    import amg_fast.train.trainer as trainer

    real_loss, calls = trainer._loss, []

    def loss_nan_from_epoch_2(*args):  # 3 batches per epoch: the 4th call is epoch 2
        calls.append(1)
        loss = real_loss(*args)
        return loss * float("nan") if len(calls) > 3 else loss

    monkeypatch.setattr(trainer, "_loss", loss_nan_from_epoch_2)
    out = tmp_path / "run"
    with pytest.raises(TrainingDiverged, match=r"loss is nan at epoch 2; .* last good checkpoint .*checkpoint.pt\) is kept"):
        train(TrainConfig(data=str(tiny_data), out=str(out), epochs=3, **TINY), log=lambda *a: None)
    assert torch.load(out / "checkpoint.pt", weights_only=True)["epoch"] == 1
    assert not (out / "results.json").exists()


def test_run_directory_of_another_run_needs_resume(tiny_data, tmp_path):
    out = tmp_path / "run"
    train(TrainConfig(data=str(tiny_data), out=str(out), epochs=1, **TINY), log=lambda *a: None)
    with pytest.raises(RunDirError, match="already holds a run .* pass --resume"):
        train(TrainConfig(data=str(tiny_data), out=str(out), epochs=1, **TINY), log=lambda *a: None)
    with pytest.raises(RunDirError, match=r"--resume with settings that differ .* width=16 -> 32"):
        train(TrainConfig(**{**TINY, "width": 32}, data=str(tiny_data), out=str(out), epochs=1, resume=True),
              log=lambda *a: None)


@pytest.mark.parametrize("model", ["multi_input_ffno", "s4ffno", "factformer", "gkt", "unet"])
def test_every_registered_model_trains_through_the_script_path(tiny_data, tmp_path, model):
    cfg = TrainConfig(**{**TINY, "modes": None, "width": 8}, model=model, data=str(tiny_data), out=str(tmp_path / model),
                      epochs=1)
    results = train(cfg, log=lambda *a: None)
    assert results["model"] == model and np.isfinite(results["nrmse"]) and results["gate_mean"] is None


def test_modes_refused_for_models_without_fourier_layers(tiny_data, tmp_path):
    with pytest.raises(ValueError, match="--modes applies to models with Fourier layers; --model unet has none"):
        train(TrainConfig(**TINY, model="unet", data=str(tiny_data), out=str(tmp_path / "u"), epochs=1))
    assert not (tmp_path / "u").exists()


def test_precision_modes_train_and_restore_the_matmul_setting(tiny_data, tmp_path, monkeypatch):
    """Each --precision trains (finite, falling loss) and is recorded; tf32 sets TF32 matmuls during
    the run only; bf16 runs the model's forward in bf16 (fp32 master weights) and lands near fp32."""
    from amg_fast.train import trainer

    seen = {}
    real_loss = trainer._loss

    def spying_loss(model, u, omega, omega_mode):
        seen.setdefault("matmul", torch.get_float32_matmul_precision())
        seen.setdefault("autocast_bf16", torch.is_autocast_enabled("cpu")
                        and torch.get_autocast_dtype("cpu") == torch.bfloat16)
        return real_loss(model, u, omega, omega_mode)

    monkeypatch.setattr(trainer, "_loss", spying_loss)
    before = torch.get_float32_matmul_precision()
    results = {}
    for precision in ("fp32", "tf32", "bf16"):
        seen.clear()
        out = tmp_path / precision
        results[precision] = train(TrainConfig(data=str(tiny_data), out=str(out), epochs=4, precision=precision,
                                               **TINY), log=lambda *a: None)
        rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
        assert rows[-1]["train_loss"] < rows[0]["train_loss"] and np.isfinite(results[precision]["nrmse"])
        assert results[precision]["precision"] == precision
        assert seen == {"matmul": "high" if precision == "tf32" else "highest", "autocast_bf16": precision == "bf16"}
        assert torch.get_float32_matmul_precision() == before
        assert all(p.dtype == torch.float32 for p in torch.load(out / "checkpoint.pt", weights_only=True)["model"]
                   .values() if p.is_floating_point())
    assert results["bf16"]["nrmse"] != results["fp32"]["nrmse"]
    assert results["bf16"]["nrmse"] == pytest.approx(results["fp32"]["nrmse"], rel=0.1)


def test_checkpoint_every_and_batched_evaluation(tiny_data, tmp_path):
    """--checkpoint-every 2 over 5 epochs writes after epochs 2, 4 and 5 (the last); evaluation in
    one batch of the whole split gives the per-batch result; the bookkeeping times are recorded."""
    runs = {}
    for name, kw in {"whole": {}, "per-trajectory": {"eval_batch_size": 1}}.items():
        out = tmp_path / name
        runs[name] = train(TrainConfig(data=str(tiny_data), out=str(out), epochs=5, checkpoint_every=2,
                                       **{**TINY, "eval_every": 2}, **kw), log=lambda *a: None)
        rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
        assert [r["epoch"] for r in rows if "checkpoint_s" in r] == [2, 4, 5]
        assert [r["epoch"] for r in rows if "eval_s" in r] == [2, 4, 5]
        assert torch.load(out / "checkpoint.pt", weights_only=True)["epoch"] == 5
        assert runs[name]["eval_time_s"] > 0 and runs[name]["checkpoint_time_s"] > 0
    assert runs["whole"]["nrmse"] == pytest.approx(runs["per-trajectory"]["nrmse"], rel=1e-5)


def test_checkpoint_every_defaults_to_the_presets():
    """Unset, --checkpoint-every is the preset's: every epoch at quick, every 10 at paper (a checkpoint per
    epoch was 12% of a paper run on the H200); a given value wins at either."""
    resolved = {(preset, every): resolve_config(TrainConfig(preset=preset, checkpoint_every=every)).checkpoint_every
                for preset in ("quick", "paper") for every in (None, 3)}
    assert resolved == {("quick", None): 1, ("quick", 3): 3, ("paper", None): 10, ("paper", 3): 3}


def test_the_paper_presets_test_split_per_pde():
    """The paper tests KS on 256 trajectories and Burgers on "10% of the full dataset", PDEBench's
    10,000-trajectory file: 1000 (formerly 228, 10% of the 2048 + 228 generated); --n-test wins."""
    def n_test(pde, **given):
        return resolve_config(TrainConfig(preset="paper", pde=pde, **given)).n_test

    assert (n_test("ks"), n_test("burgers"), n_test("burgers", n_test=50)) == (None, 1000, 50)
    from amg_fast.train.data import _generated_n_test
    assert _generated_n_test(resolve_config(TrainConfig(preset="paper", pde="ks"))) == 256


def test_a_resumed_run_keeps_its_data_counts_when_the_preset_changed(tiny_data, tmp_path, monkeypatch):
    """A run started under an earlier preset resumes on its own trajectory counts (config.json's): the paper
    preset's Burgers test split went from None (228) to 1000, and such a run's --resume was refused
    ("settings that differ ...: n_test=None -> 1000"). Here the quick preset's test split changes from 3 to 2
    between the start and the resume; an explicit --n-test is still compared."""
    from amg_fast.train import config

    import amg_fast.train.trainer as trainer

    out, base = tmp_path / "run", dict(TINY, n_train=None, n_test=None, preset="quick", epochs=2)
    monkeypatch.setitem(config.PRESETS, "quick", {**config.PRESETS["quick"], "n_train": 12, "n_test": 3})
    run_epoch = trainer.run_epoch

    def stopped_in_epoch_2(run, epoch):
        if epoch == 2:
            raise OSError(28, "No space left on device")
        return run_epoch(run, epoch)

    with monkeypatch.context() as patched:
        patched.setattr(trainer, "run_epoch", stopped_in_epoch_2)
        with pytest.raises(OSError):
            train(TrainConfig(data=str(tiny_data), out=str(out), **base), log=lambda *a: None)
    assert RunDir(out).has_checkpoint() and RunDir(out).read_config().n_test == 3
    monkeypatch.setitem(config.PRESETS, "quick", {**config.PRESETS["quick"], "n_train": 12, "n_test": 2})
    with pytest.raises(RunDirError, match=r"settings that differ from the run's config.json: n_test=3 -> 2"):
        train(TrainConfig(data=str(tiny_data), out=str(out), resume=True, **{**base, "n_test": 2}),
              log=lambda *a: None)
    # a run killed before its first checkpoint (config.json only) resumes afresh on its counts, too; one whose
    # config.json was deleted (checkpoint only) resumes as before (review: it raised AttributeError)
    killed, bare = tmp_path / "killed", tmp_path / "bare"
    for run_dir, name in ((killed, "config.json"), (bare, "checkpoint.pt")):
        run_dir.mkdir()
        shutil.copy(out / name, run_dir / name)
    resumed = train(TrainConfig(data=str(tiny_data), out=str(out), resume=True, **base), log=lambda *a: None)
    assert resumed["epochs"] == 2 and RunDir(out).read_config().n_test == 3
    for run_dir in (killed, bare):
        again = train(TrainConfig(data=str(tiny_data), out=str(run_dir), resume=True, **base), log=lambda *a: None)
        assert again["epochs"] == 2 and RunDir(run_dir).read_config().n_test == (3 if run_dir == killed else 2)


def test_omega_overrides_the_datas_omega_f(tiny_data, tmp_path):
    """--omega sets the fixed omega_f of AMGFNO's frequency gate instead of the training data's."""
    out = tmp_path / "run"
    train(TrainConfig(data=str(tiny_data), out=str(out), epochs=1, omega=0.584, **TINY), log=lambda *a: None)
    state = torch.load(out / "checkpoint.pt", weights_only=True)
    assert float(state["model"]["model.gate.omega"]) == pytest.approx(0.584)  # in Normalized, the default


def test_fidelity_options_train_evaluate_and_report_diagnostics(tiny_data, tmp_path):
    """--normalize --increment and the fourierflow backbone options train through the script path;
    results.json carries the one-step, amplitude and train-vs-test diagnostics; evaluate.py
    rebuilds the wrapped model from the checkpoint (statistics restored) and matches."""
    out = tmp_path / "run"
    cfg = TrainConfig(model="amgfno", data=str(tiny_data), out=str(out), epochs=2, normalize=True, increment=True,
                      share_weights=True, weight_norm=True, decoder_input="last_block", **TINY)
    results = train(cfg, log=lambda *a: None)
    saved = json.loads((out / "results.json").read_text())
    assert len(saved["amplitude_per_step"]) == len(saved["one_step_nrmse_per_step"]) == 5
    for key in ("one_step_nrmse", "test_one_step_loss", "train_one_step_loss", "train_nrmse"):
        assert np.isfinite(saved[key]), key
    assert saved["train_eval_trajectories"] == 12
    state = torch.load(out / "checkpoint.pt", weights_only=True)
    assert float(state["model"]["in_std"]) > 0 and "model.blocks.0.spectral.weight" in state["model"]
    assert state["model"]["out_std"] < state["model"]["in_std"]  # increments are smaller than states
    proc = run_cli("evaluate.py", out / "checkpoint.pt", "--data", tiny_data, "--json", tmp_path / "e.json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "e.json").read_text())["nrmse"] == pytest.approx(results["nrmse"], rel=1e-6)


def test_one_step_diagnostics_of_known_models():
    """Shift is exact on translating waves: one-step and rollout errors 0, amplitude 1; Cheater is
    perfect with teacher forcing and not in rollout; scale 0.5 halves the amplitude at each step
    of the rollout, and its one-step error is 0.5."""
    batches, _ = loader()
    exact = evaluate(Shift(), batches, "cpu")
    assert exact.one_step_nrmse < 1e-12 and exact.one_step_loss < 1e-20
    assert np.allclose(exact.amplitude_per_step, 1.0)
    cheat = evaluate(Cheater(), batches, "cpu")
    assert cheat.one_step_nrmse_per_step[:-1].max() < 1e-12 and cheat.nrmse > 0.1
    half = evaluate(Shift(0.5), batches, "cpu")
    assert np.allclose(half.amplitude_per_step, 0.5 ** np.arange(1, 6)) and half.one_step_nrmse == pytest.approx(0.5)


@pytest.mark.parametrize("change,match", [
    ({"model": "factformer", "share_weights": True, "modes": None}, "--share-weights applies to the FFNO family"),
    ({"decoder_input": "mean"}, r"decoder_input must be one of \('stream', 'last_block'\)"),
], ids=["share-with-factformer", "decoder-input-unknown"])
def test_bad_fidelity_configs(tiny_data, tmp_path, change, match):
    cfg = TrainConfig(**{**TINY, "data": str(tiny_data), "out": str(tmp_path / "run"), "epochs": 1, **change})
    with pytest.raises(ValueError, match=match):
        train(cfg, log=lambda *a: None)


def test_the_log_says_where_the_time_outside_the_epochs_goes(tiny_data, tmp_path):
    """train.log's setup line (data; the model built, moved and run once) and final-evaluation line (the test split,
    the last epoch's when that evaluated; the training trajectories): what a run's wall time holds beside its
    epochs' time_s, eval_s and checkpoint_s (the GPU's headline runs: ~11 s of ~80 outside them)."""
    lines = []
    train(TrainConfig(data=str(tiny_data), epochs=2, **{**TINY, "eval_every": 1}, out=str(tmp_path / "r")),
          log=lines.append)
    setup = [re.fullmatch(r"setup (\d+\.\d) s: data (\d+\.\d) s, model \(built, on the device, its first forward\) "
                          r"(\d+\.\d) s", line) for line in lines]
    final = [re.fullmatch(r"final evaluation (\d+\.\d) s: the test split \(the last epoch's\), (\d+) training "
                          r"trajectories \((\d+\.\d) s\), results.json and rollout.npz", line) for line in lines]
    (setup_at, setup), = [(i, m) for i, m in enumerate(setup) if m]
    (final_at, final), = [(i, m) for i, m in enumerate(final) if m]
    assert setup_at < lines.index(next(line for line in lines if line.startswith("epoch    1"))) < final_at, lines
    total, data, model = map(float, setup.groups())
    assert total + 0.1 >= data + model and data >= 0 and model >= 0
    assert float(final[1]) + 0.1 >= float(final[3]) and int(final[2]) == TINY["n_train"], lines
    assert final_at == len(lines) - 1
