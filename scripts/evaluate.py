#!/usr/bin/env python
"""scripts/evaluate.py: the same tool as the console script `amg-fast-evaluate` (amg_fast.cli.evaluate); --help says more."""
from _starting import run_cli  # scripts/_starting.py: Ctrl-C while starting or exiting: one line

if __name__ == "__main__":
    run_cli("amg_fast.cli.evaluate")
