"""A pytest plugin for the GPU session's verdict on the kernels (bench/cuda_verdict.py).

A test marked `@pytest.mark.variant("name", ...)` checks a kernel path that is off by default: the campaign's
variant `name` (scripts/gpu_campaign.sh, docs/kernels.md). As each such test's report comes in (under xdist: in
the controller's output), the plugin prints one of

    VARIANT FAILED name[,name...] NODEID
    VARIANT PASSED name[,name...] NODEID      (its call passed)
    VARIANT SKIPPED name[,name...] NODEID

on a line of its own (the last two only with $AMG_TESTS_VARIANT_COLLECTION set), so that the verdict can tell a
failure of an opt-in path -- it keeps that variant from being adopted -- from one of the default kernels, which
keeps the Triton kernels out of the session's runs. With $AMG_TESTS_VARIANT_COLLECTION naming a file, the
collection writes there {variant: [node ids]} (JSON, atomically; each xdist worker the same), so that the verdict
can also tell which of a variant's tests never ran (a tests phase cut off by its time limit): bench/adopt_variants.py
adopts no variant whose tests did not all run. With run_last (tests/conftest.py sets it on a GPU) the variant tests
run after all others, so that a tests phase cut off by its time limit leaves them, not tests of the default
kernels, unrun. tests/conftest.py registers it.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from amg_fast._files import atomic_write_text

MARKER = "variant"
PREFIX = "VARIANT FAILED"
RAN_PREFIXES = {"passed": "VARIANT PASSED", "skipped": "VARIANT SKIPPED"}
COLLECTED_ENV = "AMG_TESTS_VARIANT_COLLECTION"  # the file the collection's {variant: [node ids]} is written to


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


def printed_nodeid(config: pytest.Config, nodeid: str) -> str:
    """nodeid (relative to the rootdir) as pytest's summary prints it: its path relative to the directory pytest
    was started in (Config.cwd_relative_nodeid does this too, but takes a str before pytest 9.2, a NodeId since)."""
    path, sep, rest = nodeid.partition("::")
    start = config.invocation_params.dir
    if start == config.rootpath or not path:
        return nodeid
    return Path(os.path.relpath(config.rootpath / path, start)).as_posix() + sep + rest


class VariantReport:
    def __init__(self, config: pytest.Config, run_last: bool = False):
        self.config, self.run_last = config, run_last
        self.failed: dict[str, str] = {}  # node id -> its variants, of the variant tests that failed
        self.collected_to = os.environ.get(COLLECTED_ENV) or None  # and then the PASSED / SKIPPED lines too

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items):
        names = [variant_names(item) for item in items]  # a malformed marker is refused before any test runs
        variant = [bool(n) for n in names]
        if self.collected_to:
            collected: dict[str, list[str]] = {}
            for item, item_names in zip(items, names):
                for name in item_names:
                    collected.setdefault(name, []).append(printed_nodeid(self.config, item.nodeid))
            atomic_write_text(self.collected_to, json.dumps(collected, indent=1, sort_keys=True) + "\n")
        if self.run_last:  # a stable sort: the default paths' tests first, each group in its order
            items[:] = [item for _, item in sorted(zip(variant, items), key=lambda pair: pair[0])]

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        report = outcome.get_result()
        names = variant_names(item)
        if names:  # carried to the xdist controller with the report
            report.user_properties.append((MARKER, ",".join(names)))

    def pytest_runtest_logreport(self, report):
        if hasattr(self.config, "workerinput"):  # an xdist worker's output is not the log
            return
        ran = RAN_PREFIXES["passed"] if report.passed and report.when == "call" else \
            RAN_PREFIXES["skipped"] if report.skipped else None
        if self.collected_to and ran and (names := dict(report.user_properties).get(MARKER)):
            self._write(f"{ran} {names} {printed_nodeid(self.config, report.nodeid)}")
        if not report.failed:
            return
        # a later failed report of the same test without the property: xdist's for the worker that a CUDA fault in
        # that test ended (tests/cuda_fault.py), one more failure mark of the same variant test
        names = dict(report.user_properties).get(MARKER) or self.failed.get(report.nodeid)
        if names:
            self.failed[report.nodeid] = names
            self._write(f"{PREFIX} {names} {printed_nodeid(self.config, report.nodeid)}")

    def _write(self, line: str) -> None:
        terminal = self.config.pluginmanager.get_plugin("terminalreporter")
        if terminal is not None:  # on a line of its own: -q's progress marks leave the line open
            terminal.write(f"\n{line}\n", flush=True)
        else:
            print(line, flush=True)
