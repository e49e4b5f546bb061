"""The paper's experiments as data (registry, specs, paper numbers), the sweep runner and reports."""
