"""A pytest plugin for the GPU session's verdict on the kernels (bench/cuda_verdict.py).

A test marked `@pytest.mark.variant("name", ...)` checks a kernel path that is off by default: the campaign's
variant `name` (scripts/gpu_campaign.sh, docs/kernels.md). When such a test fails, the plugin prints

    VARIANT FAILED name[,name...] NODEID

on a line of its own as the report comes in (under xdist: in the controller's output), so that the verdict can
tell a failure of an opt-in path -- it keeps that variant from being adopted -- from one of the default
kernels, which keeps the Triton kernels out of the session's runs. With run_last (tests/conftest.py sets it on a
GPU) the variant tests run after all others, so that a tests phase cut off by its time limit leaves them, not
tests of the default kernels, unrun. tests/conftest.py registers it.
"""
from __future__ import annotations

import pytest

MARKER = "variant"
PREFIX = "VARIANT FAILED"


def variant_names(item: pytest.Item) -> list[str]:
    """The variants named by the item's `variant` markers (its own, its parametrization's, its class's and
    module's), sorted; a marker without a name, or with one that is not a plain word, is refused by name."""
    names = set()
    for mark in item.iter_markers(MARKER):
        if not mark.args or mark.kwargs:
            raise pytest.UsageError(f"{item.nodeid}: the {MARKER} marker takes the variants' names as positional "
                                    f"arguments, e.g. @pytest.mark.{MARKER}(\"ffn_persistent\"); got args "
                                    f"{mark.args!r}, kwargs {mark.kwargs!r}")
        for name in mark.args:
            if not (isinstance(name, str) and name and all(c.isalnum() or c in "_.-" for c in name)):
                raise pytest.UsageError(f"{item.nodeid}: a {MARKER} name must be a word of letters, digits and "
                                        f"_.- (a campaign variant's name), got {name!r}")
            names.add(name)
    return sorted(names)


class VariantReport:
    def __init__(self, config: pytest.Config, run_last: bool = False):
        self.config, self.run_last = config, run_last
        self.failed: dict[str, str] = {}  # node id -> its variants, of the variant tests that failed

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items):
        variant = [bool(variant_names(item)) for item in items]  # a malformed marker is refused before any test runs
        if self.run_last:  # a stable sort: the default paths' tests first, each group in its order
            items[:] = [item for _, item in sorted(zip(variant, items), key=lambda pair: pair[0])]

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        report = outcome.get_result()
        if report.failed:
            names = variant_names(item)
            if names:  # carried to the xdist controller with the report
                report.user_properties.append((MARKER, ",".join(names)))

    def pytest_runtest_logreport(self, report):
        if not report.failed or hasattr(self.config, "workerinput"):  # an xdist worker's output is not the log
            return
        # a later failed report of the same test without the property: xdist's for the worker that a CUDA fault in
        # that test ended (tests/cuda_fault.py), one more failure mark of the same variant test
        names = dict(report.user_properties).get(MARKER) or self.failed.get(report.nodeid)
        if names:
            self.failed[report.nodeid] = names
            line = f"{PREFIX} {names} {self.config.cwd_relative_nodeid(report.nodeid)}"
            terminal = self.config.pluginmanager.get_plugin("terminalreporter")
            if terminal is not None:  # on a line of its own: -q's progress marks leave the line open
                terminal.write(f"\n{line}\n", flush=True)
            else:
                print(line, flush=True)
