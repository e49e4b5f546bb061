"""Ctrl-C in the command-line tools: one line saying what was kept, exit status 130, no traceback.

The first SIGINT stops the work as Python always does (KeyboardInterrupt); while the work unwinds
(removing what a run directory holds before its first checkpoint, temp files of unfinished
writes) further SIGINTs are ignored, so a second Ctrl-C cannot leave a half-cleaned state. Every
file amg_fast writes is written to a temp file and renamed (amg_fast._files), so an interrupted
write leaves the previous file, or none.
"""
from __future__ import annotations

import os
import shlex
import signal
import sys
from typing import Callable, Sequence

__all__ = ["EXIT_INTERRUPTED", "EXIT_BROKEN_PIPE", "run_interruptible", "stop_once", "arm_stop_once",
           "command_line"]

EXIT_INTERRUPTED = 130  # 128 + SIGINT: what a shell reports for a process stopped by Ctrl-C
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: what a shell tool reports when its reader went away (`| head`)


def stop_once(signum, frame) -> None:
    """SIGINT handler: raise KeyboardInterrupt the first time, ignore SIGINT from then on."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise KeyboardInterrupt


def _deliver_again(previous_hook):
    """A sys.unraisablehook for while stop_once is armed. Python cannot raise an exception out of a
    finalizer (__del__, a weakref callback: torch and matplotlib run many), so a KeyboardInterrupt that
    stop_once raised there was lost: the work went on with SIGINT ignored from then on (a training run
    that no Ctrl-C stops). Such a swallowed interrupt is raised again in the ordinary code the finalizer
    interrupted, at its next line (a trace function on that frame; a signal sent again would land in
    the next finalizer just as likely, and a loop that spends its time in finalizers never stopped)."""
    def hook(unraisable) -> None:
        try:
            frame = sys._getframe(1)  # the code that was running when the object was collected
        except ValueError:  # no Python frame above (the interpreter shutting down): nothing to raise into
            frame = None
        if not (isinstance(unraisable.exc_value, KeyboardInterrupt) and frame is not None
                and signal.getsignal(signal.SIGINT) is signal.SIG_IGN):
            previous_hook(unraisable)
            return
        previous_trace, previous_frame_trace = sys.gettrace(), frame.f_trace

        def raise_here(traced, event, arg):  # any event of that frame: its next line, or its return
            sys.settrace(previous_trace)
            traced.f_trace = previous_frame_trace
            raise KeyboardInterrupt

        if previous_trace is None:
            sys.settrace(lambda *args: None)  # tracing on (new calls untraced), so frame.f_trace is called
        frame.f_trace = raise_here
    return hook


def arm_stop_once() -> Callable[[], None]:
    """Install stop_once for SIGINT (and the hook that re-delivers an interrupt a finalizer swallowed);
    returns the function that restores what was there before."""
    previous, previous_hook = signal.getsignal(signal.SIGINT), sys.unraisablehook
    signal.signal(signal.SIGINT, stop_once)
    sys.unraisablehook = _deliver_again(previous_hook)

    def restore() -> None:
        sys.unraisablehook = previous_hook
        signal.signal(signal.SIGINT, previous if previous is not None else signal.default_int_handler)
    return restore


def run_interruptible(work: Callable[[], int], kept: Callable[[], str]) -> int:
    """work() -> its exit status; on Ctrl-C print "interrupted: <kept()>" to stderr and return 130;
    when stdout's reader goes away (`plan ... | head`) stop quietly with 141, as a shell tool does.

    kept() says, from the files, what was kept and how to continue. A SIGINT that the caller's
    environment ignores (a job started with nohup, say) stays ignored. Main thread only (signal)."""
    restore = (lambda: None) if signal.getsignal(signal.SIGINT) is signal.SIG_IGN else arm_stop_once()
    try:
        return work()
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the message is printed whole
        try:
            message = kept()
        except Exception as err:  # noqa: BLE001 - the line is printed whatever the files hold
            message = f"what was kept could not be read ({type(err).__name__}: {err})"
        print(f"interrupted: {message}", file=sys.stderr, flush=True)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit's flush
        return EXIT_BROKEN_PIPE
    finally:
        restore()


def command_line(argv: Sequence[str] | None, *extra: str) -> str:
    """The command that was run, ready to paste again (plus `extra` arguments): `python
    scripts/train.py ARGS` or `amg-fast-train ARGS` as invoked; argv None means sys.argv[1:]."""
    args = list(sys.argv[1:] if argv is None else argv) + list(extra)
    program = sys.argv[0] if sys.argv and sys.argv[0] else "python"
    return shlex.join((["python"] if program.endswith(".py") else []) + [program, *args])
