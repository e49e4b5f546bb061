"""Input checks for the data layer (numpy-first; torch tensors are accepted and moved to CPU)."""
from __future__ import annotations

import numpy as np


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
