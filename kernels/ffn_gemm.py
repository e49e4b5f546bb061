"""Row GEMMs for the feed-forward's method="gemm": y = relu(x W1^T + b1) W2^T + b2 (+ residual) as four
Triton GEMMs of activation rows against a small weight, each with its elementwise work in the epilogue,
and fp32 mode's dots on tensor cores at fp32 accuracy with only the activation split in registers.

    C [M, N] = A [M, K] @ B [K, N]  (+ bias [N]) (ReLU) (0 where mask [M, N] <= 0) (+ residual [M, N])

A is an activation (row-major rows), B a weight read through its strides: W^T for nn.Linear's x W^T, or in
the backward W, as a transposed copy for fp32 weights (below). The feed-forward as row GEMMs (nn.Linear
layout: W1 [F, H_in], W2 [H_out, F]):

    forward   h  = relu(x W1^T + b1)              (h written once, kept for the backward)
              y  = h W2^T + b2 (+ residual)
    backward  dh = (dy W2) * (h > 0)              (the ReLU's mask in the epilogue)
              dx = dh W1
              dW1, db1, dW2, db2 by kernels.limits.wgrad_method: "triton", gate_fusion.weight_grads ((dh; x)
              and (dy; h): split-K over the rows, the bias gradients summed on the way); "cublas" (the default
              for fp32 activations), two torch GEMMs, db1 and db2 summed in the dh kernel (its epilogue, its
              dy tiles)

Why (issue 19): in fp32 mode (matmul precision "highest") cuBLAS runs these GEMMs on the CUDA cores: on an
H200 at S = 128 (2026-11-27) the feed-forward took 2.30 ms a layer, 4 x 2.30 = 43% of the 21.5 ms fp32 step.
Triton's own tf32x3 dot splits both operands in registers and writes the split weight tiles back to shared
memory every K step; here the weight is split once per pass into TF32 planes in memory (split_tf32:
hi = W rounded to TF32, lo = W - hi, both exact), which stream into shared memory like any operand, and only
the A tile is split in registers. Each product is A_lo B_hi + A_hi B_lo + A_hi B_hi (small terms first),
fp32-accurate: the dropped A_lo B_lo is ~2^-22 relative, and the MMA's truncation of the lo parts ~2^-21.
Outside fp32 mode the same kernels run one dot (TF32, bf16 operands, fp64 "ieee"); no weight split.
A TF32 wgmma (Hopper) reads its shared-memory operands K-major only. The forward's W^T is (W's rows are
its K); the backward's W is not, and triton 3.6 then loads it 4 bytes at a time; so for fp32 weights the
backward reads W1^T and W2^T row-major (one launch; in fp32 mode their TF32 planes, split by the forward's
launch with W1's and W2's and kept), and every dot operand is K-major: bench/compile_sm90.py --ops ffn
--quick shows 16-byte cp.async only. The weight
gradients' operands dh, x, dy, h cannot be (the reduction runs over their rows), hence cuBLAS for them. (Their
3xTF32 kernel on K-major TF32 planes of x^T and dy^T, which the row GEMMs wrote as they read x and dy, was removed
after the H200's session of 2026-11-30: its fp32 step 0.87x the default's, and its dW1 wrong on the GPU.)
The H200's step with method="gemm" (2026-11-29, before the transposed weights and cuBLAS weight gradients)
was 0.97x / 0.66x / 0.98x the epilogue's in fp32 / TF32 / bf16 at S = 128.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from amg_fast.kernels._common import (acc_dtype, cdiv, dot_operand, dot_precision, for_device, new_output,
                                     next_pow2, wrap_triton)
from amg_fast.kernels._tf32 import split_dot, split_tf32, transposed_weights
from amg_fast.kernels.gate_fusion import weight_grads
from amg_fast.kernels.limits import ffn_persistent

__all__ = ["split_tf32", "row_gemm", "feed_forward_gemm_fwd", "feed_forward_gemm_bwd", "gemm_weight_grads",
           "masked_hidden_grad", "linear_split_fwd", "linear_split_dx", "LAUNCH_POLICY"]


# ----------------------------------------------------------------------------- kernels


@triton.jit
def _tile(ptr, rows, row_mask, cols, col_mask, stride_r, stride_c):
    """ptr[rows * stride_r + cols * stride_c] as [len(rows), len(cols)], 0 outside the masks."""
    return tl.load(ptr + rows[:, None] * stride_r + cols[None, :] * stride_c,
                   mask=row_mask[:, None] & col_mask[None, :], other=0.0)


@triton.jit
def _relu(pre):
    """max(pre, 0) with NaN kept (as torch.relu): tl.maximum's default drops NaN on a GPU (PTX max),
    which would hide a diverging run; the interpreter keeps it either way."""
    return tl.maximum(pre, 0.0, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def _plus_residual(acc, res):
    """acc + res (tiles) in the wider of their dtypes: an fp64 residual keeps its digits."""
    sum_t = tl.float64 if res.dtype == tl.float64 else acc.dtype
    return acc.to(sum_t) + res.to(sum_t)


@triton.jit
def _row_gemm_tile(
    tile, a_ptr, b_ptr, c_ptr, bias_ptr, aux_ptr, sums_ptr, sums_width, M, N, K, stride_bk, stride_bn, lo_offset,
    BIAS: tl.constexpr, RELU: tl.constexpr, MASK: tl.constexpr, RESIDUAL: tl.constexpr, SPLIT: tl.constexpr,
    COLUMN_SUMS: tl.constexpr, INPUT_SUMS: tl.constexpr, DOT_PRECISION: tl.constexpr, BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    """Tile number `tile` of C: [BLOCK_M, BLOCK_N] (the N tiles of a row block adjacent in tile order, so the A
    rows they share come from L2), and with COLUMN_SUMS its rows' sum per column (before the residual, in the
    accumulation dtype) at sums' columns [0, N); with INPUT_SUMS the first tile of each row block also sums its
    A tiles' rows (as cast, in the accumulation dtype) into the K columns after those. A is cast to B's dtype
    (an fp32 dy against bf16 weights)."""
    n_tiles = tl.cdiv(N, BLOCK_N)
    row_block = (tile // n_tiles).to(tl.int64)
    input_sums_ptr = sums_ptr + row_block * sums_width + (N if COLUMN_SUMS else 0)
    rows = row_block * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = (tile % n_tiles) * BLOCK_N + tl.arange(0, BLOCK_N)
    row_mask, col_mask = rows < M, cols < N
    acc_t = tl.float64 if b_ptr.dtype.element_ty == tl.float64 else tl.float32  # the dots' dtype is B's
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=acc_t)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        k_mask = ks < K
        a = _tile(a_ptr, rows, row_mask, ks, k_mask, K, 1).to(b_ptr.dtype.element_ty)
        if INPUT_SUMS:  # A's rows past M are 0
            if tile % n_tiles == 0:
                tl.store(input_sums_ptr + ks, tl.sum(a.to(acc_t), axis=0), mask=k_mask)
        b = _tile(b_ptr, ks, k_mask, cols, col_mask, stride_bk, stride_bn)
        b_lo = _tile(b_ptr + lo_offset, ks, k_mask, cols, col_mask, stride_bk, stride_bn) if SPLIT else b
        acc = split_dot(a, b, b_lo, acc, SPLIT, DOT_PRECISION)  # 3xTF32 with SPLIT: B's planes from memory
    if BIAS:
        acc += tl.load(bias_ptr + cols, mask=col_mask, other=0.0).to(acc_t)[None, :]
    if RELU:  # NaN kept, as torch.relu
        acc = _relu(acc)
    if MASK:  # the ReLU's backward, as threshold_backward: 0 where the saved activation is <= 0
        acc = tl.where(_tile(aux_ptr, rows, row_mask, cols, col_mask, N, 1) <= 0, 0.0, acc)
    if COLUMN_SUMS:  # rows past M hold 0 (A's masked rows) plus the bias: left out
        tl.store(sums_ptr + row_block * sums_width + cols, tl.sum(tl.where(row_mask[:, None], acc, 0.0), axis=0),
                 mask=col_mask)
    if RESIDUAL:
        acc = _plus_residual(acc, _tile(aux_ptr, rows, row_mask, cols, col_mask, N, 1))
    tl.store(c_ptr + rows[:, None] * N + cols[None, :], acc.to(c_ptr.dtype.element_ty),
             mask=row_mask[:, None] & col_mask[None, :])


@triton.jit
def _row_gemm_kernel(
    a_ptr, b_ptr, c_ptr, bias_ptr, aux_ptr,   # A [M, K], C / aux [M, N] row-major; B [K, N] at b_ptr + k sbk + n sbn
    sums_ptr, sums_width,                      # [cdiv(M, BLOCK_M), sums_width] partial column sums: C's, then A's
    M, N, K, stride_bk, stride_bn, lo_offset,  # SPLIT: B's TF32 hi plane at b_ptr, its lo plane lo_offset further
    BIAS: tl.constexpr, RELU: tl.constexpr, MASK: tl.constexpr, RESIDUAL: tl.constexpr, SPLIT: tl.constexpr,
    COLUMN_SUMS: tl.constexpr, INPUT_SUMS: tl.constexpr, DOT_PRECISION: tl.constexpr, BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, PERSISTENT: tl.constexpr,
):
    """C's tiles (_row_gemm_tile): one a program, or with PERSISTENT tiles pid, pid + grid, ... of a fixed grid,
    the loop nest flattened (tl.range flatten) so that the pipeliner can load the next tile's first A and B
    chunks during this tile's epilogue (at K = 128 a tile has only 4 K steps of 32 to hide its loads behind)."""
    if PERSISTENT:
        n_tiles = tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N)
        for tile in tl.range(tl.program_id(0), n_tiles, tl.num_programs(0), flatten=True):
            _row_gemm_tile(tile, a_ptr, b_ptr, c_ptr, bias_ptr, aux_ptr, sums_ptr, sums_width, M, N, K, stride_bk,
                           stride_bn, lo_offset, BIAS, RELU, MASK, RESIDUAL, SPLIT, COLUMN_SUMS, INPUT_SUMS,
                           DOT_PRECISION, BLOCK_M, BLOCK_N, BLOCK_K)
    else:  # the default: the code compiled and timed before the persistent form
        _row_gemm_tile(tl.program_id(0), a_ptr, b_ptr, c_ptr, bias_ptr, aux_ptr, sums_ptr, sums_width, M, N, K,
                       stride_bk, stride_bn, lo_offset, BIAS, RELU, MASK, RESIDUAL, SPLIT, COLUMN_SUMS, INPUT_SUMS,
                       DOT_PRECISION, BLOCK_M, BLOCK_N, BLOCK_K)


# ----------------------------------------------------------------------------- launchers

# Tiles per device type and dtype class ("x3": fp32 mode's split dots; "fp64"; "default": TF32 / bf16).
# GPU: 128 x 128 x 32 tiles, 8 warps, 3 stages, compiled for sm_90 by triton 3.6 at the paper's shapes
# (bench/compile_sm90.py): wgmma, no spills (x3: 124-214 registers, 128 KB of shared memory); untimed.
# CPU (the interpreter: a fixed cost per program and loop step) as large as the shapes allow; the tests
# run the GPU tiles there too.
# "persistent": a fixed grid of "programs" programs looping over the tiles (_row_gemm_kernel's PERSISTENT: one an
# SM of an H100 / H200, whose 227 KB of shared memory hold one: compiled for sm_90 by triton 3.6, the flattened
# loop takes 144-192 KB in fp32 / TF32, 48-112 in bf16, and up to 254 registers, none spilled), else one program
# a tile; $AMG_FAST_FFN_PERSISTENT overrides it (kernels.limits.ffn_persistent: the campaign's variant
# ffn_persistent). Untimed (2026-11-30).
LAUNCH_POLICY = {
    "cuda": {"x3": dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=32, num_warps=8, num_stages=3, persistent=False,
                        programs=132),
             "default": dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=32, num_warps=8, num_stages=3, persistent=False,
                             programs=132),
             "fp64": dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=16, num_warps=4, num_stages=2, persistent=False,
                          programs=264)},
    "cpu": {"default": dict(BLOCK_M=256, BLOCK_N=128, BLOCK_K=128, num_warps=4, persistent=False, programs=2)},
}


def _tiles(device: torch.device, dtype: torch.dtype, split: bool, M: int, N: int, K: int) -> dict:
    """The launch tiles for dots of this dtype (the weight's) on device; split: fp32 mode's tf32x3 dots."""
    policy = for_device(LAUNCH_POLICY, device)
    kind = "x3" if split else ("fp64" if dtype == torch.float64 else "default")
    tiles = dict(policy.get(kind, policy["default"]))
    if device.type == "cpu":  # no larger than the shapes need (tl.dot dims >= 16)
        for name, n in (("BLOCK_M", M), ("BLOCK_N", N), ("BLOCK_K", K)):
            tiles[name] = min(tiles[name], next_pow2(n))
    return tiles


def _splits(dtype: torch.dtype) -> bool:
    """Whether row GEMMs on activations of this dtype take split weights: fp32 mode's tf32x3 dots."""
    return dot_precision(dtype) == "tf32x3"


def _operands(w1: torch.Tensor, w2: torch.Tensor, planes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The forward's weight operands: each weight's [2, *shape] TF32 planes at the start of the forward's planes
    buffer (_forward_planes), or the weights themselves when planes is empty (no split: outside fp32 mode)."""
    if planes.numel() == 0:
        return w1, w2
    n1 = w1.numel()
    return planes[:2 * n1].view(2, *w1.shape), planes[2 * n1:2 * (n1 + w2.numel())].view(2, *w2.shape)


def _forward_planes(*weights: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """fp32 mode's weight planes from one launch (split_tf32): (the forward's, each weight's [hi | lo] -- W1's and
    W2's for the feed-forward --, the backward's, their transposes': _backward_operands), two views of one buffer;
    the backward so launches no weight kernel of its own. One or two weights."""
    n = 2 * sum(w.numel() for w in weights)
    planes = split_tf32(*weights, *weights, transpose=(False,) * len(weights) + (True,) * len(weights))
    return planes[:n], planes[n:]


def _backward_operands(w1: torch.Tensor, w2: torch.Tensor, planes: torch.Tensor | None = None
                       ) -> tuple[torch.Tensor, torch.Tensor, bool]:
    """(W1 operand, W2 operand, transposed) for the backward's dx = dh W1 and dh = dy W2. For fp32 weights
    (TF32 and tf32x3 dots) W1^T [H_in, F] and W2^T [F, H_out] row-major, as TF32 planes [2, ...] in fp32 mode:
    the forward's (planes, from _forward_planes; any TF32 setting now: 3xTF32 products are at least as accurate
    as it asks), else made here in one launch. A TF32 wgmma reads only K-major operands from shared memory, and W
    itself is N-major there, which triton 3.6 loads 4 bytes at a time (48-96 cp.async of 4 B in the dh and dx
    kernels' SASS for sm_90, against 12 of 16 B in bf16; bench/compile_sm90.py). Other dtypes: the weights
    (transposed False); 16-bit and fp64 dots take either layout."""
    if w1.dtype != torch.float32:
        return w1, w2, False
    n1 = w1.numel()
    (f, h_in), h_out = w1.shape, w2.shape[0]
    if planes is not None and planes.numel() > 0:
        return planes[:2 * n1].view(2, h_in, f), planes[2 * n1:].view(2, f, h_out), True
    if _splits(w1.dtype):
        planes = split_tf32(w1, w2, transpose=True)
        return planes[:2 * n1].view(2, h_in, f), planes[2 * n1:].view(2, f, h_out), True
    flat = transposed_weights(w1, w2)
    return flat[:n1].view(h_in, f), flat[n1:].view(f, h_out), True


def row_gemm(a: torch.Tensor, w: torch.Tensor, *, transpose_w: bool, bias=None, relu: bool = False, mask=None,
             residual=None, out_dtype: torch.dtype | None = None, column_sums: bool = False,
             input_sums: bool = False):
    """C [M, N] = a [M, K] @ (w^T if transpose_w else w) (+ bias [N]) (ReLU) (0 where mask [M, N] <= 0)
    (+ residual [M, N]), in out_dtype (default a's). w: a 2-D weight ([N, K] transposed, else [K, N]), or its
    TF32 planes [2, *shape] (split_tf32): then three TF32 products per dot (a split in registers). a, mask
    and residual contiguous; a is cast to w's dtype in the kernel. column_sums: returns (C, sums [N]), C's
    column sums before the residual in the accumulation dtype (per row tile in the kernel's epilogue, then
    one torch sum). input_sums: a's column sums [K] (as cast to w's dtype) as well, appended: (C, sums [N + K])
    with column_sums, else (C, sums [K]) (the feed-forward's db2 = dy's sums from the dh kernel, which reads dy
    anyway)."""
    split = w.dim() == 3
    rows, cols = w.shape[-2:]
    K, N = (cols, rows) if transpose_w else (rows, cols)
    M = a.shape[0]
    if a.shape != (M, K):
        raise ValueError(f"row_gemm: a must be [M, {K}] for this weight, got {tuple(a.shape)}")
    if mask is not None and residual is not None:
        raise ValueError("row_gemm: mask and residual share one epilogue input; give one of them")
    c = new_output((M, N), dtype=out_dtype or a.dtype, device=a.device)
    tiles = _tiles(a.device, w.dtype, split, M, N, K)  # the dots' dtype is w's
    persistent, programs = ffn_persistent(tiles.pop("persistent", False)), tiles.pop("programs", 132)
    n_tiles = cdiv(M, tiles["BLOCK_M"]) * cdiv(N, tiles["BLOCK_N"])
    sums_width = (N if column_sums else 0) + (K if input_sums else 0)
    sums = new_output((cdiv(M, tiles["BLOCK_M"]), sums_width), dtype=acc_dtype(w), device=a.device) \
        if sums_width else None
    if M > 0 and N > 0:
        strides = (1, cols) if transpose_w else (cols, 1)  # (stride over K, stride over N) of w's [rows, cols]
        aux = mask if mask is not None else residual
        wrap_triton(_row_gemm_kernel)[(min(n_tiles, programs) if persistent else n_tiles,)](
            a, w, c, c if bias is None else bias, c if aux is None else aux, c if sums is None else sums, sums_width,
            M, N, K, *strides, rows * cols if split else 0, BIAS=bias is not None, RELU=relu, MASK=mask is not None,
            RESIDUAL=residual is not None, SPLIT=split, COLUMN_SUMS=column_sums, INPUT_SUMS=input_sums,
            PERSISTENT=persistent, DOT_PRECISION=dot_precision(w.dtype), **tiles)
    return c if sums is None else (c, sums.sum(0))


def feed_forward_gemm_fwd(x, w1, b1, w2, b2, residual=None):
    """(y, h, the backward's weight planes or None) for contiguous x [M, H_in] and weights in x's dtype:
    y [M, H_out] = h W2^T + b2 (+ residual [M, H_out]) in the residual's dtype when given, else x's;
    h = relu(x W1^T + b1) [M, F] in x's dtype, kept for the backward. In fp32 mode (tf32x3 dots) the weights are
    split into TF32 planes first, in one launch with the planes of their transposes, which the backward takes
    (feed_forward_gemm_bwd's w_planes)."""
    planes, backward_planes = _forward_planes(w1, w2) if _splits(x.dtype) else (x.new_empty((0,)), None)
    w1_op, w2_op = _operands(w1, w2, planes)
    h = row_gemm(x, w1_op, transpose_w=True, bias=b1, relu=True)
    y = row_gemm(h, w2_op, transpose_w=True, bias=b2, residual=residual,
                 out_dtype=x.dtype if residual is None else residual.dtype)
    return y, h, backward_planes


def linear_split_fwd(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """fp32 mode's nn.Linear on tensor cores: (pre = x W^T + b [M, N] fp32, W^T's TF32 planes [2, K, N] for the
    backward's dx: linear_split_dx) for contiguous fp32 x [M, K], weight [N, K], bias [N] -- one row GEMM of
    3xTF32 products against W's planes with the bias in its epilogue, W's and W^T's planes split in one launch
    before it (kernels.limits.readout_gemm: the S4D memory's readout Linear)."""
    if not _splits(x.dtype) or weight.dtype != torch.float32:
        raise ValueError(f"linear_split_fwd is fp32 mode's path (float32 x and weight, TF32 off: 3xTF32 dots), got "
                         f"x {x.dtype}, weight {weight.dtype}, dot precision {dot_precision(x.dtype)!r}")
    planes, transposed = _forward_planes(weight)
    pre = row_gemm(x, planes.view(2, *weight.shape), transpose_w=True, bias=bias)
    return pre, transposed.view(2, weight.shape[1], weight.shape[0])


def linear_split_dx(dpre: torch.Tensor, transposed_planes: torch.Tensor) -> torch.Tensor:
    """dx = dpre W [M, K] fp32 for contiguous dpre [M, N] (cast to fp32 in the kernel) and W^T's TF32 planes
    [2, K, N] (linear_split_fwd's): one row GEMM of 3xTF32 products, W^T read K-major."""
    return row_gemm(dpre, transposed_planes, transpose_w=True, out_dtype=torch.float32)


def masked_hidden_grad(dy: torch.Tensor, h: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor
                       ) -> tuple[torch.Tensor, torch.Tensor]:
    """The epilogue feed-forward's (amg_fast.ops.ffn.FeedForwardFn) dh = (dy W2) where h > 0 else 0 [M, F] in h's
    dtype and [db1 | db2] (dh's and dy's column sums [F + H_out], accumulation dtype) -- what kernels.relu_grad's
    pass forms from a cuBLAS dy W2 -- as one row GEMM with the mask and both sums in its epilogue
    (kernels.limits.ffn_dh_method "triton"). dy [M, H_out] (cast to h's dtype), h [M, F] the forward's hidden
    activation, w1, w2 as the forward's (in h's dtype): W2 as _backward_operands makes it (W2^T row-major for
    fp32 weights, TF32 planes in fp32 mode: one launch)."""
    _, w2_op, transposed = _backward_operands(w1, w2)
    return row_gemm(dot_operand(dy, h.dtype), w2_op, transpose_w=transposed, mask=h.contiguous(), out_dtype=h.dtype,
                    column_sums=True, input_sums=True)


def gemm_weight_grads(flat: torch.Tensor, hidden: int, h_in: int, h_out: int) -> tuple[torch.Tensor, ...]:
    """feed_forward_gemm_bwd's flat [dW1 | db1 | dW2 | db2] -> (dw1 [F, H_in], db1 [F], dw2 [H_out, F],
    db2 [H_out]) views."""
    dw1, db1, dw2, db2 = flat.split((hidden * h_in, hidden, h_out * hidden, h_out))
    return dw1.view(hidden, h_in), db1, dw2.view(h_out, hidden), db2


WGRAD_KINDS = ("triton", "cublas")


def feed_forward_gemm_bwd(dy, x, h, w1, w2, need_dx: bool = True, wgrad: str = "triton", w_planes=None
                          ) -> tuple[torch.Tensor, torch.Tensor]:
    """(dx, flat) from dy [M, H_out] (any float dtype: cast to x's first, _common.dot_operand; e.g. fp32 through
    an fp32 residual under autocast) and the forward's x, h: dx [M, H_in] in x's dtype (empty, not computed,
    without need_dx); flat = [dW1 | db1 | dW2 | db2] in w1's dtype (gemm_weight_grads takes it apart; one tensor:
    a custom op's outputs may not alias each other). The weight gradients by wgrad: "triton", weight_grads'
    split-K kernel (bias sums folded in, summed in the accumulation dtype); "cublas", two torch GEMMs, and db1 (its
    epilogue) and db2 (its dy tiles) from the dh kernel, concatenated (kernels.limits.wgrad_method). w_planes: the
    forward's planes of the transposed weights (feed_forward_gemm_fwd), or None. db2 was a torch sum over dy
    before: with the sum of db1's partials, 0.55 ms of the H200's fp32 step (four layers, 2026-11-30)."""
    if wgrad not in WGRAD_KINDS:
        raise ValueError(f"feed_forward_gemm_bwd: wgrad must be one of {WGRAD_KINDS}, got {wgrad!r}")
    w1_op, w2_op, transposed = _backward_operands(w1, w2, w_planes)
    dy = dot_operand(dy, x.dtype)
    sums = wgrad == "cublas"
    dh = row_gemm(dy, w2_op, transpose_w=transposed, mask=h, out_dtype=x.dtype, column_sums=sums, input_sums=sums)
    dh, bias_sums = dh if sums else (dh, None)
    dx = row_gemm(dh, w1_op, transpose_w=transposed) if need_dx else x.new_empty((0,))
    if not sums:
        return dx, weight_grads([(dh, x, None), (dy, h, None)]).to(w1.dtype)
    db1, db2 = bias_sums.split((h.shape[1], dy.shape[1]))
    parts = (dh.t().mm(x), db1, dy.t().mm(h), db2)  # out-of-place: torch.compile traces this body
    return dx, torch.cat([p.flatten().to(w1.dtype) for p in parts])
