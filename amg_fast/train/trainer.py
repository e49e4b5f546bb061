"""Training with teacher forcing (paper appendix "Training Details").

The model sees whole true trajectories (memory updated with the true states); the loss is
mean over batch and time of ||pred - true||_2^2 over space (eq. app-training-loss). Adam with
cosine annealing; S4D's A and dt parameters get no weight decay. Runs as one process or, under
torchrun, as data-parallel DDP (NCCL on GPUs, gloo on CPU).
"""
from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

from amg_fast.data.datasets import TrajectoryDataset
from amg_fast.data.generate import dataset_path, default_n_test, generate_dataset
from amg_fast.models import Normalized, count_parameters, get_model
from amg_fast.ops._backend import triton_unavailable_reason
from amg_fast.train.checkpoint import capture_rng, latest_checkpoint, load_checkpoint, restore_rng, save_checkpoint
from amg_fast.train.config import FFNO_FAMILY, TrainConfig, resolve_config
from amg_fast.train.evaluate import evaluate, unwrap
from amg_fast.train.graphs import EagerTrainStep, GraphedTrainStep
from amg_fast.train.precision import autocast, precision_scope

__all__ = ["train", "TrainingDiverged", "RunDirError", "build_model", "normalization_stats"]

TRAIN_EVAL_LIMIT = 256  # training trajectories re-evaluated at the end (train vs test diagnostics)

# Settings that may differ between a run and its resumption.
RESUMABLE_CHANGES = {"resume", "device", "out", "fast_kernels", "cuda_graph", "checkpoint_every", "eval_batch_size"}


class TrainingDiverged(RuntimeError):
    """The loss became NaN or Inf; the last good checkpoint is kept."""


class RunDirError(RuntimeError):
    """The output directory holds another run (or nothing to resume)."""


# -- set-up -----------------------------------------------------------------------------------
def _distributed() -> tuple[int, int]:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1 and not dist.is_initialized():
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        dist.init_process_group(backend)
    return (dist.get_rank(), dist.get_world_size()) if dist.is_initialized() else (0, 1)


def _device(name: str, rank: int) -> torch.device:
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(name)
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


def build_model(cfg: TrainConfig, omega: float, backend: str, stats: dict | None = None) -> torch.nn.Module:
    """The run's model; with --normalize or --increment wrapped in models.Normalized, whose
    statistics come from `stats` (normalization_stats; None: identity, e.g. before a checkpoint's
    state dict restores them)."""
    kwargs = {"in_channels": 1, "out_channels": 1, "width": cfg.width, "backend": backend}
    if cfg.modes is not None:  # None for models without Fourier layers (resolve_config)
        kwargs["modes"] = cfg.modes
    if cfg.model == "amgfno":
        kwargs.update(omega=omega, freq_gate=not cfg.no_freq_gate)
    elif cfg.model == "s4ffno":
        kwargs.update(fusion=cfg.fusion, alpha=cfg.alpha)
    if cfg.model in FFNO_FAMILY:
        kwargs.update(share_weights=cfg.share_weights, weight_norm=cfg.weight_norm, decoder_input=cfg.decoder_input)
    model = get_model(cfg.model, **kwargs)
    if cfg.normalize or cfg.increment:
        model = Normalized(model, increment=cfg.increment, **(stats or {}))
    return model


def normalization_stats(u: torch.Tensor, *, normalize: bool, increment: bool) -> dict:
    """Per-channel statistics of the training split u [N, T, S, C] for models.Normalized:
    inputs u_t (all frames); targets u_{t+1} or, with increment, u_{t+1} - u_t. normalize=False
    gives the identity statistics (increment prediction alone)."""
    if not normalize:
        return {}
    dims = tuple(range(u.dim() - 1))
    target = u[:, 1:] - u[:, :-1] if increment else u[:, 1:]
    u, target = u.double(), target.double()
    return {"in_mean": u.mean(dims).float(), "in_std": u.std(dims).clamp_min(1e-12).float(),
            "out_mean": target.mean(dims).float(), "out_std": target.std(dims).clamp_min(1e-12).float()}


def _param_groups(model: torch.nn.Module, weight_decay: float) -> list[dict]:
    plain = [p for p in model.parameters() if not hasattr(p, "_optim")]
    special = [p for p in model.parameters() if hasattr(p, "_optim")]
    groups = [{"params": plain, "weight_decay": weight_decay}]
    if special:
        groups.append({"params": special, "weight_decay": 0.0})
    return groups


def _data_path(cfg: TrainConfig, rank: int, log) -> Path:
    if cfg.data is not None:
        return Path(cfg.data)
    if rank == 0:
        path, summary = generate_dataset(cfg.pde, nu=cfg.nu, n_train=cfg.n_train, n_test=cfg.n_test,
                                         seed=cfg.seed, out_dir=cfg.cache_dir)
        log(f"data: {path} ({'cached' if summary['skipped'] else 'generated in %.1f s' % summary['wall_time_s']})")
    if dist.is_initialized():
        dist.barrier()
    n_test = cfg.n_test if cfg.n_test is not None else default_n_test(cfg.pde, cfg.n_train)
    return dataset_path(cfg.cache_dir, cfg.pde, cfg.nu, cfg.n_train, n_test, cfg.seed)


def _load(ds: TrajectoryDataset) -> tuple[torch.Tensor, torch.Tensor]:
    """The whole split in memory: u [N, T, S, 1], omega [N] (small at these resolutions)."""
    items = [ds[i] for i in range(len(ds))]
    return torch.stack([u for u, _ in items]), torch.stack([w for _, w in items])


# -- run directory ----------------------------------------------------------------------------
def _write_json(path: Path, obj) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2) + "\n")
    os.replace(tmp, path)


def _write_metrics(path: Path, history: list[dict]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(json.dumps(row) + "\n" for row in history))
    os.replace(tmp, path)


def _prepare_run_dir(cfg: TrainConfig) -> Path:
    out = Path(cfg.out)
    config_path = out / "config.json"
    if config_path.exists():
        if not cfg.resume:
            raise RunDirError(f"{out} already holds a run (config.json); pass --resume to continue it "
                              f"or choose another --out")
        old = json.loads(config_path.read_text())
        diff = {k for k in cfg.to_dict() if k not in RESUMABLE_CHANGES and old.get(k) != cfg.to_dict()[k]}
        if diff:
            raise RunDirError(f"{out}: --resume with settings that differ from the run's config.json: "
                              + ", ".join(f"{k}={old.get(k)!r} -> {cfg.to_dict()[k]!r}" for k in sorted(diff)))
    elif cfg.resume and latest_checkpoint(out) is None:
        raise RunDirError(f"{out}: nothing to resume (no config.json or checkpoint)")
    out.mkdir(parents=True, exist_ok=True)
    _write_json(config_path, cfg.to_dict())
    return out


# -- training ---------------------------------------------------------------------------------
def _loss(model, u: torch.Tensor, omega: torch.Tensor, omega_mode: str) -> torch.Tensor:
    kwargs = {"omega": omega.mean()} if omega_mode == "batch" else {}
    pred = model(u[:, :-1], **kwargs)
    return (pred.to(u.dtype) - u[:, 1:]).square().sum(dim=(2, 3)).mean()  # bf16 autocast output: loss in fp32


def _optimizer(model: torch.nn.Module, cfg: TrainConfig, device: torch.device) -> torch.optim.Optimizer:
    """Adam. On CUDA the fused implementation (a few kernels per step for all parameters; on CPU
    it measured slower than the default foreach path, which stays there). --cuda-graph: fused and
    capturable with a tensor lr, so the scheduler's changes reach the captured step."""
    groups = _param_groups(model, cfg.weight_decay)
    if cfg.cuda_graph:
        return torch.optim.Adam(groups, lr=torch.tensor(cfg.lr, device=device), fused=True, capturable=True)
    return torch.optim.Adam(groups, lr=cfg.lr, fused=device.type == "cuda" or None)


def train(cfg: TrainConfig, log=print) -> dict:
    """Train and evaluate one run; returns the results dict also written to results.json."""
    cfg = resolve_config(cfg)
    with precision_scope(cfg.precision):
        return _train(cfg, log)


def _train(cfg: TrainConfig, log) -> dict:
    rank, world = _distributed()
    log = log if rank == 0 else (lambda *a, **k: None)
    if cfg.out is None:
        cfg.out = f"runs/{cfg.model}_{cfg.pde}_nu{cfg.nu:g}_f{cfg.res}_seed{cfg.seed}"
    device = _device(cfg.device, rank)
    backend = _backend(cfg.fast_kernels, device, log)
    start = time.perf_counter()
    path = _data_path(cfg, rank, log)
    batch_omega = cfg.omega_mode == "batch"
    train_ds = TrajectoryDataset(path, cfg.res, split="train", limit=cfg.n_train, omega_per_trajectory=batch_omega)
    test_ds = TrajectoryDataset(path, cfg.res, split="test", limit=cfg.n_test, omega_per_trajectory=batch_omega)
    torch.manual_seed(cfg.seed)
    omega = train_ds.omega if cfg.omega is None else cfg.omega  # --omega: the paper's value, say
    u_train, w_train = _load(train_ds)
    stats = normalization_stats(u_train, normalize=cfg.normalize, increment=cfg.increment)
    model = build_model(cfg, omega, backend, stats).to(device)  # before the run dir: a bad build leaves none
    params = count_parameters(model)
    out = _prepare_run_dir(cfg) if rank == 0 else Path(cfg.out)
    if dist.is_initialized():
        dist.barrier()
    if dist.is_initialized():
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    if cfg.cuda_graph:
        _check_cuda_graph(device, world)
    optimizer = _optimizer(model, cfg, device)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=cfg.epochs)
    data_order = torch.Generator().manual_seed(cfg.seed)
    history, first_epoch = [], 1
    checkpoint_path = out / "checkpoint.pt"
    if cfg.resume and checkpoint_path.exists():
        state = load_checkpoint(checkpoint_path)
        unwrap(model).load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        restore_rng(state["rng"], data_order)
        history, first_epoch = state["history"], state["epoch"] + 1
        log(f"resumed {out} after epoch {state['epoch']}")
    if rank == 0:
        _write_metrics(out / "metrics.jsonl", history)

    u_train, w_train = u_train.to(device), w_train.to(device)
    # Evaluation rolls out the whole test split at once unless --eval-batch-size says otherwise.
    test_loader = [(u.to(device), w.to(device)) for u, w in torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(*_load(test_ds)), batch_size=cfg.eval_batch_size or len(test_ds))]
    log(f"{cfg.model}: {params:,} parameters; {len(train_ds)} train / {len(test_ds)} test trajectories at f={cfg.res}, "
        f"omega_f={train_ds.omega:.4g}" + ("" if cfg.omega is None else f" (the gate uses --omega {cfg.omega:g})")
        + f"; device {device}, backend {backend}, precision {cfg.precision}, "
        f"{world} process(es)")

    def loss_fn(model, u, w):  # (loss, AMGFNO's mean gate of this step or None)
        with autocast(cfg.precision, device):
            loss = _loss(model, u, w, cfg.omega_mode)
        return loss, getattr(unwrap(model), "last_gate_mean", None)

    def run_eval(loader=test_loader):
        return evaluate(model, loader, device, omega_mode=cfg.omega_mode, precision=cfg.precision)

    # The same diagnostics on (the first TRAIN_EVAL_LIMIT) training trajectories, at the end: train vs test.
    n_train_eval, eval_batch = min(len(u_train), TRAIN_EVAL_LIMIT), cfg.eval_batch_size or len(test_ds)
    train_loader = [(u_train[i:min(i + eval_batch, n_train_eval)], w_train[i:min(i + eval_batch, n_train_eval)])
                    for i in range(0, n_train_eval, eval_batch)]

    step = (GraphedTrainStep if cfg.cuda_graph else EagerTrainStep)(model, optimizer, loss_fn)
    for epoch in range(first_epoch, cfg.epochs + 1):
        t0 = time.perf_counter()
        model.train()
        order = torch.randperm(len(u_train), generator=data_order)
        loss_sum, gate_sum, batches = torch.zeros((), device=device), 0.0, 0
        for i in range(0, len(order), cfg.batch_size):
            batch = order[i:i + cfg.batch_size]
            if len(batch) < world:  # every rank needs a share; all ranks skip the same batch
                continue
            idx = batch[rank::world].to(device)
            loss, gate = step(u_train[idx], w_train[idx])  # a graph's static outputs: accumulate now
            loss_sum += loss
            batches += 1
            gate_sum = gate_sum + gate if gate is not None else gate_sum
        if dist.is_initialized():
            dist.all_reduce(loss_sum)
            loss_sum /= world
        train_loss = float(loss_sum) / batches
        if not math.isfinite(train_loss):
            kept = checkpoint_path if checkpoint_path.exists() else "none yet"
            raise TrainingDiverged(f"loss is {train_loss} at epoch {epoch}; stopping. The last good checkpoint "
                                   f"({kept}) is kept")
        row = {"epoch": epoch, "train_loss": train_loss, "lr": float(optimizer.param_groups[0]["lr"]),
               "gate_mean": float(gate_sum) / batches if torch.is_tensor(gate_sum) else None,
               "time_s": time.perf_counter() - t0}
        scheduler.step()
        if rank == 0 and (epoch % cfg.eval_every == 0 or epoch == cfg.epochs):
            t1 = time.perf_counter()
            result = run_eval()
            row["test_nrmse"], row["test_one_step_nrmse"] = result.nrmse, result.one_step_nrmse
            row["eval_s"] = time.perf_counter() - t1
        history.append(row)
        if rank == 0:
            if epoch % cfg.checkpoint_every == 0 or epoch == cfg.epochs:
                t1 = time.perf_counter()
                save_checkpoint(checkpoint_path, {"model": unwrap(model).state_dict(),
                                                  "optimizer": optimizer.state_dict(),
                                                  "scheduler": scheduler.state_dict(), "epoch": epoch,
                                                  "rng": capture_rng(data_order), "config": cfg.to_dict(),
                                                  "history": history})
                row["checkpoint_s"] = time.perf_counter() - t1
            _write_metrics(out / "metrics.jsonl", history)
            log(f"epoch {epoch:4d}  loss {train_loss:.4e}  lr {row['lr']:.2e}"
                + (f"  g-bar {row['gate_mean']:.4f}" if row["gate_mean"] is not None else "")
                + (f"  test nRMSE {row['test_nrmse']:.4f}" if "test_nrmse" in row else "")
                + f"  {row['time_s']:.1f} s")
    return _finish(cfg, model, run_eval, history, params, out, start, rank, world, log, train_loader)


def _ranks_agree(model) -> bool:
    """All DDP ranks hold the same parameters (sum of squares and sum, in float64)."""
    flat = torch.cat([p.detach().double().flatten() for p in unwrap(model).parameters()])
    stats = torch.stack([flat.sum(), flat.square().sum()])
    gathered = [torch.zeros_like(stats) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, stats)
    return all(torch.equal(g, gathered[0]) for g in gathered)


def _finish(cfg, model, run_eval, history, params, out, start, rank, world, log, train_loader) -> dict:
    agree = _ranks_agree(model) if dist.is_initialized() else None
    results = _final_evaluation(cfg, model, run_eval, history, params, out, start, world, agree, log, train_loader) \
        if rank == 0 else {}
    if dist.is_initialized():  # leave together: a rank that exits early can abort its peers
        dist.barrier()
        dist.destroy_process_group()
    return results


def _final_evaluation(cfg, model, run_eval, history, params, out, start, world, agree, log, train_loader) -> dict:
    result = run_eval()
    train_result = run_eval(train_loader)
    gates = [row["gate_mean"] for row in history[-20:] if row["gate_mean"] is not None]
    seconds = {key: sum(row.get(key, 0.0) for row in history) for key in ("time_s", "eval_s", "checkpoint_s")}
    results = {"model": cfg.model, "pde": cfg.pde, "nu": cfg.nu, "res": cfg.res, "nrmse": result.nrmse,
               "nrmse_per_step": result.nrmse_per_step.tolist(), "gate_mean": result.gate_mean,
               "amplitude_per_step": result.amplitude_per_step.tolist(), "one_step_nrmse": result.one_step_nrmse,
               "one_step_nrmse_per_step": result.one_step_nrmse_per_step.tolist(),
               "test_one_step_loss": result.one_step_loss, "train_one_step_loss": train_result.one_step_loss,
               "train_one_step_nrmse": train_result.one_step_nrmse, "train_nrmse": train_result.nrmse,
               "train_eval_trajectories": len(train_result.true),
               "gate_mean_last20_epochs": float(np.mean(gates)) if gates else None, "params": params,
               "epochs": cfg.epochs, "wall_time_s": time.perf_counter() - start,
               "train_time_s": seconds["time_s"], "eval_time_s": seconds["eval_s"],
               "checkpoint_time_s": seconds["checkpoint_s"], "precision": cfg.precision,
               "cuda_graph": cfg.cuda_graph, "fast_kernels": cfg.fast_kernels,
               "device": str(next(unwrap(model).parameters()).device),
               "world_size": world, "ddp_ranks_agree": agree}
    _write_json(out / "results.json", results)
    tmp = out / "rollout.npz.tmp"
    with open(tmp, "wb") as fh:
        np.savez_compressed(fh, pred=result.pred, true=result.true)
    os.replace(tmp, out / "rollout.npz")
    log(f"test nRMSE {result.nrmse:.4f} (rollout from u_0, {result.true.shape[1]} steps)"
        + (f", g-bar {result.gate_mean:.4f}" if result.gate_mean is not None else "")
        + f"; results in {out}")
    return results
