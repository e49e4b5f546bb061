"""Where the spectral conv's error comes from on a GPU, stage by stage (CUDA only; not a pytest file).

For each (S, rows R, channels C) and TF32 off / on: the relative error against the fp64 reference of
the whole Triton op with its "fft" and "dft" transforms, of the fft analysis alone and of the mixing
kernel alone. Written on an H100 (2026-11-26, results/gpu/20261126-h100/followup/) where the "fft"
path was 2-6% off at S = 128 and 1024 with R = 100 (exact with R = 8, and at S = 512) while each stage
alone was exact: the synthesis (cuFFT C2R not ignoring the imaginary DC part) was the suspect, fixed
by kernels._common.irfft_ortho. Rerun it on the next GPU to confirm.

Usage: python bench/probe_spectral_accuracy.py
"""
import sys

import torch

from amg_fast.kernels import spectral_conv as k
from amg_fast.ops.spectral_conv import SpectralConv1dFn, spectral_conv1d_ref


def rel(a, b):
    return ((a.double() - b.double()).norm() / b.double().norm()).item()


def main() -> int:
    if not torch.cuda.is_available():
        print("error: this probe checks CUDA kernels and needs a GPU", file=sys.stderr)
        return 3
    g = torch.Generator(device="cuda").manual_seed(0)
    for tf32 in (False, True):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        for S, R, C in ((128, 100, 128), (1024, 100, 128), (1024, 100, 32), (1024, 8, 128), (512, 100, 128)):
            K = S // 2
            x = torch.randn(R, S, C, device="cuda", generator=g)
            w = torch.randn(K, C, C, 2, device="cuda", generator=g) / C
            ref = spectral_conv1d_ref(x[None].double(), w.double())[0]
            row = {}
            for tr in ("fft", "dft"):
                row[tr] = rel(SpectralConv1dFn.apply(x[None], w, tr)[0], ref)
            A, G, a = k.spectral_bases(S, K, torch.float32, x.device)
            spec = k._analysis(x, A, a, True, adjoint=False)
            spec64 = torch.view_as_real(torch.fft.rfft(x.double(), dim=1, norm="ortho")[:, :K]).permute(3, 1, 0, 2)
            row["analysis_fft"] = rel(spec, spec64)
            mixed = k._mix(spec64.float().contiguous(), w, adjoint=False)
            mixed64 = torch.view_as_real(torch.einsum("rki,kio->rko", torch.view_as_complex(spec64.permute(2, 1, 3, 0).contiguous()),
                                                      torch.view_as_complex(w.double()))).permute(3, 1, 0, 2)
            row["mix"] = rel(mixed, mixed64)
            row["cfg"] = k._blocks(k.MIX_CONFIG, R=R, I=C, O=C)
            print(f"tf32={tf32} S={S} R={R} C={C}", {kk: (f"{v:.2e}" if isinstance(v, float) else v) for kk, v in row.items()}, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
