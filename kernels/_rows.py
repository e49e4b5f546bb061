"""Helpers shared by the kernels that stream activation rows against a small weight (the encoder's
grid_linear, the decoder's composed_linear): the accumulation-dtype cast and the grid-stride row tiling.

Each such kernel runs a fixed number of programs, each looping over row tiles pid, pid + grid, ... so
that what it forms from the weights once (the decoder's W2 W1) is formed once a program, and writes one
partial sum a program in the backward (summed in order by a one-program kernel: deterministic).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from amg_fast.kernels._common import cdiv, next_pow2

__all__ = ["to_acc", "acc_zeros", "ROW_STREAM_POLICY", "row_stream_tiling"]

# "elements": the row tile's register budget (BLOCK_M = elements // H_PAD rows, at least 1); "programs": the
# grid (about two per SM of an H100); "stages": the row loop's pipeline depth (tl.range num_stages: 2 has
# Triton prefetch the next row tile with cp.async while this one is computed; without an explicit depth it
# pipelines only loads that feed a tl.dot, and these kernels have none: every load was synchronous, sm_90 SASS
# by bench/compile_sm90.py, 2026-11-29; untimed); on CPU (the interpreter) one program runs fastest: tests
# patch in the "cuda" policy (each module's LAUNCH_POLICY is a copy of this, patched apart).
ROW_STREAM_POLICY = {
    "cuda": {"elements": 8192, "programs": 264, "num_warps": 8, "stages": 2},
    "cpu": {"elements": 65536, "programs": 1, "num_warps": 4, "stages": 1},
}


@triton.jit
def to_acc(x, FP64: tl.constexpr):
    """x in the accumulation dtype: fp64 when FP64, else fp32 (one return: triton 3.6 does not compile a
    return in each branch)."""
    if FP64:
        y = x.to(tl.float64)
    else:
        y = x.to(tl.float32)
    return y


@triton.jit
def acc_zeros(ROWS: tl.constexpr, COLS: tl.constexpr, FP64: tl.constexpr):
    """A [ROWS, COLS] tile of zeros in the accumulation dtype: the streaming kernels add their row tiles into it
    elementwise and reduce its rows once after the loop (a reduction every tile costs a cross-warp exchange)."""
    return to_acc(tl.zeros((ROWS, COLS), dtype=tl.float32), FP64)


def row_stream_tiling(M: int, width: int, policy: dict, device: torch.device) -> dict:
    """(grid, H_PAD, BLOCK_M, num_warps, STAGES) for M rows of `width` columns under policy[device type] (else
    its "cuda" entry): H_PAD = width padded to a power of two, BLOCK_M = elements // H_PAD rows, STAGES the
    row loop's pipeline depth."""
    chosen = policy.get(device.type, policy["cuda"])
    h_pad = next_pow2(width, 1)
    block_m = next_pow2(max(1, chosen["elements"] // h_pad), 1)
    programs = max(1, min(chosen["programs"], cdiv(M, block_m)))
    return {"grid": (programs,), "H_PAD": h_pad, "BLOCK_M": block_m, "num_warps": chosen["num_warps"],
            "STAGES": chosen["stages"]}
