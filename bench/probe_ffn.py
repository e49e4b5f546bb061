"""The FFNO feed-forward on a GPU: the reference (Linear, ReLU, Linear), the cuBLASLt bias + ReLU
epilogue (method="epilogue"), the Triton row GEMMs with the elementwise work in their epilogues
(method="gemm", kernels/ffn_gemm.py: in fp32 mode 3xTF32 against split weights), forward and
forward + backward, each replayed from a CUDA graph, beside the HBM floors of a feed-forward that
keeps the hidden on chip and of one that writes it, and each path's error against fp64, in every
precision mode: fp32 (matmul precision "highest": cuBLAS on the CUDA cores, the row GEMMs' dots
3xTF32), tf32 (TF32 allowed) and bf16 (autocast). CUDA only; not a pytest file.

What it decides (issue 19): kernels.limits.FFN_AUTO_METHOD, the path feed_forward's method="auto"
takes per precision mode. The on-chip floor (x, y, dy, dx and the weights moved once, the [rows, F]
hidden never written) is what a recompute-free fused MLP could reach; the Triton one this package had
(method "fused") lost to the epilogue in every mode and was removed on 2026-11-29.

Errors: for y and the worst of (dx, dW1, dW2), max_rel = max|got - ref| / max|ref| and mean_rel =
mean|got - ref| / mean|ref| against the same inputs in fp64 (bench/ffn_accuracy.py states what to
expect from a CPU emulation of each mode's operand rounding; the gradients' max includes ReLU-kink
flips, pre-activations within rounding of 0 that take the other branch).

Usage: python bench/probe_ffn.py [--sizes 128 32] [--json OUT]   (rows = 32 * 25 * S, H = 128, F = 4H)
Rows in the order fp32, tf32, bf16, each at S = 128 first: the JSON is rewritten after every row, so a
probe stopped by the campaign's time limit keeps the paper's mode at the paper's largest S.
"""
from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _providers import graph_replay, probe_main  # noqa: E402
from ffn_accuracy import rel_errors  # noqa: E402

HBM_TB_S = {"H100": 3.35, "H200": 4.8}  # vendor peak, for the floor only
SETTINGS = (("fp32", False), ("tf32", True), ("bf16", False, torch.bfloat16))


def _peak_tb_s() -> float:
    name = torch.cuda.get_device_name(0)
    return next((v for k, v in HBM_TB_S.items() if k in name), 3.35)


def floors_ms(rows: int, width: int, hidden: int, itemsize: int = 4) -> dict[str, float]:
    """HBM-byte floors in ms: a fused MLP (hidden on chip) and the epilogue path (hidden through HBM)."""
    act = rows * width * itemsize  # one [rows, H] tensor
    hid = rows * hidden * itemsize  # one [rows, F] tensor
    weights = 2 * width * hidden * itemsize
    tb_s = _peak_tb_s() * 1e12
    fused_fwd = 2 * act + weights  # x in, y out
    fused_fwdbwd = fused_fwd + 3 * act + 2 * weights  # + x, dy in, dx out, dW out (hidden recomputed)
    epilogue_fwd = fused_fwd + 2 * hid  # hidden written, read by the second GEMM
    epilogue_fwdbwd = epilogue_fwd + 3 * act + 2 * weights + 4 * hid  # hidden re-read, dhidden written + read twice
    return {name: 1e3 * b / tb_s for name, b in (("floor_fused_fwd", fused_fwd), ("floor_fused_fwd+bwd", fused_fwdbwd),
                                                 ("floor_epilogue_fwd", epilogue_fwd),
                                                 ("floor_epilogue_fwd+bwd", epilogue_fwdbwd))}


PATHS = ("reference", "epilogue", "gemm")


def path_fn(name: str):
    """The feed-forward of one path: (x, w1, b1, w2, b2) -> y."""
    from amg_fast.ops.ffn import feed_forward, feed_forward_ref

    if name == "reference":
        return feed_forward_ref
    return lambda *a: feed_forward(*a, backend="triton", method=name)


def make_inputs(rows: int, width: int, device) -> tuple[tuple[torch.Tensor, ...], torch.Tensor]:
    """((x, w1, b1, w2, b2) fp32 leaves requiring grad, dy): x, dy ~ N(0, 1), weights ~ N(0, 1/fan_in)."""
    hidden = 4 * width
    x = torch.randn(rows, width, device=device, requires_grad=True)
    w1 = (torch.randn(hidden, width, device=device) / width**0.5).requires_grad_()
    b1 = torch.zeros(hidden, device=device, requires_grad=True)
    w2 = (torch.randn(width, hidden, device=device) / hidden**0.5).requires_grad_()
    b2 = torch.zeros(width, device=device, requires_grad=True)
    return (x, w1, b1, w2, b2), torch.randn(rows, width, device=device)


def accuracy(params: tuple, dy: torch.Tensor) -> dict[str, float]:
    """Each path's y and gradients (dx, dW1, dW2) in the current precision mode against the same in
    fp64: "<path>.y.max_rel", ".y.mean_rel" and the worst gradient's ".grads.max_rel", ".grads.mean_rel"."""
    from amg_fast.ops.ffn import feed_forward_ref

    wrt = (0, 1, 3)
    with torch.autocast(dy.device.type, enabled=False):  # the fp64 reference, whatever the mode
        params64 = [t.detach().double().requires_grad_() for t in params]
        y64 = feed_forward_ref(*params64)
        ref = (y64, *torch.autograd.grad(y64, [params64[i] for i in wrt], dy.double()))
    out = {}
    for name in PATHS:
        y = path_fn(name)(*params)
        grads = torch.autograd.grad(y, [params[i] for i in wrt], dy.to(y.dtype))
        errs = [rel_errors(got, want) for got, want in zip((y, *grads), ref)]
        out.update({f"{name}.y.max_rel": errs[0][0], f"{name}.y.mean_rel": errs[0][1],
                    f"{name}.grads.max_rel": max(e[0] for e in errs[1:]),
                    f"{name}.grads.mean_rel": max(e[1] for e in errs[1:])})
    return out


def timings(S: int, batch: int = 32, steps: int = 25, width: int = 128, into: dict | None = None) -> dict:
    """One row: each path's graph-replayed fwd and fwd+bwd times (ms), its errors (accuracy), the floors;
    written into `into` as they are measured (probe_main keeps them if the probe is stopped)."""
    rows, hidden = batch * steps * S, 4 * width
    params, dy = make_inputs(rows, width, "cuda")
    out = {} if into is None else into
    out.update({"S": S, "rows": rows, "H": width, "F": hidden})
    for name in PATHS:
        fn = path_fn(name)
        dy_mode = dy.to(fn(*params).dtype)  # bf16 under autocast
        out[f"{name}.fwd"] = graph_replay(lambda: fn(*params))["graph_ms"]
        out[f"{name}.fwd+bwd"] = graph_replay(lambda: torch.autograd.grad(fn(*params), params, dy_mode))["graph_ms"]
    out.update(accuracy(params, dy))
    out.update(floors_ms(rows, width, hidden))
    return out


def main(argv=None) -> int:
    return probe_main(argv, __doc__, [128, 32], "matmul", SETTINGS, timings)


if __name__ == "__main__":
    sys.exit(main())
