"""bench/cuda_verdict.py: the CUDA tests' verdict on the kernel sources, and which recorded verdict applies to a
checkout and machine (scripts/gpu_campaign.sh's calls without the tests phase; tests/test_gpu_campaign.py runs
the script with it)."""
from __future__ import annotations

import json

import pytest
from helpers import load_bench

verdicts = load_bench("cuda_verdict", "bench_cuda_verdict")


def folder(pattern: str) -> str:
    """The folder a VERDICT_SOURCES pattern starts in ("amg_fast/ops/**/*.py" -> "amg_fast/ops")."""
    return pattern.split("/*")[0]


@pytest.fixture
def checkout(tmp_path):
    """A stand-in checkout: one file in each folder the verdict covers, and ones outside them (a folder below
    amg_fast/ that the CUDA tests do not check, a test)."""
    root = tmp_path / "checkout"
    for pattern in verdicts.VERDICT_SOURCES:
        (root / folder(pattern)).mkdir(parents=True, exist_ok=True)
        (root / folder(pattern) / "a.py").write_text(f"# {pattern}\n")
    for unchecked in ("amg_fast/experiments/reports.py", "tests/ops/test_a.py"):
        (root / unchecked).parent.mkdir(parents=True, exist_ok=True)
        (root / unchecked).write_text("# not checked by the CUDA tests\n")
    return root


def test_the_digest_follows_every_checked_source_and_nothing_else(checkout):
    digest, n = verdicts.sources_digest(checkout)
    assert n == len(verdicts.VERDICT_SOURCES)
    (checkout / "amg_fast" / "experiments" / "reports.py").write_text("# changed\n")
    (checkout / "tests" / "ops" / "test_a.py").write_text("# changed\n")
    (checkout / "docs.md").write_text("changed\n")
    assert verdicts.sources_digest(checkout) == (digest, n)
    for pattern in verdicts.VERDICT_SOURCES:
        before = verdicts.sources_digest(checkout)[0]
        (checkout / folder(pattern) / "a.py").write_text("# edited\n")
        assert verdicts.sources_digest(checkout)[0] != before, pattern
    (checkout / "kernels" / "sub").mkdir()
    (checkout / "kernels" / "sub" / "deeper.py").write_text("# a subpackage of the kernels\n")
    assert verdicts.sources_digest(checkout)[1] == n + 1
    before = verdicts.sources_digest(checkout)[0]
    (checkout / "kernels" / "a.py").rename(checkout / "kernels" / "b.py")  # same bytes, another file
    assert verdicts.sources_digest(checkout)[0] != before


def test_the_real_checkout_covers_the_kernels_and_their_callers():
    names = {path.as_posix() for path in verdicts.source_files()}
    for expected in ("kernels/spectral_conv.py", "amg_fast/ops/spectral_conv.py", "amg_fast/models/memory.py",
                     "amg_fast/train/precision.py", "amg_fast/_checks.py", "amg_fast/_nvtx.py"):
        assert expected in names, expected
    assert not any(name.startswith(("amg_fast/experiments/", "amg_fast/data/", "tests/", "bench/")) for name in names)


def record(checkout, path, verdict, **fields):
    """Write verdict for checkout into the folder path, with fields overwriting the record's."""
    written = verdicts.write(path, verdict, root=checkout)
    (path / verdicts.VERDICT_FILE).write_text(json.dumps({**written, **fields}))
    return path / verdicts.VERDICT_FILE


def test_a_written_verdict_applies_to_its_sources_and_machine_only(checkout, tmp_path):
    log = tmp_path / "tests.log"
    log.write_text("....F\nFAILED tests/ops/x.py::test_y - assert 1 == 2\n1 failed, 4 passed in 3.21s\n"
                   "===== 2 passed in 1.00s =====\n")
    written = verdicts.write(tmp_path / "s1", "fail", logs=[log], copy_to=tmp_path / "machine" / "verdict.json",
                             root=checkout)
    assert written["summary"] == ["1 failed, 4 passed in 3.21s", "2 passed in 1.00s"]
    assert written["sources_sha256"] == verdicts.sources_digest(checkout)[0]
    assert json.loads((tmp_path / "machine" / "verdict.json").read_text()) == written
    hit = verdicts.find([tmp_path / "s1"], root=checkout)
    assert hit is not None and hit[0] == written and hit[1] == tmp_path / "s1" / verdicts.VERDICT_FILE

    other_triton = record(checkout, tmp_path / "s2", "pass", triton="0.0.1", capability="8.0")
    assert verdicts.find([other_triton], root=checkout) is None
    assert verdicts.find([other_triton], any_machine=True, root=checkout)[0]["verdict"] == "pass"
    dry_run = record(checkout, tmp_path / "dry", "pass", capability=None)  # a CPU's record: no CUDA test ran
    assert verdicts.find([dry_run], any_machine=True, root=checkout) is None
    (checkout / "kernels" / "a.py").write_text("# the kernels changed since\n")
    assert verdicts.find([tmp_path / "s1"], root=checkout) is None
    assert verdicts.find([tmp_path / "s1"], any_machine=True, root=checkout) is None


def day(n: int) -> str:
    return f"2026-12-{n:02d}T00:00:00+00:00"


def test_a_failure_holds_until_the_tests_pass_again(checkout, tmp_path):
    """A failure on the same sources outweighs the passes before it and a later cut-off tests phase; a later
    full pass (the tests ran again) clears it."""
    record(checkout, tmp_path / "old", "pass", date=day(1))
    record(checkout, tmp_path / "new", "incomplete", date=day(3))
    paths = [tmp_path / "old", tmp_path / "new"]
    assert verdicts.find(paths, root=checkout)[0]["verdict"] == "incomplete"  # the newest
    paths.append(record(checkout, tmp_path / "failed", "fail", date=day(2)).parent)
    assert verdicts.find(paths, root=checkout)[1].parent.name == "failed"  # before "new": a cut-off clears nothing
    paths.append(record(checkout, tmp_path / "again", "pass", date=day(4)).parent)
    assert verdicts.find(paths, root=checkout)[1].parent.name == "again"
    paths.append(record(checkout, tmp_path / "flaky", "fail", date=day(5)).parent)
    assert verdicts.find(paths, root=checkout)[1].parent.name == "flaky"


def test_a_pass_on_some_tests_only_is_no_verdict_but_a_failure_there_is(checkout, tmp_path):
    """A tests phase given other test paths (CAMPAIGN_TESTS, e.g. one file to isolate a fault) names them: its pass
    or cut-off says nothing of the rest, its failure is a failure."""
    some = ["tests/ops/test_gate.py"]
    written = verdicts.write(tmp_path / "some", "pass", tests=some, root=checkout)
    assert written["tests"] == some
    assert verdicts.find([tmp_path / "some"], root=checkout) is None
    assert verdicts.find([record(checkout, tmp_path / "cut", "incomplete", tests=some)], root=checkout) is None
    whole = record(checkout, tmp_path / "whole", "pass", date=day(1))
    assert json.loads(whole.read_text())["tests"] is None
    failed = record(checkout, tmp_path / "failed", "fail", tests=some, date=day(2))
    assert verdicts.find([whole, failed], root=checkout)[0]["verdict"] == "fail"


def test_unreadable_and_foreign_files_are_not_verdicts(checkout, tmp_path):
    (tmp_path / "broken.json").write_text("{not json")
    (tmp_path / "list.json").write_text("[1, 2]")
    odd = record(checkout, tmp_path / "odd", "pass")
    odd.write_text(json.dumps({**json.loads(odd.read_text()), "verdict": "maybe"}))
    paths = [tmp_path / "missing.json", tmp_path / "broken.json", tmp_path / "list.json", odd, tmp_path / "empty_dir"]
    (tmp_path / "empty_dir").mkdir()
    assert verdicts.find(paths, root=checkout) is None
    with pytest.raises(ValueError, match="verdict must be one of .*'pass'.*got 'maybe'"):
        verdicts.write(tmp_path / "x", "maybe", root=checkout)


def test_the_command_line_prints_the_verdict_and_exits_by_it(tmp_path, capsys):
    """find's exit status is what scripts/gpu_campaign.sh branches on: 0 pass / incomplete, 1 fail, 2 none."""
    assert verdicts.main(["find", str(tmp_path / "none.json")]) == 2 and capsys.readouterr().out == ""
    assert verdicts.main(["write", str(tmp_path / "s"), "--verdict", "incomplete"]) == 0
    capsys.readouterr()
    assert verdicts.main(["find", str(tmp_path / "s")]) == 0
    assert capsys.readouterr().out.startswith(f"incomplete {tmp_path / 's' / verdicts.VERDICT_FILE} 20")
    assert verdicts.main(["write", str(tmp_path / "t"), "--verdict", "fail"]) == 0
    capsys.readouterr()
    assert verdicts.main(["find", str(tmp_path / "s"), str(tmp_path / "t")]) == 1
    assert capsys.readouterr().out.startswith("fail ")
    assert verdicts.main(["write", str(tmp_path / "p"), "--verdict", "pass", "--tests", "tests/ops/test_gate.py"]) == 0
    assert capsys.readouterr().out == "pass\n"
    assert json.loads((tmp_path / "p" / verdicts.VERDICT_FILE).read_text())["tests"] == ["tests/ops/test_gate.py"]
    assert verdicts.main(["find", str(tmp_path / "p")]) == 2
    with pytest.raises(SystemExit):
        verdicts.main(["write", str(tmp_path / "u"), "--verdict", "maybe"])


PASSED_LOG = "....s....\n12 passed, 1 skipped in 30.0s\n"
FAILED_LOG = "..F.\nFAILED tests/ops/test_gate.py::test_x - assert 1 == 2\n1 failed, 3 passed in 2.0s\n"
INTERRUPTED_LOG = "........ [ 40%]\n....\n!!! KeyboardInterrupt !!!\n12 passed in 60.0s\n"
NOT_RUN = "the CUDA tests did not run to the end (pytest exits: "
VARIANT_TEST = "tests/ops/test_ffn_gemm.py::test_y[persistent]"  # marked variant("ffn_persistent")
VARIANT_LOG = (f"..F.\nVARIANT FAILED ffn_persistent {VARIANT_TEST}\n..\nFAILED {VARIANT_TEST} - assert 1 == 2\n"
               "1 failed, 5 passed in 2.0s\n")


@pytest.mark.parametrize("runs, before, expected", [
    ([(0, PASSED_LOG), (0, "")], False, ("pass", "")),  # the -m gpu run: all deselected (exit 5, taken as 0)
    ([(0, PASSED_LOG), (0, PASSED_LOG)], True, ("pass", "")),  # the tests ran again and passed: a failure cleared
    ([(1, FAILED_LOG), (0, PASSED_LOG)], False, ("fail", "the CUDA tests failed")),
    ([(0, PASSED_LOG), (1, FAILED_LOG)], False, ("fail", "the CUDA tests failed")),
    ([(124, "..F..s\n"), (0, PASSED_LOG)], False, ("fail", "the CUDA tests failed")),  # interrupted: its progress
    ([(137, "........ [ 40%]\n..E.\n"), (0, PASSED_LOG)], False, ("fail", "the CUDA tests failed")),  # killed
    ([(124, INTERRUPTED_LOG), (0, PASSED_LOG)], False, ("incomplete", "")),
    ([(137, "........ [ 40%]\n....\n"), (0, "")], False, ("incomplete", "")),  # killed before its summary
    ([(0, PASSED_LOG), (124, INTERRUPTED_LOG)], False, ("incomplete", "")),
    ([(124, INTERRUPTED_LOG), (0, PASSED_LOG)], True, ("fail", "")),  # cut off after a failure: the failure holds
    ([(4, "ERROR: file or directory not found: tests/x.py\nno tests ran in 0.01s\n"), (0, "")], False,
     ("fail", NOT_RUN + "4 0)")),
    ([(139, PASSED_LOG), (0, PASSED_LOG)], False, ("fail", NOT_RUN + "139 0)")),  # a crash
    ([(124, "bringing up nodes...\n"), (0, PASSED_LOG)], False, ("fail", NOT_RUN + "124 0)")),  # no kernel test
    ([(124, "bringing up nodes...\n"), (124, "")], False, ("fail", NOT_RUN + "124 124)")),
    ([(0, PASSED_LOG), (124, "bringing up nodes...\n")], False, ("incomplete", "")),  # the rest's run: its time
    # tests marked variant (kernel paths off by default) failed, and only they: no failure of the runs' kernels
    ([(1, VARIANT_LOG), (0, PASSED_LOG)], False, ("pass", "")),
    ([(124, f"..F.\nVARIANT FAILED s4d_fma {VARIANT_TEST}\n....\n"), (0, "")], False, ("incomplete", "")),  # cut
    ([(1, VARIANT_LOG), (0, PASSED_LOG)], True, ("pass", "")),
    ([(1, VARIANT_LOG.replace("..F.", "..F.F")), (0, PASSED_LOG)], False, ("fail", "the CUDA tests failed")),  # 2 F
    ([(1, VARIANT_LOG + "FAILED tests/ops/test_gate.py::test_x - assert\n"), (0, PASSED_LOG)], False,
     ("fail", "the CUDA tests failed")),  # a default kernel's test failed beside it
    ([(1, VARIANT_LOG), (1, FAILED_LOG)], False, ("fail", "the CUDA tests failed")),
    ([(139, VARIANT_LOG), (0, PASSED_LOG)], False, ("fail", NOT_RUN + "139 0)")),  # and then a crash
])
def test_the_verdict_is_judged_from_each_pytest_run(runs, before, expected):
    assert verdicts.judge(runs, failed_before=before) == expected


def test_a_pass_of_some_tests_clears_no_failure():
    assert verdicts.judge([(0, PASSED_LOG)], subset=True) == ("pass", "")
    assert verdicts.judge([(0, PASSED_LOG)], failed_before=True, subset=True) == ("fail", "")
    with pytest.raises(ValueError, match="got none"):
        verdicts.judge([])


def test_a_traceback_line_is_not_a_failure_mark():
    """(pytest prints tracebacks only for failures, which their FAILED lines mark anyway.)"""
    log = "E       assert 2 != 2\nE         \n........ [100%]\n12 passed in 3.0s\n"
    assert verdicts.judge([(124, log)]) == ("incomplete", "")


def test_the_command_line_judges_the_verdict_it_writes(tmp_path, capsys):
    kernels, gpu = tmp_path / "tests_kernels.log", tmp_path / "tests_gpu.log"
    kernels.write_text(FAILED_LOG)
    gpu.write_text(PASSED_LOG)
    assert verdicts.main(["write", str(tmp_path / "s"), "--run", "1", str(kernels), "--run", "0", str(gpu)]) == 0
    assert capsys.readouterr().out == "fail the CUDA tests failed\n"
    written = json.loads((tmp_path / "s" / verdicts.VERDICT_FILE).read_text())
    assert written["verdict"] == "fail" and written["summary"] == ["1 failed, 3 passed in 2.0s",
                                                                   "12 passed, 1 skipped in 30.0s"]
    kernels.write_text(INTERRUPTED_LOG)
    assert verdicts.main(["write", str(tmp_path / "s"), "--run", "124", str(kernels), "--failed-before"]) == 0
    assert capsys.readouterr().out == "fail\n"
    assert verdicts.main(["write", str(tmp_path / "s"), "--run", "124", str(tmp_path / "no_such.log")]) == 0
    assert capsys.readouterr().out == f"fail {NOT_RUN}124)\n"  # a run that left no log showed no test passed
    assert verdicts.main(["write", str(tmp_path / "s"), "--run", "x", str(kernels)]) == 2
    assert "--run RC LOG: RC must be an exit status (0-255), got 'x'" in capsys.readouterr().err


def test_the_command_line_names_the_failed_variants_and_records_them(tmp_path, capsys):
    kernels = tmp_path / "tests_kernels.log"
    kernels.write_text(VARIANT_LOG)
    assert verdicts.main(["write", str(tmp_path / "s"), "--run", "1", str(kernels)]) == 0
    assert capsys.readouterr().out == (f"variant ffn_persistent: 1 of its tests failed (not adopted): {VARIANT_TEST}\n"
                                       "pass\n")
    written = json.loads((tmp_path / "s" / verdicts.VERDICT_FILE).read_text())
    assert written["verdict"] == "pass" and written["variant_failures"] == {"ffn_persistent": [VARIANT_TEST]}
    kernels.write_text(PASSED_LOG)
    verdicts.main(["write", str(tmp_path / "s"), "--run", "0", str(kernels)])
    assert json.loads((tmp_path / "s" / verdicts.VERDICT_FILE).read_text())["variant_failures"] == {}


def test_the_variant_tests_that_did_not_run_are_recorded(tmp_path, capsys):
    """--variant-tests (the collection's {variant: [node ids]}, tests/variant_report.py): a variant test with no
    VARIANT PASSED, SKIPPED or FAILED line in the logs did not run, cut off by the time limit; its variant is
    recorded (variant_unrun) and named, and the lines change nothing else in the verdict."""
    fma = [f"tests/ops/test_s4d_scan_triton.py::test_fma[{i}]" for i in range(3)]
    collected = tmp_path / "variant_tests.json"
    collected.write_text(json.dumps({"ffn_persistent": [VARIANT_TEST], "s4d_fma": fma}))
    kernels = tmp_path / "tests_kernels.log"
    kernels.write_text(f"....\nVARIANT PASSED ffn_persistent {VARIANT_TEST}\n..\n"
                       f"VARIANT SKIPPED s4d_fma,s4d_x {fma[0]}\n..\nVARIANT FAILED s4d_fma {fma[1]}\n.F\n"
                       "!!! KeyboardInterrupt !!!\n")
    assert verdicts.judge([(124, kernels.read_text())]) == ("incomplete", "")
    assert verdicts.main(["write", str(tmp_path / "s"), "--run", "124", str(kernels),
                          "--variant-tests", str(collected)]) == 0
    assert capsys.readouterr().out == (f"variant s4d_fma: 1 of its tests failed (not adopted): {fma[1]}\n"
                                       "variant s4d_fma: 1 of its 3 tests did not run (not adopted)\nincomplete\n")
    written = json.loads((tmp_path / "s" / verdicts.VERDICT_FILE).read_text())
    assert written["variant_unrun"] == {"s4d_fma": [fma[2]]}
    verdicts.main(["write", str(tmp_path / "s"), "--run", "124", str(kernels)])  # no collection: unknown
    assert json.loads((tmp_path / "s" / verdicts.VERDICT_FILE).read_text())["variant_unrun"] is None
    capsys.readouterr()
    for text in ("not json", '{"s4d_fma": "tests/x.py::t"}'):
        collected.write_text(text)
        assert verdicts.main(["write", str(tmp_path / "s"), "--run", "0", str(kernels),
                              "--variant-tests", str(collected)]) == 2
        assert f"--variant-tests {collected}: " in capsys.readouterr().err


def test_a_later_run_of_unrun_variant_tests_updates_the_verdict(tmp_path, capsys):
    """update (the campaign's retest of the winners' tests after the bench): each test that ran now leaves
    variant_unrun, each that failed joins variant_failures; the verdict, its date and the other records stay,
    pytest's result line joins the summary, and the copy is written too. A file that is no verdict on this
    checkout's sources is refused by name."""
    fma = [f"tests/ops/test_s4d_scan_triton.py::test_fma[{i}]" for i in range(3)]
    collected, kernels = tmp_path / "variant_tests.json", tmp_path / "tests_kernels.log"
    collected.write_text(json.dumps({"ffn_persistent": [VARIANT_TEST], "s4d_fma": fma}))
    kernels.write_text("....\n!!! KeyboardInterrupt !!!\n4 passed in 9.0s\n")  # cut off before every variant test
    assert verdicts.main(["write", str(tmp_path / "s"), "--run", "124", str(kernels), "--variant-tests",
                          str(collected), "--copy-to", str(tmp_path / "work" / verdicts.VERDICT_FILE)]) == 0
    capsys.readouterr()
    work = tmp_path / "work" / verdicts.VERDICT_FILE
    before = json.loads(work.read_text())
    retest = tmp_path / "tests_retest.log"
    retest.write_text(f"VARIANT PASSED ffn_persistent {VARIANT_TEST}\n.\nVARIANT PASSED s4d_fma {fma[0]}\n.\n"
                      f"VARIANT FAILED s4d_fma {fma[1]}\nF\n!!! KeyboardInterrupt !!!\n1 failed, 2 passed in 40.0s\n")
    copy = tmp_path / "s2" / verdicts.VERDICT_FILE
    assert verdicts.main(["update", str(work), "--log", str(retest), "--copy-to", str(copy)]) == 0
    assert capsys.readouterr().out == (
        "variant ffn_persistent: 1 of its tests that had not run ran now, 0 failed\n"
        "variant s4d_fma: 2 of its tests that had not run ran now, 1 failed; 1 still did not run (not adopted)\n")
    after = json.loads(work.read_text())
    assert after == json.loads(copy.read_text())
    assert after["variant_unrun"] == {"s4d_fma": [fma[2]]} and after["variant_failures"] == {"s4d_fma": [fma[1]]}
    assert after["summary"] == before["summary"] + ["1 failed, 2 passed in 40.0s"]
    assert {k: v for k, v in after.items() if k not in ("variant_unrun", "variant_failures", "summary")} == \
        {k: v for k, v in before.items() if k not in ("variant_unrun", "variant_failures", "summary")}
    # a verdict without the collection (variant_unrun null) stays without it; failures are still recorded
    unknown = dict(before, variant_unrun=None)
    work.write_text(json.dumps(unknown))
    record, ran_now = verdicts.update(work, [retest])
    assert record["variant_unrun"] is None and ran_now == {} and record["variant_failures"] == {"s4d_fma": [fma[1]]}
    for text, message in (("not json", "cannot read the CUDA tests' verdict"),
                          ('{"verdict": "maybe"}', "not a bench/cuda_verdict.py verdict"),
                          (json.dumps(dict(before, sources_sha256="0" * 64)), "a verdict on other sources")):
        work.write_text(text)
        assert verdicts.main(["update", str(work), "--log", str(retest)]) == 2
        assert f"cuda_verdict.py update: {work}: {message}" in capsys.readouterr().err


def test_digest_says_whether_a_verdict_is_on_these_sources(tmp_path, capsys):
    """digest --matches FILE: exit 0 for a verdict written on the checkout's sources, 1 for one on other sources or a
    file that is none (the campaign runs no variant test for it)."""
    verdicts.main(["write", str(tmp_path / "s"), "--verdict", "incomplete"])
    written = tmp_path / "s" / verdicts.VERDICT_FILE
    capsys.readouterr()
    assert verdicts.main(["digest", "--matches", str(written)]) == 0
    assert f"{written}: on these sources" in capsys.readouterr().out
    written.write_text(json.dumps(dict(json.loads(written.read_text()), sources_sha256="0" * 64)))
    assert verdicts.main(["digest", "--matches", str(written)]) == 1
    assert f"{written}: not on these sources ({'0' * 64};" in capsys.readouterr().out
    for text in ("not json", "[1, 2]"):
        written.write_text(text)
        assert verdicts.main(["digest", "--matches", str(written)]) == 1
        assert "not on these sources (no digest;" in capsys.readouterr().out
    assert verdicts.main(["digest", "--matches", str(tmp_path / "missing.json")]) == 1
