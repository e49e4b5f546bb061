"""The sweep machinery of scripts/reproduce.py: run selection (counts, filters, shared runs), run
states and the job that trains one run, the local launcher end to end, kill -9 and rerun, the
Slurm path through submitit's local executor, and every bad input."""
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from amg_fast.experiments import runner
from amg_fast.experiments.registry import EXPERIMENTS
from amg_fast.experiments.specs import RunSpec
from amg_fast.experiments.sweep import parse_where, select_runs

ROOT = Path(__file__).parents[2]
# Two cheap runs that share their data set: FFNO and AMGFNO, KS nu = 0.1, f = 32.
PAIR = ["--where", "model=ffno,amgfno", "pde=ks", "nu=0.1", "res=32"]


def reproduce(*args, **kw):
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "reproduce.py"), *map(str, args)],
                          capture_output=True, text=True, **kw)


def test_list_counts_the_papers_runs():
    proc = reproduce("list")
    assert proc.returncode == 0, proc.stderr
    counts = {line.split()[0]: int(line.split()[1]) for line in proc.stdout.splitlines()}
    assert counts == {"alpha-convex": 45, "alpha-additive": 45, "table2": 84, "table3": 12, "omega-ablation": 9,
                      "freq-gate-ablation": 12, "headline": 12, "fidelity": 14, "precision": 3, "ns2d": 24}


def test_shared_runs_are_selected_once_and_filters_apply():
    assert len(select_runs(["table2", "table3"])) == 84  # Table 3 reads Table 2's AMGFNO runs
    # the paper's six: 195 runs before additive alpha = 1 became Table 2's residual S4FFNO (9 KS settings)
    paper = ["alpha-convex", "alpha-additive", "table2", "table3", "omega-ablation", "freq-gate-ablation"]
    assert len(select_runs(paper)) == 195 - 9
    # headline: 6 runs of its own (raw and norm-inc at f = 32) + Table 2's (f = 128, Burgers: the defaults);
    # fidelity: 14 - 3 base and 3 norm-inc (headline's); precision: 2 (fp32 raw is headline's AMGFNO);
    # ns2d: 24 of its own
    assert len(select_runs(["all"])) == 186 + 6 + 8 + 2 + 24
    assert len(select_runs(["table2"], seeds=(0, 1, 2))) == 3 * 84
    kept = select_runs(["table2", "alpha-convex"], where=parse_where(["res=32", "nu=0.1", "alpha=0,1"]))
    assert {s.res for s in kept} == {32} and {s.nu for s in kept if s.pde == "ks"} == {0.1}
    assert sorted(s.alpha for s in kept if s.fusion == "convex") == [0.0, 1.0]
    assert sum(s.fusion == "residual" for s in kept) == 7  # Table 2 has no alpha: kept (Burgers: nu 0.001)
    names = [s.name for s in select_runs(["all"])]
    assert len(names) == len(set(names))


def test_paper_omega_source_gives_amgfno_the_papers_value():
    from amg_fast.experiments import paper

    spec = next(s for s in EXPERIMENTS["table3"].runs(omega_from="paper") if (s.pde, s.nu, s.res) == ("ks", 0.1, 32))
    assert spec.omega == paper.OMEGA_F[("ks", 0.1, 32)] and "omega" in spec.name
    assert all(s.omega is None for s in EXPERIMENTS["omega-ablation"].runs(omega_from="paper"))


@pytest.mark.parametrize("args,message", [
    (["plan", "tabel2", "--preset", "smoke"], "unknown experiment 'tabel2'; available: alpha-convex"),
    (["plan", "table2", "--preset", "smoke", "--where", "colour=red"], "--where: unknown key 'colour'; keys: model"),
    (["plan", "table2", "--preset", "smoke", "--where", "model=fno"], "--where model: unknown value 'fno'"),
    (["plan", "table2", "--preset", "smoke", "--where", "res=big"], "--where res: 'big' is not a number"),
    (["plan", "table2", "--preset", "smoke", "--where", "res"], "--where takes KEY=V1,V2"),
    (["run", "table2", "--preset", "smoke", "--workers", "0"] + PAIR, "--workers must be an integer >= 1, got 0"),
    (["run", "table2", "--preset", "smoke", "--launcher", "slurm"] + PAIR, "needs Slurm's sbatch on PATH"),
    (["run", "table2", "--preset", "smoke", "--launcher", "slurm", "--max-requeues", "-1"] + PAIR,
     "--max-requeues must be an integer >= 0, got -1"),
], ids=["experiment", "where-key", "where-value", "where-number", "where-form", "workers", "slurm-without-sbatch",
        "max-requeues"])
def test_bad_input_is_refused_with_a_message(tmp_path, args, message):
    out = tmp_path / "sweep"
    proc = reproduce(*args, "--out", out)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert not out.exists()  # nothing written, nothing started


def test_omega_refuses_a_bad_nu_before_its_table():
    """Formerly the table's header, then `error: nu must be ...` from the generator."""
    proc = reproduce("omega", "--nu", "0.1", "-1", "--n", "2")
    assert proc.returncode == 2 and "error: --nu must be finite numbers > 0, got -1.0" in proc.stderr, proc.stderr
    assert proc.stdout == ""


def test_a_sweep_directory_keeps_one_preset(tmp_path):
    runner.prepare_sweep(tmp_path, "smoke")
    with pytest.raises(runner.SweepError, match="holds runs of preset 'smoke'; run with --preset smoke"):
        runner.prepare_sweep(tmp_path, "cpu")


def test_run_states_and_the_job_lock(tmp_path, monkeypatch):
    """missing -> running while another process holds the lock -> failed (error recorded) after an
    error once its run directory exists (what the attempt wrote there is removed) -> done when retried."""
    from amg_fast.train.rundir import RunDir

    spec = RunSpec("ffno", "ks", 0.1, 32)
    run_dir = runner.write_job(tmp_path, spec, "smoke")
    assert runner.run_state(run_dir) == "missing"
    with runner._lock(run_dir):  # another process trains it
        assert runner.run_state(run_dir) == "running"
        assert runner.run_job(str(run_dir)) == "running" and not (run_dir / "config.json").exists()

    def disk_full(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(RunDir, "write_metrics", disk_full)
    assert runner.run_job(str(run_dir)) == "failed" and runner.run_state(run_dir) == "failed"
    assert not (run_dir / "config.json").exists()  # no checkpoint yet: the failed attempt's files are removed
    assert "No space left on device" in json.loads((run_dir / "error.json").read_text())["error"]
    monkeypatch.undo()
    runner.write_job(tmp_path, spec, "smoke")  # the same sweep again
    assert runner.run_job(str(run_dir)) == "done" and runner.run_state(run_dir) == "done"
    assert not (run_dir / "error.json").exists()
    assert len(list((tmp_path / "data").glob("*.h5"))) == 1


def _results(out):
    return {d.name: json.loads((d / "results.json").read_text())["nrmse"] for d in sorted((out / "runs").iterdir())}


def test_local_sweep_end_to_end_with_report(tmp_path):
    out = tmp_path / "sweep"
    proc = reproduce("run", "table2", "table3", "--preset", "smoke", "--out", out, "--workers", "2", *PAIR)
    assert proc.returncode == 0, proc.stderr
    assert "2 of 2 runs done" in proc.stdout
    assert len(list((out / "data").glob("*.h5"))) == 1  # one data set, generated once for both workers
    mtimes = {d.name: (d / "results.json").stat().st_mtime for d in (out / "runs").iterdir()}
    again = reproduce("run", "table2", "--preset", "smoke", "--out", out, *PAIR)
    assert again.returncode == 0 and {d.name: (d / "results.json").stat().st_mtime
                                      for d in (out / "runs").iterdir()} == mtimes  # finished runs untouched
    plan = reproduce("plan", "table2", "--preset", "smoke", "--out", out, *PAIR)
    assert plan.stdout.count("done ") == 2 and plan.stdout.startswith("2 runs at preset smoke (2 done)")
    done_rows = [line for line in plan.stdout.splitlines() if line.startswith("done ")]
    assert all(re.match(r"done +took \d+ s  \S+$", line) for line in done_rows), done_rows  # measured, not estimated
    assert "by experiment: table2 2" in plan.stdout
    status = reproduce("status", "--out", out)
    assert "2 runs: 2 done" in status.stdout
    report = reproduce("report", "table2", "--out", out)
    assert report.returncode == 0, report.stderr
    rows = (out / "reports" / "table2" / "table.csv").read_text().splitlines()
    header = rows[0].split(",")
    table = {r.split(",")[header.index("model")]: float(r.split(",")[header.index("nrmse")]) for r in rows[1:]
             if r.split(",")[header.index("status")] == "done"}
    results = _results(out)
    assert table == pytest.approx({"ffno": results["ffno_ks_nu0.1_f32_seed0"],
                                   "amgfno": results["amgfno_ks_nu0.1_f32_seed0"]}, rel=1e-6)
    files = {}
    for name in ("table.md", "table.tex", "bars_by_f_nu0.1.png", "bars_by_f_nu0.1.pdf"):
        files[name] = (out / "reports" / "table2" / name).read_bytes()
        assert files[name]
    assert reproduce("report", "table2", "--out", out).returncode == 0  # a committed report stays as it is
    assert {name: (out / "reports" / "table2" / name).read_bytes() for name in files} == files  # (PDF dates)


def test_kill_9_of_the_sweep_then_rerun_gives_the_uninterrupted_results(tmp_path):
    """Driver and workers killed while the second run trains; the same command finishes the sweep,
    leaves the finished run untouched and gives the results of an uninterrupted sweep."""
    args = ["run", "table2", "--preset", "smoke", "--where", "model=ffno,s4ffno,amgfno", "pde=ks", "nu=0.1",
            "res=32", "--workers", "1"]
    reference = reproduce(*args, "--out", tmp_path / "whole")
    assert reference.returncode == 0, reference.stderr
    out = tmp_path / "killed"
    proc = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "reproduce.py"), *args, "--out", str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 600  # 120 s was not always enough on a loaded 2-core CI machine (xdist)
    while time.monotonic() < deadline and proc.poll() is None:
        dirs = list((out / "runs").glob("*")) if (out / "runs").exists() else []
        done = [d for d in dirs if (d / "results.json").exists()]
        started = [d for d in dirs if (d / "metrics.jsonl").exists() and not (d / "results.json").exists()]
        if done and started:
            break
        time.sleep(0.05)
    else:
        proc.kill()
        pytest.fail("the sweep never had one run done and another started"
                    + (f" (it exited first, code {proc.returncode})" if proc.returncode is not None else ""))
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    finished = {d.name: (d / "results.json").stat().st_mtime for d in done}
    rerun = reproduce(*args, "--out", out)
    assert rerun.returncode == 0, rerun.stderr
    assert {name: (out / "runs" / name / "results.json").stat().st_mtime for name in finished} == finished
    assert _results(out) == pytest.approx(_results(tmp_path / "whole"), rel=1e-5)


def _submitit_report(jobs, run_dirs) -> str:
    """Each job's state and logs, and each run directory's state and train.log / error.json."""
    lines = []
    for job in jobs:
        lines += [f"job {job.job_id}: {job.state}", f"stdout:\n{job.stdout()}", f"stderr:\n{job.stderr()}"]
    for d in run_dirs:
        lines.append(f"{d.name}: {runner.run_state(d)}")
        lines += [f"{name}:\n{(d / name).read_text()[-3000:]}" for name in ("train.log", "error.json")
                  if (d / name).exists()]
    return "\n".join(lines)


@pytest.fixture
def submitted(monkeypatch):
    """The submitit jobs that run_slurm submits (in order), to wait on them."""
    import submitit

    jobs, map_array = [], submitit.AutoExecutor.map_array

    def keep_jobs(self, *args, **kw):
        new = map_array(self, *args, **kw)
        jobs.extend(new)
        return new

    monkeypatch.setattr(submitit.AutoExecutor, "map_array", keep_jobs)
    return jobs


def test_slurm_path_with_submitits_local_executor(tmp_path, submitted):
    """The same job function through submitit (its local executor stands in for a cluster), and the
    sbatch options the sweep's parameters produce."""
    from submitit.slurm import slurm

    jobs = submitted
    run_dirs = [runner.write_job(tmp_path, RunSpec("ffno", "ks", 0.1, 32, seed=s), "smoke") for s in (0, 1)]
    ids = runner.run_slurm(run_dirs, tmp_path / "slurm", cluster="local", time_min=15, cpus_per_task=1)
    assert ids == [job.job_id for job in jobs] and len(ids) == 2
    # Wait until both jobs have exited, however loaded the machine (a fixed 180 s was too short on a
    # 2-core CI machine running the suite on 2 xdist workers); the ceiling only catches a hang.
    deadline = time.monotonic() + 900
    try:
        while time.monotonic() < deadline and not all(job.done() for job in jobs):
            time.sleep(0.5)
        assert all(runner.run_state(d) == "done" for d in run_dirs), _submitit_report(jobs, run_dirs)
    finally:
        for job in jobs:
            if not job.done():
                job.cancel()  # a hung job does not outlive the test
    assert [job.result() for job in jobs] == ["done", "done"]
    assert runner.run_slurm(run_dirs, tmp_path / "slurm", cluster="local") == []  # nothing left to submit
    params = runner.slurm_parameters(partition="gpu", time_min=90, gpus_per_task=1, cpus_per_task=8,
                                     array_parallelism=16, extra_sbatch={"account": "proj"})
    sbatch = slurm._make_sbatch_string(command="python job.py", folder=tmp_path, map_count=195,
                                       **{k.removeprefix("slurm_"): v for k, v in params.items()
                                          if k not in ("timeout_min", "tasks_per_node")},
                                       time=params["timeout_min"], ntasks_per_node=params["tasks_per_node"])
    for option in ("--partition=gpu", "--time=90", "--gpus-per-task=1", "--cpus-per-task=8", "--array=0-194%16",
                   "--account=proj"):
        assert f"#SBATCH {option}" in sbatch


def _children(pid: int) -> set[int]:
    """The live processes whose parent is pid (Linux /proc)."""
    kids = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()  # after "(comm)": state, ppid, ...
        except (OSError, IndexError):
            continue
        if fields[1] == str(pid) and fields[0] != "Z":
            kids.add(int(stat.parent.name))
    return kids


def _epochs(run_dir: Path) -> list[int]:
    path = run_dir / "metrics.jsonl"
    return [json.loads(line)["epoch"] for line in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.timeout(600)
def test_slurm_job_at_its_time_limit_is_requeued_and_resumes_from_its_checkpoint(tmp_path, submitted):
    """A job signalled as Slurm signals one nearing --time (SIGUSR2 to the job's process; here sent
    by the test mid-training, where submitit's local controller would send it at its own timeout)
    is requeued by submitit and resumes its run from the checkpoint: every epoch is trained once
    (metrics.jsonl runs 1..E, no restart from epoch 1), and a finished run is never trained again."""
    from amg_fast.experiments.slurm_job import RequeueableRun

    jobs, epochs = submitted, 40
    run_dir = runner.write_job(tmp_path, RunSpec("ffno", "ks", 0.1, 32), "smoke")
    job_file = json.loads((run_dir / runner.JOB_FILE).read_text())
    job_file["config"]["epochs"] = epochs  # smoke-size epochs (~0.1 s), enough of them to interrupt one
    (run_dir / runner.JOB_FILE).write_text(json.dumps(job_file))
    deadline = time.monotonic() + 500  # only catches a hang: a loaded 2-core machine is slow, not stuck

    def wait_for(condition, what):
        while not condition():
            if time.monotonic() > deadline or jobs[0].done():
                pytest.fail(f"waiting for {what}:\n" + _submitit_report(jobs, [run_dir]))
            time.sleep(0.02)

    try:
        # --time 5: a signal at any time counts as a timeout (submitit: after min(0.8 x 5, 5 - 10) minutes)
        assert len(runner.run_slurm([run_dir], tmp_path / "slurm", cluster="local", time_min=5, cpus_per_task=1,
                                    max_requeues=1)) == 1
        assert isinstance(jobs[0].submission().function, RequeueableRun)
        controller = jobs[0]._process.pid
        wait_for(lambda: len(_epochs(run_dir)) >= 2 and _children(controller), "epoch 2 of the job's task process")
        os.kill(next(iter(_children(controller))), signal.SIGUSR2)
        deadline = time.monotonic() + 500
        while time.monotonic() < deadline and not jobs[0].done():
            time.sleep(0.1)
        assert jobs[0].result() == "done", _submitit_report(jobs, [run_dir])
    finally:
        if not jobs[0].done():
            jobs[0].cancel()  # a hung job does not outlive the test
    log = jobs[0].stdout()
    assert "Job has timed out" in log and "Requeued job" in log and "(0 remaining timeouts)" in log, log
    assert runner.run_state(run_dir) == "done"
    assert _epochs(run_dir) == list(range(1, epochs + 1))  # each epoch once: continued, never restarted
    resumed = re.findall(r"resumed \S+ after epoch (\d+)", (run_dir / runner.LOG_FILE).read_text())
    assert len(resumed) == 1 and 2 <= int(resumed[0]) < epochs, resumed
    finished = (run_dir / "results.json").stat().st_mtime
    assert RequeueableRun()(str(run_dir)) == "done"  # a requeued job of a finished run trains nothing
    assert runner.run_slurm([run_dir], tmp_path / "slurm", cluster="local") == []
    assert (run_dir / "results.json").stat().st_mtime == finished


def test_a_job_not_requeued_again_leaves_a_failed_run_that_resumes(tmp_path, monkeypatch):
    """After --max-requeues timeouts submitit raises UncompletedJobError in the job instead of
    requeuing it (from its signal handler, in the middle of training): run_job records the run as
    failed, its checkpoint kept, and the next job of the run resumes from that checkpoint."""
    from submitit.core.utils import UncompletedJobError

    from amg_fast.train import trainer

    run_dir = runner.write_job(tmp_path, RunSpec("ffno", "ks", 0.1, 32), "smoke")
    job_file = json.loads((run_dir / runner.JOB_FILE).read_text())
    job_file["config"]["epochs"] = 4
    (run_dir / runner.JOB_FILE).write_text(json.dumps(job_file))
    run_epoch = trainer.run_epoch

    def timed_out_in_epoch_3(run, epoch):
        if epoch == 3:
            raise UncompletedJobError("Job not requeued because: timed-out too many times.")
        return run_epoch(run, epoch)

    monkeypatch.setattr(trainer, "run_epoch", timed_out_in_epoch_3)
    assert runner.run_job(str(run_dir)) == "failed" and runner.run_state(run_dir) == "failed"
    assert "timed-out too many times" in json.loads((run_dir / runner.ERROR_FILE).read_text())["error"]
    assert torch.load(run_dir / "checkpoint.pt", weights_only=True)["epoch"] == 2
    monkeypatch.undo()
    assert runner.run_job(str(run_dir)) == "done"
    assert _epochs(run_dir) == [1, 2, 3, 4]
    assert "after epoch 2" in (run_dir / runner.LOG_FILE).read_text()


def test_cpu_workers_share_the_cores(tmp_path, monkeypatch):
    """Each of N CPU workers gets cpu_count // N torch threads (oversubscribing the cores made 2
    workers 3-6x slower on the 2-core machine); a GPU worker gets its own CUDA_VISIBLE_DEVICES."""
    seen = []

    class Worker:  # a worker process that exits at once
        def __init__(self, cmd, env, **kw):
            seen.append(env)

        def wait(self):
            return 0

    monkeypatch.setattr(runner.subprocess, "Popen", Worker)
    monkeypatch.setattr(runner.os, "cpu_count", lambda: 8)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    run_dirs = [runner.write_job(tmp_path, RunSpec("ffno", "ks", 0.1, 32, seed=s), "smoke") for s in (0, 1)]
    monkeypatch.setattr(runner, "visible_gpus", lambda: [])
    runner.run_local(run_dirs, workers=2)
    assert [env["OMP_NUM_THREADS"] for env in seen] == ["4", "4"]
    seen.clear()
    monkeypatch.setattr(runner, "visible_gpus", lambda: ["0", "1"])
    runner.run_local(run_dirs, runs_per_gpu=1)
    assert sorted(env["CUDA_VISIBLE_DEVICES"] for env in seen) == ["0", "1"]
    assert all("OMP_NUM_THREADS" not in env for env in seen)


@pytest.mark.parametrize("command", [["status"], ["report", "table2"]], ids=["status", "report"])
def test_status_and_report_need_a_sweep_directory(tmp_path, command):
    out = tmp_path / "nothing"
    proc = reproduce(*command, "--out", out)
    assert proc.returncode == 2 and "is not a sweep directory" in proc.stderr and not out.exists()


@pytest.mark.parametrize("writer", ["runner", "reports"])
def test_sweep_and_report_writers_remove_dead_writers_temp_files(writer, tmp_path):
    """A killed writer's <name>.tmp-<pid> is removed by the next write of the same file; a live
    process's temp file (this one's pid) is left alone."""
    import os

    from amg_fast.experiments import reports, runner

    target = tmp_path / "sweep.json"
    dead, live = tmp_path / "sweep.json.tmp-999999999", tmp_path / f"sweep.json.tmp-{os.getppid()}"
    dead.write_text("partial"), live.write_text("partial")
    if writer == "runner":
        runner._write_json(target, {"a": 1})
    else:
        reports._write_atomic(target, '{"a": 1}\n')
    assert json.loads(target.read_text()) == {"a": 1}
    assert not dead.exists() and live.exists()


def test_an_ns2d_sweep_generates_2d_data_trains_and_reports(tmp_path):
    """The engine's 2D path: the run's job generates the sweep's ns2d data set (the smoke preset's
    64 x 64 solve), trains AMGFNO2d and reports its gate per f."""
    out = tmp_path / "ns2d"
    where = ["--where", "model=amgfno2d", "nu=0.0001", "res=16,32"]
    proc = reproduce("run", "ns2d", "--preset", "smoke", "--out", out, "--device", "cpu", *where)
    assert proc.returncode == 0, proc.stderr
    assert "2 of 2 runs done" in proc.stdout
    assert [p.name for p in (out / "data").glob("*.h5")] == ["ns2d_nu0.0001_N64_tend2_frames3_train4_test2_seed0.h5"]
    results = json.loads((out / "runs" / "amgfno2d_ns2d_nu0.0001_f16_seed0" / "results.json").read_text())
    assert (results["model"], results["pde"], results["res"]) == ("amgfno2d", "ns2d", 16)
    assert 0 <= results["gate_mean_last20_epochs"] < 1
    report = reproduce("report", "ns2d", "--out", out)
    assert report.returncode == 0, report.stderr
    table = (out / "reports" / "ns2d" / "table.md").read_text()
    assert "| NS2D ν=0.0001 | 16 |" in table and "| NS2D ν=0.0001 | 32 |" in table
    assert (out / "reports" / "ns2d" / "gate_vs_f.png").stat().st_size > 0
