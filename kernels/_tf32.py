"""TF32 rounding, on the device (inside kernels) and on the host: the one definition every kernel uses.

TF32 keeps fp32's 8 exponent bits and 10 of its 23 explicit mantissa bits. A plain-TF32 MMA on Hopper
drops an fp32 operand's low 13 bits (truncation); a value rounded here first is read exactly, and
x - round_tf32(x) is exact in fp32 (the "lo" part of a 3xTF32 product, kernels/ffn_gemm.py).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

__all__ = ["round_tf32", "round_to_tf32"]


@triton.jit
def round_tf32(x):
    """fp32 tile x rounded to TF32's 10 explicit mantissa bits, to nearest with ties away from zero (PTX
    cvt.rna.tf32.f32): a plain-TF32 MMA then reads it exactly. Rounding instead of letting the MMA truncate
    halves an operand's error and removes its bias (round_to_tf32 is the host version)."""
    bits = x.to(tl.int32, bitcast=True)
    return ((bits + 0x1000) & -8192).to(tl.float32, bitcast=True)


def round_to_tf32(t: torch.Tensor) -> torch.Tensor:
    """fp32 t rounded to TF32's 10 mantissa bits, to nearest with ties away from zero (as round_tf32)."""
    bits = t.contiguous().view(torch.int32)
    return ((bits + 0x1000) & -8192).view(torch.float32)
