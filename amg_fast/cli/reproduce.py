"""Reproduce the paper's tables and figures: one command per artefact, resumable, local or Slurm.

  reproduce.py list
  reproduce.py plan EXP... --preset P --out DIR [--where KEY=V1,V2 ...] [--seeds 0 1 2]
  reproduce.py run EXP... --preset P --out DIR [filters] [--launcher local|slurm] [--workers N]
               [--runs-per-gpu K] [--device D] [--fast-kernels] [--cuda-graph] [--omega-from data|paper]
               [--launcher slurm --time MIN --max-requeues N ...]
  reproduce.py status --out DIR
  reproduce.py report EXP... --out DIR [--omega-from data|paper]

EXP: experiment ids from `list`, or all. A run that several experiments need is trained once.
Presets: paper (the paper's protocol, as train.py --preset paper), cpu (a small scale for a 2-core
CPU), smoke (seconds per run). Runs live in DIR/runs/<name>/ with train.py's files; finished runs
are never redone, partial ones resume, failed ones are retried by the next `run`; reports go to
DIR/reports/<EXP>/ (table.md, table.csv, table.tex, figures as PNG and PDF). Ctrl-C stops a local
sweep (each run keeps its last checkpoint) and prints the command that continues it; a Slurm job
that reaches --time is requeued and resumes from its checkpoint.

Example (CPU, about 10 minutes): reproduce.py run table2 --preset cpu --out sweeps/cpu
    --where model=ffno,s4ffno,amgfno pde=ks nu=0.1 res=32 && reproduce.py report table2 --out sweeps/cpu
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from amg_fast._interrupt import command_line, run_interruptible
from amg_fast.experiments import runner
from amg_fast.experiments.registry import EXPERIMENTS, OMEGA_SOURCES
from amg_fast.experiments.specs import FILTER_KEYS, PRESETS
from amg_fast.experiments.sweep import parse_where, plan, records_for, resolve_experiments, select_runs

__all__ = ["parse_args", "cmd_list", "cmd_plan", "cmd_run", "cmd_status", "cmd_report", "main"]


def _selection(p: argparse.ArgumentParser, preset: bool = True) -> None:
    p.add_argument("experiments", nargs="+", metavar="EXP", help="experiment ids (see `list`) or all")
    p.add_argument("--out", required=True, type=Path, help="the sweep directory")
    if preset:
        p.add_argument("--preset", required=True, choices=tuple(PRESETS), help="scale of every run")
    p.add_argument("--where", nargs="+", metavar="KEY=V1,V2",
                   help=f"keep runs whose KEY is one of the values; keys: {', '.join(FILTER_KEYS)} (runs "
                        "without the key are kept)")
    p.add_argument("--seeds", nargs="+", type=int, default=[0], help="seeds of every run (default 0)")
    p.add_argument("--omega-from", default="data", choices=OMEGA_SOURCES,
                   help="AMGFNO's fixed omega_f: the training data's (default) or the paper's values")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="one line per experiment: id, runs, the paper artefact")
    _selection(sub.add_parser("plan", help="the runs, their state (done / partial / missing ...) and the cost"))
    run = sub.add_parser("run", help="train the runs that are not done")
    _selection(run)
    run.add_argument("--launcher", default="local", choices=("local", "slurm"),
                     help="local: a pool of worker processes (default); slurm: one job array through submitit")
    run.add_argument("--workers", type=int, help="local: runs at once on CPU (default 1), or at most this many "
                                                 "on GPUs")
    run.add_argument("--runs-per-gpu", type=int, default=1, help="local: runs at once on each visible GPU (default 1)")
    run.add_argument("--device", default="auto", help="torch device of every run (default auto)")
    run.add_argument("--fast-kernels", action="store_true", help="train with the Triton kernels (train.py --fast-kernels)")
    run.add_argument("--cuda-graph", action="store_true", help="replay each training step from a CUDA graph")
    run.add_argument("--partition", help="slurm: partition")
    run.add_argument("--time", type=int, default=240, help="slurm: minutes per run (default 240)")
    run.add_argument("--gpus-per-task", type=int, default=1, help="slurm: GPUs per run (default 1)")
    run.add_argument("--cpus-per-task", type=int, default=4, help="slurm: CPUs per run (default 4)")
    run.add_argument("--array-parallelism", type=int, default=64, help="slurm: runs at once (default 64)")
    run.add_argument("--sbatch", nargs="+", metavar="KEY=VALUE", default=[],
                     help="slurm: extra sbatch options, e.g. account=myproj qos=high")
    run.add_argument("--max-requeues", type=int, default=runner.MAX_REQUEUES,
                     help="slurm: times a run's job that reaches --time is requeued, resuming from the run's last "
                          f"checkpoint (submitit's slurm_max_num_timeout; default {runner.MAX_REQUEUES}: up to "
                          f"{runner.MAX_REQUEUES + 1} x --time per run; preemptions are not counted)")
    status = sub.add_parser("status", help="how many runs are done / running / partial / failed, and the errors")
    status.add_argument("--out", required=True, type=Path, help="the sweep directory")
    report = sub.add_parser("report", help="tables and figures from the finished runs")
    report.add_argument("experiments", nargs="+", metavar="EXP", help="experiment ids or all")
    report.add_argument("--out", required=True, type=Path, help="the sweep directory")
    report.add_argument("--omega-from", default="data", choices=OMEGA_SOURCES, help="as given to run")
    return p.parse_args(argv)


def cmd_list(_args) -> int:
    for exp in EXPERIMENTS.values():
        print(f"{exp.id:20s} {len(exp.runs()):3d} runs  {exp.artefact}")
    return 0


def _specs(args):
    return select_runs(args.experiments, seeds=args.seeds, omega_from=args.omega_from, where=parse_where(args.where))


def cmd_plan(args) -> int:
    specs = _specs(args)
    result = plan(args.out, specs, args.preset)
    for spec, state in result["runs"]:
        print(f"{state:8s} {spec.name}")
    counts = ", ".join(f"{n} {state}" for state, n in result["counts"].items() if n)
    source = "the mean of the sweep's finished runs" if result["from_finished_runs"] else f"preset {args.preset}"
    print(f"{len(specs)} runs: {counts or 'none'}; to do: ~{result['estimate_s'] / 60:.0f} min on one worker "
          f"(~{result['seconds_per_run']:.0f} s a run, from {source})")
    return 0


def _sbatch_options(items: list[str]) -> dict:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--sbatch takes KEY=VALUE, got {item!r}")
        out[key] = value
    return out


def cmd_run(args) -> int:
    specs = _specs(args)
    sbatch = _sbatch_options(args.sbatch)
    if args.launcher == "slurm":  # checked before anything is written
        runner.check_max_requeues(args.max_requeues)
        runner.check_slurm()
    else:
        runner.check_worker_counts(args.workers, args.runs_per_gpu)
    runner.prepare_sweep(args.out, args.preset)
    run_dirs = [runner.write_job(args.out, spec, args.preset, device=args.device, fast_kernels=args.fast_kernels,
                                 cuda_graph=args.cuda_graph) for spec in specs]
    if args.launcher == "slurm":
        ids = runner.run_slurm(run_dirs, args.out / "slurm", partition=args.partition, time_min=args.time,
                               gpus_per_task=args.gpus_per_task, cpus_per_task=args.cpus_per_task,
                               array_parallelism=args.array_parallelism, extra_sbatch=sbatch,
                               max_requeues=args.max_requeues)
        print(f"submitted {len(ids)} runs" + (f" (jobs {ids[0]} ... {ids[-1]})" if ids else "")
              + f"; follow with: reproduce.py status --out {args.out}")
        return 0
    from tqdm import tqdm

    done_before = sum(runner.run_state(d) == "done" for d in run_dirs)
    tally = {"done": done_before, "failed": 0, "running": 0}
    with tqdm(total=len(run_dirs), initial=done_before, unit="run", desc="sweep") as bar:
        def on_done(run_dir, state):
            tally[state if state in tally else "failed"] += 1
            bar.set_postfix(tally)
            bar.update(1)
        states = runner.run_local(run_dirs, workers=args.workers, runs_per_gpu=args.runs_per_gpu, on_done=on_done)
    failed = [name for name, state in states.items() if state == "failed"]
    for name in failed:
        error = json.loads((args.out / "runs" / name / runner.ERROR_FILE).read_text())["error"]
        print(f"failed: {name}: {error}", file=sys.stderr)
    print(f"{sum(runner.run_state(d) == 'done' for d in run_dirs)} of {len(run_dirs)} runs done"
          + (f"; {len(failed)} failed (run the same command again to retry)" if failed else ""))
    return 1 if failed else 0


def _check_sweep_dir(out: Path) -> None:
    if not (out / runner.SWEEP_FILE).exists():
        raise ValueError(f"{out} is not a sweep directory (no {runner.SWEEP_FILE}); make one with `reproduce.py run`")


def cmd_status(args) -> int:
    _check_sweep_dir(args.out)
    records = [runner.read_record(d) for d in sorted((args.out / "runs").iterdir()) if (d / runner.JOB_FILE).exists()]
    counts = {state: sum(r["status"] == state for r in records) for state in runner.STATES}
    print(f"{args.out}: {len(records)} runs: " + ", ".join(f"{n} {s}" for s, n in counts.items() if n))
    for r in records:
        if r["status"] == "failed":
            print(f"failed: {r['name']}: {r['error']}")
    return 0


def cmd_report(args) -> int:
    from amg_fast.experiments.reports import write_report

    _check_sweep_dir(args.out)  # before anything is written
    for name in resolve_experiments(args.experiments):
        records = records_for(args.out, name, args.omega_from)
        files = write_report(name, records, args.out / "reports" / name)
        done = sum(r["status"] == "done" for r in records)
        print(f"{name}: {done} of {len(records)} runs finished; wrote {', '.join(str(f) for f in files)}")
    return 0


def _kept(args, argv) -> str:
    """After Ctrl-C: for `run`, the runs' states from their files and the command that continues
    the sweep; for the other commands, that nothing is half-written."""
    again = command_line(argv)
    if args.command != "run" or not (args.out / runner.SWEEP_FILE).exists():
        return f"every file written so far is complete (each is written whole); run it again with: {again}"
    states = [runner.run_state(runner.run_dir_of(args.out, spec)) for spec in _specs(args)]
    counts = {state: states.count(state) for state in runner.STATES}
    other = ", ".join(f"{counts[s]} {s}" for s in ("running", "failed", "missing") if counts[s])
    queued = "; runs already submitted stay queued" if args.launcher == "slurm" else ""
    return (f"{counts['done']} of {len(states)} runs done, {counts['partial']} partial (each resumes from its last "
            f"checkpoint){', ' + other if other else ''}{queued}; continue with: {again}")


def main(argv=None) -> int:
    args = parse_args(argv)
    return run_interruptible(lambda: _command(args), lambda: _kept(args, argv))


def _command(args) -> int:
    try:
        return {"list": cmd_list, "plan": cmd_plan, "run": cmd_run, "status": cmd_status,
                "report": cmd_report}[args.command](args)
    except (ValueError, runner.SweepError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2

