"""bench/adopt_variants.py: which kernel-switch variants a GPU session's runs adopt from its bench summary
(faster than the default Triton step in every cell, checks passed, one variant an op), and its files."""
import json
from pathlib import Path

import pytest
from helpers import load_bench

ROOT = Path(__file__).parents[1]
H200_SUMMARY = ROOT / "results" / "gpu" / "20261127-1354-h200" / "bench" / "summary.json"


def adopt_variants():
    return load_bench("adopt_variants")


def summary(default: dict, **variants) -> dict:
    """A summary with the default Triton step's times {mode: {S: ms}} and variants name=(env, {mode: {S: ms}},
    checks ok, exit code)."""
    out = {"train_step_ms": {mode: {"triton_graph": dict(by_s)} for mode, by_s in default.items()}, "variants": {}}
    for name, (env, times, ok, code) in variants.items():
        out["variants"][name] = {"env": env, "train_step_ms": times, "exit_code": code, "errors": [],
                                 "checks": [{"what": f"train_step {m} triton_graph S=32", "ok": ok} for m in times]}
    return out


DEFAULT = {"fp32": {"32": 6.0, "128": 20.0}, "tf32": {"32": 3.5, "128": 12.0}}


def faster(factor: float, skip=()) -> dict:
    return {m: {s: (None if (m, s) in skip else ms / factor) for s, ms in by_s.items()} for m, by_s in DEFAULT.items()}


def test_a_variant_faster_in_every_cell_is_adopted_and_one_slower_anywhere_is_not():
    mod = adopt_variants()
    slower_once = faster(1.3)
    slower_once["tf32"]["128"] = 12.0 / 1.01  # 1% faster there: within the 3% margin
    s = summary(DEFAULT, ffn_gemm=({"AMG_FAST_FFN_METHOD": "gemm"}, faster(1.25), True, 0),
                s4d_loop=({"AMG_FAST_S4D_METHOD": "toeplitz_loop"}, slower_once, True, 0))
    switches, rows = mod.adopt(s)
    assert switches == {"AMG_FAST_FFN_METHOD": "gemm"}
    by_name = {r["name"]: r for r in rows}
    assert by_name["ffn_gemm"]["adopted"] and by_name["ffn_gemm"]["speedup"] == pytest.approx(1.25)
    assert not by_name["s4d_loop"]["adopted"] and "tf32 S=128: 1.010x" in by_name["s4d_loop"]["why"]


def test_winners_on_different_ops_combine_and_on_one_op_the_fastest_is_taken():
    mod = adopt_variants()
    s = summary(DEFAULT,
                spectral_mixtorch=({"AMG_FAST_SPECTRAL_MIX": "torch"}, faster(1.1), True, 0),
                spectral_cublas=({"AMG_FAST_SPECTRAL_DFT_GEMM": "torch", "AMG_FAST_SPECTRAL_MIX": "torch"},
                                 faster(1.2), True, 0),
                spectral_wview=({"AMG_FAST_SPECTRAL_WEIGHT_PLANES": "0"}, faster(1.15), True, 0),
                readout_separate=({"AMG_FAST_MEMORY_READOUT": "separate"}, faster(1.05), True, 0),
                gate_x3split=({"AMG_FAST_GATE_X3": "split"}, faster(1.04), True, 0))
    switches, rows = mod.adopt(s)
    # spectral_cublas (fastest of the three spectral winners) and readout_separate (the gate's fastest)
    assert switches == {"AMG_FAST_SPECTRAL_DFT_GEMM": "torch", "AMG_FAST_SPECTRAL_MIX": "torch",
                        "AMG_FAST_MEMORY_READOUT": "separate"}
    why = {r["name"]: r["why"] for r in rows}
    assert "spectral_cublas (faster) switches the spectral_conv already" in why["spectral_wview"]
    assert "readout_separate (faster) switches the gate already" in why["gate_x3split"]


@pytest.mark.parametrize("case, reason", [
    ("check", "missed its check against float64"),
    ("exit", "did not finish cleanly (exit 1"),
    ("cells", "timed in 1 cells beside the default, fewer than 2"),
    ("not_run", "not run (the bench's budget ended before it)"),
    ("env", "only AMG_FAST_* switches with plain values are adopted"),
    ("precision", "never adopted: AMG_FAST_SPECTRAL_REDUCED_DOTS (it changes the precision a mode computes at"),
    ("warm_up", "a warm-up's summary (gpu_summary.py --warm-up: nothing timed)"),
    ("tests", "its CUDA tests failed (1: tests/ops/test_ffn_gemm.py::test_y[persistent])"),
])
def test_a_variant_that_is_not_trustworthy_is_not_adopted_however_fast(case, reason):
    mod = adopt_variants()
    env, times, ok, code = {"AMG_FAST_FFN_METHOD": "gemm"}, faster(2.0), True, 0
    if case == "check":
        ok = False
    elif case == "exit":
        code = 1
    elif case == "cells":
        times = faster(2.0, skip=[("fp32", "128"), ("tf32", "32"), ("tf32", "128")])
    elif case == "not_run":
        times, code = faster(2.0, skip=[(m, s) for m in DEFAULT for s in DEFAULT[m]]), None
    elif case == "env":
        env = {"TRITON_ALWAYS_COMPILE": "1"}
    elif case == "precision":  # tf32x3 and fp32 intermediates under TF32 / bf16: the runs' precision would change
        env = {"AMG_FAST_SPECTRAL_REDUCED_DOTS": "0"}
    bench = summary(DEFAULT, v=(env, times, ok, code))
    bench["warm_up"] = case == "warm_up"  # a --warm-up summary holds no times; one with times is still refused
    failed = {"v": ["tests/ops/test_ffn_gemm.py::test_y[persistent]"], "other": ["t"]} if case == "tests" else None
    switches, rows = mod.adopt(bench, failed=failed)
    assert switches == {} and not rows[0]["adopted"] and reason in rows[0]["why"], rows[0]["why"]


def test_judged_on_the_modes_the_runs_train_in():
    """A variant faster in fp32 only (the feed-forward's row GEMMs against cuBLAS's fp32 GEMMs) is adopted for
    fp32 runs, not for runs in every mode."""
    mod = adopt_variants()
    times = faster(1.4)
    times["tf32"] = {s: ms * 1.2 for s, ms in DEFAULT["tf32"].items()}
    s = summary(DEFAULT, ffn_gemm=({"AMG_FAST_FFN_METHOD": "gemm"}, times, True, 0))
    assert mod.adopt(s)[0] == {}
    switches, rows = mod.adopt(s, modes=("fp32",))
    assert switches == {"AMG_FAST_FFN_METHOD": "gemm"} and rows[0]["cells"] == 2


def test_the_h200_bench_of_2026_11_27_adopts_what_was_made_the_default_by_hand():
    """That bench's only variant that ran, the cuBLASLt feed-forward (1.7x), became FFN_AUTO_METHOD's choice."""
    switches, rows = adopt_variants().adopt(json.loads(H200_SUMMARY.read_text()))
    assert switches == {"AMG_FAST_FFN_METHOD": "epilogue"}
    assert sum(r["adopted"] for r in rows) == 1 and all(r["cells"] == 0 for r in rows if not r["adopted"])


def test_files_written_and_left_alone(tmp_path):
    mod = adopt_variants()
    path = tmp_path / "summary.json"
    env_out, md_out = tmp_path / "adopted.env", tmp_path / "adopted.md"
    path.write_text(json.dumps(summary(DEFAULT, ffn_gemm=({"AMG_FAST_FFN_METHOD": "gemm"}, faster(1.5), True, 0))))
    assert mod.main([str(path), "--env-out", str(env_out), "--markdown-out", str(md_out)]) == 0
    assert env_out.read_text() == "ffn_gemm AMG_FAST_FFN_METHOD=gemm\n"  # one line a variant: its switches together
    assert "Adopted: `AMG_FAST_FFN_METHOD=gemm`" in md_out.read_text()
    # a bench that timed no variant leaves the earlier verdict alone; one that timed them rewrites it
    path.write_text(json.dumps(summary(DEFAULT)))
    assert mod.main([str(path), "--env-out", str(env_out)]) == 0
    assert env_out.read_text() == "ffn_gemm AMG_FAST_FFN_METHOD=gemm\n"
    path.write_text(json.dumps(summary(DEFAULT, ffn_gemm=({"AMG_FAST_FFN_METHOD": "gemm"}, faster(0.9), True, 0))))
    assert mod.main([str(path), "--env-out", str(env_out)]) == 0 and env_out.read_text() == ""
    # a dry run's summary (CPU times) adopts nothing and empties the file, timed variants or none
    for variants in ({"g": ({"AMG_FAST_FFN_METHOD": "gemm"}, faster(2), True, 0)}, {}):
        env_out.write_text("ffn_gemm AMG_FAST_FFN_METHOD=gemm\n")
        path.write_text(json.dumps(dict(summary(DEFAULT, **variants), dry_run=True)))
        assert mod.main([str(path), "--env-out", str(env_out)]) == 0 and env_out.read_text() == ""
    # judged on some modes, a variant timed only in others still counts as a verdict (here: none adopted)
    env_out.write_text("ffn_gemm AMG_FAST_FFN_METHOD=gemm\n")
    path.write_text(json.dumps(summary(DEFAULT, g=({"AMG_FAST_FFN_METHOD": "gemm"}, faster(2), True, 0))))
    assert mod.main([str(path), "--env-out", str(env_out), "--modes", "bf16"]) == 0 and env_out.read_text() == ""


def test_bad_inputs_are_refused_by_name(tmp_path, capsys):
    mod = adopt_variants()
    assert mod.main([str(tmp_path / "missing.json")]) == 2
    assert "cannot read the bench summary" in capsys.readouterr().err
    (tmp_path / "list.json").write_text("[1, 2]")
    assert mod.main([str(tmp_path / "list.json")]) == 2
    assert "is not a bench/gpu_summary.py summary" in capsys.readouterr().err
    for flags, message in ((["--min-gain", "1.5"], "--min-gain must be in [0, 1), got 1.5"),
                           (["--modes", "fp32,fp16"], "--modes must name some of fp32, tf32, bf16, got fp32,fp16")):
        with pytest.raises(SystemExit) as err:
            mod.main([str(tmp_path / "list.json"), *flags])
        assert err.value.code == 2 and message in capsys.readouterr().err


def test_the_cuda_tests_verdict_keeps_a_failed_variant_out(tmp_path, capsys):
    """--verdict: the variants of the CUDA tests' verdict whose tests failed (variant_failures) or did not run
    (variant_unrun) are not adopted; the others are; an unreadable verdict file is refused by name."""
    mod = adopt_variants()
    path, env_out, verdict = tmp_path / "summary.json", tmp_path / "adopted.env", tmp_path / "kernels_verdict.json"
    path.write_text(json.dumps(summary(DEFAULT, ffn_gemm=({"AMG_FAST_FFN_METHOD": "gemm"}, faster(1.5), True, 0),
                                       s4d_fma=({"AMG_FAST_S4D_FMA": "1"}, faster(1.2), True, 0))))
    verdict.write_text(json.dumps({"verdict": "pass", "variant_failures": {"s4d_fma": ["tests/ops/t.py::t[fma]"]}}))
    assert mod.main([str(path), "--env-out", str(env_out), "--verdict", str(verdict)]) == 0
    assert env_out.read_text() == "ffn_gemm AMG_FAST_FFN_METHOD=gemm\n"
    assert "| s4d_fma |" in capsys.readouterr().out
    # cut off before its tests ran (variant_unrun): not adopted either; null (no collection recorded): no test unrun
    verdict.write_text(json.dumps({"verdict": "incomplete", "variant_failures": {},
                                   "variant_unrun": {"ffn_gemm": ["tests/ops/t.py::t[gemm]"]}}))
    assert mod.main([str(path), "--env-out", str(env_out), "--verdict", str(verdict)]) == 0
    assert env_out.read_text() == "s4d_fma AMG_FAST_S4D_FMA=1\n"
    assert "1 of its CUDA tests did not run (the tests phase's time limit): tests/ops/t.py::t[gemm]" in \
        capsys.readouterr().out
    for record in ({"verdict": "pass"}, {"verdict": "pass", "variant_failures": {}, "variant_unrun": None}):
        verdict.write_text(json.dumps(record))  # written before variant_failures / without the collection
        assert mod.main([str(path), "--env-out", str(env_out), "--verdict", str(verdict)]) == 0
        assert env_out.read_text() == "ffn_gemm AMG_FAST_FFN_METHOD=gemm\ns4d_fma AMG_FAST_S4D_FMA=1\n"
    verdict.write_text("not json")
    assert mod.main([str(path), "--verdict", str(verdict)]) == 2
    assert f"cannot read the CUDA tests' verdict {verdict}" in capsys.readouterr().err


def test_the_unrun_tests_of_would_be_winners_are_listed_for_a_retest(tmp_path, capsys):
    """--retest-out (with --verdict): the tests that did not run of the variants that would be adopted if they had,
    the fastest variant's first, each once, then those of the winners their op could still fall to; nothing of a
    loser, of a variant with a failed test, of one that no test cut off, or of one whose op a fully tested faster
    winner takes, and nothing after a failed verdict (the runs take the reference kernels). Without --verdict it
    is refused."""
    mod = adopt_variants()
    s = summary(DEFAULT, ffn_gemm=({"AMG_FAST_FFN_METHOD": "gemm"}, faster(1.2), True, 0),
                s4d_fma=({"AMG_FAST_S4D_FMA": "1"}, faster(1.5), True, 0),
                gate_cublas=({"AMG_FAST_GATE_METHOD": "cublas"}, faster(1.01), True, 0),
                readout_gemm=({"AMG_FAST_READOUT_GEMM": "1"}, faster(1.3), True, 0),
                ffn_persistent=({"AMG_FAST_FFN_PERSISTENT": "1"}, faster(1.1), True, 0))
    unrun = {"ffn_gemm": ["t.py::a", "t.py::shared"], "s4d_fma": ["t.py::shared", "t.py::b"],
             "gate_cublas": ["t.py::c"], "readout_gemm": ["t.py::d"], "not_benched": ["t.py::e"]}
    failed = {"readout_gemm": ["t.py::f"]}
    assert mod.unrun_winner_tests(s, failed=failed, unrun=unrun) == ["t.py::shared", "t.py::b", "t.py::a"]
    assert mod.unrun_winner_tests(s, failed=failed, unrun={}) == []
    assert mod.unrun_winner_tests(s, modes=("tf32",), unrun={"ffn_gemm": ["t.py::a"]}) == ["t.py::a"]
    # one op: a faster winner whose tests all ran settles it (nothing of the slower one); one with tests unrun may
    # still fail them, so the slower one's come after every op's first choice
    ops = summary(DEFAULT, spectral_fft=({"AMG_FAST_SPECTRAL_TRANSFORM": "fft"}, faster(1.5), True, 0),
                  spectral_dfttriton=({"AMG_FAST_SPECTRAL_DFT_GEMM": "triton"}, faster(1.3), True, 0),
                  gate_cublas=({"AMG_FAST_GATE_METHOD": "cublas"}, faster(1.2), True, 0),
                  ffn_gemm=({"AMG_FAST_FFN_METHOD": "gemm"}, faster(1.4), True, 0),
                  ffn_persistent=({"AMG_FAST_FFN_PERSISTENT": "1"}, faster(1.25), True, 0))
    assert mod.unrun_winner_tests(ops, unrun={"spectral_dfttriton": ["t.py::dft"], "gate_cublas": ["t.py::gate"],
                                              "ffn_gemm": ["t.py::gemm"], "ffn_persistent": ["t.py::persistent"]}) \
        == ["t.py::gemm", "t.py::gate", "t.py::persistent"]
    path, verdict, out = tmp_path / "summary.json", tmp_path / "kernels_verdict.json", tmp_path / "retest.txt"
    path.write_text(json.dumps(s))
    verdict.write_text(json.dumps({"verdict": "incomplete", "variant_failures": failed, "variant_unrun": unrun}))
    assert mod.main([str(path), "--verdict", str(verdict), "--retest-out", str(out)]) == 0
    assert out.read_text() == "t.py::shared\nt.py::b\nt.py::a\n"
    assert f"3 tests of the winning variants did not run: {out}" in capsys.readouterr().out
    for record in ({"verdict": "pass", "variant_failures": {}, "variant_unrun": None},  # no collection recorded
                   {"verdict": "fail", "variant_failures": failed, "variant_unrun": unrun}):  # the reference kernels
        verdict.write_text(json.dumps(record))
        assert mod.main([str(path), "--verdict", str(verdict), "--retest-out", str(out)]) == 0
        assert out.read_text() == ""
    with pytest.raises(SystemExit) as err:
        mod.main([str(path), "--retest-out", str(out)])
    assert err.value.code == 2 and "--retest-out needs --verdict" in capsys.readouterr().err
