"""The FFNO feed-forward on a GPU: the reference (Linear, ReLU, Linear), the cuBLASLt bias + ReLU
epilogue (method="epilogue") and the Triton kernels that keep the hidden activation on chip
(method="fused", kernels/feed_forward.py), forward and forward + backward, each replayed from a
CUDA graph, beside the HBM floors of the two designs (CUDA only; not a pytest file).

What it decides (issue 11): which path feed_forward's method="auto" should take. The fused kernels
can at best reach the "on-chip floor" (x, y, dy, dx and the weights moved once, the [rows, F]
hidden never written) but recompute two GEMMs in the backward; the epilogue path writes and reads
the hidden. The H100 run of 2026-11-26 measured the first two paths (the fused one was written
after it).

Usage: python bench/probe_ffn.py [--sizes 32 128] [--json OUT]   (rows = 32 * 25 * S, H = 128, F = 4H)
"""
from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _providers import graph_replay, probe_main  # noqa: E402

HBM_TB_S = {"H100": 3.35, "H200": 4.8}  # vendor peak, for the floor only


def _peak_tb_s() -> float:
    name = torch.cuda.get_device_name(0)
    return next((v for k, v in HBM_TB_S.items() if k in name), 3.35)


def floors_ms(rows: int, width: int, hidden: int, itemsize: int = 4) -> dict[str, float]:
    """HBM-byte floors in ms: the fused MLP (hidden on chip) and the epilogue path (hidden through HBM)."""
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


def timings(S: int, batch: int = 32, steps: int = 25, width: int = 128) -> dict:
    from amg_fast.ops.ffn import feed_forward, feed_forward_ref

    rows, hidden = batch * steps * S, 4 * width
    x = torch.randn(rows, width, device="cuda", requires_grad=True)
    w1 = (torch.randn(hidden, width, device="cuda") / width**0.5).requires_grad_()
    b1 = torch.zeros(hidden, device="cuda", requires_grad=True)
    w2 = (torch.randn(width, hidden, device="cuda") / hidden**0.5).requires_grad_()
    b2 = torch.zeros(width, device="cuda", requires_grad=True)
    dy = torch.randn(rows, width, device="cuda")
    params = (x, w1, b1, w2, b2)
    paths = {"reference": feed_forward_ref,
             "epilogue": lambda *a: feed_forward(*a, backend="triton", method="epilogue"),
             "fused": lambda *a: feed_forward(*a, backend="triton", method="fused")}
    out = {"S": S, "rows": rows, "H": width, "F": hidden}
    for name, fn in paths.items():
        out[f"{name}.fwd"] = graph_replay(lambda: fn(*params))["graph_ms"]
        out[f"{name}.fwd+bwd"] = graph_replay(lambda: torch.autograd.grad(fn(*params), params, dy))["graph_ms"]
    out.update(floors_ms(rows, width, hidden))
    return out


def main(argv=None) -> int:
    return probe_main(argv, __doc__, [32, 128], "matmul", (("fp32", False), ("tf32", True)), timings)


if __name__ == "__main__":
    sys.exit(main())
