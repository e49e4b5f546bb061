#!/usr/bin/env python
"""Print the parameter-count tables of docs/models.md (core models at width 128, baselines at their
default widths; f = 32 / 64 / 128 with modes f//2), computed from the code.

Paste the output between the parameter-table markers of docs/models.md; tests/test_docs.py checks
that the two agree.
"""
from amg_fast.models import parameter_table_markdown

if __name__ == "__main__":
    print(parameter_table_markdown(), end="")
