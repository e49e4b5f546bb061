"""How long a run takes: seconds per epoch measured by the sweep's finished runs of the same kind on
the same machine (or scaled from another resolution, or bounded by a costlier model's: COSTLIER_MODELS),
else a documented default per preset, device and resolution; plus, when its data
set is not there yet, the time to generate it (measured by a run that generated one of its PDE here,
else a documented default per PDE and device).

A run's machine is recorded in its directory (machine.json: device type and GPU or CPU name) when
it starts, so a sweep carried between machines (reproduce.py export / run --out) estimates each
machine from its own runs. Nothing here initialises CUDA (GPU names come from nvidia-smi).
"""
from __future__ import annotations

import json
import math
import os
import platform
import statistics
import subprocess
from pathlib import Path

from amg_fast.train.rundir import RunDir

__all__ = ["DEFAULT_SECONDS_PER_EPOCH", "STARTUP_SECONDS", "SETUP_KEY", "DATA_KEY", "GENERATED_KEY", "checkpoints",
           "DEFAULT_DATA_SECONDS", "COSTLIER_MODELS", "Estimator", "machine_of", "kind_of", "where", "device_type",
           "data_file", "data_work"]

# Seconds per epoch at f = 32 when the sweep has no finished run of the same kind on this machine;
# other resolutions scale linearly with f, other training-set sizes with n_train (measured steps grow about so: 3.9 / 7.4 / 14.4 ms graphed
# at f = 32 / 64 / 128 on an H100, results/gpu/20261126-h100; the cpu preset's AMGFNO 1.0 / 3.9 s
# an epoch at f = 32 / 128 on the 2-core development CPU). Conservative: a budget must not start a
# run it cannot finish (an exported sweep keeps no checkpoints, so an unfinished run is lost).
DEFAULT_SECONDS_PER_EPOCH = {
    # Paper preset, f = 32, fp32: 2.1 s an epoch each with six runs at once on the H100 (0.35 s of GPU
    # per run-epoch, results/gpu/20261126-h100/fidelity), 1.1 s each with three at once on the H200;
    # alone, 64 steps of 3.9-5.3 ms: ~0.3 s. 0.5 keeps a margin and still lets a budget of ~3 minutes
    # start a run (the first run of a session then measures the machine for the rest).
    ("paper", "cuda"): 0.5,
    # H100, 2026-11-26: the campaign's quick-preset precision runs, 40 epochs in 30 s (GPU shared)
    ("quick", "cuda"): 0.75,
    ("cpu", "cuda"): 0.75,  # not measured: the quick preset's (a few steps an epoch, launch-bound)
    ("smoke", "cuda"): 0.75,
    # 2-core development CPU, 2026-11-27: one AMGFNO training step at the paper's size (B 32, H 128)
    # took 2.4 s of CPU time, 64 steps an epoch; quick (B 16, H 64) 0.37 s, 16 steps
    ("paper", "cpu"): 160.0,
    ("quick", "cpu"): 6.0,
    ("cpu", "cpu"): 1.0,  # 2026-11-26: AMGFNO 20 s a 20-epoch run at f = 32
    ("smoke", "cpu"): 2.0,  # 2026-11-27: about 10 s a 2-epoch run with data generation, machine loaded
}
# The training trajectories the defaults were measured with: an epoch's cost scales with them.
PRESET_N_TRAIN = {"paper": 2048, "quick": 256, "cpu": 128, "smoke": 8}
# 2D Navier-Stokes runs (pde ns2d): seconds per epoch at f = 32 and the presets' n_train; other
# resolutions scale with (f/32)^2 (the grid's points). CPU, measured on the 2-core development CPU
# (2026-11-27, the ns2d sweep of results/cpu/ns2d, two workers): the cpu preset's epochs took 1.6
# (FFNO2d) to 3.9 s (AMGFNO2d) at f = 32, 8-24 s at f = 64, 0.4-1.1 s at f = 16, so 3.5 s at f = 32;
# smoke ~1.5 s an epoch. Not measured (estimates): CUDA (paper: 63 steps an epoch of B 16 x T 50 x
# 32 x 32 points at width 64, ~8x the FLOPs of a 1D paper step: ~50 ms a step), CPU quick (the cpu
# preset's steps) and CPU paper (1000 trajectories: ~60x the cpu preset's epoch).
DEFAULT_SECONDS_PER_EPOCH_2D = {
    ("paper", "cuda"): 5.0, ("quick", "cuda"): 0.75, ("cpu", "cuda"): 0.75, ("smoke", "cuda"): 0.75,
    ("paper", "cpu"): 230.0, ("quick", "cpu"): 3.5, ("cpu", "cpu"): 3.5, ("smoke", "cpu"): 2.0,
}
PRESET_N_TRAIN_2D = {"paper": 1000, "quick": 16, "cpu": 16, "smoke": 4}
# Per run, besides its epochs and its data set's generation (process start, data loading, CUDA set-up
# and graph capture, the final evaluation), when none finished on this machine. CUDA: the H200's paper run of
# 2026-11-27 (results/headline) spent 10.7 s in its process outside the epochs (graph capture, the final
# evaluation) and ~7 s starting it (the sweep's 131 s a run less its 113 s of wall time and 11.5 s of
# setup, nearly all generating its data, estimated apart): 30 s keeps a margin (was 60: the campaign's
# quick-preset precision runs, an estimated ~30 s each, were then estimated at 97 s: none started in 73 s).
STARTUP_SECONDS = {"cpu": 5.0, "cuda": 30.0}
MACHINE_FILE = "machine.json"
# machine.json's field for the seconds a sweep's job spent before training (imports, data generation
# under the sweep's lock): not in the trainer's wall time, part of a run's start-up.
SETUP_KEY = "setup_s"
# machine.json's fields (since 2026-11-27; older files lack them: their setup_s is all start-up) for
# the part of setup_s spent on the data set (waiting for the sweep's data lock, then generating or
# finding it) and whether this run generated it: its data_s then measures a generation.
DATA_KEY, GENERATED_KEY = "data_s", "data_generated"
# Generating a data set when the sweep has not measured one of its PDE on this machine: (fixed seconds,
# seconds a trajectory) at REFERENCE_DATA's settings; other settings scale the seconds a trajectory by
# their work a trajectory (data_work: solver steps x grid points on a CPU, steps alone on a GPU, which
# solves a batch's points at once) over the reference's. Conservative, as the epochs' defaults.
DEFAULT_DATA_SECONDS = {
    # 2-core development CPU, 2026-11-27, OMP_NUM_THREADS=1 (machine loaded by other jobs; docs/reproduce.md),
    # generate_dataset in a fresh process: KS 0.7 / 5.3 / 9.0 s for 12 / 160 / 288 trajectories
    # (the smoke / cpu / quick presets), paper size (2304) ~70 s at that rate
    ("ks", "cpu"): (2.0, 0.04),
    # the same: Burgers 10.4 / 43 / 51 s for 12 / 160 / 288 trajectories (a split of fewer than 64
    # is solved without torch.compile, ~0.9 s a trajectory; from 64 compiled after ~20 s of
    # compiling), 231 s for the paper's 2276 (a user's measure on this CPU): 30 s + 0.1 s each bounds all
    ("burgers", "cpu"): (30.0, 0.1),
    # docs/training.md: the ns2d quick preset's 16 + 4 trajectories (64 x 64 grid, 11 frames) took
    # 3.5 min to generate, 10.5 s each; a 128 x 128 grid is 8x the work by steps x points (measured
    # ~25 s a trajectory there: the default is conservative by ~3x on that grid)
    ("ns2d", "cpu"): (10.0, 12.0),
    # H100, 2026-11-26 (results/gpu/20261126-h100): the KS paper data set, 2304 trajectories, in 5.4 s;
    # 5 s + 0.005 s each gives 16.5 s for it (3x)
    ("ks", "cuda"): (5.0, 0.005),
    # Burgers: not measured on a GPU. Its solver loops in Python over ~10^4 steps a batch of 256 with
    # one host sync a step (launch-bound: ~0.3 ms a step, ~3 s a batch, 9 batches at the paper's size)
    # after ~30-60 s of torch.compile on a fresh machine: ~60-90 s for the paper's 2276; taken as 60 s
    # + 0.04 s each = 151 s for it, still under the CPU's 231 s
    ("burgers", "cuda"): (60.0, 0.04),
    # ns2d: not measured on a GPU. Batches of 16 in flight, ~0.5 ms a step (~30 launches of the spectral
    # step): ~0.2 s a trajectory at the reference's 6250 steps; 0.4 s (2x), plus 10 s
    ("ns2d", "cuda"): (10.0, 0.4),
}
# The settings DEFAULT_DATA_SECONDS were measured at, for each PDE (generate_dataset's arguments).
REFERENCE_DATA = {"ks": {"nu": 0.1}, "burgers": {"nu": 0.001},
                  "ns2d": {"nu": 1e-3, "ns2d_options": {"grid": 64, "frames": 11}}}
# A model whose network is another's with parts taken away costs no more an epoch (training and evaluations) and
# no more a checkpoint than that one at the same settings: FFNO is S4FFNO's backbone without its S4D memory layer and
# fusion, S4FFNO AMGFNO with a fixed fusion instead of the gate (models/memory.py; the same blocks, width and modes).
# So a run of a kind not measured on this machine is estimated at most at such a costlier model's measure (the
# smallest, when several are measured), before the preset's default: on the H200 (2026-11-30, paper preset, f = 32,
# fp32, Triton kernels and CUDA graphs, results/gpu/20261130-0054-h200) AMGFNO's epochs took 0.32-0.33 s and
# S4FFNO's 0.30-0.31 (0.43-0.44 and 0.40 with the code of 2026-11-29), where the default (0.5 s) had the first FFNO
# run need ~122 s: it did not start in the 72 s left.
COSTLIER_MODELS = {"ffno": ("s4ffno", "amgfno"), "s4ffno": ("amgfno",),
                   "ffno2d": ("s4ffno2d", "amgfno2d"), "s4ffno2d": ("amgfno2d",)}
# The settings that set a run's cost: runs alike in these (and machine) share a seconds-per-epoch
# (the PDE: its frames, grid and preset batch size; the test set and how often it is evaluated: the
# evaluations are part of the epochs' time).
KIND_KEYS = ("model", "res", "n_train", "batch_size", "width", "precision", "fast_kernels", "cuda_graph",
             "share_weights", "weight_norm", "ns_frames", "pde", "n_test", "eval_every")


def _gpu_name(index: str | None = None) -> str | None:
    cmd = ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"] + (["-i", index] if index else [])
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    names = [line.strip() for line in out.stdout.splitlines() if line.strip()] if out.returncode == 0 else []
    return names[0] if names else None


def _cpu_name() -> str:
    try:
        model = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                     if line.startswith("model name"))
    except (OSError, StopIteration):
        model = platform.processor() or platform.machine()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{model} x{cores}"


def device_type(device: str, gpus: list[str]) -> str:
    """"cuda" or "cpu": what a run with this --device trains on here (auto: cuda when a GPU is visible)."""
    return "cuda" if device.startswith("cuda") or (device == "auto" and gpus) else "cpu"


def machine_of(device: str, gpus: list[str]) -> dict:
    """{"device": "cuda" | "cpu", "name": the first visible GPU's name or the CPU's model and cores}."""
    kind = device_type(device, gpus)
    name = _gpu_name(gpus[0] if gpus else None) if kind == "cuda" else None
    return {"device": kind, "name": name or (_cpu_name() if kind == "cpu" else "cuda")}


def where(machine: dict) -> dict:
    """A machine.json's machine (device and name), without what the job recorded beside it."""
    return {"device": machine.get("device"), "name": machine.get("name")}


def kind_of(config: dict) -> tuple:
    return tuple(config.get(k) for k in KIND_KEYS)


def data_file(data: dict) -> Path:
    """Where generate_dataset writes the data set of its keyword arguments `data` (runner.dataset_args)."""
    from amg_fast.data.generate import dataset_path, default_n_test

    n_test = data["n_test"] if data.get("n_test") is not None else default_n_test(data["pde"], data["n_train"])
    return dataset_path(data["out_dir"], data["pde"], data["nu"], data["n_train"], n_test, data["seed"],
                        data.get("ks_options"), data.get("ns2d_options"))


def data_work(data: dict, device: str) -> float:
    """The work of generating a data set (generate_dataset's keyword arguments `data`) on a "cpu" or
    "cuda" device: trajectories x solver steps a trajectory x solver grid points (steps alone on a GPU,
    which solves a batch's points at once). A ValueError for arguments the generator refuses."""
    from amg_fast.data.generate import check_ns2d_options, dataset_size, default_n_test

    pde, n_train = data["pde"], data["n_train"]
    n_test = data["n_test"] if data.get("n_test") is not None else default_n_test(pde, n_train)
    size = dataset_size(pde, nu=data["nu"], n_train=n_train, n_test=n_test, ks_options=data.get("ks_options"),
                        ns2d_options=data.get("ns2d_options"))
    points = check_ns2d_options(data.get("ns2d_options"))["grid"] ** 2 if pde == "ns2d" else size.points
    return (n_train + n_test) * size.steps * (points if device == "cpu" else 1)


class Estimator:
    """Seconds a run will take on `machine` (machine_of), from the finished runs of `run_dirs` that
    ran there and are of the same kind, else from those of its kind at another resolution (scaled,
    see _scaled), else at most those of a costlier model (COSTLIER_MODELS, _bounded), else
    DEFAULT_SECONDS_PER_EPOCH; plus generating its data set when it is missing (data_seconds);
    observe() adds a run that finished meanwhile."""

    def __init__(self, machine: dict, preset: str, run_dirs=()):
        self.machine, self.preset = machine, preset
        self.per_epoch: dict[tuple, list[float]] = {}  # a finished run's seconds an epoch, checkpoints apart
        self.per_checkpoint: dict[tuple, list[float]] = {}  # its seconds a checkpoint (counted apart: the
        # presets write them at different cadences, --checkpoint-every)
        self.startups: list[float] = []  # measured: a finished run's wall time outside its epochs and data
        self.generations: dict[str, list[tuple[float, float]]] = {}  # pde: (data_work, seconds) measured here
        for run_dir in run_dirs:
            self.observe(run_dir)

    @classmethod
    def for_gpu(cls, preset: str, run_dirs=()) -> "Estimator":
        """An estimator for a GPU: the GPU most of the sweep's finished runs trained on (measured), else
        the defaults (from the committed H100 / H200 timings)."""
        seen = []
        for run_dir in run_dirs:
            try:
                machine = json.loads((Path(run_dir) / MACHINE_FILE).read_text())
            except (OSError, ValueError):
                continue
            if isinstance(machine, dict) and machine.get("device") == "cuda":
                seen.append(where(machine))
        machine = max(seen, key=seen.count) if seen else {"device": "cuda", "name": "a GPU (defaults)"}
        return cls(machine, preset, run_dirs)

    def observe(self, run_dir) -> None:
        run_dir = Path(run_dir)
        try:
            machine = json.loads((run_dir / MACHINE_FILE).read_text())
            config = json.loads((run_dir / "job.json").read_text())["config"]
            results = RunDir(run_dir).read_results()
        except (OSError, ValueError, KeyError, TypeError):  # ResultsError is a ValueError
            return
        if results is None:
            return
        wall, epochs = results.wall_time_s, results.epochs
        if not isinstance(machine, dict) or where(machine) != where(self.machine) or epochs <= 0 or wall <= 0:
            return
        in_epochs = results.train_time_s + results.eval_time_s + results.checkpoint_time_s
        setup = _seconds(machine.get(SETUP_KEY))  # the job's time before training: imports, the data
        data = _seconds(machine.get(DATA_KEY))  # of it on the data set (machine.json since 2026-11-27)
        kind, written = kind_of(config), checkpoints(config, 0)
        if 0 < in_epochs <= wall:
            self.startups.append(wall - in_epochs + max(setup - data, 0.0))
            if written and results.checkpoint_time_s > 0:
                in_epochs -= results.checkpoint_time_s
                self.per_checkpoint.setdefault(kind, []).append(results.checkpoint_time_s / written)
        else:  # the split is missing or inconsistent: all of the wall time per epoch
            in_epochs = wall
        self.per_epoch.setdefault(kind, []).append(in_epochs / epochs)
        if machine.get(GENERATED_KEY) is True and data > 0:
            self._observe_generation(run_dir, config, data)

    def _observe_generation(self, run_dir: Path, config: dict, seconds: float) -> None:
        """A run that generated its data set in `seconds`: a measure for the data sets of its PDE."""
        from amg_fast.experiments.runner import dataset_args, read_job

        job = read_job(run_dir)
        try:
            work = data_work(dataset_args(job["spec"], job["config"], "data"), self.machine["device"])
        except (TypeError, KeyError, ValueError):  # no job, or settings the generator refuses
            return
        self.generations.setdefault(config.get("pde"), []).append((work, seconds))

    def data_seconds(self, data: dict) -> tuple[float, str]:
        """(seconds, where the figure comes from) to generate the data set of generate_dataset's keyword
        arguments `data` here: a data set of its PDE generated here (the nearest in work, the larger on a
        tie), scaled by the work (data_work) when this one is larger, kept when smaller (fixed costs:
        compiling, writing); else DEFAULT_DATA_SECONDS. (0, "") for settings the generator refuses."""
        device, pde = self.machine["device"], data["pde"]
        try:
            work = data_work(data, device)
        except (TypeError, KeyError, ValueError):
            return 0.0, ""
        measured = self.generations.get(pde)
        if measured:
            near_work, seconds = min(measured, key=lambda m: (abs(math.log(m[0] / work)), -m[0]))
            return seconds * max(1.0, work / near_work), f"as measured here for {pde}"
        fixed, per_trajectory = DEFAULT_DATA_SECONDS[(pde, device)]
        reference = data_work({**REFERENCE_DATA[pde], "pde": pde, "n_train": 1, "n_test": 1}, device) / 2
        return fixed + per_trajectory * work / reference, f"by the default for {pde} on {device}"

    def seconds(self, config: dict, epochs_done: int = 0, data: dict | None = None) -> tuple[float, str]:
        """(estimated seconds, where the estimate comes from) for a run with this resolved config dict:
        training_seconds plus data_seconds(data) when data (generate_dataset's keyword arguments of the
        run's data set, runner.dataset_args) is given and its file is missing (with_data)."""
        return self.with_data(*self.training_seconds(config, epochs_done), data)

    def with_data(self, seconds: float, source: str, data: dict | None) -> tuple[float, str]:
        """(seconds, source) of a run's training, plus generating its data set when data is given and
        its file is missing."""
        generating, how = self.data_seconds(data) if data is not None and not data_file(data).exists() else (0.0, "")
        if generating:
            source = f"{math.ceil(generating)} s generating its data, {how}; {source}"
        return seconds + generating, source

    def training_seconds(self, config: dict, epochs_done: int = 0) -> tuple[float, str]:
        """(seconds, source) of a run without its data set: start-up (the longest measured here --
        imports, kernels compiled, graph capture, the final evaluation -- else STARTUP_SECONDS) plus
        seconds per epoch x the epochs left (a partial run resumes after epochs_done of them), plus
        seconds per checkpoint x the checkpoints left (at the run's --checkpoint-every) where measured; the
        seconds per epoch and checkpoint as the class docstring says (measured, scaled, bounded, default)."""
        startup = max(self.startups) if self.startups else STARTUP_SECONDS[self.machine["device"]]
        found = self._per_epoch(config) or self._bounded(config)
        if found:
            per_epoch, per_checkpoint, source = found
        else:
            per_checkpoint = 0.0
            key = (self.preset, self.machine["device"])
            if config.get("pde") == "ns2d":
                per_epoch = DEFAULT_SECONDS_PER_EPOCH_2D[key] * (config["res"] / 32) ** 2 \
                    * config["n_train"] / PRESET_N_TRAIN_2D[self.preset]
            else:
                per_epoch = DEFAULT_SECONDS_PER_EPOCH[key] * config["res"] / 32 * config["n_train"] \
                    / PRESET_N_TRAIN[self.preset]
            source = f"default for preset {self.preset} on {self.machine['device']}"
        left = max(config["epochs"] - epochs_done, 0)
        if epochs_done:
            source += f"; resumes with {left} of {config['epochs']} epochs left"
        return startup + per_epoch * left + per_checkpoint * checkpoints(config, epochs_done), source

    def _per_epoch(self, config: dict) -> tuple[float, float, str] | None:
        """(seconds per epoch, seconds per checkpoint, source) from this machine's finished runs of the kind of
        config: their mean, else scaled from the nearest other resolution (_scaled); None when there is none."""
        kind = kind_of(config)
        measured = self.per_epoch.get(kind)
        if not measured:
            return self._scaled(config)
        return (statistics.fmean(measured), statistics.fmean(self.per_checkpoint.get(kind, [0.0])),
                f"measured here on {_runs(len(measured))} of its kind")

    def _bounded(self, config: dict) -> tuple[float, float, str] | None:
        """An upper bound of config's (seconds per epoch, seconds per checkpoint, source): the smallest _per_epoch
        of the models COSTLIER_MODELS lists for config's model, at config's other settings; None when none of them
        is measured here."""
        bounds = [(found, model) for model in COSTLIER_MODELS.get(config.get("model"), ())
                  if (found := self._per_epoch({**config, "model": model}))]
        if not bounds:
            return None
        (per_epoch, per_checkpoint, source), model = min(bounds, key=lambda bound: bound[0][0])
        return per_epoch, per_checkpoint, f"at most {model}'s: {source}"

    def _scaled(self, config: dict) -> tuple[float, float, str] | None:
        """(seconds per epoch, seconds per checkpoint, source) from this machine's finished runs of the same
        kind at the nearest other resolution f0: times (f / f0) ** d going up (d = 1 in 1D, 2 in 2D: the
        points per frame; measured steps grow a little slower: 3.9 / 14.4 ms at f = 32 / 128), (f / f0) **
        (d / 2) going down (steps shrink slower than the points: launches and fixed costs); a checkpoint
        by the same factor (its spectral weights grow with the modes, f / 2). None when there is none."""
        res_at = KIND_KEYS.index("res")
        kind = kind_of(config)
        at_other_res = {k[res_at]: v for k, v in self.per_epoch.items()
                        if k[:res_at] + k[res_at + 1:] == kind[:res_at] + kind[res_at + 1:] and k[res_at]}
        if not at_other_res or not config.get("res"):
            return None
        res = config["res"]
        nearest = min(at_other_res, key=lambda r: (abs(math.log(r / res)), -r))
        dims = 2 if config.get("pde") == "ns2d" else 1
        ratio = res / nearest
        factor = ratio ** dims if ratio >= 1 else ratio ** (dims / 2)
        measured = at_other_res[nearest]
        at_nearest = kind[:res_at] + (nearest,) + kind[res_at + 1:]
        per_checkpoint = statistics.fmean(self.per_checkpoint.get(at_nearest, [0.0]))
        return (factor * statistics.fmean(measured), factor * per_checkpoint,
                f"scaled from {_runs(len(measured))} of its kind at f = {nearest} here")


def checkpoints(config: dict, epochs_done: int = 0) -> int:
    """How many checkpoints a run with this resolved config writes after epoch epochs_done: every
    checkpoint_every epochs and after the last (trainer.run_epoch)."""
    epochs, every = config["epochs"], config.get("checkpoint_every") or 1
    if epochs <= epochs_done:
        return 0
    return epochs // every - epochs_done // every + (epochs % every != 0)


def _seconds(value) -> float:
    """A machine.json duration: a number > 0, else 0 (absent in older files, or damaged)."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else 0.0


def _runs(n: int) -> str:
    return f"{n} finished run{'s' * (n > 1)}"
