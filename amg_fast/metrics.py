"""Evaluation metrics (paper eq. app-step-nrmse / app-avg-nrmse)."""
from __future__ import annotations

import torch

from amg_fast._checks import check_rank, check_real_float

__all__ = ["nrmse", "nrmse_per_sample_step"]


def nrmse_per_sample_step(pred: torch.Tensor, true: torch.Tensor) -> torch.Tensor:
    """||pred[b,t] - true[b,t]||_2 / ||true[b,t]||_2 over space (and channels).

    pred, true: [B, T, S] or [B, T, S, C], or on a 2D grid [B, T, X, Y, C] -> [B, T].
    """
    pred, true = torch.as_tensor(pred), torch.as_tensor(true)
    check_real_float("pred", pred)
    check_real_float("true", true)
    check_rank("true", true, (3, 4, 5), "[B, T, S], [B, T, S, C] or [B, T, X, Y, C]")
    if pred.shape != true.shape:
        raise ValueError(f"pred must have the shape of true {tuple(true.shape)}, got {tuple(pred.shape)}")
    err = (pred - true).flatten(2).norm(dim=-1)
    ref = true.flatten(2).norm(dim=-1)
    if bool((ref == 0).any()):
        b, t = (ref == 0).nonzero()[0].tolist()
        raise ValueError(f"true[{b}, {t}] is identically zero: its nRMSE is undefined")
    return err / ref


def nrmse(pred: torch.Tensor, true: torch.Tensor) -> torch.Tensor:
    """Mean over (b, t) of the relative L2 error. pred, true [B, T, S(, C)] or [B, T, X, Y, C] -> 0-dim tensor.

    Pass the rollout steps only (t >= 1), as the paper does.
    """
    return nrmse_per_sample_step(pred, true).mean()
