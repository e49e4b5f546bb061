#!/usr/bin/env python
"""scripts/evaluate.py: the same tool as the console script `amg-fast-evaluate` (amg_fast.cli.evaluate); --help says more."""
import sys

from amg_fast.cli.evaluate import main

if __name__ == "__main__":
    sys.exit(main())
