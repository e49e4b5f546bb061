"""amg_fast.train.rundir: the results schema (round trip, and every kind of bad results.json
refused naming the file and the field), the statistics computed from a run's history, the
reader of metrics.jsonl, and the run directory as the trainer and the sweep runner use it."""
import json
import statistics
from pathlib import Path

import numpy as np
import pytest
from helpers import run_results

from amg_fast.train.config import TrainConfig
from amg_fast.train import rundir
from amg_fast.train.rundir import (DIAGNOSTICS, ResultsError, RunDir, RunDirError, RunResults, epoch_seconds,
                                   gate_mean_last_epochs)
from amg_fast.train.trainer import train

TINY = dict(res=32, n_train=12, n_test=4, batch_size=4, width=16, modes=8, eval_every=100, device="cpu")


# -- the schema --------------------------------------------------------------------------------
def test_results_round_trip_through_the_file(tmp_path):
    """to_dict -> results.json -> read_results gives equal RunResults; integers written for
    numbers are read as floats; gate_mean and ddp_ranks_agree may be null."""
    results = run_results(gate_mean=0.4, gate_mean_last20_epochs=0.45, ddp_ranks_agree=True, world_size=2)
    run = RunDir(tmp_path)
    run.write_results(results)
    assert run.read_results() == results
    assert RunResults.from_dict(json.loads(run.results_path.read_text())) == results
    values = {**results.to_dict(), "wall_time_s": 12, "nrmse_per_step": [1, 2]}
    typed = RunResults.from_dict(values)
    assert isinstance(typed.wall_time_s, float) and typed.nrmse_per_step == [1.0, 2.0]
    assert all(isinstance(v, float) for v in typed.nrmse_per_step)
    assert RunDir(tmp_path / "none").read_results() is None


def _truncated(path, values):
    text = json.dumps(values, indent=2)
    path.write_text(text[:len(text) // 2])


def _write(path, values):
    path.write_text(json.dumps(values))


BAD_RESULTS = {
    "truncated-text": (_truncated, None, "truncated or not JSON"),
    "empty-file": (lambda p, v: p.write_text(""), None, "truncated or not JSON"),
    "a-list": (lambda p, v: _write(p, [v]), None, "it holds a JSON list, not an object"),
    "missing-keys": (lambda p, v: _write(p, {k: v[k] for k in list(v)[:-2]}), None,
                     "truncated or of an older version: missing world_size, ddp_ranks_agree"),
    "unknown-key": (lambda p, v: _write(p, {**v, "nrsme": 0.1}), None, "unknown fields nrsme"),
    "nrmse-string": (lambda p, v: _write(p, {**v, "nrmse": "0.5"}), "nrmse", "must be a number, got '0.5'"),
    "nrmse-null": (lambda p, v: _write(p, {**v, "nrmse": None}), "nrmse", "must be a number, got None"),
    "params-bool": (lambda p, v: _write(p, {**v, "params": True}), "params", "must be an integer, got True"),
    "params-float": (lambda p, v: _write(p, {**v, "params": 1.5}), "params", "must be an integer, got 1.5"),
    "per-step-empty": (lambda p, v: _write(p, {**v, "nrmse_per_step": []}), "nrmse_per_step",
                       "must be a list of numbers, got []"),
    "per-step-strings": (lambda p, v: _write(p, {**v, "amplitude_per_step": ["1"]}), "amplitude_per_step",
                         "must be a list of numbers"),
    "gate-string": (lambda p, v: _write(p, {**v, "gate_mean": "high"}), "gate_mean",
                    "must be a number or null, got 'high'"),
    "cuda-graph-int": (lambda p, v: _write(p, {**v, "cuda_graph": 1}), "cuda_graph", "must be true or false, got 1"),
    "model-number": (lambda p, v: _write(p, {**v, "model": 3}), "model", "must be a string, got 3"),
}


@pytest.mark.parametrize("case", list(BAD_RESULTS))
def test_a_bad_results_json_is_refused_naming_the_file_and_the_field(tmp_path, case):
    write, field, message = BAD_RESULTS[case]
    run = RunDir(tmp_path)
    write(run.results_path, run_results().to_dict())
    with pytest.raises(ResultsError) as err:
        run.read_results()
    text = str(err.value)
    assert text.startswith(f"{run.results_path}: not a results.json of amg_fast (") and message in text, text
    assert field is None or f"field {field} " in text
    assert "run the same training command with --resume to evaluate the run again" in text


COMMITTED = sorted((Path(__file__).parents[2] / "results").rglob("results.json"))


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: str(p.parent.relative_to(p.parents[3])))
def test_every_committed_results_json_still_reads(path):
    """A schema change must keep committed runs readable (else a sweep retrains them on GPU time):
    a new field goes into rundir.ADDED_LATER with the value its absence means."""
    assert COMMITTED, "no committed results.json found under results/"
    assert RunDir(path.parent).read_results() is not None


def test_a_field_added_later_is_filled_in_for_an_older_file(tmp_path, monkeypatch):
    older = run_results().to_dict()
    del older["ddp_ranks_agree"]
    (tmp_path / "results.json").write_text(json.dumps(older))
    with pytest.raises(ResultsError, match="missing ddp_ranks_agree"):
        RunDir(tmp_path).read_results()
    monkeypatch.setattr(rundir, "ADDED_LATER", {"ddp_ranks_agree": None})
    assert RunDir(tmp_path).read_results().ddp_ranks_agree is None


def test_diagnostics_from_known_per_step_lists():
    """Step 1, step 5 (the last of a shorter rollout), the last step, and the two ratios."""
    r = run_results(nrmse=0.5, nrmse_per_step=[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7],
                    amplitude_per_step=[1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6], train_nrmse=0.4,
                    test_one_step_loss=3.0, train_one_step_loss=1.5)
    assert (r.nrmse_step1, r.nrmse_step5, r.nrmse_last_step) == (0.1, 0.5, 0.7)
    assert (r.amplitude_step5, r.amplitude_last_step) == (1.4, 1.6)
    assert r.train_test_rollout_ratio == pytest.approx(0.8) and r.one_step_loss_ratio == pytest.approx(2.0)
    short = run_results(nrmse_per_step=[0.2, 0.9], amplitude_per_step=[1.0, 3.0])
    assert (short.nrmse_step5, short.amplitude_step5) == (0.9, 3.0)
    assert {name: r.get(name) for name in DIAGNOSTICS} == {name: getattr(r, name) for name in DIAGNOSTICS}
    assert r.get("nrmse") == 0.5 and r.get("no_such_metric") is None and r.get("no_such_metric", 7) == 7


# -- statistics of the history ------------------------------------------------------------------
def test_gate_mean_of_the_last_20_epochs_from_a_known_history():
    """Epochs 1..25 with gate = epoch: the mean of 6..25 is 15.5; rows without a gate are skipped;
    a history shorter than 20 uses every row; no gate at all is None."""
    history = [{"epoch": e, "gate_mean": float(e)} for e in range(1, 26)]
    assert gate_mean_last_epochs(history) == pytest.approx(statistics.fmean(range(6, 26))) == 15.5
    history[-1]["gate_mean"] = None
    assert gate_mean_last_epochs(history) == pytest.approx(statistics.fmean(range(6, 25)))
    assert gate_mean_last_epochs(history, epochs=2) == 24.0  # the window is rows, not gates: 24 and (None)
    short = [{"epoch": 1, "gate_mean": 0.2}, {"epoch": 2, "gate_mean": 0.4}]
    assert gate_mean_last_epochs(short) == pytest.approx(0.3)
    assert gate_mean_last_epochs([{"epoch": 1, "gate_mean": None}]) is None and gate_mean_last_epochs([]) is None


def test_epoch_seconds_sum_each_kind_of_time():
    history = [{"epoch": 1, "time_s": 2.0}, {"epoch": 2, "time_s": 3.0, "eval_s": 0.5, "checkpoint_s": 0.25},
               {"epoch": 3, "time_s": 4.0, "checkpoint_s": 0.25}]
    assert epoch_seconds(history) == {"train_time_s": 9.0, "eval_time_s": 0.5, "checkpoint_time_s": 0.5}
    assert epoch_seconds([]) == {"train_time_s": 0.0, "eval_time_s": 0.0, "checkpoint_time_s": 0.0}


# -- metrics.jsonl and config.json ---------------------------------------------------------------
def test_metrics_round_trip_and_a_bad_line_named(tmp_path):
    run = RunDir(tmp_path)
    history = [{"epoch": 1, "train_loss": 2.0, "gate_mean": None}, {"epoch": 2, "train_loss": 1.0, "gate_mean": 0.3}]
    run.write_metrics(history)
    assert run.read_metrics() == history and RunDir(tmp_path / "none").read_metrics() == []
    run.metrics_path.write_text(run.metrics_path.read_text() + '{"epoch": 3, "train_lo\n')
    with pytest.raises(RunDirError, match=r"metrics.jsonl: line 3 is not JSON"):
        run.read_metrics()
    run.metrics_path.write_text('{"epoch": 1}\n[1, 2]\n')
    with pytest.raises(RunDirError, match=r"metrics.jsonl: line 2 is not an epoch's metrics"):
        run.read_metrics()


def test_config_round_trip_and_a_foreign_config_named(tmp_path):
    run = RunDir(tmp_path)
    assert run.read_config() is None
    cfg = TrainConfig(model="s4ffno", fusion="convex", alpha=0.25, width=8)
    run.write_config(cfg)
    assert run.read_config() == cfg
    run.config_path.write_text('{"modle": "ffno"}')
    with pytest.raises(RunDirError, match=r"config.json: not a training config \(unknown training settings"):
        run.read_config()
    run.config_path.write_text('{"model": ')
    with pytest.raises(RunDirError, match=r"config.json: unreadable"):
        run.read_config()


# -- the trainer and the sweep runner ----------------------------------------------------------
def test_a_run_writes_what_the_reader_reads_and_evaluates_the_test_split_once(tiny_data, tmp_path, monkeypatch):
    """train() returns what results.json holds; the final evaluation reuses the last epoch's test
    evaluation (one test and one train pass after the last epoch, not two test passes); the
    rollout file and the statistics agree with metrics.jsonl."""
    import amg_fast.train.trainer as trainer

    calls = []
    real_evaluate = trainer.evaluate
    monkeypatch.setattr(trainer, "evaluate", lambda *a, **k: calls.append(1) or real_evaluate(*a, **k))
    out = tmp_path / "run"
    returned = train(TrainConfig(data=str(tiny_data), out=str(out), epochs=3, **TINY), log=lambda *a: None)
    assert len(calls) == 2  # eval_every 100: the last epoch's test evaluation + the train trajectories
    run = RunDir(out)
    results, history = run.read_results(), run.read_metrics()
    assert results.to_dict() == returned and results.nrmse == history[-1]["test_nrmse"]
    assert results.one_step_nrmse == history[-1]["test_one_step_nrmse"]
    assert results.gate_mean_last20_epochs == gate_mean_last_epochs(history)
    assert results.train_time_s == pytest.approx(sum(row["time_s"] for row in history))
    pred, true = run.read_rollout()
    assert pred.shape == true.shape == (4, 5, 32)
    per_step = np.linalg.norm(pred - true, axis=-1) / np.linalg.norm(true, axis=-1)
    assert results.nrmse_per_step == pytest.approx(per_step.mean(0).tolist(), rel=1e-5)
    assert run.read_config().epochs == 3 and run.read_checkpoint()["epoch"] == 3


def test_a_corrupt_results_json_is_rebuilt_by_resume(tiny_data, tmp_path):
    """What the refusal advises works: delete results.json, --resume evaluates again from the checkpoint."""
    out = tmp_path / "run"
    cfg = dict(data=str(tiny_data), out=str(out), epochs=1, **TINY)
    first = train(TrainConfig(**cfg), log=lambda *a: None)
    run = RunDir(out)
    run.results_path.write_text('{"nrmse": 0.')
    with pytest.raises(ResultsError, match="truncated or not JSON"):
        run.read_results()
    run.results_path.unlink()
    again = train(TrainConfig(**cfg, resume=True), log=lambda *a: None)
    assert run.read_results().nrmse == pytest.approx(first["nrmse"], rel=1e-6) == again["nrmse"]


def test_the_sweep_record_of_a_run_with_a_corrupt_results_json_says_why(tmp_path):
    from amg_fast.experiments.runner import read_record

    run = RunDir(tmp_path / "run")
    run.path.mkdir()
    run.write_metrics([{"epoch": 1, "train_loss": 1.0}])
    run.results_path.write_text(json.dumps({**run_results().to_dict(), "nrmse": "bad"}))
    record = read_record(run.path)
    assert record["results"] is None and record["history"] == [{"epoch": 1, "train_loss": 1.0}]
    assert "field nrmse must be a number, got 'bad'" in record["error"]
    run.write_results(run_results(nrmse=0.25))
    record = read_record(run.path)
    assert record["results"].nrmse == 0.25 and record["error"] is None and record["status"] == "done"
