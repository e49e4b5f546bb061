"""Input checks for the data layer (numpy-first; torch tensors are accepted and moved to CPU)."""
from __future__ import annotations

import numpy as np
import torch

from amg_fast._checks import check_real_float


def as_numpy_real(name: str, value, *, min_rank: int = 1) -> np.ndarray:
    """value (numpy array, torch tensor or nested list) as a real float64 numpy array."""
    if hasattr(value, "detach"):  # torch.Tensor
        value = value.detach().cpu().numpy()
    arr = np.asarray(value)
    if arr.dtype.kind not in "fiu" or arr.dtype == bool:
        raise TypeError(f"{name} must hold real numbers, got dtype {arr.dtype}")
    if arr.ndim < min_rank:
        raise ValueError(f"{name} must have rank >= {min_rank}, got shape {arr.shape}")
    return arr.astype(np.float64, copy=False)


def as_torch_real(name: str, value, layout: str) -> torch.Tensor:
    """value: a torch tensor (real float, any device) or a numpy float array (-> a CPU tensor sharing its
    memory), type-checked; layout (e.g. "[B, N]") names the expected shape in the errors."""
    if isinstance(value, np.ndarray):
        if not np.issubdtype(value.dtype, np.floating):
            raise TypeError(f"{name} must be a real floating-point array {layout}, got numpy dtype {value.dtype}")
        value = torch.from_numpy(np.ascontiguousarray(value))
    elif not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor or numpy.ndarray {layout}, got {type(value).__name__}")
    return check_real_float(name, value)
