"""Choosing a sweep's runs (experiments x seeds, filters, shared runs trained once), planning it and
collecting its records for the reports. scripts/reproduce.py is a thin CLI over this module."""
from __future__ import annotations

import json
from pathlib import Path

from amg_fast.experiments.registry import EXPERIMENTS, get_experiment
from amg_fast.experiments.runner import JOB_FILE, read_record, run_dir_of, run_state
from amg_fast.experiments.specs import FILTER_KEYS, RunSpec

__all__ = ["resolve_experiments", "parse_where", "select_runs", "plan", "records_for", "SECONDS_PER_RUN"]

# Runs of other experiments a report uses where the sweep has them: the ablations pair with AMGFNO's
# plain runs (Table 3's, which Table 2 also trains); Table 2's bar charts show S4FFNO at alpha*.
COMPANIONS = {"omega-ablation": ("table3",), "freq-gate-ablation": ("table3",), "table2": ("alpha-convex",)}

# Rough cost of one run when the sweep has no finished run to go by (seconds). Measured on the
# 2-core development CPU (2026-11-26): smoke ~3 s; cpu AMGFNO 20 s at f = 32 and 77 s at f = 128.
# paper: one KS run at f = 32 graphed on an H200 takes ~1.1 s an epoch with three runs sharing the
# GPU (results/gpu/20261126-h200).
SECONDS_PER_RUN = {"smoke": 5, "cpu": 60, "paper": 220}


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


def _numeric(key: str, text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"--where {key}: {text!r} is not a number") from None


def parse_where(items: list[str] | None) -> dict[str, list]:
    """["model=ffno,amgfno", "res=32"] -> {"model": ["ffno", "amgfno"], "res": [32.0]}."""
    from amg_fast.layers import FUSIONS
    from amg_fast.models import available_models

    allowed = {"model": tuple(available_models()), "pde": ("ks", "burgers"), "fusion": FUSIONS}
    where: dict[str, list] = {}
    for item in items or []:
        key, sep, values = item.partition("=")
        if not sep or not values:
            raise ValueError(f"--where takes KEY=V1,V2,...; got {item!r}")
        if key not in FILTER_KEYS:
            raise ValueError(f"--where: unknown key {key!r}; keys: {', '.join(FILTER_KEYS)}")
        parsed = []
        for value in values.split(","):
            if key in allowed:
                if value not in allowed[key]:
                    raise ValueError(f"--where {key}: unknown value {value!r}; allowed: {', '.join(allowed[key])}")
                parsed.append(value)
            else:
                parsed.append(_numeric(key, value))
        where.setdefault(key, []).extend(parsed)
    return where


def _keep(spec: RunSpec, where: dict[str, list]) -> bool:
    """A run passes a filter when it has no such setting or its value is one of the filter's."""
    for key, values in where.items():
        value = spec.get(key)
        if value is not None and value not in values:
            return False
    return True


def select_runs(experiments: list[str], *, seeds=(0,), omega_from: str = "data",
                where: dict[str, list] | None = None) -> list[RunSpec]:
    """The runs of these experiments, filtered; a run several experiments need appears once."""
    specs: dict[RunSpec, None] = {}
    for name in resolve_experiments(experiments):
        for spec in get_experiment(name).runs(seeds, omega_from):
            if _keep(spec, where or {}):
                specs.setdefault(spec)
    return list(specs)


def plan(out: Path, specs: list[RunSpec], preset: str) -> dict:
    """{"runs": [(spec, state)], "counts": {state: n}, "estimate_s": seconds for the runs not done}.
    The estimate uses the mean wall time of the sweep's finished runs, else SECONDS_PER_RUN."""
    rows = [(spec, run_state(run_dir_of(Path(out), spec))) for spec in specs]
    counts = {state: sum(1 for _, s in rows if s == state) for state in ("done", "running", "partial", "failed",
                                                                         "missing")}
    walls = [r["results"].wall_time_s for r in (read_record(d) for d in _run_dirs(out))
             if r["results"] and r["results"].wall_time_s]
    per_run = sum(walls) / len(walls) if walls else SECONDS_PER_RUN[preset]
    return {"runs": rows, "counts": counts, "estimate_s": per_run * (len(rows) - counts["done"]),
            "seconds_per_run": per_run, "from_finished_runs": bool(walls)}


def _run_dirs(out: Path) -> list[Path]:
    runs = Path(out) / "runs"
    return sorted(d for d in runs.iterdir() if (d / JOB_FILE).exists()) if runs.is_dir() else []


def records_for(out: Path, experiment: str, omega_from: str = "data") -> list[dict]:
    """The records of every run in out/ that belongs to the experiment (any seed), plus its
    companions' (the plain AMGFNO runs an ablation compares with)."""
    wanted = set()
    for name in (experiment, *COMPANIONS.get(experiment, ())):
        wanted |= {RunSpec(**{**s.to_dict(), "seed": 0}) for s in get_experiment(name).runs((0,), omega_from)}
    records = []
    for run_dir in _run_dirs(out):
        spec = json.loads((run_dir / JOB_FILE).read_text())["spec"]
        if RunSpec(**{**spec, "seed": 0}) in wanted:
            records.append(read_record(run_dir))
    return records
