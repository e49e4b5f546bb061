#!/usr/bin/env python
"""scripts/train.py: the same tool as the console script `amg-fast-train` (amg_fast.cli.train); --help says more."""
import sys

from amg_fast.cli.train import main

if __name__ == "__main__":
    sys.exit(main())
