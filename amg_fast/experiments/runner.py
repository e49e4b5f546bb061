"""Running a sweep: one directory per run, its state read from its files, the job that trains it,
the launchers (a local pool of worker processes; Slurm through submitit) and the export of finished
runs into a tree that travels (a repository, another machine).

Layout of a sweep directory DIR (every path in it is relative to DIR, so a sweep moved, copied or
committed and checked out elsewhere resumes where it lies, and a copy never writes into its origin):
  DIR/sweep.json            {"preset": ...}: a DIR holds runs of one preset only (created under DIR/.sweep.lock)
  DIR/data/                 the generated data sets (each generated once, under DIR/data/.generate.lock)
  DIR/runs/<name>/job.json  the run's RunSpec and TrainConfig (paths relative to DIR); then the trainer's
                            run directory (amg_fast.train.rundir: config.json, metrics.jsonl, checkpoint.pt,
                            results.json, ...), train.log, machine.json (where it trained), error.json after
                            a failure, .lock while a process trains it. config.json holds the paths of the
                            machine that trains the run; export writes them relative to DIR, as job.json's
  DIR/reports/<EXP>/        tables and figures (amg_fast.experiments.reports)

State of a run, from its files: done (a readable results.json), corrupt (a results.json that is not a
results object: the next `run` trains it again), running (its lock is held), diverged (error.json of a
loss that became NaN / Inf), failed (any other error.json), partial (a checkpoint to resume), died
(started, then ended without results, error or checkpoint: a killed worker), missing. A finished run
is never trained again; a partial one resumes from its checkpoint; failed, died and corrupt ones are
trained again by the next `run`; a diverged one only when asked (retry_diverged: resuming it with
its own settings diverges again), and export carries it like a finished one, so that a sweep
continued on another machine does not train it again either. kill -9 of the
driver and its workers loses at most the epochs since each run's last checkpoint; so does Ctrl-C,
which stops the workers (run_local) with exit 130, and so does a Slurm job that reaches its time
limit, which is requeued and resumes (amg_fast.experiments.slurm_job).
"""
from __future__ import annotations

import dataclasses
import datetime
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from queue import Queue
from typing import Callable, Iterable

from filelock import FileLock, Timeout

from amg_fast._checks import flag
from amg_fast._files import atomic_write_text, check_writable_dir
from amg_fast._interrupt import EXIT_INTERRUPTED, arm_stop_once
from amg_fast.experiments.specs import PRESETS, RunSpec, check_preset
from amg_fast.train.config import OUTPUT_DEFAULTS, TrainConfig, output_default, resolve_config
from amg_fast.train.rundir import ResultsError, RunDir, RunDirError, RunResults

__all__ = ["prepare_sweep", "read_sweep", "job_config", "write_job", "read_job", "read_results", "run_state",
           "run_job", "run_local", "run_slurm", "check_slurm", "read_record", "STATES", "NOT_DONE", "SweepError",
           "run_dir_of", "run_dirs", "check_run_dir", "visible_gpus", "check_worker_counts", "worker_slots", "slurm_parameters",
           "export_runs", "state_note", "to_train", "EXPORTED_STATES", "DIVERGED_KEY",
           "epochs_to_resume", "check_max_requeues", "MAX_REQUEUES", "dataset_args", "check_output_parametrisation",
           "migrate_output_parametrisation"]

STATES = ("done", "diverged", "running", "partial", "failed", "died", "corrupt", "missing")
# in the order a summary names them
NOT_DONE = ("diverged", "failed", "died", "corrupt", "partial", "running", "missing")
# The states export copies (a diverged run is an outcome: trained again elsewhere, it diverges again).
EXPORTED_STATES = ("done", "diverged")
DIVERGED_KEY = "diverged"  # error.json's mark of a run whose loss became NaN / Inf (run_job)
SWEEP_FILE, JOB_FILE, ERROR_FILE, LOCK_FILE, LOG_FILE = "sweep.json", "job.json", "error.json", ".lock", "train.log"
RESULTS_FILE, SWEEP_LOCK, MACHINE_FILE = "results.json", ".sweep.lock", "machine.json"
SOFTWARE_KEY = "software"  # machine.json's record of the code that trained the run (run_job)
STARTED_KEY = "started_utc"  # and when this attempt at it started (ISO 8601, UTC)
# What export copies of a finished (or diverged) run: its settings, results (or error), per-epoch metrics
# and machine; train.log when it is at most EXPORT_LOG_LIMIT bytes. Never checkpoints or rollouts.
EXPORT_FILES = (JOB_FILE, "config.json", RESULTS_FILE, ERROR_FILE, "metrics.jsonl", MACHINE_FILE)
EXPORT_LOG_LIMIT = 256 * 1024


class SweepError(ValueError):
    """A sweep directory or launcher that cannot be used as asked."""


def _write_json(path: Path, obj) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2) + "\n")  # also removes dead writers' temp files


def _read_json(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _check_out(out: Path, option: str = "--out") -> None:
    """out (the argument `option`) must be (or become) a directory: not a file, not below one, writable."""
    try:
        check_writable_dir(option, out)
    except ValueError as err:
        raise SweepError(str(err)) from None


def read_sweep(out: Path, option: str = "--out") -> dict:
    """sweep.json of out/ ({"preset": ...}); a SweepError naming what is wrong (and the argument
    `option` that named out/) when out/ is no sweep."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise SweepError(f"{option} {out} is a file, not a sweep directory")
    path = out / SWEEP_FILE
    if not path.exists():
        raise SweepError(f"{out} is not a sweep directory (no {SWEEP_FILE}); make one with `reproduce.py run`")
    recorded = _read_json(path)
    if not isinstance(recorded, dict) or recorded.get("preset") not in PRESETS:
        raise SweepError(f"{path}: unreadable or not a sweep record ({{\"preset\": one of {', '.join(PRESETS)}}}); "
                         "restore or delete it")
    return recorded


def _foreign_contents(out: Path) -> list[str]:
    """What a directory without sweep.json holds (empty: it can become a sweep)."""
    return sorted(p.name for p in out.iterdir() if p.name != SWEEP_LOCK) if out.is_dir() else []


def prepare_sweep(out: Path, preset: str, option: str = "--out") -> None:
    """Make out/ a sweep at `preset` (sweep.json created atomically, under out/.sweep.lock, so one
    preset wins when several starts race); refuse an out/ that is a file, holds runs of another
    preset, or holds anything else without being a sweep (a train.py run directory, say). option:
    the argument that named out/ (export's is --to), for the messages."""
    check_preset(preset)
    out = Path(out)
    _check_out(out, option)

    def check():
        if not (out / SWEEP_FILE).exists():
            foreign = _foreign_contents(out)
            if foreign:
                hint = " (a train.py run directory?)" if "config.json" in foreign else ""
                raise SweepError(f"{option} {out} is not a sweep directory (no {SWEEP_FILE}) and not empty{hint}: it "
                                 f"holds {', '.join(foreign[:5])}{' ...' if len(foreign) > 5 else ''}; choose a new or "
                                 "empty directory")
            return None
        recorded = read_sweep(out, option)
        if recorded["preset"] != preset:
            run_with = f"run with --preset {recorded['preset']} or " if option == "--out" else ""
            raise SweepError(f"{out} holds runs of preset {recorded['preset']!r}; {run_with}choose another {option} "
                             f"for preset {preset!r}")
        return recorded

    check()  # before anything is created
    out.mkdir(parents=True, exist_ok=True)
    with FileLock(str(out / SWEEP_LOCK)):
        if check() is None:
            _write_json(out / SWEEP_FILE, {"preset": preset})


def run_dir_of(out: Path, spec: RunSpec) -> Path:
    return Path(out) / "runs" / spec.name


def run_dirs(out: Path) -> list[Path]:
    """The run directories of a sweep (those with a job.json; export's temp folders start with '.')."""
    runs = Path(out) / "runs"
    return sorted(d for d in runs.iterdir() if not d.name.startswith(".") and (d / JOB_FILE).is_file()) \
        if runs.is_dir() else []


def check_run_dir(out: Path, spec: RunSpec) -> Path:
    """The run's directory, refused (SweepError) when a file is in its place (or in place of the sweep's
    runs/ or data/, or of the run's job.json) or it holds another run (a job.json of another spec
    under this name)."""
    run_dir = run_dir_of(out, spec)
    for path, what in ((run_dir.parent, "the sweep's runs directory"), (Path(out) / "data", "the sweep's data "
                       "directory"), (run_dir, "a run directory")):
        if path.exists() and not path.is_dir():
            raise SweepError(f"{path} is a file, not {what}; move it away and run again")
    if (run_dir / JOB_FILE).exists() and not (run_dir / JOB_FILE).is_file():
        raise SweepError(f"{run_dir / JOB_FILE} is not a file; move it away and run again")
    job = read_job(run_dir)
    if job is not None and job["spec"] != spec:
        raise SweepError(f"{run_dir} holds another run under this run's name (its job.json: {job['spec']}); move it "
                         "away and run again")
    return run_dir


def _unnamed_output(job: dict) -> dict:
    """The output parametrisation settings a run trained with (its job.json config) that its name no longer
    says: normalize / increment that its spec does not override and that differ from its PDE's default now
    (a run of an older sweep trained raw, the default before 2026-12-01)."""
    overrides = dict(job["spec"].overrides)
    return {k: getattr(job["config"], k) for k in OUTPUT_DEFAULTS if k not in overrides
            and getattr(job["config"], k) != output_default(job["spec"].pde, k)}


def _migrated(run_dir: Path) -> tuple[RunSpec, dict] | None:
    """(the run's spec with the output settings its name lacks, those settings), or None when it needs none."""
    job = read_job(run_dir)
    missing = _unnamed_output(job) if job is not None else {}
    if not missing:
        return None
    return dataclasses.replace(job["spec"], overrides={**dict(job["spec"].overrides), **missing}), missing


def check_output_parametrisation(out: Path) -> None:
    """Refuse (SweepError) a sweep with runs whose names no longer say how they trained: since 2026-12-01
    --normalize --increment is the default on KS and Burgers, so a run that trained raw under a name without
    those settings would count as a run with them. migrate_output_parametrisation renames such runs."""
    stale = [run_dir.name for run_dir in run_dirs(out)
             if (job := read_job(run_dir)) is not None and _unnamed_output(job)]
    if stale:
        raise SweepError(f"{out}: {len(stale)} runs trained with the raw output parametrisation (normalize and "
                         f"increment off, the default before 2026-12-01) under names that now mean --normalize "
                         f"--increment ({', '.join(stale[:3])}{' ...' if len(stale) > 3 else ''}): run `python "
                         f"scripts/reproduce.py migrate --out {out}` once, which renames them to say so "
                         "(...+increment=false+normalize=false_seedN)")


def migrate_output_parametrisation(out: Path, log: Callable[[str], None] = print) -> int:
    """Rename each run of sweep out/ that check_output_parametrisation refuses: its job.json spec gets the
    settings it trained with as overrides, and the directory (and the config paths naming it) the spec's new
    name. The directory is renamed first, so an interrupted migration is finished by running it again.
    Returns how many runs it renamed."""
    renamed = 0
    for run_dir in run_dirs(out):
        migrated = _migrated(run_dir)
        if migrated is None:
            continue
        spec, missing = migrated
        if run_state(run_dir) == "running":
            raise SweepError(f"{run_dir} is training now; migrate the sweep when it stops")
        target = run_dir.parent / spec.name
        if target != run_dir:
            if target.exists():
                raise SweepError(f"cannot rename {run_dir.name} to {target.name}: {target} exists; move one away")
            run_dir.rename(target)
        job, config = _read_json(target / JOB_FILE), _read_json(target / "config.json")
        if isinstance(config, dict) and isinstance(config.get("out"), str):
            _write_json(target / "config.json", {**config, "out": str(Path(config["out"]).parent / spec.name)})
        renamed_out = str(Path(job["config"]["out"]).parent / spec.name) if job["config"].get("out") else None
        _write_json(target / JOB_FILE, {**job, "spec": spec.to_dict(),
                                        "config": {**job["config"], "out": renamed_out}})
        renamed += 1
        log(f"{run_dir.name} -> {target.name} ({', '.join(f'{k}={v}' for k, v in missing.items())})")
    return renamed


def job_config(spec: RunSpec, preset: str, *, device: str = "auto", fast_kernels: bool = False,
               cuda_graph: bool = False) -> TrainConfig:
    """The resolved TrainConfig of a run, its paths relative to the sweep (runs/<name>, data); a bad
    setting is a ValueError naming the run."""
    try:
        return resolve_config(spec.train_config(preset, out=f"runs/{spec.name}", cache_dir="data", device=device,
                                                fast_kernels=fast_kernels, cuda_graph=cuda_graph))
    except ValueError as err:
        raise ValueError(f"run {spec.name}: {err}") from None


def dataset_args(spec: RunSpec, cfg: TrainConfig | dict, cache_dir) -> dict:
    """generate_dataset's keyword arguments (the device aside) for the data set a run of the sweep trains
    on: its config's request (amg_fast.train.data.dataset_request: pde, nu, trajectories, seed, ns2d
    options), its reading's KS options, out_dir cache_dir (the sweep's data/). cfg: a resolved
    TrainConfig or its to_dict()."""
    from amg_fast.experiments.readings import READINGS
    from amg_fast.train.data import dataset_request

    cfg = TrainConfig.from_dict(cfg) if isinstance(cfg, dict) else cfg
    return {**dataset_request(cfg), "out_dir": str(cache_dir),
            "ks_options": READINGS[spec.reading].options if spec.reading else None}


def read_job(run_dir: Path) -> dict | None:
    """job.json as {"spec": RunSpec, "config": TrainConfig}; None when unreadable or not a job."""
    job = _read_json(Path(run_dir) / JOB_FILE)
    try:
        return {"spec": RunSpec.from_dict(job["spec"]), "config": TrainConfig.from_dict(job["config"])}
    except (TypeError, KeyError, ValueError):
        return None


def write_job(out: Path, spec: RunSpec, preset: str, *, device: str = "auto", fast_kernels: bool = False,
              cuda_graph: bool = False) -> Path:
    """The run directory of spec with its job.json (the resolved TrainConfig); returns the directory.
    A run that has started keeps its job.json (its settings are fixed by its config.json) unless the
    file is unreadable (a truncated write)."""
    run_dir = check_run_dir(Path(out).resolve(), spec)  # absolute: workers and Slurm jobs run elsewhere
    cfg = job_config(spec, preset, device=device, fast_kernels=fast_kernels, cuda_graph=cuda_graph)
    if not (run_dir / "config.json").exists() or read_job(run_dir) is None:
        run_dir.mkdir(parents=True, exist_ok=True)
        _write_json(run_dir / JOB_FILE, {"spec": spec.to_dict(), "config": cfg.to_dict()})
    return run_dir


def _lock(run_dir: Path) -> FileLock:
    return FileLock(str(Path(run_dir) / LOCK_FILE))


def read_results(run_dir: Path) -> RunResults | None:
    """The run's results (amg_fast.train.rundir.RunResults) when results.json is a readable results
    object, else None (no file, or a corrupt one: run_state calls that run "corrupt")."""
    try:
        return RunDir(run_dir).read_results()
    except ResultsError:
        return None


def run_state(run_dir: Path) -> str:
    """done / corrupt / running / diverged / failed / partial / died / missing (see the module docstring)."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        return "missing"
    if (run_dir / RESULTS_FILE).exists():
        return "done" if read_results(run_dir) is not None else "corrupt"
    lock = _lock(run_dir)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        return "running"
    lock.release()
    if (run_dir / ERROR_FILE).exists():
        error = _read_json(run_dir / ERROR_FILE)
        return "diverged" if isinstance(error, dict) and (error.get(DIVERGED_KEY) is True or (
            DIVERGED_KEY not in error and str(error.get("error", "")).startswith("TrainingDiverged:"))) else "failed"
    if RunDir(run_dir).has_checkpoint():
        return "partial"
    return "died" if (run_dir / "config.json").exists() or (run_dir / LOG_FILE).exists() else "missing"


def epochs_to_resume(run_dir: Path) -> int:
    """The epochs a partial run (a checkpoint, no results) has behind it: the last epoch of its
    metrics.jsonl that wrote a checkpoint (every config.json checkpoint_every epochs); 0 for any other
    run or when its files cannot tell."""
    run = RunDir(run_dir)
    if run.finished() or not run.has_checkpoint():
        return 0
    config = _read_json(run.path / "config.json")
    every = config.get("checkpoint_every") if isinstance(config, dict) else None
    try:
        epochs = [row["epoch"] for row in run.read_metrics()]
    except RunDirError:
        return 0
    if not isinstance(every, int) or every < 1:
        return 0
    return max((e for e in epochs if isinstance(e, int) and e > 0 and e % every == 0), default=0)


def to_train(state: str, retry_diverged: bool = False) -> bool:
    """Whether `run` trains a run in this state: any not done, a diverged one only when asked."""
    return state != "done" and (state != "diverged" or retry_diverged)


def state_note(run_dir: Path, state: str) -> str:
    """What a state means for one run, for a summary line."""
    run_dir = Path(run_dir)
    if state in ("failed", "diverged"):
        error = _read_json(run_dir / ERROR_FILE)
        said = str(error.get("error") if isinstance(error, dict) else "error.json unreadable")
        if state == "diverged":
            said += (" -- not trained again (with its own settings it diverges again): `run --retry-diverged` "
                     "trains it anyway (from its last good checkpoint, where it has one); to train the cell with "
                     "another lr as a new run, select it with --where and add --set lr=...")
        return said
    return {"died": "its process ended without results, error or checkpoint (killed?); see its train.log",
            "corrupt": f"{RESULTS_FILE} is unreadable or not a results object; the next run trains it again",
            "partial": "stopped after a checkpoint (killed?); the next run resumes it",
            "running": "another process trains it",
            "missing": "not started"}.get(state, state)


def _relocate(run_dir: Path, cfg: TrainConfig, log) -> None:
    """A run that started elsewhere (a moved or copied sweep): its config.json's paths become this
    sweep's, so the trainer resumes it here (the other settings must still match)."""
    path = run_dir / "config.json"
    old = _read_json(path)
    if not isinstance(old, dict):
        return  # the trainer says what is wrong with it
    moved = {k: getattr(cfg, k) for k in ("out", "cache_dir", "data") if k in old and old[k] != getattr(cfg, k)}
    if moved:
        log(f"run directory moved: config.json paths updated ({', '.join(f'{k}: {old[k]} -> {v}' for k, v in moved.items())})")
        _write_json(path, {**old, **moved})


def _machine(device: str) -> dict:
    """Where this process trains a run of --device `device` (estimate.machine_of of the device the
    trainer picks: auto is cuda only where torch finds CUDA; --device cpu on a GPU machine is cpu)."""
    import torch

    from amg_fast.experiments.estimate import machine_of

    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    return machine_of(device, visible_gpus())


def run_job(run_dir: str) -> str:
    """Train the run in run_dir (what local workers and Slurm jobs call); returns its state after.

    Holds the run's lock throughout (a second process finds it "running" and leaves it), takes every
    path from where run_dir lies (runs/<name> of the sweep, data/ beside), generates the data under
    the sweep's data lock, resumes from whatever the directory holds. An error (also an unreadable
    job.json) is written to error.json (message and traceback) and returns "failed" ("diverged", marked
    so in error.json, for a loss that became NaN / Inf); it does not raise. A corrupt results.json is set
    aside (results.json.corrupt) and the run trained again.
    machine.json records where it trains, when (STARTED_KEY), with what code (SOFTWARE_KEY:
    amg_fast._provenance.software(): the commit, torch / CUDA / triton versions, the AMG_FAST_* kernel
    switches set) and, once training starts, the seconds spent before (SETUP_KEY), of them on its data set
    (DATA_KEY: waiting for the sweep's data lock, generating or finding it) and whether this run generated
    it (GENERATED_KEY).
    """
    started = time.monotonic()  # before the imports below (torch): they are part of a run's start-up
    from amg_fast._provenance import software
    from amg_fast.data.generate import generate_dataset
    from amg_fast.experiments.estimate import DATA_KEY, GENERATED_KEY, SETUP_KEY
    from amg_fast.train.trainer import TrainingDiverged, train

    run_dir = Path(run_dir).resolve()
    lock = _lock(run_dir)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        return "running"
    try:
        if read_results(run_dir) is not None:
            return "done"
        if (run_dir / RESULTS_FILE).exists():
            os.replace(run_dir / RESULTS_FILE, run_dir / (RESULTS_FILE + ".corrupt"))
        (run_dir / ERROR_FILE).unlink(missing_ok=True)
        with open(run_dir / LOG_FILE, "a") as log_file:
            def log(*parts):
                print(*parts, file=log_file, flush=True)
            try:
                job = read_job(run_dir)
                if job is None:
                    raise SweepError(f"{run_dir / JOB_FILE}: unreadable or not a job; run `reproduce.py run` with "
                                     "this run's experiment again to rewrite it")
                spec, cfg = job["spec"], job["config"]
                cfg.out, cfg.cache_dir = str(run_dir), str(run_dir.parents[1] / "data")
                cfg.resume = (run_dir / "config.json").exists()  # an earlier attempt created the run directory
                machine = {**_machine(cfg.device), SOFTWARE_KEY: software(),
                           STARTED_KEY: datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
                _write_json(run_dir / MACHINE_FILE, machine)
                Path(cfg.cache_dir).mkdir(parents=True, exist_ok=True)
                data_started = time.monotonic()
                with FileLock(str(Path(cfg.cache_dir) / ".generate.lock")):
                    try:  # on the run's GPU when it has one
                        path, summary = generate_dataset(**dataset_args(spec, cfg, cfg.cache_dir), device=cfg.device)
                    except FileExistsError as err:  # damaged (a copy cut short) or of other arguments
                        raise SweepError(f"the sweep's data set is unusable: {err}. In a sweep: delete that file "
                                         "and run the same command again (the next run generates it)") from None
                if spec.reading:
                    cfg.data = str(path)
                _relocate(run_dir, cfg, log)
                now = time.monotonic()
                _write_json(run_dir / MACHINE_FILE, {**machine, SETUP_KEY: round(now - started, 2),
                                                     DATA_KEY: round(now - data_started, 2),
                                                     GENERATED_KEY: not summary["skipped"]})
                train(cfg, log=log)
            except Exception as err:  # recorded; the sweep goes on and the next `run` retries it
                log(traceback.format_exc())
                diverged = isinstance(err, TrainingDiverged)  # its message names the run's checkpoint: relative
                _write_json(run_dir / ERROR_FILE, {"error": _relative_message(f"{type(err).__name__}: {err}", run_dir),
                                                   "traceback": traceback.format_exc(), DIVERGED_KEY: diverged})
                return "diverged" if diverged else "failed"
        return "done"
    finally:
        lock.release()


def read_record(run_dir: Path) -> dict:
    """A run directory as a report record: its RunSpec fields (with "overrides" as a {setting: value}
    dict), run_dir (runs/<name>, relative to the sweep), status, results (RunResults or None; results.get(name) reads a field or a diagnostic),
    history (metrics.jsonl rows), machine (machine.json: where, when and with what code it trained; {} if
    unreadable) and error (error.json's, or why a file of the run could not be read: that run then counts
    without its results or history)."""
    run = RunDir(run_dir)
    job = _read_json(run.path / JOB_FILE)
    spec = job.get("spec") if isinstance(job, dict) and isinstance(job.get("spec"), dict) else {}
    recorded = _read_json(run.path / ERROR_FILE)
    errors = [recorded.get("error")] if isinstance(recorded, dict) and recorded.get("error") else []
    history, results = [], None
    try:
        history = run.read_metrics()
    except RunDirError as err:
        errors.append(str(err))
    try:
        results = run.read_results()
    except ResultsError as err:
        errors.append(str(err))
    # run_dir relative to the sweep (runs/<name>): a report is the same wherever the sweep lies
    machine = _read_json(run.path / MACHINE_FILE)
    return {"name": run.path.name, "run_dir": f"runs/{run.path.name}", "status": run_state(run.path), **spec,
            "results": results, "history": history, "machine": machine if isinstance(machine, dict) else {},
            "error": "; ".join(errors) if errors else None}


# -- export -------------------------------------------------------------------------------------
def _exported_config(run_dir: Path) -> str | None:
    """The run's config.json with its paths as job.json gives them, relative to the sweep (out runs/<name>,
    cache_dir data, a reading's data file data/<file>) instead of the absolute paths of the machine that
    trained it; None (copied as it is) when config.json or job.json is not one."""
    config, job = _read_json(run_dir / "config.json"), _read_json(run_dir / JOB_FILE)
    if not isinstance(config, dict) or not isinstance(job, dict) or not isinstance(job.get("config"), dict):
        return None
    paths = {key: job["config"].get(key) for key in ("out", "cache_dir") if key in config}
    if isinstance(config.get("data"), str) and isinstance(paths.get("cache_dir"), str):
        paths["data"] = f"{paths['cache_dir']}/{Path(config['data']).name}"  # runner: generated in cache_dir
    return json.dumps({**config, **paths}, indent=2) + "\n"


def _exported_error(run_dir: Path) -> str | None:
    """A diverged run's error.json for the tree: its message with the run directory's path as the sweep's
    relative runs/<name> (a diverged run's message names its checkpoint), without the traceback (the paths of
    the machine that trained it; train.log keeps it); None (copied as it is) when it is not an error record."""
    error = _read_json(run_dir / ERROR_FILE)
    if not isinstance(error, dict):
        return None
    kept = {key: value for key, value in error.items() if key != "traceback"}
    if isinstance(kept.get("error"), str):  # run_job writes it relative; a run moved since trained elsewhere
        kept["error"] = _relative_message(kept["error"], Path(run_dir).resolve())
    return json.dumps(kept, indent=2) + "\n"


def _relative_message(message: str, run_dir: Path) -> str:
    """message with the run directory's absolute path as the sweep's relative runs/<name>."""
    return message.replace(str(run_dir), f"runs/{run_dir.name}")


def _copy_run(run_dir: Path, target: Path) -> None:
    """Copy a finished run's small files to target as one rename (a temp folder beside it first);
    config.json's paths become the sweep's relative ones (_exported_config)."""
    tmp = target.with_name(f".{target.name}.export-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        for name in EXPORT_FILES:
            if (run_dir / name).is_file():
                shutil.copy2(run_dir / name, tmp / name)
        config = _exported_config(run_dir)
        if config is not None:
            (tmp / "config.json").write_text(config)
        error = _exported_error(run_dir) if (run_dir / ERROR_FILE).is_file() else None
        if error is not None:
            (tmp / ERROR_FILE).write_text(error)
        log = run_dir / LOG_FILE
        if log.is_file() and log.stat().st_size <= EXPORT_LOG_LIMIT:
            shutil.copy2(log, tmp / LOG_FILE)
        old = target.with_name(f".{target.name}.old-{os.getpid()}")
        if target.exists():
            os.replace(target, old)
        os.replace(tmp, target)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _remove_dead_exports(runs: Path) -> None:
    """Remove what an export killed before it finished left in runs/: its temp folder of a run
    (.<name>.export-<pid>) or the replaced copy (.<name>.old-<pid>), once that process is gone."""
    from amg_fast._files import _pid_running

    leftovers = [*runs.glob(".*.export-*"), *runs.glob(".*.old-*")] if runs.is_dir() else []
    for tmp in leftovers:
        pid = tmp.name.rsplit("-", 1)[1]
        if pid.isdigit() and not _pid_running(int(pid)):
            shutil.rmtree(tmp, ignore_errors=True)


def export_runs(out: Path, dest: Path) -> dict[str, list[str]] | None:
    """Copy each finished or diverged run of sweep out/ (job.json, config.json, results.json or error.json,
    metrics.jsonl, machine.json, a small train.log; no checkpoints or rollouts) to dest/runs/<name>/, each
    run as one rename, and dest/sweep.json; dest then is a sweep whose `run` treats those runs as finished
    (a diverged one as diverged: not trained again unless asked). A finished run replaces a diverged one
    in dest, never the reverse, and a diverged one never replaces a run with a checkpoint (partial, failed).
    Returns {"copied": names, "present": names already finished (or, for a diverged one, already finished
    or diverged) in dest, "skipped": "name (state)"}, or None (and nothing written) when out/ has neither
    a finished nor a diverged run."""
    out, dest = Path(out), Path(dest)
    preset = read_sweep(out, "export")["preset"]
    if dest.resolve() == out.resolve() or dest.resolve().is_relative_to(out.resolve() / "runs"):
        raise SweepError(f"--to {dest}: the sweep itself or inside its runs/; choose a directory of its own")
    states = {run_dir: run_state(run_dir) for run_dir in run_dirs(out)}
    if not set(EXPORTED_STATES) & set(states.values()):
        return None
    prepare_sweep(dest, preset, "--to")
    _remove_dead_exports(dest / "runs")
    report: dict[str, list[str]] = {"copied": [], "present": [], "skipped": []}
    for run_dir, state in states.items():
        target = dest / "runs" / run_dir.name
        there = run_state(target)
        if state not in EXPORTED_STATES:
            report["skipped"].append(f"{run_dir.name} ({state})")
        elif there == "done" or there == state:
            report["present"].append(run_dir.name)
        elif there == "running" or (state == "diverged" and RunDir(target).has_checkpoint()):  # kept: resumable
            report["skipped"].append(f"{run_dir.name} ({state}; {there} in {dest})")
        else:
            _copy_run(run_dir, target)
            report["copied"].append(run_dir.name)
    return report


# -- launchers ---------------------------------------------------------------------------------
def visible_gpus() -> list[str]:
    """The GPUs this process may use, as CUDA_VISIBLE_DEVICES entries (no CUDA initialisation)."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [d.strip() for d in env.split(",") if d.strip() and d.strip() != "-1"]
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in out.stdout.splitlines() if line.strip()] if out.returncode == 0 else []


def check_worker_counts(workers: int | None, runs_per_gpu: int) -> None:
    for name, value in (("workers", workers), ("runs_per_gpu", runs_per_gpu)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise SweepError(f"{flag(name)} must be an integer >= 1, got {value!r}")


def worker_slots(workers: int | None, runs_per_gpu: int, gpus: list[str]) -> list[str | None]:
    """One slot per concurrent run: runs_per_gpu per visible GPU (CUDA_VISIBLE_DEVICES of the
    worker), or `workers` CPU slots (default 1) where there is no GPU."""
    check_worker_counts(workers, runs_per_gpu)
    if gpus:
        slots = [gpu for _ in range(runs_per_gpu) for gpu in gpus]
        return slots[:workers] if workers else slots
    return [None] * (workers or 1)


class _Workers:
    """The worker processes of run_local. Ctrl-C in the driver (KeyboardInterrupt in its main
    thread) calls interrupt(): no new worker starts and the running ones get SIGINT, so each stops
    as train.py does on Ctrl-C (its last checkpoint kept) whether or not the terminal signalled it."""

    def __init__(self):
        self._guard = threading.Lock()
        self._live: set[subprocess.Popen] = set()
        self.stopping = False

    def run(self, run_dir: Path, gpu: str | None, cpu_threads: int | None = None) -> str | None:
        """Train run_dir in a worker process; its state after, or None when the sweep is stopping."""
        env = dict(os.environ)
        if gpu is not None:
            env["CUDA_VISIBLE_DEVICES"] = gpu
        if cpu_threads is not None and "OMP_NUM_THREADS" not in os.environ:
            env["OMP_NUM_THREADS"] = str(cpu_threads)
        with open(Path(run_dir) / LOG_FILE, "a") as log_file:
            with self._guard:
                if self.stopping:
                    return None
                proc = subprocess.Popen([sys.executable, "-m", "amg_fast.experiments.runner", str(run_dir)], env=env,
                                        stdout=log_file, stderr=subprocess.STDOUT)
                self._live.add(proc)
            try:
                proc.wait()
            finally:
                with self._guard:
                    self._live.discard(proc)
        return None if self.stopping else run_state(run_dir)

    def interrupt(self) -> None:
        with self._guard:
            self.stopping = True
            for proc in self._live:
                proc.send_signal(signal.SIGINT)


def run_local(run_dirs: Iterable[Path], *, workers: int | None = None, runs_per_gpu: int = 1,
              on_done: Callable[[Path, str], None] | None = None,
              should_start: Callable[[Path], str | None] | None = None,
              retry_diverged: bool = False) -> dict[str, str]:
    """Train the runs that are not done (nor diverged, unless retry_diverged), each in its own process,
    as many at once as there are worker slots, in the order given; returns {run name: state after}.
    should_start(run_dir), asked when a slot is free, returns None to start the run or the reason to
    skip it (state "skipped"); on_done(run_dir, state) after each run. KeyboardInterrupt (Ctrl-C) stops the workers (each
    keeps its run's last checkpoint), waits for them and is raised again."""
    todo = [Path(d) for d in run_dirs if to_train(run_state(d), retry_diverged)]
    slots = worker_slots(workers, runs_per_gpu, visible_gpus())
    # CPU workers share the cores (torch's default of one thread per core each oversubscribes them:
    # measured 3-6x slower with 2 workers on 2 cores); OMP_NUM_THREADS set by the user wins.
    cpu_threads = max(1, (os.cpu_count() or 1) // len(slots)) if slots[0] is None else None
    free: Queue = Queue()
    for slot in slots:
        free.put(slot)
    processes = _Workers()

    def work(run_dir: Path) -> str | None:
        slot = free.get()
        try:
            skip = should_start(run_dir) if should_start is not None else None
            state = "skipped" if skip else processes.run(run_dir, slot, cpu_threads)
        finally:
            free.put(slot)
        if on_done is not None and state is not None:
            on_done(run_dir, state)
        return state

    pool = ThreadPoolExecutor(max_workers=len(slots))
    try:
        states = list(pool.map(work, todo))
    except KeyboardInterrupt:
        processes.interrupt()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return {d.name: s for d, s in zip(todo, states)}


SLURM_JOB_FILE = "slurm_job.json"
MAX_REQUEUES = 3  # a run's job is requeued at most this many times after reaching its time (submitit's default)


def run_slurm(run_dirs: Iterable[Path], folder: Path, *, partition: str | None = None, time_min: int = 240,
              gpus_per_task: int = 1, cpus_per_task: int = 4, array_parallelism: int = 64,
              extra_sbatch: dict | None = None, cluster: str | None = None,
              max_requeues: int = MAX_REQUEUES, retry_diverged: bool = False) -> list[str]:
    """Submit the runs that are not done (nor diverged, unless retry_diverged), not running and not queued
    as one Slurm job array through submitit; returns the submitted job ids. cluster="local" uses submitit's local executor (tests).

    Each job is a RequeueableRun (amg_fast.experiments.slurm_job): one that reaches time_min is
    requeued, up to max_requeues times, and resumes from its run's last checkpoint."""
    check_slurm(cluster)
    check_max_requeues(max_requeues)
    import submitit

    from amg_fast.experiments.slurm_job import RequeueableRun

    todo = [Path(d) for d in run_dirs if (state := run_state(d)) != "running" and to_train(state, retry_diverged)]
    todo = [d for d in todo if not _queued(d, folder)]
    if not todo:
        return []
    executor = submitit.AutoExecutor(folder=str(folder), cluster=cluster, slurm_max_num_timeout=max_requeues,
                                     local_max_num_timeout=max_requeues)
    executor.update_parameters(**slurm_parameters(partition=partition, time_min=time_min, gpus_per_task=gpus_per_task,
                                                  cpus_per_task=cpus_per_task, array_parallelism=array_parallelism,
                                                  extra_sbatch=extra_sbatch, local=cluster == "local"))
    jobs = executor.map_array(RequeueableRun(), [str(d) for d in todo])
    for run_dir, job in zip(todo, jobs):
        _write_json(run_dir / SLURM_JOB_FILE, {"job_id": job.job_id})
    return [job.job_id for job in jobs]


def check_slurm(cluster: str | None = None) -> None:
    """Raise SweepError unless submitit imports and (for a real cluster) sbatch is on PATH."""
    try:
        import submitit  # noqa: F401
    except ImportError as err:
        raise SweepError("--launcher slurm needs the submitit package: pip install 'amg_fast[slurm]'") from err
    if cluster is None and shutil.which("sbatch") is None:
        raise SweepError("--launcher slurm needs Slurm's sbatch on PATH (none found); use --launcher local")


def check_max_requeues(value) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise SweepError(f"--max-requeues must be an integer >= 0, got {value!r}")


def slurm_parameters(*, partition, time_min, gpus_per_task, cpus_per_task, array_parallelism, extra_sbatch,
                     local: bool = False) -> dict:
    """submitit parameters of the sweep's job array (the local executor takes the generic ones only)."""
    params = {"timeout_min": time_min, "cpus_per_task": cpus_per_task, "tasks_per_node": 1, "nodes": 1}
    if local:
        return params
    params.update(slurm_array_parallelism=array_parallelism, slurm_gpus_per_task=gpus_per_task,
                  slurm_additional_parameters=dict(extra_sbatch or {}))
    if partition:
        params["slurm_partition"] = partition
    return params


def _queued(run_dir: Path, folder: Path) -> bool:
    """Whether the run's last Slurm job is still pending or running (sacct, through submitit)."""
    recorded = _read_json(Path(run_dir) / SLURM_JOB_FILE)
    if not isinstance(recorded, dict) or not isinstance(recorded.get("job_id"), str) or shutil.which("sacct") is None:
        return False  # never submitted, or a damaged record: submitted again
    import submitit

    state = submitit.SlurmJob(folder=str(folder), job_id=recorded["job_id"]).state
    return state in ("PENDING", "RUNNING", "REQUEUED", "CONFIGURING", "COMPLETING")


def _worker_main(run_dir: str) -> int:
    """A local worker (python -m amg_fast.experiments.runner RUN_DIR, output into train.log): 0 when
    the run is done (or another process trains it), 1 when it failed, 130 on SIGINT (the driver's
    Ctrl-C), after which the run keeps its last checkpoint. SIGINT is handled whatever this process
    inherited: the driver may have started it while ignoring a second Ctrl-C."""
    arm_stop_once()
    try:
        return 0 if run_job(run_dir) in ("done", "running") else 1
    except KeyboardInterrupt:
        if RunDir(run_dir).has_checkpoint():
            kept = "its last checkpoint is kept; the next `reproduce.py run` resumes it"
        else:
            kept = "no checkpoint yet; the next `reproduce.py run` starts it again"
        print(f"interrupted: {run_dir} stopped ({kept})", flush=True)
        return EXIT_INTERRUPTED


if __name__ == "__main__":  # python -m amg_fast.experiments.runner RUN_DIR: one run (a local worker)
    if len(sys.argv) != 2:
        sys.exit("usage: python -m amg_fast.experiments.runner RUN_DIR")
    sys.exit(_worker_main(sys.argv[1]))
