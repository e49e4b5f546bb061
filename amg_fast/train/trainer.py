"""Training with teacher forcing (paper appendix "Training Details").

The model sees whole true trajectories (memory updated with the true states); the loss is
mean over batch and time of ||pred - true||_2^2 over space (eq. app-training-loss). Adam with
cosine annealing; S4D's A and dt parameters get no weight decay. Runs as one process or, under
torchrun, as data-parallel DDP (NCCL on GPUs, gloo on CPU).

Everything that can be checked is checked before the run directory is created: the settings,
the device, --out and the run it holds (another run without --resume, nothing to resume, other
settings: before the data is read or generated), the cache, the data (readable, finite, T >= 2,
the split sizes asked for, its PDE and nu), the model (built and run once at the data's
resolution) and, with --resume, the checkpoint. The directory is locked while a process trains
in it (a second one is refused). A failure before the first checkpoint removes what the attempt
created, so the same command can be run again; after it, the directory is left to --resume.

The run directory's files, their writer and reader and the results schema are
amg_fast.train.rundir; reading the data, amg_fast.train.data; building the model of the settings,
amg_fast.models.build_model. This module is the training loop.
"""
from __future__ import annotations

import contextlib
import functools
import math
import os
import time
from dataclasses import dataclass, field
from typing import Callable

import torch
import torch.distributed as dist

from amg_fast._checks import resolve_device
from amg_fast._files import check_writable_dir
from amg_fast.data.datasets import TrajectoryDataset
from amg_fast.models import build_model, count_parameters
from amg_fast.ops._backend import triton_unavailable_reason
from amg_fast.train.checkpoint import TRAINING_KEYS, CheckpointError, capture_rng, restore_rng
from amg_fast.train.config import TrainConfig, output_parametrisation, resolve_config
from amg_fast.train.data import (TRAIN_EVAL_LIMIT, data_path, eval_batches, normalization_stats, read_data,
                                  settings_the_data_may_set)
from amg_fast.train.evaluate import EvalResult, evaluate, one_step_loss, predict, unwrap
from amg_fast.train.graphs import EagerTrainStep, GraphedEvaluation, GraphedTrainStep
from amg_fast.train.precision import autocast, precision_scope
from amg_fast.train.rundir import RunDir, RunDirError, RunResults, check_run_dir, open_run_dir

__all__ = ["train", "TrainingDiverged", "RunDirError", "build_model", "check_model_runs",
           "normalization_stats", "USER_ERRORS", "Run", "setup", "start_in", "run_epoch", "finish", "default_out",
           "hyperparameters_to_params_device"]


class TrainingDiverged(RuntimeError):
    """The loss became NaN or Inf; the last good checkpoint is kept. Resuming with the run's settings
    would diverge again (open_run_dir reads resume_helps), so the message says how to train again."""
    resume_helps = False


# What the CLIs report as "error: <message>" (exit 2) instead of a traceback.
USER_ERRORS = (ValueError, RunDirError, TrainingDiverged, FileExistsError, FloatingPointError, OSError)


# -- set-up -----------------------------------------------------------------------------------
def _distributed() -> tuple[int, int]:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1 and not dist.is_initialized():
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        dist.init_process_group(backend)
    return (dist.get_rank(), dist.get_world_size()) if dist.is_initialized() else (0, 1)


def _device(name: str, rank: int) -> torch.device:
    """The torch device of --device (checked by resolve_config: "auto", "cpu", "cuda[:N]" where CUDA runs)."""
    device = resolve_device(name)
    if device.type == "cuda" and dist.is_initialized():
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", rank)))
        torch.cuda.set_device(device)
    return device


def _backend(fast_kernels: bool, device: torch.device, log) -> str:
    """"triton" for --fast-kernels where the kernels can run (CUDA, or CPU under TRITON_INTERPRET=1),
    else "reference" with a message saying why."""
    if not fast_kernels:
        return "reference"
    reason = triton_unavailable_reason(device)
    if reason is not None:
        log(f"--fast-kernels: the Triton kernels cannot run here ({reason}); "
            "falling back to the PyTorch reference ops")
        return "reference"
    log(f"--fast-kernels: running the Triton kernels on {device.type}"
        + (" (Triton interpreter: slow, for testing)" if device.type == "cpu" else ""))
    return "triton"


def _check_cuda_graph(device: torch.device, world: int) -> None:
    if device.type != "cuda":
        raise ValueError(f"--cuda-graph captures the training step in a CUDA graph and needs a CUDA device, "
                         f"got device {device.type}")
    if world > 1:
        raise ValueError(f"--cuda-graph runs in one process (DDP's all-reduce is not captured), got {world} processes")


def check_model_runs(model: torch.nn.Module, res: int, device: torch.device, flag: str = "--res") -> None:
    """Run the model once on zeros [1, 2, res, 1] (2D models: [1, 2, res, res, 1]; no gradients, eval mode): a resolution it
    cannot take (modes above res//2 + 1, UNet's multiple of 16, ...) is a ValueError naming `flag`
    here, before anything is written, instead of an error inside the first training step."""
    was_training = model.training
    model.eval()
    dtype = next(model.parameters()).dtype
    try:
        with torch.no_grad(), torch.random.fork_rng(devices=[]):
            model(torch.zeros((1, 2) + (res,) * model.spatial_dims + (1,), device=device, dtype=dtype))
    except (ValueError, RuntimeError) as err:
        raise ValueError(f"{flag} {res}: the model cannot run at this resolution: {err}") from None
    finally:
        model.train(was_training)


def _param_groups(model: torch.nn.Module, weight_decay: float) -> list[dict]:
    """Adam parameter groups: one with weight_decay for plain parameters, and one per distinct
    `_optim` dict that parameters declare (S4D's A and dt: {"weight_decay": 0.0}), its settings
    overriding the defaults."""
    groups: dict[tuple, dict] = {}
    for p in model.parameters():
        settings = {"weight_decay": weight_decay, **getattr(p, "_optim", {})}
        key = tuple(sorted(settings.items()))
        groups.setdefault(key, {**settings, "params": []})["params"].append(p)
    return list(groups.values())


# -- training ---------------------------------------------------------------------------------
def _loss(model, u: torch.Tensor, omega: torch.Tensor, omega_mode: str) -> torch.Tensor:
    kwargs = {"omega": omega.mean()} if omega_mode == "batch" else {}
    pred = model(u[:, :-1], **kwargs)
    return one_step_loss(pred.to(u.dtype), u[:, 1:])  # bf16 autocast output: loss in fp32


def _optimizer(model: torch.nn.Module, cfg: TrainConfig, device: torch.device) -> torch.optim.Optimizer:
    """Adam. On CUDA the fused implementation (a few kernels per step for all parameters; on CPU
    it measured slower than the default foreach path, which stays there). --cuda-graph: fused and
    capturable with a tensor lr, so the scheduler's changes reach the captured step."""
    groups = _param_groups(model, cfg.weight_decay)
    if cfg.cuda_graph:
        return torch.optim.Adam(groups, lr=torch.tensor(cfg.lr, device=device), fused=True, capturable=True)
    return torch.optim.Adam(groups, lr=cfg.lr, fused=device.type == "cuda" or None)


def train(cfg: TrainConfig, log=print) -> dict:
    """Train and evaluate one run; returns the results dict also written to results.json.

    The phases, each a function of the run state (Run): setup (every check, data, model,
    optimizer, the --resume checkpoint: nothing written yet) -> the locked run directory ->
    resume (history and clock of a resumed run) -> one epoch at a time -> finish (final
    evaluation, results.json, rollout.npz, DDP teardown)."""
    explicit = {key for key in ("n_train", "n_test", "nu") if getattr(cfg, key) is not None}
    cfg = resolve_config(cfg)
    with precision_scope(cfg.precision):
        run = setup(cfg, log, explicit)
        with open_run_dir(cfg, run.log) if run.rank == 0 else contextlib.nullcontext(RunDir(cfg.out)) as run_dir:
            start_in(run, run_dir)
            for epoch in range(run.first_epoch, cfg.epochs + 1):
                run_epoch(run, epoch)
            return finish(run)


@dataclass
class Run:
    """The state of one training run, built by setup() before its directory exists."""

    cfg: TrainConfig
    log: Callable
    rank: int
    world: int
    device: torch.device
    backend: str
    start: float  # perf_counter at setup: this segment's clock
    train_ds: TrajectoryDataset
    test_ds: TrajectoryDataset
    u_train: torch.Tensor  # [N, T, S, C] and omega [N] of the training split, on the device
    w_train: torch.Tensor
    test_split: tuple  # (u, omega) of the test split, on the CPU
    model: torch.nn.Module
    params: int
    optimizer: torch.optim.Optimizer
    scheduler: object
    data_order: torch.Generator
    state: dict | None  # the --resume checkpoint, already loaded into model, optimizer, scheduler, RNG
    dir: RunDir | None = None
    history: list = field(default_factory=list)
    first_epoch: int = 1
    wall_before: float = 0.0  # the earlier segments of a resumed run
    step: object = None  # EagerTrainStep or GraphedTrainStep
    test_loader: list = field(default_factory=list)
    train_loader: list = field(default_factory=list)
    last_epoch_eval: EvalResult | None = None  # the test evaluation after the last epoch (the final one)
    test_predictor: GraphedEvaluation | None = None  # --cuda-graph: the test split's evaluations replayed
    setup_seconds: dict = field(default_factory=dict)  # {"data": s, "model": s (built, moved, its first forward)}

    def wall_time(self) -> float:
        return self.wall_before + time.perf_counter() - self.start

    def evaluate(self, loader=None):
        """Rollout evaluation on the test split (graphed with --cuda-graph: the same batches every time) or,
        eagerly, on another loader of (u, omega) batches (the final one on training trajectories: once)."""
        return evaluate(self.model, self.test_loader if loader is None else loader, self.device,
                        omega_mode=self.cfg.omega_mode, precision=self.cfg.precision,
                        predictor=self.test_predictor if loader is None else None)


def default_out(cfg: TrainConfig) -> str:
    """The run directory when --out is not given (cfg resolved: nu filled in)."""
    return f"runs/{cfg.model}_{cfg.pde}_nu{cfg.nu:g}_f{cfg.res}_seed{cfg.seed}"


def _keep_the_runs_data_counts(cfg: TrainConfig, explicit: set[str]) -> None:
    """--resume: the trajectory counts not given explicitly are the run's own (its config.json's), not the
    preset's of today, so that a run resumes on the data it started on (the paper preset's Burgers test split
    was 10% of the total, None -> 228, before 2026-11-29, and 1000 since; check_run_dir compares every setting
    with config.json's, checkpoint or not). A missing or unreadable config.json is left to check_run_dir."""
    try:
        recorded = RunDir(cfg.out).read_config()
    except RunDirError:
        return
    if recorded is None:
        return
    for key in ("n_train", "n_test"):
        if key not in explicit:
            setattr(cfg, key, getattr(recorded, key))


def setup(cfg: TrainConfig, log, explicit: set[str]) -> Run:
    """Every check that can run before the run directory exists, and what the run needs from it:
    device, data, model (run once at the resolution), optimizer and the --resume checkpoint.
    Writes nothing but generated data (into the cache)."""
    rank, world = _distributed()
    log = log if rank == 0 else (lambda *a, **k: None)
    if cfg.out is None:
        cfg.out = default_out(cfg)
    if cfg.resume:
        _keep_the_runs_data_counts(cfg, explicit)
    device = _device(cfg.device, rank)
    if cfg.cuda_graph:
        _check_cuda_graph(device, world)
    if rank == 0:
        check_writable_dir("--out", cfg.out)
    backend = _backend(cfg.fast_kernels, device, log)
    start = time.perf_counter()
    if rank == 0:  # before the data is read or generated (minutes at paper scale), and before --regenerate replaces
        # the shared cache file (whose counts are the ones asked for): a refused command costs and changes nothing
        check_run_dir(cfg, unsettled=() if cfg.regenerate else settings_the_data_may_set(explicit))
    data = read_data(cfg, data_path(cfg, rank, log), explicit)
    data_read = time.perf_counter()
    if rank == 0:
        check_run_dir(cfg)  # with the counts the data fixed (checked again under the lock)
    torch.manual_seed(cfg.seed)
    omega = data.train_ds.omega if cfg.omega is None else cfg.omega  # --omega: the paper's value, say
    stats = normalization_stats(data.u_train, normalize=cfg.normalize, increment=cfg.increment)
    model = build_model(cfg, omega, backend, stats).to(device)
    check_model_runs(model, cfg.res, device)
    model_ready = time.perf_counter()
    optimizer = _optimizer(model, cfg, device)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=cfg.epochs)
    data_order = torch.Generator().manual_seed(cfg.seed)
    state = _resume_state(cfg, model, optimizer, scheduler, data_order)
    return Run(cfg, log, rank, world, device, backend, start, data.train_ds, data.test_ds, data.u_train.to(device),
               data.w_train.to(device), (data.u_test, data.w_test), model, count_parameters(model), optimizer,
               scheduler, data_order, state,
               setup_seconds={"data": data_read - start, "model": model_ready - data_read})


def _resume_state(cfg: TrainConfig, model, optimizer, scheduler, data_order) -> dict | None:
    """With --resume and a checkpoint in --out: load it into the model, optimizer, scheduler and
    RNGs (in memory; nothing is written) and return it. A corrupt one is a CheckpointError."""
    run_dir = RunDir(cfg.out)
    if not cfg.resume or not run_dir.has_checkpoint():
        return None
    path = run_dir.checkpoint_path
    state = run_dir.read_checkpoint(required=TRAINING_KEYS)
    try:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        hyperparameters_to_params_device(optimizer)
        scheduler.load_state_dict(state["scheduler"])
        restore_rng(state["rng"], data_order)
    except (RuntimeError, KeyError, ValueError, TypeError) as err:
        raise CheckpointError(f"{path}: does not fit this run's model or optimizer ({str(err).splitlines()[0]}); "
                              "delete it to start the run over") from None
    return state


def hyperparameters_to_params_device(optimizer: torch.optim.Optimizer) -> None:
    """After Optimizer.load_state_dict: a tensor hyperparameter (--cuda-graph's lr, the scheduler's initial_lr)
    comes back on the checkpoint's map_location, the CPU, and replaces the group's. Fused Adam on CUDA then reads
    a CPU lr on the host: the step captured after a resume would keep the resume epoch's lr for good (the
    scheduler's fill_ reaches the CPU tensor, not the graph). Moved to the group's parameters' device."""
    for group in (g for g in optimizer.param_groups if g["params"]):
        device = group["params"][0].device
        for key, value in group.items():
            if key != "params" and isinstance(value, torch.Tensor) and value.device != device:
                group[key] = value.to(device)


def start_in(run: Run, run_dir: RunDir) -> None:
    """Enter the (locked) run directory: DDP wrapping, the resumed history and clock, the
    evaluation loaders and the training step."""
    cfg, run.dir = run.cfg, run_dir
    if dist.is_initialized():
        dist.barrier()
        run.model = torch.nn.parallel.DistributedDataParallel(
            run.model, device_ids=[run.device.index] if run.device.type == "cuda" else None)
    if run.state is not None:
        run.history, run.first_epoch = run.state["history"], run.state["epoch"] + 1
        if run.rank == 0:
            run.history = _resumed_history(run_dir, run.history, run.log)
        run.wall_before = run.state.get("wall_time_s", 0.0)
        run.log(f"resumed {run_dir.path} after epoch {run.state['epoch']}")
    if run.rank == 0:
        run_dir.write_metrics(run.history)
    # Evaluation rolls out the whole test split at once unless --eval-batch-size says otherwise; at
    # the end the same diagnostics on (the first TRAIN_EVAL_LIMIT) training trajectories.
    batch = cfg.eval_batch_size or len(run.test_ds)
    run.test_loader = eval_batches(*run.test_split, batch, run.device)
    run.train_loader = eval_batches(run.u_train, run.w_train, batch, run.device, limit=TRAIN_EVAL_LIMIT)
    run.log(f"{cfg.model}: {run.params:,} parameters; {len(run.train_ds)} train / {len(run.test_ds)} test trajectories "
            f"at f={cfg.res}, omega_f={run.train_ds.omega:.4g}"
            + ("" if cfg.omega is None else f" (the gate uses --omega {cfg.omega:g})")
            + f"; output {output_parametrisation(cfg)}; device {run.device}, backend {run.backend}, precision "
            f"{cfg.precision}, {run.world} process(es)")

    def loss_fn(model, u, w):  # (loss, AMGFNO's mean gate of this step or None)
        with autocast(cfg.precision, run.device):
            loss = _loss(model, u, w, cfg.omega_mode)
        return loss, getattr(unwrap(model), "last_gate_mean", None)

    run.step = (GraphedTrainStep if cfg.cuda_graph else EagerTrainStep)(run.model, run.optimizer, loss_fn)
    if cfg.cuda_graph:
        run.test_predictor = GraphedEvaluation(functools.partial(predict, precision=cfg.precision), log=run.log)
    # where a run's time outside its epochs goes (the GPU's headline runs: ~11 s of ~80, 2026-11-30); the first
    # epoch's time holds the first step's (and a graph's capture)
    run.log(f"setup {time.perf_counter() - run.start:.1f} s: data {run.setup_seconds['data']:.1f} s, model (built, on "
            f"the device, its first forward) {run.setup_seconds['model']:.1f} s")


def _resumed_history(run_dir: RunDir, history: list[dict], log) -> list[dict]:
    """The checkpoint's history, each row replaced by metrics.jsonl's row of its epoch where the two agree
    but for checkpoint_s: a checkpoint is written before its own checkpoint_s is measured, so only
    metrics.jsonl (written after it) holds the last checkpointed epoch's. Rows of later epochs (redone
    now) are dropped; an unreadable metrics.jsonl leaves the checkpoint's history as it is."""
    try:
        on_disk = {row["epoch"]: row for row in run_dir.read_metrics()}
    except RunDirError as err:
        log(f"{err}: rewritten from the checkpoint's history")
        return history

    def without_checkpoint_time(row: dict) -> dict:
        return {key: value for key, value in row.items() if key != "checkpoint_s"}

    return [on_disk[row["epoch"]] if row["epoch"] in on_disk
            and without_checkpoint_time(on_disk[row["epoch"]]) == without_checkpoint_time(row) else row
            for row in history]


def run_epoch(run: Run, epoch: int) -> dict:
    """One epoch: the training steps, the divergence checks, the test evaluation every
    --eval-every epochs, the checkpoint every --checkpoint-every epochs, metrics.jsonl, the log."""
    cfg, t0 = run.cfg, time.perf_counter()
    train_loss, gate_mean = _train_steps(run)
    if not math.isfinite(train_loss) or not _finite_parameters(run.model):
        what = f"loss is {train_loss}" if not math.isfinite(train_loss) else "the parameters became NaN or Inf"
        _diverged(run, f"{what} at epoch {epoch}")
    row = {"epoch": epoch, "train_loss": train_loss, "lr": float(run.optimizer.param_groups[0]["lr"]),
           "gate_mean": gate_mean, "time_s": time.perf_counter() - t0}
    run.scheduler.step()
    if run.rank == 0 and (epoch % cfg.eval_every == 0 or epoch == cfg.epochs):
        t1 = time.perf_counter()
        result = run.evaluate()
        row["test_nrmse"], row["test_one_step_nrmse"] = result.nrmse, result.one_step_nrmse
        row["eval_s"] = time.perf_counter() - t1
        if not math.isfinite(row["test_nrmse"]):
            _diverged(run, f"test nRMSE is {row['test_nrmse']} at epoch {epoch}: the rollout's predictions are not finite")
        if epoch == cfg.epochs:
            run.last_epoch_eval = result  # the final evaluation's test half: not rolled out again
    run.history.append(row)
    if run.rank == 0:
        if epoch % cfg.checkpoint_every == 0 or epoch == cfg.epochs:
            t1 = time.perf_counter()
            _save(run, epoch)
            row["checkpoint_s"] = time.perf_counter() - t1
        run.dir.write_metrics(run.history)
        run.log(f"epoch {epoch:4d}  loss {train_loss:.4e}  lr {row['lr']:.2e}"
                + (f"  g-bar {row['gate_mean']:.4f}" if row["gate_mean"] is not None else "")
                + (f"  test nRMSE {row['test_nrmse']:.4f}" if "test_nrmse" in row else "")
                + f"  {row['time_s']:.1f} s")
    return row


def _train_steps(run: Run) -> tuple[float, float | None]:
    """The epoch's optimizer steps over a fresh permutation of the training split, global batches
    split across DDP ranks -> (mean loss over batches and ranks, mean AMGFNO gate or None)."""
    run.model.train()
    # on the device in one copy an epoch: a copy from (pageable) host memory waits for the stream, so one a step
    # made the host wait for each step to finish before it queued the next
    order = torch.randperm(len(run.u_train), generator=run.data_order).to(run.device)
    sums = _queue_steps(run, order)
    if sums is None:
        return float("nan"), None
    loss_sum, gate_sum, batches = sums
    if dist.is_initialized():
        dist.all_reduce(loss_sum)
        loss_sum /= run.world
    return float(loss_sum) / batches, float(gate_sum) / batches if torch.is_tensor(gate_sum) else None


def _queue_steps(run: Run, order: torch.Tensor):
    """The steps over order (the epoch's permutation, on the device) -> (loss sum [], gate sum [] or 0.0, number
    of batches) on the device, or None when a step found NaN weights. With --cuda-graph on a GPU nothing here
    waits for the GPU (tests/train/test_graphs.py: torch.cuda.set_sync_debug_mode), so the host queues the next
    step while one runs."""
    loss_sum, gate_sum, batches = torch.zeros((), device=run.device), 0.0, 0
    for i in range(0, len(order), run.cfg.batch_size):
        batch = order[i:i + run.cfg.batch_size]
        if len(batch) < run.world:  # every rank needs a share; all ranks skip the same batch
            continue
        idx = batch[run.rank::run.world]
        try:
            loss, gate = run.step(run.u_train[idx], run.w_train[idx])  # a graph's static outputs: accumulate now
        except ValueError:  # NaN weights trip the ops' input checks (a NaN gate chi): diverged, not bad input
            if _finite_parameters(run.model):
                raise
            return None
        loss_sum += loss
        batches += 1
        gate_sum = gate_sum + gate if gate is not None else gate_sum
    return loss_sum, gate_sum, batches


def _diverged(run: Run, what: str):
    if not run.dir.has_checkpoint():  # the attempt's files are removed: the same --out starts afresh
        raise TrainingDiverged(f"{what}; stopping (no checkpoint yet; a lower --lr may help)")
    raise TrainingDiverged(
        f"{what}; stopping. The last good checkpoint ({run.dir.checkpoint_path}) is kept, but resuming would repeat "
        f"the same steps (a run keeps its settings, --lr included): train again with a lower --lr into another "
        f"--out, or remove {run.dir.path} first")


def _save(run: Run, epoch: int) -> None:
    run.dir.write_checkpoint({
        "model": unwrap(run.model).state_dict(), "optimizer": run.optimizer.state_dict(),
        "scheduler": run.scheduler.state_dict(), "epoch": epoch, "rng": capture_rng(run.data_order),
        "config": run.cfg.to_dict(), "history": run.history, "wall_time_s": run.wall_time()})


def _finite_parameters(model) -> bool:
    return bool(torch.stack([torch.isfinite(p).all() for p in model.parameters()]).all())


def _ranks_agree(model) -> bool:
    """All DDP ranks hold the same parameters (sum of squares and sum, in float64)."""
    flat = torch.cat([p.detach().double().flatten() for p in unwrap(model).parameters()])
    stats = torch.stack([flat.sum(), flat.square().sum()])
    gathered = [torch.zeros_like(stats) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, stats)
    return all(torch.equal(g, gathered[0]) for g in gathered)


def finish(run: Run) -> dict:
    """Final evaluation on rank 0 (results.json, rollout.npz), then all DDP ranks leave together."""
    agree = _ranks_agree(run.model) if dist.is_initialized() else None
    results = _final_evaluation(run, agree) if run.rank == 0 else {}
    if dist.is_initialized():  # leave together: a rank that exits early can abort its peers
        dist.barrier()
        dist.destroy_process_group()
    return results


def _final_evaluation(run: Run, ranks_agree: bool | None) -> dict:
    """The test split's evaluation (the last epoch's, when this process ran it) and one pass over
    the first TRAIN_EVAL_LIMIT training trajectories -> results.json and rollout.npz."""
    started = time.perf_counter()
    test = run.last_epoch_eval or run.evaluate()
    train_started = time.perf_counter()
    train = run.evaluate(run.train_loader)
    train_s = time.perf_counter() - train_started
    results = RunResults.from_evaluation(run.cfg, test, train, run.history, params=run.params,
                                         wall_time_s=run.wall_time(), world_size=run.world, ddp_ranks_agree=ranks_agree,
                                         device=str(next(unwrap(run.model).parameters()).device))
    run.dir.write_results(results)
    run.dir.write_rollout(test.pred, test.true)
    gate = f", g-bar {results.gate_mean:.4f}" if results.gate_mean is not None else ""
    run.log(f"test nRMSE {results.nrmse:.4f} (rollout from u_0, {test.true.shape[1]} steps){gate}; one-step "
            f"{results.one_step_nrmse:.4f}, amplitude {results.amplitude_step5:.3g} at step {min(5, test.true.shape[1])} and "
            f"{results.amplitude_last_step:.3g} at the last, training trajectories' rollout {results.train_nrmse:.4f}; "
            f"results in {run.dir.path}")
    reused = " (the last epoch's)" if run.last_epoch_eval is not None else ""
    run.log(f"final evaluation {time.perf_counter() - started:.1f} s: the test split{reused}, {len(train.true)} "
            f"training trajectories ({train_s:.1f} s), results.json and rollout.npz")
    return results.to_dict()
