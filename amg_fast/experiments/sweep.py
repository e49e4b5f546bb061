"""Choosing a sweep's runs (experiments or a grid x seeds, filters, shared runs trained once),
planning it (states, counts, time estimates, a budget) and collecting its records for the reports.
scripts/reproduce.py is a thin CLI over this module."""
from __future__ import annotations

import dataclasses
import json
import math
import time
from collections import Counter
from pathlib import Path

from amg_fast.data.generate import PDES
from amg_fast.experiments.estimate import STARTUP_SECONDS, Estimator, data_file
from amg_fast.experiments.registry import EXPERIMENTS, GRID_KEYS, Experiment, get_experiment, grid_experiment
from amg_fast.experiments.runner import (dataset_args, epochs_to_resume, job_config, read_job, run_dir_of, run_dirs,
                                        run_state, to_train)
from amg_fast.experiments.specs import FILTER_KEYS, OVERRIDABLE, RunSpec, parse_setting
from amg_fast.train.rundir import RunDir

__all__ = ["runs_by_experiment", "resolve_experiments", "parse_where", "parse_grid", "parse_set", "load_grid_file", "select_runs", "plan",
           "records_for", "summary_lines", "time_column", "Budget"]

# Runs of other experiments a report uses where the sweep has them: the ablations pair with AMGFNO's
# plain runs (Table 3's, which Table 2 also trains); Table 2's bar charts show S4FFNO at alpha*; the
# additive alpha sweep's alpha = 1 is Table 2's residual S4FFNO (h + 1 * z, one run).
COMPANIONS = {"omega-ablation": ("table3",), "freq-gate-ablation": ("table3",), "table2": ("alpha-convex",)}
_CHOICES = {"pde": PDES, "variant": ("none", "no-freq-gate", "omega-batch")}
_NUMBERS = {"nu": float, "res": int, "alpha": float, "omega": float, "seed": int}
NAME_MAX = 255  # bytes in a file name (ext4, xfs, btrfs, APFS): a run's directory is its name


def resolve_experiments(names: list[str]) -> list[str]:
    """Experiment ids, "all" for every one; unknown names are an error naming the known ones."""
    if not names:
        raise ValueError(f"name at least one experiment (or all); known: {', '.join(EXPERIMENTS)}")
    out = []
    for name in names:
        for exp in (EXPERIMENTS if name == "all" else [get_experiment(name).id]):
            if exp not in out:
                out.append(exp)
    return out


def _value(option: str, key: str, text: str):
    """One command-line value of a run setting, typed (model/pde/... checked against what exists)."""
    from amg_fast.experiments.readings import READINGS
    from amg_fast.layers import FUSIONS
    from amg_fast.models import available_models

    allowed = {"model": tuple(available_models()), "fusion": FUSIONS, "reading": ("none", *READINGS), **_CHOICES}
    if key in allowed:
        if text not in allowed[key]:
            raise ValueError(f"{option} {key}: unknown value {text!r}; allowed: {', '.join(allowed[key])}")
        return None if text == "none" and option == "--grid" else text  # a filter compares "none"
    if key in _NUMBERS:
        try:
            value = float(text)
        except ValueError:
            raise ValueError(f"{option} {key}: {text!r} is not a number") from None
        if _NUMBERS[key] is int and value.is_integer():
            value = int(value)
        return value
    try:
        return parse_setting(key, text)
    except ValueError as err:
        raise ValueError(f"{option} {err}") from None


def _pairs(option: str, items: list[str] | None, keys: tuple[str, ...]) -> dict[str, list]:
    """["model=ffno,amgfno", "res=32"] -> {"model": ["ffno", "amgfno"], "res": [32]}; a key given
    again adds its values."""
    out: dict[str, list] = {}
    for item in items or []:
        key, sep, values = item.partition("=")
        if not sep or not values:
            raise ValueError(f"{option} takes KEY={'VALUE' if option == '--set' else 'V1,V2,...'}; got {item!r}")
        if key not in keys:
            raise ValueError(f"{option}: unknown key {key!r}; keys: {', '.join(keys)}")
        for text in values.split(","):
            value = _value(option, key, text)
            if value not in out.setdefault(key, []):
                out[key].append(value)
    return out


def parse_where(items: list[str] | None) -> dict[str, list]:
    """--where filters (all of them apply; a key given again adds values): {key: [values]}."""
    return _pairs("--where", items, FILTER_KEYS + OVERRIDABLE)


def parse_grid(items: list[str] | None) -> dict[str, list]:
    """--grid axes: {key: [values]} in the order given."""
    return _pairs("--grid", items, GRID_KEYS)


def parse_set(items: list[str] | None) -> dict:
    """--set KEY=VALUE ...: TrainConfig settings added to every selected run's overrides (one value each)."""
    values = _pairs("--set", items, OVERRIDABLE)
    several = {k: v for k, v in values.items() if len(v) > 1}
    if several:
        key = next(iter(several))
        raise ValueError(f"--set {key}: one value per setting, got {len(several[key])} (sweep values with --grid)")
    return {k: v[0] for k, v in values.items()}


def _with(specs, overrides: dict | None) -> list[RunSpec]:
    """The specs with these overrides (--set) added, each distinct run once; a setting a run sets to
    another value itself (what its experiment varies: precision's tf32 run) is an error, since
    replacing it would merge runs the experiment keeps apart."""
    if overrides:
        for spec in specs:
            own = dict(spec.overrides)
            clash = next((key for key in overrides if key in own and own[key] != overrides[key]), None)
            if clash is not None:
                raise ValueError(f"--set {clash}={overrides[clash]!r}: run {spec.name} sets {clash}={own[clash]!r} "
                                 "itself (its experiment varies it); leave it out of --set, or select runs with "
                                 f"--where {clash}=...")
        specs = [dataclasses.replace(s, overrides={**dict(s.overrides), **overrides}) for s in specs]
    return list(dict.fromkeys(specs))


def load_grid_file(path: Path) -> dict[str, list]:
    """A grid from JSON or TOML: {"model": ["amgfno", "s4ffno"], "lr": [1e-3, 3e-4], "width": 64}
    (a single value is a one-value axis; text values are parsed as on the command line)."""
    path = Path(path)
    if path.suffix not in (".json", ".toml"):
        raise ValueError(f"--grid-file {path}: name a .json or .toml file")
    try:
        text = path.read_text()
    except OSError as err:
        raise ValueError(f"--grid-file {path}: cannot read it ({err.strerror or err})") from None
    except UnicodeDecodeError as err:
        raise ValueError(f"--grid-file {path}: not UTF-8 text ({err.reason} at byte {err.start})") from None
    try:
        if path.suffix == ".toml":
            import tomllib

            data = tomllib.loads(text)
        else:
            data = json.loads(text)
    except ValueError as err:  # tomllib.TOMLDecodeError is one
        raise ValueError(f"--grid-file {path}: not valid {path.suffix[1:].upper()} ({err})") from None
    if not isinstance(data, dict) or not data:
        raise ValueError(f"--grid-file {path}: expected a table of KEY = [values], got {type(data).__name__}")
    axes = {}
    for key, values in data.items():
        values = values if isinstance(values, list) else [values]
        items = [",".join(str(v).lower() if isinstance(v, bool) else str(v) for v in values)] if values else []
        axes.update(parse_grid([f"{key}={items[0]}"]) if items else {key: []})
    grid_experiment(axes)  # keys checked now, with the file named
    return axes


def _keep(spec: RunSpec, where: dict[str, list]) -> bool:
    """A run passes the filters when, for each, it has no such setting or its value is one of them."""
    for key, values in where.items():
        value = spec.get(key)
        if value is not None and value not in values:
            return False
    return True


def _value_order(value) -> tuple:
    """Sort key for a setting's values: numbers by value (8 before 16), then the rest as text."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (0, value, "")
    return (1, 0, str(value))


def select_runs(experiments: list[str], *, seeds=(0,), omega_from: str = "data",
                where: dict[str, list] | None = None, grid: dict[str, list] | None = None,
                overrides: dict | None = None) -> list[RunSpec]:
    """The runs of these experiments (and of a grid), with `overrides` (--set) added to each, filtered,
    in priority order: the order each
    experiment lists its runs, then seeds; a run several experiments need appears once (where it
    first does). A filter value that matches no run, or filters that together leave none, are an
    error naming them."""
    where = where or {}
    sources: list[Experiment] = [get_experiment(name) for name in (resolve_experiments(experiments) if experiments
                                                                    else [])]
    if grid is not None:
        both = [key for key in grid if key in (overrides or {})]
        if both:
            raise ValueError(f"--set {both[0]} and a grid axis {both[0]}: give its values in the grid only")
        sources.append(grid_experiment(grid))
    if not sources:
        raise ValueError(f"name at least one experiment (or all, or a --grid); known: {', '.join(EXPERIMENTS)}")
    every = _with([spec for exp in sources for spec in exp.runs(seeds, omega_from)], overrides)
    for key, values in where.items():
        having = {spec.get(key) for spec in every} - {None}
        unmatched = [v for v in values if v not in having]
        if unmatched:
            shown = ", ".join(map(str, sorted(having, key=_value_order))) or "none of these runs has it"
            raise ValueError(f"--where {key}={','.join(map(str, unmatched))} matches no run of "
                             f"{', '.join(e.id for e in sources)} (their {key} values: {shown})")
    specs = [spec for spec in every if _keep(spec, where)]
    if not specs:
        raise ValueError("the filters " + " ".join(f"{k}={','.join(map(str, v))}" for k, v in where.items())
                         + f" together match no run of {', '.join(e.id for e in sources)}")
    names = Counter(spec.name for spec in specs)
    long = next((name for name in names if len(name.encode()) > NAME_MAX), None)
    if long is not None:  # refused before sweep.json is written, not an OSError at its directory
        raise ValueError(f"run name {long} is {len(long.encode())} bytes; a directory name holds at most {NAME_MAX}: "
                         "give its runs fewer settings (each override enters the name)")
    clash = [name for name, n in names.items() if n > 1]
    if clash:
        raise ValueError(f"different runs share the name {clash[0]} (report this: run names must be unique)")
    return specs


def runs_by_experiment(specs: list[RunSpec], experiments: list[str], *, seeds=(0,), omega_from: str = "data",
                       grid: dict[str, list] | None = None, overrides: dict | None = None) -> dict[str, int]:
    """How many of the selected runs each experiment (and the grid) has (a shared run counts in each)."""
    chosen = set(specs)
    sources = {name: get_experiment(name) for name in (resolve_experiments(experiments) if experiments else [])}
    if grid is not None:
        sources["grid"] = grid_experiment(grid)
    return {name: len(chosen & set(_with(exp.runs(seeds, omega_from), overrides))) for name, exp in sources.items()}


def plan(out: Path, specs: list[RunSpec], preset: str, estimator: Estimator, retry_diverged: bool = False,
         **job) -> dict:
    """{"runs": [(spec, state, seconds, source)], "counts": {state: n}, "estimate_s": seconds for the
    runs to train (not done; not diverged, unless retry_diverged: runner.to_train) on one worker, "data_s":
    of them generating data sets, "sources": {where the runs to train have their seconds per epoch from: n},
    "todo": their specs}. job: device / fast_kernels / cuda_graph of the runs. A data set missing from
    out/data is generated by the first run to train that uses it (in the order given): that run's estimate
    counts its generation, the others' do not."""
    rows, generated, data_s, sources, todo = [], set(), 0.0, Counter(), []
    for spec in specs:
        run_dir = run_dir_of(Path(out), spec)
        state = run_state(run_dir)
        config = job_config(spec, preset, **job).to_dict()
        data = dataset_args(spec, config, Path(out) / "data")
        epochs_done = epochs_to_resume(run_dir) if state == "partial" else 0
        path = data_file(data)
        training, training_source = estimator.training_seconds(config, epochs_done)
        seconds, source = estimator.with_data(training, training_source, None if path in generated else data)
        if to_train(state, retry_diverged):
            todo.append(spec)
            generated.add(path)
            data_s += seconds - training
            sources[training_source] += 1
        rows.append((spec, state, seconds, source))
    counts = Counter(state for _, state, _, _ in rows)
    return {"runs": rows, "counts": counts, "data_s": data_s, "sources": sources, "todo": todo,
            "estimate_s": sum(s for _, state, s, _ in rows if to_train(state, retry_diverged))}


def time_column(out: Path, spec: RunSpec, state: str, seconds: float, retry_diverged: bool = False) -> str:
    """A plan row's time: "~N s" (the estimate) for a run `run` would train, "took N s" (its measured wall
    time, all segments) for a finished one, "-" for a diverged one left alone (or a finished one without it)."""
    if to_train(state, retry_diverged):
        return f"~{seconds:7.0f} s"
    if state == "done":
        try:
            results = RunDir(run_dir_of(Path(out), spec)).read_results()
        except (OSError, ValueError):  # ResultsError is a ValueError
            results = None
        if results is not None and results.wall_time_s > 0:
            return f"took {results.wall_time_s:.0f} s"
    return "-"


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 5400 else f"{seconds / 60:.0f} min" if seconds >= 90 \
        else f"{seconds:.0f} s"


def summary_lines(result: dict, by_experiment: dict[str, int], machine: dict, preset: str, slots: int,
                  gpu_result: dict | None = None) -> list[str]:
    """The plan's summary: runs by experiment / model / f, states, and the time left on this machine
    (and on a GPU, by the defaults, when this is a CPU)."""
    rows = result["runs"]
    todo = result["todo"]
    by = {"model": Counter(s.model for s, *_ in rows), "f": Counter(s.res for s, *_ in rows)}
    states = ", ".join(f"{n} {s}" for s, n in sorted(result["counts"].items(), key=lambda i: -i[1]))
    lines = [f"{len(rows)} runs at preset {preset} ({states})",
             "  by experiment: " + ", ".join(f"{e} {n}" for e, n in by_experiment.items()),
             "  by model: " + ", ".join(f"{m} {n}" for m, n in by["model"].items()),
             "  by f: " + ", ".join(f"{f} {n}" for f, n in sorted(by["f"].items()))]
    if todo:
        wall = result["estimate_s"] / max(1, min(slots, len(todo)))
        data = f" (~{_hours(result['data_s'])} of it generating data)" if result["data_s"] else ""
        lines.append(f"  to do: {len(todo)} runs, ~{_hours(result['estimate_s'])} of training{data} on this machine "
                     f"({machine['name']}), ~{_hours(wall)} with {slots} at once; estimates: "
                     + "; ".join(f"{n} from {src}" for src, n in result["sources"].items()))
        if gpu_result is not None:
            startup = STARTUP_SECONDS["cuda"] * len(todo)  # per run: process, CUDA set-up, kernels, graph capture
            mostly_startup = startup > gpu_result["estimate_s"] / 2  # a small preset: a GPU gains it nothing
            lines.append(f"  on one GPU (defaults from the committed H100/H200 timings): ~{_hours(gpu_result['estimate_s'])}"
                         f", of it ~{_hours(startup)} starting the {len(todo)} runs ({STARTUP_SECONDS['cuda']:.0f} s each"
                         + (": at this preset a GPU gains nothing)" if mostly_startup else ")"))
        if machine["device"] == "cpu" and preset in ("paper", "quick") and result["estimate_s"] > 3 * 3600:
            lines.append(f"  preset {preset} on a CPU takes hours: for a CPU-sized sweep use --preset cpu (or smoke "
                         "to try the commands), or run this one on a GPU")
    return lines


class Budget:
    """Whether a run may start: elapsed time since the command began (`start` on `clock`, default now)
    plus the run's estimate (for a partial run, of the epochs it has left; with generating its data set
    while data[name]'s file is missing: also for a run that will wait while another generates it) must
    stay within budget_s (None: no budget). Says what it skipped and why."""

    def __init__(self, budget_s: float | None, estimator: Estimator, configs: dict[str, dict], clock=time.monotonic,
                 start: float | None = None, data: dict[str, dict] | None = None):
        if budget_s is not None and (isinstance(budget_s, bool) or not math.isfinite(budget_s) or budget_s <= 0):
            raise ValueError(f"--budget-s must be a finite number of seconds > 0, got {budget_s!r}")
        self.budget_s, self.estimator, self.configs, self.clock = budget_s, estimator, configs, clock
        self.data = data or {}
        self.start = clock() if start is None else start
        self.skipped: dict[str, str] = {}

    def __call__(self, run_dir: Path) -> str | None:
        if self.budget_s is None:
            return None
        left = self.budget_s - (self.clock() - self.start)
        name = Path(run_dir).name
        seconds, source = self.estimator.seconds(self.configs[name], epochs_to_resume(run_dir), self.data.get(name))
        if seconds <= left:
            return None
        # rounded so that the line never reads "needs ~9 s, 9 s left" for a run that does not fit
        reason = f"needs ~{math.ceil(seconds)} s ({source}), {math.floor(max(left, 0))} s of the budget left"
        self.skipped[Path(run_dir).name] = reason
        return reason

    def observe(self, run_dir: Path, state: str) -> None:
        if state == "done":
            self.estimator.observe(run_dir)


def _spec_of(run_dir: Path) -> RunSpec | None:
    job = read_job(run_dir)
    return job["spec"] if job else None


def records_for(out: Path, experiment: str, omega_from: str = "data", grid: dict[str, list] | None = None,
                overrides: dict | None = None) -> list[dict]:
    """The records of every run in out/ that belongs to the experiment (any seed), plus its
    companions' (the plain AMGFNO runs an ablation compares with), with `overrides` (--set) as run
    gave them. experiment "grid": the runs of `grid` (every run of the sweep when None)."""
    from amg_fast.experiments.runner import read_record

    if experiment == "grid":
        wanted = None if grid is None else set(_with(grid_experiment(grid).runs((0,), omega_from), overrides))
    else:
        wanted = set()
        for name in (experiment, *COMPANIONS.get(experiment, ())):
            wanted |= set(_with(get_experiment(name).runs((0,), omega_from), overrides))
    records = []
    for run_dir in run_dirs(out):
        spec = _spec_of(run_dir)
        # a directory whose name is not its spec's (an older sweep's run that is now another's, e.g.
        # additive alpha = 1 before it became the residual run) is left out, not counted twice
        if spec is not None and spec.name == run_dir.name and (wanted is None or spec.with_seed(0) in wanted):
            records.append(read_record(run_dir))
    return records
