"""The performance model of docs/benchmarks.md ("Floors") as code: FLOPs and HBM bytes per call, and
the GPU peaks that turn them into a floor time.

flops_and_bytes(op, mode, shape) is the one place the benchmarks (and through their JSON, the
table script and bench/gpu_summary.py) get these counts from. `shape` holds B, T, S, H, K, N (any
mapping or object with those attributes); activations are [B, T, S, H], R = B*T rows. Counts are
what the math needs, not what an implementation happens to do:

- FLOPs: 2 per multiply-add. Backward = 2x forward (one GEMM-sized product for the input
  gradient and one for the weight gradient); a recompute in backward is the implementation's
  choice and is not counted.
- Bytes: the tensors that must cross HBM at least once, assuming every intermediate stays on
  chip (a fused kernel): forward reads its inputs and writes its outputs; backward reads the
  output gradient and the saved inputs and writes the input (and weight) gradients.
  "fwd+bwd" = the sum of both (the forward inputs are read again by the backward).

At S = 128, B*T = 800, H = 128 this gives the table of docs/benchmarks.md: spectral conv 113 MB,
S4D 0.33 GFLOP / 105 MB, gate 6.7 GFLOP and a whole AMGFNO training step ~0.5 TFLOP / ~5 GB. Two
deliberate differences from the first hand count (the project's design notes), both keeping the
floor a lower bound for what the public ops promise: the spectral transforms are counted as FFTs
where cheaper (7.2 GFLOP at S = 128 instead of the DFT-as-GEMM 13.4, see spectral_conv1d), and
gate_fusion's public op returns g as well as out, so its forward writes 2 activations (210 MB,
not 156).

floor_ms(op, mode, shape, precision, spec) = max(bytes / HBM bandwidth, FLOPs / peak of the
precision mode) with GPU_SPECS' vendor figures (dense, no sparsity): fp32 is the faster of the
SIMT fp32 peak and a third of the TF32 peak (tf32x3: three TF32 products per fp32-accurate one),
tf32 the TF32 tensor-core peak, bf16 the bf16 peak with 2-byte activations.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

MODES = ("fwd", "bwd", "fwd+bwd")
TRAIN_STEP = "amgfno_train_step"
TRAIN_STEP_2D = "amgfno2d_train_step"  # the same step of AMGFNO2d on an S x S grid
FF_FACTOR = 4          # FFNO feed-forward H -> 4H -> H
N_BLOCKS = 4           # FFNO blocks of AMGFNO (memory sits between blocks 2 and 3)
DECODER_HIDDEN = 128   # decoder H -> 128 -> C


def _dims(shape: Any) -> tuple[int, int, int, int, int, int]:
    get = shape.get if isinstance(shape, dict) else (lambda k: getattr(shape, k))
    return tuple(int(get(k)) for k in ("B", "T", "S", "H", "K", "N"))  # type: ignore[return-value]


def _split(fwd: tuple[float, float], bwd: tuple[float, float], mode: str) -> tuple[float, float]:
    if mode == "fwd":
        return fwd
    if mode == "bwd":
        return bwd
    if mode == "fwd+bwd":
        return fwd[0] + bwd[0], fwd[1] + bwd[1]
    raise ValueError(f"mode must be one of {MODES}, got {mode!r}")


def transform_flops(S: int, K: int) -> float:
    """FLOPs of one real transform of length S keeping K modes, per column: the cheaper of a
    truncated DFT as a GEMM (4SK, the first hand count) and a real FFT (~2.5 S log2 S)."""
    return min(4.0 * S * K, 2.5 * S * math.log2(max(S, 2)))


def spectral_conv1d(shape, mode: str, itemsize: int = 4) -> tuple[float, float]:
    """Forward transform + per-mode complex mixing (8RKH^2) + inverse transform.

    The transforms are counted at their cheapest (see transform_flops), so that the floor stays a
    lower bound at large S: the DFT-as-GEMM count (4RSKH each) grows as S^2 and at S = 1024 would
    put a compute "floor" several times above the HBM one. At S = 128 the mixing GEMM (6.7 GFLOP)
    dominates either way and the floor is HBM-bound.
    """
    B, T, S, H, K, _ = _dims(shape)
    R = B * T
    act, weight = R * S * H * itemsize, K * H * H * 2 * itemsize
    flops = 2 * R * H * transform_flops(S, K) + 8 * R * K * H * H
    return _split((flops, 2 * act + weight),            # x in, y out, W
                  (2 * flops, 3 * act + 2 * weight),    # dy, x in; dx out; W in, dW out
                  mode)


def s4d_scan(shape, mode: str, itemsize: int = 4) -> tuple[float, float]:
    """Causal Toeplitz form: T(T+1)/2 multiply-adds per (b, s, h), plus the D skip."""
    B, T, S, H, _, N = _dims(shape)
    act, params = B * T * S * H * itemsize, (4 * H * N + H) * itemsize
    flops = B * S * H * T * (T + 1) + 2 * B * T * S * H
    return _split((flops, 2 * act + params),            # u in, y out
                  (2 * flops, 3 * act + 2 * params),    # dy, u in; du out (+ parameter grads)
                  mode)


def gate_fusion(shape, mode: str, itemsize: int = 4) -> tuple[float, float]:
    """[RS, 2H] x [2H, H] GEMM plus ~6 elementwise FLOPs per element (sigmoid, chi, blend)."""
    B, T, S, H, _, _ = _dims(shape)
    rows = B * T * S
    act, weights = rows * H * itemsize, (2 * H * H + H + 1) * itemsize
    flops = 2 * rows * 2 * H * H + 6 * rows * H
    return _split((flops, 4 * act + weights),            # h, z in; out, g out
                  (2 * flops, 5 * act + 2 * weights),    # dout, h, z in; dh, dz out
                  mode)


def feed_forward(shape, mode: str, itemsize: int = 4) -> tuple[float, float]:
    """FFNO feed-forward Linear(H, F) -> ReLU -> Linear(F, H), F = 4H: two GEMMs plus the ReLU; the
    [R*S, F] hidden activation stays on chip (a fused MLP recomputes it in backward, not counted)."""
    B, T, S, H, _, _ = _dims(shape)
    rows, F = B * T * S, FF_FACTOR * H
    act, weights = rows * H * itemsize, (2 * H * F + F + H) * itemsize
    flops = 2 * (2 * rows * H * F) + rows * F
    return _split((flops, 2 * act + weights),            # x in, y out
                  (2 * flops, 3 * act + 2 * weights),    # dy, x in; dx out (+ weight grads)
                  mode)


def composed_linear(shape, mode: str, itemsize: int = 4) -> tuple[float, float]:
    """The decoder H -> 128 -> C (C = 1) as one Linear: 2 rows H C FLOPs (the weight-side W2 W1 counted
    once); x in, y out; backward dy, x in, dx out (+ the four parameters' gradients)."""
    B, T, S, H, _, _ = _dims(shape)
    rows, C = B * T * S, 1
    act, out = rows * H * itemsize, rows * C * itemsize
    weights = (DECODER_HIDDEN * H + DECODER_HIDDEN + C * DECODER_HIDDEN + C) * itemsize
    flops = 2 * rows * H * C + 2 * C * DECODER_HIDDEN * H
    return _split((flops, act + out + weights), (2 * flops, 2 * act + out + 2 * weights), mode)


def grid_linear(shape, mode: str, itemsize: int = 4) -> tuple[float, float]:
    """The encoder Linear([u, x/L]) -> H with C = 1 input channel: u in, y out; backward dy, u in, du out
    (+ the weight's and bias's gradients). Backward FLOPs: dW over all C + 1 columns, du over the C
    channels only (the grid's column takes no gradient), not 2x the forward."""
    B, T, S, H, _, _ = _dims(shape)
    rows, C = B * T * S, 1
    act, inp, weights = rows * H * itemsize, rows * C * itemsize, ((C + 1) * H + H) * itemsize
    flops = 2 * rows * (C + 1) * H
    bwd_flops = 2 * rows * (C + 1) * H + 2 * rows * C * H
    return _split((flops, inp + act + weights), (bwd_flops, act + 2 * inp + 2 * weights), mode)


def amgfno_parameters(shape) -> int:
    """Parameter count of AMGFNO1d(in=out=1 channel, width H, modes K, state_dim 2N)."""
    _, _, _, H, K, N = _dims(shape)
    block = 2 * K * H * H + 2 * FF_FACTOR * H * H + FF_FACTOR * H + H     # spectral W + feed-forward
    memory = 4 * H * N + 2 * H + 2 * H * H + 2 * H                        # A, C, D, dt; H -> 2H GLU
    gate = 2 * H * H + H + 2                                               # w_z, w_h, b, w1, b_omega
    coders = 2 * H + H + DECODER_HIDDEN * H + DECODER_HIDDEN + DECODER_HIDDEN + 1
    return N_BLOCKS * block + memory + gate + coders


def amgfno_train_step(shape, mode: str = "step", itemsize: int = 4) -> tuple[float, float]:
    """Forward (teacher forcing) + loss + backward + Adam step of AMGFNO at width H.

    FLOPs = 3 x forward (backward = 2 x). Bytes = each layer's fwd+bwd minimum in activations
    A = B*T*S*H*itemsize: spectral conv 5A per block; feed-forward 13A per block (x, the 4H hidden
    kept for backward, out; backward reads dout, hidden, x and writes dx); S4D 5A; its GELU ->
    Linear(H, 2H) -> GLU readout 9A; gate 9A; encoder 2A, decoder 3A; Adam reads p, g, m, v and
    writes p, m, v (plus the gradient write) per parameter.
    """
    if mode != "step":
        raise ValueError(f"mode of {TRAIN_STEP} must be 'step', got {mode!r}")
    B, T, S, H, K, N = _dims(shape)
    rows = B * T * S
    A = rows * H * itemsize
    spectral_f, _ = spectral_conv1d(shape, "fwd", itemsize)
    s4d_f, _ = s4d_scan(shape, "fwd", itemsize)
    gate_f, _ = gate_fusion(shape, "fwd", itemsize)
    ff_f = 2 * (2 * rows * H * FF_FACTOR * H) + rows * (FF_FACTOR * H + H)   # 2 GEMMs, ReLU, residual
    readout_f = 2 * rows * H * 2 * H + 12 * rows * H                         # Linear(H, 2H), GELU, GLU
    coders_f = 2 * rows * 2 * H + 2 * rows * H * DECODER_HIDDEN + 2 * rows * DECODER_HIDDEN
    forward = N_BLOCKS * (spectral_f + ff_f) + s4d_f + readout_f + gate_f + coders_f
    params = amgfno_parameters(shape)
    flops = 3 * forward + 12 * params
    nbytes = (N_BLOCKS * (spectral_conv1d(shape, "fwd+bwd", itemsize)[1] + 13 * A)
              + s4d_scan(shape, "fwd+bwd", itemsize)[1] + 9 * A
              + gate_fusion(shape, "fwd+bwd", itemsize)[1] + 5 * A
              + 8 * params * itemsize)
    return float(flops), float(nbytes)


def amgfno2d_train_step(shape, mode: str = "step", itemsize: int = 4) -> tuple[float, float]:
    """amgfno_train_step of AMGFNO2d on an S x S grid (shape's S per axis): every pointwise layer and
    the S4D memory over B*T*S^2 points (the 1D count with the batch B*S folded in), the spectral
    conv twice per block (once along each axis, each over B*T*S lines of S points), and the extra
    parameters (a second spectral weight per block, one encoder column) in Adam."""
    B, T, S, H, K, N = _dims(shape)
    folded = {"B": B * S, "T": T, "S": S, "H": H, "K": K, "N": N}
    flops, nbytes = amgfno_train_step(folded, mode, itemsize)
    extra_params = N_BLOCKS * 2 * K * H * H + H
    flops += N_BLOCKS * 3 * spectral_conv1d(folded, "fwd", itemsize)[0] + 12 * extra_params
    nbytes += N_BLOCKS * spectral_conv1d(folded, "fwd+bwd", itemsize)[1] + 8 * extra_params * itemsize
    return float(flops), float(nbytes)


OPS = {"spectral_conv1d": spectral_conv1d, "s4d_scan": s4d_scan, "gate_fusion": gate_fusion,
       "feed_forward": feed_forward, "grid_linear": grid_linear, "composed_linear": composed_linear,
       TRAIN_STEP: amgfno_train_step, TRAIN_STEP_2D: amgfno2d_train_step}


def flops_and_bytes(op: str, mode: str, shape, itemsize: int = 4) -> tuple[float, float]:
    """(FLOPs, HBM bytes) of one call of `op` in `mode` ("fwd", "bwd", "fwd+bwd"; "step" for the
    training step) at `shape` (B, T, S, H, K, N), for elements of `itemsize` bytes."""
    if op not in OPS:
        raise ValueError(f"op must be one of {tuple(OPS)}, got {op!r}")
    flops, nbytes = OPS[op](shape, mode, itemsize)
    return float(flops), float(nbytes)


# -- GPU peaks and floors ------------------------------------------------------------------------
PRECISIONS = ("fp32", "tf32", "bf16")
ITEMSIZE = {"fp32": 4, "tf32": 4, "bf16": 2}  # bytes per activation element in each precision mode


@dataclass(frozen=True)
class GpuSpec:
    """Vendor figures of one GPU: HBM bandwidth (TB/s) and dense peaks (TFLOP/s, no sparsity) of its
    SIMT fp32 units, TF32 tensor cores and bf16 tensor cores. `match` is a substring of the name
    torch reports (torch.cuda.get_device_name)."""
    match: str
    label: str
    hbm_tb_s: float
    fp32_simt_tflops: float
    tf32_tflops: float
    bf16_tflops: float

    def peak_tflops(self, precision: str) -> float:
        """Compute peak of a precision mode: fp32 = max(SIMT fp32, TF32 / 3: tf32x3 dots)."""
        if precision == "fp32":
            return max(self.fp32_simt_tflops, self.tf32_tflops / 3)
        if precision == "tf32":
            return self.tf32_tflops
        if precision == "bf16":
            return self.bf16_tflops
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")

    def as_dict(self) -> dict:
        return {"label": self.label, "hbm_tb_s": self.hbm_tb_s,
                "peak_tflops": {p: round(self.peak_tflops(p), 1) for p in PRECISIONS}}


# NVIDIA datasheets, dense figures rounded as the docs quote them (H100 SXM: 3.35 TB/s, 67 TFLOP/s fp32,
# 495 TF32, 990 bf16); first match wins, so the NVL / PCIe names come before the SXM ones.
GPU_SPECS = (
    GpuSpec("H200 NVL", "H200 NVL", 4.8, 60.0, 418.0, 836.0),
    GpuSpec("H200", "H200 SXM", 4.8, 67.0, 495.0, 990.0),
    GpuSpec("H100 NVL", "H100 NVL", 3.9, 60.0, 418.0, 836.0),
    GpuSpec("H100 PCIe", "H100 PCIe", 2.0, 51.0, 378.0, 756.0),
    GpuSpec("H100", "H100 SXM", 3.35, 67.0, 495.0, 990.0),
    GpuSpec("A100", "A100 80GB SXM", 2.04, 19.5, 156.0, 312.0),
)
DEFAULT_GPU_SPEC = GPU_SPECS[4]  # H100 SXM


def gpu_spec(name: str | None) -> tuple[GpuSpec, bool]:
    """(spec, matched): the GPU_SPECS entry whose `match` is in `name` (case-insensitive), else
    (DEFAULT_GPU_SPEC, False) -- also for name None (no GPU)."""
    match = next((spec for spec in GPU_SPECS if name and spec.match.lower() in name.lower()), None)
    return (match, True) if match is not None else (DEFAULT_GPU_SPEC, False)


def floor_ms(op: str, mode: str, shape, precision: str, spec: GpuSpec) -> tuple[float, str]:
    """(floor in ms, "HBM" or "compute"): max(bytes / bandwidth, FLOPs / peak) of one call of op in
    mode at shape, with activations of the precision mode's ITEMSIZE on the GPU of spec."""
    if precision not in ITEMSIZE:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    flops, nbytes = flops_and_bytes(op, mode, shape, ITEMSIZE[precision])
    memory, compute = nbytes / (spec.hbm_tb_s * 1e12), flops / (spec.peak_tflops(precision) * 1e12)
    return 1e3 * max(memory, compute), "HBM" if memory >= compute else "compute"
