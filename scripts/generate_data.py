#!/usr/bin/env python
"""scripts/generate_data.py: the same tool as the console script `amg-fast-generate` (amg_fast.cli.generate); --help says more."""
import sys

from _starting import ctrl_c_while_importing  # scripts/_starting.py

with ctrl_c_while_importing():
    from amg_fast.cli.generate import main

if __name__ == "__main__":
    sys.exit(main())
