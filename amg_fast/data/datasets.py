"""torch Datasets over the HDF5 files: trajectories at a requested resolution plus omega_f.

The file is opened lazily in each process (h5py handles do not survive fork or pickling), so
DataLoader workers are safe.
"""
from __future__ import annotations

import numpy as np
import torch
from torch.utils.data import Dataset

from amg_fast.data.h5 import DataFileError, check_finite, locate, open_file
from amg_fast.data.resample import to_resolution
from amg_fast.data.spectral import unresolved_energy_ratio

__all__ = ["TrajectoryDataset", "PAPER_FRAMES", "split_indices", "source_grid_of"]

# (stride, number of frames) of the paper's protocol per PDE: KS all 26 frames (25 steps);
# Burgers every 7th PDEBench frame, 21 frames up to t = 1.4 (20 steps); 2D Navier-Stokes all saved frames.
PAPER_FRAMES = {"ks": (1, None), "burgers": (7, 21), "ns2d": (1, None)}
TEST_FRACTION = 0.1  # PDEBench-layout files hold every trajectory; the last 10% are the test split


def split_indices(n_total: int, split: str, n_test: int | None = None) -> np.ndarray:
    """Train = the first n_total - n_test trajectories, test = the last n_test (default 10%)."""
    n_test = int(round(TEST_FRACTION * n_total)) if n_test is None else int(n_test)
    if split == "train":
        return np.arange(0, n_total - n_test)
    if split == "test":
        return np.arange(n_total - n_test, n_total)
    raise ValueError(f"split must be 'train' or 'test' for a single-tensor file, got {split!r}")


def source_grid_of(x: np.ndarray) -> str:
    """"cell" when x holds cell centres (x_0 = dx/2), else "node" (x_0 = 0)."""
    dx = x[1] - x[0]
    return "cell" if abs(x[0] - 0.5 * dx) < 1e-6 * abs(dx) else "node"


def _pde_of(attrs: dict, layout: str, spatial_dims: int) -> str:
    """The file's `pde` attribute; without one: ns2d for 2D fields, Burgers for other PDEBench files, else KS."""
    return str(attrs.get("pde", "ns2d" if spatial_dims == 2 else "burgers" if layout == "pdebench" else "ks"))


class TrajectoryDataset(Dataset):
    """Item i -> (u [T, f, 1] float tensor at resolution f, omega_f 0-dim tensor); for 2D files
    ([N, T, X, Y], PDEBench 2D) u [T, f, f, 1], resampled along each axis and omega_f the 2D one
    (spatial_dims=2 in amg_fast.data.spectral). spatial_dims: 1 or 2, from the file.

    path: a PDEBench, LPSDA or amg_fast file (amg_fast.data.h5). split: "train" | "test" (an
    LPSDA group, or the first 90% / last 10% of a single-tensor file). field: the dataset of a
    PDEBench CFD file with several fields (`density`, `Vx`, ...; h5.locate). stride, n_frames: which
    frames; "paper" (default) = the paper's protocol for the file's PDE (PAPER_FRAMES), n_frames
    None = all. limit: keep the
    first `limit` trajectories of the split. omega: the omega_f to report; default the file's
    stored `omega_f_{f}`, else computed from the file's high-resolution training split.
    omega_per_trajectory=True reports each trajectory's own omega_f instead (computed from its
    high-resolution frames: the paper's per-batch ablation averages these over a batch).
    nonzero_rollout_frames=True refuses (DataFileError, naming the file, split, trajectory and
    frame) an item with an identically zero frame after the first at resolution f: the rollout
    nRMSE divides by that frame's norm (training and evaluation ask for it).
    """

    def __init__(self, path, resolution: int, *, split: str = "train", stride: int | str = "paper",
                 n_frames: int | None | str = "paper", limit: int | None = None, omega: float | None = None,
                 omega_per_trajectory: bool = False, dtype: torch.dtype = torch.float32,
                 nonzero_rollout_frames: bool = False, field: str | None = None):
        self.path, self.resolution, self.split, self.dtype, self.field = path, int(resolution), split, dtype, field
        self.omega_per_trajectory = bool(omega_per_trajectory)
        self.nonzero_rollout_frames = bool(nonzero_rollout_frames)
        with open_file(path) as f:
            loc = locate(f, path, split if not _single_tensor(f) else None, field)
            self._dataset, self.x, self.layout, self.attrs = loc.dataset, loc.x, loc.layout, loc.attrs
            self.spatial_dims = len(loc.shape) - 2  # the readers allow [N, T, X] and [N, T, X, Y]
            n_total, n_points = loc.shape[0], min(loc.shape[2:])
            if 0 in loc.shape:
                raise DataFileError(f"{path}: {loc.dataset} holds no data (shape {loc.shape}, "
                                    f"{'[N, T, X]' if self.spatial_dims == 1 else '[N, T, X, Y]'})")
            self.pde = _pde_of(loc.attrs, loc.layout, self.spatial_dims)  # the `pde` attribute, else from the layout
            paper_stride, paper_frames = PAPER_FRAMES.get(self.pde, (1, None))
            self.stride = paper_stride if stride == "paper" else int(stride)
            if self.stride < 1 or (n_frames not in ("paper", None) and int(n_frames) < 1):
                raise ValueError(f"stride and n_frames must be >= 1, got stride={stride}, n_frames={n_frames}")
            self.frames = np.arange(0, loc.shape[1], self.stride)[: paper_frames if n_frames == "paper" else n_frames]
            self.t = loc.t[self.frames]
            if loc.layout == "lpsda":
                self.indices = np.arange(n_total)
            else:
                self.indices = split_indices(n_total, split, _n_test_attr(path, loc.attrs, n_total))
            if limit is not None:
                self.indices = self.indices[:limit]
            if not 1 <= self.resolution <= n_points:
                raise ValueError(f"{path}: resolution must be in 1..{n_points} (the data's resolution"
                                 f"{' per axis' if self.spatial_dims == 2 else ''}), got {resolution}")
            self.source_grid = source_grid_of(self.x)
            self.omega = float(omega) if omega is not None else self._stored_or_computed_omega(f)
        self._file = None

    def _stored_or_computed_omega(self, f) -> float:
        key = f"omega_f_{self.resolution}"
        if key in self.attrs:
            return _omega_attr(self.path, key, self.attrs[key])
        train = locate(f, self.path, "train" if self.layout == "lpsda" else None, self.field)
        rows = np.arange(train.shape[0]) if self.layout == "lpsda" else split_indices(
            train.shape[0], "train", _n_test_attr(self.path, train.attrs, train.shape[0]))
        if len(rows) == 0:
            raise DataFileError(f"{self.path}: the training split is empty, so omega_f_{self.resolution} cannot be "
                                "computed from it (and the file does not store it)")
        u = f[train.dataset][rows[0]:rows[-1] + 1, self.frames]
        check_finite(self.path, train.dataset, u)  # omega_f of NaN states is undefined
        return unresolved_energy_ratio(u, self.resolution, spatial_dims=self.spatial_dims)

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        if self._file is None:
            self._file = open_file(self.path)
        u = np.asarray(self._file[self._dataset][self.indices[i], self.frames])  # [T, X] or [T, X, Y]
        check_finite(self.path, f"{self._dataset}[{self.indices[i]}]", u)
        low = torch.as_tensor(to_resolution(u, self.resolution, source_grid=self.source_grid,
                                            spatial_dims=self.spatial_dims), dtype=self.dtype)
        if self.nonzero_rollout_frames:
            self._check_nonzero_frames(i, low)
        omega = unresolved_energy_ratio(u, self.resolution, spatial_dims=self.spatial_dims) \
            if self.omega_per_trajectory else self.omega
        return low[..., None], torch.tensor(omega, dtype=self.dtype)

    def _check_nonzero_frames(self, i: int, low: torch.Tensor) -> None:
        """low [T, f] (2D: [T, f, f]): refuse a frame t >= 1 whose norm is 0 (the nRMSE denominator, as
        metrics computes it)."""
        zero = (low[1:].flatten(1).norm(dim=-1) == 0).nonzero()
        if len(zero):
            t = int(zero[0, 0]) + 1
            raise DataFileError(
                f"{self.path}: {self.split} trajectory {i} ({self._dataset}[{self.indices[i]}]) is identically zero "
                f"at frame {t} (file frame {self.frames[t]}, t = {self.t[t]:g}) at resolution {self.resolution}: "
                "the rollout nRMSE divides by each frame's norm, so it is undefined there; allowed: trajectories "
                "whose frames after the first are not all zero")

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_file"] = None  # each worker opens its own handle
        return state

    def __del__(self):
        if getattr(self, "_file", None) is not None:
            self._file.close()


def _n_test_attr(path, attrs: dict, n_total: int) -> int | None:
    """The file's `n_test` attribute (None when absent), an integer in 0..n_total."""
    value = attrs.get("n_test")
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or not 0 <= value <= n_total:
        raise DataFileError(f"{path}: attribute n_test (the test trajectories at the end of the file) must be an "
                            f"integer in 0..{n_total} (the file holds {n_total} trajectories), got {value!r}")
    return int(value)


def _omega_attr(path, key: str, value) -> float:
    """A stored omega_f attribute: an unresolved-energy ratio, a finite number in [0, 1]."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not 0 <= value <= 1:  # NaN compares False: refused too
        raise DataFileError(f"{path}: attribute {key} (the unresolved-energy ratio omega_f of the training split) must "
                            f"be a finite number in [0, 1], got {value!r}")
    return float(value)


def _single_tensor(f) -> bool:
    return "tensor" in f or "u" in f
