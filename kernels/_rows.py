"""Helpers shared by the kernels that stream activation rows (the encoder's grid_linear, the decoder's
composed_linear, relu_grad, glu_grad): the accumulation-dtype cast, the zero accumulator tile and the grid-stride
row tiling; and column_sums, one such kernel of its own (column sums of tall tensors, where torch's are slow).

Each such kernel runs a fixed number of programs, each looping over row tiles pid, pid + grid, ... so
that what it forms from the weights once (the decoder's W2 W1) is formed once a program, and writes one
partial sum a program in the backward (summed in order by a one-program kernel: deterministic).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from amg_fast.kernels._common import acc_dtype, cdiv, for_device, new_output, next_pow2, wrap_triton

__all__ = ["to_acc", "acc_zeros", "ROW_STREAM_POLICY", "row_stream_tiling", "streamed_partial_sums",
           "column_sums", "COLUMN_SUMS_POLICY"]

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
    chosen = for_device(policy, device)
    h_pad = next_pow2(width, 1)
    block_m = next_pow2(max(1, chosen["elements"] // h_pad), 1)
    programs = max(1, min(chosen["programs"], cdiv(M, block_m)))
    return {"grid": (programs,), "H_PAD": h_pad, "BLOCK_M": block_m, "num_warps": chosen["num_warps"],
            "STAGES": chosen["stages"]}


def streamed_partial_sums(M: int, width: int, n_sums: int, dtype: torch.dtype, device: torch.device, policy: dict,
                          launch) -> torch.Tensor:
    """The launcher side of a kernel that streams M rows (row_stream_tiling(M, width, policy, device)) and writes
    one [n_sums] partial sum a program: allocates the partial sums [programs, n_sums] in dtype, calls
    launch(grid, part, BLOCK_M=, num_warps=, STAGES=) unless there is nothing to sum (then zeros), and returns
    their torch sum [n_sums] (deterministic)."""
    tiling = row_stream_tiling(M, width, policy, device)
    grid = tiling.pop("grid")
    part = new_output((grid[0], n_sums), dtype=dtype, device=device)
    if M == 0 or n_sums == 0:
        part.zero_()
    else:
        launch(grid, part, BLOCK_M=tiling["BLOCK_M"], num_warps=tiling["num_warps"], STAGES=tiling["STAGES"])
    return part.sum(0)


COLUMN_SUMS_POLICY = {device: dict(policy) for device, policy in ROW_STREAM_POLICY.items()}


@triton.jit
def _column_sums_kernel(a_ptr, b_ptr, part_ptr, M, NA, NB, HAS_B: tl.constexpr, FP64: tl.constexpr,
                        A_PAD: tl.constexpr, B_PAD: tl.constexpr, BLOCK_M: tl.constexpr, STAGES: tl.constexpr):
    """part[pid] = [the column sums of a [M, NA] | of b [M, NB] (HAS_B)] over the row tiles pid, pid + grid, ...
    (row-major), in the accumulation dtype."""
    ca, cb = tl.arange(0, A_PAD), tl.arange(0, B_PAD)
    acc_a, acc_b = acc_zeros(BLOCK_M, A_PAD, FP64), acc_zeros(BLOCK_M, B_PAD, FP64)
    for m0 in tl.range(tl.program_id(0) * BLOCK_M, M, tl.num_programs(0) * BLOCK_M, num_stages=STAGES):
        rows = m0 + tl.arange(0, BLOCK_M).to(tl.int64)
        rmask = rows < M
        acc_a += to_acc(tl.load(a_ptr + rows[:, None] * NA + ca[None, :], mask=rmask[:, None] & (ca < NA)[None, :],
                                other=0.0), FP64)
        if HAS_B:
            acc_b += to_acc(tl.load(b_ptr + rows[:, None] * NB + cb[None, :],
                                    mask=rmask[:, None] & (cb < NB)[None, :], other=0.0), FP64)
    part = part_ptr + tl.program_id(0).to(tl.int64) * (NA + NB)
    tl.store(part + ca, tl.sum(acc_a, axis=0), mask=ca < NA)
    if HAS_B:
        tl.store(part + NA + cb, tl.sum(acc_b, axis=0), mask=cb < NB)


def column_sums(a: torch.Tensor, b: torch.Tensor | None = None) -> torch.Tensor:
    """[a's column sums | b's] for a [M, NA] and b [M, NB] or None (2-D, the same rows), in their accumulation dtype:
    one Triton launch streaming the rows (tiles added elementwise, their rows reduced once a program) and one
    torch sum of the partials (deterministic). torch's own sum over the rows of the gate's dlogits [rows, 128]
    ran at 0.5 TB/s on the H200 (0.105 ms at S = 128, 2026-11-30 profile)."""
    if a.dim() != 2 or (b is not None and (b.dim() != 2 or b.shape[0] != a.shape[0])):
        raise ValueError(f"column_sums: a must be [M, NA] and b [M, NB] or None, got {tuple(a.shape)} and "
                         f"{None if b is None else tuple(b.shape)}")
    a = a.contiguous()
    b = None if b is None else b.contiguous()
    (M, na), nb = a.shape, 0 if b is None else b.shape[1]
    dtype = acc_dtype(a, *(() if b is None else (b,)))
    return streamed_partial_sums(M, na + nb, na + nb, dtype, a.device, COLUMN_SUMS_POLICY, lambda grid, part, **tiles:
                                 wrap_triton(_column_sums_kernel)[grid](
                                     a, a if b is None else b, part, M, na, nb, HAS_B=b is not None,
                                     FP64=dtype == torch.float64, A_PAD=next_pow2(na, 1), B_PAD=next_pow2(nb, 1),
                                     **tiles))
