"""Training and evaluating the 2D models on 2D Navier-Stokes data (--pde ns2d) through the CLIs, at a
16 x 16 solver grid; the presets of ns2d; the loss and nRMSE on [B, T, X, Y, C]; the refusals of a
model and a data set of different dimensions, before any work."""
import json
import os
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
from helpers import write_pdebench_cfd

from amg_fast.cli import evaluate as evaluate_cli
from amg_fast.cli import train as train_cli
from amg_fast.data.generate import dataset_path
from amg_fast.data.h5 import write_pdebench
from amg_fast.metrics import nrmse
from amg_fast.train.config import TrainConfig, resolve_config
from amg_fast.train.evaluate import one_step_loss

ROOT = Path(__file__).parents[2]
NS_FLAGS = ["--pde", "ns2d", "--nu", "1e-4", "--ns-grid", "16", "--ns-t-end", "0.6", "--ns-frames", "4",
            "--n-train", "4", "--n-test", "2", "--batch-size", "2", "--width", "8", "--device", "cpu"]


def run_script(script, *args):
    return subprocess.run([sys.executable, str(ROOT / "scripts" / script), *map(str, args)], capture_output=True,
                          text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})


@pytest.fixture(scope="module")
def ns_run(tmp_path_factory):
    """A 2-epoch amgfno2d run at f = 8 on generated 16 x 16 data: (run directory, data file, stdout)."""
    tmp = tmp_path_factory.mktemp("ns2d")
    proc = run_script("train.py", "--model", "amgfno2d", "--res", "8", *NS_FLAGS, "--epochs", "2", "--eval-every", "1",
                      "--cache-dir", tmp / "cache", "--out", tmp / "run")
    assert proc.returncode == 0, proc.stderr
    data = dataset_path(tmp / "cache", "ns2d", 1e-4, 4, 2, 0, ns2d_options={"grid": 16, "t_end": 0.6, "frames": 4})
    return tmp / "run", data, proc.stdout


def test_train_cli_trains_and_evaluates_a_2d_model(ns_run):
    run, data, stdout = ns_run
    assert data.is_file() and "| amgfno2d | ns2d | 0.0001 | 8 |" in stdout
    # the minutes a 2D data set takes on a CPU are announced, naming the file, and the step count is the rollout's
    assert f"data: generating {data} (4 + 2 trajectories on cpu)" in stdout
    assert "amplitude" in stdout and "at step 3 and" in stdout
    results = json.loads((run / "results.json").read_text())
    assert (results["model"], results["pde"], results["res"], results["epochs"]) == ("amgfno2d", "ns2d", 8, 2)
    assert len(results["nrmse_per_step"]) == 3 and 0 < results["nrmse"] < 10
    assert 0 <= results["gate_mean"] < 1 and results["gate_mean_last20_epochs"] is not None
    assert results["one_step_nrmse"] > 0 and len(results["amplitude_per_step"]) == 3
    rollout = np.load(run / "rollout.npz")
    assert rollout["pred"].shape == rollout["true"].shape == (2, 3, 8, 8)
    config = json.loads((run / "config.json").read_text())
    assert (config["ns_grid"], config["ns_t_end"], config["ns_frames"], config["data_seed"]) == (16, 0.6, 4, None)
    # the rollout error as amg_fast.metrics computes it from the stored rollout
    assert results["nrmse"] == pytest.approx(float(nrmse(torch.from_numpy(rollout["pred"]),
                                                         torch.from_numpy(rollout["true"]))), rel=1e-5)


def test_evaluate_cli_on_a_2d_run_directory(ns_run, tmp_path):
    run, data, _ = ns_run
    out = tmp_path / "eval.json"
    assert evaluate_cli.main([str(run), "--data", str(data), "--json", str(out)]) == 0
    evaluated, trained = json.loads(out.read_text()), json.loads((run / "results.json").read_text())
    assert evaluated["n"] == 2 and evaluated["res"] == 8
    assert evaluated["nrmse"] == pytest.approx(trained["nrmse"], rel=1e-5)
    assert evaluated["gate_mean"] == pytest.approx(trained["gate_mean"], rel=1e-4)


def test_a_2d_checkpoint_on_1d_data_is_refused(ns_run, tiny_data, capsys):
    run, _, _ = ns_run
    assert evaluate_cli.main([str(run), "--data", str(tiny_data)]) == 2
    err = capsys.readouterr().err
    assert "holds 1D ks trajectories; the checkpoint's model amgfno2d is 2D, trained on --pde ns2d" in err


@pytest.mark.parametrize("args, message", [
    (["--model", "amgfno", "--pde", "ns2d"],
     "--model amgfno is a 1D model ([B, T, S, C]) and --pde ns2d is 2D data: train --pde ns2d with a 2D model "
     "(amgfno2d, ffno2d, s4ffno2d), or --model amgfno on --pde ks / burgers"),
    (["--model", "ffno2d", "--pde", "ks"],
     "--model ffno2d is a 2D model ([B, T, X, Y, C]) and --pde ks is 1D data: train --pde ks with a 1D model"),
    (["--model", "ffno", "--pde", "burgers", "--ns-grid", "64"],
     "--ns-grid: settings of the generated 2D Navier-Stokes data, for --pde ns2d only; got --pde burgers"),
    (["--model", "ffno2d", "--pde", "ns2d", "--alpha", "0.5"], "--alpha applies to --model s4ffno / s4ffno2d only"),
    (["--model", "s4ffno2d", "--pde", "ns2d", "--no-freq-gate"],
     "--no-freq-gate and --omega-mode apply to --model amgfno / amgfno2d only"),
    (["--model", "amgfno2d", "--pde", "ns2d", "--ns-frames", "1"], "--ns-frames must be an integer >= 2"),
    (["--model", "ffno2d", "--pde", "ns2d", "--field", "Vx"], "--field 'Vx': picks a field of a PDEBench CFD --data "
                                                              "file; the generated data sets hold one field"),
], ids=["1d-model-ns2d", "2d-model-ks", "ns-grid-burgers", "alpha-ffno2d", "freq-gate-s4ffno2d", "one-frame",
        "field-without-data"])
def test_mismatches_are_refused_before_any_work(tmp_path, capsys, args, message):
    out, cache = tmp_path / "run", tmp_path / "cache"
    assert train_cli.main([*args, "--out", str(out), "--cache-dir", str(cache), "--device", "cpu"]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists() and not cache.exists()


def test_ns2d_presets():
    quick = resolve_config(TrainConfig(model="amgfno2d", pde="ns2d"))
    assert (quick.nu, quick.n_train, quick.n_test, quick.epochs, quick.batch_size, quick.width) == (1e-3, 16, 4, 20, 8, 24)
    assert (quick.ns_grid, quick.ns_frames, quick.ns_t_end, quick.modes) == (64, 11, None, 16)
    paper = resolve_config(TrainConfig(model="ffno2d", pde="ns2d", preset="paper", nu=1e-4, res=64))
    assert (paper.n_train, paper.n_test, paper.batch_size, paper.width, paper.ns_grid, paper.ns_frames) == \
        (1000, 200, 16, 64, 256, None)
    ks = resolve_config(TrainConfig(model="amgfno"))
    assert (ks.n_train, ks.width, ks.ns_grid, ks.ns_frames) == (256, 64, None, None)  # 1D presets unchanged


def test_the_training_loss_on_2d_fields_matches_an_explicit_sum(gen):
    """Squared error summed over the grid and channels, mean over trajectories and steps."""
    pred, true = torch.randn(2, 3, 5, 4, 1, generator=gen), torch.randn(2, 3, 5, 4, 1, generator=gen)
    loss = sum(float((pred[b, t] - true[b, t]).square().sum()) for b in range(2) for t in range(3)) / 6
    assert float(one_step_loss(pred, true)) == pytest.approx(loss, rel=1e-6)


@pytest.fixture
def ns_file(tmp_path, gen):
    """A small ns2d file of our generator's layout (PDEBench 2D): 4 train + 2 test trajectories of 4
    frames on 8 x 8 points, nu = 1e-4."""
    path, x = tmp_path / "ns.h5", np.arange(8) / 8
    write_pdebench(path, torch.randn(6, 4, 8, 8, generator=gen).numpy(), x, np.arange(4) * 0.2, y=x,
                   attrs={"pde": "ns2d", "nu": 1e-4, "n_test": 2})
    return path


@pytest.mark.parametrize("args, message", [
    (["--ns-grid", "32"], "--ns-grid 32: a setting of the generated 2D Navier-Stokes data set; --data {data} is used "
                          "as it is (drop --ns-grid, or drop --data to generate the data set)"),
    (["--ns-t-end", "1", "--ns-frames", "3"], "--ns-t-end 1.0, --ns-frames 3: settings of the generated 2D "
                                              "Navier-Stokes data set; --data {data} is used as it is"),
    (["--data-seed", "3"], "--data-seed 3: the seed of the generated data set; --data {data} is used as it is "
                           "(drop --data-seed, or drop --data to generate the data set)"),
    (["--nu", "1e-3"], "--nu 0.001: {data} holds ns2d data of nu = 0.0001 (its nu attribute); pass --nu 0.0001"),
    ([], "--nu 0.001 (ns2d's default): {data} holds ns2d data of nu = 0.0001 (its nu attribute); pass --nu 0.0001"),
], ids=["ns-grid", "ns-t-end-frames", "data-seed", "nu", "nu-default"])
def test_data_file_settings_that_would_be_ignored_are_refused(ns_file, tmp_path, capsys, args, message):
    """Issue 22 review: with --data, the generator's settings (--ns-*, --data-seed) were ignored without a
    word, and a --nu other than the file's was recorded as the run's (results, run name); each is
    refused before any work."""
    out = tmp_path / "run"
    assert train_cli.main(["--model", "ffno2d", "--pde", "ns2d", "--data", str(ns_file), "--res", "8", "--epochs", "1",
                           "--width", "8", "--device", "cpu", "--out", str(out), *args]) == 2
    err = capsys.readouterr().err
    assert message.format(data=ns_file) in err and "Traceback" not in err, err
    assert not out.exists()


def test_a_data_file_of_the_same_nu_trains_and_its_config_holds_no_generator_settings(ns_file, tmp_path):
    """The refusals above leave the plain case alone; the ns2d preset's generator settings (ns_grid 64,
    ns_frames 11) do not describe a --data file, so its config.json records none."""
    out = tmp_path / "run"
    assert train_cli.main(["--model", "ffno2d", "--pde", "ns2d", "--data", str(ns_file), "--nu", "1e-4", "--res", "8",
                           "--epochs", "1", "--width", "8", "--device", "cpu", "--out", str(out)]) == 0
    config = json.loads((out / "config.json").read_text())
    assert (config["nu"], config["ns_grid"], config["ns_frames"], config["ns_t_end"]) == (1e-4, None, None, None)


@pytest.fixture
def cfd_file(tmp_path, gen):
    """A PDEBench 2D CFD file (PDEBench's layout, no attributes of ours) with four fields: 9 train + 1 test
    trajectories of 4 frames on 8 x 8 points."""
    path, x = tmp_path / "2D_CFD_Rand_M0.1_periodic_8_Train.hdf5", (np.arange(8) + 0.5) / 8
    fields = {name: torch.randn(10, 4, 8, 8, generator=gen).numpy() + i for i, name in
              enumerate(("density", "pressure", "Vx", "Vy"))}
    write_pdebench_cfd(path, fields, x, x, 4)
    return path


def test_a_cfd_file_of_several_fields_trains_and_evaluates_the_field_named(cfd_file, tmp_path, capsys):
    """Formerly refused with `pass field= one of them`, an argument of read_trajectories that neither CLI
    had: --field picks it, config.json records it, evaluate.py takes the run's field by default."""
    out, flags = tmp_path / "run", ["--model", "ffno2d", "--pde", "ns2d", "--data", str(cfd_file), "--res", "8",
                                    "--epochs", "1", "--width", "8", "--device", "cpu", "--batch-size", "3"]
    for extra, message in (([], "name one of them with --field"), (["--field", "vorticity"],
                                                                   "--field 'vorticity' is not one of them")):
        assert train_cli.main([*flags, "--out", str(out), *extra]) == 2
        err = capsys.readouterr().err
        assert err == f"error: {cfd_file}: a PDEBench CFD file with the fields density, pressure, Vx, Vy: {message}\n"
        assert not out.exists()
    assert train_cli.main([*flags, "--out", str(out), "--field", "Vx"]) == 0
    assert json.loads((out / "config.json").read_text())["field"] == "Vx"
    trained = json.loads((out / "results.json").read_text())["nrmse"]
    evaluated = {}
    for field in (None, "density"):
        path = tmp_path / f"eval-{field}.json"
        assert evaluate_cli.main([str(out), "--data", str(cfd_file), "--json", str(path),
                                  *(["--field", field] if field else [])]) == 0
        evaluated[field] = json.loads(path.read_text())
    assert evaluated[None]["field"] == "Vx" and evaluated[None]["nrmse"] == pytest.approx(trained, rel=1e-5)
    assert evaluated["density"]["field"] == "density" and evaluated["density"]["nrmse"] != pytest.approx(trained)
    capsys.readouterr()
    assert evaluate_cli.main([str(out), "--data", str(cfd_file), "--field", "nope"]) == 2
    assert "--field 'nope' is not one of them" in capsys.readouterr().err


def test_the_2d_commands_of_docs_training_parse():
    """Issue 22 review: the section's evaluate.py example had no --data (a required flag), so it failed
    as written. Each command of the section's code block must parse with its script's parser."""
    text = (ROOT / "docs" / "training.md").read_text().split("## 2D Navier-Stokes (`--pde ns2d`)", 1)[1]
    block = text.split("```bash\n", 1)[1].split("```", 1)[0]
    parsers = {"train.py": train_cli.parse_args, "evaluate.py": evaluate_cli.parse_args}
    commands = [line.split("#")[0].split() for line in block.replace("\\\n", " ").splitlines() if line.strip()]
    assert {Path(c[1]).name for c in commands} == set(parsers)
    for command in commands:
        parsers[Path(command[1]).name](command[2:])  # argparse exits (SystemExit 2) on a missing or bad flag


def test_a_pde_attribute_amg_fast_does_not_know_is_named(ns_file, tmp_path, capsys):
    """Issue 22 review: a file whose pde attribute is 'ns3d' got the advice `pass --pde ns3d`, a value
    --pde refuses; the message now lists the PDEs there are."""
    with h5py.File(ns_file, "a") as f:
        f.attrs["pde"] = "ns3d"
    out = tmp_path / "run"
    assert train_cli.main(["--model", "ffno2d", "--pde", "ns2d", "--data", str(ns_file), "--nu", "1e-4", "--res", "8",
                           "--device", "cpu", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"error: {ns_file}: its pde attribute is 'ns3d', a PDE amg_fast does not train; allowed: ks, burgers, " \
           "ns2d (pass a file of one of them)" in err, err
    assert not out.exists()


def test_a_resolution_finer_than_the_file_names_the_file(ns_file, tmp_path, capsys):
    """Issue 22 review: `--res 32` on a file of 8 x 8 points said `resolution must be in 1..8 ...` without
    naming the file (with no --data, the cached generated one the user never named)."""
    out = tmp_path / "run"
    assert train_cli.main(["--model", "ffno2d", "--pde", "ns2d", "--data", str(ns_file), "--nu", "1e-4", "--res", "32",
                           "--device", "cpu", "--out", str(out)]) == 2
    assert f"error: {ns_file}: resolution must be in 1..8 (the data's resolution per axis), got 32" \
        in capsys.readouterr().err
    assert not out.exists()
