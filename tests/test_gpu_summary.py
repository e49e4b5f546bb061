"""bench/gpu_summary.py: its dry run writes every key of the summary schema (issue 19 item 1), nulls
where a provider could not run, skips what the budget cannot fit, and judges the targets right.

The dry runs are CPU runs at tiny shapes: their times mean nothing; what is checked is the schema,
the nulls, the checks against the float64 reference and the bookkeeping.
"""
import datetime
import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).parents[1]
SCRIPT = ROOT / "bench" / "gpu_summary.py"
MODES = ("fp32", "tf32", "bf16")
STEP_PROVIDERS = ("eager", "compiled_graph", "triton_graph")
OPS = ("spectral_conv", "feed_forward", "s4d", "gate")
SIZES = ("32", "64", "128")


def load_gpu_summary():
    spec = importlib.util.spec_from_file_location("gpu_summary", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def dry_run(tmp_path, *flags, interpret=False):
    """Run the script's dry run (Triton's interpreter only if interpret) -> (exit code, summary, output)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    if interpret:
        env["TRITON_INTERPRET"] = "1"
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--dry-run", "--out", str(out), *flags], env=env,
                          capture_output=True, text=True, timeout=600)
    path = out / "summary.json"
    summary = json.loads(path.read_text()) if path.exists() else None
    return proc.returncode, summary, proc.stdout + proc.stderr


def is_ms(value) -> bool:
    return isinstance(value, float) and value > 0


def assert_schema(summary: dict) -> None:
    """The keys and types every summary has, whatever ran (a missing cell is null, never absent)."""
    for key in ("gpu", "torch", "triton", "date", "train_step_ms", "op_ms", "kernels_per_step", "profile",
                "variants", "targets", "errors", "skipped", "checks", "command", "budget"):
        assert key in summary, key
    assert isinstance(summary["torch"], str) and summary["triton"] is None or isinstance(summary["triton"], str)
    assert datetime.datetime.fromisoformat(summary["date"]).tzinfo is not None
    assert set(summary["train_step_ms"]) == set(MODES)
    for mode in MODES:
        assert set(summary["train_step_ms"][mode]) == set(STEP_PROVIDERS)
        for provider in STEP_PROVIDERS:
            cells = summary["train_step_ms"][mode][provider]
            assert set(SIZES) <= set(cells) and all(v is None or is_ms(v) for v in cells.values())
    assert set(summary["op_ms"]) == set(OPS)
    for op in OPS:
        cell = summary["op_ms"][op]["128"]
        assert {"triton", "reference", "floor"} <= set(cell) and is_ms(cell["floor"])
        assert all(cell[p] is None or is_ms(cell[p]) for p in ("triton", "reference"))
    assert set(summary["kernels_per_step"]) == {"reference", "triton"}
    assert all(v is None or isinstance(v, int) for v in summary["kernels_per_step"].values())
    assert set(summary["profile"]) == set(MODES)
    for record in summary["profile"].values():
        if record is not None:
            assert_profile(record)
    assert isinstance(summary["budget"]["budget_s"], float) and isinstance(summary["budget"]["parts"], list)
    for target in summary["targets"]:
        assert {"name", "measured", "target", "met", "missed_by"} <= set(target)
    assert all({"part", "message"} <= set(e) for e in summary["errors"])
    assert all({"part", "reason"} <= set(s) for s in summary["skipped"])


def assert_profile(record: dict) -> None:
    """A profile part's record: ms per step by phase, op and kernel, whose rows add up to the total."""
    assert {"S", "steps", "time_kind", "device_ms_per_step", "by_phase", "by_op", "by_kernel",
            "by_kernel_left_off"} <= set(record)
    assert record["time_kind"] in ("cuda_device", "cpu_self") and record["steps"] >= 1
    assert set(record["by_phase"]) == {"forward", "backward", "optimizer", "unattributed"}
    total = record["device_ms_per_step"]
    assert sum(record["by_phase"].values()) == pytest.approx(total, abs=1e-3)
    assert sum(r["ms"] for r in record["by_op"]) == pytest.approx(total, abs=1e-3)
    kernel_ms = sum(r["ms"] for r in record["by_kernel"]) + record["by_kernel_left_off"]["ms"]
    assert kernel_ms == pytest.approx(total, abs=1e-3)
    for key, fields in (("by_op", {"phase", "op", "ms", "kernels"}), ("by_kernel", {"phase", "op", "kernel", "ms", "calls"})):
        assert all(set(r) == fields and r["phase"] in record["by_phase"] for r in record[key])
        assert [r["ms"] for r in record[key]] == sorted((r["ms"] for r in record[key]), reverse=True)


@pytest.mark.slow
def test_dry_run_writes_the_schema_with_nulls_where_nothing_ran(tmp_path):
    """Without Triton's interpreter the triton cells are null (skipped, with the reason); the
    reference, compiled (Dynamo only) and kernel-count parts run; a variant setting a variable that is no
    kernel switch runs in its own process."""
    code, summary, output = dry_run(tmp_path, "--modes", "fp32,bf16", "--sizes", "32", "--op-size", "32",
                                    "--variant", "gemm:AMG_FAST_FFN_METHOD=gemm,AMG_X=1")
    assert code == 0, output
    assert_schema(summary)
    assert summary["gpu"] is None and summary["dry_run"] is True and summary["errors"] == []
    assert "--dry-run" in summary["command"] and "gemm:AMG_FAST_FFN_METHOD=gemm,AMG_X=1" in summary["command"]
    step = summary["train_step_ms"]
    for mode in ("fp32", "bf16"):
        assert is_ms(step[mode]["eager"]["32"]) and is_ms(step[mode]["compiled_graph"]["32"])
        assert step[mode]["triton_graph"]["32"] is None
        assert step[mode]["eager"]["64"] is None and step[mode]["eager"]["128"] is None  # not asked for
    assert all(v is None for provider in STEP_PROVIDERS for v in step["tf32"][provider].values())
    skipped = {s["part"]: s["reason"] for s in summary["skipped"]}
    assert "TRITON_INTERPRET=1" in skipped["triton_graph fp32 S=32"] and "triton_graph bf16 S=32" in skipped
    for op in OPS:
        cell = summary["op_ms"][op]["32"]
        assert is_ms(cell["reference"]) and cell["triton"] is None and is_ms(cell["floor"])
        assert summary["op_ms"][op]["128"]["reference"] is None  # the table ran at S = 32
    assert summary["op_ms"] == summary["op_ms_by_precision"]["fp32"]
    assert isinstance(summary["kernels_per_step"]["reference"], int) and summary["kernels_per_step"]["triton"] is None
    assert summary["kernel_count_kind"] == "cpu_aten_kernel_ops"
    assert summary["profile"] == {"fp32": None, "tf32": None, "bf16": None}  # the Triton step's, skipped
    assert "TRITON_INTERPRET=1" in skipped["profile fp32"] and "profile bf16" in skipped
    variant = summary["variants"]["gemm"]
    assert variant["env"] == {"AMG_FAST_FFN_METHOD": "gemm", "AMG_X": "1"} and variant["exit_code"] == 0
    assert variant["train_step_ms"]["fp32"]["32"] is None and len(variant["skipped"]) == 2  # fp32, bf16 at S = 32
    assert (tmp_path / "out" / "variants" / "gemm" / "summary.json").exists()
    # every timed result was checked against the float64 reference, and passed
    whats = {c["what"] for c in summary["checks"]}
    assert {"train_step fp32 eager S=32", "train_step bf16 compiled_graph S=32", "op fp32 gate reference S=32"} <= whats
    assert all(c["ok"] for c in summary["checks"])
    targets = {t["name"]: t for t in summary["targets"]}
    assert targets["Triton step at S = 128, tf32"]["met"] is None  # nothing measured: neither met nor missed
    md = (tmp_path / "out" / "summary.md").read_text()
    assert "## Training step" in md and "## Per op" in md and "| fp32 | 32 |" in md
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["summary.json", "summary.md", "variants"]


@pytest.mark.slow
def test_dry_run_times_triton_in_the_interpreter(tmp_path):
    code, summary, output = dry_run(tmp_path, "--parts", "triton", "--modes", "fp32,bf16", "--sizes", "32",
                                    interpret=True)  # about 5 s of interpreted kernels
    assert code == 0, output
    assert_schema(summary)
    assert is_ms(summary["train_step_ms"]["fp32"]["triton_graph"]["32"])
    assert summary["train_step_ms"]["bf16"]["triton_graph"]["32"] is None  # bf16 is wrong in the interpreter
    assert "bf16" in {s["part"]: s["reason"] for s in summary["skipped"]}["triton_graph bf16 S=32"]
    [check] = summary["checks"]
    assert check["what"] == "train_step fp32 triton_graph S=32" and check["ok"] and check["rel_err"] < 1e-4
    assert [p["status"] for p in summary["budget"]["parts"]] == ["done", "skipped"]


@pytest.mark.slow
def test_dry_run_profiles_the_triton_step_in_the_interpreter(tmp_path):
    """The profile part on CPU: the ops that would launch kernels (the Triton launches among them),
    grouped by phase and op; its first step checked against the float64 reference; bf16 skipped."""
    code, summary, output = dry_run(tmp_path, "--parts", "profile", "--modes", "fp32,bf16", "--op-size", "8",
                                    interpret=True)  # about 5 s of interpreted kernels
    assert code == 0, output
    assert_schema(summary)
    record = summary["profile"]["fp32"]
    assert record["S"] == 8 and record["steps"] == 2 and record["time_kind"] == "cpu_self"
    assert all(record["by_phase"][phase] > 0 for phase in ("forward", "backward", "optimizer"))
    ops = {(r["phase"], r["op"]) for r in record["by_op"]}
    assert {("forward", "amg_fast::spectral_conv1d_fwd"), ("backward", "SpectralConv1dFnBackward"),
            ("optimizer", "aten::_fused_adam_")} <= ops
    assert any(r["kernel"].startswith("triton::") for r in record["by_kernel"])
    assert summary["profile"]["bf16"] is None and "bf16" in {s["part"]: s["reason"] for s in summary["skipped"]}["profile bf16"]
    [check] = summary["checks"]
    assert check["what"] == "profile fp32 triton S=8" and check["ok"]
    md = (tmp_path / "out" / "summary.md").read_text()
    assert "## Where the Triton step's time goes" in md and "| fp32 | backward | `SpectralConv1dFnBackward` |" in md


@pytest.mark.slow
def test_dry_run_profiles_a_variant_beside_the_default(tmp_path):
    """--profile-variants: the named variant's step profiled with its switches set, after the variants, into
    its own entry (checked there against the float64 reference), its table in summary.md below the default's;
    the default's profile unchanged by it."""
    code, summary, output = dry_run(tmp_path, "--parts", "profile,variants", "--modes", "fp32", "--op-size", "8",
                                    "--sizes", "32", "--variant", "epi:AMG_FAST_FFN_METHOD=epilogue",
                                    "--profile-variants", "epi", interpret=True)  # one variant cell: suite time
    assert code == 0, output
    assert_schema(summary)
    entry = summary["variants"]["epi"]
    assert_profile(entry["profile"]["fp32"])
    variant_ops = {r["op"] for r in entry["profile"]["fp32"]["by_op"]}
    default_ops = {r["op"] for r in summary["profile"]["fp32"]["by_op"]}  # fp32 mode's default: the row GEMMs
    assert "amg_fast::feed_forward_gemm_fwd" in default_ops and "amg_fast::feed_forward_gemm_fwd" not in variant_ops
    assert entry["profile"]["tf32"] is None and [c["what"] for c in entry["checks"]] == [
        "train_step fp32 triton_graph S=32", "profile fp32 triton S=8"]
    assert [p["part"] for p in summary["budget"]["parts"]] == ["profile fp32", "variant epi", "profile variant epi fp32"]
    md = (tmp_path / "out" / "summary.md").read_text()
    assert md.index("## Where the Triton step's time goes") < md.index("## Where variant epi's step's time goes")


@pytest.mark.slow
def test_dry_run_times_switch_variants_in_this_process(tmp_path):
    """A variant of kernel switches only is timed in the script's own process (no subprocess, no variants/
    folder): its cells timed and checked against the float64 reference; a bad switch value fails that variant
    by name, and the next variant runs with the environment and switches as before it."""
    code, summary, output = dry_run(tmp_path, "--parts", "triton,variants", "--modes", "fp32", "--sizes", "32",
                                    "--variant", "four:AMG_FAST_SPECTRAL_MIX=four",
                                    "--variant", "bad:AMG_FAST_SPECTRAL_MIX=three",
                                    "--variant", "gemm:AMG_FAST_FFN_METHOD=gemm", interpret=True)
    assert code == 1, output  # the bad variant
    assert_schema(summary)
    variants = summary["variants"]
    for name in ("four", "gemm"):
        entry = variants[name]
        assert entry["in_process"] and entry["exit_code"] == 0 and entry["errors"] == [], entry
        assert is_ms(entry["train_step_ms"]["fp32"]["32"]) and entry["train_step_ms"]["tf32"]["32"] is None
        [check] = entry["checks"]
        assert check["what"] == "train_step fp32 triton_graph S=32" and check["ok"]
    bad = variants["bad"]
    assert bad["exit_code"] == 1 and bad["train_step_ms"]["fp32"]["32"] is None
    assert [e["part"] for e in bad["errors"]] == ["variant bad"] and "AMG_FAST_SPECTRAL_MIX" in bad["errors"][0]["message"]
    [error] = summary["errors"]
    assert error["part"] == "variant bad" and "AMG_FAST_SPECTRAL_MIX" in error["message"] and "three" in error["message"]
    assert [c["what"] for c in summary["checks"]] == ["train_step fp32 triton_graph S=32"]  # the default's only
    assert [(p["part"], p["status"]) for p in summary["budget"]["parts"]] == [
        ("triton_graph fp32 S=32", "done"), ("variant four", "done"), ("variant bad", "failed"),
        ("variant gemm", "done")]
    assert not (tmp_path / "out" / "variants").exists()


@pytest.fixture
def switches_reread():
    """After the test (and, listed before monkeypatch, after its environment is restored): the switch settings
    read again, so that no later test in this process sees the test's."""
    yield
    from amg_fast.kernels import limits
    limits.reread_switches()


def test_switches_set_reads_the_switches_again_and_restores_them(switches_reread, monkeypatch):
    """switches_set: the import-time spectral switches and the per-call ones see the variant's values inside
    the block; afterwards the environment (a preset value, an unset one) and the settings are as before,
    an error inside the block included. Only kernel switches run in this process."""
    gs = load_gpu_summary()
    from amg_fast.kernels import limits, spectral_conv as sc
    monkeypatch.setenv("AMG_FAST_SPECTRAL_X3", "dot")
    monkeypatch.delenv("AMG_FAST_SPECTRAL_MIX", raising=False)
    monkeypatch.delenv("AMG_FAST_FFN_METHOD", raising=False)
    limits.reread_switches()
    assert (sc.MIX_METHOD, sc.X3_METHOD) == ("auto", "dot")
    with pytest.raises(KeyError):
        with gs.switches_set({"AMG_FAST_SPECTRAL_MIX": "torch", "AMG_FAST_SPECTRAL_X3": "split",
                              "AMG_FAST_FFN_METHOD": "epilogue", "AMG_FAST_SPECTRAL_TRANSFORM": "fft"}):
            assert (sc.MIX_METHOD, sc.X3_METHOD, limits.SPECTRAL_TRANSFORM_AUTO) == ("torch", "split", "fft")
            assert limits.ffn_method("auto") == "epilogue" and limits.spectral_transform("auto", 32) == "fft"
            raise KeyError("inside")
    assert "AMG_FAST_SPECTRAL_MIX" not in os.environ and os.environ["AMG_FAST_SPECTRAL_X3"] == "dot"
    assert (sc.MIX_METHOD, sc.X3_METHOD, limits.SPECTRAL_TRANSFORM_AUTO) == ("auto", "dot", "auto")
    assert limits.ffn_method("auto") == "gemm"  # fp32 mode's default (TF32 not allowed here)
    monkeypatch.delenv("AMG_FAST_SPECTRAL_X3")
    limits.reread_switches()
    assert sc.X3_METHOD == "split"
    assert gs.in_process(gs.Variant("a", {"AMG_FAST_S4D_METHOD": "scan", "AMG_FAST_SPECTRAL_MIX": "four"}))
    assert not gs.in_process(gs.Variant("b", {"AMG_FAST_S4D_METHOD": "scan", "TRITON_DEBUG": "1"}))


def test_an_in_process_variant_records_its_misses_and_stops_at_a_broken_context(tmp_path, monkeypatch):
    """In-process variants (the step faked): each cell runs with the variant's switch set; a missed check goes to
    the variant's checks and errors (exit_code 1, the part failed), not the summary's checks; a CUDA context
    broken in a cell ends the variant's cells and restarts the script, the variants after it resumed."""
    module = load_gpu_summary()
    argv = ["--dry-run", "--out", str(tmp_path / "out"), "--parts", "variants", "--modes", "fp32,tf32",
            "--sizes", "32,128", "--variant", "miss:AMG_FAST_S4D_METHOD=scan",
            "--variant", "fault:AMG_FAST_S4D_METHOD=toeplitz_loop", "--variant", "later:AMG_FAST_GATE_X3=dot"]
    seen = []

    def fake_step(self, provider, mode, S, variant=None):
        seen.append((variant is not None, mode, S, module.os.environ.get("AMG_FAST_S4D_METHOD")))
        variant["train_step_ms"][mode][str(S)] = 1.0
        wrong = 2.0 if (mode, S, seen[-1][3]) == ("tf32", 128, "scan") else 1.0  # variant miss's last cell
        self.check(f"train_step {mode} {provider} S={S}", torch.ones(3), torch.full((3,), wrong), mode, record=variant)

    context = {"releases": 0, "breaks_at": 7}  # miss: 4 cells + the part's end; fault: its second cell breaks it

    def release():  # a broken context stays broken (in this process)
        context["releases"] += 1
        return context["releases"] < context["breaks_at"]

    monkeypatch.setattr(module.Session, "run_step", fake_step)
    monkeypatch.setattr(module, "_release", release)
    monkeypatch.setattr(module.os, "execv", lambda path, args: (_ for _ in ()).throw(Restarted(args)))
    monkeypatch.delenv("AMG_FAST_S4D_METHOD", raising=False)
    with pytest.raises(Restarted):
        module.Session(module.parse_args(argv), argv).run()
    assert seen == [(True, "fp32", 32, "scan"), (True, "fp32", 128, "scan"), (True, "tf32", 32, "scan"),
                    (True, "tf32", 128, "scan"), (True, "fp32", 32, "toeplitz_loop"), (True, "fp32", 128, "toeplitz_loop")]
    assert "AMG_FAST_S4D_METHOD" not in os.environ
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    miss, fault = summary["variants"]["miss"], summary["variants"]["fault"]
    assert miss["exit_code"] == 1 and miss["in_process"] and miss["out"] is None and summary["checks"] == []
    assert [c["ok"] for c in miss["checks"]] == [True, True, True, False]
    assert [e["part"] for e in miss["errors"]] == ["variant miss"] and "tf32 triton_graph S=128" in miss["errors"][0]["message"]
    assert fault["exit_code"] == 1 and fault["errors"][-1]["message"] == "the CUDA context broke (a CUDA fault)"
    assert fault["train_step_ms"]["tf32"]["32"] is None  # the cells after the fault did not run
    assert [(p["part"], p["status"]) for p in summary["budget"]["parts"]] == [("variant miss", "failed"),
                                                                            ("variant fault", "failed")]
    context["breaks_at"] = math.inf  # the fresh process
    resumed = module.Session(module.parse_args(argv + ["--resume"]), argv + ["--resume"])
    assert resumed.run() == 1
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["variants"]["later"]["exit_code"] == 0 and summary["variants"]["miss"]["exit_code"] == 1
    assert [p["part"] for p in summary["budget"]["parts"]][-1] == "variant later"


def test_an_interrupted_in_process_variant_is_unfinished_and_never_adopted(tmp_path, monkeypatch):
    """SIGINT / SIGTERM in a variant's third cell (the campaign stops a bench at its time limit so): the script
    exits 130 with the environment restored, the variant's exit_code null (not 0: its two timed cells, twice as
    fast as the default, must not be adopted) and its part left for --resume."""
    from helpers import load_bench
    module = load_gpu_summary()
    argv = ["--dry-run", "--out", str(tmp_path / "out"), "--parts", "variants", "--modes", "fp32,tf32",
            "--sizes", "32,128", "--variant", "cut:AMG_FAST_S4D_METHOD=scan"]
    cells = []

    def fake_step(self, provider, mode, S, variant=None):
        cells.append((mode, S))
        if len(cells) == 3:
            raise KeyboardInterrupt
        variant["train_step_ms"][mode][str(S)] = 1.0
        self.check(f"train_step {mode} {provider} S={S}", torch.ones(3), torch.ones(3), mode, record=variant)

    monkeypatch.setattr(module.Session, "run_step", fake_step)
    monkeypatch.delenv("AMG_FAST_S4D_METHOD", raising=False)
    assert module.Session(module.parse_args(argv), argv).run() == 130
    assert "AMG_FAST_S4D_METHOD" not in os.environ
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    entry = summary["variants"]["cut"]
    assert entry["exit_code"] is None and entry["errors"] == [] and entry["train_step_ms"]["fp32"] == {
        "32": 1.0, "64": None, "128": 1.0}
    assert summary["budget"]["parts"] == [] and summary["skipped"][0]["part"] == "variant cut"
    summary["dry_run"] = False  # as a GPU's summary, with a default twice as slow
    summary["train_step_ms"]["fp32"]["triton_graph"].update({"32": 2.0, "128": 2.0})
    _, [row] = load_bench("adopt_variants").adopt(summary)
    assert not row["adopted"] and "did not finish cleanly (exit None" in row["why"], row


def test_warm_up_plans_each_triton_step_the_bench_would_time(tmp_path):
    """--warm-up (here with no budget: the plan only, every part skipped) runs the Triton step of each mode at the
    bench's sizes and at --op-size when the ops or profile part runs, then each in-process variant (a variant
    with another variable compiles in its own subprocess); no cell is timed, nothing is checked."""
    code, summary, output = dry_run(tmp_path, "--warm-up", "--budget-s", "0", "--modes", "fp32,tf32", "--sizes", "32,64",
                                    "--op-size", "128", "--parts", "triton,profile,variants",
                                    "--variant", "gemm:AMG_FAST_FFN_METHOD=gemm", "--variant", "env:AMG_X=1")
    assert code == 0, output
    assert_schema(summary)
    assert summary["warm_up"] is True and summary["checks"] == []
    assert [p["part"] for p in summary["budget"]["parts"]] == [
        "warm fp32 S=32", "warm fp32 S=64", "warm fp32 S=128", "warm tf32 S=32", "warm tf32 S=64", "warm tf32 S=128",
        "warm variant gemm"]
    code, summary, output = dry_run(tmp_path, "--warm-up", "--budget-s", "0", "--modes", "fp32", "--sizes", "64,128",
                                    "--op-size", "128", "--parts", "kernels,ops")
    assert [p["part"] for p in summary["budget"]["parts"]] == ["warm fp32 S=64", "warm fp32 S=128"]  # no duplicate
    assert "warm-up (compile only" in (tmp_path / "out" / "summary.md").read_text()
    code, summary, output = dry_run(tmp_path, "--warm-up", "--budget-s", "0", "--modes", "bf16", "--sizes", "32",
                                    "--parts", "triton")
    assert [p["part"] for p in summary["budget"]["parts"]] == ["warm bf16 S=32"]


def test_variants_are_timed_at_the_target_sizes():
    """A variant chooses a default where the targets are judged (S = 32, 128): S = 64 is left out when
    asked for beside them; sizes without a target size are all kept."""
    gs = load_gpu_summary()
    assert gs.variant_sizes([32, 64, 128]) == [32, 128] and gs.variant_sizes([128]) == [128]
    assert gs.variant_sizes([64, 256]) == [64, 256]


def test_a_variant_is_estimated_at_least_at_its_prior():
    """A part's estimate is the last of its kind's time, but a variant's never below PRIOR_S (a cuBLAS variant that
    compiled nothing must not let the next one, which compiles its kernels, start at the end of the budget)."""
    from types import SimpleNamespace

    gs = load_gpu_summary()
    session = SimpleNamespace(last_s={"variant": 2.0, "variant/subprocess": 50.0, "triton": 1.5})
    assert gs.Session.estimate(session, "variant") == gs.PRIOR_S["variant"]
    assert gs.Session.estimate(session, "variant/subprocess") == 50.0 and gs.Session.estimate(session, "triton") == 1.5
    assert gs.Session.estimate(SimpleNamespace(last_s={}), "compiled") == gs.PRIOR_S["compiled"]


def test_budget_skips_what_does_not_fit(tmp_path):
    """A zero budget starts no part: each is listed as skipped with the budget as the reason, every
    cell stays null, and the summary is still complete."""
    code, summary, output = dry_run(tmp_path, "--budget-s", "0", "--variant", "v:A=1")
    assert code == 0, output
    assert_schema(summary)
    assert summary["budget"]["budget_s"] == 0.0 and summary["checks"] == [] and summary["errors"] == []
    parts = summary["budget"]["parts"]
    assert len(parts) == 3 * 3 * 2 + 3 * 4 + 3 + 3 + 3 * 3 + 1 and all(p["status"] == "skipped" for p in parts)
    assert all("of the budget left" in s["reason"] for s in summary["skipped"])
    assert [p["part"] for p in parts[:2]] == ["triton_graph fp32 S=32", "eager fp32 S=32"]  # most important first
    # the paper's mode complete (steps, then the per-op table, kernel count and profile) before the other modes
    assert [p["part"] for p in parts[6:13]] == ["ops fp32 spectral_conv", "ops fp32 feed_forward", "ops fp32 s4d",
                                               "ops fp32 gate", "kernels fp32", "profile fp32",
                                               "triton_graph tf32 S=32"]
    # the variants (they choose defaults), then the other modes' profiles (more CUPTI cycles in one process, untried
    # on a GPU), before the compiled step (a comparison), its target sizes first
    assert [p["part"] for p in parts[-13:-7]] == ["kernels bf16", "variant v", "profile tf32", "profile bf16",
                                                 "compiled_graph fp32 S=32", "compiled_graph fp32 S=128"]
    assert [p["part"] for p in parts[-4:]] == ["compiled_graph bf16 S=128", "compiled_graph fp32 S=64",
                                               "compiled_graph tf32 S=64", "compiled_graph bf16 S=64"]
    assert all(v is None for mode in MODES for provider in STEP_PROVIDERS
               for v in summary["train_step_ms"][mode][provider].values())


class Restarted(Exception):
    """Raised by the test's stand-in for os.execv."""


def test_a_broken_cuda_context_restarts_the_script_which_resumes_without_repeating_parts(tmp_path, monkeypatch):
    """After a part that leaves the CUDA context broken (faked: _release says so once), the part is
    recorded with the error and the script re-executes itself with --resume; the resumed process runs
    only the parts not recorded, on the same clock, and keeps the first process's cells."""
    module = load_gpu_summary()
    argv = ["--dry-run", "--out", str(tmp_path / "out"), "--parts", "eager", "--modes", "fp32", "--sizes", "32,64"]
    health = iter([False])
    monkeypatch.setattr(module, "_release", lambda: next(health, True))

    def execv(path, args):
        raise Restarted(args)

    monkeypatch.setattr(module.os, "execv", execv)
    with pytest.raises(Restarted) as restarted:
        module.Session(module.parse_args(argv), argv).run()
    assert restarted.value.args[0][1:] == [str(SCRIPT), *argv, "--resume"]
    first = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert [(p["part"], p["status"]) for p in first["budget"]["parts"]] == [("eager fp32 S=32", "failed")]
    assert [e["message"] for e in first["errors"]] == [
        "the CUDA context broke in this part (a CUDA fault); the parts after it ran in a fresh process"]
    assert is_ms(first["train_step_ms"]["fp32"]["eager"]["32"])

    resumed = module.Session(module.parse_args(argv + ["--resume"]), argv + ["--resume"])
    assert resumed.run() == 1  # the first process's error stays
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert [p["part"] for p in summary["budget"]["parts"]] == ["eager fp32 S=32", "eager fp32 S=64"]
    assert summary["budget"]["processes"] == 2 and summary["budget"]["elapsed_s"] >= first["budget"]["elapsed_s"]
    assert summary["train_step_ms"]["fp32"]["eager"]["32"] == first["train_step_ms"]["fp32"]["eager"]["32"]
    assert is_ms(summary["train_step_ms"]["fp32"]["eager"]["64"]) and summary["command"] == first["command"]


def fabricated(module, tmp_path):
    """A summary as new_summary builds it for the GPU run's defaults (no machine needed)."""
    args = module.parse_args(["--out", str(tmp_path)])
    info = {"gpu": "NVIDIA H100 80GB HBM3", "date": "2026-01-01T00:00:00+00:00", "commit": None,
            "commit_dirty": None, "kernel_switches": {},
            "versions": {"torch": "2.11.0", "triton": "3.6.0", "cuda": "13.0"}}
    return module.new_summary(args, info, "cuda", ["python", "bench/gpu_summary.py", "--out", str(tmp_path)])


def test_targets_say_what_is_met_and_by_how_much_what_is_missed(tmp_path):
    module = load_gpu_summary()
    summary = fabricated(module, tmp_path)
    assert summary["gpu_spec"]["label"] == "H100 SXM" and summary["gpu_spec"]["matched"]
    step = summary["train_step_ms"]
    step["tf32"]["triton_graph"].update({"32": 1.5, "128": 14.0})
    step["tf32"]["compiled_graph"].update({"32": 3.0, "128": 16.8})
    summary["op_ms_by_precision"]["tf32"]["spectral_conv"]["128"]["triton"] = \
        10 * summary["op_ms_by_precision"]["tf32"]["spectral_conv"]["128"]["floor"]
    summary["op_ms_by_precision"]["tf32"]["gate"]["128"]["triton"] = \
        2 * summary["op_ms_by_precision"]["tf32"]["gate"]["128"]["floor"]
    targets = {t["name"]: t for t in module.targets(summary)}
    assert len(targets) == 4 + 6 + 12
    s128 = targets["Triton step at S = 128, tf32"]
    assert s128["met"] is False and s128["missed_by"] == pytest.approx(2.0) and s128["measured"] == 14.0
    assert "spectral_conv is 10.0x its floor in tf32" in s128["next"] and "probe_spectral_stages" in s128["next"]
    s32 = targets["Triton step at S = 32, tf32"]
    assert s32["met"] is True and s32["missed_by"] is None and s32["next"] is None
    assert targets["Triton step over graphed torch.compile at S = 32, tf32"]["met"] is True  # 2x
    over = targets["Triton step over graphed torch.compile at S = 128, tf32"]
    assert over["measured"] == pytest.approx(1.2) and over["missed_by"] == pytest.approx(1.25)
    spectral = targets["spectral_conv fwd+bwd within 3x its floor at S = 128, tf32"]
    assert spectral["met"] is False and spectral["missed_by"] == pytest.approx(10 / 3)
    assert targets["gate fwd+bwd within 3x its floor at S = 128, tf32"]["met"] is True
    fp32 = targets["Triton step at S = 128, fp32"]
    assert fp32["met"] is None and fp32["missed_by"] is None and fp32["note"] == "not measured"
    # a time that meets its target does not count when the timed result failed its check
    summary["checks"].append({"what": "train_step tf32 triton_graph S=32", "rel_err": 0.5, "tol": 1e-2, "ok": False})
    s32 = {t["name"]: t for t in module.targets(summary)}["Triton step at S = 32, tf32"]
    assert s32["met"] is False and "float64 reference" in s32["note"]
    md = module.render_markdown({**summary, "targets": module.targets(summary)})
    assert "| tf32 | 128 | - | 16.8 | 14 | 1.20x |" in md and "| Triton step at S = 128, tf32 | 14 ms | <= 7 ms | **no** | 2.00x |" in md


def test_every_cell_starts_null_and_floors_are_computed(tmp_path):
    summary = fabricated(load_gpu_summary(), tmp_path)
    assert all(v is None for mode in MODES for provider in STEP_PROVIDERS
               for v in summary["train_step_ms"][mode][provider].values())
    assert set(summary["op_ms"]["gate"]) == {"128"}
    floors = {m: summary["op_ms_by_precision"][m]["s4d"]["128"]["floor"] for m in MODES}
    assert floors["bf16"] == pytest.approx(floors["fp32"] / 2)  # HBM-bound, 2-byte activations
    assert summary["train_step_floor_ms"]["tf32"]["128"] == pytest.approx(1.68, rel=0.02)  # issue 19's HBM floor


@pytest.mark.parametrize("flags, message", [
    (["--modes", "fp16"], "--modes 'fp16': 'fp16' is not allowed; give one of fp32, tf32, bf16"),
    (["--sizes", "32,63"], "--sizes '32,63': '63' is not allowed; give even integers >= 2"),
    (["--budget-s", "-1"], "--budget-s '-1': give seconds >= 0"),
    (["--variant", "fused"], "--variant 'fused': expected NAME:ENV=VAL"),
    (["--variant", "a:1X=2"], "--variant 'a:1X=2': '1X=2' is not ENV=VAL"),
    (["--variant", "a:X=1", "--variant", "a:Y=2"], "--variant names must differ, got a, a"),
    (["--parts", "triton,probe"], "--parts 'triton,probe': 'probe' is not allowed"),
    (["--op-size", "32,64"], "--op-size takes one S, got 32,64"),
    (["--variant", "a:AMG_FAST_FFN_METHOD=gemm", "--profile-variants", "b"],
     "--profile-variants: 'b' is not a --variant of kernel switches (those run in this process: a)"),
    (["--variant", "a:CUDA_VISIBLE_DEVICES=1", "--profile-variants", "a"],
     "--profile-variants: 'a' is not a --variant of kernel switches (those run in this process: none)"),
])
def test_bad_arguments_are_refused_with_what_is_allowed(flags, message, capsys):
    module = load_gpu_summary()
    with pytest.raises(SystemExit) as exit_info:
        module.parse_args(["--out", "x", *flags])
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


def test_needs_a_gpu_without_dry_run(tmp_path, capsys):
    module = load_gpu_summary()
    if module.torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    assert module.main(["--out", str(tmp_path / "out")]) == 3
    assert "needs a GPU; --dry-run checks it on a CPU" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
