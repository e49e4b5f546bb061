"""Low-resolution observations: periodic cubic interpolation onto x_r = r L / f (paper eq. app-grid),
per axis on 2D grids.

The paper (following S4FFNO) builds the resolution-f observation from the highest-resolution
trajectory by cubic interpolation. We use the periodic cubic spline (scipy CubicSpline,
bc_type="periodic"): exact at source nodes, fourth-order accurate between them.
"""
from __future__ import annotations

import numpy as np
from scipy.interpolate import CubicSpline

from amg_fast.data._arrays import as_numpy_real

__all__ = ["to_resolution", "SOURCE_GRIDS"]

SOURCE_GRIDS = ("node", "cell")


def to_resolution(u, f: int, *, source_grid: str = "node", spatial_dims: int = 1) -> np.ndarray:
    """Resample periodic samples u [..., N] onto the f-point grid x_r = r L / f -> [..., f].

    source_grid: "node" when u sits at x_j = j L / N (KS), "cell" when u holds cell-centre
    values at x_j = (j + 1/2) L / N (finite-volume Burgers, PDEBench). spatial_dims=2: u [..., N_x,
    N_y] -> [..., f, f], the same 1D resample along each of the two axes in turn (tensor-product
    splines). Returns u's float dtype (float64 for integer input); torch tensors are accepted and
    returned as numpy arrays.
    """
    src = u.detach().cpu().numpy() if hasattr(u, "detach") else np.asarray(u)
    out_dtype = src.dtype if src.dtype.kind == "f" else np.float64
    if spatial_dims not in (1, 2):
        raise ValueError(f"spatial_dims must be 1 ([..., N]) or 2 ([..., N_x, N_y]), got {spatial_dims!r}")
    arr = as_numpy_real("u", src, min_rank=spatial_dims)
    if source_grid not in SOURCE_GRIDS:
        raise ValueError(f"source_grid must be one of {SOURCE_GRIDS}, got {source_grid!r}")
    if isinstance(f, bool) or not isinstance(f, (int, np.integer)) or f < 1:
        raise ValueError(f"f (the target resolution) must be an int >= 1, got {f!r}")
    for axis in range(-spatial_dims, 0):
        arr = np.moveaxis(_resample_last(np.moveaxis(arr, axis, -1), f, source_grid), -1, axis)
    return arr.astype(out_dtype, copy=False)


def _resample_last(arr: np.ndarray, f: int, source_grid: str) -> np.ndarray:
    """The periodic cubic spline of arr [..., N] (float64) evaluated at r / f, r = 0..f-1 -> [..., f]."""
    N = arr.shape[-1]
    if N < 2:
        raise ValueError(f"u must have at least 2 points along each resampled dimension, got shape {arr.shape}")
    offset = 0.5 if source_grid == "cell" else 0.0
    x_src = (np.arange(N + 1) + offset) / N  # in units of L, closed periodically
    y_src = np.concatenate([arr, arr[..., :1]], axis=-1)
    spline = CubicSpline(x_src, y_src, axis=-1, bc_type="periodic", extrapolate="periodic")
    return spline(np.arange(f) / f)
