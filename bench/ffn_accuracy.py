"""The feed-forward's expected error against fp64, per path and precision mode, emulated on a CPU.

Triton's interpreter computes every tl.dot exactly in fp32, so it cannot show what a GPU's TF32 or
bf16 operands cost. This emulates them in torch: each GEMM's operands are rounded as the hardware
rounds them, the products (exact in fp32 for TF32 and bf16 operands) summed in fp32, and the
activations stored in the mode's dtype, for the forward y = relu(x W1^T + b1) W2^T + b2 and every
input gradient (dx, dW1, dW2):

  path      mode        operands of each GEMM                              who runs it
  epilogue  fp32        fp32                                               cuBLAS, CUDA cores (matmul precision "highest")
  epilogue  tf32        rounded to TF32 (10-bit mantissa, to nearest)       cuBLAS, tensor cores ("high")
  gemm      tf32x3      a = big + small, big rounded to TF32, small         Triton row GEMMs, tensor cores
                        truncated; small*big + big*small + big*big          (--precision fp32; the weight's parts
                                                                            formed once, in memory); dW1, dW2
                                                                            fp32 (cuBLAS: kernels.limits.wgrad_method)
  gemm      tf32        truncated to TF32 (Hopper's MMA reads the top bits) Triton row GEMMs, tensor cores (TF32
                                                                            allowed); dW1, dW2 rounded (cuBLAS)
  either    bf16        rounded to bf16; hidden, y, dy, dh stored as bf16   autocast bf16

Usage: python bench/ffn_accuracy.py [--rows 8192] [--width 128] [--seed 0] [--json OUT]
Prints one row per (path, mode): the max and mean relative error of y and of the worst gradient,
max_rel = max|got - ref| / max|ref|, mean_rel = mean|got - ref| / mean|ref| (bench/probe_ffn.py
reports the same numbers measured on a GPU), the gradients also with the reference's ReLU mask (the
rounding alone), and how many pre-activations flip ReLU branch against fp64 (near 0 any rounding
may flip one; each flip changes one row of the hidden gradient and dominates the max gradient error).
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Callable

import torch

TF32_DROPPED_BITS = 13  # fp32 keeps 23 mantissa bits, TF32 10


def tf32_round(x: torch.Tensor) -> torch.Tensor:
    """fp32 -> the nearest TF32 value (ties away from zero, as CUDA's cvt.rna.tf32.f32), as fp32."""
    bits = x.float().contiguous().view(torch.int32)
    rounded = (bits + (1 << (TF32_DROPPED_BITS - 1))) & ~((1 << TF32_DROPPED_BITS) - 1)
    return torch.where(torch.isfinite(x), rounded.view(torch.float32), x.float())


def tf32_truncate(x: torch.Tensor) -> torch.Tensor:
    """fp32 -> TF32 by dropping the low 13 mantissa bits (what an MMA reading fp32 registers does)."""
    bits = x.float().contiguous().view(torch.int32)
    return (bits & ~((1 << TF32_DROPPED_BITS) - 1)).view(torch.float32)


def bf16_round(x: torch.Tensor) -> torch.Tensor:
    """fp32 -> the nearest bf16 value (ties to even), as fp32."""
    return x.float().to(torch.bfloat16).float()


def _mm_fp32(a, b):
    return a.float() @ b.float()


def _mm_rounded(rounding: Callable) -> Callable:
    def mm(a, b):  # products of the rounded operands are exact in fp32; the sum is fp32
        return rounding(a) @ rounding(b)
    return mm


def _mm_tf32x3(a, b):
    """Triton's tf32x3 (its F32DotTC pass): big = cvt.rna.tf32(a), small = a - big (then truncated by
    the TF32 MMA), the same for b; dot(small_a, big_b), + dot(big_a, small_b), + dot(big_a, big_b), all
    accumulated in fp32. kernels/ffn_gemm.py computes the same products (b's parts split once per forward)."""
    a, b = a.float(), b.float()
    a_big, b_big = tf32_round(a), tf32_round(b)
    a_small, b_small = tf32_truncate(a - a_big), tf32_truncate(b - b_big)
    return (a_small @ b_big + a_big @ b_small) + a_big @ b_big


# (path, mode) -> (GEMM emulation, rounding of the stored activations, the weight gradients' GEMM emulation or
# None for the same as the others): the gemm path's dW1, dW2 are cuBLAS's for fp32 activations (wgrad_method)
PATHS = {
    ("epilogue", "fp32"): (_mm_fp32, lambda t: t, None),
    ("epilogue", "tf32"): (_mm_rounded(tf32_round), lambda t: t, None),
    ("gemm", "tf32x3"): (_mm_tf32x3, lambda t: t, _mm_fp32),
    ("gemm", "tf32"): (_mm_rounded(tf32_truncate), lambda t: t, _mm_rounded(tf32_round)),
    ("either", "bf16"): (_mm_rounded(bf16_round), bf16_round, None),
}


def ffn_forward_backward(x, w1, b1, w2, b2, dy, mm: Callable = _mm_fp32, store: Callable = lambda t: t,
                         mask: torch.Tensor | None = None, wgrad_mm: Callable | None = None) -> dict:
    """y = relu(x W1^T + b1) W2^T + b2 and the gradients (dx, dw1, dw2) for the upstream dy, every GEMM
    through mm (the weight gradients' through wgrad_mm when given) and every stored activation (x, hidden, y,
    dy, dh) through store; fp64 arithmetic everywhere with mm = torch.mm on fp64 tensors (the reference).
    mask: the ReLU's mask to take for the backward instead of pre > 0 (the reference's, to see the rounding
    alone). Also returns "mask" (pre > 0)."""
    wgrad_mm = wgrad_mm or mm
    x, dy = store(x), store(dy)
    pre = mm(x, w1.T) + b1
    hidden = store(torch.relu(pre))
    y = store(mm(hidden, w2.T) + b2)
    dh = store(mm(dy, w2) * ((pre > 0) if mask is None else mask))
    return {"y": y, "dx": mm(dh, w1), "dw1": wgrad_mm(dh.T, x), "dw2": wgrad_mm(dy.T, hidden), "mask": pre > 0}


def rel_errors(got: torch.Tensor, ref: torch.Tensor) -> tuple[float, float]:
    """(max_rel, mean_rel) = (max|got - ref| / max|ref|, mean|got - ref| / mean|ref|), in fp64."""
    got, ref = got.detach().double(), ref.detach().double()
    err, ref = (got - ref).abs(), ref.abs()
    return float(err.max() / ref.max()), float(err.mean() / ref.mean())


def inputs(rows: int, width: int, seed: int) -> tuple[torch.Tensor, ...]:
    """fp32 (x, w1, b1, w2, b2, dy): x, dy ~ N(0, 1), weights as nn.Linear initialises them (uniform
    in +-1/sqrt(fan_in)), F = 4 * width."""
    gen = torch.Generator().manual_seed(seed)
    hidden = 4 * width

    def uniform(*shape, fan_in):
        return (2 * torch.rand(*shape, generator=gen) - 1) / fan_in ** 0.5

    return (torch.randn(rows, width, generator=gen), uniform(hidden, width, fan_in=width), uniform(hidden, fan_in=width),
            uniform(width, hidden, fan_in=hidden), uniform(width, fan_in=hidden), torch.randn(rows, width, generator=gen))


GRADS = ("dx", "dw1", "dw2")


def _worst(got: dict, ref: dict, names) -> tuple[float, float]:
    errs = [rel_errors(got[name], ref[name]) for name in names]
    return max(e[0] for e in errs), max(e[1] for e in errs)


def accuracy_table(rows: int = 8192, width: int = 128, seed: int = 0) -> list[dict]:
    """One row per (path, mode) of PATHS against fp64: y's (max_rel, mean_rel); the worst gradient's
    as the path computes it ("grads", its own ReLU mask) and with the reference's mask ("grads_rounding":
    the GEMMs' rounding alone); "kink_flips", how many pre-activations lie within rounding of 0 and
    take the other ReLU branch (each makes one row of dh differ wholesale: the max gradient error of
    any precision below fp64 is theirs)."""
    args = inputs(rows, width, seed)
    ref = ffn_forward_backward(*(t.double() for t in args), mm=torch.mm)
    table = []
    for (path, mode), (mm, store, wgrad_mm) in PATHS.items():
        got = ffn_forward_backward(*args, mm=mm, store=store, wgrad_mm=wgrad_mm)
        rounding = ffn_forward_backward(*args, mm=mm, store=store, mask=ref["mask"], wgrad_mm=wgrad_mm)
        y_err = rel_errors(got["y"], ref["y"])
        grads, grads_rounding = _worst(got, ref, GRADS), _worst(rounding, ref, GRADS)
        table.append({"path": path, "mode": mode, "y.max_rel": y_err[0], "y.mean_rel": y_err[1],
                      "grads.max_rel": grads[0], "grads.mean_rel": grads[1],
                      "grads_rounding.max_rel": grads_rounding[0], "grads_rounding.mean_rel": grads_rounding[1],
                      "kink_flips": int((got["mask"] != ref["mask"]).sum())})
    return table


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=8192, help="rows of x (default 8192)")
    p.add_argument("--width", type=int, default=128, help="H; the hidden layer is 4H (default 128)")
    p.add_argument("--seed", type=int, default=0, help="random inputs' seed (default 0)")
    p.add_argument("--json", help="write the table to this JSON file")
    args = p.parse_args(argv)
    table = accuracy_table(args.rows, args.width, args.seed)
    columns = ("y.max_rel", "y.mean_rel", "grads.max_rel", "grads.mean_rel", "grads_rounding.max_rel",
               "grads_rounding.mean_rel")
    print(f"{'path':9} {'mode':7} " + " ".join(f"{c:>23}" for c in columns) + f" {'kink_flips':>10}")
    for row in table:
        print(f"{row['path']:9} {row['mode']:7} " + " ".join(f"{row[c]:23.2e}" for c in columns)
              + f" {row['kink_flips']:10d}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"rows": args.rows, "width": args.width, "seed": args.seed, "table": table}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
