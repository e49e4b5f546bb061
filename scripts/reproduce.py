#!/usr/bin/env python
"""scripts/reproduce.py: the same tool as the console script `amg-fast-reproduce` (amg_fast.cli.reproduce); --help says more."""
import sys

from _starting import ctrl_c_while_importing  # scripts/_starting.py

with ctrl_c_while_importing():
    from amg_fast.cli.reproduce import main

if __name__ == "__main__":
    sys.exit(main())
