"""The engine across runs and machines (issues 20 and 23): runs with overrides, user grids (kill -9
and resume), export + continue elsewhere, the budget, repeated --where, the alpha = 1 dedupe, a
sweep moved or copied, truthful exit status and states, one preset under concurrent starts, and
commands refused before they write anything. Every training run is at the smoke preset."""
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import run_results

from amg_fast.cli import reproduce as cli
from amg_fast.experiments import runner
from amg_fast.experiments.estimate import Estimator
from amg_fast.experiments.registry import EXPERIMENTS
from amg_fast.experiments.specs import RunSpec, check_overrides
from amg_fast.experiments.sweep import Budget, parse_where, select_runs
from amg_fast.train.rundir import RunDir

ROOT = Path(__file__).parents[2]
PAIR = ["--where", "model=ffno,amgfno", "--where", "pde=ks", "nu=0.1", "res=32"]  # repeated --where, 2 runs
FFNO, AMGFNO = "ffno_ks_nu0.1_f32_seed0", "amgfno_ks_nu0.1_f32_seed0"
RAW = "+increment=false+normalize=false"  # a run's name tokens of the raw output parametrisation


def reproduce(*args, **kw):
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "reproduce.py"), *map(str, args)],
                          capture_output=True, text=True, **kw)


def in_process(capsys, *args) -> subprocess.CompletedProcess:
    """reproduce.py's main in this process (no interpreter start: for commands that train nothing)."""
    try:
        code = cli.main([str(a) for a in args])
    except SystemExit as exit_:  # argparse's refusals
        code = exit_.code
    captured = capsys.readouterr()
    return subprocess.CompletedProcess(args, code, captured.out, captured.err)


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """A smoke sweep with FFNO and AMGFNO (KS nu = 0.1, f = 32) finished; tests copy it."""
    out = tmp_path_factory.mktemp("trained") / "sweep"
    proc = reproduce("run", "table2", "--preset", "smoke", "--out", out, *PAIR)
    assert proc.returncode == 0, proc.stderr
    return out


def copy(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest)
    return dest


def mtimes(out: Path) -> dict[str, float]:
    return {d.name: (d / "results.json").stat().st_mtime_ns for d in runner.run_dirs(out)
            if (d / "results.json").exists()}


# -- overrides and names -------------------------------------------------------------------------
def test_override_names_are_readable_stable_and_defaults_keep_todays_names():
    spec = RunSpec("amgfno", "ks", 0.1, 32, overrides={"normalize": True, "increment": True})
    assert spec.name == "amgfno_ks_nu0.1_f32+increment+normalize_seed0"
    assert RunSpec("ffno", "ks", 0.1, 32, seed=2, overrides={"lr": 3e-4, "decoder_input": "last_block"}).name == \
        "ffno_ks_nu0.1_f32+decoder_input=last_block+lr=0.0003_seed2"
    # an override equal to TrainConfig's default is no override: today's name, the same run
    plain = RunSpec("ffno", "ks", 0.1, 32)
    assert RunSpec("ffno", "ks", 0.1, 32, overrides={"weight_norm": False, "lr": 1e-3}) == plain
    # the output parametrisation's default is the preset's (by PDE; raw before 2026-12-01): either value is named
    raw = RunSpec("ffno", "ks", 0.1, 32, overrides={"normalize": False, "increment": False})
    assert raw.name == "ffno_ks_nu0.1_f32+increment=false+normalize=false_seed0" and raw != plain
    assert RunSpec("ffno", "ks", 0.1, 32).name == FFNO
    assert RunSpec("ffno", "ks", 0.1, 32, overrides={"lr": 1e-3 + 1e-12}).name != FFNO  # exact: no rounding clash
    assert RunSpec.from_dict(spec.to_dict()) == spec and json.loads(json.dumps(spec.to_dict()))["overrides"] == {
        "increment": True, "normalize": True}


def test_different_run_values_never_share_a_name_and_the_registry_keeps_its_names():
    """nu, alpha and omega enter a name short (0.1) where that is exact and by repr otherwise: a
    grid's nu = 0.1000001 is not the paper's nu = 0.1 run (formerly both were ..._nu0.1_..., so a
    sweep took the other's results as its own)."""
    plain = RunSpec("amgfno", "ks", 0.1, 32)
    assert RunSpec("amgfno", "ks", 0.1000001, 32).name == "amgfno_ks_nu0.1000001_f32_seed0"
    assert RunSpec("amgfno", "ks", 0.1 + 1e-12, 32).name != plain.name
    assert RunSpec("amgfno", "ks", 0.1, 32, omega=0.58400001).name != RunSpec("amgfno", "ks", 0.1, 32, omega=0.584).name
    convex = RunSpec("s4ffno", "ks", 0.1, 32, fusion="convex", alpha=0.25)
    assert RunSpec("s4ffno", "ks", 0.1, 32, fusion="convex", alpha=0.2500001).name != convex.name
    assert RunSpec("amgfno", "ks", 1e-05, 32).name == "amgfno_ks_nu1e-05_f32_seed0"
    every = {spec for exp in EXPERIMENTS.values() for omega_from in ("data", "paper") for spec in exp.runs((0,), omega_from)}
    values = {v for spec in every for v in (spec.nu, spec.alpha, spec.omega) if v is not None}
    assert all(float(f"{v:g}") == v for v in values)  # the short form, as before: no sweep's run is renamed


def test_an_override_a_preset_sets_is_kept_even_at_trainconfigs_default():
    """smoke sets eval_every = 1; eval_every = 5 is TrainConfig's default but no longer the preset's
    value: formerly dropped, so the run trained with 1 under the plain run's name."""
    specs = select_runs([], grid={"model": ["ffno"], "eval_every": [1, 5]})
    assert [s.name for s in specs] == ["ffno_ks_nu0.1_f32+eval_every=1_seed0", "ffno_ks_nu0.1_f32+eval_every=5_seed0"]
    assert [runner.job_config(s, "smoke").eval_every for s in specs] == [1, 5]
    assert RunSpec("ffno", "ks", 0.1, 32, overrides={"lr": 1e-3}).name == FFNO  # other defaults: still no override


def test_a_run_directory_holding_another_run_is_refused(tmp_path):
    runner.prepare_sweep(tmp_path, "smoke")
    run_dir = runner.write_job(tmp_path, RunSpec("amgfno", "ks", 0.1, 32), "smoke")
    job = json.loads((run_dir / "job.json").read_text())
    (run_dir / "job.json").write_text(json.dumps({**job, "spec": {**job["spec"], "nu": 0.1000001}}))  # an older name
    with pytest.raises(runner.SweepError, match="holds another run under this run's name"):
        runner.check_run_dir(tmp_path, RunSpec("amgfno", "ks", 0.1, 32))


@pytest.mark.parametrize("overrides,message", [
    ({"colour": 1}, "unknown training setting 'colour'; settings a run can override: n_train"),
    ({"alpha": 0.5}, "'alpha' cannot be a run's override: it is a field of the run itself"),
    ({"device": "cpu"}, "'device' cannot be a run's override: it is set for the whole sweep"),
    ({"field": "Vx"}, "'field' cannot be a run's override: it is set for the whole sweep"),  # a --data file's
    ({"lr": "fast"}, "override lr='fast': lr takes a finite float"),
    ({"lr": float("nan")}, "override lr=nan: lr takes a finite float"),
    ({"width": 6.5}, "override width=6.5: width takes an int"),
    ({"normalize": 1}, "override normalize=1: normalize takes a bool"),
    ({"precision": "fp8"}, "override precision='fp8': allowed values fp32, tf32, bf16"),
], ids=["unknown", "spec-field", "sweep-field", "cfd-field", "type", "nan", "int", "bool", "choice"])
def test_bad_overrides_name_the_key_the_value_and_what_is_allowed(overrides, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("[", r"\[")):
        check_overrides(overrides)


def test_override_values_are_checked_against_the_whole_config(tmp_path):
    spec = RunSpec("unet", "ks", 0.1, 32, overrides={"share_weights": True})
    with pytest.raises(ValueError, match=r"run unet_ks_nu0.1_f32\+share_weights_seed0: --share-weights applies to "
                                         r"the FFNO family"):
        runner.write_job(tmp_path, spec, "smoke")
    with pytest.raises(ValueError, match="lr must be a finite number > 0, got -0.1"):
        runner.write_job(tmp_path, RunSpec("ffno", "ks", 0.1, 32, overrides={"lr": -0.1}), "smoke")
    assert not (tmp_path / "runs").exists()


def test_a_sweep_with_overrides_names_trains_and_reports_its_runs(tmp_path, capsys):
    out = tmp_path / "sweep"
    proc = in_process(capsys, "run", "headline", "--preset", "smoke", "--out", out, "--where", "model=ffno", "res=32", "pde=ks")
    assert proc.returncode == 0, proc.stderr
    plain, norm_inc = (out / "runs" / f"ffno_ks_nu0.1_f32{o}_seed0" for o in (RAW, "+increment+normalize"))
    assert {d.name for d in runner.run_dirs(out)} == {plain.name, norm_inc.name}
    for run_dir, value in ((plain, False), (norm_inc, True)):
        config = json.loads((run_dir / "config.json").read_text())  # what the trainer used
        assert config["normalize"] is value and config["increment"] is value
    report = in_process(capsys, "report", "headline", "--out", out)
    assert report.returncode == 0, report.stderr
    md = (out / "reports" / "headline" / "table.md").read_text()
    assert "Sweep preset: smoke, trained far less than the paper preset" in md  # its ratios mean little
    results = {d: json.loads((d / "results.json").read_text())["nrmse"] for d in (plain, norm_inc)}
    for run_dir, label in ((plain, "raw"), (norm_inc, "--normalize --increment")):
        assert f"| KS | 0.1 | 32 | FFNO | {label} | {results[run_dir]:.4g} | 0.446 |" in md


# -- selection ----------------------------------------------------------------------------------
def test_repeated_where_combines_its_filters(capsys):
    assert parse_where(["pde=ks", "nu=0.1"]) == parse_where(["pde=ks"]) | parse_where(["nu=0.1"])
    proc = in_process(capsys, "plan", "table2", "--preset", "smoke", "--out", "/nonexistent/sweep", "--where", "pde=ks",
                     "--where", "nu=0.1", "--where", "res=32", "--where", "model=ffno", "--where", "model=unet")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("2 runs at preset smoke (2 missing)\n  by experiment: table2 2\n")  # ffno, unet
    assert "--where may be given several times and all filters apply" in " ".join(
        in_process(capsys, "run", "--help").stdout.split())


def test_plan_says_how_much_of_a_gpu_estimate_is_the_runs_start_up(capsys):
    """A CPU plan's GPU line read as if a GPU were slower than this CPU for a small preset (~3.9 h against
    ~52 min for `all --preset smoke`): it now names the default start-up of each run (30 s), and says so when that
    is most of it."""
    smoke = in_process(capsys, "plan", "table2", "--preset", "smoke", "--out", "/nonexistent/sweep", "--where",
                       "model=ffno", "pde=ks", "nu=0.1")
    assert re.search(r"on one GPU \(defaults from the committed H100/H200 timings\): ~\d+ min, of it ~\d+ min "
                     r"starting the 3 runs \(30 s each: at this preset a GPU gains nothing\)", smoke.stdout), smoke.stdout
    paper = in_process(capsys, "plan", "headline", "--preset", "paper", "--out", "/nonexistent/sweep")
    assert re.search(r"on one GPU .*: ~\d+ min, of it ~\d+ min starting the 12 runs \(30 s each\)\n", paper.stdout), \
        paper.stdout


def test_additive_alpha_1_is_trained_once_as_the_residual_s4ffno():
    residual = RunSpec("s4ffno", "ks", 0.1, 32)
    assert RunSpec("s4ffno", "ks", 0.1, 32, fusion="additive", alpha=1.0) == residual
    additive = EXPERIMENTS["alpha-additive"].runs()
    assert residual in additive and len(additive) == 45
    both = select_runs(["alpha-additive", "table2"])
    assert both.count(residual) == 1 and not [s for s in both if s.fusion == "additive" and s.alpha == 1]
    assert len(both) == 45 + 84 - 9  # the 9 KS settings' alpha = 1 runs are Table 2's S4FFNO runs


def test_set_adds_settings_to_every_run_and_report_finds_them(tmp_path):
    from amg_fast.experiments.sweep import parse_set, records_for

    overrides = parse_set(["precision=tf32", "n_train=16"])
    specs = select_runs(["headline"], where=parse_where(["res=32", "model=ffno", "pde=ks"]), overrides=overrides)
    assert [s.name for s in specs] == [
        "ffno_ks_nu0.1_f32+increment=false+n_train=16+normalize=false+precision=tf32_seed0",
        "ffno_ks_nu0.1_f32+increment+n_train=16+normalize+precision=tf32_seed0"]
    runner.prepare_sweep(tmp_path, "smoke")
    raw = RunSpec("ffno", "ks", 0.1, 32, overrides={"normalize": False, "increment": False})  # headline's own
    for spec in specs + [raw]:
        runner.write_job(tmp_path, spec, "smoke")
    assert {r["name"] for r in records_for(tmp_path, "headline", overrides=overrides)} == {s.name for s in specs}
    assert {r["name"] for r in records_for(tmp_path, "headline")} == {raw.name}
    with pytest.raises(ValueError, match="--set lr: one value per setting, got 2"):
        parse_set(["lr=1e-3,3e-4"])


def test_priority_order_is_the_experiments_order_then_seeds():
    specs = select_runs(["table3"], seeds=(0, 1))
    assert [s.name for s in specs[:3]] == ["amgfno_ks_nu0.075_f32_seed0", "amgfno_ks_nu0.075_f32_seed1",
                                           "amgfno_ks_nu0.075_f64_seed0"]


def test_the_headline_runs_in_issue_21s_order_stage_by_stage_seed_by_seed():
    """(a) AMGFNO and S4FFNO at f = 32, both parametrisations, seed by seed (a sweep stopped after four
    runs holds a whole paired comparison); (b) FFNO likewise; (c) f = 128 and (d) Burgers f = 32, the
    defaults, first seed only: 24 runs for seeds 0, 1, 2 (formerly 36, f = 128 last and no Burgers)."""
    specs = select_runs(["headline"], seeds=(0, 1, 2))
    pair = ["amgfno_ks_nu0.1_f32{}_seed{}", "amgfno_ks_nu0.1_f32+increment+normalize_seed{}",
            "s4ffno_ks_nu0.1_f32{}_seed{}", "s4ffno_ks_nu0.1_f32+increment+normalize_seed{}"]
    a = [n.format(RAW, seed) if n.count("{}") == 2 else n.format(seed) for seed in range(3) for n in pair]
    b = [f"ffno_ks_nu0.1_f32{o}_seed{seed}" for seed in range(3) for o in (RAW, "+increment+normalize")]
    c = [f"{m}_ks_nu0.1_f128_seed0" for m in ("amgfno", "s4ffno", "ffno")]
    d = [f"{m}_burgers_nu0.001_f32_seed0" for m in ("amgfno", "s4ffno", "ffno")]
    assert [s.name for s in specs] == a + b + c + d
    assert [s.name for s in select_runs(["headline"], seeds=(2, 0))][-6:] == [n.replace("seed0", "seed2")
                                                                               for n in c + d]  # the first given
    assert len(select_runs(["headline"])) == 12 and not any(s.overrides for s in specs[-6:])


def test_the_precision_runs_go_seed_by_seed():
    """fp32 / tf32 / bf16 of a seed together: a GPU session that stops part way leaves whole comparisons."""
    names = [s.name for s in select_runs(["precision"], seeds=(0, 1))]
    assert names == [f"amgfno_ks_nu0.1_f32{RAW}{mode}_seed{seed}" for seed in (0, 1)  # raw, as its runs trained
                     for mode in ("", "+precision=tf32", "+precision=bf16")]


# -- a user's grid ------------------------------------------------------------------------------
def test_a_user_grid_trains_resumes_after_kill_9_and_reports(tmp_path):
    """Two axes (lr, width) x two seeds; the sweep killed -9 while a run trains, run again, reported."""
    grid = tmp_path / "grid.toml"
    grid.write_text('model = "ffno"\nlr = [1e-3, 3e-4]\nwidth = [4, 8]\nepochs = 1\n')
    args = ["run", "--grid-file", grid, "--seeds", 0, 1, "--preset", "smoke", "--workers", 1]
    out = tmp_path / "sweep"
    proc = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "reproduce.py"), *map(str, args), "--out", str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and proc.poll() is None:
        dirs = runner.run_dirs(out)
        done = [d for d in dirs if (d / "results.json").exists()]
        if done and any((d / "config.json").exists() and d not in done for d in dirs):
            break
        time.sleep(0.05)
    else:
        proc.kill()
        pytest.fail(f"the grid never had one run done and another started (exit {proc.returncode})")
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    finished = mtimes(out)
    rerun = reproduce(*args, "--out", out)
    assert rerun.returncode == 0, rerun.stderr
    assert "8 of 8 runs done" in rerun.stdout
    assert {k: v for k, v in mtimes(out).items() if k in finished} == finished  # finished runs untouched
    assert "ffno_ks_nu0.1_f32+epochs=1+lr=0.0003+width=4_seed1" in mtimes(out)
    report = reproduce("report", "grid", "--out", out)
    assert report.returncode == 0, report.stderr
    md = (out / "reports" / "grid" / "table.md").read_text()
    assert "| lr | width | n | nRMSE |" in md
    rows = [line for line in md.splitlines() if line.startswith(("| 0.001 |", "| 0.0003 |"))]
    assert len(rows) == 4 and all(" | 2 | " in row and "[n=2]" in row for row in rows)


# -- results that travel ------------------------------------------------------------------------
def absolute_paths(tree: Path) -> dict[str, list[str]]:
    """The absolute paths (JSON strings "/...") that the JSON files of a sweep hold (job.json, config.json,
    results.json, metrics.jsonl, machine.json, sweep.json; train.log's lines keep the paths of the
    machine that trained the run)."""
    found = {str(p.relative_to(tree)): re.findall(r'"(/[^"]*)"', p.read_text())
             for p in sorted([*tree.rglob("*.json"), *tree.rglob("*.jsonl")])}
    return {name: paths for name, paths in found.items() if paths}


def test_export_then_run_elsewhere_trains_no_run_twice_and_gives_equal_tables(trained, tmp_path, capsys):
    first = copy(trained, tmp_path / "machine1")  # machine 1 finished FFNO only (AMGFNO's run lost)
    shutil.rmtree(first / "runs" / AMGFNO)
    assert absolute_paths(first)[f"runs/{FFNO}/config.json"]  # the trainer's config.json: the machine's paths
    tree = tmp_path / "repo" / "results" / "sweep"
    assert in_process(capsys, "export", first, "--to", tree).returncode == 0
    assert {p.name for p in (tree / "runs" / FFNO).iterdir()} <= set(runner.EXPORT_FILES) | {runner.LOG_FILE}
    assert not list(tree.rglob("*.pt")) and not list(tree.rglob("rollout.npz"))
    # formerly config.json kept machine 1's out and cache_dir: now relative to the sweep, as in job.json
    assert absolute_paths(tree) == {}
    config = RunDir(tree / "runs" / FFNO).read_config()
    job = runner.read_job(tree / "runs" / FFNO)["config"]
    assert (config.out, config.cache_dir, config.data) == (job.out, job.cache_dir, None) == (f"runs/{FFNO}", "data", None)
    assert {**config.to_dict(), "out": None, "cache_dir": None} == {
        **json.loads((first / "runs" / FFNO / "config.json").read_text()), "out": None, "cache_dir": None}
    status = in_process(capsys, "status", "--out", tree)
    assert status.returncode == 0 and "1 runs: 1 done" in status.stdout
    assert in_process(capsys, "plan", "table2", "--preset", "smoke", "--out", tree, *PAIR).returncode == 0
    ffno_results = (tree / "runs" / FFNO / "results.json").read_bytes()

    second = copy(tree, tmp_path / "machine2")  # the committed tree checked out on machine 2
    proc = in_process(capsys, "run", "table2", "--preset", "smoke", "--out", second, *PAIR)
    assert proc.returncode == 0, proc.stderr
    assert (second / "runs" / FFNO / "results.json").read_bytes() == ffno_results  # not trained again
    assert not (second / "runs" / FFNO / "checkpoint.pt").exists()
    again = in_process(capsys, "export", second, "--to", tree)
    assert again.returncode == 0 and "exported 1 runs" in again.stdout and "1 were there already" in again.stdout
    for out in (second, tree):
        assert in_process(capsys, "report", "table2", "--out", out).returncode == 0
    tables = [(out / "reports" / "table2" / "table.md").read_text() for out in (second, tree)]
    assert tables[0] == tables[1] and "2 done" in tables[0]
    # the CSV too: its run_dir is relative to the sweep (it was the path of each machine's copy)
    csvs = [(out / "reports" / "table2" / "table.csv").read_text() for out in (second, tree)]
    assert csvs[0] == csvs[1] and f",runs/{FFNO}," in csvs[0]
    assert absolute_paths(tree) == {}  # AMGFNO's, trained on machine 2, exported relative too


def test_export_writes_a_readings_data_file_relative_to_the_sweep(trained, tmp_path, capsys):
    """A run on a KS data reading trains on the sweep's generated file (config.json's data): exported as
    data/<file>, like cache_dir."""
    first = copy(trained, tmp_path / "machine1")
    config = first / "runs" / FFNO / "config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "data": str(first / "data" / "ks_reading.h5")}))
    assert in_process(capsys, "export", first, "--to", tmp_path / "tree").returncode == 0
    exported = json.loads((tmp_path / "tree" / "runs" / FFNO / "config.json").read_text())
    assert (exported["data"], exported["cache_dir"]) == ("data/ks_reading.h5", "data")
    assert absolute_paths(tmp_path / "tree") == {}


def test_export_removes_what_a_killed_export_left(trained, tmp_path, capsys):
    """An export killed between its renames leaves .<run>.export-<pid> or .<run>.old-<pid> in the
    tree's runs/; the next export removes them once that process is gone (a live one's are kept)."""
    tree = tmp_path / "tree"
    assert in_process(capsys, "export", trained, "--to", tree).returncode == 0
    dead = 2 ** 22 + 12345  # above Linux's default pid_max: no such process
    left = [tree / "runs" / f".{FFNO}.export-{dead}", tree / "runs" / f".{FFNO}.old-{dead}"]
    alive = tree / "runs" / f".{FFNO}.old-{os.getpid()}"
    for folder in (*left, alive):
        folder.mkdir()
        (folder / "results.json").write_text("{}")
    assert in_process(capsys, "export", trained, "--to", tree).returncode == 0
    assert not any(p.exists() for p in left) and alive.is_dir()


def test_export_refuses_what_it_cannot_do(trained, tmp_path, capsys):
    out = copy(trained, tmp_path / "sweep")
    for dest, message in ((out, "the sweep itself"), (out / "runs" / "x", "inside its runs/")):
        proc = in_process(capsys, "export", out, "--to", dest)
        assert proc.returncode == 2 and message in proc.stderr
    other = tmp_path / "other"
    runner.prepare_sweep(other, "cpu")
    proc = in_process(capsys, "export", out, "--to", other)
    assert proc.returncode == 2 and "holds runs of preset 'cpu'; choose another --to for preset 'smoke'" in proc.stderr
    # messages name export's own arguments (formerly "--out", which export has not)
    (tmp_path / "afile").write_text("x")
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "notes.txt").write_text("x")
    for args, message in (([out, "--to", tmp_path / "afile"], f"--to {tmp_path / 'afile'}: is a file"),
                          ([out, "--to", tmp_path / "notes"], f"--to {tmp_path / 'notes'} is not a sweep directory"),
                          ([tmp_path / "afile", "--to", tmp_path / "t"], f"export {tmp_path / 'afile'} is a file")):
        proc = in_process(capsys, "export", *args)
        assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    empty = tmp_path / "empty"
    runner.prepare_sweep(empty, "smoke")
    assert "no finished or diverged run to export" in in_process(capsys, "export", empty, "--to",
                                                                  tmp_path / "nothing").stdout
    # --out DIR as the other commands take the sweep (formerly export's positional DIR only), not both
    assert "no finished or diverged run to export" in in_process(capsys, "export", "--out", empty, "--to",
                                                                  tmp_path / "nothing").stdout
    assert not (tmp_path / "nothing").exists()
    for args, said in (([empty, "--out", empty], "both"), ([], "neither")):
        proc = in_process(capsys, "export", *args, "--to", tmp_path / "nothing")
        assert proc.returncode == 2 and "export takes the sweep directory once: " in proc.stderr and \
            proc.stderr.rstrip().endswith(f"got {said}"), proc.stderr


# -- the budget ---------------------------------------------------------------------------------
def test_budget_starts_only_what_it_can_finish():
    clock = [100.0]
    estimator = Estimator({"device": "cpu", "name": "test"}, "smoke")
    config = {"res": 32, "epochs": 2, "n_train": 8}  # 5 s start-up + 2 epochs x 2 s = 9 s by the defaults
    budget = Budget(20.0, estimator, {"a": config, "b": config, "c": {**config, "epochs": 1}}, clock=lambda: clock[0])
    assert budget(Path("a")) is None
    clock[0] += 8.0  # 12 s left: b fits
    assert budget(Path("b")) is None
    clock[0] += 6.0  # 6 s left: b's kind needs 9 s, c 7 s
    assert budget(Path("a")) and budget(Path("c"))
    assert budget.skipped["a"].startswith("needs ~9 s (default for preset smoke on cpu), 6 s of the budget left")
    assert Budget(None, estimator, {})(Path("a")) is None
    with pytest.raises(ValueError, match="--budget-s must be a finite number of seconds > 0, got 0"):
        Budget(0, estimator, {})


def test_a_run_estimated_at_exactly_the_budget_and_the_commands_start():
    clock = [50.0]
    estimator = Estimator({"device": "cpu", "name": "test"}, "smoke")
    configs = {"a": {"res": 32, "epochs": 2, "n_train": 8}}  # 9 s by the defaults
    assert Budget(9.0, estimator, configs, clock=lambda: clock[0])(Path("a")) is None  # fits exactly: starts
    late = Budget(9.0, estimator, configs, clock=lambda: clock[0] + 0.001)
    late.start = clock[0]
    assert late(Path("a")) == "needs ~9 s (default for preset smoke on cpu), 8 s of the budget left"  # was "9 s left"
    # the command's start (its imports and planning took 3 s): what is left counts from there
    started_earlier = Budget(10.0, estimator, configs, clock=lambda: clock[0], start=clock[0] - 3.0)
    assert started_earlier(Path("a")).endswith("7 s of the budget left")


def test_a_partial_run_is_estimated_by_the_epochs_it_has_left(tmp_path):
    """A run a call's timeout stopped after its checkpoint of epoch 6 of 10 resumes in a budget that fits
    its 4 epochs left (formerly estimated as the whole run, it was skipped and lost with the machine)."""
    estimator = Estimator({"device": "cpu", "name": "test"}, "smoke")
    config = {"res": 32, "epochs": 10, "n_train": 8}  # 5 s start-up + 10 epochs x 2 s = 25 s by the defaults
    partial, fresh = tmp_path / "partial", tmp_path / "fresh"
    partial.mkdir()
    fresh.mkdir()
    (partial / "config.json").write_text(json.dumps({"checkpoint_every": 2}))
    (partial / "checkpoint.pt").write_bytes(b"a checkpoint")  # its epoch: the last one a checkpoint was written at
    (partial / "metrics.jsonl").write_text("".join(json.dumps({"epoch": e}) + "\n" for e in range(1, 8)))
    assert runner.epochs_to_resume(partial) == 6 and runner.epochs_to_resume(fresh) == 0
    budget = Budget(15.0, estimator, {"partial": config, "fresh": config}, clock=lambda: 0.0)
    assert budget(partial) is None  # 5 + 4 x 2 = 13 s
    assert budget(fresh) == "needs ~25 s (default for preset smoke on cpu), 15 s of the budget left"
    assert estimator.seconds(config, 6) == (13.0, "default for preset smoke on cpu; resumes with 4 of 10 epochs left")
    (partial / "results.json").write_text("{}")  # finished (or corrupt): trained in full if at all
    assert runner.epochs_to_resume(partial) == 0


def test_default_estimates_scale_with_f_and_the_training_set():
    from amg_fast.experiments.estimate import PRESET_N_TRAIN
    from amg_fast.experiments.specs import PRESETS

    estimator = Estimator({"device": "cpu", "name": "test"}, "cpu")
    base = runner.job_config(RunSpec("ffno", "ks", 0.1, 32), "cpu").to_dict()
    assert estimator.seconds(base)[0] == pytest.approx(5.0 + 1.0 * 20)  # the cpu preset: 1 s an epoch, 20 epochs
    assert estimator.seconds({**base, "res": 128, "n_train": 256})[0] == pytest.approx(5.0 + 8.0 * 20)
    assert {p: runner.job_config(RunSpec("ffno", "ks", 0.1, 32), p).n_train for p in PRESETS} == PRESET_N_TRAIN


def test_estimates_use_this_machines_finished_runs(trained):
    machine = json.loads((trained / "runs" / FFNO / "machine.json").read_text())
    config = json.loads((trained / "runs" / FFNO / "job.json").read_text())["config"]
    results = json.loads((trained / "runs" / FFNO / "results.json").read_text())
    here = Estimator(machine, "smoke", runner.run_dirs(trained))
    seconds, source = here.seconds(config)
    assert source.startswith("measured here on 1 finished run")
    # its epochs (training, evaluations, checkpoints) per epoch, and the rest of its wall time as the
    # start-up (formerly the whole wall time per epoch plus the default start-up: counted twice), plus
    # the job's seconds before training (imports: machine.json's setup_s; formerly not counted) less
    # those on its data set (data_s: generating it is estimated apart, only for a run whose data are missing)
    in_epochs = results["train_time_s"] + results["eval_time_s"] + results["checkpoint_time_s"]
    assert 0 <= machine["data_s"] <= machine["setup_s"] < 600
    assert pytest.approx(machine["setup_s"] - machine["data_s"] + results["wall_time_s"] - in_epochs) in here.startups
    assert seconds == pytest.approx(max(here.startups) + in_epochs)  # the longest start-up is taken
    assert Estimator({"device": machine["device"], "name": machine["name"]}, "smoke",
                     runner.run_dirs(trained)).startups == here.startups  # setup_s is not part of the machine
    elsewhere = Estimator({**machine, "name": "another CPU"}, "smoke", runner.run_dirs(trained))
    assert elsewhere.seconds(config)[1] == "default for preset smoke on cpu"


def test_checkpoints_are_estimated_at_the_runs_own_cadence(trained):
    """A finished run's checkpoint time is counted per checkpoint, so a run of its kind that checkpoints
    every 10 epochs (the paper preset's, 2026-11-27) is estimated with a tenth of them (formerly its
    per-epoch checkpoints, 12% of a paper run on the H200, were charged to every epoch)."""
    from amg_fast.experiments.estimate import checkpoints

    assert [checkpoints({"epochs": 200, "checkpoint_every": e}) for e in (1, 10, 7)] == [200, 20, 29]
    assert checkpoints({"epochs": 200, "checkpoint_every": 10}, 45) == 16  # 50, 60, ..., 200
    assert checkpoints({"epochs": 5}, 5) == 0 and checkpoints({"epochs": 5}) == 5  # unset: every epoch (older runs)
    machine = json.loads((trained / "runs" / FFNO / "machine.json").read_text())
    config = json.loads((trained / "runs" / FFNO / "job.json").read_text())["config"]
    results = json.loads((trained / "runs" / FFNO / "results.json").read_text())
    here = Estimator(machine, "smoke", runner.run_dirs(trained))
    written = checkpoints(config)
    assert written == config["epochs"] and results["checkpoint_time_s"] > 0  # smoke: every epoch
    per_checkpoint = results["checkpoint_time_s"] / written
    every, seconds = here.seconds(config)[0], here.seconds({**config, "checkpoint_every": config["epochs"]})[0]
    assert every - seconds == pytest.approx(per_checkpoint * (written - 1))  # only the last one left


def test_a_run_of_another_pde_is_estimated_as_its_own_kind(trained):
    """Formerly a smoke Burgers run after KS runs read `needs ~2 s (measured here (2 finished runs of
    its kind))`: the kind ignored the PDE, so the KS runs' seconds per epoch stood for Burgers'."""
    from amg_fast.experiments.estimate import kind_of

    machine = json.loads((trained / "runs" / FFNO / "machine.json").read_text())
    here = Estimator(machine, "smoke", runner.run_dirs(trained))
    ks = runner.job_config(RunSpec("ffno", "ks", 0.1, 32), "smoke").to_dict()
    burgers = runner.job_config(RunSpec("ffno", "burgers", 0.001, 32), "smoke").to_dict()
    assert here.seconds(ks)[1] == "measured here on 1 finished run of its kind"
    assert kind_of(burgers) != kind_of(ks)
    assert here.seconds(burgers)[1] == "default for preset smoke on cpu"
    assert here.seconds({**burgers, "res": 128})[1].startswith("default")  # nor scaled from KS at f = 32


def test_a_run_whose_data_are_missing_is_estimated_with_their_generation(trained, tmp_path):
    """Formerly generating a run's data set was not foreseen (6.4 s of a smoke Burgers run's 7.7 s, ~231 s
    at the paper's size on the 2-core CPU): a budget could start a run whose data overran it."""
    from amg_fast.experiments.estimate import DEFAULT_DATA_SECONDS, data_file
    from amg_fast.experiments.sweep import plan

    machine = json.loads((trained / "runs" / FFNO / "machine.json").read_text())
    here = Estimator(machine, "smoke", runner.run_dirs(trained))
    spec = RunSpec("ffno", "burgers", 0.001, 32)
    config = runner.job_config(spec, "smoke").to_dict()
    data = runner.dataset_args(spec, config, trained / "data")
    assert not data_file(data).exists()
    training, training_source = here.seconds(config)
    fixed, per_trajectory = DEFAULT_DATA_SECONDS[("burgers", "cpu")]  # measured at nu = 0.001, the default options
    generating = fixed + per_trajectory * (config["n_train"] + config["n_test"])
    seconds, source = here.seconds(config, data=data)
    assert seconds == pytest.approx(training + generating)
    assert source == f"{math.ceil(generating)} s generating its data, by the default for burgers on cpu; {training_source}"
    budget = Budget(training + 1.0, here, {"b": config}, clock=lambda: 0.0, data={"b": data})
    assert budget(Path("b")) == f"needs ~{math.ceil(training + generating)} s ({source}), " \
        f"{math.floor(training + 1.0)} s of the budget left"  # one pair of parentheses
    assert Budget(training + 1.0, here, {"b": config}, clock=lambda: 0.0)(Path("b")) is None  # without its data: fits
    # the sweep's own KS data set exists: nothing to generate
    ks = RunSpec("amgfno", "ks", 0.1, 32)
    ks_config = runner.job_config(ks, "smoke").to_dict()
    assert data_file(runner.dataset_args(ks, ks_config, trained / "data")).exists()
    assert here.seconds(ks_config, data=runner.dataset_args(ks, ks_config, trained / "data")) == here.seconds(ks_config)
    # a KS data set of another seed: as long as the one the sweep's first run generated (measured here)
    assert json.loads((trained / "runs" / AMGFNO / "machine.json").read_text())["data_generated"] != \
        json.loads((trained / "runs" / FFNO / "machine.json").read_text())["data_generated"]  # one run generated it
    first = next(d for d in runner.run_dirs(trained) if json.loads((d / "machine.json").read_text())["data_generated"])
    other_seed = runner.dataset_args(ks.with_seed(1), {**ks_config, "seed": 1}, trained / "data")
    assert not data_file(other_seed).exists()
    assert here.data_seconds(other_seed) == (json.loads((first / "machine.json").read_text())["data_s"],
                                             "as measured here for ks")
    # a plan: the first run of the three that share the Burgers data set pays for it, the others not
    burgers = [RunSpec(model, "burgers", 0.001, 32) for model in ("ffno", "s4ffno", "amgfno")]
    rows = plan(tmp_path / "new", burgers, "smoke", Estimator(machine, "smoke"))["runs"]
    assert "generating its data" in rows[0][3] and all("generating" not in source for *_, source in rows[1:])
    assert rows[0][2] == pytest.approx(rows[1][2] + generating)


def test_old_machine_files_still_give_estimates(trained, tmp_path):
    """machine.json before data_s (setup_s all start-up) and before setup_s (the committed results/cpu
    trees) still give measured estimates."""
    out = copy(trained, tmp_path / "old")
    machine = json.loads((out / "runs" / FFNO / "machine.json").read_text())
    for run_dir in runner.run_dirs(out):
        old = json.loads((run_dir / "machine.json").read_text())
        (run_dir / "machine.json").write_text(json.dumps({k: old[k] for k in ("device", "name", "setup_s")}))
    results = json.loads((out / "runs" / FFNO / "results.json").read_text())
    in_epochs = results["train_time_s"] + results["eval_time_s"] + results["checkpoint_time_s"]
    here = Estimator(machine, "smoke", runner.run_dirs(out))
    assert pytest.approx(machine["setup_s"] + results["wall_time_s"] - in_epochs) in here.startups
    assert here.generations == {}
    config = json.loads((out / "runs" / FFNO / "job.json").read_text())["config"]
    assert here.seconds(config)[1] == "measured here on 1 finished run of its kind"
    committed = Path(__file__).parents[2] / "results" / "cpu" / "ns2d"
    if committed.is_dir():  # the committed tree (2026-11-27): machine.json with device and name only
        run_dir = committed / "runs" / "ffno2d_ns2d_nu0.001_f32_seed0"
        config = json.loads((run_dir / "job.json").read_text())["config"]
        there = Estimator(json.loads((run_dir / "machine.json").read_text()), "cpu", runner.run_dirs(committed))
        assert there.seconds(config)[1].startswith("measured here on ")  # both viscosities: one kind


def test_estimates_scale_this_machines_runs_to_other_resolutions(trained):
    """A sweep that finished its f = 32 runs estimates its f = 128 runs from them (formerly the
    preset's default, which on a GPU was too long for one device call: the runs never started)."""
    from amg_fast.experiments.estimate import kind_of

    machine = json.loads((trained / "runs" / FFNO / "machine.json").read_text())
    config = json.loads((trained / "runs" / FFNO / "job.json").read_text())["config"]
    results = json.loads((trained / "runs" / FFNO / "results.json").read_text())
    here = Estimator(machine, "smoke", runner.run_dirs(trained))
    startup = max(here.startups)
    per_epoch = (results["train_time_s"] + results["eval_time_s"] + results["checkpoint_time_s"]) / results["epochs"]
    res = config["res"]
    finer, source = here.seconds({**config, "res": 4 * res})
    assert source == f"scaled from 1 finished run of its kind at f = {res} here"
    assert finer == pytest.approx(startup + 4 * per_epoch * config["epochs"])  # linear in f going up
    coarser, _ = here.seconds({**config, "res": res // 4})
    assert coarser == pytest.approx(startup + 0.5 * per_epoch * config["epochs"])  # sqrt going down
    assert here.seconds({**config, "res": 4 * res, "width": 2 * config["width"]})[1].startswith("default")
    # 2D: the points per frame, (f / f0) ** 2 up; the nearest measured resolution, the larger on a tie
    grid = {**config, "pde": "ns2d", "model": "ffno2d", "res": 32}
    here.per_epoch[kind_of(grid)] = [1.0]
    here.per_epoch[kind_of({**grid, "res": 128})] = [10.0]
    here.startups = [5.0]
    assert here.seconds({**grid, "res": 64}) == (5.0 + 10.0 * 0.5 * grid["epochs"],
                                                 "scaled from 1 finished run of its kind at f = 128 here")
    assert here.seconds({**grid, "res": 16})[0] == pytest.approx(5.0 + 1.0 * 0.5 * grid["epochs"])
    assert here.seconds({**grid, "res": 256})[0] == pytest.approx(5.0 + 10.0 * 4 * grid["epochs"])


def test_a_model_not_measured_here_is_bounded_by_a_costlier_one(trained):
    """S4FFNO is AMGFNO without its gate and FFNO S4FFNO without its memory: a run of one not measured on this
    machine is estimated at most at the smallest measure of those (formerly the preset's default: on the H200 the
    first FFNO run of the headline sweep needed ~122 s by it and did not start in the 72 s left)."""
    from amg_fast.experiments.estimate import COSTLIER_MODELS, checkpoints, kind_of

    machine = json.loads((trained / "runs" / AMGFNO / "machine.json").read_text())
    here = Estimator(machine, "smoke", runner.run_dirs(trained))
    amgfno = json.loads((trained / "runs" / AMGFNO / "job.json").read_text())["config"]
    s4ffno = {**amgfno, "model": "s4ffno"}
    assert here.seconds(s4ffno) == (here.seconds(amgfno)[0], "at most amgfno's: measured here on 1 finished run of "
                                                             "its kind")
    ffno = json.loads((trained / "runs" / FFNO / "job.json").read_text())["config"]
    assert here.seconds(ffno)[1] == "measured here on 1 finished run of its kind"  # its own measure first
    # the smallest bound, not the first listed: FFNO unmeasured, AMGFNO (listed last) measured faster than S4FFNO;
    # a bound scaled from another resolution
    here.per_epoch = {kind_of(amgfno): [2.0], kind_of(s4ffno): [3.0]}
    here.per_checkpoint, here.startups = {kind_of(amgfno): [0.5]}, [5.0]
    unmeasured = {**amgfno, "model": "ffno"}
    epochs, written = unmeasured["epochs"], checkpoints(unmeasured)
    assert COSTLIER_MODELS["ffno"][-1] == "amgfno"
    assert here.seconds(unmeasured) == (5.0 + 2.0 * epochs + 0.5 * written,
                                        "at most amgfno's: measured here on 1 finished run of its kind")
    res = unmeasured["res"]
    finer = {**unmeasured, "res": 4 * res}
    assert here.seconds(finer) == (5.0 + 4 * 2.0 * epochs + 4 * 0.5 * written,
                                   f"at most amgfno's: scaled from 1 finished run of its kind at f = {res} here")
    # its own kind scaled from another resolution comes before a costlier model's exact measure
    here.per_epoch[kind_of(finer)] = [9.0]
    assert here.seconds(unmeasured) == (5.0 + 9.0 * 0.5 * epochs,
                                        f"scaled from 1 finished run of its kind at f = {4 * res} here")
    # a costlier model is never bounded by a cheaper one, nor any other model; nor across settings
    assert here.seconds({**amgfno, "model": "amgfno", "width": 2 * amgfno["width"]})[1].startswith("default")
    here.per_epoch = {kind_of(unmeasured): [1.0]}
    assert here.seconds(amgfno)[1].startswith("default") and here.seconds(s4ffno)[1].startswith("default")
    assert here.seconds({**amgfno, "model": "factformer"})[1].startswith("default")
    # the 2D models alike; every model named is one the registry builds
    grid = {**amgfno, "pde": "ns2d", "model": "amgfno2d"}
    here.per_epoch = {kind_of(grid): [7.0]}
    assert here.seconds({**grid, "model": "ffno2d"})[1] == "at most amgfno2d's: measured here on 1 finished run of " \
                                                            "its kind"
    from amg_fast.models import MODELS
    assert {m for pair in COSTLIER_MODELS.items() for m in (pair[0], *pair[1])} <= set(MODELS)


def test_machine_json_records_the_code_that_trained_the_run(trained):
    """A sweep several GPU sessions continue trains with each session's code: machine.json says which
    (commit, versions, the AMG_FAST_* kernel switches set: those of this process, which started the sweep)."""
    from amg_fast._provenance import software

    for run_dir in runner.run_dirs(trained):
        recorded = json.loads((run_dir / "machine.json").read_text())["software"]
        assert recorded == software() and recorded["commit"]  # the tests run in a git checkout


def test_machine_json_records_where_the_run_trains(monkeypatch):
    """Formerly the machine of --device auto whatever the run's device: a --device cpu run on a GPU
    machine (or any run where CUDA_VISIBLE_DEVICES is set but torch finds no CUDA) was recorded as
    trained on the GPU, and its CPU timings became the GPU's estimates."""
    import torch

    monkeypatch.setattr(runner, "visible_gpus", lambda: ["0"])
    monkeypatch.setattr("amg_fast.experiments.estimate._gpu_name", lambda index=None: "NVIDIA H100")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert runner._machine("auto")["device"] == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert runner._machine("auto") == runner._machine("cuda") == {"device": "cuda", "name": "NVIDIA H100"}
    assert runner._machine("cpu")["device"] == "cpu"


def test_a_tiny_budget_starts_nothing_and_says_why(tmp_path, capsys):
    out = tmp_path / "sweep"
    proc = in_process(capsys, "run", "table2", "--preset", "smoke", "--out", out, *PAIR, "--budget-s", "1")
    assert proc.returncode == cli.EXIT_BUDGET, proc.stderr
    assert proc.stderr.count("skipped: ") == 2 and "0 s of the budget left" in proc.stderr  # 1 s less planning
    assert "2 not started within --budget-s 1" in proc.stdout
    assert all(runner.run_state(d) == "missing" for d in runner.run_dirs(out))


def test_a_partial_run_the_budget_skips_is_listed_as_skipped_with_the_budgets_reason(trained, tmp_path, capsys):
    """Formerly listed as "partial: ... the next run resumes it" and counted as not done (exit 1: the
    GPU campaign's runs phase marked FAIL) when only the budget had kept it from resuming."""
    out = copy(trained, tmp_path / "sweep")
    (out / "runs" / AMGFNO / "results.json").unlink()  # a checkpoint, no results: partial
    assert runner.run_state(out / "runs" / AMGFNO) == "partial"
    # The estimate is the sweep's own measured start-up (~1 s on a 2-core CPU, 0 epochs left), so a budget
    # of 1 s let it start on a faster machine: a millisecond fits no run.
    proc = in_process(capsys, "run", "table2", "--preset", "smoke", "--out", out, *PAIR, "--budget-s", "0.001")
    assert proc.returncode == cli.EXIT_BUDGET, proc.stderr
    line = next(line for line in proc.stderr.splitlines() if AMGFNO in line)
    assert line.startswith(f"skipped: {AMGFNO}: needs ~") and "of the budget left (it was partial: stopped " in line
    assert "; resumes with 0 of 2 epochs left)" in line
    assert "1 of 2 runs done; 1 not started within --budget-s 0.001" in proc.stdout
    assert runner.run_state(out / "runs" / AMGFNO) == "partial"


# -- sweeps that move, copies, truthful states ----------------------------------------------------
def test_a_moved_half_finished_sweep_finishes_where_it_lies_and_a_copy_never_writes_into_its_origin(
        trained, tmp_path, capsys):
    origin = copy(trained, tmp_path / "origin")
    (origin / "runs" / AMGFNO / "results.json").unlink()  # half-finished: a checkpoint, no results
    assert runner.run_state(origin / "runs" / AMGFNO) == "partial"
    moved = tmp_path / "moved"
    origin.rename(moved)
    proc = in_process(capsys, "run", "table2", "--preset", "smoke", "--out", moved, *PAIR)
    assert proc.returncode == 0, proc.stderr
    assert "2 of 2 runs done" in proc.stdout and not origin.exists()
    config = json.loads((moved / "runs" / AMGFNO / "config.json").read_text())
    assert config["out"] == str(moved.resolve() / "runs" / AMGFNO) and config["cache_dir"] == str(moved.resolve() / "data")
    assert "run directory moved" in (moved / "runs" / AMGFNO / "train.log").read_text()

    clone = copy(moved, tmp_path / "clone")
    (clone / "runs" / AMGFNO / "results.json").unlink()
    before = mtimes(moved)
    assert in_process(capsys, "run", "table2", "--preset", "smoke", "--out", clone, *PAIR).returncode == 0
    assert mtimes(moved) == before and runner.run_state(clone / "runs" / AMGFNO) == "done"


@pytest.mark.parametrize("content", ['{"nrmse": 0.', "[1]", '{"nrmse": "low"}', "", '{"nrmse": true}'],
                         ids=["truncated", "list", "wrong-type", "empty", "bool"])
def test_a_corrupt_results_file_makes_the_run_corrupt(tmp_path, capsys, content):
    runner.prepare_sweep(tmp_path, "smoke")
    run_dir = runner.write_job(tmp_path, RunSpec("ffno", "ks", 0.1, 32), "smoke")
    (run_dir / "results.json").write_text(content)
    assert runner.run_state(run_dir) == "corrupt" and runner.read_record(run_dir)["results"] is None
    for command in (["plan", "table2", "--preset", "smoke", "--where", "model=ffno", "pde=ks", "nu=0.1", "res=32"],
                    ["status"], ["report", "table2"]):
        proc = in_process(capsys, *command, "--out", tmp_path)  # a traceback would fail the test
        assert proc.returncode in (0, 1), proc.stderr
    status = in_process(capsys, "status", "--out", tmp_path).stdout
    assert "corrupt: ffno_ks_nu0.1_f32_seed0: results.json is unreadable" in status


def test_a_damaged_data_set_of_the_sweep_says_what_to_do(trained, tmp_path, capsys):
    """A data file cut short (an interrupted copy of the sweep): every run needing it fails naming it,
    with advice a sweep can follow (formerly generate_data.py's: "choose another --out, or pass
    --overwrite"); deleting it, as told, lets the same command finish."""
    out = copy(trained, tmp_path / "sweep")
    (data,) = (out / "data").glob("*.h5")
    with open(data, "r+b") as f:
        f.truncate(1000)
    shutil.rmtree(out / "runs" / FFNO)
    proc = in_process(capsys, "run", "table2", "--preset", "smoke", "--out", out, *PAIR)
    assert proc.returncode == 1 and f"failed: {FFNO}: SweepError: the sweep's data set is unusable: {data.resolve()}" \
        in proc.stderr and "In a sweep: delete that file and run the same command again" in proc.stderr, proc.stderr
    data.unlink()
    proc = in_process(capsys, "run", "table2", "--preset", "smoke", "--out", out, *PAIR)
    assert proc.returncode == 0 and "2 of 2 runs done" in proc.stdout, proc.stderr


def test_a_corrupt_run_is_trained_again(trained, tmp_path, capsys):
    out = copy(trained, tmp_path / "sweep")
    (out / "runs" / FFNO / "results.json").write_text("[1]")
    proc = in_process(capsys, "run", "table2", "--preset", "smoke", "--out", out, *PAIR)
    assert proc.returncode == 0 and "2 of 2 runs done" in proc.stdout, proc.stderr
    assert runner.read_results(out / "runs" / FFNO) is not None
    assert (out / "runs" / FFNO / "results.json.corrupt").read_text() == "[1]"


@pytest.mark.parametrize("content", ["", "{", "[]", '{"preset": "nope"}', '{"preset": 5}'],
                         ids=["empty", "truncated", "list", "unknown-preset", "number"])
def test_a_corrupt_sweep_json_is_named_by_every_command(tmp_path, capsys, content):
    out = tmp_path / "sweep"
    runner.prepare_sweep(out, "smoke")
    (out / "sweep.json").write_text(content)
    for command in (["status"], ["report", "table2"], ["run", "table2", "--preset", "smoke", *PAIR],
                    ["plan", "table2", "--preset", "smoke", *PAIR]):
        proc = in_process(capsys, *command, "--out", out)  # an unknown preset was taken: "give --preset nope"
        assert proc.returncode == 2 and "sweep.json: unreadable or not a sweep record" in proc.stderr, proc.stderr
    assert sorted(p.name for p in out.iterdir()) == [".sweep.lock", "sweep.json"]


def test_a_run_whose_worker_died_is_named_and_the_exit_is_non_zero(tmp_path, monkeypatch, capsys):
    """A worker killed without writing error.json (here: it writes config.json and exits)."""
    def dies(self, run_dir, gpu, threads=None):
        (Path(run_dir) / "config.json").write_text("{}")
        return runner.run_state(run_dir)
    monkeypatch.setattr(runner._Workers, "run", dies)
    code = cli.main(["run", "table2", "--preset", "smoke", "--out", str(tmp_path / "s"), *PAIR])
    err = capsys.readouterr().err
    assert code == cli.EXIT_NOT_DONE
    assert f"died: {FFNO}: its process ended without results" in err and f"died: {AMGFNO}" in err
    truncated = runner.write_job(tmp_path / "s", RunSpec("ffno", "ks", 0.1, 32), "smoke")
    (truncated / "job.json").write_text('{"spec": {"mod')
    assert runner.run_job(str(truncated)) == "failed"  # not a traceback in the worker: recorded
    assert "job.json: unreadable or not a job" in json.loads((truncated / "error.json").read_text())["error"]


def test_a_diverged_run_is_kept_exported_and_trained_again_only_when_asked(trained, tmp_path, capsys, monkeypatch):
    """A run whose loss becomes NaN in epoch 2 is "diverged": the next `run` leaves it (resumed with its own
    settings it diverges again: GPU time lost in every later session), status, plan and the report say so,
    export carries it (no checkpoint) so that a sweep continued elsewhere leaves it too, and
    --retry-diverged trains it again."""
    from amg_fast.train import trainer

    out = copy(trained, tmp_path / "sweep")
    shutil.rmtree(out / "runs" / AMGFNO)
    real_loss, run_epoch, trained_runs = trainer._loss, trainer.run_epoch, []

    def nan_from_epoch_2(run, epoch):  # monkeypatch restores the real loss after the test, whatever happens
        monkeypatch.setattr(trainer, "_loss", real_loss if epoch < 2 else (lambda *a: real_loss(*a) * float("nan")))
        return run_epoch(run, epoch)

    def in_this_process(self, run_dir, gpu, threads=None):  # the worker in-process, to see the patches
        trained_runs.append(Path(run_dir).name)
        return runner.run_job(str(run_dir))

    monkeypatch.setattr(trainer, "run_epoch", nan_from_epoch_2)
    monkeypatch.setattr(runner._Workers, "run", in_this_process)
    proc = in_process(capsys, "run", "table2", "--preset", "smoke", "--out", out, *PAIR)
    run_dir = out / "runs" / AMGFNO
    assert proc.returncode == cli.EXIT_DIVERGED and trained_runs == [AMGFNO]  # 4: nothing the same command retries
    assert runner.run_state(run_dir) == "diverged" and RunDir(run_dir).has_checkpoint()
    recorded = json.loads((run_dir / runner.ERROR_FILE).read_text())
    assert recorded[runner.DIVERGED_KEY] is True  # the message names the checkpoint relative to the sweep
    assert f"(runs/{AMGFNO}/checkpoint.pt) is kept" in recorded["error"] and str(tmp_path) not in recorded["error"]
    assert f"diverged: {AMGFNO}: TrainingDiverged: loss is nan at epoch 2" in proc.stderr
    assert "--retry-diverged" in proc.stderr
    assert "1 of 2 runs done; 1 not done (1 diverged; diverged ones only with --retry-diverged)" in proc.stdout
    monkeypatch.setattr(trainer, "run_epoch", run_epoch)
    monkeypatch.setattr(trainer, "_loss", real_loss)

    again = in_process(capsys, "run", "table2", "--preset", "smoke", "--out", out, *PAIR)
    assert again.returncode == cli.EXIT_DIVERGED and trained_runs == [AMGFNO]  # left alone
    assert runner.run_state(run_dir) == "diverged" and "run the same command again" not in again.stdout
    assert "1 done, 1 diverged" in in_process(capsys, "status", "--out", out).stdout
    plain_plan = in_process(capsys, "plan", "table2", "--preset", "smoke", "--out", out, *PAIR).stdout
    assert "to do:" not in plain_plan and f"diverged           -  {AMGFNO}" in plain_plan  # no estimate: not trained
    retry_plan = in_process(capsys, "plan", "table2", "--preset", "smoke", "--out", out, *PAIR, "--retry-diverged")
    assert "to do: 1 runs" in retry_plan.stdout and re.search(rf"diverged +~ +\d+ s  {AMGFNO}", retry_plan.stdout)
    assert in_process(capsys, "report", "table2", "--out", out).returncode == 0
    table = (out / "reports" / "table2" / "table.md").read_text()
    assert "1 done, 1 diverged" in table and f"- {AMGFNO} (diverged): TrainingDiverged: loss is nan" in table

    tree = tmp_path / "repo" / "results" / "sweep"
    exported = in_process(capsys, "export", out, "--to", tree)
    assert exported.returncode == 0 and "exported 2 runs" in exported.stdout
    assert runner.run_state(tree / "runs" / AMGFNO) == "diverged" and not list(tree.rglob("*.pt"))
    # its error.json without the machine's paths: the message names runs/<name>, the traceback stays in train.log
    exported_error = json.loads((tree / "runs" / AMGFNO / runner.ERROR_FILE).read_text())
    assert "traceback" not in exported_error and exported_error[runner.DIVERGED_KEY] is True
    assert f"(runs/{AMGFNO}/checkpoint.pt) is kept" in exported_error["error"], exported_error
    assert not [p for p in tree.rglob("*.json*") if str(tmp_path) in p.read_text() or str(ROOT) in p.read_text()]
    elsewhere = copy(tree, tmp_path / "machine2")
    assert in_process(capsys, "run", "table2", "--preset", "smoke", "--out", elsewhere, *PAIR).returncode == 4
    assert trained_runs == [AMGFNO]  # the other machine leaves it too
    # a diverged copy never replaces a run stopped with a checkpoint (partial) in the tree: it is skipped
    partial = copy(out, tmp_path / "partial")
    (partial / "runs" / AMGFNO / runner.ERROR_FILE).unlink()
    assert runner.run_state(partial / "runs" / AMGFNO) == "partial"
    report = runner.export_runs(out, partial)
    assert report["skipped"] == [f"{AMGFNO} (diverged; partial in {partial})"] and report["present"] == [FFNO]
    assert RunDir(partial / "runs" / AMGFNO).has_checkpoint()
    (partial / "runs" / AMGFNO / runner.ERROR_FILE).write_text(json.dumps({"error": "OSError: disk full"}))
    assert runner.export_runs(out, partial)["skipped"] == [f"{AMGFNO} (diverged; failed in {partial})"]
    # an error.json written before the "diverged" mark existed: its message says so
    old = json.loads((run_dir / runner.ERROR_FILE).read_text())
    del old[runner.DIVERGED_KEY]
    (partial / "runs" / AMGFNO / runner.ERROR_FILE).write_text(json.dumps(old))
    assert runner.run_state(partial / "runs" / AMGFNO) == "diverged"
    (partial / "runs" / AMGFNO / runner.ERROR_FILE).write_text(json.dumps({"error": "OSError: disk full"}))
    assert runner.run_state(partial / "runs" / AMGFNO) == "failed"

    retried = in_process(capsys, "run", "table2", "--preset", "smoke", "--out", out, *PAIR, "--retry-diverged")
    assert retried.returncode == 0 and "2 of 2 runs done" in retried.stdout, retried.stderr
    assert trained_runs == [AMGFNO, AMGFNO] and not (run_dir / runner.ERROR_FILE).exists()
    assert "after epoch 1" in (run_dir / runner.LOG_FILE).read_text()  # resumed from its last good checkpoint
    re_export = in_process(capsys, "export", out, "--to", tree)  # the finished run replaces the diverged one
    assert re_export.returncode == 0 and runner.run_state(tree / "runs" / AMGFNO) == "done"
    assert not (tree / "runs" / AMGFNO / runner.ERROR_FILE).exists()
    # a diverged copy never replaces a finished run
    assert sorted(runner.export_runs(elsewhere, tree)["present"]) == sorted([AMGFNO, FFNO])
    assert runner.run_state(tree / "runs" / AMGFNO) == "done"


@pytest.mark.parametrize("content", ["[1]", "{}", '{"job_id": null}', "{"], ids=["list", "empty", "null", "truncated"])
def test_a_damaged_slurm_job_record_means_submit_again(tmp_path, monkeypatch, content):
    """A second `run --launcher slurm` asks sacct about each run's last job; a damaged slurm_job.json
    was a TypeError traceback there (where sacct exists)."""
    runner.prepare_sweep(tmp_path, "smoke")
    run_dir = runner.write_job(tmp_path, RunSpec("ffno", "ks", 0.1, 32), "smoke")
    (run_dir / runner.SLURM_JOB_FILE).write_text(content)
    monkeypatch.setattr(runner.shutil, "which", lambda name: f"/usr/bin/{name}")  # as on a cluster
    assert runner._queued(run_dir, tmp_path / "slurm") is False


def test_one_preset_per_sweep_under_concurrent_starts(tmp_path):
    code = "import sys; from amg_fast.experiments import runner\n" \
           "try: runner.prepare_sweep(sys.argv[1], sys.argv[2]); print('ok')\n" \
           "except runner.SweepError: print('refused')"
    for attempt in range(2):
        out = tmp_path / f"sweep{attempt}"
        procs = [subprocess.Popen([sys.executable, "-c", code, str(out), preset], stdout=subprocess.PIPE, text=True)
                 for preset in ("smoke", "cpu")]
        said = [p.communicate()[0].strip() for p in procs]
        assert sorted(said) == ["ok", "refused"], said
        assert json.loads((out / "sweep.json").read_text())["preset"] == ("smoke", "cpu")[said.index("ok")]


def _as_before_2026_12_01(run_dir: Path) -> None:
    """Make a finished run look trained raw under its plain name, as every such run before 2026-12-01."""
    for name in (runner.JOB_FILE, "config.json"):
        data = json.loads((run_dir / name).read_text())
        config = data["config"] if name == runner.JOB_FILE else data
        config.update(normalize=False, increment=False)
        (run_dir / name).write_text(json.dumps(data))


def test_runs_trained_raw_under_their_old_names_are_refused_until_migrated(tmp_path, capsys, trained):
    """Since 2026-12-01 a KS run's plain name means --normalize --increment: an older sweep's raw runs under
    that name would count as such. Every command that reads the sweep refuses it and names `migrate`, which
    renames them (...+increment=false+normalize=false...) with their job.json spec and config paths; an
    interrupted migration (renamed, job.json not yet rewritten) finishes when run again."""
    out = copy(trained, tmp_path / "sweep")
    for run_dir in runner.run_dirs(out):
        _as_before_2026_12_01(run_dir)
    for args in (("status",), ("report", "table2"), ("plan", "table2", "--preset", "smoke", *PAIR)):
        proc = in_process(capsys, *args, "--out", out)
        assert proc.returncode == 2 and "2 runs trained with the raw output parametrisation" in proc.stderr
        assert f"reproduce.py migrate --out {out}" in proc.stderr and FFNO in proc.stderr
    (out / "runs" / FFNO).rename(out / "runs" / f"ffno_ks_nu0.1_f32{RAW}_seed0")  # a migration stopped half way
    proc = in_process(capsys, "migrate", "--out", out)
    assert proc.returncode == 0 and f"{AMGFNO} -> amgfno_ks_nu0.1_f32{RAW}_seed0" in proc.stdout, proc.stderr
    assert sorted(d.name for d in runner.run_dirs(out)) == [f"amgfno_ks_nu0.1_f32{RAW}_seed0",
                                                          f"ffno_ks_nu0.1_f32{RAW}_seed0"]
    for run_dir in runner.run_dirs(out):
        job = runner.read_job(run_dir)
        assert job["spec"].name == run_dir.name and job["config"].out == f"runs/{run_dir.name}"
        assert json.loads((run_dir / "config.json").read_text())["out"].endswith(f"/runs/{run_dir.name}")
        assert runner.run_state(run_dir) == "done"
    assert "nothing renamed" in in_process(capsys, "migrate", "--out", out).stdout
    status = in_process(capsys, "status", "--out", out)
    assert status.returncode == 0 and "2 runs: 2 done" in status.stdout, status.stderr
    fidelity = in_process(capsys, "report", "fidelity", "--out", out)  # base: FFNO and AMGFNO raw
    assert fidelity.returncode == 0 and "| FFNO | base | KS | 0.1 | 32 | 1 |" in \
        (out / "reports" / "fidelity" / "table.md").read_text(), fidelity.stderr


# -- refused before anything is written ---------------------------------------------------------
@pytest.mark.parametrize("args,message", [
    (["run", "table2", "--where", "nu=0.2"], "--where nu=0.2 matches no run of table2 (their nu values: 0.001, 0.075"),
    (["run", "table2", "--where", "nu=nan"], "--where nu=nan matches no run"),
    (["run", "table2", "--where", "seed=1"], "--where seed=1 matches no run of table2 (their seed values: 0)"),
    (["run", "table2", "alpha-convex", "--where", "model=ffno", "--where", "fusion=convex"],
     "the filters model=ffno fusion=convex together match no run"),
    (["run", "table2", "--device", "gpu0"] + PAIR, "device must be 'auto', 'cpu', 'cuda' or 'cuda:N', got 'gpu0'"),
    (["run", "table2", "--seeds", "-1"] + PAIR, "a seed must be an integer in [0, 2**32), got '-1'"),
    (["run", "table2", "--seeds", "1e20"] + PAIR, "a seed must be an integer in [0, 2**32), got '1e20'"),
    (["run", "table2", "--seeds", str(2 ** 32)] + PAIR, "a seed must be an integer in [0, 2**32)"),
    (["run", "table2", "--sbatch", "account=x\n#SBATCH --wrap=rm"] + PAIR, "control characters"),
    (["run", "table2", "--partition", "gpu\n#SBATCH --x"] + PAIR, "--partition 'gpu\\n#SBATCH --x': control"),
    (["run", "--grid", "colour=red"], "--grid: unknown key 'colour'"),
    (["run", "--grid", "lr=fast"], "--grid lr='fast': lr takes a float"),
    (["run", "--grid", "model=unet", "share_weights=true"], "--share-weights applies to the FFNO family"),
    (["run", "--grid", "model=ffno", "--grid-file", "g.toml"], "with --grid or --grid-file, not both"),
    (["run", "--grid", "model=s4ffno", "fusion=convex"], "fusion 'convex' needs alpha"),  # was a TypeError traceback
    (["run", "--grid", "model=s4ffno", "alpha=0.25,0.5"],  # was two runs named as the residual S4FFNO
     "alpha applies to fusion 'convex' or 'additive', not 'residual' (got alpha=0.25)"),
    (["run", "--grid", "model=s4ffno", "fusion=convex", "alpha=1.5"], "alpha must be in [0, 1] for convex fusion"),
    (["run"], "name at least one experiment (or all, or a --grid)"),
    (["run", "--grid", "lr=1e-3,3e-4", "--set", "lr=1e-4"], "--set lr and a grid axis lr"),  # was one run, not two
    (["run", "precision", "--set", "precision=bf16"],  # was one run: tf32's and fp32's turned into bf16's
     f"--set precision='bf16': run amgfno_ks_nu0.1_f32{RAW}+precision=tf32_seed0 sets precision='tf32' itself"),
    (["run", "--grid", "model=multi_input_ffno", "nu=0.10000000000000002", "decoder_input=last_block",
      "lr=0.00031415926535897933", "weight_decay=1.2345678901234567e-05", "share_weights=true", "weight_norm=true",
      "normalize=true", "increment=true", "eval_every=3", "checkpoint_every=7", "batch_size=512", "epochs=1000",
      "n_train=123456", "n_test=65432", "width=1024", "precision=bf16", "eval_batch_size=64"],
     "bytes; a directory name holds at most 255"),  # was an OSError (File name too long) after sweep.json
    (["run", "table2", "--budget-s", "60", "--launcher", "slurm"] + PAIR,  # was ignored without a word
     "--budget-s applies to --launcher local"),
    (["run", "table2", "--budget-s", "nan"] + PAIR, "--budget-s must be a finite number of seconds > 0, got nan"),
    (["run", "ns2d", "--where", "res=48"],  # issue 22; the values were sorted as text (16, 32, 64, 8)
     "--where res=48 matches no run of ns2d (their res values: 8, 16, 32, 64)"),
    (["run", "--grid", "model=amgfno2d", "pde=ks"], "--model amgfno2d is a 2D model ([B, T, X, Y, C]) and --pde ks "
                                                    "is 1D data"),
    (["run", "--grid", "model=ffno2d", "pde=ns2d", "ns_grid=15"],
     "ns_grid (the 2D solver's points per axis) must be an even integer >= 8, got 15"),
], ids=["nu-absent", "nu-nan", "seed-absent", "filters-together", "device", "seed-negative", "seed-1e20",
        "seed-2^32", "sbatch-newline", "partition-newline", "grid-key", "grid-value", "grid-combination",
        "grid-twice", "grid-fusion-without-alpha", "grid-alpha-without-fusion", "grid-convex-alpha", "nothing",
        "set-grid-axis", "set-experiment-setting", "name-too-long", "budget-slurm", "budget", "ns2d-res-absent",
        "grid-2d-model-on-ks", "grid-ns-grid-odd"])
def test_refused_commands_write_nothing(tmp_path, capsys, args, message):
    out = tmp_path / "sweep"
    proc = in_process(capsys, *args, "--preset", "smoke", "--out", out)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and not out.exists()


def test_bad_grid_files_and_set_items_are_named(tmp_path, capsys):
    grid = tmp_path / "grid.toml"
    grid.write_bytes(b"\xff\xfe lr = [1e-3]")
    proc = in_process(capsys, "run", "--grid-file", grid, "--preset", "smoke", "--out", tmp_path / "sweep")
    assert proc.returncode == 2 and f"--grid-file {grid}: not UTF-8 text (invalid start byte at byte 0)" in proc.stderr
    proc = in_process(capsys, "run", "table2", "--set", "lr", "--preset", "smoke", "--out", tmp_path / "sweep", *PAIR)
    assert proc.returncode == 2 and "--set takes KEY=VALUE; got 'lr'" in proc.stderr  # was "KEY=V1,V2,..."
    assert not (tmp_path / "sweep").exists()


def test_out_that_is_no_sweep_is_refused(tmp_path, capsys):
    afile = tmp_path / "afile"
    afile.write_text("x")
    proc = in_process(capsys, "run", "table2", "--preset", "smoke", "--out", afile, *PAIR)
    assert proc.returncode == 2 and f"--out {afile} is a file, not a sweep directory" in proc.stderr
    train_dir = tmp_path / "trainrun"  # a scripts/train.py run directory
    train_dir.mkdir()
    (train_dir / "config.json").write_text("{}")
    proc = in_process(capsys, "run", "table2", "--preset", "smoke", "--out", train_dir, *PAIR)
    assert proc.returncode == 2 and "not a sweep directory (no sweep.json) and not empty (a train.py run directory?)" \
        in proc.stderr
    assert sorted(p.name for p in train_dir.iterdir()) == ["config.json"]
    for command in (["status"], ["report", "table2"]):
        proc = in_process(capsys, *command, "--out", afile)
        assert proc.returncode == 2 and "is a file, not a sweep directory" in proc.stderr


def test_status_without_runs_and_a_run_directory_that_is_a_file(tmp_path, capsys):
    out = tmp_path / "sweep"
    runner.prepare_sweep(out, "smoke")
    proc = in_process(capsys, "status", "--out", out)
    assert proc.returncode == 0 and "0 runs: none yet" in proc.stdout, proc.stderr
    (out / "runs").mkdir()
    (out / "runs" / FFNO).write_text("not a directory")
    proc = in_process(capsys, "run", "table2", "--preset", "smoke", "--out", out, *PAIR)
    assert proc.returncode == 2 and f"runs/{FFNO} is a file, not a run directory; move it away" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("path,is_dir,message", [
    ("runs", False, "runs is a file, not the sweep's runs directory"),
    ("data", False, "data is a file, not the sweep's data directory"),
    (f"runs/{FFNO}/job.json", True, f"runs/{FFNO}/job.json is not a file"),
    ("reports/table2", False, "table2: report folder"),
], ids=["runs", "data", "job.json", "report-folder"])
def test_a_file_where_a_sweep_has_a_folder_or_the_reverse_is_named(tmp_path, capsys, path, is_dir, message):
    """Formerly tracebacks (NotADirectoryError, IsADirectoryError, FileExistsError) from run and report."""
    out = tmp_path / "sweep"
    runner.prepare_sweep(out, "smoke")
    if path.startswith("reports"):
        runner.write_job(out, RunSpec("ffno", "ks", 0.1, 32), "smoke")
        RunDir(out / "runs" / FFNO).write_results(run_results(model="ffno"))
    (out / path).parent.mkdir(parents=True, exist_ok=True)
    (out / path).mkdir() if is_dir else (out / path).write_text("x")
    command = ["report", "table2"] if path.startswith("reports") else ["run", "table2", "--preset", "smoke", *PAIR]
    proc = in_process(capsys, *command, "--out", out)
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_an_os_error_the_checks_did_not_foresee_is_one_line(tmp_path, capsys, monkeypatch):
    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(runner, "write_job", full_disk)
    proc = in_process(capsys, "run", "table2", "--preset", "smoke", "--out", tmp_path / "sweep", *PAIR)
    assert proc.returncode == 1 and proc.stderr.strip().endswith("error: [Errno 28] No space left on device")
    assert "Traceback" not in proc.stderr


def test_report_never_overwrites_a_table_with_an_empty_one(trained, tmp_path, capsys):
    out = copy(trained, tmp_path / "sweep")
    assert in_process(capsys, "report", "table3", "--out", out).returncode == 0
    table = (out / "reports" / "table3" / "table.md").read_text()
    proc = in_process(capsys, "report", "table3", "--out", out, "--omega-from", "paper")  # a data-omega sweep
    assert proc.returncode == 1
    assert "table3: no finished run in" in proc.stderr and "the sweep has its runs with --omega-from data" in proc.stderr
    assert (out / "reports" / "table3" / "table.md").read_text() == table
    proc = in_process(capsys, "report", "table2", "--out", out)
    assert proc.returncode == 0 and "lacks 82 of its 84 runs (seeds 0): ffno_ks_nu0.075_f32_seed0" in proc.stdout


# -- KS data readings (the fidelity experiment's @lpsda runs) --------------------------------------
def test_a_reading_run_trains_on_the_data_of_its_reading(tmp_path, capsys):
    out = tmp_path / "sweep"
    proc = in_process(capsys, "run", "fidelity", "--preset", "smoke", "--out", out, "--where", "model=ffno",
                      "reading=s4ffno-t5")
    assert proc.returncode == 0, proc.stderr
    (run_dir,) = runner.run_dirs(out)
    assert run_dir.name == f"ffno_ks_nu0.1_f32{RAW}+reading=s4ffno-t5_seed0"
    data = Path(json.loads((run_dir / "config.json").read_text())["data"])
    assert data.parent == out.resolve() / "data" and data.name.startswith("ks_nu0.1_terms10_kmax7_tend5_dt0.2_")
    assert [p.name for p in (out / "data").glob("*.h5")] == [data.name]  # the default data set never made


def test_omega_of_each_reading(capsys):
    from amg_fast.experiments.readings import READINGS

    proc = in_process(capsys, "omega", "--n", 1, "--nu", 0.1)
    assert proc.returncode == 0, proc.stderr
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| 0.1 |")]
    assert len(rows) == len(READINGS) == 8 and "s4ffno IC [0, 5], dt 0.2 (26 frames) (`s4ffno-t5`)" in proc.stdout
    assert all(0.0 <= float(cell) <= 1.0 for row in rows for cell in row.strip("| ").split(" | ")[2:])
