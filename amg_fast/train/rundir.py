"""The run directory of one training run: its files, their one writer and one reader, and the
typed schema of results.json (RunResults).

    config.json    the run's resolved settings (TrainConfig.to_dict())
    metrics.jsonl  one JSON object per finished epoch: epoch, train_loss, lr, gate_mean, time_s;
                   test_nrmse, test_one_step_nrmse and eval_s at evaluations; checkpoint_s
    checkpoint.pt  the last checkpoint (amg_fast.train.checkpoint)
    results.json   RunResults.to_dict(), written once, after the final evaluation
    rollout.npz    pred, true [N_test, T, S] (2D: [N_test, T, X, Y]): the test rollout, steps 1..T
    .train.lock    held while a process trains in the directory

RunDir(path) writes and reads these files, each written whole through a temp file and a rename
(amg_fast._files); open_run_dir(cfg) is the trainer's way in (the checks, the lock, and the
clean-up of an attempt that fails before its first checkpoint). RunResults.from_dict refuses a
results.json that is truncated, wrongly typed or of another schema with a ResultsError that names
the file and the field. Each statistic of a run is computed once, here: RunResults.from_evaluation
(with gate_mean_last_epochs and epoch_seconds over the history) and the diagnostic properties
listed in DIAGNOSTICS.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import shutil
import statistics
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from filelock import FileLock, Timeout

from amg_fast._files import atomic_path, atomic_write_text
from amg_fast.train.checkpoint import CHECKPOINT_NAME, load_checkpoint, save_checkpoint
from amg_fast.train.config import TrainConfig

__all__ = ["RunDir", "RunResults", "RunDirError", "ResultsError", "open_run_dir", "check_run_dir",
           "gate_mean_last_epochs", "epoch_seconds", "DIAGNOSTICS", "SMALL_FILES", "GATE_EPOCHS", "DIAGNOSTIC_STEP",
           "RESUMABLE_CHANGES", "CONFIG_FILE", "METRICS_FILE", "RESULTS_FILE", "ROLLOUT_FILE", "TRAIN_LOCK"]

CONFIG_FILE, METRICS_FILE, RESULTS_FILE, ROLLOUT_FILE = "config.json", "metrics.jsonl", "results.json", "rollout.npz"
TRAIN_LOCK = ".train.lock"  # held while a process trains in the run directory (not the sweep runner's .lock)
SMALL_FILES = (CONFIG_FILE, METRICS_FILE, RESULTS_FILE)  # what describes a finished run, without weights or rollouts
GATE_EPOCHS = 20  # Table 3's g-bar: the mean gate of the last 20 training epochs
DIAGNOSTIC_STEP = 5  # the rollout step of nrmse_step5 and amplitude_step5 (a shorter rollout: its last step)
# Settings that may differ between a run and its resumption.
RESUMABLE_CHANGES = {"resume", "device", "out", "fast_kernels", "cuda_graph", "checkpoint_every", "eval_batch_size",
                     "regenerate"}


class RunDirError(RuntimeError):
    """The output directory holds another run, nothing to resume, or is in use by another process."""


class ResultsError(ValueError):
    """A results.json that is not one RunResults can read: its message names the file and the field."""


# -- statistics of the per-epoch history ---------------------------------------------------------
def gate_mean_last_epochs(history: list[dict], epochs: int = GATE_EPOCHS) -> float | None:
    """Mean of the per-epoch gate_mean over the last `epochs` rows of metrics.jsonl (rows
    without a gate skipped); None when no row has one (models without a gate)."""
    gates = [row["gate_mean"] for row in history[-epochs:] if row.get("gate_mean") is not None]
    return statistics.fmean(gates) if gates else None


def epoch_seconds(history: list[dict]) -> dict[str, float]:
    """Seconds spent over all epochs: training steps (time_s), evaluations (eval_s), checkpoints
    (checkpoint_s), as results.json's train_time_s, eval_time_s, checkpoint_time_s."""
    return {f"{name}_time_s": sum(row.get(key, 0.0) for row in history)
            for name, key in (("train", "time_s"), ("eval", "eval_s"), ("checkpoint", "checkpoint_s"))}


# -- results.json --------------------------------------------------------------------------------
def _at_step(values: list[float], step: int) -> float:
    """values[step - 1] of a per-step list (steps 1..T), the last one for a shorter list."""
    return values[min(step, len(values)) - 1]


# The fidelity diagnostics of docs/fidelity.md: properties of RunResults, computed from its fields.
DIAGNOSTICS = {
    "nrmse_step1": "test rollout nRMSE at step 1",
    "nrmse_step5": "test rollout nRMSE at step 5 (the last step of a shorter rollout)",
    "nrmse_last_step": "test rollout nRMSE at the last step",
    "amplitude_step5": "||pred|| / ||true|| of the test rollout at step 5 (1: the right amplitude)",
    "amplitude_last_step": "||pred|| / ||true|| of the test rollout at the last step",
    "train_test_rollout_ratio": "rollout nRMSE on training trajectories / on test ones (near 1: the rollout "
                                "error is not overfitting)",
    "one_step_loss_ratio": "one-step loss on test / on training trajectories (well above 1: the one-step map "
                           "overfits)",
}

_TYPE_NAMES = {"str": "a string", "int": "an integer", "float": "a number", "bool": "true or false",
               "list[float]": "a list of numbers"}


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _type_ok(value, annotation: str) -> bool:
    base, optional = annotation.removesuffix(" | None"), annotation.endswith(" | None")
    if value is None:
        return optional
    return {"str": lambda: isinstance(value, str), "bool": lambda: isinstance(value, bool),
            "int": lambda: isinstance(value, int) and not isinstance(value, bool),
            "float": lambda: _is_number(value),
            "list[float]": lambda: isinstance(value, list) and bool(value) and all(map(_is_number, value))}[base]()


# Fields of RunResults added after results.json files were committed, with the value an older file
# means by their absence. Add every new field here (tests/train/test_rundir.py holds the rule).
ADDED_LATER: dict[str, object] = {}


@dataclass(frozen=True)
class RunResults:
    """What results.json holds: the final evaluation of a run (test split; the first
    TRAIN_EVAL_LIMIT training trajectories for the train_* fields) and its bookkeeping.
    Per-step lists are over rollout steps 1..T; nRMSE as amg_fast.metrics.nrmse."""

    model: str
    pde: str
    nu: float
    res: int
    nrmse: float  # test rollout from u_0, mean over trajectories and steps 1..T
    nrmse_per_step: list[float]
    gate_mean: float | None  # AMGFNO's mean gate g-bar during the test rollout
    amplitude_per_step: list[float]  # ||pred|| / ||true|| of the test rollout
    one_step_nrmse: float  # teacher forcing: each prediction from the true history
    one_step_nrmse_per_step: list[float]
    test_one_step_loss: float  # the training loss (eq. app-training-loss) on the test trajectories
    train_one_step_loss: float
    train_one_step_nrmse: float
    train_nrmse: float  # rollout nRMSE on training trajectories
    train_eval_trajectories: int
    gate_mean_last20_epochs: float | None  # Table 3's g-bar (gate_mean_last_epochs)
    params: int
    epochs: int
    wall_time_s: float  # all segments of a resumed run
    train_time_s: float
    eval_time_s: float
    checkpoint_time_s: float
    precision: str
    cuda_graph: bool
    fast_kernels: bool
    device: str
    world_size: int
    ddp_ranks_agree: bool | None  # None in one process

    @classmethod
    def from_evaluation(cls, cfg: TrainConfig, test, train, history: list[dict], *, params: int, wall_time_s: float,
                        device: str, world_size: int = 1, ddp_ranks_agree: bool | None = None) -> "RunResults":
        """The results of a run: cfg its settings, test and train the EvalResults of the final
        evaluation (amg_fast.train.evaluate), history its metrics.jsonl rows."""
        return cls(model=cfg.model, pde=cfg.pde, nu=cfg.nu, res=cfg.res, nrmse=test.nrmse,
                   nrmse_per_step=test.nrmse_per_step.tolist(), gate_mean=test.gate_mean,
                   amplitude_per_step=test.amplitude_per_step.tolist(), one_step_nrmse=test.one_step_nrmse,
                   one_step_nrmse_per_step=test.one_step_nrmse_per_step.tolist(),
                   test_one_step_loss=test.one_step_loss, train_one_step_loss=train.one_step_loss,
                   train_one_step_nrmse=train.one_step_nrmse, train_nrmse=train.nrmse,
                   train_eval_trajectories=len(train.true), gate_mean_last20_epochs=gate_mean_last_epochs(history),
                   params=params, epochs=cfg.epochs, wall_time_s=wall_time_s, **epoch_seconds(history),
                   precision=cfg.precision, cuda_graph=cfg.cuda_graph, fast_kernels=cfg.fast_kernels, device=device,
                   world_size=world_size, ddp_ranks_agree=ddp_ranks_agree)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values, source: str = "results") -> "RunResults":
        """Check and type what to_dict() wrote: every field present, none unknown, each of its
        type (numbers may be written as integers). Raises ResultsError naming `source`."""
        def refuse(why: str) -> ResultsError:
            return ResultsError(f"{source}: not a results.json of amg_fast ({why})")

        if not isinstance(values, dict):
            raise refuse(f"it holds a JSON {type(values).__name__}, not an object")
        fields = {f.name: f.type for f in dataclasses.fields(cls)}
        # A field added after runs were committed has a default (ADDED_LATER): an older results.json
        # without it still reads, so a schema change never makes finished runs "corrupt" and retrained.
        values = {**{name: default for name, default in ADDED_LATER.items() if name not in values}, **values}
        missing = [name for name in fields if name not in values]
        if missing:
            raise refuse(f"truncated or of an older version: missing {', '.join(missing)}")
        unknown = sorted(set(values) - set(fields))
        if unknown:
            raise refuse(f"unknown fields {', '.join(unknown)}: written by another version of amg_fast?")
        for name, annotation in fields.items():
            if not _type_ok(values[name], annotation):
                allowed = _TYPE_NAMES[annotation.removesuffix(" | None")]
                allowed += " or null" if annotation.endswith(" | None") else ""
                raise refuse(f"field {name} must be {allowed}, got {values[name]!r}")
        typed = {name: [float(v) for v in values[name]] if fields[name] == "list[float]"
                 else float(values[name]) if fields[name].startswith("float") and values[name] is not None
                 else values[name] for name in fields}
        return cls(**typed)

    def get(self, name: str, default=None):
        """A field or a DIAGNOSTICS property by name (default for any other name), as dict.get on
        results.json would give, so a table can name its columns."""
        if name in DIAGNOSTICS or name in self.__dataclass_fields__:
            return getattr(self, name)
        return default

    # -- the fidelity diagnostics (DIAGNOSTICS) --------------------------------------------------
    @property
    def nrmse_step1(self) -> float:
        return _at_step(self.nrmse_per_step, 1)

    @property
    def nrmse_step5(self) -> float:
        return _at_step(self.nrmse_per_step, DIAGNOSTIC_STEP)

    @property
    def nrmse_last_step(self) -> float:
        return self.nrmse_per_step[-1]

    @property
    def amplitude_step5(self) -> float:
        return _at_step(self.amplitude_per_step, DIAGNOSTIC_STEP)

    @property
    def amplitude_last_step(self) -> float:
        return self.amplitude_per_step[-1]

    @property
    def train_test_rollout_ratio(self) -> float | None:
        return self.train_nrmse / self.nrmse if self.nrmse else None

    @property
    def one_step_loss_ratio(self) -> float | None:
        return self.test_one_step_loss / self.train_one_step_loss if self.train_one_step_loss else None


# -- the directory -------------------------------------------------------------------------------
class RunDir:
    """The files of one run directory (module docstring): where they are, their writer and their reader."""

    def __init__(self, path):
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    @property
    def config_path(self) -> Path:
        return self.path / CONFIG_FILE

    @property
    def metrics_path(self) -> Path:
        return self.path / METRICS_FILE

    @property
    def results_path(self) -> Path:
        return self.path / RESULTS_FILE

    @property
    def rollout_path(self) -> Path:
        return self.path / ROLLOUT_FILE

    @property
    def checkpoint_path(self) -> Path:
        return self.path / CHECKPOINT_NAME

    @property
    def lock_path(self) -> Path:
        return self.path / TRAIN_LOCK

    def has_checkpoint(self) -> bool:
        return self.checkpoint_path.is_file()

    def finished(self) -> bool:
        """results.json is there (the run's final evaluation was written)."""
        return self.results_path.exists()

    # -- writer ----------------------------------------------------------------------------------
    def write_config(self, cfg: TrainConfig) -> None:
        atomic_write_text(self.config_path, json.dumps(cfg.to_dict(), indent=2) + "\n")

    def write_metrics(self, history: list[dict]) -> None:
        atomic_write_text(self.metrics_path, "".join(json.dumps(row) + "\n" for row in history))

    def write_checkpoint(self, state: dict) -> None:
        save_checkpoint(self.checkpoint_path, state)

    def write_results(self, results: RunResults) -> None:
        atomic_write_text(self.results_path, json.dumps(results.to_dict(), indent=2) + "\n")

    def write_rollout(self, pred: np.ndarray, true: np.ndarray) -> None:
        with atomic_path(self.rollout_path) as tmp, open(tmp, "wb") as fh:
            np.savez_compressed(fh, pred=pred, true=true)

    # -- reader ----------------------------------------------------------------------------------
    def read_config(self) -> TrainConfig | None:
        """config.json as a TrainConfig (an older run's: retired keys out, new ones at their
        defaults); None when there is none; RunDirError when it cannot be read."""
        if not self.config_path.exists():
            return None
        try:
            values = json.loads(self.config_path.read_text())
        except (OSError, ValueError) as err:
            raise RunDirError(f"{self.config_path}: unreadable ({err}); delete it to start the run over") from None
        try:
            return TrainConfig.from_dict(values)
        except (TypeError, ValueError, AttributeError) as err:
            raise RunDirError(f"{self.config_path}: not a training config ({err}); delete it to start the run "
                              "over") from None

    def read_metrics(self) -> list[dict]:
        """metrics.jsonl's rows ([] when there is none); RunDirError naming the line that is not a
        JSON object with an epoch."""
        if not self.metrics_path.exists():
            return []
        rows = []
        for number, line in enumerate(self.metrics_path.read_text().splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as err:
                raise RunDirError(f"{self.metrics_path}: line {number} is not JSON ({err})") from None
            if not isinstance(row, dict) or not isinstance(row.get("epoch"), int):
                raise RunDirError(f"{self.metrics_path}: line {number} is not an epoch's metrics (an object with "
                                  f"an integer epoch), got {line[:80]!r}")
            rows.append(row)
        return rows

    def read_results(self) -> RunResults | None:
        """results.json as RunResults; None when there is none (the run has not finished);
        ResultsError when it is not valid JSON or not of the schema."""
        if not self.results_path.exists():
            return None
        advice = "; delete it and run the same training command with --resume to evaluate the run again"
        try:
            values = json.loads(self.results_path.read_text())
        except (OSError, ValueError) as err:
            raise ResultsError(f"{self.results_path}: not a results.json of amg_fast (truncated or not JSON: "
                               f"{err}){advice}") from None
        try:
            return RunResults.from_dict(values, source=str(self.results_path))
        except ResultsError as err:
            raise ResultsError(f"{err}{advice}") from None

    def read_rollout(self) -> tuple[np.ndarray, np.ndarray] | None:
        """(pred, true) of rollout.npz, None when there is none."""
        if not self.rollout_path.exists():
            return None
        with np.load(self.rollout_path) as data:
            return data["pred"], data["true"]

    def read_checkpoint(self, required=("model", "config")) -> dict | None:
        """The checkpoint's dict (None when there is none); CheckpointError when it is corrupt."""
        return load_checkpoint(self.checkpoint_path, required=required) if self.has_checkpoint() else None


# -- the trainer's way in ------------------------------------------------------------------------
def check_run_dir(cfg: TrainConfig, unsettled: Collection[str] = ()) -> None:
    """Refuse --out when it holds another run (without --resume), a run with other settings
    (--resume), or nothing to resume. Reads only. A config.json without a checkpoint or results
    is what a failed or killed attempt left before its first checkpoint: the run starts afresh.
    unsettled: settings the data may still change (amg_fast.train.data.settings_the_data_may_set),
    not compared with config.json's yet: the trainer checks before the data and again after it."""
    run = RunDir(cfg.out)
    if not run.config_path.exists():
        if cfg.resume and not run.has_checkpoint():
            raise RunDirError(f"{run.path}: nothing to resume (no config.json or checkpoint)")
        return
    if not cfg.resume:
        if run.has_checkpoint() or run.finished():
            raise RunDirError(f"{run.path} already holds a run (config.json); pass --resume to continue it "
                              f"or choose another --out")
        return
    old, new = run.read_config().to_dict(), cfg.to_dict()
    diff = {k for k in new if k not in RESUMABLE_CHANGES and k not in unsettled and old.get(k) != new[k]}
    if diff:
        raise RunDirError(f"{run.path}: --resume with settings that differ from the run's config.json: "
                          + ", ".join(f"{k}={old.get(k)!r} -> {new[k]!r}" for k in sorted(diff)))


@contextlib.contextmanager
def open_run_dir(cfg: TrainConfig, log):
    """Create (or reopen) --out, lock it for this process and write config.json; yields its RunDir.

    An error before any checkpoint exists removes what this attempt created (the directories it
    made, or config.json / metrics.jsonl), so the same command can be run again; with a
    checkpoint the directory stays, to --resume (said here unless the error says otherwise: Ctrl-C, or
    an error whose resume_helps is False, as a diverged run's)."""
    run = RunDir(cfg.out)
    missing = [p for p in (run.path, *run.path.parents) if not p.exists()]
    created = missing[-1] if missing else None  # the topmost directory this attempt creates
    try:
        run.path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise RunDirError(f"--out {run.path}: cannot create the run directory ({err.strerror or err})") from None
    lock = FileLock(str(run.lock_path))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        raise RunDirError(f"{run.path}: another process is training in this run directory (it holds "
                          f"{run.lock_path}); wait for it to finish or stop it, or choose another --out") from None
    existed = {path: path.exists() for path in (run.config_path, run.metrics_path)}
    try:
        check_run_dir(cfg)  # again, under the lock: another process may have started a run here meanwhile
        run.write_config(cfg)
        yield run
    except BaseException as err:
        if not run.has_checkpoint():  # nothing to resume: leave nothing behind
            if created is not None:
                shutil.rmtree(created, ignore_errors=True)
            for path, was_there in existed.items():
                if not was_there:
                    path.unlink(missing_ok=True)
        elif not isinstance(err, KeyboardInterrupt) and getattr(err, "resume_helps", True):
            # Ctrl-C prints its own "continue with: ... --resume" line; a diverged run would diverge again
            log(f"{run.path} keeps its last checkpoint: run the same command with --resume to continue")
        raise
    finally:
        lock.release()
