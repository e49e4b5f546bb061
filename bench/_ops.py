"""The benchmarked ops and their inputs, shared by the per-op suites and bench/gpu_summary.py.

OP_CASES maps the name of an op in the results (bench/_roofline.py's name) to the public op and a
function shape -> {name: tensor} of its inputs, fresh random (seed 0) on _providers.DEVICE in fp32,
activations [B, T, S, H] requiring grad as in training.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from _providers import DEVICE, DTYPE, Shape, bench_op, generator, randn, shape_for
from _roofline import DECODER_HIDDEN, FF_FACTOR
from amg_fast.layers import S4DMemory
from amg_fast.ops import composed_linear, feed_forward, gate_fusion, grid_linear, s4d_scan, spectral_conv1d


def spectral_conv_inputs(shape: Shape) -> dict:
    """x [B, T, S, H], weight [K = S/2, H, H, 2]."""
    gen = generator(0)
    return {"x": randn(shape.B, shape.T, shape.S, shape.H, gen=gen),
            "weight": randn(shape.K, shape.H, shape.H, 2, gen=gen, scale=shape.H ** -1)}


def s4d_inputs(shape: Shape) -> dict:
    """u [B, T, S, H]; lam, c [H, N, 2] from an S4D-Lin initialised S4DMemory (|lam| < 1, as in
    training); d [H]."""
    torch.manual_seed(0)
    with torch.no_grad():
        lam, c = S4DMemory(shape.H, 2 * shape.N).discretize()
    leaf = lambda t: t.to(DEVICE, DTYPE).contiguous().requires_grad_()  # noqa: E731
    gen = generator(0)
    return {"u": randn(shape.B, shape.T, shape.S, shape.H, gen=gen), "lam": leaf(lam), "c": leaf(c),
            "d": randn(shape.H, gen=gen)}


def gate_inputs(shape: Shape) -> dict:
    """h, z [B, T, S, H]; w_z, w_h [H, H]; b [H]; chi 0-dim (requires grad, as the frequency gate's
    output does in training)."""
    gen, act = generator(0), (shape.B, shape.T, shape.S, shape.H)
    return {"h": randn(*act, gen=gen), "z": randn(*act, gen=gen),
            "w_z": randn(shape.H, shape.H, gen=gen, scale=shape.H ** -0.5),
            "w_h": randn(shape.H, shape.H, gen=gen, scale=shape.H ** -0.5),
            "b": randn(shape.H, gen=gen, scale=0.1),
            "chi": torch.tensor(0.7, device=DEVICE, dtype=DTYPE, requires_grad=True)}


def feed_forward_inputs(shape: Shape) -> dict:
    """x [B, T, S, H]; w1 [F, H], b1 [F], w2 [H, F], b2 [H] with F = 4H (nn.Linear convention)."""
    gen, F = generator(0), FF_FACTOR * shape.H
    return {"x": randn(shape.B, shape.T, shape.S, shape.H, gen=gen),
            "w1": randn(F, shape.H, gen=gen, scale=shape.H ** -0.5), "b1": randn(F, gen=gen, scale=0.1),
            "w2": randn(shape.H, F, gen=gen, scale=F ** -0.5), "b2": randn(shape.H, gen=gen, scale=0.1)}


def grid_linear_inputs(shape: Shape) -> dict:
    """The encoder's u [B, T, S, 1], the grid s / S [S] (no gradient), weight [H, 2], bias [H]."""
    gen = generator(0)
    grid = torch.arange(shape.S, device=DEVICE, dtype=DTYPE) / shape.S
    return {"u": randn(shape.B, shape.T, shape.S, 1, gen=gen), "grid": grid,
            "weight": randn(shape.H, 2, gen=gen, scale=0.5), "bias": randn(shape.H, gen=gen, scale=0.1)}


def composed_linear_inputs(shape: Shape) -> dict:
    """The decoder's x [B, T, S, H], w1 [128, H], b1 [128], w2 [1, 128], b2 [1]."""
    gen, F = generator(0), DECODER_HIDDEN
    return {"x": randn(shape.B, shape.T, shape.S, shape.H, gen=gen),
            "w1": randn(F, shape.H, gen=gen, scale=shape.H ** -0.5), "b1": randn(F, gen=gen, scale=0.1),
            "w2": randn(1, F, gen=gen, scale=F ** -0.5), "b2": randn(1, gen=gen, scale=0.1)}


@dataclass(frozen=True)
class OpCase:
    op: Callable
    make_inputs: Callable[[Shape], dict]


OP_CASES = {
    "spectral_conv1d": OpCase(spectral_conv1d, spectral_conv_inputs),
    "feed_forward": OpCase(feed_forward, feed_forward_inputs),
    "s4d_scan": OpCase(s4d_scan, s4d_inputs),
    "gate_fusion": OpCase(gate_fusion, gate_inputs),
    "grid_linear": OpCase(grid_linear, grid_linear_inputs),
    "composed_linear": OpCase(composed_linear, composed_linear_inputs),
}


def bench_case(benchmark, name: str, S: int, provider: str, mode: str) -> None:
    """The per-op suites' benchmark: OP_CASES[name] at shape_for(S) (see _providers.bench_op)."""
    shape, case = shape_for(S), OP_CASES[name]
    bench_op(benchmark, name=name, op=case.op, inputs=case.make_inputs(shape), mode=mode, provider=provider,
             shape=shape)
