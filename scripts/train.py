#!/usr/bin/env python
"""scripts/train.py: the same tool as the console script `amg-fast-train` (amg_fast.cli.train); --help says more."""
import sys

from _starting import ctrl_c_while_importing  # scripts/_starting.py

with ctrl_c_while_importing():
    from amg_fast.cli.train import main

if __name__ == "__main__":
    sys.exit(main())
