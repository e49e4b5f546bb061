"""tests/cuda_fault.py: after a test that breaks the CUDA context (faked here: the guard is told the
context is unusable), the process ends so that the tests after it run in a fresh one."""
import textwrap
from pathlib import Path

pytest_plugins = ["pytester"]

TESTS = Path(__file__).parent
INNER_TESTS = """
def test_faults():
    assert False, "stands for a kernel that faulted"

def test_after_1():
    pass

def test_after_2():
    pass

def test_after_3():
    pass
"""


def inner_conftest(usable: bool) -> str:
    return textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(TESTS)!r})
        from cuda_fault import CudaFaultGuard

        def pytest_configure(config):
            config.pluginmanager.register(CudaFaultGuard(usable=lambda: {usable}), "cuda_fault_guard")
    """)


def test_a_single_process_stops_after_the_test_that_broke_the_context(pytester):
    pytester.makeconftest(inner_conftest(usable=False))
    pytester.makepyfile(test_inner=INNER_TESTS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*the CUDA context is broken since test_inner.py::test_faults failed*"])


def test_an_xdist_worker_exits_and_a_fresh_one_runs_the_rest(pytester):
    pytester.makeconftest(inner_conftest(usable=False))
    pytester.makepyfile(test_inner=INNER_TESTS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "1")
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed") == 3, result.stdout.str()
    result.stdout.fnmatch_lines(["*crashed while running*test_faults*"])


def test_a_failure_with_a_usable_context_changes_nothing(pytester):
    pytester.makeconftest(inner_conftest(usable=True))
    pytester.makepyfile(test_inner=INNER_TESTS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1, passed=3)
    assert "CUDA context" not in result.stdout.str() + result.stderr.str()
