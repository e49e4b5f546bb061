"""Running a sweep: one directory per run, its state read from its files, the job that trains it,
and the launchers (a local pool of worker processes; Slurm through submitit).

Layout of a sweep directory DIR:
  DIR/sweep.json            {"preset": ...}: a DIR holds runs of one preset only
  DIR/data/                 the generated data sets (each generated once, under DIR/data/.generate.lock)
  DIR/runs/<name>/job.json  the run's RunSpec and TrainConfig; then scripts/train.py's files
                            (config.json, metrics.jsonl, checkpoint.pt, results.json, ...), train.log,
                            error.json after a failure, .lock while a process trains it
  DIR/reports/<EXP>/        tables and figures (amg_fast.experiments.reports)

State of a run, from its files: done (results.json), running (its lock is held), failed
(error.json), partial (a checkpoint to resume), missing. A finished run is never trained again; a
partial one resumes from its checkpoint; a failed one is retried by the next `run`. kill -9 of the
driver and its workers loses at most the epochs since each run's last checkpoint; so does Ctrl-C,
which stops the workers (run_local) with exit 130, and so does a Slurm job that reaches its time
limit, which is requeued and resumes (amg_fast.experiments.slurm_job).
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from queue import Queue
from typing import Callable, Iterable

from filelock import FileLock, Timeout

from amg_fast._files import atomic_write_text
from amg_fast._interrupt import EXIT_INTERRUPTED, stop_once
from amg_fast.experiments.specs import RunSpec, check_preset
from amg_fast.train.config import TrainConfig, resolve_config

__all__ = ["prepare_sweep", "write_job", "run_state", "run_job", "run_local", "run_slurm", "check_slurm",
           "read_record", "STATES", "SweepError", "run_dir_of", "visible_gpus", "check_worker_counts",
           "worker_slots", "slurm_parameters", "check_max_requeues", "MAX_REQUEUES"]

STATES = ("done", "running", "partial", "failed", "missing")
SWEEP_FILE, JOB_FILE, ERROR_FILE, LOCK_FILE, LOG_FILE = "sweep.json", "job.json", "error.json", ".lock", "train.log"


class SweepError(ValueError):
    """A sweep directory or launcher that cannot be used as asked."""


def _write_json(path: Path, obj) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2) + "\n")  # also removes dead writers' temp files


def _read_json(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def prepare_sweep(out: Path, preset: str) -> None:
    """Create out/ for a sweep at `preset`; refuse an out/ that holds runs of another preset."""
    check_preset(preset)
    out = Path(out)
    recorded = _read_json(out / SWEEP_FILE)
    if recorded is not None and recorded.get("preset") != preset:
        raise SweepError(f"{out} holds runs of preset {recorded.get('preset')!r}; run with --preset "
                         f"{recorded.get('preset')} or choose another --out for preset {preset!r}")
    if recorded is None and (out / "runs").is_dir() and any((out / "runs").iterdir()):
        raise SweepError(f"{out}/runs holds runs but no {SWEEP_FILE}: not a sweep directory of reproduce.py")
    out.mkdir(parents=True, exist_ok=True)
    if recorded is None:
        _write_json(out / SWEEP_FILE, {"preset": preset})


def run_dir_of(out: Path, spec: RunSpec) -> Path:
    return Path(out) / "runs" / spec.name


def write_job(out: Path, spec: RunSpec, preset: str, *, device: str = "auto", fast_kernels: bool = False,
              cuda_graph: bool = False) -> Path:
    """The run directory of spec with its job.json (the resolved TrainConfig); returns the directory.
    A run that has started keeps its job.json (its settings are fixed by its config.json)."""
    run_dir = run_dir_of(Path(out).resolve(), spec)  # absolute: workers and Slurm jobs run elsewhere
    cfg = resolve_config(spec.train_config(preset, out=str(run_dir), cache_dir=str(run_dir.parents[1] / "data"),
                                           device=device, fast_kernels=fast_kernels, cuda_graph=cuda_graph))
    if not (run_dir / "config.json").exists():
        run_dir.mkdir(parents=True, exist_ok=True)
        _write_json(run_dir / JOB_FILE, {"spec": spec.to_dict(), "config": cfg.to_dict()})
    return run_dir


def _lock(run_dir: Path) -> FileLock:
    return FileLock(str(Path(run_dir) / LOCK_FILE))


def run_state(run_dir: Path) -> str:
    """done / running / failed / partial / missing (see the module docstring)."""
    run_dir = Path(run_dir)
    if (run_dir / "results.json").exists():
        return "done"
    if run_dir.is_dir():
        lock = _lock(run_dir)
        try:
            lock.acquire(timeout=0)
        except Timeout:
            return "running"
        lock.release()
    if (run_dir / ERROR_FILE).exists():
        return "failed"
    return "partial" if (run_dir / "checkpoint.pt").exists() else "missing"


def run_job(run_dir: str) -> str:
    """Train the run in run_dir (what local workers and Slurm jobs call); returns its state after.

    Holds the run's lock throughout (a second process finds it "running" and leaves it), generates
    the data under the sweep's data lock, resumes from whatever the directory holds. A training
    error is written to error.json (message and traceback) and returns "failed"; it does not raise.
    """
    from amg_fast.data.generate import generate_dataset
    from amg_fast.train.trainer import train

    run_dir = Path(run_dir)
    lock = _lock(run_dir)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        return "running"
    try:
        if (run_dir / "results.json").exists():
            return "done"
        cfg = TrainConfig.from_dict(json.loads((run_dir / JOB_FILE).read_text())["config"])
        cfg.resume = (run_dir / "config.json").exists()  # an earlier attempt created the run directory
        (run_dir / ERROR_FILE).unlink(missing_ok=True)
        with open(run_dir / LOG_FILE, "a") as log_file:
            def log(*parts):
                print(*parts, file=log_file, flush=True)
            try:
                Path(cfg.cache_dir).mkdir(parents=True, exist_ok=True)
                with FileLock(str(Path(cfg.cache_dir) / ".generate.lock")):
                    generate_dataset(cfg.pde, nu=cfg.nu, n_train=cfg.n_train, n_test=cfg.n_test, seed=cfg.seed,
                                     out_dir=cfg.cache_dir)
                train(cfg, log=log)
            except Exception as err:  # recorded; the sweep goes on and the next `run` retries it
                log(traceback.format_exc())
                _write_json(run_dir / ERROR_FILE, {"error": f"{type(err).__name__}: {err}",
                                                   "traceback": traceback.format_exc()})
                return "failed"
        return "done"
    finally:
        lock.release()


def read_record(run_dir: Path) -> dict:
    """A run directory as a report record: its RunSpec fields, status, results, history, error."""
    run_dir = Path(run_dir)
    job = _read_json(run_dir / JOB_FILE) or {}
    metrics = run_dir / "metrics.jsonl"
    history = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()] \
        if metrics.exists() else []
    error = _read_json(run_dir / ERROR_FILE)
    return {"name": run_dir.name, "run_dir": str(run_dir), "status": run_state(run_dir), **job.get("spec", {}),
            "results": _read_json(run_dir / "results.json"), "history": history,
            "error": error.get("error") if error else None}


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
            raise SweepError(f"--{name.replace('_', '-')} must be an integer >= 1, got {value!r}")


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
              on_done: Callable[[Path, str], None] | None = None) -> dict[str, str]:
    """Train the runs that are not done, each in its own process, as many at once as there are
    worker slots; returns {run name: state after}. on_done(run_dir, state) after each run.
    KeyboardInterrupt (Ctrl-C) stops the workers (each keeps its run's last checkpoint), waits
    for them and is raised again."""
    todo = [Path(d) for d in run_dirs if run_state(d) != "done"]
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
            state = processes.run(run_dir, slot, cpu_threads)
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
              max_requeues: int = MAX_REQUEUES) -> list[str]:
    """Submit the runs that are not done and not queued as one Slurm job array through submitit;
    returns the submitted job ids. cluster="local" uses submitit's local executor (tests).

    Each job is a RequeueableRun (amg_fast.experiments.slurm_job): one that reaches time_min is
    requeued, up to max_requeues times, and resumes from its run's last checkpoint."""
    check_slurm(cluster)
    check_max_requeues(max_requeues)
    import submitit

    from amg_fast.experiments.slurm_job import RequeueableRun

    todo = [Path(d) for d in run_dirs if run_state(d) in ("missing", "partial", "failed")]
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
    if not recorded or shutil.which("sacct") is None:
        return False
    import submitit

    state = submitit.SlurmJob(folder=str(folder), job_id=recorded["job_id"]).state
    return state in ("PENDING", "RUNNING", "REQUEUED", "CONFIGURING", "COMPLETING")


def _worker_main(run_dir: str) -> int:
    """A local worker (python -m amg_fast.experiments.runner RUN_DIR, output into train.log): 0 when
    the run is done (or another process trains it), 1 when it failed, 130 on SIGINT (the driver's
    Ctrl-C), after which the run keeps its last checkpoint. SIGINT is handled whatever this process
    inherited: the driver may have started it while ignoring a second Ctrl-C."""
    signal.signal(signal.SIGINT, stop_once)
    try:
        return 0 if run_job(run_dir) in ("done", "running") else 1
    except KeyboardInterrupt:
        if (Path(run_dir) / "checkpoint.pt").exists():
            kept = "its last checkpoint is kept; the next `reproduce.py run` resumes it"
        else:
            kept = "no checkpoint yet; the next `reproduce.py run` starts it again"
        print(f"interrupted: {run_dir} stopped ({kept})", flush=True)
        return EXIT_INTERRUPTED


if __name__ == "__main__":  # python -m amg_fast.experiments.runner RUN_DIR: one run (a local worker)
    if len(sys.argv) != 2:
        sys.exit("usage: python -m amg_fast.experiments.runner RUN_DIR")
    sys.exit(_worker_main(sys.argv[1]))
