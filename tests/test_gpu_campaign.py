"""scripts/gpu_campaign.sh on a CPU (CAMPAIGN_DRY_RUN=1): a sweep continued across two "sessions"
through the exported tree, the budget that starts nothing it cannot finish, bad settings refused.
(The bench phase's own dry run is tests/test_gpu_summary.py; the tests phase is a pytest call.)"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from helpers import load_bench

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "gpu_campaign.sh"
SWEEP = "prec:precision:quick:0"  # 3 smoke-scale runs (fp32, tf32, bf16)


def campaign(tmp_path: Path, name: str, **env) -> subprocess.CompletedProcess:
    environ = {**os.environ, "CAMPAIGN_DRY_RUN": "1", "PYTHON": sys.executable, "CAMPAIGN_PHASES": "runs",
               "CAMPAIGN_SWEEPS": SWEEP, "CAMPAIGN_EXPORT": str(tmp_path / name / "out"),
               "CAMPAIGN_TREES": str(tmp_path / "trees"), "CAMPAIGN_RESERVE_S": "5", **env}
    return subprocess.run(["bash", str(SCRIPT), str(tmp_path / name / "results")], env=environ, capture_output=True,
                          text=True, timeout=600)


def runs_in(archive: Path) -> set[str]:
    with tarfile.open(archive) as tar:
        names = tar.getnames()
    assert not any(n.endswith((".pt", "rollout.npz", ".h5")) for n in names), names  # no checkpoints, rollouts, data
    return {Path(n).parent.name for n in names if n.endswith("/results.json")}


@pytest.mark.slow
def test_a_sweep_continues_from_the_exported_tree_and_trains_nothing_twice(tmp_path):
    first = campaign(tmp_path, "session1", CAMPAIGN_BUDGET_S="300", CAMPAIGN_WORK=str(tmp_path / "work"))
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    exported = runs_in(tmp_path / "session1" / "out" / "campaign.tgz")
    assert len(exported) == 3 and all(name.endswith("_seed0") for name in exported), exported
    assert (tmp_path / "session1" / "results" / "sweeps" / "prec" / "reports" / "precision" / "table.md").is_file()
    # a second call on the same machine continues the sweep it left (CAMPAIGN_WORK), not the committed tree
    again = campaign(tmp_path, "call2", CAMPAIGN_BUDGET_S="300", CAMPAIGN_WORK=str(tmp_path / "work"))
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "sweep prec: continuing the one an earlier call left in" in again.stdout
    assert "3 runs at preset smoke (3 done)" in again.stdout, again.stdout[-2000:]
    assert runs_in(tmp_path / "call2" / "out" / "campaign.tgz") == exported
    # the next session starts from the committed tree: nothing is trained again
    (tmp_path / "trees").mkdir()
    os.replace(tmp_path / "session1" / "results" / "sweeps" / "prec", tmp_path / "trees" / "prec")
    second = campaign(tmp_path, "session2", CAMPAIGN_BUDGET_S="300")
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    assert "3 runs at preset smoke (3 done)" in second.stdout and "3 of 3 runs done" in second.stdout, second.stdout[-2000:]
    assert runs_in(tmp_path / "session2" / "out" / "campaign.tgz") == exported  # the session's export: the whole sweep


def test_failed_cuda_tests_make_the_runs_use_the_reference_kernels(tmp_path):
    """A kernel that fails its CUDA tests in this call must not train the sweep: the runs drop
    --fast-kernels (and keep the other flags), and phases.md says so."""
    failing = tmp_path / "test_failing.py"
    failing.write_text("def test_a_kernel_is_wrong():\n    assert 1 == 2\n")
    result = campaign(tmp_path, "fallback", CAMPAIGN_PHASES="tests", CAMPAIGN_TESTS=str(failing),
                      CAMPAIGN_RUN_FLAGS="--fast-kernels --cuda-graph --device cpu")
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    message = "the CUDA tests failed: this call's runs use the reference kernels (--cuda-graph --device cpu without --fast-kernels)"
    assert f"gpu_campaign: {message}" in result.stdout
    assert message in (tmp_path / "fallback" / "results" / "phases.md").read_text()
    verdict = json.loads((tmp_path / "fallback" / "results" / "kernels_verdict.json").read_text())
    assert verdict["verdict"] == "fail" and re.match(r"1 failed\b.* in ", verdict["summary"][-1]), verdict
    passing = campaign(tmp_path, "passing", CAMPAIGN_PHASES="tests", CAMPAIGN_RUN_FLAGS="--fast-kernels --device cpu")
    assert passing.returncode == 0 and "reference kernels" not in passing.stdout, passing.stdout[-3000:]
    verdict = json.loads((tmp_path / "passing" / "results" / "kernels_verdict.json").read_text())
    assert verdict["verdict"] == "pass" and re.match(r"\d+ passed\b.* in ", verdict["summary"][0]), verdict
    assert verdict["sources_sha256"] == load_verdict().sources_digest()[0]


def test_a_later_call_without_the_tests_phase_keeps_the_reference_kernels(tmp_path):
    """The session's second call (CAMPAIGN_PHASES=install,runs) runs no tests: it must not train with
    the kernels the first call's CUDA tests failed on the same machine (CAMPAIGN_WORK keeps the verdict),
    and a later call whose tests pass clears it."""
    failing = tmp_path / "test_failing.py"
    failing.write_text("def test_a_kernel_is_wrong():\n    assert 1 == 2\n")
    same_machine = {"CAMPAIGN_WORK": str(tmp_path / "work"), "CAMPAIGN_RUN_FLAGS": "--fast-kernels --device cpu"}
    first = campaign(tmp_path, "call1", CAMPAIGN_PHASES="tests", CAMPAIGN_TESTS=str(failing), **same_machine)
    assert first.returncode == 1, first.stdout[-3000:] + first.stderr[-3000:]
    second = campaign(tmp_path, "call2", CAMPAIGN_BUDGET_S="40", **same_machine)  # runs only: too short for a sweep
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    message = "this call's runs use the reference kernels (--device cpu without --fast-kernels)"
    assert "the CUDA tests failed in an earlier call on this machine" in second.stdout and message in second.stdout
    assert message in (tmp_path / "call2" / "results" / "phases.md").read_text()
    passing = campaign(tmp_path, "call3", CAMPAIGN_PHASES="tests", **same_machine)
    assert passing.returncode == 0, passing.stdout[-3000:] + passing.stderr[-3000:]
    fourth = campaign(tmp_path, "call4", CAMPAIGN_BUDGET_S="40", **same_machine)
    assert fourth.returncode == 0 and "reference kernels" not in fourth.stdout, fourth.stdout[-3000:]
    assert "gpu_campaign: the CUDA tests passed on these kernel sources (pass " in fourth.stdout


def slow_kernel_tests(tmp_path: Path) -> Path:
    """A tests folder whose last test, marked `variant` (run last, as on a GPU), sleeps past the time limit."""
    suite = tmp_path / "slow"
    suite.mkdir()
    (suite / "conftest.py").write_text(
        f"import sys\nsys.path.insert(0, {str(ROOT / 'tests')!r})\nfrom variant_report import VariantReport\n\n"
        "def pytest_configure(config):\n"
        "    config.addinivalue_line('markers', 'variant(name): an opt-in kernel path')\n"
        "    config.pluginmanager.register(VariantReport(config, run_last=True), 'variant_report')\n")
    (suite / "test_kernels.py").write_text(
        "import time\nimport pytest\n\n@pytest.mark.variant('s4d_fma')\ndef test_fma():\n    pass\n\n"
        "@pytest.mark.variant('ffn_persistent')\ndef test_slow():\n    time.sleep(120)\n\n"
        "def test_quick():\n    pass\n")
    return suite


def test_tests_that_cannot_start_are_a_failure_and_a_cut_off_is_not(tmp_path):
    """The verdict "incomplete" (the Triton kernels kept) is for a tests phase stopped by its time limit with tests
    passed and none failed; pytest that cannot collect its tests (exit 4, no FAILED line) is a failure, and so are a
    cut-off after an earlier call on the machine failed, a cut-off where a committed verdict failed on these
    sources, and a pass of some tests after a failure."""
    def verdict(name: str) -> dict:
        return json.loads((tmp_path / name / "results" / "kernels_verdict.json").read_text())

    same_machine = {"CAMPAIGN_WORK": str(tmp_path / "work"), "CAMPAIGN_RUN_FLAGS": "--fast-kernels --device cpu",
                    "CAMPAIGN_PHASES": "tests"}
    missing = str(tmp_path / "test_missing.py")
    broken = campaign(tmp_path, "broken", CAMPAIGN_TESTS=missing, **same_machine)
    assert broken.returncode == 1, broken.stdout[-3000:] + broken.stderr[-3000:]
    assert "gpu_campaign: the CUDA tests did not run to the end (pytest exits: 4): this call's runs use the " \
        "reference kernels" in broken.stdout, broken.stdout[-3000:]
    assert verdict("broken")["verdict"] == "fail" and verdict("broken")["tests"] == [missing]

    slow = slow_kernel_tests(tmp_path)
    cut = campaign(tmp_path, "cut", CAMPAIGN_TESTS=str(slow), CAMPAIGN_T_TESTS="12",  # 9 s for the folder
                   **{**same_machine, "CAMPAIGN_WORK": str(tmp_path / "another_machine")})
    assert cut.returncode == 1 and "reference kernels" not in cut.stdout, cut.stdout[-3000:] + cut.stderr[-3000:]
    assert verdict("cut")["verdict"] == "incomplete" and "2 passed" in " ".join(verdict("cut")["summary"])
    # the variant tests collected ($AMG_TESTS_VARIANT_COLLECTION, beside the log): the one cut off before it ran is the
    # verdict's variant_unrun, which bench/adopt_variants.py does not adopt
    assert "variant ffn_persistent: 1 of its 1 tests did not run (not adopted)" in cut.stdout, cut.stdout[-3000:]
    assert {name: [n.split("::")[-1] for n in nodes] for name, nodes in verdict("cut")["variant_unrun"].items()} \
        == {"ffn_persistent": ["test_slow"]}
    collected = json.loads((tmp_path / "cut" / "results" / "logs" / "variant_tests.json").read_text())
    assert sorted(collected) == ["ffn_persistent", "s4d_fma"], collected
    after_failure = campaign(tmp_path, "after_failure", CAMPAIGN_TESTS=str(slow), CAMPAIGN_T_TESTS="12",
                             **same_machine)
    assert "the CUDA tests did not run to the end (pytest exits: 4) in an earlier call on this machine" \
        in after_failure.stdout, after_failure.stdout[-3000:]
    assert verdict("after_failure")["verdict"] == "fail"
    quick = tmp_path / "test_quick.py"
    quick.write_text("def test_quick():\n    pass\n")
    some = campaign(tmp_path, "some", CAMPAIGN_TESTS=str(quick), **same_machine)  # one file passes: no clearance
    assert some.returncode == 0 and "earlier call on this machine" in some.stdout, some.stdout[-3000:]
    assert verdict("some")["verdict"] == "fail"

    trees = tmp_path / "trees"
    committed_verdict(trees, "s1", "fail")  # an earlier session's tests failed on these sources
    fresh = campaign(tmp_path, "fresh", CAMPAIGN_TESTS=str(slow), CAMPAIGN_T_TESTS="12",
                     **{**same_machine, "CAMPAIGN_WORK": str(tmp_path / "fresh_machine")})
    assert f"the CUDA tests failed on these kernel sources (fail {trees}/gpu/s1/kernels_verdict.json" in fresh.stdout \
        and "this call's runs use the reference kernels" in fresh.stdout, fresh.stdout[-3000:]
    assert verdict("fresh")["verdict"] == "fail"


def load_verdict():
    return load_bench("cuda_verdict", "bench_cuda_verdict")


def committed_verdict(trees: Path, session: str, verdict: str, adopted: str | None = None, **fields) -> Path:
    """A session's results under trees/gpu/ with bench/cuda_verdict.py's record on this checkout's kernel sources
    (fields overwrite the record's, e.g. another digest or date) and, with adopted, its bench's adopted switches."""
    results = trees / "gpu" / session
    record = load_verdict().write(results, verdict)
    (results / "kernels_verdict.json").write_text(json.dumps({**record, **fields}))
    if adopted is not None:
        (results / "bench").mkdir()
        (results / "bench" / "adopted_switches.env").write_text(adopted)
    return results


def test_a_fresh_machine_takes_the_verdict_committed_on_these_kernel_sources(tmp_path):
    """A call without the tests phase on a machine that ran none (a later session's runs alone) keeps the Triton
    kernels where a committed session passed its CUDA tests on the same kernel sources, torch, triton and device,
    with the switches that session's bench adopted; a later failure on those sources outweighs the pass; a verdict
    on other sources is none: the reference kernels, unless CAMPAIGN_TRUST_KERNELS=1; a phase cut off with no
    failure counts as it does in its own call (the Triton kernels)."""
    dump, trees = tmp_path / "run_env.txt", tmp_path / "trees"
    python = str(stand_in_python(tmp_path, dump))
    flags = {"PYTHON": python, "CAMPAIGN_BUDGET_S": "120", "CAMPAIGN_RUN_FLAGS": "--fast-kernels --device cpu"}
    reference = "this call's runs use the reference kernels (--device cpu without --fast-kernels)"
    committed_verdict(trees, "s2", "pass", "ffn_gemm AMG_FAST_FFN_METHOD=gemm\n", date="2026-12-02T10:00:00+00:00")
    passed = campaign(tmp_path, "passed", **flags)
    assert passed.returncode == 0, passed.stdout[-3000:] + passed.stderr[-3000:]
    assert "run flags: --fast-kernels --device cpu" in passed.stdout and reference not in passed.stdout
    note = f"the CUDA tests passed on these kernel sources (pass {trees}/gpu/s2/kernels_verdict.json"
    assert note in passed.stdout and note in (tmp_path / "passed" / "results" / "phases.md").read_text()
    assert dump.read_text().split() == ["AMG_FAST_FFN_METHOD=gemm"]

    committed_verdict(trees, "s1", "fail", date="2026-12-03T10:00:00+00:00")
    failed = campaign(tmp_path, "failed", **flags)
    assert failed.returncode == 0 and f"the CUDA tests failed on these kernel sources (fail {trees}/gpu/s1/" \
        in failed.stdout and reference in failed.stdout, failed.stdout[-3000:]
    assert dump.read_text() == ""

    (trees / "gpu" / "s1" / "kernels_verdict.json").unlink()
    committed_verdict(trees, "s2", "pass", sources_sha256="0" * 64)  # the kernels changed since
    other = campaign(tmp_path, "other", **flags)
    assert other.returncode == 0 and "no CUDA-test verdict on these kernel sources" in other.stdout \
        and reference in other.stdout, other.stdout[-3000:]
    no_runs = campaign(tmp_path, "no_runs", **{**flags, "CAMPAIGN_PHASES": "install"})  # no runs: nothing to decide
    assert no_runs.returncode == 0 and "kernels" not in no_runs.stdout, no_runs.stdout[-3000:]
    trusted = campaign(tmp_path, "trusted", **flags, CAMPAIGN_TRUST_KERNELS="1")
    assert trusted.returncode == 0 and reference not in trusted.stdout, trusted.stdout[-3000:]
    assert "runs keep the Triton kernels (CAMPAIGN_TRUST_KERNELS=1)" in trusted.stdout
    committed_verdict(trees, "s3", "incomplete")  # a tests phase cut off by its time limit, none failed
    cut_off = campaign(tmp_path, "cut_off", **flags)
    assert cut_off.returncode == 0 and reference not in cut_off.stdout, cut_off.stdout[-3000:]
    assert "the CUDA tests, cut off by their time limit, found no failure on these kernel sources (incomplete" \
        in cut_off.stdout


def stand_in_python(tmp_path: Path, dump: Path, summary=None, run_exit: int = 3, probe_s: int = 0,
                    adopted_exit: int = 0, adopted_summary: dict | None = None) -> Path:
    """An interpreter for the campaign that records reproduce.py run's AMG_FAST_FFN_* / _SPECTRAL_* environment in
    dump and exits run_exit (3: runs left) instead of training; times the adopted switches' step (gpu_summary.py
    --out .../bench-adopted) as recording its environment and arguments in dump.adopted, writing adopted_summary
    (default: nothing skipped, failed or missed) and exiting adopted_exit; with a summary writes it as
    gpu_summary.py's output instead of benchmarking (and its
    warm-up as nothing), and runs a bench/probe_*.py as probe_s seconds of sleep; everything else runs in this
    python."""
    canned = tmp_path / "canned_summary.json"
    if summary is not None:
        canned.write_text(json.dumps(summary))
    python = tmp_path / "python"
    adopted, adopted_json = f"{dump}.adopted", tmp_path / "adopted_summary.json"
    adopted_json.write_text(json.dumps(adopted_summary or {"checks": [], "errors": [], "skipped": []}))
    python.write_text(f"""#!/usr/bin/env bash
if [[ $1 == scripts/reproduce.py && $2 == run ]]; then env | grep -E '^AMG_FAST_(FFN|SPECTRAL)_' | sort > {dump}; exit {run_exit}; fi
if [[ $1 == bench/gpu_summary.py && $2 == --out && $3 == */bench-adopted ]]; then
    {{ env | grep -E '^AMG_FAST_(FFN|SPECTRAL)_' | sort; echo "$@"; }} > {adopted}
    mkdir -p "$3" && cp {adopted_json} "$3/summary.json"; echo "timed (stand-in)"; exit {adopted_exit}
fi
if [[ $1 == bench/gpu_summary.py && $2 == --out && -f {canned} ]]; then mkdir -p "$3" && cp {canned} "$3/summary.json"; exit 0; fi
if [[ $1 == bench/gpu_summary.py && $2 == --warm-up && -f {canned} ]]; then echo "warm-up (stand-in)"; exit 0; fi
if [[ $1 == bench/probe_*.py ]]; then echo "probe $1 started"; exec sleep {probe_s}; fi
exec {sys.executable} "$@"
""")
    python.chmod(0o755)
    return python


def test_the_runs_take_the_switches_the_bench_adopted_on_this_machine(tmp_path):
    """A bench's winners (bench/adopt_variants.py's lines in CAMPAIGN_WORK, one variant a line) are exported to
    the runs of this and later calls on the machine -- with --fast-kernels only, a variant whole or not at all
    (not when one of its switches is set already), and not with CAMPAIGN_ADOPT=0."""
    work, dump = tmp_path / "work", tmp_path / "run_env.txt"
    work.mkdir()
    (work / "adopted_switches.env").write_text(
        "spectral_cublas AMG_FAST_SPECTRAL_DFT_GEMM=torch AMG_FAST_SPECTRAL_MIX=torch\nffn_gemm AMG_FAST_FFN_METHOD=gemm\n")
    same_machine = {"CAMPAIGN_WORK": str(work), "PYTHON": str(stand_in_python(tmp_path, dump)),
                    "CAMPAIGN_BUDGET_S": "120", "CAMPAIGN_RUN_FLAGS": "--fast-kernels --device cpu",
                    "AMG_FAST_SPECTRAL_MIX": "four", "CAMPAIGN_TRUST_KERNELS": "1"}
    result = campaign(tmp_path, "adopt", **same_machine)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert dump.read_text().split() == ["AMG_FAST_FFN_METHOD=gemm", "AMG_FAST_SPECTRAL_MIX=four"]
    note = ("the runs adopt the kernel switches the bench found faster in every cell it judged: AMG_FAST_FFN_METHOD=gemm"
            "; variant spectral_cublas not adopted: AMG_FAST_SPECTRAL_MIX=four is set already (bench/adopted.md)")
    assert note in result.stdout and note in (tmp_path / "adopt" / "results" / "phases.md").read_text()
    off = campaign(tmp_path, "off", **same_machine, CAMPAIGN_ADOPT="0")
    assert off.returncode == 0 and dump.read_text().split() == ["AMG_FAST_SPECTRAL_MIX=four"], off.stdout[-3000:]
    reference = campaign(tmp_path, "ref", **dict(same_machine, CAMPAIGN_RUN_FLAGS="--device cpu"))
    assert reference.returncode == 0 and dump.read_text().split() == ["AMG_FAST_SPECTRAL_MIX=four"]
    assert "(the reference kernels: no switch adopted)" in reference.stdout


def test_the_adopted_switches_step_is_timed_once_and_a_failure_drops_them(tmp_path):
    """Two or more adopted variants: their step together is timed (and checked against float64) before the runs, in
    the adopted modes, and not again on the machine once complete for the same sources, modes and switches; skipped
    parts or a failed profile keep the switches (timed again later); a step's missed check or failure, also behind a
    timeout, drops them (the runs take the code's defaults) in this and later calls. One variant, or too little
    time: not timed."""
    work, dump = tmp_path / "work", tmp_path / "run_env.txt"
    work.mkdir()
    adopted = work / "adopted_switches.env"
    adopted.write_text("ffn_gemm AMG_FAST_FFN_METHOD=gemm\nspectral_fft AMG_FAST_SPECTRAL_TRANSFORM=fft\n")
    both = ["AMG_FAST_FFN_METHOD=gemm", "AMG_FAST_SPECTRAL_TRANSFORM=fft"]
    timed_note = "the adopted switches' step at S = 32 and 128 in fp32, with its profile"
    same_machine = {"CAMPAIGN_WORK": str(work), "CAMPAIGN_BUDGET_S": "120", "CAMPAIGN_TRUST_KERNELS": "1",
                    "CAMPAIGN_RUN_FLAGS": "--fast-kernels --device cpu", "CAMPAIGN_ADOPT_MODES": "fp32"}

    def call(name, modes="fp32", timed=True, kept=True, rc=0, **stand_in):
        times = Path(f"{dump}.adopted")
        times.unlink(missing_ok=True)
        result = campaign(tmp_path, name, **{**same_machine, "CAMPAIGN_ADOPT_MODES": modes},
                          PYTHON=str(stand_in_python(tmp_path, dump, **stand_in)))
        assert result.returncode == rc, result.stdout[-3000:] + result.stderr[-3000:]
        assert times.exists() == timed and (timed_note.replace("fp32", modes.replace(",", " ")) in result.stdout) \
            == timed, result.stdout[-3000:]
        assert dump.read_text().split() == (both if kept else []), result.stdout[-3000:]  # what the runs take
        return result, times.read_text().splitlines() if timed else None

    _, (*env, args) = call("timed")
    assert env == both  # timed with the switches the runs then take, the summary and its key beside the summary
    assert args.split()[3:] == ["--budget-s", args.split()[4], "--parts", "triton,profile", "--sizes", "32,128",
                                "--modes", "fp32", "--dry-run"], args
    key = (tmp_path / "timed" / "results" / "bench-adopted" / "adopted_step.key").read_text()
    assert key.startswith("sources ") and key.rstrip().endswith(f"; modes fp32; switches {' '.join(both)}"), key
    call("again", timed=False)  # complete for these sources, modes and switches: not timed again
    call("modes", modes="fp32,tf32")  # other modes: timed
    short = campaign(tmp_path, "short", **{**same_machine, "CAMPAIGN_T_ADOPTED": "10",
                                            "CAMPAIGN_WORK": str(copy_work(work, tmp_path / "work2"))},
                     PYTHON=str(stand_in_python(tmp_path, dump)))
    assert "the adopted switches' step not timed: CAMPAIGN_T_ADOPTED=10 is under 30 s" in short.stdout, short.stdout
    assert dump.read_text().split() == both
    adopted.write_text(adopted.read_text() + "gate_cublas AMG_FAST_GATE_METHOD=cublas\n")  # other switches
    skipped = {"checks": [{"what": "train_step fp32 triton_graph S=32", "ok": True}],
               "errors": [{"part": "profile fp32", "message": "CUPTI"}],
               "skipped": [{"part": "triton_graph fp32 S=128", "reason": "budget"}]}
    partial, _ = call("partial", adopted_exit=1, adopted_summary=skipped)  # kept, and timed again by a later call
    assert "(exit 1): 1 parts skipped, 1 failed (none of them a step); the switches stay" in partial.stdout
    missed = {**skipped, "checks": [{"what": "train_step fp32 triton_graph S=32", "ok": False}]}
    failed, _ = call("failed", kept=False, rc=1, adopted_exit=124, adopted_summary=missed)  # behind a timeout too
    note = ("the adopted switches are dropped, the runs take the code's defaults: their step failed (exit 124: "
            "train_step fp32 triton_graph S=32 missed its float64 check;")
    assert note in failed.stdout, failed.stdout[-3000:]
    assert "dropped, the runs take the code's defaults" in (tmp_path / "failed" / "results" / "phases.md").read_text()
    later, _ = call("later", timed=False, kept=False)  # a later call on this machine: dropped, not timed again
    assert f"their step failed in an earlier call on this machine ({work}/adopted_step_failed.key)" in later.stdout
    crashed = {"checks": [], "errors": [{"part": "triton_graph fp32 S=32", "message": "illegal memory access"}],
               "skipped": []}
    call("crashed", modes="fp32,bf16", kept=False, rc=1, adopted_exit=1, adopted_summary=crashed)
    adopted.write_text("ffn_gemm AMG_FAST_FFN_METHOD=gemm\n")  # one variant: the bench timed its step alone
    single = campaign(tmp_path, "single", **same_machine, PYTHON=str(stand_in_python(tmp_path, dump)))
    assert "adopted switches' step" not in single.stdout and dump.read_text().split() == both[:1]


def copy_work(work: Path, dest: Path) -> Path:
    """A fresh machine's CAMPAIGN_WORK with the same adopted switches (and nothing timed)."""
    dest.mkdir()
    shutil.copy(work / "adopted_switches.env", dest)
    return dest


@pytest.mark.parametrize("run_exit, passed", [(3, True), (4, True), (1, False)], ids=["left", "diverged", "failed"])
def test_the_runs_phase_passes_when_only_diverged_or_unstarted_runs_remain(tmp_path, run_exit, passed):
    """reproduce.py run's exit 4 (only diverged runs left: a later session leaves them) passes the runs phase
    as 3 (runs left for the next session) does; 1 (a run failed) fails it."""
    python = stand_in_python(tmp_path, tmp_path / "run_env.txt", run_exit=run_exit)
    result = campaign(tmp_path, "call", PYTHON=str(python), CAMPAIGN_BUDGET_S="120")
    assert (result.returncode == 0) == passed, result.stdout[-3000:] + result.stderr[-3000:]
    meaning = {3: "runs left for the next session", 4: "diverged runs left", 1: "failed"}[run_exit]
    assert f"reproduce.py run precision: exit {run_exit} ({meaning}" in result.stdout


@pytest.mark.parametrize("modes,failed", [("", False), ("fp32", False), ("", True)], ids=["all", "fp32", "failed"])
def test_the_bench_phase_leaves_its_winners_for_the_runs(tmp_path, modes, failed):
    """The bench phase judges its summary (here a canned one: spectral_cublas faster in every cell, ffn_gemm in
    the fp32 cells only) and the same call's runs train with the winners: every mode judged by default, the
    fp32 cells alone with CAMPAIGN_ADOPT_MODES=fp32; bench/adopted.md says why. A variant whose CUDA tests failed
    on the machine (the tests' verdict in CAMPAIGN_WORK: variant_failures) is not adopted, however fast."""
    cells = {"32": 6.0, "128": 20.0}
    default = {mode: {"triton_graph": dict(cells)} for mode in ("fp32", "tf32")}

    def variant(env, fp32, tf32):
        return {"env": env, "exit_code": 0, "errors": [], "checks": [{"what": "step", "ok": True}],
                "train_step_ms": {"fp32": {s: ms / fp32 for s, ms in cells.items()},
                                  "tf32": {s: ms / tf32 for s, ms in cells.items()}}}

    summary = {"dry_run": False, "train_step_ms": default, "variants": {
        "spectral_cublas": variant({"AMG_FAST_SPECTRAL_DFT_GEMM": "torch", "AMG_FAST_SPECTRAL_MIX": "torch"}, 1.2, 1.1),
        "ffn_gemm": variant({"AMG_FAST_FFN_METHOD": "gemm"}, 1.5, 0.8)}}
    dump, work = tmp_path / "run_env.txt", tmp_path / "work"
    if failed:
        work.mkdir()
        (work / "kernels_verdict.json").write_text(json.dumps(
            {"verdict": "pass", "variant_failures": {"spectral_cublas": ["tests/ops/test_x.py::test_y"]}}))
    result = campaign(tmp_path, "bench", CAMPAIGN_PHASES="bench,runs", CAMPAIGN_WORK=str(work),
                      PYTHON=str(stand_in_python(tmp_path, dump, summary)), CAMPAIGN_BUDGET_S="200",
                      CAMPAIGN_RUN_FLAGS="--fast-kernels --device cpu", CAMPAIGN_ADOPT_MODES=modes,
                      CAMPAIGN_TRUST_KERNELS="1")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    adopted = [] if failed else ["AMG_FAST_SPECTRAL_DFT_GEMM=torch", "AMG_FAST_SPECTRAL_MIX=torch"]
    assert dump.read_text().split() == (["AMG_FAST_FFN_METHOD=gemm"] if modes else []) + adopted
    report = (tmp_path / "bench" / "results" / "bench" / "adopted.md").read_text()
    assert ("not 1.03x the default everywhere (tf32 S=32: 0.800x" in report) == (not modes)
    assert ("its CUDA tests failed (1: tests/ops/test_x.py::test_y)" in report) == failed


def winners_cut_off(tmp_path: Path) -> Path:
    """A tests folder whose variant tests (run last) the tests phase's limit cuts off: ffn_persistent's sleeps past
    it the first time and passes the next, spectral_gauss's fails when it runs."""
    suite = slow_kernel_tests(tmp_path)
    flag = tmp_path / "first_run_started"
    (suite / "test_kernels.py").write_text(
        f"import os\nimport time\nimport pytest\n\ndef test_quick():\n    pass\n\n"
        f"@pytest.mark.variant('ffn_persistent')\ndef test_persistent():\n    if not os.path.exists({str(flag)!r}):\n"
        f"        open({str(flag)!r}, 'w').close()\n        time.sleep(120)\n\n"
        "@pytest.mark.variant('spectral_gauss')\ndef test_gauss():\n    assert False, 'wrong on this GPU'\n")
    return suite


@pytest.mark.parametrize("retest_s", ["40", "10"], ids=["retested", "no-time-left"])
def test_winners_whose_tests_were_cut_off_are_tested_after_the_bench(tmp_path, retest_s):
    """The tests phase's limit cuts off the variant tests (they run last). After the bench, the cut-off tests of its
    winners run (within CAMPAIGN_T_RETESTS; with under 15 s, not at all) and the verdict records them: the winner
    whose tests then passed is adopted for the runs, the one whose test failed is not, and with no retest neither."""
    cells = {"32": 6.0, "128": 20.0}

    def variant(env, speedup):
        return {"env": env, "exit_code": 0, "errors": [], "checks": [{"what": "step", "ok": True}],
                "train_step_ms": {"fp32": {s: ms / speedup for s, ms in cells.items()}}}

    summary = {"dry_run": False, "train_step_ms": {"fp32": {"triton_graph": dict(cells)}}, "variants": {
        "ffn_persistent": variant({"AMG_FAST_FFN_PERSISTENT": "1"}, 1.2),
        "spectral_gauss": variant({"AMG_FAST_SPECTRAL_MIX": "gauss"}, 1.3)}}
    dump, work = tmp_path / "run_env.txt", tmp_path / "work"
    result = campaign(tmp_path, "call", CAMPAIGN_PHASES="tests,bench,runs", CAMPAIGN_WORK=str(work),
                      CAMPAIGN_TESTS=str(winners_cut_off(tmp_path)), CAMPAIGN_T_TESTS="12",
                      CAMPAIGN_T_RETESTS=retest_s, PYTHON=str(stand_in_python(tmp_path, dump, summary)),
                      CAMPAIGN_BUDGET_S="200", CAMPAIGN_RUN_FLAGS="--fast-kernels --device cpu")
    out = result.stdout
    assert result.returncode == 1, out[-3000:] + result.stderr[-3000:]  # the tests phase was cut off: "FAIL (124)"
    results = tmp_path / "call" / "results"
    assert "| bench | pass" in (results / "phases.md").read_text(), out[-3000:]
    assert "variant ffn_persistent: 1 of its 1 tests did not run (not adopted)" in out, out[-3000:]
    verdict = json.loads((work / "kernels_verdict.json").read_text())
    assert verdict == json.loads((results / "kernels_verdict.json").read_text()) and verdict["verdict"] == "incomplete"
    report = (results / "bench" / "adopted.md").read_text()
    if retest_s == "10":
        assert "the winning variants' unrun tests not started: CAMPAIGN_T_RETESTS=10 is under 15 s" in out, out[-3000:]
        assert sorted(verdict["variant_unrun"]) == ["ffn_persistent", "spectral_gauss"] and dump.read_text() == ""
        assert "1 of its CUDA tests did not run (the tests phase's time limit)" in report
        return
    retested = (results / "logs" / "retest_tests.txt").read_text().splitlines()
    assert [node.split("::")[-1] for node in retested] == ["test_gauss", "test_persistent"]  # the faster first
    assert "the winning variants' 2 unrun tests, within 40 s" in out, out[-3000:]
    assert "variant ffn_persistent: 1 of its tests that had not run ran now, 0 failed\n" in out
    assert "variant spectral_gauss: 1 of its tests that had not run ran now, 1 failed (not adopted)" in out
    assert verdict["variant_unrun"] == {} and list(verdict["variant_failures"]) == ["spectral_gauss"]
    assert dump.read_text().split() == ["AMG_FAST_FFN_PERSISTENT=1"]
    assert "its CUDA tests failed (1: " in report and "| ffn_persistent |" in report


def test_a_bench_without_a_verdict_drops_the_earlier_one(tmp_path):
    """When bench/adopt_variants.py cannot judge this call's summary (here not a summary at all), the switches an
    earlier call adopted on the machine are dropped, not trained with: the bench phase fails and says so."""
    work, dump = tmp_path / "work", tmp_path / "run_env.txt"
    work.mkdir()
    (work / "adopted_switches.env").write_text("ffn_gemm AMG_FAST_FFN_METHOD=gemm\n")
    result = campaign(tmp_path, "bad", CAMPAIGN_PHASES="bench,runs", CAMPAIGN_WORK=str(work), CAMPAIGN_BUDGET_S="200",
                      PYTHON=str(stand_in_python(tmp_path, dump, [1, 2])),
                      CAMPAIGN_RUN_FLAGS="--fast-kernels --device cpu", CAMPAIGN_TRUST_KERNELS="1")
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    assert "no verdict: the switches an earlier bench adopted are dropped" in result.stdout
    assert not (work / "adopted_switches.env").exists() and dump.read_text() == ""


CANNED_SUMMARY = {"dry_run": False, "train_step_ms": {"fp32": {"triton_graph": {"32": 6.0}}}, "variants": {}}


@pytest.mark.parametrize("budget, probe_s, expected", [
    ("200", 60, "probe spectral_stages: stopped at its 3 s, kept what it measured"),
    ("12", 0, "probe spectral_stages skipped:"),
], ids=["stopped", "skipped"])
def test_a_probe_takes_what_the_bench_leaves(tmp_path, budget, probe_s, expected):
    """After the bench a probe runs within CAMPAIGN_T_PROBES and what the budget leaves: one stopped at its limit
    (it keeps the rows it wrote) passes the phase; one left under 10 s is skipped, not started with a limit of 0
    (`timeout 0`: none) or below (an error)."""
    python = stand_in_python(tmp_path, tmp_path / "run_env.txt", CANNED_SUMMARY, probe_s=probe_s)
    result = campaign(tmp_path, "probes", CAMPAIGN_PHASES="bench", PYTHON=str(python), CAMPAIGN_BUDGET_S=budget,
                      CAMPAIGN_PROBES="stages", CAMPAIGN_T_PROBES="3", CAMPAIGN_T_BENCH="5")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert expected in result.stdout
    assert ("probe bench/probe_spectral_stages.py started" in result.stdout) == (probe_s > 0)


def test_a_phase_limit_is_never_zero_or_negative():
    """cap LIMIT: LIMIT or what the budget leaves after the reserve, at least 1 s (the script's own definition)."""
    definition = next(line for line in SCRIPT.read_text().splitlines() if line.startswith("cap() "))
    for left, limit, want in [(100, 50, 50), (100, 80, 70), (31, 50, 1), (30, 50, 1), (5, 50, 1)]:
        out = subprocess.run(["bash", "-c", f"RESERVE=30; left() {{ echo {left}; }}; {definition}; cap {limit}"],
                             capture_output=True, text=True, check=True).stdout
        assert int(out) == want, (left, limit, out)


@pytest.mark.slow
def test_the_bench_kernels_are_compiled_beside_the_tests(tmp_path):
    """With a bench phase to come, the tests phase starts bench/gpu_summary.py --warm-up in the background with the
    bench's arguments (here a test that waits for its first part) and stops it with the tests; the bench then runs
    alone and both summaries are exported."""
    results = tmp_path / "warm" / "results"
    waiting = tmp_path / "test_waiting.py"
    waiting.write_text(f"""import json, time
from pathlib import Path

def test_the_warm_up_runs_beside():
    path = Path({str(results / "bench-warm-up" / "summary.json")!r})
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and not (path.exists() and json.loads(path.read_text())["budget"]["parts"]):
        time.sleep(0.5)
    assert json.loads(path.read_text())["budget"]["parts"][0]["part"] == "warm fp32 S=8"
""")
    result = campaign(tmp_path, "warm", CAMPAIGN_PHASES="tests,bench", CAMPAIGN_TESTS=str(waiting), CAMPAIGN_PROBES="",
                      CAMPAIGN_BENCH_ARGS="--parts triton,variants --modes fp32 --sizes 8",
                      CAMPAIGN_VARIANTS="gemm:AMG_FAST_FFN_METHOD=gemm", CAMPAIGN_BUDGET_S="400")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "bench warm-up (kernels compiled beside the tests):" in result.stdout
    warm = json.loads((results / "bench-warm-up" / "summary.json").read_text())
    assert warm["warm_up"] and warm["checks"] == [] and (warm["budget"]["parts"][0]["status"]) == "done"
    assert all(cell is None for cell in warm["train_step_ms"]["fp32"]["triton_graph"].values())
    bench = json.loads((results / "bench" / "summary.json").read_text())
    assert not bench["warm_up"] and bench["train_step_ms"]["fp32"]["triton_graph"]["8"] > 0
    assert bench["variants"]["gemm"]["in_process"] and bench["variants"]["gemm"]["exit_code"] == 0
    with tarfile.open(tmp_path / "warm" / "out" / "campaign.tgz") as tar:
        names = tar.getnames()
    assert any(n.endswith("bench-warm-up/summary.json") for n in names) and any(n.endswith("logs/warm-up.log") for n in names)


def test_verdicts_that_cannot_be_read_leave_the_reference_kernels(tmp_path):
    """bench/cuda_verdict.py failing (here: exit 7) is no verdict that the kernels failed, and no pass either."""
    python = tmp_path / "python"
    python.write_text(f"""#!/usr/bin/env bash
if [[ $1 == bench/cuda_verdict.py ]]; then exit 7; fi
exec {sys.executable} "$@"
""")
    python.chmod(0o755)
    result = campaign(tmp_path, "broken", PYTHON=str(python), CAMPAIGN_BUDGET_S="40",
                      CAMPAIGN_RUN_FLAGS="--fast-kernels --device cpu")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert ("gpu_campaign: bench/cuda_verdict.py could not read the verdicts (exit 7): this call's runs use the "
            "reference kernels (--device cpu without --fast-kernels)") in result.stdout


def test_a_budget_too_small_for_a_run_starts_none_and_says_so(tmp_path):
    result = campaign(tmp_path, "short", CAMPAIGN_BUDGET_S="40")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "no budget left for sweep prec (next session)" in result.stdout
    assert not (tmp_path / "short" / "results" / "sweeps").exists()
    assert (tmp_path / "short" / "out" / "campaign.tgz").is_file()  # what ran is still packed


@pytest.mark.parametrize("env, message", [
    ({"CAMPAIGN_PHASES": "runs,train"}, "CAMPAIGN_PHASES: unknown phase 'train'"),
    ({"CAMPAIGN_BUDGET_S": "ten"}, "'ten' is not a whole number of seconds"),
    ({"CAMPAIGN_PROBES": "stages speed"}, "CAMPAIGN_PROBES: unknown probe 'speed'"),
    ({"CAMPAIGN_ADOPT": "yes"}, "CAMPAIGN_ADOPT: 'yes' is not 0 or 1"),
    ({"CAMPAIGN_TRUST_KERNELS": "true"}, "CAMPAIGN_TRUST_KERNELS: 'true' is not 0 or 1"),
    ({"CAMPAIGN_ADOPT_MODES": "fp32,fp16"}, "CAMPAIGN_ADOPT_MODES: 'fp32,fp16' is not a comma-separated list"),
    ({"CAMPAIGN_TESTS": "  "}, "CAMPAIGN_TESTS: '  ' names no test path"),  # pytest would run the whole of tests/
], ids=["phase", "budget", "probe", "adopt", "trust", "adopt_modes", "tests"])
def test_bad_settings_are_refused_before_any_work(tmp_path, env, message):
    result = campaign(tmp_path, "bad", **env)
    assert result.returncode == 2 and message in result.stderr
    assert not (tmp_path / "bad").exists()


def test_without_a_gpu_and_without_dry_run_it_refuses(tmp_path):
    result = campaign(tmp_path, "nogpu", CAMPAIGN_DRY_RUN="0")
    assert result.returncode == 3 and "no usable CUDA GPU" in result.stderr


@pytest.mark.parametrize("tree", ["results/headline", "results/cpu/ns2d", "results/gpu/20990101-h100/headline"])
def test_an_exported_tree_under_results_is_committed_without_checkpoints(tree):
    """What export writes under results/ is what `git add` takes: the runs' small files (the top-level
    .gitignore ignores train.py's runs/ folders; a campaign's exported runs were left out of the commit),
    never their checkpoints, rollouts or locks."""
    run = f"{tree}/runs/amgfno_ks_nu0.1_f32_seed0"
    paths = [f"{run}/{name}" for name in ("job.json", "config.json", "results.json", "metrics.jsonl", "machine.json",
                                          "train.log", "checkpoint.pt", "rollout.npz", ".train.lock")]
    proc = subprocess.run(["git", "-C", str(ROOT), "check-ignore", "--no-index", *paths], capture_output=True, text=True)
    assert proc.returncode in (0, 1), proc.stderr  # 1: none ignored
    assert sorted(proc.stdout.split()) == sorted(paths[6:]), proc.stdout
