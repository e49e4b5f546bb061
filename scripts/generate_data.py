#!/usr/bin/env python
"""scripts/generate_data.py: the same tool as the console script `amg-fast-generate` (amg_fast.cli.generate); --help says more."""
from _starting import run_cli  # scripts/_starting.py: Ctrl-C while starting or exiting: one line

if __name__ == "__main__":
    run_cli("amg_fast.cli.generate")
