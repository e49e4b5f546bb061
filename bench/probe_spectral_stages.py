"""Where the spectral conv's time goes, stage by stage and variant by variant (CUDA only; not a pytest file).

At rows R = B*T = 800, H = 128, K = S/2, each timing a CUDA-graph replay (GPU time without launch cost;
triton.testing.do_bench median, ms):
- every variant of the Triton path, forward and forward + backward: transform dft (Triton or cuBLAS
  GEMMs, AMG_FAST_SPECTRAL_DFT_GEMM) or fft, mixing gauss, four or cuBLAS's torch.bmm (AMG_FAST_SPECTRAL_MIX),
  W as copied planes or read in place (AMG_FAST_SPECTRAL_WEIGHT_PLANES) -- keys "<variant>.fwd",
  "<variant>.fwd+bwd";
- the stages of the default variant at this S (analysis, mixing, synthesis, dweight, adjoint mixing), and the
  mixing and dweight through torch.bmm ("stage.mix.torch", "stage.dweight.torch");
- the eager reference (rfft, complex einsum, irfft), forward and forward + backward.
Rows "dots=tf32x3": fp32 with fp32-accurate dots (TF32 off); "dots=tf32": TF32 allowed and
REDUCED_PRECISION_DOTS on (plain TF32 MMAs, the default), plus the bf16-input path ("bf16.<variant>.fwd+bwd").

Usage: python bench/probe_spectral_stages.py [--sizes 32 128 1024] [--json OUT]   (~1-2 min on an H100)
"""
from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _providers import graph_replay, probe_main  # noqa: E402

VARIANTS = ["dft-gauss", "dft-four", "dft-gauss-wview", "dft-torchgemm", "dft-torchmix", "dft-cublas", "fft-gauss",
            "fft-four", "fft-gauss-wview", "fft-torchmix"]
BF16_VARIANTS = ["dft-gauss", "fft-gauss", "dft-torchgemm", "dft-cublas"]


def graph_ms(fn) -> float | None:
    """Median ms of fn replayed from a CUDA graph (bench/_providers.py's graph_replay)."""
    return graph_replay(fn)["graph_ms"]


def fwd_and_fwd_bwd(fn, x, w, modes=("fwd", "fwd+bwd")) -> dict[str, float | None]:
    """{mode: ms} of fn(x, w) ("fwd") and with its gradients ("fwd+bwd"), each of modes only."""
    dy = torch.randn_like(fn(x, w))
    calls = {"fwd": lambda: fn(x, w), "fwd+bwd": lambda: torch.autograd.grad(fn(x, w), (x, w), dy)}
    return {mode: graph_ms(calls[mode]) for mode in modes}


def stages(S: int, rows: int = 800, width: int = 128, device: str = "cuda", into: dict | None = None) -> dict:
    """The probe's row for one S (device "cpu": Triton's interpreter, for the tests: its times mean nothing),
    written into `into` as it is measured (probe_main keeps what a stopped probe measured)."""
    from amg_fast.kernels import spectral_conv as k
    from amg_fast.kernels.limits import spectral_transform
    from amg_fast.ops.spectral_conv import SpectralConv1dFn, spectral_conv1d_ref

    reduced = torch.backends.cuda.matmul.allow_tf32
    K = S // 2
    x = torch.randn(rows, S, width, device=device, requires_grad=True)
    w = (torch.randn(K, width, width, 2, device=device) / width).requires_grad_()
    out = {} if into is None else into
    out.update({"S": S, "K": K, "auto_transform": spectral_transform("auto", S)})

    # first (a probe its time limit stops keeps these): the default variant's stages at this S (auto
    # transform), on [R, S, 1, H] rows, and the mixing and dweight on cuBLAS beside the kernels
    fft = out["auto_transform"] == "fft"
    x4, dy4 = x.detach()[:, :, None], torch.randn(rows, S, 1, width, device=device)
    A, G = k.spectral_bases(S, K, torch.float32, x.device)
    planes = k.weight_planes(w.detach(), torch.float32)
    spec_x = k._spectrum(x4, A, fft)
    spec_dy = k._spectrum(dy4, A, fft)
    mixed = (torch.empty(rows, S // 2 + 1, 1, width, 2, device=device) if fft else  # the layouts _mix writes
             k.dft_spectrum_parts(torch.empty(rows, 2 * K, 1, width, device=device)))
    out["stage.mix"] = graph_ms(lambda: k._mix(spec_x, planes, mixed, K, S, False, False))
    with k.use_variant("fft-torchmix" if fft else "dft-torchmix"):  # the mixing and dweight through torch.bmm
        torch_planes = k.weight_planes(w.detach(), torch.float32)  # W's plain planes (not fp32 mode's split ones)
        # as the op: the dft path's mixed spectrum is not zeroed ahead of the synthesis (for_irfft)
        out["stage.mix.torch"] = graph_ms(lambda: k._mix(spec_x, torch_planes, mixed, K, S, False, False,
                                                         for_irfft=fft))
        out["stage.dweight.torch"] = graph_ms(lambda: k._dweight(spec_x, spec_dy, K, S, torch.float32, False))
    out.update({
        "stage.dweight": graph_ms(lambda: k._dweight(spec_x, spec_dy, K, S, torch.float32, False)),
        "stage.analysis": graph_ms(lambda: k._spectrum(x4, A, fft)),
        "stage.mix+synthesis": graph_ms(lambda: k._mix_and_synthesize(spec_x, planes, G, S, width, False,
                                                                       torch.float32, fft, False)),
        "stage.weight_planes": graph_ms(lambda: k.weight_planes(w.detach(), torch.float32)),
    })
    xh = torch.fft.rfft(x.detach(), dim=1, norm="ortho")[:, :K]
    wc = torch.view_as_complex(w.detach())
    yh = torch.einsum("rki,kio->rko", xh, wc)
    out.update({
        "reference.rfft": graph_ms(lambda: torch.fft.rfft(x.detach(), dim=1, norm="ortho")[:, :K]),
        "reference.einsum": graph_ms(lambda: torch.einsum("rki,kio->rko", xh, wc)),
        "reference.irfft": graph_ms(lambda: torch.fft.irfft(yh, n=S, dim=1, norm="ortho")),
    })

    # then every variant, forward and forward + backward, the bf16 path, the eager reference
    for name in VARIANTS:
        with k.use_variant(name, reduced) as transform:
            for mode, ms in fwd_and_fwd_bwd(lambda a, b: SpectralConv1dFn.apply(a, b, transform), x, w).items():
                out[f"{name}.{mode}"] = ms
    if reduced:  # bf16 activations and weights, bf16 MMAs
        xb, wb = (t.detach().bfloat16().requires_grad_() for t in (x, w))
        for name in BF16_VARIANTS:
            with k.use_variant(name, True) as transform:
                out[f"bf16.{name}.fwd+bwd"] = fwd_and_fwd_bwd(
                    lambda a, b: SpectralConv1dFn.apply(a, b, transform), xb, wb, ("fwd+bwd",))["fwd+bwd"]
    for mode, ms in fwd_and_fwd_bwd(spectral_conv1d_ref, x, w).items():
        out[f"reference.{mode}"] = ms
    return out


def main(argv=None) -> int:
    return probe_main(argv, __doc__, [32, 128, 1024], "dots", (("tf32x3", False), ("tf32", True)), stages)


if __name__ == "__main__":
    sys.exit(main())
