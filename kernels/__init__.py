"""amg_fast.kernels: Triton kernels and their launchers (Triton only: no nn.Module, no autograd).

Installed as the subpackage amg_fast.kernels (see pyproject.toml); there is no top-level
`kernels` module. The fused spectral-convolution, S4D-scan and gate kernels arrive with the
kernel issue; until then every op runs its PyTorch reference.
"""
