"""Reproduce the paper's tables and figures, and run your own sweeps: one command per artefact,
resumable, local or Slurm, continued across machines.

  reproduce.py list
  reproduce.py plan EXP... --preset P --out DIR [--where KEY=V1,V2 ...] [--seeds 0 1 2]
  reproduce.py run EXP... --preset P --out DIR [filters] [--set KEY=VALUE ...] [--budget-s N] [--launcher local|slurm] [--workers N]
               [--runs-per-gpu K] [--device D] [--fast-kernels] [--cuda-graph] [--omega-from data|paper]
               [--retry-diverged]
  reproduce.py run --grid KEY=V1,V2 ... (or --grid-file grid.toml) --preset P --out DIR [--seeds ...]
               [--launcher slurm --time MIN --max-requeues N ...]
  reproduce.py status --out DIR
  reproduce.py report EXP... (or grid) --out DIR [--omega-from data|paper] [--set ...]
  reproduce.py export DIR --to PATH   (or export --out DIR --to PATH)
  reproduce.py omega [--n 128] [--nu 0.075 0.1 0.125]

EXP: experiment ids from `list`, or all; --grid sweeps every combination of its values (any run
setting or TrainConfig setting: model=amgfno,s4ffno lr=1e-3,3e-4 width=64,128). A run that several
experiments need is trained once. Presets: paper (the paper's protocol, as train.py --preset
paper), quick (train.py's quick preset), cpu (a small scale for a 2-core CPU), smoke (seconds per
run). Runs live in DIR/runs/<name>/ with train.py's files; finished runs are never redone, partial
ones resume, failed / died / corrupt ones are trained again by the next `run`, diverged ones (a
NaN / Inf loss) only with --retry-diverged; reports go to DIR/reports/<EXP>/ (table.md, table.csv,
table.tex, figures as PNG and PDF). Paths in DIR are relative to it: a sweep moved or copied
elsewhere resumes there. `export` copies the finished and diverged runs' small files (no
checkpoints) into a tree to commit; `run --out` on that tree on another machine trains only what
is missing.

Exit status of run: 0 every selected run done; 1 a run not done that the same command trains again
(named with its state: failed, died, corrupt, partial, running); 3 else runs the --budget-s left
unstarted remain; 4 else only diverged runs remain (left: --retry-diverged); 2 a refused command
(nothing written). Ctrl-C stops a local sweep (each run keeps its last checkpoint) and
prints the command that continues it (exit 130); a Slurm job that reaches --time is requeued and
resumes from its checkpoint.

Example (2-core CPU, about 1 minute): reproduce.py run table2 --preset cpu --out sweeps/cpu
    --where model=ffno,s4ffno,amgfno --where pde=ks nu=0.1 res=32 && reproduce.py report table2 --out sweeps/cpu
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from collections import Counter
from pathlib import Path

from amg_fast._files import check_writable_dir
from amg_fast._interrupt import command_line, run_interruptible
from amg_fast._machine import process_age
from amg_fast.experiments import runner
from amg_fast.experiments.estimate import Estimator, machine_of
from amg_fast.experiments.registry import EXPERIMENTS, GRID_KEYS, OMEGA_SOURCES
from amg_fast.experiments.specs import FILTER_KEYS, PRESETS, check_seed
from amg_fast.experiments.sweep import (Budget, load_grid_file, parse_grid, parse_set, parse_where, plan, records_for,
                                        resolve_experiments, runs_by_experiment, select_runs, summary_lines,
                                        time_column)

__all__ = ["parse_args", "cmd_list", "cmd_plan", "cmd_run", "cmd_status", "cmd_report", "cmd_export", "cmd_migrate",
           "cmd_omega", "main"]

EXIT_NOT_DONE, EXIT_REFUSED, EXIT_BUDGET, EXIT_DIVERGED = 1, 2, 3, 4
SHOWN_SKIPPED = 5  # budget-skipped runs named one by one; the rest counted


def _seed(text: str) -> int:
    try:
        return check_seed(int(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"a seed must be an integer in [0, 2**32), got {text!r}") from None


def _set_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--set", nargs="+", action="extend", metavar="KEY=VALUE", dest="set_",
                   help="TrainConfig settings for every selected run (they enter its name), e.g. n_train=256 "
                        "precision=tf32; report needs the same --set")


def _selection(p: argparse.ArgumentParser) -> None:
    p.add_argument("experiments", nargs="*", metavar="EXP", help="experiment ids (see `list`) or all")
    p.add_argument("--grid", nargs="+", action="extend", metavar="KEY=V1,V2",
                   help="your own sweep: every combination of these values (keys: the run's "
                        f"{', '.join(GRID_KEYS[:9])} and any TrainConfig setting, e.g. lr, width, epochs, "
                        "normalize; unset: model amgfno, pde ks, its default nu, res 32)")
    p.add_argument("--grid-file", type=Path, help="the grid as a JSON or TOML table {KEY: [values]}")
    _set_option(p)
    p.add_argument("--out", required=True, type=Path, help="the sweep directory")
    p.add_argument("--preset", required=True, choices=tuple(PRESETS), help="scale of every run")
    p.add_argument("--where", nargs="+", action="extend", metavar="KEY=V1,V2",
                   help=f"keep runs whose KEY is one of the values; --where may be given several times and "
                        f"all filters apply (a key given twice adds values); keys: {', '.join(FILTER_KEYS)} and "
                        "any TrainConfig setting (a run without a setting is kept); a value that matches no run "
                        "is an error")
    p.add_argument("--seeds", nargs="+", type=_seed, default=[0], help="seeds of every run, in [0, 2**32) (default 0)")
    p.add_argument("--omega-from", default="data", choices=OMEGA_SOURCES,
                   help="AMGFNO's fixed omega_f: the training data's (default) or the paper's values")
    p.add_argument("--device", default="auto", help="torch device of every run (default auto)")
    p.add_argument("--fast-kernels", action="store_true", help="train with the Triton kernels (train.py --fast-kernels)")
    p.add_argument("--cuda-graph", action="store_true", help="replay each training step from a CUDA graph")
    p.add_argument("--workers", type=int, help="local: runs at once on CPU (default 1), or at most this many "
                                               "on GPUs")
    p.add_argument("--runs-per-gpu", type=int, default=1, help="local: runs at once on each visible GPU (default 1)")
    p.add_argument("--retry-diverged", action="store_true",
                   help="train the diverged runs again too, each from its last good checkpoint where it has one (by "
                        "default they are left: with their own settings they diverge again; --where selecting such a "
                        "cell and --set lr=... train it as a new run)")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="one line per experiment: id, runs, the artefact")
    _selection(sub.add_parser("plan", help="a summary (runs by experiment / model / f, time on this machine and on a "
                                           "GPU), then each run's state and estimate"))
    run = sub.add_parser("run", help="train the runs that are not done, in priority order")
    _selection(run)
    run.add_argument("--budget-s", type=float, help="start no run whose estimated time exceeds what is left of N "
                                                    "seconds from now (estimates: seconds per epoch measured by "
                                                    "finished runs of the same kind on this machine, else the "
                                                    "defaults of docs/reproduce.md); says what it skipped")
    run.add_argument("--launcher", default="local", choices=("local", "slurm"),
                     help="local: a pool of worker processes (default); slurm: one job array through submitit")
    run.add_argument("--partition", help="slurm: partition")
    run.add_argument("--time", type=int, default=240, help="slurm: minutes per run (default 240)")
    run.add_argument("--gpus-per-task", type=int, default=1, help="slurm: GPUs per run (default 1)")
    run.add_argument("--cpus-per-task", type=int, default=4, help="slurm: CPUs per run (default 4)")
    run.add_argument("--array-parallelism", type=int, default=64, help="slurm: runs at once (default 64)")
    run.add_argument("--sbatch", nargs="+", metavar="KEY=VALUE", default=[],
                     help="slurm: extra sbatch options, e.g. account=myproj qos=high (no control characters)")
    run.add_argument("--max-requeues", type=int, default=runner.MAX_REQUEUES,
                     help="slurm: times a run's job that reaches --time is requeued, resuming from the run's last "
                          f"checkpoint (submitit's slurm_max_num_timeout; default {runner.MAX_REQUEUES}: up to "
                          f"{runner.MAX_REQUEUES + 1} x --time per run; preemptions are not counted)")
    status = sub.add_parser("status", help="how many runs are done / diverged / running / partial / failed / died / "
                                           "corrupt, and why each is not done")
    status.add_argument("--out", required=True, type=Path, help="the sweep directory")
    report = sub.add_parser("report", help="tables and figures from the finished runs (never an empty table over a "
                                           "full one)")
    report.add_argument("experiments", nargs="+", metavar="EXP", help="experiment ids, all, or grid (every run, or "
                                                                     "those of --grid)")
    report.add_argument("--out", required=True, type=Path, help="the sweep directory")
    report.add_argument("--omega-from", default="data", choices=OMEGA_SOURCES, help="as given to run")
    report.add_argument("--grid", nargs="+", action="extend", metavar="KEY=V1,V2", help="grid: the runs of this grid")
    report.add_argument("--grid-file", type=Path, help="grid: the runs of this grid file")
    _set_option(report)
    export = sub.add_parser("export", help="copy the finished and diverged runs' small files (no checkpoints or "
                                           "rollouts) into a sweep tree to commit or carry; `run --out` there trains "
                                           "only the rest")
    export.add_argument("sweep", type=Path, nargs="?", metavar="DIR", help="the sweep directory (or --out DIR)")
    export.add_argument("--out", type=Path, help="the sweep directory, as the other commands take it")
    export.add_argument("--to", required=True, type=Path, help="the destination tree (created; a sweep of the same "
                                                               "preset, e.g. results/<sweep>)")
    migrate = sub.add_parser("migrate", help="rename the runs of a sweep made before 2026-12-01 that trained raw "
                                             "(normalize and increment off, then the default) to names that say so "
                                             "(+increment=false+normalize=false): the other commands refuse a sweep "
                                             "that has such runs under their old names")
    migrate.add_argument("--out", required=True, type=Path, help="the sweep directory (or an exported tree)")
    omega = sub.add_parser("omega", help="omega_f of each named KS data reading (docs/fidelity.md section 2)")
    omega.add_argument("--n", type=int, default=128, help="trajectories per reading (default 128)")
    omega.add_argument("--nu", nargs="+", type=float, default=[0.075, 0.1, 0.125], help="viscosities")
    omega.add_argument("--seed", type=_seed, default=1, help="initial-condition seed (default 1)")
    return p.parse_args(argv)


def cmd_list(_args) -> int:
    for exp in EXPERIMENTS.values():
        print(f"{exp.id:20s} {len(exp.runs()):3d} runs  {exp.artefact}")
    return 0


def _grid(args) -> dict | None:
    if args.grid and args.grid_file:
        raise ValueError("give the grid with --grid or --grid-file, not both")
    return parse_grid(args.grid) if args.grid else load_grid_file(args.grid_file) if args.grid_file else None


def _specs(args):
    return select_runs(args.experiments, seeds=args.seeds, omega_from=args.omega_from, where=parse_where(args.where),
                       grid=_grid(args), overrides=parse_set(args.set_))


def _job(args) -> dict:
    return {"device": args.device, "fast_kernels": args.fast_kernels, "cuda_graph": args.cuda_graph}


def _check_existing_preset(out: Path, preset: str) -> None:
    if out.exists() and not out.is_dir():
        raise runner.SweepError(f"--out {out} is a file, not a sweep directory")
    if (out / runner.SWEEP_FILE).exists():
        recorded = runner.read_sweep(out)["preset"]
        if recorded != preset:
            raise runner.SweepError(f"{out} holds runs of preset {recorded!r}; give --preset {recorded}")


def _summary(args, specs) -> tuple[dict, list[str], Estimator]:
    """The plan of the selected runs and its summary lines; the estimator of this machine."""
    gpus = runner.visible_gpus()
    slots = len(runner.worker_slots(args.workers, args.runs_per_gpu, gpus))
    done_dirs = runner.run_dirs(args.out)
    estimator = Estimator(machine_of(args.device, gpus), args.preset, done_dirs)
    result = plan(args.out, specs, args.preset, estimator, args.retry_diverged, **_job(args))
    gpu = None
    if estimator.machine["device"] == "cpu":
        gpu = plan(args.out, specs, args.preset, Estimator.for_gpu(args.preset, done_dirs), args.retry_diverged,
                   **_job(args))
    counts = runs_by_experiment(specs, args.experiments, seeds=args.seeds, omega_from=args.omega_from,
                                grid=_grid(args), overrides=parse_set(args.set_))
    return result, summary_lines(result, counts, estimator.machine, args.preset, slots, gpu), estimator


def cmd_plan(args) -> int:
    specs = _specs(args)
    runner.check_worker_counts(args.workers, args.runs_per_gpu)
    _check_existing_preset(args.out, args.preset)
    result, lines, _ = _summary(args, specs)
    print("\n".join(lines))
    for spec, state, seconds, _source in result["runs"]:
        print(f"{state:8s} {time_column(args.out, spec, state, seconds, args.retry_diverged):>11s}  {spec.name}")
    return 0


def _no_control(option: str, text: str) -> str:
    bad = [c for c in text if ord(c) < 32 or ord(c) == 127]
    if bad:
        raise ValueError(f"{option} {text!r}: control characters (newline, tab, ...) are not allowed; they would "
                         "add lines to the generated sbatch script")
    return text


def _sbatch_options(items: list[str]) -> dict:
    import re

    out = {}
    for item in items:
        key, sep, value = _no_control("--sbatch", item).partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]*", key):
            raise ValueError(f"--sbatch takes KEY=VALUE with a KEY of letters, digits, _ and -, got {item!r}")
        out[key] = value
    return out


def _not_done_lines(run_dirs, skipped: dict[str, str]) -> tuple[list[str], Counter]:
    """A line per run not done (skipped by the budget, or its state and why), and the states' counts."""
    lines, states = [], Counter()
    for run_dir in run_dirs:
        state = runner.run_state(run_dir)
        if state == "done":
            states["done"] += 1
        elif run_dir.name in skipped:  # not started by the budget, whatever it was left as before
            states["skipped"] += 1
            before = "" if state == "missing" else f" (it was {state}: {runner.state_note(run_dir, state)})"
            lines.append(f"skipped: {run_dir.name}: {skipped[run_dir.name]}{before}")
        else:
            states[state] += 1
            lines.append(f"{state}: {run_dir.name}: {runner.state_note(run_dir, state)}")
    order = {s: i for i, s in enumerate(runner.NOT_DONE + ("skipped",))}
    return sorted(lines, key=lambda line: order.get(line.split(":", 1)[0], 99)), states


def cmd_run(args) -> int:
    # Everything that can be refused is checked before anything is written.
    specs = _specs(args)
    sbatch = _sbatch_options(args.sbatch)
    if args.partition is not None:
        _no_control("--partition", args.partition)
    if args.launcher == "slurm":  # checked before anything is written
        if args.budget_s is not None:
            raise ValueError("--budget-s applies to --launcher local (it decides which run to start next); with "
                             "--launcher slurm, --time limits each run")
        runner.check_max_requeues(args.max_requeues)
        runner.check_slurm()
    else:
        runner.check_worker_counts(args.workers, args.runs_per_gpu)
    configs = {spec.name: runner.job_config(spec, args.preset, **_job(args)).to_dict() for spec in specs}
    data = {spec.name: runner.dataset_args(spec, configs[spec.name], args.out / "data") for spec in specs}
    _check_existing_preset(args.out, args.preset)
    for spec in specs:
        runner.check_run_dir(args.out, spec)
    result, lines, estimator = _summary(args, specs)
    budget = Budget(args.budget_s, estimator, configs, start=args.started, data=data)
    runner.prepare_sweep(args.out, args.preset)
    print("\n".join(lines), flush=True)
    run_dirs = [runner.write_job(args.out, spec, args.preset, **_job(args)) for spec in specs]
    if args.launcher == "slurm":
        ids = runner.run_slurm(run_dirs, args.out / "slurm", partition=args.partition, time_min=args.time,
                               gpus_per_task=args.gpus_per_task, cpus_per_task=args.cpus_per_task,
                               array_parallelism=args.array_parallelism, extra_sbatch=sbatch,
                               max_requeues=args.max_requeues, retry_diverged=args.retry_diverged)
        print(f"submitted {len(ids)} runs" + (f" (jobs {ids[0]} ... {ids[-1]})" if ids else "")
              + f"; follow with: reproduce.py status --out {args.out}")
        return 0
    from tqdm import tqdm

    done_before = sum(runner.run_state(d) == "done" for d in run_dirs)
    tally = {"done": done_before, "not done": 0, "skipped": 0}
    with tqdm(total=len(run_dirs), initial=done_before, unit="run", desc="sweep") as bar:
        def on_done(run_dir, state):
            budget.observe(run_dir, state)
            tally[state if state in tally else "not done"] += 1
            bar.set_postfix(tally)
            bar.update(1)
        runner.run_local(run_dirs, workers=args.workers, runs_per_gpu=args.runs_per_gpu, on_done=on_done,
                         should_start=budget, retry_diverged=args.retry_diverged)
    lines, states = _not_done_lines(run_dirs, budget.skipped)
    skipped = [line for line in lines if line.startswith("skipped: ")]
    for line in [line for line in lines if line not in skipped] + skipped[:SHOWN_SKIPPED]:
        print(line, file=sys.stderr)
    if len(skipped) > SHOWN_SKIPPED:
        print(f"skipped: {len(skipped) - SHOWN_SKIPPED} more runs, for the same reason", file=sys.stderr)
    not_done = sum(n for s, n in states.items() if s not in ("done", "skipped"))
    retried = not_done - states["diverged"]  # what the same command trains again
    print(f"{states['done']} of {len(run_dirs)} runs done"
          + (f"; {not_done} not done ({', '.join(f'{n} {s}' for s, n in states.items() if s not in ('done', 'skipped'))}"
             + ("; run the same command again to retry" if retried else "")
             + ("; diverged ones only with --retry-diverged" if states["diverged"] and not args.retry_diverged else "")
             + ")" if not_done else "")
          + (f"; {states['skipped']} not started within --budget-s {args.budget_s:g}" if states["skipped"] else ""))
    if retried:
        return EXIT_NOT_DONE
    return EXIT_BUDGET if states["skipped"] else EXIT_DIVERGED if states["diverged"] else 0


def cmd_status(args) -> int:
    runner.read_sweep(args.out)
    dirs = runner.run_dirs(args.out)
    lines, states = _not_done_lines(dirs, {})
    print(f"{args.out}: {len(dirs)} runs: " + (", ".join(f"{states[s]} {s}" for s in runner.STATES if states[s])
                                              or "none yet"))
    for line in lines:
        print(line)
    return 0


def _report_selection(args, name: str):
    """(records, the runs the experiment has in full for the sweep's seeds)."""
    grid = _grid(args) if name == "grid" else None
    overrides = parse_set(args.set_)
    records = records_for(args.out, name, args.omega_from, grid, overrides)
    seeds = sorted({r.get("seed", 0) for r in records}) or [0]
    if name == "grid" and not grid:
        return records, [r["name"] for r in records]
    expected = select_runs([] if name == "grid" else [name], seeds=seeds, omega_from=args.omega_from, grid=grid,
                           overrides=overrides)
    return records, [s.name for s in expected]


def cmd_report(args) -> int:
    from amg_fast.experiments.reports import write_report

    preset = runner.read_sweep(args.out)["preset"]  # before anything is written
    names = [n for n in args.experiments if n != "grid"]
    names = (resolve_experiments(names) if names else []) + (["grid"] if "grid" in args.experiments else [])
    refused = 0
    for name in names:
        records, expected = _report_selection(args, name)
        done = {r["name"] for r in records if r["status"] == "done"}
        lacking = [n for n in expected if n not in done]
        if not done:
            other = [o for o in OMEGA_SOURCES if o != args.omega_from]
            hint = (f"; the sweep has its runs with --omega-from {other[0]}" if name != "grid" and any(
                r["status"] == "done" for r in records_for(args.out, name, other[0], None, parse_set(args.set_))) else "")
            print(f"error: {name}: no finished run in {args.out} ({len(records)} of its runs there"
                  f"{hint}); nothing written, an existing report is kept", file=sys.stderr)
            refused += 1
            continue
        check_writable_dir(f"{name}: report folder", args.out / "reports" / name)
        files = write_report(name, records, args.out / "reports" / name, preset=preset)
        print(f"{name}: {len(done)} finished runs; wrote {', '.join(str(f) for f in files)}")
        if lacking:
            print(f"  lacks {len(lacking)} of its {len(expected)} runs (seeds {', '.join(map(str, sorted(set(r.get('seed', 0) for r in records))))}): "
                  + ", ".join(lacking[:5]) + (" ..." if len(lacking) > 5 else ""))
    return EXIT_NOT_DONE if refused else 0


def cmd_export(args) -> int:
    if (args.sweep is None) == (args.out is None):
        raise ValueError("export takes the sweep directory once: reproduce.py export DIR --to PATH, or "
                         f"export --out DIR --to PATH; got {'both' if args.sweep else 'neither'}")
    sweep = args.sweep or args.out
    report = runner.export_runs(sweep, args.to)
    if report is None:
        print(f"{sweep}: no finished or diverged run to export; nothing written")
        return 0
    unfinished = [name for name in report["skipped"] if not name.endswith(" (missing)")]
    missing = len(report["skipped"]) - len(unfinished)
    print(f"exported {len(report['copied'])} runs to {args.to}; {len(report['present'])} were there already"
          + (f"; left out: {', '.join(unfinished)}" if unfinished else "")
          + (f"; {missing} runs not started" if missing else ""))
    return 0


def cmd_migrate(args) -> int:
    if not args.out.is_dir():
        raise runner.SweepError(f"--out {args.out}: not a sweep directory")
    renamed = runner.migrate_output_parametrisation(args.out)
    print(f"{args.out}: renamed {renamed} runs" if renamed else f"{args.out}: every run's name says how it trained; "
          "nothing renamed")
    return 0


def cmd_omega(args) -> int:
    from amg_fast.experiments.readings import omega_rows

    if args.n < 1:
        raise ValueError(f"--n must be an integer >= 1, got {args.n}")
    bad = [nu for nu in args.nu if not (math.isfinite(nu) and nu > 0)]
    if bad:  # before the table's header (the generator would refuse it naming `nu`, mid-table)
        raise ValueError(f"--nu must be finite numbers > 0, got {bad[0]!r}")
    print(f"omega_f over all saved frames of {args.n} trajectories (seed {args.seed}); paper: 0.584 / 0.083 / 0.0003")
    print("| nu | reading | omega_32 | omega_64 | omega_128 | energy-weighted omega_32 |")
    print("|---|---|---:|---:|---:|---:|")
    for row in omega_rows(args.n, args.nu, args.seed):
        print(f"| {row['nu']:g} | {row['label']} (`{row['reading']}`) | {row['omega_32']:.3f} | {row['omega_64']:.4f} | "
              f"{row['omega_128']:.2e} | {row['energy_weighted_omega_32']:.3f} |", flush=True)
    return 0


def _kept(args, argv) -> str:
    """After Ctrl-C: for `run`, the runs' states from their files and the command that continues
    the sweep; for the other commands, that nothing is half-written."""
    again = command_line(argv)
    if args.command != "run" or not (args.out / runner.SWEEP_FILE).exists():
        return f"every file written so far is complete (each is written whole); run it again with: {again}"
    states = [runner.run_state(runner.run_dir_of(args.out, spec)) for spec in _specs(args)]
    counts = {state: states.count(state) for state in runner.STATES}
    # "died" here is mostly a run this Ctrl-C stopped before its first checkpoint: say what that means
    labels = {"died": "stopped before a checkpoint (each starts again)"}
    other = ", ".join(f"{counts[s]} {labels.get(s, s)}" for s in ("running", "diverged", "failed", "died", "corrupt",
                                                                  "missing")
                      if counts[s])
    queued = "; runs already submitted stay queued" if args.launcher == "slurm" else ""
    return (f"{counts['done']} of {len(states)} runs done, {counts['partial']} partial (each resumes from its last "
            f"checkpoint){', ' + other if other else ''}{queued}; continue with: {again}")


def main(argv=None) -> int:
    """The command line (argv None: this process is the command, and --budget-s counts from its start,
    imports included) or argv given from Python (counting from this call)."""
    started = time.monotonic() - (process_age() if argv is None else 0.0)
    args = parse_args(argv)
    args.started = started
    return run_interruptible(lambda: _command(args), lambda: _kept(args, argv))


def _command(args) -> int:
    try:
        if args.command in ("plan", "run", "status", "report", "export"):  # the sweeps they read and write
            for tree in (getattr(args, "out", None), getattr(args, "sweep", None), getattr(args, "to", None)):
                if tree is not None and tree.is_dir():
                    runner.check_output_parametrisation(tree)
        return {"list": cmd_list, "plan": cmd_plan, "run": cmd_run, "status": cmd_status, "report": cmd_report,
                "export": cmd_export, "migrate": cmd_migrate, "omega": cmd_omega}[args.command](args)
    except (ValueError, runner.SweepError) as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_REFUSED
    except BrokenPipeError:  # stdout's reader went away: run_interruptible ends quietly (141)
        raise
    except OSError as err:  # a file the checks could not foresee (permissions, a full disk): what the system said
        print(f"error: {err}", file=sys.stderr)
        return EXIT_NOT_DONE
