"""Where the spectral conv's time goes, stage by stage (CUDA only; not a pytest file).

Times each stage of the Triton path (analysis, mixing, synthesis; in the backward also the
dweight kernel and the adjoint mixing) and of the eager reference (rfft, complex einsum, irfft),
each replayed from a CUDA graph (GPU time without launch cost; triton.testing.do_bench median),
at rows R = B*T = 800, H = 128, K = S/2, for fp32 with fp32-accurate dots ("tf32x3") and with
TF32 allowed ("tf32"). Written to explain the 0.67x of the Triton path at S = 1024, where its
transforms go through torch.fft and only the mixing is Triton.

Usage: python bench/probe_spectral_stages.py [--sizes 128 1024] [--json OUT]
"""
from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _providers import graph_replay, probe_main  # noqa: E402


def graph_ms(fn) -> float | None:
    """Median ms of fn replayed from a CUDA graph (bench/_providers.py's graph_replay)."""
    return graph_replay(fn)["graph_ms"]


def stages(S: int, rows: int = 800, width: int = 128) -> dict[str, float]:
    from amg_fast.kernels import spectral_conv as k
    from amg_fast.kernels.limits import spectral_transform

    K = S // 2
    fft = spectral_transform("auto", S) == "fft"
    x = torch.randn(rows, S, width, device="cuda")
    w = torch.randn(K, width, width, 2, device="cuda") / width
    A, G, a = k.spectral_bases(S, K, torch.float32, x.device)
    spec_x = k._analysis(x, A, a, fft, adjoint=False)
    spec_y = k._mix(spec_x, w, adjoint=False)
    wc = torch.view_as_complex(w)
    xh = torch.fft.rfft(x, dim=1, norm="ortho")[:, :K]
    yh = torch.einsum("rki,kio->rko", xh, wc)
    out = {
        "triton.analysis": graph_ms(lambda: k._analysis(x, A, a, fft, adjoint=False)),
        "triton.mix": graph_ms(lambda: k._mix(spec_x, w, adjoint=False)),
        "triton.synthesis": graph_ms(lambda: k._synthesis(spec_y, G, a, x.dtype, fft, adjoint=False)),
        "triton.dweight": graph_ms(lambda: k._dweight(spec_x, spec_y, w)),
        "triton.mix_adjoint": graph_ms(lambda: k._mix(spec_y, w, adjoint=True)),
        "triton.fwd": graph_ms(lambda: k.spectral_conv1d_fwd(x, w, A, G, a, fft)),
        "reference.rfft": graph_ms(lambda: torch.fft.rfft(x, dim=1, norm="ortho")[:, :K]),
        "reference.einsum": graph_ms(lambda: torch.einsum("rki,kio->rko", xh, wc)),
        "reference.irfft": graph_ms(lambda: torch.fft.irfft(yh, n=S, dim=1, norm="ortho")),
    }
    parts = [out[f"reference.{stage}"] for stage in ("rfft", "einsum", "irfft")]
    out["reference.fwd"] = None if None in parts else sum(parts)
    return {"S": S, "K": K, "fft_transforms": fft, **out}


def main(argv=None) -> int:
    return probe_main(argv, __doc__, [128, 1024], "dots", (("tf32x3", False), ("tf32", True)), stages)


if __name__ == "__main__":
    sys.exit(main())
