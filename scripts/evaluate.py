#!/usr/bin/env python
"""scripts/evaluate.py: the same tool as the console script `amg-fast-evaluate` (amg_fast.cli.evaluate); --help says more."""
import sys

from _starting import ctrl_c_while_importing  # scripts/_starting.py

with ctrl_c_while_importing():
    from amg_fast.cli.evaluate import main

if __name__ == "__main__":
    sys.exit(main())
