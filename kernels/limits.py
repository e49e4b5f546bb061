"""Algorithm thresholds and kernel limits of every op, in one place (imports nothing from triton).

The ops (amg_fast.ops) read these to pick an algorithm for "auto" and to refuse what a kernel cannot
take; the kernels' launchers read them to guard their own inputs. Measured values say where they
were measured (scripts/kernel_sweep.py times the crossovers).
"""
from __future__ import annotations

import os

__all__ = ["S4D_METHODS", "TOEPLITZ_MAX_T", "SPECTRAL_TRANSFORMS", "TRANSFORM_FFT_MIN_S", "GATE_MAX_H",
           "FFN_METHODS", "FFN_FUSED_MAX_H", "s4d_method", "spectral_transform", "ffn_method"]

# s4d_scan(method=...): "toeplitz" (causal depthwise Toeplitz product with a kernel-built K) or
# "scan" (sequential recurrence in registers). "auto" = toeplitz for T <= TOEPLITZ_MAX_T. Measured on
# an H200 (B*T = 800, S = 128, H = 128, N = 32, fwd+bwd ms, toeplitz / scan): T=25 1.59 / 1.67,
# T=50 1.79 / 1.53, T=100 1.91 / 1.51, T=200 2.87 / 1.52 (forward alone the crossover is near T=100:
# 0.33 / 0.33). Training runs forward+backward, so the switch is at 32.
S4D_METHODS = ("auto", "toeplitz", "scan")
TOEPLITZ_MAX_T = 32

# spectral_conv1d(transform=...): "dft" (truncated DFT as a GEMM against cached bases) or "fft"
# (torch.fft transforms, Triton mixing). "auto" = fft from S = TRANSFORM_FFT_MIN_S on (H200 sweep, with
# the old relayout copies on the fft path), or what AMG_FAST_SPECTRAL_TRANSFORM (auto | dft | fft, read at
# import into SPECTRAL_TRANSFORM_AUTO) says: how a GPU session times the whole training step on either path.
SPECTRAL_TRANSFORMS = ("auto", "dft", "fft")
TRANSFORM_FFT_MIN_S = 512
SPECTRAL_TRANSFORM_AUTO = os.environ.get("AMG_FAST_SPECTRAL_TRANSFORM", "auto")

# gate_fusion: one program holds all H output columns of a row tile in registers (two [BLOCK_M,
# BLOCK_H] accumulators in the backward), so the Triton kernels take H <= GATE_MAX_H.
GATE_MAX_H = 256

# feed_forward(method=...) on the Triton backend: "epilogue" (cuBLASLt GEMMs, bias + ReLU in the
# first one's epilogue) or "fused" (kernels/feed_forward.py: the hidden activation kept on chip,
# recomputed in the backward). "auto" = epilogue (or $AMG_FAST_FFN_METHOD): the fused kernels are
# not yet timed on a GPU (bench/probe_ffn.py compares the two). The fused kernels hold [BLOCK_M, H]
# tiles of x, y, dy and dx on chip, so they take H_in, H_out <= FFN_FUSED_MAX_H (estimated: at H = 256
# the dx kernel would need ~400 KB of shared memory with these blocks; raise it once a GPU has
# compiled and tuned a wider case).
FFN_METHODS = ("auto", "epilogue", "fused")
FFN_FUSED_MAX_H = 128  # the paper's width


def _choice(name: str, value: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise ValueError(f"{name} must be one of {allowed}, got {value!r}")
    return value


def s4d_method(method: str, T: int) -> str:
    """The S4D forward algorithm, "toeplitz" or "scan", for method ("auto" resolved by T)."""
    if _choice("method", method, S4D_METHODS) == "auto":
        return "toeplitz" if T <= TOEPLITZ_MAX_T else "scan"
    return method


def spectral_transform(transform: str, S: int) -> str:
    """The spectral conv's transform, "dft" or "fft", for transform ("auto": SPECTRAL_TRANSFORM_AUTO when
    that names one, else resolved by S)."""
    if _choice("transform", transform, SPECTRAL_TRANSFORMS) != "auto":
        return transform
    chosen = _choice("AMG_FAST_SPECTRAL_TRANSFORM (kernels.limits.SPECTRAL_TRANSFORM_AUTO)",
                     SPECTRAL_TRANSFORM_AUTO, SPECTRAL_TRANSFORMS)
    if chosen != "auto":
        return chosen
    return "fft" if S >= TRANSFORM_FFT_MIN_S else "dft"


def ffn_method(method: str) -> str:
    """The feed-forward's Triton-backend path, "epilogue" or "fused", for method. "auto" = the
    AMG_FAST_FFN_METHOD environment variable ("epilogue" or "fused"), else "epilogue": how a GPU
    session times the whole training step with either path (the models call method="auto")."""
    if _choice("method", method, FFN_METHODS) != "auto":
        return method
    chosen = os.environ.get("AMG_FAST_FFN_METHOD", "epilogue")
    if chosen not in FFN_METHODS[1:]:
        raise ValueError(f"AMG_FAST_FFN_METHOD must be one of {FFN_METHODS[1:]}, got {chosen!r}")
    return chosen
