"""How the command-line tools start and stop (the amg-fast-* console scripts and scripts/*.py), so
that Ctrl-C gives one line and never a traceback also before and after the tool's own handling
(amg_fast._interrupt): while the tool still imports its libraries (torch takes seconds; nothing is
written yet: one line, exit status 130), and while the interpreter shuts down after the tool has
finished (its exit status stands; torch's finalizers would otherwise print the interrupt as a
traceback). Imports nothing heavy: `import amg_fast` loads no torch (amg_fast/__init__.py)."""
from __future__ import annotations

import contextlib
import importlib
import os
import signal
import sys
from pathlib import Path

__all__ = ["ctrl_c_while_importing", "run_cli", "train", "evaluate", "generate", "reproduce"]


@contextlib.contextmanager
def ctrl_c_while_importing():
    """Within the block, SIGINT prints `interrupted: ...` and ends the process with 130 (a SIGINT the
    caller ignores, e.g. under nohup, stays ignored); the handler before it is restored after."""
    previous = signal.getsignal(signal.SIGINT)
    if previous is signal.SIG_IGN:
        yield
        return

    def stop(signum, frame):
        tool = Path(sys.argv[0]).name
        os.write(2, f"interrupted: {tool} was still starting (importing its libraries); nothing was written; "
                    "run it again\n".encode())
        os._exit(130)  # no unwinding through a half-imported torch

    signal.signal(signal.SIGINT, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def run_cli(module: str) -> None:
    """Import `module` (a Ctrl-C meanwhile: one line, 130), run its main() and exit with its status,
    ignoring SIGINT once main has returned."""
    with ctrl_c_while_importing():
        main = importlib.import_module(module).main
    code = main()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.exit(code)


def train() -> None:
    """The amg-fast-train console script (amg_fast.cli.train)."""
    run_cli("amg_fast.cli.train")


def evaluate() -> None:
    """The amg-fast-evaluate console script (amg_fast.cli.evaluate)."""
    run_cli("amg_fast.cli.evaluate")


def generate() -> None:
    """The amg-fast-generate console script (amg_fast.cli.generate)."""
    run_cli("amg_fast.cli.generate")


def reproduce() -> None:
    """The amg-fast-reproduce console script (amg_fast.cli.reproduce)."""
    run_cli("amg_fast.cli.reproduce")
