"""TrajectoryDataset: resolution, frames, splits, omega_f, lazy open and DataLoader workers; 2D fields."""
import pickle

import h5py
import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from amg_fast.data.datasets import TrajectoryDataset
from amg_fast.data.h5 import DataFileError, write_lpsda, write_pdebench
from amg_fast.data.resample import to_resolution
from amg_fast.data.spectral import unresolved_energy_ratio


@pytest.fixture
def ks_file(tmp_path):
    rng = np.random.default_rng(0)
    train, test = rng.standard_normal((6, 26, 128)), rng.standard_normal((2, 26, 128))
    path = tmp_path / "ks.h5"
    write_lpsda(path, {"train": train, "test": test}, np.arange(128) * 0.5, np.arange(26) * 0.1, nu=0.1, L=64.0,
                seeds={"train": 0, "test": 1}, attrs={"pde": "ks", "omega_f_32": 0.123})
    return path, train.astype(np.float32), test.astype(np.float32)


@pytest.fixture
def burgers_file(tmp_path):
    u = np.random.default_rng(1).standard_normal((20, 201, 64))
    path = tmp_path / "burgers.h5"
    write_pdebench(path, u, (np.arange(64) + 0.5) / 64, np.arange(201) * 0.01, nu_file=0.001, attrs={"pde": "burgers"})
    return path, u.astype(np.float32)


def test_ks_items_and_stored_omega(ks_file):
    path, train, test = ks_file
    ds = TrajectoryDataset(path, 32)
    u, omega = ds[2]
    assert len(ds) == 6 and u.shape == (26, 32, 1) and u.dtype == torch.float32
    assert np.allclose(u[..., 0].numpy(), to_resolution(train[2], 32), atol=1e-6)
    assert float(omega) == pytest.approx(0.123) and ds.source_grid == "node"
    ds_test = TrajectoryDataset(path, 64, split="test")
    assert len(ds_test) == 2 and np.allclose(ds_test[1][0][..., 0].numpy(), to_resolution(test[1], 64), atol=1e-6)


def test_omega_computed_from_training_split_when_not_stored(ks_file):
    path, train, _ = ks_file
    ds = TrajectoryDataset(path, 64, split="test")
    assert ds.omega == pytest.approx(unresolved_energy_ratio(train, 64), rel=1e-6)


def test_per_trajectory_omega(ks_file):
    path, train, _ = ks_file
    ds = TrajectoryDataset(path, 32, omega_per_trajectory=True)
    assert float(ds[3][1]) == pytest.approx(unresolved_energy_ratio(train[3], 32), rel=1e-5)


def test_burgers_paper_frames_and_split(burgers_file):
    path, u = burgers_file
    train, test = TrajectoryDataset(path, 32), TrajectoryDataset(path, 32, split="test")
    assert len(train) == 18 and len(test) == 2 and train.source_grid == "cell"
    assert np.allclose(train.t, np.arange(21) * 0.07) and train[0][0].shape == (21, 32, 1)
    assert np.allclose(test[0][0][..., 0].numpy(), to_resolution(u[18, ::7][:21], 32, source_grid="cell"), atol=1e-6)
    assert TrajectoryDataset(path, 32, stride=1, n_frames=None).t.shape == (201,)
    assert len(TrajectoryDataset(path, 32, limit=5)) == 5


def test_resolution_above_the_data_is_refused(burgers_file):
    with pytest.raises(ValueError, match=r"resolution must be in 1..64 \(the data's resolution\), got 128"):
        TrajectoryDataset(burgers_file[0], 128)


def test_pickles_without_handle_and_works_in_workers(ks_file):
    path, train, _ = ks_file
    ds = TrajectoryDataset(path, 32)
    ds[0]  # opens the file in this process
    assert pickle.loads(pickle.dumps(ds))._file is None
    batches = list(DataLoader(ds, batch_size=3, num_workers=2))
    stacked = torch.cat([b[0] for b in batches])
    assert stacked.shape == (6, 26, 32, 1)
    assert np.allclose(stacked[..., 0].numpy(), to_resolution(train, 32), atol=1e-6)


# -- 2D fields (PDEBench 2D layout, the ns2d data) ------------------------------------------------------
@pytest.fixture
def ns_file(tmp_path):
    """7 trajectories (the last 2 the test split) of 5 frames on a 16 x 16 node grid, no stored omega_f."""
    u = np.random.default_rng(2).standard_normal((7, 5, 16, 16))
    x = np.arange(16) / 16
    path = tmp_path / "ns.h5"
    write_pdebench(path, u, x, np.arange(5.0), y=x, attrs={"n_test": 2})
    return path, u.astype(np.float32)


def test_2d_items_are_point_samples_per_axis(ns_file):
    """On the node grid with f dividing the data's 16 points, the per-axis resample is u[..., ::2, ::2]."""
    path, u = ns_file
    train, test = TrajectoryDataset(path, 8), TrajectoryDataset(path, 8, split="test")
    assert (train.spatial_dims, train.pde, len(train), len(test)) == (2, "ns2d", 5, 2)
    item, omega = test[1]
    assert item.shape == (5, 8, 8, 1) and item.dtype == torch.float32
    assert np.allclose(item[..., 0].numpy(), u[6][:, ::2, ::2], atol=1e-6)
    assert float(omega) == pytest.approx(unresolved_energy_ratio(u[:5], 8, spatial_dims=2), rel=1e-5)
    assert TrajectoryDataset(path, 16)[0][0].shape == (5, 16, 16, 1)


def test_2d_omega_stored_and_per_trajectory(tmp_path, ns_file):
    path, u = ns_file
    per_trajectory = TrajectoryDataset(path, 4, omega_per_trajectory=True)
    assert float(per_trajectory[3][1]) == pytest.approx(unresolved_energy_ratio(u[3], 4, spatial_dims=2), rel=1e-5)
    stored = tmp_path / "stored.h5"
    write_pdebench(stored, u, np.arange(16) / 16, np.arange(5.0), y=np.arange(16) / 16,
                   attrs={"pde": "ns2d", "omega_f_8": 0.25})
    assert TrajectoryDataset(stored, 8).omega == 0.25


def test_2d_refusals(tmp_path, ns_file):
    path, u = ns_file
    with pytest.raises(ValueError, match=r"resolution must be in 1..16 \(the data's resolution per axis\), got 32"):
        TrajectoryDataset(path, 32)
    zero = u.copy()
    zero[1, 3] = 0.0
    write_pdebench(tmp_path / "zero.h5", zero, np.arange(16) / 16, np.arange(5.0), y=np.arange(16) / 16)
    with pytest.raises(DataFileError, match=r"train trajectory 1 \(tensor\[1\]\) is identically zero at frame 3"):
        TrajectoryDataset(tmp_path / "zero.h5", 8, nonzero_rollout_frames=True)[1]
    nan = u.copy()
    nan[0, 2, 3, 4] = np.nan
    with h5py.File(tmp_path / "nan.h5", "w") as f:  # the writers refuse NaN: a file written by another tool
        f["tensor"], f["x-coordinate"], f["y-coordinate"] = nan, np.arange(16) / 16, np.arange(16) / 16
        f["t-coordinate"] = np.arange(6.0)
    with pytest.raises(DataFileError, match=r"nan.h5: tensor holds NaN or Inf values \(first at index \[0, 2, 3, 4\]\)"):
        TrajectoryDataset(tmp_path / "nan.h5", 8)  # omega_f of the training split reads it first
