"""tests/variant_report.py: a failed test marked `variant` prints its VARIANT FAILED line (in the xdist
controller's output too), from which bench/cuda_verdict.py judges a session's failures of opt-in kernel paths
alone as none and names their variants; on a GPU the variant tests run after all others."""
import json
import textwrap
from pathlib import Path

import pytest
from helpers import load_bench

verdicts = load_bench("cuda_verdict", "bench_cuda_verdict")

pytest_plugins = ["pytester"]

TESTS = Path(__file__).parent


def inner_conftest(run_last: bool = False) -> str:
    return textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(TESTS)!r})
        from variant_report import VariantReport

        def pytest_configure(config):
            config.addinivalue_line("markers", "variant(name): an opt-in kernel path")
            config.pluginmanager.register(VariantReport(config, run_last={run_last}), "variant_report")
    """)


INNER_CONFTEST = inner_conftest()
INNER_TESTS = """
import pytest

@pytest.mark.variant("ffn_persistent")
def test_opt_in_path_fails():
    assert False, "stands for a variant's kernel that failed on the GPU"

@pytest.mark.parametrize("path", ["default", pytest.param("fma", marks=pytest.mark.variant("s4d_fma", "s4d_x"))])
def test_parametrized(path):
    assert path == "default"

@pytest.mark.variant("gate_bwd_wgmma")
def test_opt_in_path_passes():
    pass

def test_default_path_passes():
    pass
"""
EXPECTED = {"ffn_persistent": ["test_inner.py::test_opt_in_path_fails"],
            "s4d_fma": ["test_inner.py::test_parametrized[fma]"], "s4d_x": ["test_inner.py::test_parametrized[fma]"]}


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one-process", "xdist"])
def test_failed_variant_tests_print_their_lines_and_judge_as_no_failure(pytester, workers):
    pytester.makeconftest(INNER_CONFTEST)
    pytester.makepyfile(test_inner=INNER_TESTS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q", "-rfE", *workers)
    assert result.ret == 1
    log = result.stdout.str()
    assert sorted(line for line in log.splitlines() if line.startswith("VARIANT FAILED")) == [
        "VARIANT FAILED ffn_persistent test_inner.py::test_opt_in_path_fails",
        "VARIANT FAILED s4d_fma,s4d_x test_inner.py::test_parametrized[fma]"]
    assert verdicts.variant_failures([log]) == EXPECTED
    assert verdicts.judge([(1, log), (0, "3 passed in 1.0s\n")]) == ("pass", "")


def test_a_failed_default_test_beside_them_is_a_failure(pytester):
    pytester.makeconftest(INNER_CONFTEST)
    pytester.makepyfile(test_inner=INNER_TESTS + "\ndef test_default_path_fails():\n    assert False\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q", "-rfE", "-n", "2")
    log = result.stdout.str()
    assert "FAILED test_inner.py::test_default_path_fails" in log
    assert verdicts.judge([(result.ret, log)]) == ("fail", "the CUDA tests failed")


@pytest.mark.parametrize("marker", ['@pytest.mark.variant()', '@pytest.mark.variant("two words")',
                                    '@pytest.mark.variant(name="x")'])
def test_a_malformed_marker_is_refused_before_any_test_runs(pytester, marker):
    pytester.makeconftest(INNER_CONFTEST)
    pytester.makepyfile(test_inner=f"import pytest\n\n{marker}\ndef test_x():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "test_inner.py::test_x: " in result.stderr.str() + result.stdout.str()


@pytest.mark.parametrize("run_last", [False, True])
def test_on_a_gpu_the_variant_tests_run_after_the_others(pytester, run_last):
    """run_last (conftest: on a GPU): a tests phase cut off by its time limit leaves the opt-in paths' tests unrun,
    not the default kernels'; the others keep their order, and so do the variant tests."""
    pytester.makeconftest(inner_conftest(run_last))
    pytester.makepyfile(test_inner=INNER_TESTS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q", "--collect-only")
    order = [line.split("::")[1] for line in result.stdout.lines if line.startswith("test_inner.py::")]
    written = ["test_opt_in_path_fails", "test_parametrized[default]", "test_parametrized[fma]",
               "test_opt_in_path_passes", "test_default_path_passes"]
    assert order == (["test_parametrized[default]", "test_default_path_passes", "test_opt_in_path_fails",
                      "test_parametrized[fma]", "test_opt_in_path_passes"] if run_last else written)


def test_a_variant_test_that_broke_the_cuda_context_is_still_only_its_variants_failure(pytester):
    """A CUDA fault in a variant test ends its xdist worker (tests/cuda_fault.py; faked here), and xdist reports the
    test crashed: a second failure of the same test, which gets its VARIANT FAILED line too."""
    pytester.makeconftest(inner_conftest() + textwrap.dedent("""
        from cuda_fault import CudaFaultGuard
        _configure = pytest_configure

        def pytest_configure(config):
            _configure(config)
            config.pluginmanager.register(CudaFaultGuard(usable=lambda: False), "cuda_fault_guard")
    """))
    pytester.makepyfile(test_inner="""
import pytest

@pytest.mark.variant("s4d_fma")
def test_faults():
    assert False, "stands for a variant's kernel that faulted"

def test_after_1():
    pass

def test_after_2():
    pass
""")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q", "-rfE", "-n", "1")
    log = result.stdout.str()
    assert "crashed" in log and log.count("VARIANT FAILED s4d_fma test_inner.py::test_faults") == 2, log
    assert verdicts.variant_failures([log]) == {"s4d_fma": ["test_inner.py::test_faults"]}
    assert verdicts.judge([(result.ret, log)]) == ("pass", ""), log


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one-process", "xdist"])
def test_with_the_collection_recorded_each_variant_test_that_ran_prints_its_line(pytester, workers, monkeypatch):
    """$AMG_TESTS_VARIANT_COLLECTION: the collection's {variant: [node ids]} is written there, and each variant test
    that ran prints its VARIANT PASSED / SKIPPED / FAILED line, from which the verdict finds the ones that did not run
    (here: stopped by --maxfail after the default test's failure, with run_last as on a GPU)."""
    collected = pytester.path / "variant_tests.json"
    monkeypatch.setenv("AMG_TESTS_VARIANT_COLLECTION", str(collected))
    pytester.makeconftest(inner_conftest(run_last=True))
    pytester.makepyfile(test_inner=INNER_TESTS + '\n@pytest.mark.variant("ffn_persistent")\ndef test_skips():\n'
                                                 '    pytest.skip("not on this device")\n')
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q", "-rfE", *workers)
    log = result.stdout.str()
    assert json.loads(collected.read_text()) == {
        "ffn_persistent": ["test_inner.py::test_opt_in_path_fails", "test_inner.py::test_skips"],
        "gate_bwd_wgmma": ["test_inner.py::test_opt_in_path_passes"],
        "s4d_fma": ["test_inner.py::test_parametrized[fma]"], "s4d_x": ["test_inner.py::test_parametrized[fma]"]}
    assert sorted(line for line in log.splitlines() if line.startswith("VARIANT ")) == [
        "VARIANT FAILED ffn_persistent test_inner.py::test_opt_in_path_fails",
        "VARIANT FAILED s4d_fma,s4d_x test_inner.py::test_parametrized[fma]",
        "VARIANT PASSED gate_bwd_wgmma test_inner.py::test_opt_in_path_passes",
        "VARIANT SKIPPED ffn_persistent test_inner.py::test_skips"]
    assert verdicts.variant_unrun([log], json.loads(collected.read_text())) == {}
    assert verdicts.judge([(result.ret, log)]) == ("pass", "")
    pytester.makepyfile(test_inner=INNER_TESTS + "\ndef test_default_path_fails():\n    assert False\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q", "-rfE", "--maxfail=1")  # one process
    assert verdicts.variant_unrun([result.stdout.str()], json.loads(collected.read_text())) == {
        "ffn_persistent": ["test_inner.py::test_opt_in_path_fails"],
        "gate_bwd_wgmma": ["test_inner.py::test_opt_in_path_passes"],
        "s4d_fma": ["test_inner.py::test_parametrized[fma]"], "s4d_x": ["test_inner.py::test_parametrized[fma]"]}


def test_without_the_collection_recorded_only_failures_print_a_line(pytester):
    pytester.makeconftest(INNER_CONFTEST)
    pytester.makepyfile(test_inner=INNER_TESTS)
    log = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q").stdout.str()
    assert not [line for line in log.splitlines() if line.startswith(("VARIANT PASSED", "VARIANT SKIPPED"))]
    assert "variant_tests.json" not in {p.name for p in pytester.path.iterdir()}
