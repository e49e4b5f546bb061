"""Evaluation (paper appendix "Evaluation"): autoregressive rollout from u_0 only, nRMSE over
steps 1..T, the per-step curve, and AMGFNO's mean gate g-bar during rollout; plus the diagnostics
of docs/fidelity.md: the rollout's amplitude ||pred|| / ||true|| per step and the one-step
(teacher-forced) error and loss on the same trajectories."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from amg_fast.metrics import nrmse_per_sample_step
from amg_fast.train.precision import autocast

__all__ = ["EvalResult", "evaluate", "unwrap", "one_step_loss"]


@dataclass
class EvalResult:
    """nrmse (float), nrmse_per_step [T] (steps 1..T), gate_mean (float or None),
    pred and true [N, T, S] (2D: [N, T, X, Y]; steps 1..T) as numpy arrays; amplitude_per_step [T]: mean over
    trajectories of ||pred|| / ||true|| per rollout step; one_step_nrmse (float) and
    one_step_nrmse_per_step [T]: the same nRMSE with teacher forcing (each prediction from the true
    history); one_step_loss: the training loss (eq. app-training-loss) on these trajectories."""

    nrmse: float
    nrmse_per_step: np.ndarray
    gate_mean: float | None
    pred: np.ndarray
    true: np.ndarray
    amplitude_per_step: np.ndarray | None = None
    one_step_nrmse: float | None = None
    one_step_nrmse_per_step: np.ndarray | None = None
    one_step_loss: float | None = None


def one_step_loss(pred: torch.Tensor, true: torch.Tensor) -> torch.Tensor:
    """The training loss: squared L2 norm over space (and channels), mean over batch and time.
    pred, true [B, T, S, C] (2D: [B, T, X, Y, C]). Computed as mse_loss(reduction="sum") / (B T): its forward and
    backward run 6 CUDA kernels, where (pred - true).square().flatten(2).sum(-1).mean() ran 9."""
    return torch.nn.functional.mse_loss(pred, true, reduction="sum") / (pred.shape[0] * pred.shape[1])


def unwrap(model: torch.nn.Module) -> torch.nn.Module:
    """The model inside a DistributedDataParallel (or the model itself)."""
    return getattr(model, "module", model)


@torch.no_grad()
def evaluate(model: torch.nn.Module, loader, device, *, omega_mode: str = "fixed",
             precision: str = "fp32") -> EvalResult:
    """Roll out from each trajectory's u_0 for T-1 steps; loader yields (u [B, T, S, C] or, for 2D
    models, [B, T, X, Y, C], omega [B]).

    omega_mode "batch" passes the batch mean of the per-trajectory omega to AMGFNO's gate.
    precision "bf16" rolls out under bf16 autocast (amg_fast.train.precision); errors in fp32.
    """
    net = unwrap(model)
    was_training = net.training
    net.eval()
    errors, preds, trues, gate_sum, gate_weight = [], [], [], 0.0, 0
    amplitudes, one_step_errors, loss_sum = [], [], 0.0
    try:
        for u, omega in loader:
            u = u.to(device)
            kwargs = {"omega": omega.to(device).mean()} if omega_mode == "batch" else {}
            with autocast(precision, device):  # teacher forcing first: the rollout's g-bar is the one kept
                forced = net(u[:, :-1], **kwargs)
            forced = forced.to(u.dtype)
            one_step_errors.append(nrmse_per_sample_step(forced, u[:, 1:]).cpu())
            loss_sum += float(one_step_loss(forced, u[:, 1:])) * len(u)
            with autocast(precision, device):
                pred = net.rollout(u[:, 0], u.shape[1] - 1, **kwargs)
            pred = pred.to(u.dtype)  # bf16 autocast output -> the data dtype
            errors.append(nrmse_per_sample_step(pred, u[:, 1:]).cpu())
            amplitudes.append((pred.flatten(2).norm(dim=-1) / u[:, 1:].flatten(2).norm(dim=-1)).cpu())
            preds.append(pred[..., 0].cpu().numpy())
            trues.append(u[:, 1:, ..., 0].cpu().numpy())
            if getattr(net, "gate_mean", None) is not None:
                gate_sum += net.gate_mean * len(u)
                gate_weight += len(u)
    finally:
        net.train(was_training)
    err, forced_err = torch.cat(errors), torch.cat(one_step_errors)  # [N, T]
    return EvalResult(nrmse=float(err.mean()), nrmse_per_step=err.mean(0).numpy(),
                      gate_mean=gate_sum / gate_weight if gate_weight else None,
                      pred=np.concatenate(preds), true=np.concatenate(trues),
                      amplitude_per_step=torch.cat(amplitudes).mean(0).numpy(),
                      one_step_nrmse=float(forced_err.mean()), one_step_nrmse_per_step=forced_err.mean(0).numpy(),
                      one_step_loss=loss_sum / len(err))
