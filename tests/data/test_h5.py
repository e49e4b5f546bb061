"""HDF5 layouts: round trips, a PDEBench file as downloaded, and every bad-file error."""
import h5py
import numpy as np
import pytest
from helpers import write_pdebench_cfd

from amg_fast.data.h5 import (DataFileError, FieldError, cfd_fields, read_trajectories, write_amg_fast, write_lpsda,
                              write_pdebench)


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    return rng.standard_normal((3, 5, 16)).astype(np.float32), (np.arange(16) + 0.5) / 16, np.arange(5) * 0.01


def test_pdebench_round_trip(tmp_path, data):
    u, x, t = data
    write_pdebench(tmp_path / "b.h5", u, x, t, nu_file=0.001, attrs={"omega_f_32": 0.25})
    with h5py.File(tmp_path / "b.h5") as f:
        assert len(f["t-coordinate"]) == 6 and f["tensor"].dtype == np.float32
    tr = read_trajectories(tmp_path / "b.h5")
    assert tr.layout == "pdebench" and np.array_equal(tr.u, u) and np.allclose(tr.x, x) and np.allclose(tr.t, t)
    assert tr.attrs["Nu"] == 0.001 and tr.attrs["omega_f_32"] == 0.25


def test_pdebench_file_as_downloaded(tmp_path, data):
    """Written the way PDEBench does (no attributes, t with one extra entry); Nu from the name."""
    u, x, t = data
    path = tmp_path / "1D_Burgers_Sols_Nu0.001.hdf5"
    with h5py.File(path, "w") as f:
        f["tensor"], f["x-coordinate"], f["t-coordinate"] = u, x.astype(np.float32), np.arange(6) * 0.01
    tr = read_trajectories(path)
    assert tr.u.shape == (3, 5, 16) and np.allclose(tr.t, t) and tr.attrs == {"Nu": 0.001}


def test_lpsda_round_trip_and_splits(tmp_path, data):
    u, _, t = data
    x = np.arange(16) * 4.0
    write_lpsda(tmp_path / "ks.h5", {"train": u, "test": u[:1]}, x, t, nu=0.1, L=64.0,
                seeds={"train": 1, "test": 2}, attrs={"omega_f_32": 0.5})
    with h5py.File(tmp_path / "ks.h5") as f:
        assert set(f["train"]) == {"pde_5-16", "x", "t", "dx", "dt"} and f["train/x"].shape == (3, 16)
    train = read_trajectories(tmp_path / "ks.h5")
    test = read_trajectories(tmp_path / "ks.h5", split="test")
    assert train.layout == "lpsda" and np.array_equal(train.u, u) and np.array_equal(test.u, u[:1])
    assert train.attrs["nu"] == 0.1 and train.attrs["L"] == 64.0 and train.attrs["seed"] == 1
    assert test.attrs["seed"] == 2 and test.attrs["omega_f_32"] == 0.5 and np.allclose(train.x, x)
    with pytest.raises(DataFileError, match=r"ks.h5: no split 'valid'; available: \['test', 'train'\]"):
        read_trajectories(tmp_path / "ks.h5", split="valid")


def test_amg_fast_round_trip(tmp_path, data):
    u, x, t = data
    write_amg_fast(tmp_path / "a.h5", u.astype(np.float64), x, t, attrs={"pde": "ks"})
    tr = read_trajectories(tmp_path / "a.h5")
    assert tr.layout == "amg_fast" and tr.u.dtype == np.float64 and tr.attrs["pde"] == "ks"


def test_interrupted_write_leaves_nothing(tmp_path, data):
    u, x, t = data

    class Boom(Exception):
        pass

    with pytest.raises(Boom):
        from amg_fast.data.h5 import atomic_h5
        with atomic_h5(tmp_path / "x.h5") as f:
            f["u"] = u
            raise Boom
    assert list(tmp_path.iterdir()) == []


def write_raw(path, **datasets):
    with h5py.File(path, "w") as f:
        for key, value in datasets.items():
            f[key.replace("_", "-")] = value


@pytest.mark.parametrize(
    "datasets,match",
    [
        ({"tensor": np.zeros((2, 3, 4)), "x_coordinate": np.arange(4.0)}, r"missing dataset 't-coordinate' \(PDEBench"),
        ({"tensor": np.zeros((3, 4)), "x_coordinate": np.arange(4.0), "t_coordinate": np.arange(3.0)},
         r"dataset 'tensor' must have rank 3 \[N, T, X\], got shape \(3, 4\)"),
        ({"tensor": np.zeros((2, 3, 4)), "x_coordinate": np.arange(5.0), "t_coordinate": np.arange(3.0)},
         "x must be 1-D with 4 entries"),
        ({"tensor": np.zeros((2, 3, 4)), "x_coordinate": np.arange(4.0), "t_coordinate": np.array([0, 1, 1.0])},
         "t must be strictly increasing"),
        ({"tensor": np.full((2, 3, 4), np.nan), "x_coordinate": np.arange(4.0), "t_coordinate": np.arange(3.0)},
         r"tensor holds NaN or Inf values \(first at index \[0, 0, 0\]\)"),
        ({"tensor": np.zeros((2, 3, 4)), "x_coordinate": np.arange(4.0), "t_coordinate": np.array([0, 1, np.inf])},
         "t holds NaN or Inf"),
        ({"data": np.zeros(3)}, r"unrecognised layout: .* found keys \['data'\]"),
    ],
    ids=["missing-t", "rank", "x-length", "t-not-increasing", "nan-values", "inf-t", "unknown-layout"],
)
def test_bad_files(tmp_path, datasets, match):
    path = tmp_path / "bad.h5"
    write_raw(path, **datasets)
    with pytest.raises(DataFileError, match=f"bad.h5: {match}"):
        read_trajectories(path)


def test_missing_and_non_hdf5_files(tmp_path):
    with pytest.raises(DataFileError, match="nope.h5: no such file"):
        read_trajectories(tmp_path / "nope.h5")
    (tmp_path / "text.h5").write_text("not hdf5")
    with pytest.raises(DataFileError, match="text.h5: not a readable HDF5 file"):
        read_trajectories(tmp_path / "text.h5")


# ----------------------------------------------------------------------------- 2D files


@pytest.fixture
def fields2d():
    rng = np.random.default_rng(1)
    return rng.standard_normal((3, 5, 8, 6)).astype(np.float32), (np.arange(8) + 0.5) / 8, (np.arange(6) + 0.5) / 6


def test_pdebench_2d_round_trip(tmp_path, fields2d):
    u, x, y = fields2d
    t = np.arange(5) * 1.0
    write_pdebench(tmp_path / "ns.h5", u, x, t, y=y, attrs={"pde": "ns2d", "omega_f_4": 0.1})
    with h5py.File(tmp_path / "ns.h5") as f:
        assert f["tensor"].shape == (3, 5, 8, 6) and len(f["t-coordinate"]) == 6 and "Nu" not in f.attrs
    tr = read_trajectories(tmp_path / "ns.h5")
    assert tr.layout == "pdebench" and np.array_equal(tr.u, u) and np.allclose(tr.y, y) and np.allclose(tr.t, t)
    assert tr.attrs == {"pde": "ns2d", "omega_f_4": 0.1}
    with pytest.raises(ValueError, match=r"u \[N, T, X, Y\] needs y \[Y\]"):
        write_pdebench(tmp_path / "bad.h5", u, x, t)
    assert not (tmp_path / "bad.h5").exists()


def test_pdebench_2d_cfd_file(tmp_path, fields2d):
    u, x, y = fields2d
    path = tmp_path / "2D_CFD_Rand_M0.1_Eta0.01_Zeta0.01_periodic_8_Train.hdf5"
    write_pdebench_cfd(path, {"density": u, "pressure": u + 1, "Vx": u + 2, "Vy": u + 3}, x, y, 5)
    tr = read_trajectories(path, field="Vx")
    assert tr.u.shape == (3, 5, 8, 6) and np.array_equal(tr.u, u + 2) and tr.layout == "pdebench"
    assert np.allclose(tr.t, np.arange(5) * 0.05) and np.allclose(tr.y, y) and tr.attrs["M"] == pytest.approx(0.1)
    with pytest.raises(DataFileError, match=r"CFD file with the fields density, pressure, Vx, Vy: name one of them "
                                            r"with field$"):
        read_trajectories(path)
    with pytest.raises(DataFileError, match="field 'vorticity' is not one of them"):
        read_trajectories(path, field="vorticity")
    single = tmp_path / "one.h5"
    write_pdebench_cfd(single, {"density": u}, x, y, 5)
    assert np.array_equal(read_trajectories(single).u, u)
    assert (cfd_fields(path), cfd_fields(single)) == (["density", "pressure", "Vx", "Vy"], ["density"])


def test_a_field_asked_of_a_file_with_one_set_is_refused(tmp_path, data):
    """field= applies to PDEBench CFD files; of another file it was ignored (amg_fast, LPSDA layouts)."""
    u, x, t = data
    write_pdebench(tmp_path / "p.h5", u, x, t)
    write_amg_fast(tmp_path / "a.h5", u, x, t)
    write_lpsda(tmp_path / "l.h5", {"train": u}, x, t, nu=0.1, L=1.0, seeds={"train": 0})
    assert np.array_equal(read_trajectories(tmp_path / "p.h5", field="tensor").u, u)
    with pytest.raises(FieldError, match=r"p.h5: holds one field \('tensor'\); field 'Vx' applies to PDEBench CFD"):
        read_trajectories(tmp_path / "p.h5", field="Vx")
    for name, layout in (("a.h5", "amg_fast"), ("l.h5", "lpsda")):
        with pytest.raises(FieldError, match=f"{name}: an {layout} file \\(one field\\); field 'Vx' applies to"):
            read_trajectories(tmp_path / name, field="Vx")
        assert cfd_fields(tmp_path / name) == []


@pytest.mark.parametrize(
    "datasets,match",
    [({"tensor": np.zeros((2, 3, 4, 5)), "x_coordinate": np.arange(4.0), "t_coordinate": np.arange(4.0)},
      r"dataset 'tensor' of shape \(2, 3, 4, 5\) is 2D \[N, T, X, Y\] but the file has no 'y-coordinate'"),
     ({"tensor": np.zeros((2, 3, 4, 5)), "x_coordinate": np.arange(4.0), "y_coordinate": np.arange(6.0),
       "t_coordinate": np.arange(4.0)}, r"y must be 1-D with 5 entries \(Y of 'tensor'\)"),
     ({"tensor": np.zeros((2, 3, 4)), "x_coordinate": np.arange(4.0), "y_coordinate": np.arange(6.0),
       "t_coordinate": np.arange(4.0)}, r"dataset 'tensor' must have rank 4 \[N, T, X, Y\] \(the file has a y grid\)"),
     ({"velocity": np.zeros((1, 2, 4, 4, 2)), "particles": np.zeros((1, 2, 4, 4, 1)), "t": np.zeros((1, 2))},
      "PDEBench's incompressible Navier-Stokes layout .* is not supported")],
    ids=["no-y", "y-length", "3d-with-y", "ns-incom"],
)
def test_bad_2d_files(tmp_path, datasets, match):
    path = tmp_path / "bad.h5"
    write_raw(path, **datasets)
    with pytest.raises(DataFileError, match=f"bad.h5: {match}"):
        read_trajectories(path)


def test_trajectory_dataset_serves_2d_files(tmp_path, fields2d):
    """A non-square, cell-centred PDEBench 2D file: f x f items resampled along each axis (at most the
    smaller axis), the pde ns2d for a file without a pde attribute."""
    from amg_fast.data.datasets import TrajectoryDataset
    from amg_fast.data.resample import to_resolution

    u, x, y = fields2d
    write_pdebench(tmp_path / "ns.h5", u, x, np.arange(5.0), y=y, attrs={"n_test": 1})
    ds = TrajectoryDataset(tmp_path / "ns.h5", 4, split="test")
    assert (ds.pde, ds.spatial_dims, ds.source_grid, len(ds)) == ("ns2d", 2, "cell", 1)
    expected = to_resolution(u[2], 4, source_grid="cell", spatial_dims=2)
    assert ds[0][0].shape == (5, 4, 4, 1) and np.allclose(ds[0][0][..., 0].numpy(), expected, atol=1e-6)
    with pytest.raises(ValueError, match=r"resolution must be in 1..6 \(the data's resolution per axis\), got 8"):
        TrajectoryDataset(tmp_path / "ns.h5", 8)
