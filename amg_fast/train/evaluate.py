"""Evaluation (paper appendix "Evaluation"): autoregressive rollout from u_0 only, nRMSE over
steps 1..T, the per-step curve, and AMGFNO's mean gate g-bar during rollout."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from amg_fast.metrics import nrmse_per_sample_step
from amg_fast.train.precision import autocast

__all__ = ["EvalResult", "evaluate", "unwrap"]


@dataclass
class EvalResult:
    """nrmse (float), nrmse_per_step [T] (steps 1..T), gate_mean (float or None),
    pred and true [N, T, S] (steps 1..T) as numpy arrays."""

    nrmse: float
    nrmse_per_step: np.ndarray
    gate_mean: float | None
    pred: np.ndarray
    true: np.ndarray


def unwrap(model: torch.nn.Module) -> torch.nn.Module:
    """The model inside a DistributedDataParallel (or the model itself)."""
    return getattr(model, "module", model)


@torch.no_grad()
def evaluate(model: torch.nn.Module, loader, device, *, omega_mode: str = "fixed",
             precision: str = "fp32") -> EvalResult:
    """Roll out from each trajectory's u_0 for T-1 steps; loader yields (u [B, T, S, C], omega [B]).

    omega_mode "batch" passes the batch mean of the per-trajectory omega to AMGFNO's gate.
    precision "bf16" rolls out under bf16 autocast (amg_fast.train.precision); errors in fp32.
    """
    net = unwrap(model)
    was_training = net.training
    net.eval()
    errors, preds, trues, gate_sum, gate_weight = [], [], [], 0.0, 0
    try:
        for u, omega in loader:
            u = u.to(device)
            kwargs = {"omega": omega.to(device).mean()} if omega_mode == "batch" else {}
            with autocast(precision, device):
                pred = net.rollout(u[:, 0], u.shape[1] - 1, **kwargs)
            pred = pred.to(u.dtype)  # bf16 autocast output -> the data dtype
            errors.append(nrmse_per_sample_step(pred, u[:, 1:]).cpu())
            preds.append(pred[..., 0].cpu().numpy())
            trues.append(u[:, 1:, ..., 0].cpu().numpy())
            if getattr(net, "gate_mean", None) is not None:
                gate_sum += net.gate_mean * len(u)
                gate_weight += len(u)
    finally:
        net.train(was_training)
    err = torch.cat(errors)  # [N, T]
    return EvalResult(nrmse=float(err.mean()), nrmse_per_step=err.mean(0).numpy(),
                      gate_mean=gate_sum / gate_weight if gate_weight else None,
                      pred=np.concatenate(preds), true=np.concatenate(trues))
