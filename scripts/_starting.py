"""Ctrl-C while a script in scripts/ is still importing its libraries (torch takes seconds): one line
and exit status 130, as once the tool runs (amg_fast._interrupt), not a KeyboardInterrupt traceback
from deep inside torch. Nothing has been written at that point. Import this before amg_fast."""
from __future__ import annotations

import contextlib
import os
import signal
import sys
from pathlib import Path


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
