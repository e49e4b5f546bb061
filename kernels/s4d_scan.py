"""Triton kernels for the diagonal S4D scan (forward + backward) and its one-step rollout form.

Math (see amg_fast.ops.s4d for the reference): u real [B, T, S, H], complex lam, c [H, N]
stored as real [H, N, 2], d [H]; per (b, s, h, n): x_t = lam x_{t-1} + u_t (x_{-1} = 0),
y_t = 2 Re(sum_n c_n x_t,n) + d u_t. Equivalently y = Kk * u (causal, per h) + d u with
Kk[h, l] = 2 Re(sum_n c lam^l).

Layout: u, y, dy are read as [B, T, C] with C = S*H, column col = s*H + h (contiguous), so every
time step of a column block is one coalesced row segment. All kernels are parallel over
(batch, column blocks of BLOCK_C); time is handled inside the kernel:

- toeplitz (short T, the default): per channel h the causal convolution is one small matrix product,
  y_h = L_h u_h with the lower-triangular Toeplitz L_h[t, j] = Kk[h, t - j] ([T_PAD, T_PAD]) and u_h
  the [T, B*S] columns of that channel; a program takes BH channels x BN columns (n = b*S + s) x all T
  and runs it as one batched tl.dot over the channels (tensor cores; every element of u read once). The
  skip d u sits on L_h's diagonal, so the dots are the only readers of the u (and dy) tiles and Triton
  pipelines their loads (cp.async, several tiles in flight).
  The backward: du_h = L_h^T dy_h (another batched dot) and P_h = dy_h u_h^T summed over the
  program's columns, whose diagonals are dKk[h, l] = sum_t P_h[t, t - l] (per-group partial sums).
  GELU can be applied to y in the epilogue (and its derivative in the backward's prologue, y
  recomputed by the same dot), so the S4D layer's activation costs no pass of its own.
- toeplitz_loop (the earlier kernels, kept to compare on a GPU): one program per (b, column block,
  time block), a loop over the lag l loading shifted u tiles, y[b, t, col] = sum_{l<=t} Kk[h, l]
  u[b, t-l, col] + d u.
- scan (long T): a sequential recurrence over t, complex state [BLOCK_C, N_PAD] in registers as
  split real/imag parts. The backward recomputes states (nothing stored): a forward-time sweep
  for the parameter gradients, a reverse-time sweep for du. Stable for any T since |lam| < 1 and
  nothing divides by lam.
- step (rollout): one recurrence step, parallel over rows x H, N in registers.

Parameter gradients are written as per-program partial sums (no atomics, deterministic) that the
launchers reduce in torch. Accumulation is fp32 (fp64 when any input is fp64); outputs take u's
dtype, partials the accumulation dtype. Launchers take any strides (they make inputs contiguous).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from amg_fast.kernels._common import (acc_dtype, cdiv, dot_precision, for_device, new_output, next_pow2,
                                     wrap_triton)
from amg_fast.kernels._rows import to_acc
from amg_fast.kernels.limits import TOEPLITZ_DOT_MAX_T, s4d_channels_first

__all__ = [
    "s4d_conv_kernel_fwd", "s4d_conv_kernel_bwd", "s4d_zoh_conv_kernel_fwd", "s4d_zoh_conv_kernel_bwd",
    "s4d_toeplitz_fwd", "s4d_toeplitz_bwd", "s4d_scan_fwd", "s4d_scan_bwd", "s4d_step_fwd",
    "TOEPLITZ_DOT_POLICY",
]

# Launch policy per device type. "tile": register budget of one program, in elements per
# [BLOCK_C, ...] tile row set (Toeplitz: BLOCK_T * BLOCK_C; scan: BLOCK_C * N_PAD * the number of
# complex tiles held). "programs": how many programs the backward kernels aim for when choosing how
# many batch entries one program loops over (each program writes one partial sum; ~8 per SM of an
# H100). On CPU (Triton's interpreter) programs run one after another at a large fixed cost per
# op, so there few, large programs run fastest; tests patch in the "cuda" policy to run the GPU tiling.
LAUNCH_POLICY = {
    "cuda": {"tile": 4096, "programs": 1024},
    "cpu": {"tile": 65536, "programs": 1},
}
# The batched-dot Toeplitz kernels: "elements" bounds each [BH, T_PAD, max(T_PAD, BN)] register tile
# (BH channels: a power of two), BN columns per dot, "programs" as above (each backward group writes
# one [H, T] partial sum of dKk). The backward holds ~6 such tiles (L, L^T, u, g, du, P; tf32x3 splits
# the dot operands in two), hence 4096 elements over 8 warps. BN 16: compiled for sm_90 by triton 3.6 at
# T = 25 (bench/compile_sm90.py --ops s4d_tiles, 2026-11-28) the GELU backward spills nothing in fp32 mode
# (236 registers; 220 since the skip sits on L's diagonal, 2026-11-29) and under TF32 (160; 162), where BN 32
# spilled 232 B a thread in fp32. Untimed: the GPU
# sessions' sweep (bench/kernel_sweep.py --only s4d) decides.
# "channels_first": launch the channel blocks along grid axis 0 (programs scheduled together read neighbouring
# channels of the same columns: at T = 25 a program holds 4 channels, 16 B of each 512-B row of u in fp32)
# instead of the column groups (neighbours then read the same 16 B of rows far apart). Untimed; the sweep
# times both.
TOEPLITZ_DOT_POLICY = {
    "cuda": {"elements": 4096, "BN": 16, "num_warps": 8, "programs": 1024, "channels_first": False},
    "cpu": {"elements": 131072, "BN": 64, "num_warps": 4, "programs": 1, "channels_first": False},
}


# ----------------------------------------------------------------------------- jit helpers


@triton.jit
def _load_pair(ptr, h, n, N, mask, FP64: tl.constexpr):
    """(re, im) [BLOCK_C, N_PAD] of a complex parameter stored as real [H, N, 2], rows h [BLOCK_C],
    columns n [N_PAD]; masked entries are 0."""
    off = (h[:, None] * N + n[None, :]) * 2
    re = tl.load(ptr + off, mask=mask, other=0.0)
    im = tl.load(ptr + off + 1, mask=mask, other=0.0)
    return to_acc(re, FP64), to_acc(im, FP64)


@triton.jit
def _column_params(lam_ptr, c_ptr, d_ptr, C, H, N, FP64: tl.constexpr, BLOCK_C: tl.constexpr,
                   N_PAD: tl.constexpr):
    """This program's BLOCK_C columns (grid axis 0; column col has channel h = col % H) and their
    parameters: (cols, cmask, n, pmask, lam re/im, c re/im [BLOCK_C, N_PAD], d [BLOCK_C])."""
    cols = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    cmask = cols < C
    h = cols % H
    n = tl.arange(0, N_PAD)
    pmask = cmask[:, None] & (n < N)[None, :]
    lr, li = _load_pair(lam_ptr, h, n, N, pmask, FP64)
    cr, ci = _load_pair(c_ptr, h, n, N, pmask, FP64)
    d = to_acc(tl.load(d_ptr + h, mask=cmask, other=0.0), FP64)
    return cols, cmask, n, pmask, lr, li, cr, ci, d


@triton.jit
def _store_pair(ptr, re, im, rows, n, N, mask):
    """Store (re, im) [BLOCK, N_PAD] into a real [..., N, 2] buffer at rows [BLOCK], columns n."""
    off = (rows[:, None].to(tl.int64) * N + n[None, :]) * 2
    tl.store(ptr + off, re.to(ptr.dtype.element_ty), mask=mask)
    tl.store(ptr + off + 1, im.to(ptr.dtype.element_ty), mask=mask)


# ----------------------------------------------------------------------------- toeplitz


@triton.jit
def _h_block(H, N, BLOCK_H: tl.constexpr, N_PAD: tl.constexpr):
    """This program's BLOCK_H channels (grid axis 0): (hs, hmask, n, pmask [BLOCK_H, N_PAD])."""
    hs = tl.program_id(0) * BLOCK_H + tl.arange(0, BLOCK_H)
    hmask = hs < H
    n = tl.arange(0, N_PAD)
    return hs, hmask, n, hmask[:, None] & (n < N)[None, :]


@triton.jit
def _zoh(log_dt_ptr, log_a_re_ptr, a_im_ptr, cc_ptr, hs, hmask, n, N, pmask, FP64: tl.constexpr):
    """ZOH discretisation of the continuous S4D parameters in registers (S4DMemory.discretize):
    A = -exp(log_A_real) + i A_imag, dt = exp(log_dt), lam = exp(dt A), w = (lam - 1) / A, c = C w.
    Returns (dt [BLOCK_H], A re/im, lam re/im, w re/im, C re/im, c re/im), each [BLOCK_H, N_PAD];
    masked entries have A = -1, C = 0 (so c = 0 and nothing divides by 0)."""
    dt = tl.exp(to_acc(tl.load(log_dt_ptr + hs, mask=hmask, other=0.0), FP64))
    off = hs[:, None] * N + n[None, :]
    ar = -tl.exp(to_acc(tl.load(log_a_re_ptr + off, mask=pmask, other=0.0), FP64))
    ai = to_acc(tl.load(a_im_ptr + off, mask=pmask, other=0.0), FP64)
    big_cr, big_ci = _load_pair(cc_ptr, hs, n, N, pmask, FP64)
    mag = tl.exp(dt[:, None] * ar)
    lr, li = mag * tl.cos(dt[:, None] * ai), mag * tl.sin(dt[:, None] * ai)
    den = ar * ar + ai * ai
    wr, wi = ((lr - 1.0) * ar + li * ai) / den, (li * ar - (lr - 1.0) * ai) / den
    cr, ci = big_cr * wr - big_ci * wi, big_cr * wi + big_ci * wr
    return dt, ar, ai, lr, li, wr, wi, big_cr, big_ci, cr, ci


@triton.jit
def _store_conv_kernel(k_ptr, lr, li, cr, ci, hs, hmask, T):
    """K[h, l] = 2 Re(sum_n c lam^l) for l < T into k [H, T], powers by repeated multiplication."""
    pr, pi = cr, ci  # p = c lam^l, from l = 0
    for l in range(0, T):
        tl.store(k_ptr + hs.to(tl.int64) * T + l, (2.0 * tl.sum(pr, axis=1)).to(k_ptr.dtype.element_ty), mask=hmask)
        pr, pi = pr * lr - pi * li, pr * li + pi * lr


@triton.jit
def _summed_partial(part_ptr, hs, hmask, H, T, G, lag, FP64: tl.constexpr, G_BLOCK: tl.constexpr):
    """sum_g part[g, h, lag] for the channels hs ([BLOCK_H]) over the G partial sums part [G, H, T]
    of dKk that the Toeplitz backward writes (one per group of columns)."""
    total = to_acc(tl.zeros_like(hs), FP64)
    for g0 in range(0, G, G_BLOCK):
        gs = g0 + tl.arange(0, G_BLOCK)
        vals = tl.load(part_ptr + (gs[:, None].to(tl.int64) * H + hs[None, :]) * T + lag,
                       mask=(gs < G)[:, None] & hmask[None, :], other=0.0)
        total += tl.sum(to_acc(vals, FP64), axis=0)
    return total


@triton.jit
def _conv_kernel_grads(part_ptr, lr, li, cr, ci, hs, hmask, pmask, H, T, G, FP64: tl.constexpr,
                       G_BLOCK: tl.constexpr):
    """Gradients of K = 2 Re(sum_n c lam^l) from dK = sum_g part[g] ([G, H, T] partial sums; complex
    grads as dL/dRe + i dL/dIm): dc = sum_l 2 dK_l conj(lam^l), dlam = sum_l 2 dK_l conj(c l lam^(l-1)),
    with q = lam^l and r = l lam^(l-1) advanced as r <- r lam + q, q <- q lam. Returns (dlam re/im,
    dc re/im)."""
    qr, qi = tl.where(pmask, 1.0, 0.0).to(lr.dtype), tl.zeros_like(lr)  # lam^0
    rr, ri = tl.zeros_like(lr), tl.zeros_like(lr)  # 0 * lam^-1
    dcr, dci = tl.zeros_like(lr), tl.zeros_like(lr)
    dlr, dli = tl.zeros_like(lr), tl.zeros_like(lr)
    for l in range(0, T):
        g = 2.0 * _summed_partial(part_ptr, hs, hmask, H, T, G, l, FP64, G_BLOCK)[:, None]
        dcr += g * qr
        dci -= g * qi
        fr, fi = cr * rr - ci * ri, cr * ri + ci * rr  # c l lam^(l-1)
        dlr += g * fr
        dli -= g * fi
        rr, ri = rr * lr - ri * li + qr, rr * li + ri * lr + qi
        qr, qi = qr * lr - qi * li, qr * li + qi * lr
    return dlr, dli, dcr, dci


@triton.jit
def _store_skip_grad(dd_ptr, part_ptr, hs, hmask, H, T, G, FP64: tl.constexpr, G_BLOCK: tl.constexpr):
    """dd[h] = dK[h, 0] = sum_g part[g, h, 0]: the D skip's gradient is the lag-0 entry of dK."""
    dd = _summed_partial(part_ptr, hs, hmask, H, T, G, 0, FP64, G_BLOCK)
    tl.store(dd_ptr + hs, dd.to(dd_ptr.dtype.element_ty), mask=hmask)


@triton.jit
def _s4d_conv_kernel_fwd_kernel(lam_ptr, c_ptr, k_ptr, H, N, T,
                                FP64: tl.constexpr, BLOCK_H: tl.constexpr, N_PAD: tl.constexpr):
    """K[h, l] = 2 Re(sum_n c[h, n] lam[h, n]^l) for l < T. lam, c [H, N, 2]; k [H, T].
    Grid (cdiv(H, BLOCK_H),)."""
    hs, hmask, n, pmask = _h_block(H, N, BLOCK_H, N_PAD)
    lr, li = _load_pair(lam_ptr, hs, n, N, pmask, FP64)
    cr, ci = _load_pair(c_ptr, hs, n, N, pmask, FP64)
    _store_conv_kernel(k_ptr, lr, li, cr, ci, hs, hmask, T)


@triton.jit
def _s4d_conv_kernel_bwd_kernel(lam_ptr, c_ptr, part_ptr, dlam_ptr, dc_ptr, dd_ptr, H, N, T, G,
                                FP64: tl.constexpr, BLOCK_H: tl.constexpr, N_PAD: tl.constexpr,
                                G_BLOCK: tl.constexpr):
    """(dlam, dc) [H, N, 2] of K = 2 Re(sum_n c lam^l) and dd [H] = dK[:, 0] from the G partial sums
    of dK, part [G, H, T] (summed here). Grid (cdiv(H, BLOCK_H),)."""
    hs, hmask, n, pmask = _h_block(H, N, BLOCK_H, N_PAD)
    lr, li = _load_pair(lam_ptr, hs, n, N, pmask, FP64)
    cr, ci = _load_pair(c_ptr, hs, n, N, pmask, FP64)
    dlr, dli, dcr, dci = _conv_kernel_grads(part_ptr, lr, li, cr, ci, hs, hmask, pmask, H, T, G, FP64, G_BLOCK)
    _store_pair(dlam_ptr, dlr, dli, hs, n, N, pmask)
    _store_pair(dc_ptr, dcr, dci, hs, n, N, pmask)
    _store_skip_grad(dd_ptr, part_ptr, hs, hmask, H, T, G, FP64, G_BLOCK)


@triton.jit
def _s4d_zoh_conv_kernel_fwd_kernel(log_dt_ptr, log_a_re_ptr, a_im_ptr, cc_ptr, k_ptr, H, N, T,
                                    FP64: tl.constexpr, BLOCK_H: tl.constexpr, N_PAD: tl.constexpr):
    """K [H, T] straight from the continuous parameters: ZOH discretisation (_zoh) then
    K[h, l] = 2 Re(sum_n c lam^l). log_dt [H]; log_A_real, A_imag [H, N]; C [H, N, 2].
    Grid (cdiv(H, BLOCK_H),)."""
    hs, hmask, n, pmask = _h_block(H, N, BLOCK_H, N_PAD)
    _, _, _, lr, li, _, _, _, _, cr, ci = _zoh(log_dt_ptr, log_a_re_ptr, a_im_ptr, cc_ptr, hs, hmask, n, N,
                                               pmask, FP64)
    _store_conv_kernel(k_ptr, lr, li, cr, ci, hs, hmask, T)


@triton.jit
def _s4d_zoh_conv_kernel_bwd_kernel(log_dt_ptr, log_a_re_ptr, a_im_ptr, cc_ptr, part_ptr,
                                    dlog_dt_ptr, dlog_a_re_ptr, da_im_ptr, dcc_ptr, dd_ptr, H, N, T, G,
                                    FP64: tl.constexpr, BLOCK_H: tl.constexpr, N_PAD: tl.constexpr,
                                    G_BLOCK: tl.constexpr):
    """Gradients of the continuous parameters, and dd = dK[:, 0], from the G partial sums of dK
    (part [G, H, T], summed here): (dlam, dc) as _conv_kernel_grads, then
    the chain rule through _zoh (complex grads as dL/dRe + i dL/dIm, g_x = g_y conj(dy/dx)):
    dC = dc conj(w); dw = dc conj(C); dlam' = dlam + dw conj(1/A); dz = dlam' conj(lam) (z = dt A);
    dA = dz dt - dw conj(w/A); dlog_dt = dt sum_n Re(conj(dz) A); dlog_A_real = Re(dA) Re(A);
    dA_imag = Im(dA). Grid (cdiv(H, BLOCK_H),)."""
    hs, hmask, n, pmask = _h_block(H, N, BLOCK_H, N_PAD)
    dt, ar, ai, lr, li, wr, wi, big_cr, big_ci, cr, ci = _zoh(log_dt_ptr, log_a_re_ptr, a_im_ptr, cc_ptr,
                                                             hs, hmask, n, N, pmask, FP64)
    dlr, dli, dcr, dci = _conv_kernel_grads(part_ptr, lr, li, cr, ci, hs, hmask, pmask, H, T, G, FP64, G_BLOCK)
    _store_skip_grad(dd_ptr, part_ptr, hs, hmask, H, T, G, FP64, G_BLOCK)
    d_big_cr, d_big_ci = dcr * wr + dci * wi, dci * wr - dcr * wi  # dc conj(w)
    dwr, dwi = dcr * big_cr + dci * big_ci, dci * big_cr - dcr * big_ci  # dc conj(C)
    den = ar * ar + ai * ai
    dlr += (dwr * ar - dwi * ai) / den  # conj(1/A) = A / |A|^2
    dli += (dwr * ai + dwi * ar) / den
    dzr, dzi = dlr * lr + dli * li, dli * lr - dlr * li  # dlam' conj(lam)
    qr, qi = (wr * ar + wi * ai) / den, (wi * ar - wr * ai) / den  # w / A
    dar = dzr * dt[:, None] - (dwr * qr + dwi * qi)  # dz dt - dw conj(w / A)
    dai = dzi * dt[:, None] - (dwi * qr - dwr * qi)
    dlog_dt = tl.sum(dzr * ar + dzi * ai, axis=1) * dt
    tl.store(dlog_dt_ptr + hs, dlog_dt.to(dlog_dt_ptr.dtype.element_ty), mask=hmask)
    off = hs[:, None] * N + n[None, :]
    tl.store(dlog_a_re_ptr + off, (dar * ar).to(dlog_a_re_ptr.dtype.element_ty), mask=pmask)
    tl.store(da_im_ptr + off, dai.to(da_im_ptr.dtype.element_ty), mask=pmask)
    _store_pair(dcc_ptr, d_big_cr, d_big_ci, hs, n, N, pmask)


# Toeplitz as batched matrix products ("toeplitz", the default short-T method)


@triton.jit
def _gelu(x):
    """GELU (exact, erf form, as torch.nn.functional.gelu)."""
    return 0.5 * x * (1.0 + tl.erf(x * 0.7071067811865476))


@triton.jit
def _gelu_grad(x):
    """d GELU / dx = Phi(x) + x phi(x)."""
    return 0.5 * (1.0 + tl.erf(x * 0.7071067811865476)) + x * tl.exp(-0.5 * x * x) * 0.3989422804014327


@triton.jit
def _toeplitz_matrices(k_ptr, d_ptr, hs, hmask, T, T_PAD: tl.constexpr, TRANSPOSED: tl.constexpr,
                       FP64: tl.constexpr):
    """[BH, T_PAD, T_PAD] in the accumulation dtype, for the channels hs, from Kk [H, T] and d [H]: the
    causal convolution with the skip, L[h, t, j] = Kk[h, t - j] + d[h] [t == j] (j <= t < T), or with
    TRANSPOSED its adjoint L^T[h, j, t]; 0 outside (padded rows and columns included). The skip on the
    diagonal leaves the dots as the only readers of the activation tiles, which lets Triton's pipeliner
    prefetch them (cp.async, several tiles in flight; an elementwise d u kept each load synchronous)."""
    r = tl.arange(0, T_PAD)[None, :, None]
    c = tl.arange(0, T_PAD)[None, None, :]
    if TRANSPOSED:
        lag = c - r
    else:
        lag = r - c
    mask = hmask[:, None, None] & (lag >= 0) & (r < T) & (c < T)
    lmat = to_acc(tl.load(k_ptr + hs[:, None, None] * T + lag, mask=mask, other=0.0), FP64)
    d = to_acc(tl.load(d_ptr + hs, mask=hmask, other=0.0), FP64)[:, None, None]
    return lmat + tl.where(mask & (lag == 0), d, 0.0)


@triton.jit
def _program_block(H, BH: tl.constexpr, CHANNELS_FIRST: tl.constexpr):
    """(group, hs, hmask): this program's column group and its BH channels with their mask. The grid is
    (column groups, channel blocks), or with CHANNELS_FIRST (channel blocks, column groups): programs launched
    side by side then read neighbouring channels of the same columns (one row of u is H contiguous values)."""
    if CHANNELS_FIRST:
        group, block = tl.program_id(1), tl.program_id(0)
    else:
        group, block = tl.program_id(0), tl.program_id(1)
    hs = block * BH + tl.arange(0, BH)
    return group, hs, hs < H


@triton.jit
def _column_tile(n0, n_end, hs, hmask, T, S, H, T_PAD: tl.constexpr, BN: tl.constexpr):
    """Offsets and mask [BH, T_PAD, BN] of x[b, t, s, h] in a contiguous [B, T, S, H] tensor for the
    columns n = b*S + s in [n0, min(n0 + BN, n_end)) and the channels hs (h is the contiguous axis)."""
    ns = n0 + tl.arange(0, BN)
    b = ns // S
    col = b.to(tl.int64) * T * S * H + (ns - b * S) * H
    t = tl.arange(0, T_PAD)
    off = col[None, None, :] + (t.to(tl.int64) * S * H)[None, :, None] + hs[:, None, None]
    mask = hmask[:, None, None] & (t < T)[None, :, None] & (ns < n_end)[None, None, :]
    return off, mask


@triton.jit
def _causal_conv(lmat, u, DOT_PRECISION: tl.constexpr):
    """L u per channel (the skip d u on L's diagonal): lmat [BH, T_PAD, T_PAD], u [BH, T_PAD, BN]."""
    return tl.dot(lmat, u, input_precision=DOT_PRECISION, out_dtype=u.dtype)


@triton.jit
def _s4d_toeplitz_dot_fwd_kernel(u_ptr, k_ptr, d_ptr, y_ptr, T, S, H, NCOL, COLS_PER_GROUP,
                                 GELU: tl.constexpr, FP64: tl.constexpr, BH: tl.constexpr, BN: tl.constexpr,
                                 T_PAD: tl.constexpr, DOT_PRECISION: tl.constexpr, CHANNELS_FIRST: tl.constexpr):
    """y = Kk * u + d u (then GELU when GELU) for a block of BH channels and the columns
    [g * COLS_PER_GROUP, (g + 1) * COLS_PER_GROUP) of a column group g (_program_block), BN at a time;
    u, y [B, T, S, H] contiguous, NCOL = B*S columns; Kk [H, T]; d [H]."""
    group, hs, hmask = _program_block(H, BH, CHANNELS_FIRST)
    lmat = _toeplitz_matrices(k_ptr, d_ptr, hs, hmask, T, T_PAD, False, FP64)
    first = group * COLS_PER_GROUP
    n_end = tl.minimum(first + COLS_PER_GROUP, NCOL)
    for n0 in range(first, n_end, BN):
        off, mask = _column_tile(n0, n_end, hs, hmask, T, S, H, T_PAD, BN)
        y = _causal_conv(lmat, to_acc(tl.load(u_ptr + off, mask=mask, other=0.0), FP64), DOT_PRECISION)
        if GELU:
            y = _gelu(y)
        tl.store(y_ptr + off, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _s4d_toeplitz_dot_bwd_kernel(u_ptr, dy_ptr, k_ptr, d_ptr, du_ptr, part_ptr, T, S, H, NCOL, COLS_PER_GROUP,
                                 GELU: tl.constexpr, FP64: tl.constexpr, BH: tl.constexpr, BN: tl.constexpr,
                                 T_PAD: tl.constexpr, DOT_PRECISION: tl.constexpr, CHANNELS_FIRST: tl.constexpr):
    """Backward of _s4d_toeplitz_dot_fwd_kernel over the same program tiling: g = dy (times
    GELU'(y), y recomputed, when GELU); du = L^T g + d g; and part[group, h, l] = sum over the
    group's columns of sum_t g[t] u[t - l], the group's partial sum of dKk (l = 0 is also dd),
    from P = g u^T accumulated over the columns ([BH, T_PAD, T_PAD]) and summed along its diagonals.
    part [G, H, T] in the accumulation dtype."""
    group, hs, hmask = _program_block(H, BH, CHANNELS_FIRST)
    lmat_t = _toeplitz_matrices(k_ptr, d_ptr, hs, hmask, T, T_PAD, True, FP64)
    if GELU:
        lmat = _toeplitz_matrices(k_ptr, d_ptr, hs, hmask, T, T_PAD, False, FP64)
    p = tl.zeros((BH, T_PAD, T_PAD), dtype=lmat_t.dtype)
    first = group * COLS_PER_GROUP
    n_end = tl.minimum(first + COLS_PER_GROUP, NCOL)
    for n0 in range(first, n_end, BN):
        off, mask = _column_tile(n0, n_end, hs, hmask, T, S, H, T_PAD, BN)
        u = to_acc(tl.load(u_ptr + off, mask=mask, other=0.0), FP64)
        g = to_acc(tl.load(dy_ptr + off, mask=mask, other=0.0), FP64)
        if GELU:
            g = g * _gelu_grad(_causal_conv(lmat, u, DOT_PRECISION))
        tl.store(du_ptr + off, _causal_conv(lmat_t, g, DOT_PRECISION).to(du_ptr.dtype.element_ty), mask=mask)
        p = tl.dot(g, tl.permute(u, (0, 2, 1)), p, input_precision=DOT_PRECISION, out_dtype=p.dtype)
    r = tl.arange(0, T_PAD)[None, :, None]
    c = tl.arange(0, T_PAD)[None, None, :]
    part = part_ptr + (group.to(tl.int64) * H + hs) * T
    for lag in range(0, T):
        dk = tl.sum(tl.sum(tl.where(r - c == lag, p, 0.0), axis=2), axis=1)
        tl.store(part + lag, dk.to(part_ptr.dtype.element_ty), mask=hmask)


# Toeplitz as a loop over the lag ("toeplitz_loop")


@triton.jit
def _s4d_toeplitz_fwd_kernel(u_ptr, k_ptr, d_ptr, y_ptr, T, C, H,
                             FP64: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_C: tl.constexpr):
    """y[b, t, col] = sum_{l <= t} Kk[h, l] u[b, t-l, col] + d[h] u[b, t, col], h = col % H.

    u, y [B, T, C] contiguous; Kk [H, T] contiguous; d [H]. Grid (cdiv(C, BLOCK_C), B, cdiv(T, BLOCK_T)).
    """
    pid_c, pid_b, pid_t = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    cols = pid_c * BLOCK_C + tl.arange(0, BLOCK_C)
    cmask = cols < C
    h = cols % H
    t = pid_t * BLOCK_T + tl.arange(0, BLOCK_T)
    mask = (t < T)[:, None] & cmask[None, :]
    base = pid_b.to(tl.int64) * T * C
    off = t[:, None] * C + cols[None, :]
    u0 = to_acc(tl.load(u_ptr + base + off, mask=mask, other=0.0), FP64)
    acc = to_acc(tl.load(d_ptr + h, mask=cmask, other=0.0), FP64)[None, :] * u0
    t_hi = tl.minimum(T, (pid_t + 1) * BLOCK_T)  # lags beyond the block's last t see only t - l < 0
    for lag in range(0, t_hi):
        k = tl.load(k_ptr + h * T + lag, mask=cmask, other=0.0).to(acc.dtype)
        u_s = tl.load(u_ptr + base + off - lag * C, mask=mask & (t - lag >= 0)[:, None], other=0.0)
        acc += k[None, :] * u_s.to(acc.dtype)
    tl.store(y_ptr + base + off, acc.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _s4d_toeplitz_bwd_kernel(u_ptr, dy_ptr, k_ptr, d_ptr, du_ptr, dk_part_ptr, B, T, C, H, B_PER,
                             FP64: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_C: tl.constexpr):
    """Backward of the Toeplitz form for batch entries [g*B_PER, (g+1)*B_PER) of one column/time block.

    du[b, j, col] = sum_{l < T-j} Kk[h, l] dy[b, j+l, col] + d[h] dy[b, j, col] (anti-causal correlation);
    dk_part[g, tb, l, col] = sum_{b in group, t in time block} dy[b, t, col] u[b, t-l, col]
    (l = 0 is also the d gradient). u, dy, du [B, T, C]; Kk [H, T]; dk_part [G, n_tb, T, C].
    Grid (cdiv(C, BLOCK_C), G, n_tb).
    """
    pid_c, pid_g, pid_t = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    cols = pid_c * BLOCK_C + tl.arange(0, BLOCK_C)
    cmask = cols < C
    h = cols % H
    t0 = pid_t * BLOCK_T
    t = t0 + tl.arange(0, BLOCK_T)
    mask = (t < T)[:, None] & cmask[None, :]
    off = t[:, None] * C + cols[None, :]
    d = to_acc(tl.load(d_ptr + h, mask=cmask, other=0.0), FP64)
    b0 = pid_g * B_PER
    nb = tl.minimum(B_PER, B - b0)

    # du: for every batch entry of the group, a loop over the lag (reads dy[t + l]).
    for bi in range(0, nb):
        base = (b0 + bi).to(tl.int64) * T * C
        acc = d[None, :] * tl.load(dy_ptr + base + off, mask=mask, other=0.0).to(d.dtype)
        for lag in range(0, T - t0):
            k = tl.load(k_ptr + h * T + lag, mask=cmask, other=0.0).to(d.dtype)
            dy_s = tl.load(dy_ptr + base + off + lag * C, mask=mask & (t + lag < T)[:, None], other=0.0)
            acc += k[None, :] * dy_s.to(d.dtype)
        tl.store(du_ptr + base + off, acc.to(du_ptr.dtype.element_ty), mask=mask)

    # dKk partials: for every lag, the sum over the group and the time block of dy[t] u[t - l].
    part = dk_part_ptr + (pid_g * tl.num_programs(2) + pid_t).to(tl.int64) * T * C
    l_hi = tl.minimum(T, t0 + BLOCK_T)
    for lag in range(0, l_hi):
        acc_k = tl.zeros_like(d)
        for bi in range(0, nb):
            base = (b0 + bi).to(tl.int64) * T * C
            dy_t = tl.load(dy_ptr + base + off, mask=mask, other=0.0).to(d.dtype)
            u_s = tl.load(u_ptr + base + off - lag * C, mask=mask & (t - lag >= 0)[:, None], other=0.0)
            acc_k += tl.sum(dy_t * u_s.to(d.dtype), axis=0)
        tl.store(part + lag * C + cols, acc_k.to(dk_part_ptr.dtype.element_ty), mask=cmask)
    for lag in range(l_hi, T):  # lags no t of this block reaches: the partial is 0
        tl.store(part + lag * C + cols, tl.zeros_like(d).to(dk_part_ptr.dtype.element_ty), mask=cmask)


# ----------------------------------------------------------------------------- scan


@triton.jit
def _s4d_scan_fwd_kernel(u_ptr, lam_ptr, c_ptr, d_ptr, y_ptr, T, C, H, N,
                         FP64: tl.constexpr, BLOCK_C: tl.constexpr, N_PAD: tl.constexpr):
    """Sequential recurrence over t for one batch entry and BLOCK_C columns.

    u, y [B, T, C]; lam, c [H, N, 2]; d [H]. State x [BLOCK_C, N_PAD] (re, im) in registers;
    padded n have lam = c = 0 and so add nothing to y. Grid (cdiv(C, BLOCK_C), B).
    """
    pid_b = tl.program_id(1)
    cols, cmask, n, pmask, lr, li, cr, ci, d = _column_params(lam_ptr, c_ptr, d_ptr, C, H, N, FP64, BLOCK_C, N_PAD)
    xr, xi = tl.zeros_like(lr), tl.zeros_like(lr)
    ptr = pid_b.to(tl.int64) * T * C + cols
    for _t in range(0, T):
        u_t = tl.load(u_ptr + ptr, mask=cmask, other=0.0).to(d.dtype)
        xr, xi = lr * xr - li * xi + u_t[:, None], lr * xi + li * xr
        y = 2.0 * tl.sum(cr * xr - ci * xi, axis=1) + d * u_t
        tl.store(y_ptr + ptr, y.to(y_ptr.dtype.element_ty), mask=cmask)
        ptr += C


@triton.jit
def _s4d_scan_bwd_kernel(u_ptr, dy_ptr, lam_ptr, c_ptr, d_ptr, du_ptr, dlc_part_ptr, dd_part_ptr,
                         B, T, C, H, N, B_PER,
                         FP64: tl.constexpr, BLOCK_C: tl.constexpr, N_PAD: tl.constexpr):
    """Backward of the scan for batch entries [g*B_PER, (g+1)*B_PER) and BLOCK_C columns, no stored states.

    Forward-time sweep (recomputes x_t and q_t = lam q_{t-1} + x_{t-1}, q_0 = 0), e_t = 2 dy_t conj(c):
        dc += 2 dy_t conj(x_t),  dlam += e_t conj(q_t),  dd += dy_t u_t;
    reverse-time sweep: G_t = conj(lam) G_{t+1} + e_t,  du_t = Re(sum_n G_t) + d dy_t.
    (Complex gradients as dL/dRe + i dL/dIm, i.e. the gradients of the real [..., 2] views.)
    u, dy, du [B, T, C]; dlc_part [G, 2, C, N, 2] (0: dlam, 1: dc); dd_part [G, C].
    Grid (cdiv(C, BLOCK_C), G).
    """
    pid_g = tl.program_id(1)
    cols, cmask, n, pmask, lr, li, cr, ci, d = _column_params(lam_ptr, c_ptr, d_ptr, C, H, N, FP64, BLOCK_C, N_PAD)
    dlr, dli = tl.zeros_like(lr), tl.zeros_like(lr)
    dcr, dci = tl.zeros_like(lr), tl.zeros_like(lr)
    dd = tl.zeros_like(d)
    b0 = pid_g * B_PER
    nb = tl.minimum(B_PER, B - b0)
    for bi in range(0, nb):
        base = (b0 + bi).to(tl.int64) * T * C + cols
        # forward-time sweep: parameter gradients
        xr, xi = tl.zeros_like(lr), tl.zeros_like(lr)
        qr, qi = tl.zeros_like(lr), tl.zeros_like(lr)
        ptr = base
        for _t in range(0, T):
            u_t = tl.load(u_ptr + ptr, mask=cmask, other=0.0).to(d.dtype)
            dy_t = tl.load(dy_ptr + ptr, mask=cmask, other=0.0).to(d.dtype)
            g_t = 2.0 * dy_t[:, None]
            qr, qi = lr * qr - li * qi + xr, lr * qi + li * qr + xi  # q_t = lam q_{t-1} + x_{t-1}
            xr, xi = lr * xr - li * xi + u_t[:, None], lr * xi + li * xr
            er, ei = g_t * cr, -g_t * ci  # e_t = 2 dy_t conj(c)
            dcr += g_t * xr
            dci -= g_t * xi
            dlr += er * qr + ei * qi
            dli += ei * qr - er * qi
            dd += dy_t * u_t
            ptr += C
        # reverse-time sweep: du
        gr, gi = tl.zeros_like(lr), tl.zeros_like(lr)
        ptr = base + (T - 1) * C
        for _t in range(0, T):
            dy_t = tl.load(dy_ptr + ptr, mask=cmask, other=0.0).to(d.dtype)
            g_t = 2.0 * dy_t[:, None]
            # G_t = conj(lam) G_{t+1} + e_t,  e_t = 2 dy_t conj(c)
            gr, gi = lr * gr + li * gi + g_t * cr, lr * gi - li * gr - g_t * ci
            du = tl.sum(gr, axis=1) + d * dy_t
            tl.store(du_ptr + ptr, du.to(du_ptr.dtype.element_ty), mask=cmask)
            ptr -= C
    rows = pid_g.to(tl.int64) * 2 * C + cols  # row index into dlc_part viewed as [G * 2 * C, N, 2]
    _store_pair(dlc_part_ptr, dlr, dli, rows, n, N, pmask)
    _store_pair(dlc_part_ptr, dcr, dci, rows + C, n, N, pmask)
    tl.store(dd_part_ptr + pid_g.to(tl.int64) * C + cols, dd.to(dd_part_ptr.dtype.element_ty), mask=cmask)


# ----------------------------------------------------------------------------- step


@triton.jit
def _s4d_step_fwd_kernel(u_ptr, state_ptr, lam_ptr, c_ptr, d_ptr, y_ptr, new_state_ptr, E, H, N,
                         FP64: tl.constexpr, BLOCK_E: tl.constexpr, N_PAD: tl.constexpr):
    """One step for E = rows * H entries e (h = e % H): x' = lam x + u, y = 2 Re(sum_n c x') + d u.

    u, y [E]; state, new_state [E, N, 2]; lam, c [H, N, 2]; d [H]. Grid (cdiv(E, BLOCK_E),).
    """
    e, emask, n, pmask, lr, li, cr, ci, d = _column_params(lam_ptr, c_ptr, d_ptr, E, H, N, FP64, BLOCK_E, N_PAD)
    xr, xi = _load_pair(state_ptr, e.to(tl.int64), n, N, pmask, FP64)
    u = to_acc(tl.load(u_ptr + e, mask=emask, other=0.0), FP64)
    xr, xi = lr * xr - li * xi + u[:, None], lr * xi + li * xr
    y = 2.0 * tl.sum(cr * xr - ci * xi, axis=1) + d * u
    tl.store(y_ptr + e, y.to(y_ptr.dtype.element_ty), mask=emask)
    _store_pair(new_state_ptr, xr, xi, e, n, N, pmask)


# ----------------------------------------------------------------------------- launchers


def _policy(device: torch.device) -> dict:
    return for_device(LAUNCH_POLICY, device)


def _block_c(C: int, per_column: int, device: torch.device) -> int:
    """Columns per program: a power of two >= 16 with BLOCK_C * per_column within the tile budget."""
    return max(16, min(next_pow2(C), _policy(device)["tile"] // per_column))


def _batch_groups(B: int, programs_per_group: int, device: torch.device) -> tuple[int, int]:
    """(G, B_PER): split the batch into G groups of B_PER entries (the last may be shorter) so that
    G * programs_per_group is about the policy's program count."""
    groups = max(1, min(B, cdiv(_policy(device)["programs"], programs_per_group)))
    b_per = cdiv(B, groups)
    return cdiv(B, b_per), b_per


def _flat(u: torch.Tensor) -> tuple[torch.Tensor, int, int, int, int]:
    """u [B, T, S, H] -> (contiguous u, B, T, C = S*H, H)."""
    u = u.contiguous()
    B, T, S, H = u.shape
    if T * S * H >= 2**31 or B > 65535:  # int32 offsets within a batch entry; grid axis 1 holds B
        raise ValueError(f"u must have T*S*H < 2**31 and B <= 65535, got shape {tuple(u.shape)}")
    return u, B, T, S * H, H


def _toeplitz_blocks(T: int, C: int, device: torch.device) -> tuple[int, int]:
    """(BLOCK_T, BLOCK_C) of the Toeplitz kernels."""
    block_t = min(next_pow2(T, 2), 32)
    return block_t, _block_c(C, block_t, device)


def s4d_conv_kernel_fwd(lam: torch.Tensor, c: torch.Tensor, T: int) -> torch.Tensor:
    """K [H, T] = 2 Re(sum_n c lam^l) (the Toeplitz path's kernel) from lam, c [H, N, 2], in their
    accumulation dtype (fp64 if either is fp64, else fp32)."""
    lam, c = lam.contiguous(), c.contiguous()
    H, N = lam.shape[0], lam.shape[1]
    acc = acc_dtype(lam, c)
    N_PAD = next_pow2(N, 2)
    BLOCK_H = _block_c(H, 4 * N_PAD, lam.device)
    kk = new_output((H, T), dtype=acc, device=lam.device)
    wrap_triton(_s4d_conv_kernel_fwd_kernel)[(cdiv(H, BLOCK_H),)](
        lam, c, kk, H, N, T, FP64=acc == torch.float64, BLOCK_H=BLOCK_H, N_PAD=N_PAD)
    return kk


def _partials(part: torch.Tensor) -> tuple[torch.Tensor, int, int]:
    """The Toeplitz backward's dKk partial sums [G, H, T] (contiguous), G and the G_BLOCK the
    parameter-gradient kernels sum them in."""
    part = part.contiguous()
    return part, part.shape[0], min(next_pow2(part.shape[0], 2), 64)


def s4d_conv_kernel_bwd(part: torch.Tensor, lam: torch.Tensor, c: torch.Tensor
                        ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dlam, dc) [H, N, 2] in lam's / c's dtype and dd [H] = dK[:, 0] (accumulation dtype) from the
    partial sums of dK, part [G, H, T] (s4d_toeplitz_bwd's), summed in the kernel: one launch."""
    (part, G, G_BLOCK), lam, c = _partials(part), lam.contiguous(), c.contiguous()
    H, N, T = lam.shape[0], lam.shape[1], part.shape[2]
    acc = acc_dtype(lam, c, part)
    N_PAD = next_pow2(N, 2)
    BLOCK_H = _block_c(H, 8 * N_PAD, lam.device)
    dlam = new_output(lam.shape, dtype=acc, device=lam.device)
    dc = new_output(c.shape, dtype=acc, device=lam.device)
    dd = new_output((H,), dtype=acc, device=lam.device)
    wrap_triton(_s4d_conv_kernel_bwd_kernel)[(cdiv(H, BLOCK_H),)](
        lam, c, part, dlam, dc, dd, H, N, T, G, FP64=acc == torch.float64, BLOCK_H=BLOCK_H, N_PAD=N_PAD,
        G_BLOCK=G_BLOCK)
    return dlam.to(lam.dtype), dc.to(c.dtype), dd


def _zoh_params(log_dt, log_A_real, A_imag, C):
    """Contiguous continuous parameters and (H, N, acc dtype, N_PAD) of the ZOH kernels."""
    params = tuple(t.contiguous() for t in (log_dt, log_A_real, A_imag, C))
    H, N = params[1].shape
    return params, H, N, acc_dtype(*params), next_pow2(N, 2)


def s4d_zoh_conv_kernel_fwd(log_dt: torch.Tensor, log_A_real: torch.Tensor, A_imag: torch.Tensor,
                            C: torch.Tensor, T: int) -> torch.Tensor:
    """K [H, T] = 2 Re(sum_n c lam^l) with (lam, c) the ZOH discretisation of log_dt [H],
    log_A_real, A_imag [H, N], C [H, N, 2], in their accumulation dtype: one launch."""
    params, H, N, acc, N_PAD = _zoh_params(log_dt, log_A_real, A_imag, C)
    BLOCK_H = _block_c(H, 8 * N_PAD, C.device)
    kk = new_output((H, T), dtype=acc, device=C.device)
    wrap_triton(_s4d_zoh_conv_kernel_fwd_kernel)[(cdiv(H, BLOCK_H),)](
        *params, kk, H, N, T, FP64=acc == torch.float64, BLOCK_H=BLOCK_H, N_PAD=N_PAD)
    return kk


def s4d_zoh_conv_kernel_bwd(part: torch.Tensor, log_dt: torch.Tensor, log_A_real: torch.Tensor,
                            A_imag: torch.Tensor, C: torch.Tensor
                            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dlog_dt, dlog_A_real, dA_imag, dC), each in its parameter's dtype, and dd [H] = dK[:, 0]
    (accumulation dtype) from the partial sums of dK, part [G, H, T] (summed in the kernel): one launch."""
    params, H, N, acc, N_PAD = _zoh_params(log_dt, log_A_real, A_imag, C)
    part, G, G_BLOCK = _partials(part)
    BLOCK_H = _block_c(H, 16 * N_PAD, C.device)
    grads = [new_output(p.shape, dtype=acc, device=C.device) for p in params]
    dd = new_output((H,), dtype=acc, device=C.device)
    wrap_triton(_s4d_zoh_conv_kernel_bwd_kernel)[(cdiv(H, BLOCK_H),)](
        *params, part, *grads, dd, H, N, part.shape[2], G, FP64=acc == torch.float64, BLOCK_H=BLOCK_H,
        N_PAD=N_PAD, G_BLOCK=G_BLOCK)
    return (*(g.to(p.dtype) for g, p in zip(grads, params)), dd)


def _dot_tiling(B: int, T: int, S: int, H: int, device: torch.device) -> dict:
    """Launch parameters of the batched-dot Toeplitz kernels (TOEPLITZ_DOT_POLICY): the grid
    (column groups, channel blocks; with the policy's "channels_first", or AMG_FAST_S4D_CHANNELS_FIRST=1, the other
    way round), the number of
    column groups (the backward's partial sums) and the kernel's tile sizes."""
    policy = for_device(TOEPLITZ_DOT_POLICY, device)
    t_pad, bn = next_pow2(T), policy["BN"]
    bh = min(next_pow2(H, 1), max(1, policy["elements"] // (t_pad * max(t_pad, bn))))
    bh = 1 << (bh.bit_length() - 1)  # a power of two
    ncol, n_h = B * S, cdiv(H, bh)
    groups = max(1, min(cdiv(ncol, bn), cdiv(policy["programs"], n_h)))
    cols_per_group = cdiv(cdiv(ncol, groups), bn) * bn
    channels_first = s4d_channels_first(policy.get("channels_first", False))  # $AMG_FAST_S4D_CHANNELS_FIRST wins
    grid = (n_h, cdiv(ncol, cols_per_group)) if channels_first else (cdiv(ncol, cols_per_group), n_h)
    return {"grid": grid, "groups": cdiv(ncol, cols_per_group), "NCOL": ncol, "COLS_PER_GROUP": cols_per_group,
            "BH": bh, "BN": bn, "T_PAD": t_pad, "CHANNELS_FIRST": channels_first, "num_warps": policy["num_warps"]}


def _toeplitz_dots(u_dtype: torch.dtype, acc: torch.dtype) -> str:
    """tl.dot precision of the batched-dot kernels, whose operands are in the accumulation dtype: as
    _common.dot_precision for fp32 / fp64; "tf32" for bf16 / fp16 activations (exact on them: their
    mantissas fit TF32's; only Kk is rounded to TF32)."""
    return "tf32" if u_dtype in (torch.bfloat16, torch.float16) and acc == torch.float32 else dot_precision(acc)


def _check_dot_length(T: int) -> None:
    if T > TOEPLITZ_DOT_MAX_T:
        raise ValueError(f"s4d method='toeplitz' (batched dots) takes T <= {TOEPLITZ_DOT_MAX_T} "
                         f"(kernels.limits.TOEPLITZ_DOT_MAX_T), got T={T}; use method='scan' or 'toeplitz_loop'")


def s4d_toeplitz_fwd(u: torch.Tensor, kk: torch.Tensor, d: torch.Tensor, gelu: bool = False,
                     loop: bool = False) -> torch.Tensor:
    """y[b, t, s, h] = sum_{l <= t} kk[h, l] u[b, t-l, s, h] + d[h] u[b, t, s, h], then GELU if gelu.

    u [B, T, S, H]; kk [H, T] (s4d_conv_kernel); d [H]. Returns y [B, T, S, H] in u's dtype. loop:
    the lag-loop kernel ("toeplitz_loop", no GELU epilogue: gelu must be False) instead of the
    batched dots (T <= TOEPLITZ_DOT_MAX_T).
    """
    if loop:
        if gelu:
            raise ValueError("the toeplitz_loop kernels have no GELU epilogue (gelu=False)")
        return _toeplitz_loop_fwd(u, kk, d)
    u, B, T, C, H = _flat(u)
    _check_dot_length(T)
    kk, d = kk.contiguous(), d.contiguous()
    y = new_output(u.shape, dtype=u.dtype, device=u.device)
    acc = acc_dtype(u, kk, d)
    tiling = _dot_tiling(B, T, C // H, H, u.device)
    grid = tiling.pop("grid")
    tiling.pop("groups")
    wrap_triton(_s4d_toeplitz_dot_fwd_kernel)[grid](
        u, kk, d, y, T, C // H, H, GELU=gelu, FP64=acc == torch.float64,
        DOT_PRECISION=_toeplitz_dots(u.dtype, acc), **tiling)
    return y


def s4d_toeplitz_bwd(dy: torch.Tensor, u: torch.Tensor, kk: torch.Tensor, d: torch.Tensor, gelu: bool = False,
                     loop: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Gradients of s4d_toeplitz_fwd (same gelu, loop). dy, u [B, T, S, H]; kk [H, T]; d [H] ->
    (du [B, T, S, H] in u's dtype, part [G, H, T]: partial sums of dkk over groups of columns, in
    the accumulation dtype; dkk = part.sum(0), dd = dkk[:, 0]; the parameter-gradient kernels sum them)."""
    if loop:
        if gelu:
            raise ValueError("the toeplitz_loop kernels have no GELU epilogue (gelu=False)")
        return _toeplitz_loop_bwd(dy, u, kk, d)
    u, B, T, C, H = _flat(u)
    _check_dot_length(T)
    dy, kk, d = dy.contiguous(), kk.contiguous(), d.contiguous()
    acc = acc_dtype(u, dy, kk, d)
    du = new_output(u.shape, dtype=u.dtype, device=u.device)
    tiling = _dot_tiling(B, T, C // H, H, u.device)
    grid, groups = tiling.pop("grid"), tiling.pop("groups")
    part = new_output((groups, H, T), dtype=acc, device=u.device)
    wrap_triton(_s4d_toeplitz_dot_bwd_kernel)[grid](
        u, dy, kk, d, du, part, T, C // H, H, GELU=gelu, FP64=acc == torch.float64,
        DOT_PRECISION=_toeplitz_dots(u.dtype, acc), **tiling)
    return du, part


def _toeplitz_loop_fwd(u: torch.Tensor, kk: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
    """s4d_toeplitz_fwd by the lag-loop kernel (any T)."""
    u, B, T, C, H = _flat(u)
    kk, d = kk.contiguous(), d.contiguous()
    y = new_output(u.shape, dtype=u.dtype, device=u.device)
    BLOCK_T, BLOCK_C = _toeplitz_blocks(T, C, u.device)
    grid = (cdiv(C, BLOCK_C), B, cdiv(T, BLOCK_T))  # column blocks first: the longest axis
    wrap_triton(_s4d_toeplitz_fwd_kernel)[grid](
        u, kk, d, y, T, C, H, FP64=acc_dtype(u, kk, d) == torch.float64, BLOCK_T=BLOCK_T, BLOCK_C=BLOCK_C)
    return y


def _toeplitz_loop_bwd(dy: torch.Tensor, u: torch.Tensor, kk: torch.Tensor,
                       d: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """s4d_toeplitz_bwd by the lag-loop kernel: (du, dkk [1, H, T] as a single partial sum).

    The kernel's dkk partials take G * cdiv(T, BLOCK_T) * T * S * H accumulation-dtype elements
    (O(T^2)), reduced here in torch: this form is meant for short T."""
    u, B, T, C, H = _flat(u)
    dy, kk, d = dy.contiguous(), kk.contiguous(), d.contiguous()
    acc = acc_dtype(u, dy, kk, d)
    BLOCK_T, BLOCK_C = _toeplitz_blocks(T, C, u.device)
    n_c, n_t = cdiv(C, BLOCK_C), cdiv(T, BLOCK_T)
    G, b_per = _batch_groups(B, n_c * n_t, u.device)
    du = new_output(u.shape, dtype=u.dtype, device=u.device)
    part = new_output((G, n_t, T, C), dtype=acc, device=u.device)
    wrap_triton(_s4d_toeplitz_bwd_kernel)[(n_c, G, n_t)](
        u, dy, kk, d, du, part, B, T, C, H, b_per,
        FP64=acc == torch.float64, BLOCK_T=BLOCK_T, BLOCK_C=BLOCK_C)
    return du, part.sum(dim=(0, 1)).view(T, C // H, H).sum(dim=1).t().contiguous()[None]  # [1, H, T]


def s4d_scan_fwd(u: torch.Tensor, lam: torch.Tensor, c: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
    """Recurrent S4D scan. u [B, T, S, H]; lam, c [H, N, 2]; d [H] -> y [B, T, S, H] in u's dtype."""
    u, B, T, C, H = _flat(u)
    lam, c, d = lam.contiguous(), c.contiguous(), d.contiguous()
    N = lam.shape[1]
    N_PAD = next_pow2(N, 2)
    BLOCK_C = _block_c(C, 4 * N_PAD, u.device)  # state, lam, c: 4 real tiles
    y = new_output(u.shape, dtype=u.dtype, device=u.device)
    wrap_triton(_s4d_scan_fwd_kernel)[(cdiv(C, BLOCK_C), B)](
        u, lam, c, d, y, T, C, H, N,
        FP64=acc_dtype(u, lam, c, d) == torch.float64, BLOCK_C=BLOCK_C, N_PAD=N_PAD)
    return y


def s4d_scan_bwd(dy: torch.Tensor, u: torch.Tensor, lam: torch.Tensor, c: torch.Tensor,
                 d: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Gradients of s4d_scan_fwd, recomputing the states. dy, u [B, T, S, H]; lam, c [H, N, 2]; d [H]
    -> (du in u's dtype, dlam, dc [H, N, 2], dd [H] in the parameters' dtypes)."""
    u, B, T, C, H = _flat(u)
    dy, lam, c, d = dy.contiguous(), lam.contiguous(), c.contiguous(), d.contiguous()
    acc = acc_dtype(u, dy, lam, c, d)
    N = lam.shape[1]
    N_PAD = next_pow2(N, 2)
    BLOCK_C = _block_c(C, 8 * N_PAD, u.device)  # x, q, G, dlam, dc, lam, c: 8+ real tiles
    n_c = cdiv(C, BLOCK_C)
    G, b_per = _batch_groups(B, n_c, u.device)
    du = new_output(u.shape, dtype=u.dtype, device=u.device)
    dlc_part = new_output((G, 2, C, N, 2), dtype=acc, device=u.device)
    dd_part = new_output((G, C), dtype=acc, device=u.device)
    wrap_triton(_s4d_scan_bwd_kernel)[(n_c, G)](
        u, dy, lam, c, d, du, dlc_part, dd_part, B, T, C, H, N, b_per,
        FP64=acc == torch.float64, BLOCK_C=BLOCK_C, N_PAD=N_PAD)
    dlc = dlc_part.sum(dim=0).view(2, C // H, H, N, 2).sum(dim=1)  # [2, H, N, 2]
    dd = dd_part.sum(dim=0).view(C // H, H).sum(dim=0)
    return du, dlc[0].to(lam.dtype, copy=True), dlc[1].to(c.dtype, copy=True), dd.to(d.dtype)


def s4d_step_fwd(u_t: torch.Tensor, state: torch.Tensor, lam: torch.Tensor, c: torch.Tensor,
                 d: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One recurrent step. u_t [..., H]; state [..., H, N, 2]; lam, c [H, N, 2]; d [H] ->
    (y_t [..., H] in u_t's dtype, new state [..., H, N, 2] in state's dtype)."""
    u_t, state = u_t.contiguous(), state.contiguous()
    lam, c, d = lam.contiguous(), c.contiguous(), d.contiguous()
    H, N = lam.shape[0], lam.shape[1]
    E = u_t.numel()
    N_PAD = next_pow2(N, 2)
    BLOCK_E = _block_c(E, 4 * N_PAD, u_t.device)
    y = new_output(u_t.shape, dtype=u_t.dtype, device=u_t.device)
    new_state = new_output(state.shape, dtype=state.dtype, device=state.device)
    wrap_triton(_s4d_step_fwd_kernel)[(cdiv(E, BLOCK_E),)](
        u_t, state, lam, c, d, y, new_state, E, H, N,
        FP64=acc_dtype(u_t, state, lam, c, d) == torch.float64, BLOCK_E=BLOCK_E, N_PAD=N_PAD)
    return y, new_state
