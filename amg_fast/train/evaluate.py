"""Evaluation (paper appendix "Evaluation"): autoregressive rollout from u_0 only, nRMSE over
steps 1..T, the per-step curve, and AMGFNO's mean gate g-bar during rollout; plus the diagnostics
of docs/fidelity.md: the rollout's amplitude ||pred|| / ||true|| per step and the one-step
(teacher-forced) error and loss on the same trajectories."""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from amg_fast.metrics import nrmse_per_sample_step
from amg_fast.train.precision import autocast

__all__ = ["EvalResult", "evaluate", "predict", "Predictor", "unwrap", "one_step_loss"]


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


def predict(net: torch.nn.Module, u: torch.Tensor, omega: torch.Tensor | None, precision: str = "fp32"
            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """One evaluation batch's model work: (teacher-forced predictions net(u[:, :-1]), the rollout from u[:, 0] for
    T-1 steps, both [B, T-1, S, C] (2D: [B, T-1, X, Y, C]) in u's dtype; the rollout's mean gate g-bar, a 0-dim
    tensor, or None for a model without a gate). omega [B]: the trajectories' omega, whose batch mean goes to
    AMGFNO's gate (omega_mode "batch"), or None. The work a graphed evaluation captures (graphs.GraphedEvaluation):
    it reads no tensor on the host."""
    kwargs = {} if omega is None else {"omega": omega.mean()}
    with autocast(precision, u.device):  # teacher forcing first: the rollout's g-bar is the one kept
        forced = net(u[:, :-1], **kwargs)
        pred = net.rollout(u[:, 0], u.shape[1] - 1, **kwargs)
    return forced.to(u.dtype), pred.to(u.dtype), getattr(net, "last_gate_mean", None)  # bf16 autocast -> u's dtype


# predictor(net, u, omega or None) -> predict's (forced, pred, g-bar or None)
Predictor = Callable[[torch.nn.Module, torch.Tensor, "torch.Tensor | None"],
                     tuple[torch.Tensor, torch.Tensor, "torch.Tensor | None"]]


@torch.no_grad()
def evaluate(model: torch.nn.Module, loader, device, *, omega_mode: str = "fixed",
             precision: str = "fp32", predictor: Predictor | None = None) -> EvalResult:
    """Roll out from each trajectory's u_0 for T-1 steps; loader yields (u [B, T, S, C] or, for 2D
    models, [B, T, X, Y, C], omega [B]).

    omega_mode "batch" passes the batch mean of the per-trajectory omega to AMGFNO's gate.
    precision "bf16" rolls out under bf16 autocast (amg_fast.train.precision); errors in fp32.
    predictor: what runs the model on a batch (default predict at this precision; the trainer's --cuda-graph
    passes a graphs.GraphedEvaluation).
    """
    net = unwrap(model)
    predictor = predictor or functools.partial(predict, precision=precision)
    was_training = net.training
    net.eval()
    errors, preds, trues, gate_sum, gate_weight = [], [], [], 0.0, 0
    amplitudes, one_step_errors, loss_sum = [], [], 0.0
    try:
        for u, omega in loader:
            u = u.to(device)
            forced, pred, gate = predictor(net, u, omega.to(device) if omega_mode == "batch" else None)
            one_step_errors.append(nrmse_per_sample_step(forced, u[:, 1:]).cpu())
            loss_sum += float(one_step_loss(forced, u[:, 1:])) * len(u)
            errors.append(nrmse_per_sample_step(pred, u[:, 1:]).cpu())
            amplitudes.append((pred.flatten(2).norm(dim=-1) / u[:, 1:].flatten(2).norm(dim=-1)).cpu())
            preds.append(pred[..., 0].cpu().numpy())
            trues.append(u[:, 1:, ..., 0].cpu().numpy())
            if gate is not None:
                gate_sum += float(gate) * len(u)
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
