"""Data: PDE solvers and data-set generators (ks, burgers), HDF5 layouts (h5), resolutions
(resample), the unresolved-energy ratio omega_f (spectral) and torch Datasets (datasets).

Submodules are imported on use, so importing amg_fast.data stays cheap.
"""
