"""Data-set generation: layouts, omega_f from the training split, seeds, skip/overwrite, CLI."""
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

from amg_fast.data import generate
from amg_fast.data.datasets import TrajectoryDataset
from amg_fast.data.h5 import read_trajectories
from amg_fast.data.spectral import unresolved_energy_ratio

ROOT = Path(__file__).parents[2]


@pytest.fixture(scope="module")
def ks_file(tmp_path_factory):
    out = tmp_path_factory.mktemp("ks")
    path, summary = generate.generate_dataset("ks", nu=0.1, n_train=3, n_test=2, seed=5, out_dir=out)
    return path, summary


def test_ks_file_layout_and_omega_from_training_split(ks_file):
    path, summary = ks_file
    assert path.name == "ks_nu0.1_train3_test2_seed5.h5" and not summary["skipped"]
    train, test = read_trajectories(path, split="train"), read_trajectories(path, split="test")
    assert train.u.shape == (3, 26, 512) and test.u.shape == (2, 26, 512) and train.layout == "lpsda"
    assert np.allclose(train.t, np.linspace(0, 2.5, 26)) and np.allclose(train.x, np.arange(512) * 64 / 512)
    assert train.attrs["nu"] == 0.1 and train.attrs["L"] == 64.0 and train.attrs["seed"] != test.attrs["seed"]
    for f in (32, 64, 128):
        assert train.attrs[f"omega_f_{f}"] == pytest.approx(unresolved_energy_ratio(train.u, f), rel=1e-4)
        assert summary[f"omega_f_{f}"] == train.attrs[f"omega_f_{f}"]
    assert train.attrs["omega_f_32"] > train.attrs["omega_f_64"] > train.attrs["omega_f_128"] > 0


def test_same_arguments_skip_and_other_arguments_refuse(ks_file, tmp_path):
    path, summary = ks_file
    again_path, again = generate.generate_dataset("ks", nu=0.1, n_train=3, n_test=2, seed=5, out_dir=path.parent)
    assert again_path == path and again["skipped"] and again["omega_f_32"] == summary["omega_f_32"]
    with h5py.File(path, "r+") as f:  # the same name with other recorded arguments
        f.attrs["generator_args"] = f.attrs["generator_args"].replace('"seed": 5', '"seed": 6')
    with pytest.raises(FileExistsError, match="exists with other generator arguments"):
        generate.generate_dataset("ks", nu=0.1, n_train=3, n_test=2, seed=5, out_dir=path.parent)


def test_same_seed_same_data_and_splits_differ(ks_file, tmp_path):
    path, _ = ks_file
    copy, _ = generate.generate_dataset("ks", nu=0.1, n_train=3, n_test=2, seed=5, out_dir=tmp_path)
    assert np.array_equal(read_trajectories(copy).u, read_trajectories(path).u)
    other, _ = generate.generate_dataset("ks", nu=0.1, n_train=3, n_test=2, seed=6, out_dir=tmp_path)
    assert not np.allclose(read_trajectories(other).u, read_trajectories(path).u)
    seeds = generate.split_seeds(5)
    assert seeds["train"] != seeds["test"] and seeds == generate.split_seeds(5)


def test_interrupted_generation_leaves_no_file(tmp_path, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(generate.ks, "generate_ks", interrupted)
    with pytest.raises(KeyboardInterrupt):
        generate.generate_dataset("ks", nu=0.1, n_train=2, n_test=1, out_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_burgers_pdebench_file(tmp_path):
    path, summary = generate.generate_dataset("burgers", nu=0.001, n_train=2, n_test=1, seed=0, out_dir=tmp_path)
    assert path.name == "1D_Burgers_Sols_Nu0.001_train2_test1_seed0.hdf5"
    data = read_trajectories(path)
    assert data.layout == "pdebench" and data.u.shape == (3, 201, 1024) and data.u.dtype == np.float32
    assert data.attrs["Nu"] == 0.001 and data.attrs["nu"] == pytest.approx(0.001 / np.pi) and data.attrs["n_test"] == 1
    assert np.allclose(data.t, np.arange(201) * 0.01) and np.allclose(data.x, (np.arange(1024) + 0.5) / 1024)
    paper_frames = data.u[:2, ::7][:, :21]
    assert summary["omega_f_32"] == pytest.approx(unresolved_energy_ratio(paper_frames, 32), rel=1e-4)
    test = TrajectoryDataset(path, 32, split="test")
    assert len(test) == 1 and test[0][0].shape == (21, 32, 1) and test.source_grid == "cell"


@pytest.mark.parametrize("kwargs,match", [
    ({"pde": "heat"}, r"pde must be one of \('ks', 'burgers', 'ns2d'\), got 'heat'"),
    ({"nu": -1.0}, "nu must be a finite number > 0, got -1.0"),
    ({"n_train": 0}, "n_train must be an int >= 1, got 0"),
    ({"pde": "burgers", "method": "radau"}, "method applies to KS only"),
], ids=["pde", "nu", "n_train", "burgers-method"])
def test_bad_arguments(tmp_path, kwargs, match):
    args = {"pde": "ks", "nu": 0.1, "n_train": 2, "n_test": 1, "out_dir": tmp_path, **kwargs}
    with pytest.raises(ValueError, match=match):
        generate.generate_dataset(args.pop("pde"), **args)


def test_cli_summary_and_skip(tmp_path):
    cmd = [sys.executable, str(ROOT / "scripts" / "generate_data.py"), "--pde", "ks", "--nu", "0.125",
           "--n-train", "2", "--n-test", "1", "--out", str(tmp_path)]
    first = subprocess.run(cmd, capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    assert "trajectories/s" in first.stdout and "omega_f (training split, high resolution): f=32:" in first.stdout
    second = subprocess.run(cmd, capture_output=True, text=True)
    assert "already complete with these arguments; skipped" in second.stdout
    bad = subprocess.run(cmd[:-2] + ["--n-train", "0", "--out", str(tmp_path)], capture_output=True, text=True)
    assert bad.returncode == 2 and "error: --n-train must be an int >= 1, got 0" in bad.stderr  # the flag typed


def test_ks_generator_options_name_the_file_and_set_the_frames(tmp_path):
    """Non-default KS options: named in the file, recorded, frames at burn_in + 0..t_end every
    frame_dt, omega_f over all saved frames; the defaults keep the old name and arguments."""
    options = {"ic_terms": 10, "ic_max_wavenumber": 7, "burn_in": 0.5, "t_end": 0.4, "frame_dt": 0.2}
    path, summary = generate.generate_dataset("ks", nu=0.1, n_train=2, n_test=1, seed=3, out_dir=tmp_path,
                                              ks_options=options)
    assert path.name == "ks_nu0.1_terms10_kmax7_burnin0.5_tend0.4_dt0.2_train2_test1_seed3.h5"
    train = read_trajectories(path, split="train")
    assert train.u.shape == (2, 3, 512) and np.allclose(train.t, [0.5, 0.7, 0.9])
    assert train.attrs["omega_f_32"] == pytest.approx(unresolved_energy_ratio(train.u, 32), rel=1e-4)
    again, skipped = generate.generate_dataset("ks", nu=0.1, n_train=2, n_test=1, seed=3, out_dir=tmp_path,
                                               ks_options=options)
    assert again == path and skipped["skipped"]
    default, _ = generate.generate_dataset("ks", nu=0.1, n_train=2, n_test=1, seed=3, out_dir=tmp_path,
                                           ks_options={"t_end": 2.5})
    assert default.name == "ks_nu0.1_train2_test1_seed3.h5"
    assert '"ks_options"' not in h5py.File(default, "r").attrs["generator_args"]


@pytest.mark.parametrize("options, match", [
    ({"burnin": 1.0}, r"unknown KS generator option\(s\) \['burnin'\]"),
    ({"ic_terms": 0}, "ic_terms must be an int >= 1, got 0"),
    ({"burn_in": -1.0}, "burn_in must be a finite number >= 0, got -1.0"),
    ({"t_end": 1.0, "frame_dt": 0.3}, "t_end must be a multiple of frame_dt"),
], ids=["unknown", "terms-0", "burn-in-negative", "t-end-not-multiple"])
def test_bad_ks_generator_options(tmp_path, options, match):
    with pytest.raises(ValueError, match=match):
        generate.generate_dataset("ks", nu=0.1, n_train=2, n_test=1, out_dir=tmp_path, ks_options=options)
    with pytest.raises(ValueError, match="ks_options apply to KS only"):
        generate.generate_dataset("burgers", nu=0.001, n_train=2, n_test=1, out_dir=tmp_path, ks_options={"t_end": 5.0})


# -- 2D Navier-Stokes (ns2d) ------------------------------------------------------------------------------
NS_OPTIONS = {"grid": 16, "t_end": 0.5, "frames": 3}


@pytest.fixture(scope="module")
def ns_file(tmp_path_factory):
    out = tmp_path_factory.mktemp("ns2d")
    return generate.generate_dataset("ns2d", nu=1e-4, n_train=3, n_test=2, seed=4, out_dir=out, ns2d_options=NS_OPTIONS)


def test_ns2d_file_layout_splits_and_omega_from_training_split(ns_file):
    """PDEBench 2D layout on the solver's 16 x 16 node grid, train then test (n_test stored), FNO's
    forcing solution from independent seeds, omega_f (2D) of the training split as attributes."""
    path, summary = ns_file
    assert path.name == "ns2d_nu0.0001_N16_tend0.5_frames3_train3_test2_seed4.h5" and not summary["skipped"]
    data = read_trajectories(path)
    assert data.layout == "pdebench" and data.u.shape == (5, 3, 16, 16) and data.u.dtype == np.float32
    assert np.allclose(data.t, [0.0, 0.25, 0.5]) and np.allclose(data.x, np.arange(16) / 16)
    assert np.allclose(data.y, data.x)
    attrs = data.attrs
    assert (attrs["pde"], attrs["nu"], attrs["n_test"], attrs["solver_grid"]) == ("ns2d", 1e-4, 2, 16)
    assert attrs["solver_dt"] == pytest.approx(2e-3 * 256 / 16) and attrs["seed_train"] != attrs["seed_test"]
    for f in generate.NS2D_OMEGA_RESOLUTIONS:
        expected = unresolved_energy_ratio(data.u[:3].astype(np.float64), f, spatial_dims=2)
        assert attrs[f"omega_f_{f}"] == pytest.approx(expected, rel=1e-4, abs=1e-12) and summary[f"omega_f_{f}"] == attrs[f"omega_f_{f}"]
    assert attrs["omega_f_16"] == 0.0  # the 16 x 16 observation holds every mode of the 16 x 16 solution
    train, test = TrajectoryDataset(path, 8), TrajectoryDataset(path, 8, split="test")
    assert len(train) == 3 and len(test) == 2 and train.pde == "ns2d" and test[1][0].shape == (3, 8, 8, 1)
    assert np.allclose(test[1][0][..., 0].numpy(), data.u[4][:, ::2, ::2], atol=1e-6)


def test_ns2d_same_arguments_skip_and_options_are_checked(ns_file, tmp_path):
    path, summary = ns_file
    again, skipped = generate.generate_dataset("ns2d", nu=1e-4, n_train=3, n_test=2, seed=4, out_dir=path.parent,
                                               ns2d_options=NS_OPTIONS)
    assert again == path and skipped["skipped"] and skipped["omega_f_32"] == summary["omega_f_32"]
    for options, match in (({"grid": 15}, "grid .* must be an even int >= 8, got 15"),
                           ({"frames": 1}, r"frames \(the states saved per ns2d trajectory\) must be an int >= 2, got 1"),
                           ({"t_end": -1.0}, "t_end must be a finite number > 0, got -1.0"),
                           ({"nx": 3}, r"unknown ns2d generator option\(s\) \['nx'\]")):
        with pytest.raises(ValueError, match=match):
            generate.generate_dataset("ns2d", nu=1e-4, n_train=2, n_test=1, out_dir=tmp_path, ns2d_options=options)
    with pytest.raises(ValueError, match="ns2d_options apply to ns2d only"):
        generate.generate_dataset("ks", nu=0.1, n_train=2, n_test=1, out_dir=tmp_path, ns2d_options={"grid": 16})
    with pytest.raises(ValueError, match="method applies to KS only .* ns2d has one solver"):
        generate.generate_dataset("ns2d", nu=1e-4, n_train=2, n_test=1, out_dir=tmp_path, method="radau")
    assert list(tmp_path.iterdir()) == []


def test_ns2d_cli(tmp_path):
    cmd = [sys.executable, str(ROOT / "scripts" / "generate_data.py"), "--pde", "ns2d", "--nu", "1e-4", "--n-train",
           "2", "--n-test", "1", "--ns-grid", "16", "--ns-t-end", "0.2", "--ns-frames", "2", "--out", str(tmp_path)]
    first = subprocess.run(cmd, capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    assert "ns2d_nu0.0001_N16_tend0.2_frames2_train2_test1_seed0.h5: 2 train + 1 test trajectories" in first.stdout
    assert "omega_f (training split, high resolution): f=16: 0, f=32: 0" in first.stdout
    assert "3/3" in first.stderr  # the bar counts frames of trajectories: 3 trajectories x 1 interval
    second = subprocess.run(cmd, capture_output=True, text=True)
    assert "already complete with these arguments; skipped" in second.stdout
