"""amg_fast.kernels: Triton kernels and their launchers (Triton only: no nn.Module, no autograd).

Installed as the subpackage amg_fast.kernels (see pyproject.toml); there is no top-level
`kernels` module. One module per op: spectral_conv (truncated DFT / mixing / inverse DFT and their
adjoints), s4d_scan (the S4D convolution kernel with or without the folded ZOH discretisation, the
Toeplitz and recurrent scans, the rollout step), gate_fusion (the adaptive memory gate, optionally
with its frequency gate), ffn_gemm (the FFNO feed-forward as row GEMMs with fused epilogues, 3xTF32 on split weights in fp32 mode), composed_linear
(the FFNO decoder's two Linears as one narrow Linear), grid_linear (the grid encoder);
_common holds the launch helpers, _tf32 the TF32 rounding, and limits the measured thresholds (size limits, method
crossovers). The autograd Functions and public ops that call them live in amg_fast.ops.
"""
