"""Issue 23 items 6, 7, 9 and 10, the training and evaluation CLIs: bad data files, flags and
destinations are refused with an `error:` line that names the file, the argument or the frame,
before the run directory exists (train.py) or before the rollout (evaluate.py); --json writes
through a symlink atomically. Each case is a row of docs/reliability.md. The CLIs run in-process
(main(argv)): a traceback would be an exception escaping main."""
import json
import os
import stat

import h5py
import numpy as np
import pytest
from helpers import translating_waves

import amg_fast._files as files
from amg_fast.cli import evaluate as evaluate_cli
from amg_fast.cli import train as train_cli
from amg_fast.data.h5 import write_lpsda, write_pdebench

TINY = ["--epochs", "1", "--n-train", "4", "--n-test", "2", "--width", "8", "--batch-size", "4", "--device", "cpu",
        "--eval-every", "100"]
OMEGA_RULE = "the unresolved-energy ratio omega_f of the training split) must be a finite number in [0, 1], got"


def raw_file(path, u, **attrs):
    """An amg_fast-layout file written without the writers' checks (12 train + 4 test trajectories)."""
    with h5py.File(path, "w") as f:
        f["u"], f["x"], f["t"] = u, np.arange(u.shape[2]) / u.shape[2], np.arange(u.shape[1]) * 0.1
        f.attrs.update({"format": "amg_fast", "pde": "ks", "n_test": 4, **attrs})
    return path


def bad_data(tmp_path, kind):
    u = translating_waves(16)
    if kind == "zero-test-frame":
        u[13, 3] = 0.0  # test trajectory 1 (rows 12..15 are the test split), frame 3
    u = {"bool": u > 0, "complex": u + 0j}.get(kind, u)
    attrs = {"omega-string": {"omega_f_32": "abc"}, "omega-nan": {"omega_f_32": np.nan},
             "omega-negative": {"omega_f_32": -0.5}}.get(kind, {})
    return raw_file(tmp_path / f"{kind}.h5", u, **attrs)


def refused(capsys, code, message):
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err, err


BAD_DATA = {
    "bool": "bool.h5: dataset 'u' has dtype bool; allowed: real numbers (a float or integer dtype)",
    "complex": "complex.h5: dataset 'u' has dtype complex128; allowed: real numbers (a float or integer dtype)",
    "omega-string": f"omega-string.h5: attribute omega_f_32 ({OMEGA_RULE} 'abc'",
    "omega-nan": f"omega-nan.h5: attribute omega_f_32 ({OMEGA_RULE} nan",
    "omega-negative": f"omega-negative.h5: attribute omega_f_32 ({OMEGA_RULE} -0.5",
    "zero-test-frame": "zero-test-frame.h5: test trajectory 1 (u[13]) is identically zero at frame 3 (file frame 3, "
                       "t = 0.3) at resolution 32: the rollout nRMSE divides by each frame's norm",
}


@pytest.mark.parametrize("kind", list(BAD_DATA))
def test_train_refuses_bad_data_naming_the_file_before_the_run_directory(tmp_path, capsys, kind):
    """Formerly: a traceback (bool, complex, a string omega_f), a NaN gate (NaN or negative omega_f),
    or `true[0, 5] is identically zero` after epoch 1 (a zero test frame)."""
    data = bad_data(tmp_path, kind)
    refused(capsys, train_cli.main(["--data", str(data), "--out", str(tmp_path / "run"), *TINY]),
            f"{tmp_path / BAD_DATA[kind]}")
    assert not (tmp_path / "run").exists()


BAD_FLAGS = {
    "res-1": (["--res", "1"], "--res 1: too coarse for --model amgfno, whose default --modes res//2 = 0 keeps no "
                              "Fourier mode; allowed: --res >= 2"),
    "seed-negative": (["--seed", "-1"], "--seed must be in [0, 2^32) = 0..4294967295, got -1"),
    "seed-2^32": (["--seed", str(2**32)], "--seed must be in [0, 2^32) = 0..4294967295, got 4294967296"),
}


@pytest.mark.parametrize("case", list(BAD_FLAGS))
def test_train_flags_are_named(tiny_data, tmp_path, capsys, case):
    """--res 1 formerly said `modes must be an integer >= 1, got 0` with no --modes given."""
    args, message = BAD_FLAGS[case]
    refused(capsys, train_cli.main(["--data", str(tiny_data), "--out", str(tmp_path / "run"), *TINY, *args]), message)
    assert not (tmp_path / "run").exists()


def viscous_file(tmp_path, kind: str, value: float):
    """A 1D file recording its viscosity as `kind` says: "ks" an LPSDA KS file of nu = value (4 train + 2 test);
    Burgers in PDEBench's layout (18 + 2 trajectories, 15 frames: 3 at the paper's stride 7) with "Nu" the
    attribute Nu = value and our generator's nu = value / pi beside it, "Nu-name" no attribute but the Nu in the
    file's name (a downloaded PDEBench file), "nu" only our nu = value / pi."""
    x = np.arange(64) / 64
    if kind == "ks":
        path = tmp_path / "ks.h5"
        write_lpsda(path, {"train": translating_waves(4), "test": translating_waves(2)}, x, np.arange(6) * 0.1,
                    nu=value, L=64.0, seeds={"train": 0, "test": 1}, attrs={"pde": "ks"})
        return path
    path = tmp_path / ("1D_Burgers_Sols_Nu%g.hdf5" % value if kind == "Nu-name" else f"burgers-{kind}.h5")
    attrs = {"nu": value / np.pi} if kind in ("Nu", "nu") else {}
    write_pdebench(path, translating_waves(20, T=15), x, np.arange(15) * 0.01,
                   nu_file=value if kind == "Nu" else None, attrs=attrs)
    return path


NU_REFUSED = {  # (file, value it records, --nu given or None, the message after "error: ")
    "ks": ("ks", 0.1, "0.075", "--nu 0.075: {data} holds ks data of nu = 0.1 (its nu attribute); pass --nu 0.1"),
    "ks-default": ("ks", 0.125, None, "--nu 0.1 (ks's default): {data} holds ks data of nu = 0.125 (its nu attribute); "
                                      "pass --nu 0.125"),
    "burgers-Nu": ("Nu", 0.01, "0.001", "--nu 0.001: {data} holds burgers data of Nu = 0.01 (its Nu attribute or file "
                                        "name; the PDE's nu is Nu/pi); pass --nu 0.01"),
    "burgers-Nu-name-default": ("Nu-name", 0.1, None, "--nu 0.001 (burgers's default): {data} holds burgers data of "
                                                      "Nu = 0.1 (its Nu attribute or file name; the PDE's nu is Nu/pi); "
                                                      "pass --nu 0.1"),
    "burgers-nu": ("nu", 0.01, "0.001", "--nu 0.001: {data} holds burgers data of Nu = 0.01 (its nu attribute, "
                                        "0.0031831, is the PDE's nu = Nu/pi); pass --nu 0.01"),
    "burgers-Nu-nan": ("Nu", float("nan"), "0.001", "{data}: attribute Nu (the viscosity of its burgers data) must be a "
                                                    "finite number > 0, got nan"),
}


@pytest.mark.parametrize("case", list(NU_REFUSED))
def test_train_refuses_a_1d_file_of_another_viscosity(tmp_path, capsys, case):
    """Formerly only ns2d files were checked: a KS or Burgers file of another nu trained and its results
    (and run name) said --nu's value. Refused before the run directory exists, naming both values."""
    kind, value, nu, message = NU_REFUSED[case]
    data = viscous_file(tmp_path, kind, value)
    pde = ["--pde", "ks" if kind == "ks" else "burgers"] + (["--nu", nu] if nu else [])
    refused(capsys, train_cli.main(["--data", str(data), "--out", str(tmp_path / "run"), *TINY, *pde]),
            message.format(data=data))
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("kind, value, nu", [("ks", 0.075, "0.07500005"), ("Nu-name", 0.001, None), ("nu", 0.001, None)],
                         ids=["ks-within-1e-6", "burgers-Nu-name-default", "burgers-nu-default"])
def test_train_takes_a_1d_file_of_the_same_viscosity(tmp_path, kind, value, nu):
    """The check leaves the agreeing cases alone: --nu within a relative 1e-6 of the file's, Burgers' Nu
    against --nu directly and our nu = Nu/pi times pi (a file that records none trains as before: tiny_data)."""
    data, out = viscous_file(tmp_path, kind, value), tmp_path / "run"
    pde = ["--pde", "ks" if kind == "ks" else "burgers"] + (["--nu", nu] if nu else [])
    assert train_cli.main(["--data", str(data), "--out", str(out), *TINY, *pde]) == 0
    assert json.loads((out / "results.json").read_text())["nu"] == float(nu or value)


def test_train_refuses_a_generated_data_set_too_large_for_the_machine(tmp_path, capsys):
    """train.py generates through the same generator: its size checks run before any work."""
    code = train_cli.main(["--cache-dir", str(tmp_path / "cache"), "--out", str(tmp_path / "run"), *TINY,
                           "--n-train", "1000000000000"])
    refused(capsys, code, "the ks data set nu=0.1, --n-train=1000000000000, --n-test=2 (1000000000002 trajectories x "
                          "26 frames x 512 points) needs about")  # the flags typed, not the generator's n_train
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_evaluate_refuses_a_zero_frame_naming_the_file(finished_run, tmp_path, capsys):
    run, _ = finished_run
    data = bad_data(tmp_path, "zero-test-frame")
    refused(capsys, evaluate_cli.main([str(run), "--data", str(data)]), f"{tmp_path / BAD_DATA['zero-test-frame']}")


@pytest.fixture
def no_rollout(monkeypatch):
    """evaluate.py's rollout raises if reached: a refusal must come before it."""
    def rollout(*args, **kwargs):
        raise AssertionError("the rollout ran before --json was checked")

    monkeypatch.setattr(evaluate_cli, "evaluate", rollout)


def test_evaluate_json_into_a_missing_folder_is_refused_before_the_rollout(finished_run, tmp_path, capsys, no_rollout):
    run, data = finished_run
    code = evaluate_cli.main([str(run), "--data", str(data), "--json", str(tmp_path / "missing" / "e.json")])
    refused(capsys, code, f"--json {tmp_path}/missing/e.json: its folder {tmp_path}/missing does not exist; create it "
                          "first")
    assert list(tmp_path.iterdir()) == []


def test_evaluate_json_to_a_device_file_or_a_symlink_loop_is_refused(finished_run, tmp_path, capsys, no_rollout):
    run, data = finished_run
    refused(capsys, evaluate_cli.main([str(run), "--data", str(data), "--json", os.devnull]),
            f"--json {os.devnull}: is not a regular file (a device, pipe or socket); allowed: a regular file or a new "
            "name")
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    refused(capsys, evaluate_cli.main([str(run), "--data", str(data), "--json", str(tmp_path / "a")]),
            f"--json {tmp_path / 'a'}: cannot be followed to a file (Too many levels of symbolic links)")
    assert all(p.is_symlink() for p in tmp_path.iterdir())


def test_evaluate_json_into_an_unwritable_folder_is_refused(finished_run, tmp_path, capsys, monkeypatch, no_rollout):
    """os.access is what decides (as root every folder is writable, so the test says it is not)."""
    run, data = finished_run
    real_access = os.access
    monkeypatch.setattr(files.os, "access", lambda p, mode: False if str(p) == str(tmp_path) else real_access(p, mode))
    refused(capsys, evaluate_cli.main([str(run), "--data", str(data), "--json", str(tmp_path / "e.json")]),
            f"--json {tmp_path / 'e.json'}: {tmp_path} is not writable by this user; choose a writable directory")


@pytest.mark.parametrize("target_exists", [True, False], ids=["link-to-a-file", "link-to-a-new-file"])
def test_evaluate_json_writes_through_a_symlink_and_keeps_it(finished_run, tmp_path, capsys, target_exists):
    """Formerly the link was replaced by a regular file. The target is written whole (through a temp
    file beside it, renamed), the link stays a link, no temp file is left."""
    run, data = finished_run
    (tmp_path / "results").mkdir()
    target = tmp_path / "results" / "e.json"
    if target_exists:
        target.write_text("old")
    link = tmp_path / "e.json"
    link.symlink_to(target)
    assert evaluate_cli.main([str(run), "--data", str(data), "--json", str(link)]) == 0
    assert link.is_symlink() and os.readlink(link) == str(target)
    written = json.loads(target.read_text())
    assert written["n"] == 4 and written["res"] == 32 and np.isfinite(written["nrmse"])
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["e.json", "e.json", "results"]
