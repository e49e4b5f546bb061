#!/usr/bin/env python
"""scripts/generate_data.py: the same tool as the console script `amg-fast-generate` (amg_fast.cli.generate); --help says more."""
import sys

from amg_fast.cli.generate import main

if __name__ == "__main__":
    sys.exit(main())
