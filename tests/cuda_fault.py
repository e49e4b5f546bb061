"""A pytest plugin for GPU runs: a CUDA fault (an illegal memory access, a device-side assert) breaks
the process's CUDA context for good, so every later test of that process fails with the same error
and hides which test faulted (the H200 campaign of 2026-11-27: 2 faults, 187 follow-on failures).

After a failed test that leaves the context unusable, the plugin ends the process once the test's
reports are out: an xdist worker exits (xdist reports it crashed while running that test and starts a
fresh worker for the tests it had left), a single process stops the session with the test's name.
tests/conftest.py registers it when the tests run on a GPU.
"""
from __future__ import annotations

import os
import sys
from typing import Callable

import pytest

EXIT_STATUS = 70  # the worker's exit status (EX_SOFTWARE)


def cuda_context_usable() -> bool:
    """False when CUDA calls of this process fail since a kernel faulted."""
    import torch

    try:
        torch.cuda.synchronize()
    except RuntimeError:  # torch.AcceleratorError included
        return False
    return True


class CudaFaultGuard:
    def __init__(self, usable: Callable[[], bool] = cuda_context_usable):
        self.usable = usable
        self.broken_by: str | None = None

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        if outcome.get_result().failed and self.broken_by is None and not self.usable():
            self.broken_by = item.nodeid

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        yield
        if self.broken_by is None:
            return
        message = (f"the CUDA context is broken since {self.broken_by} failed (a CUDA fault is sticky: every "
                   "later test of this process would fail with it)")
        if hasattr(item.config, "workerinput"):  # an xdist worker (the environment may be a parent's)
            sys.stderr.write(f"\n{message}; this worker exits, xdist starts a fresh one\n")
            sys.stderr.flush()
            os._exit(EXIT_STATUS)
        item.session.shouldstop = message
