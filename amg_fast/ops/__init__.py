"""Public ops. Each takes backend="auto" | "triton" | "reference" (see amg_fast.ops._backend)."""
from amg_fast.ops.decoder import composed_linear, composed_linear_ref
from amg_fast.ops.encoder import grid_linear, grid_linear_ref
from amg_fast.ops.ffn import feed_forward, feed_forward_ref
from amg_fast.ops.gate import gate_fusion, gate_fusion_freq, gate_fusion_ref
from amg_fast.ops.readout import linear_glu, linear_glu_ref
from amg_fast.ops.readout_gate import memory_gate, memory_gate_freq, memory_gate_ref
from amg_fast.ops.s4d import s4d_scan, s4d_scan_ref, s4d_step, s4d_step_ref, s4d_zoh_scan
from amg_fast.ops.spectral_conv import spectral_conv1d, spectral_conv1d_ref

__all__ = [
    "spectral_conv1d", "spectral_conv1d_ref",
    "s4d_scan", "s4d_zoh_scan", "s4d_scan_ref", "s4d_step", "s4d_step_ref",
    "gate_fusion", "gate_fusion_freq", "gate_fusion_ref",
    "memory_gate", "memory_gate_freq", "memory_gate_ref",
    "feed_forward", "feed_forward_ref",
    "composed_linear", "composed_linear_ref",
    "grid_linear", "grid_linear_ref",
    "linear_glu", "linear_glu_ref",
]
