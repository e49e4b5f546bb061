"""The spectral conv's error per precision mode, from its algorithm alone: operand rounding emulated.

Every tl.dot of the Triton kernels rounds its operands and accumulates in fp32: "tf32" keeps 10
explicit mantissa bits (Hopper's MMA reads the top 19 bits of each fp32 register: truncation), and
the kernels round to nearest (ties away) what they form for such dots -- the cached bases, the spectra
the analysis and the mixing store for the next stage on the "dft" path, the Gauss sums -- so only the
op's inputs (x, dy) and W reach the MMA unrounded ("tf32-trunc": every operand truncated, the kernels
before 2026-11-27 evening; "tf32-rn": every operand rounded, a bound); "tf32x3" splits each fp32
operand into big = rna_tf32(a) and small = a - big and sums big*big + big*small + small*big (Triton's
F32DotTC pass), bf16 operands keep 7 bits (round to nearest even).
This module computes each stage of the op with the operands rounded as the kernels' dots round them
and everything else in fp64, so it gives the error the algorithm itself has in each mode (rounding
and the 3-multiplication product's cancellation), apart from any kernel or compiler defect. It runs
on CPU or CUDA (bench/probe_spectral_accuracy.py puts it beside the GPU kernels' measured error).

The chain (kernels/spectral_conv.py): X = A x (analysis; A [2K, S] cos / -sin rows), stored in the
work dtype; Y[k] = X[k] W[k] (complex, per mode), stored; y = G Y (synthesis). With transform "fft"
the transforms are fp32 FFTs and only the mixing rounds operands. Mixing forms:
  four:  re = a c - b d,  im = a d + b c                        (4 real products)
  gauss: k1 = (a + b) c, k2 = a (d - c), k3 = b (c + d); re = k1 - k3, im = k1 + k2   (3 products)
for X = a + i b, W = c + i d; the sums are formed in fp32 and rounded once more as dot operands.

Usage: python bench/spectral_precision.py [--sizes 32 64 128 256 512 1024] [--rows 8] [--width 128]
       [--transform dft|fft]    prints one markdown table of rel. errors (||got - exact|| / ||exact||) of y, per mode and S.
"""
from __future__ import annotations

import argparse
import math
import sys

import torch

MODES = ("fp32", "tf32x3", "tf32", "tf32-trunc", "tf32-rn", "bf16")
MIX_METHODS = ("four", "gauss")
F64 = torch.float64


def round_mantissa(t: torch.Tensor, bits: int, *, nearest: bool) -> torch.Tensor:
    """The fp32 value of t with its mantissa cut to `bits` explicit bits (23 = fp32 itself), as fp32.

    nearest=True rounds to nearest, ties to even (bf16 conversion); False truncates toward zero
    (what the MMA unit does to fp32 registers used as tf32 operands). Finite inputs only."""
    v = t.to(torch.float32).contiguous().view(torch.int32)
    drop = 23 - bits
    if drop <= 0:
        return v.view(torch.float32)
    if nearest:
        v = v + ((1 << (drop - 1)) - 1) + ((v >> drop) & 1)
    return (v & ~((1 << drop) - 1)).view(torch.float32)


def round_away(t: torch.Tensor, bits: int) -> torch.Tensor:
    """Round the fp32 value of t to `bits` mantissa bits, to nearest with ties away from zero
    (PTX cvt.rna.tf32.f32, the "big" half of tf32x3), as fp32."""
    v = t.to(torch.float32).contiguous().view(torch.int32)
    drop = 23 - bits
    v = v + (1 << (drop - 1))  # on the magnitude bits: ties go away from zero, the sign bit is untouched
    return (v & ~((1 << drop) - 1)).view(torch.float32)


def operand(t: torch.Tensor, mode: str) -> torch.Tensor:
    """t (any float) as the dot operand value a kernel in `mode` feeds its MMA, in fp64
    (tf32x3 handled by dot(), which needs both halves)."""
    if mode in ("fp32", "tf32x3"):
        return t.to(torch.float32).to(F64)
    if mode in ("tf32", "tf32-trunc"):
        return round_mantissa(t, 10, nearest=False).to(F64)
    if mode == "tf32-rn":
        return round_mantissa(t, 10, nearest=True).to(F64)
    if mode == "bf16":
        return t.to(torch.float32).to(torch.bfloat16).to(F64)
    raise ValueError(f"mode must be one of {MODES}, got {mode!r}")


def dot(a: torch.Tensor, b: torch.Tensor, mode: str) -> torch.Tensor:
    """a @ b as a kernel's tl.dot in `mode` computes it: operands rounded, products summed in fp64
    (the fp32 accumulation's own error, ~1e-7, is left out: it is the same in every mode)."""
    if mode == "tf32x3":
        a32, b32 = a.to(torch.float32), b.to(torch.float32)
        a_big, b_big = round_away(a32, 10), round_away(b32, 10)
        a_small = round_mantissa(a32 - a_big, 10, nearest=False).to(F64)  # fed to a plain-TF32 MMA
        b_small = round_mantissa(b32 - b_big, 10, nearest=False).to(F64)
        a_big, b_big = a_big.to(F64), b_big.to(F64)
        return a_small @ b_big + a_big @ b_small + a_big @ b_big
    return operand(a, mode) @ operand(b, mode)


def stored(t: torch.Tensor, mode: str) -> torch.Tensor:
    """An intermediate as the kernels store it for the next stage's dots: bf16 in bf16 mode, rounded to
    TF32 in tf32 mode, else fp32 (values in fp64)."""
    if mode == "tf32":
        return round_away(t, 10).to(F64)
    return t.to(torch.bfloat16 if mode == "bf16" else torch.float32).to(F64)


def complex_product(a, b, c, d, mode: str, method: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(re, im) of (a + i b) @ (c + i d) as the mixing kernel forms it: method "four" or "gauss"
    (the operand sums in fp32, as the kernel adds fp32 tiles before its dots)."""
    if method == "four":
        return dot(a, c, mode) - dot(b, d, mode), dot(a, d, mode) + dot(b, c, mode)
    if method != "gauss":
        raise ValueError(f"method must be one of {MIX_METHODS}, got {method!r}")
    f32 = torch.float32
    sums = [a.to(f32) + b.to(f32), d.to(f32) - c.to(f32), c.to(f32) + d.to(f32)]
    if mode == "tf32":  # the kernels round the sums they form to TF32
        sums = [round_away(t, 10) for t in sums]
    k1 = dot(sums[0], c, mode)
    k2 = dot(a, sums[1], mode)
    k3 = dot(b, sums[2], mode)
    return k1 - k3, k1 + k2


def bases(S: int, K: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """(A [2K, S], G [S, 2K]) in fp64: rows 2k, 2k+1 of A = cos, -sin of mode k (ortho); G = A^T * a_k."""
    k = torch.arange(K, device=device, dtype=torch.int64)
    s = torch.arange(S, device=device, dtype=torch.int64)
    angle = (2 * math.pi / S) * torch.remainder(k[:, None] * s[None, :], S).to(F64)
    A = torch.stack([torch.cos(angle), -torch.sin(angle)], dim=1).reshape(2 * K, S) / math.sqrt(S)
    a = torch.where((k == 0) | (2 * k == S), 1.0, 2.0).to(F64).repeat_interleave(2)
    return A, (A * a[:, None]).t().contiguous()


def spectral_conv_emulated(x: torch.Tensor, w: torch.Tensor, mode: str, method: str, transform: str = "dft"
                           ) -> dict[str, torch.Tensor]:
    """x [R, S, H_in], w [K, H_in, H_out, 2] -> the stages as a kernel chain in `mode` computes them:
    {"spectrum" [R, 2K, H_in], "mixed" [R, 2K, H_out] (from the exact spectrum: the mixing alone),
    "y" [R, S, H_out] (the whole chain)}, in fp64. transform "fft": fp32 FFTs for the transforms."""
    R, S, _ = x.shape
    K = w.shape[0]
    A_exact, G = bases(S, K, x.device)
    A = A_exact
    if mode == "tf32":  # the kernels' cached bases, rounded to TF32
        A, G = round_away(A, 10).to(F64), round_away(G, 10).to(F64)
    if transform == "fft":
        spec = torch.view_as_real(torch.fft.rfft(x.float(), dim=1, norm="ortho")[:, :K]).to(F64)
        spectrum = spec.permute(0, 1, 3, 2).reshape(R, 2 * K, -1)
    else:
        spectrum = stored(torch.stack([dot(A, x[r], mode) for r in range(R)]), mode)
    c, d = w[..., 0], w[..., 1]

    def mix(spec):
        z = spec.reshape(R, K, 2, -1).permute(1, 2, 0, 3)  # [K, 2, R, H]
        re, im = complex_product(z[:, 0], z[:, 1], c, d, mode, method)
        return torch.stack([re, im], dim=1).permute(2, 0, 1, 3).reshape(R, 2 * K, -1)

    exact_spectrum = torch.stack([A_exact @ x[r].to(F64) for r in range(R)])
    mixed_alone = stored(mix(exact_spectrum), mode if transform == "dft" else "fp32")  # as the kernel stores it
    mixed = stored(mix(spectrum), mode if transform == "dft" else "fp32")  # fft: complex64 buffers
    if transform == "fft":
        z = mixed.reshape(R, K, 2, -1)
        z = torch.complex(z[:, :, 0].float(), z[:, :, 1].float())
        z[:, 0].imag.zero_()
        if S % 2 == 0 and K > S // 2:
            z[:, S // 2].imag.zero_()
        y = torch.fft.irfft(z, n=S, dim=1, norm="ortho").to(F64)
    else:
        y = torch.stack([dot(G, mixed[r], mode) for r in range(R)])
    return {"spectrum": spectrum, "mixed": mixed_alone, "y": y}


def spectral_conv_exact(x: torch.Tensor, w: torch.Tensor) -> dict[str, torch.Tensor]:
    """The same stages in fp64 (the yardstick of spectral_conv_emulated)."""
    R, S, _ = x.shape
    K = w.shape[0]
    A, G = bases(S, K, x.device)
    spectrum = torch.einsum("ms,rsh->rmh", A, x.to(F64))
    z = spectrum.reshape(R, K, 2, -1)
    wc = torch.complex(w[..., 0].to(F64), w[..., 1].to(F64))
    yc = torch.einsum("rki,kio->rko", torch.complex(z[:, :, 0], z[:, :, 1]), wc)
    mixed = torch.stack([yc.real, yc.imag], dim=2).reshape(R, 2 * K, -1)
    return {"spectrum": spectrum, "mixed": mixed, "y": torch.einsum("sm,rmh->rsh", G, mixed)}


def rel(got: torch.Tensor, want: torch.Tensor) -> float:
    """||got - want|| / ||want|| in fp64."""
    return float((got.detach().to(F64) - want).norm() / want.norm())


def expected_errors(x: torch.Tensor, w: torch.Tensor, mode: str, method: str, transform: str = "dft"
                    ) -> dict[str, float]:
    """{stage: rel. error vs fp64} of spectral_conv_emulated on these inputs."""
    got, exact = spectral_conv_emulated(x, w, mode, method, transform), spectral_conv_exact(x, w)
    return {stage: rel(got[stage], exact[stage]) for stage in got}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", type=int, nargs="+", default=[32, 64, 128, 256, 512, 1024], help="S values")
    p.add_argument("--rows", type=int, default=8, help="rows R of x [R, S, H] (default 8)")
    p.add_argument("--width", type=int, default=128, help="channels H = H_in = H_out (default 128)")
    p.add_argument("--device", default="cpu", help="cpu or cuda (default cpu)")
    p.add_argument("--transform", default="dft", choices=["dft", "fft"],
                   help="dft: the basis GEMMs round operands too; fft: fp32 FFTs, only the mixing rounds")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    g = torch.Generator(device=args.device).manual_seed(args.seed)
    cols = [(mode, method) for mode in MODES for method in MIX_METHODS]
    print("| S | " + " | ".join(f"{mode} {method}" for mode, method in cols) + " | mixing alone, gauss / four (tf32) |")
    print("|---:|" + "---:|" * (len(cols) + 1))
    for S in args.sizes:
        K, H = S // 2, args.width
        x = torch.randn(args.rows, S, H, generator=g, device=args.device, dtype=F64).float()
        w = (torch.randn(K, H, H, 2, generator=g, device=args.device, dtype=F64) / math.sqrt(H)).float()
        errs = {col: expected_errors(x, w, *col, args.transform) for col in cols}
        ratio = errs[("tf32", "gauss")]["mixed"] / errs[("tf32", "four")]["mixed"]
        print(f"| {S} | " + " | ".join(f"{errs[col]['y']:.1e}" for col in cols) + f" | {ratio:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
