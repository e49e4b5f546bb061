"""Where the spectral conv's error comes from on a GPU: every stage and variant against fp64 (CUDA only).

For each precision mode (tf32: plain TF32 dots, bf16: bf16 inputs and MMAs -- both the defaults of
kernels.spectral_conv.REDUCED_PRECISION_DOTS, set here -- and tf32x3, fp32's and the opt-out's), S, rows R
(H = 128, K = S/2 + 1) and variant (transform dft with Triton or cuBLAS GEMMs, or fft; mixing gauss or
four), prints one line: the relative error of the analysis, the mixing and the synthesis alone (each
fed the exact fp64 input of its stage), of y, dx and dweight, against an explicit-DFT-matrix fp64
computation (bench/spectral_precision.py: no cuFFT in the yardstick), beside the error the algorithm
itself has in that mode (the same emulation with operands rounded as the MMAs round them, on the first
64 rows). "ok" when every measured error is within 3x the expected one (or under 1e-6); "CHECK
<stages>" names the stages that are not -- a kernel or compiler problem, not the algorithm.

Also per (S, R): the fp32 eager reference (torch.fft with kernels._common.irfft_ortho) and a plain
torch.fft.irfft, against the same fp64 yardstick: confirms the cuFFT C2R fix (the H100's 2-6% at
S = 128 and 1024 with R = 100) and whether the unmasked irfft still shows the bug.

The H200's 3-9% "plain-TF32" failure (2026-11-26) compared with the fp32 reference at 100 rows, which
that C2R bug put 2-6% off; the emulated plain-TF32 error of the algorithm is ~2e-3.

Usage: python bench/probe_spectral_accuracy.py [--sizes 128 1024 32] [--rows 800 8] [--modes tf32 bf16 tf32x3]
       [--json OUT]   (~1-3 minutes on an H100, most of it Triton compiling the variants)
"""
from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import spectral_precision as emu  # noqa: E402

MODES = ("tf32", "bf16", "tf32x3")
VARIANTS = ["dft-gauss", "dft-four", "dft-torchgemm", "dft-torchgemm-four", "fft-gauss", "fft-four"]  # kernels.VARIANTS
EMULATED = {"tf32": "tf32", "bf16": "bf16", "tf32x3": "tf32x3"}  # tf32: truncated operands (Hopper's MMA)
EMULATED_ROWS = 64


@contextlib.contextmanager
def precision(mode: str):
    """TF32 allowed for "tf32" (else not), restored afterwards."""
    saved = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = mode == "tf32"
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved


def exact_with_grads(x: torch.Tensor, w: torch.Tensor, dy: torch.Tensor) -> dict[str, torch.Tensor]:
    """fp64 stages (emu.spectral_conv_exact: [R, 2K, H] spectra) and the gradients of <y, dy>."""
    x64, w64 = (t.detach().double().requires_grad_() for t in (x, w))
    out = emu.spectral_conv_exact(x64, w64)
    dx, dw = torch.autograd.grad(out["y"], (x64, w64), dy.double())
    return {**{k: v.detach() for k, v in out.items()}, "dx": dx, "dweight": dw}


def as_pairs(spec: torch.Tensor) -> torch.Tensor:
    """A kernel spectrum [R, modes, 1, H, 2] (real view) -> [R, 2K', H] rows (re, im) per mode."""
    return spec[:, :, 0].permute(0, 1, 3, 2).reshape(spec.shape[0], -1, spec.shape[3])


def kernel_stages(k, x, w, exact, transform: str) -> dict[str, float]:
    """Each stage of the Triton path alone (k: the kernels module), fed the exact input of that stage (cast
    as the kernels store it)."""
    R, S, H = x.shape
    K = w.shape[0]
    fft = transform == "fft"
    work = k.work_dtype(x.dtype)
    A, G = k.spectral_bases(S, K, work, x.device)
    planes = k.weight_planes(w, x.dtype)
    bf16 = k._bf16_operands(x.dtype)
    spec = k._spectrum(x[:, :, None, :], A, fft)
    got = {"analysis": emu.rel(as_pairs(spec)[:, :2 * K], exact["spectrum"])}
    exact_spec = exact["spectrum"].reshape(R, K, 2, H)
    if fft:  # the exact spectrum in rfft's layout (all S//2+1 modes; those >= K are not read)
        full = torch.zeros(R, S // 2 + 1, 1, H, 2, dtype=torch.float32, device=x.device)
        full[:, :K, 0] = exact_spec.permute(0, 1, 3, 2).float()
        mixed = torch.empty(R, S // 2 + 1, 1, H, 2, dtype=torch.float32, device=x.device)
        k._mix(full, planes, mixed, K, S, False, bf16)
    else:
        mixed4 = torch.empty(R, 2 * K, 1, H, dtype=work, device=x.device)
        k._mix(k.dft_spectrum_parts(exact_spec.reshape(R, 2 * K, 1, H).to(work)), planes,
               k.dft_spectrum_parts(mixed4), K, S, False, bf16)
        mixed = k.dft_spectrum_parts(mixed4)
    exact_mixed = exact["mixed"].clone().reshape(R, K, 2, H)
    exact_mixed[:, 0, 1] = 0  # the kernels zero the imaginary parts a real signal cannot have
    if S % 2 == 0 and K > S // 2:
        exact_mixed[:, S // 2, 1] = 0
    got["mixing"] = emu.rel(as_pairs(mixed)[:, :2 * K], exact_mixed.reshape(R, 2 * K, H))
    if fft:
        z = torch.zeros(R, S // 2 + 1, H, dtype=torch.complex64, device=x.device)
        z[:, :K] = torch.complex(exact_mixed[:, :, 0].float(), exact_mixed[:, :, 1].float())
        y = torch.fft.irfft(z, n=S, dim=1, norm="ortho")
    else:
        y = k._transform(G, exact_mixed.reshape(R, 2 * K, 1, H).to(work), torch.float32)[:, :, 0]
    got["synthesis"] = emu.rel(y, torch.einsum("sm,rmh->rsh", emu.bases(S, K, x.device)[1], exact_mixed.reshape(R, 2 * K, H)))
    return got


def whole_op(x, w, dy, exact, transform: str) -> dict[str, float]:
    from amg_fast.ops.spectral_conv import SpectralConv1dFn

    xg, wg = x.detach().requires_grad_(), w.detach().requires_grad_()
    y = SpectralConv1dFn.apply(xg, wg, transform)
    dx, dw = torch.autograd.grad(y, (xg, wg), dy.to(y.dtype))
    return {"y": emu.rel(y, exact["y"]), "dx": emu.rel(dx, exact["dx"]), "dweight": emu.rel(dw, exact["dweight"])}


def reference_check(x, w, exact) -> dict[str, float]:
    """The fp32 eager reference (masked irfft) and a plain irfft of the same mixed spectrum vs fp64."""
    from amg_fast.ops.spectral_conv import spectral_conv1d_ref

    S, K = x.shape[1], w.shape[0]
    xh = torch.fft.rfft(x.float(), dim=1, norm="ortho")[:, :K]
    yh = torch.einsum("rki,kio->rko", xh, torch.view_as_complex(w.float().contiguous()))
    plain = torch.fft.irfft(yh, n=S, dim=1, norm="ortho")
    return {"reference_fp32": emu.rel(spectral_conv1d_ref(x.float(), w.float()), exact["y"]),
            "plain_irfft_fp32": emu.rel(plain, exact["y"])}


def verdict(measured: dict[str, float], expected: dict[str, float]) -> str:
    bound = {"analysis": expected["spectrum"], "mixing": expected["mixed"]}
    bad = [stage for stage, err in measured.items()
           if err > max(3 * bound.get(stage, expected["y"]), 1e-6)]
    return "ok" if not bad else "CHECK " + ",".join(bad)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", type=int, nargs="+", default=[128, 1024, 32], help="S values (default 128 1024 32)")
    p.add_argument("--rows", type=int, nargs="+", default=[800, 8], help="rows R (default 800 8)")
    p.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES, help="precision modes")
    p.add_argument("--variants", nargs="+", default=VARIANTS, help=f"kernel variants (default {' '.join(VARIANTS)})")
    p.add_argument("--width", type=int, default=128, help="channels H (default 128)")
    p.add_argument("--json", help="write the rows to this JSON file")
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"],
                   help="cpu: a dry run in Triton's interpreter (TRITON_INTERPRET=1; small --sizes/--rows, no bf16)")
    args = p.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("error: this probe checks CUDA kernels and needs a GPU", file=sys.stderr)
        return 3
    if args.device == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
        print("error: --device cpu runs the kernels in Triton's interpreter: set TRITON_INTERPRET=1", file=sys.stderr)
        return 3
    from amg_fast.kernels import spectral_conv as k

    unknown = sorted(set(args.variants) - set(k.VARIANTS))
    if unknown:
        p.error(f"--variants: unknown {unknown}; known: {sorted(k.VARIANTS)}")
    dev = args.device
    g = torch.Generator(device=dev).manual_seed(0)
    rows, H = [], args.width
    for S in args.sizes:
        K = S // 2 + 1
        for R in args.rows:
            x32 = torch.randn(R, S, H, device=dev, generator=g)
            w32 = torch.randn(K, H, H, 2, device=dev, generator=g) / math.sqrt(H)
            dy = torch.randn(R, S, H, device=dev, generator=g)
            inputs = {"fp32": (x32, w32), "bf16": (x32.bfloat16(), w32.bfloat16())}
            exact = {name: exact_with_grads(x, w, dy.to(x.dtype)) for name, (x, w) in inputs.items()
                     if name == "fp32" or "bf16" in args.modes}
            ref = {"S": S, "R": R, **reference_check(x32, w32, exact["fp32"])}
            print(" ".join(f"{k}={v:.2e}" if isinstance(v, float) else f"{k}={v}" for k, v in ref.items()), flush=True)
            rows.append(ref)
            write_json(args.json, dev, rows)
            for mode in args.modes:
                x, w = inputs["bf16" if mode == "bf16" else "fp32"]
                ex = exact["bf16" if mode == "bf16" else "fp32"]
                n = min(R, EMULATED_ROWS)
                expected = {}  # per (transform, product form): the emulated errors of these inputs
                for name in args.variants:
                    transform, mix = k.VARIANTS[name][:2]
                    if (transform, mix) not in expected:
                        expected[transform, mix] = emu.expected_errors(x[:n].float(), w.float(), EMULATED[mode], mix,
                                                                       transform)
                    row = {"mode": mode, "S": S, "R": R, "variant": name}
                    with precision(mode), k.use_variant(name, reduced=mode != "tf32x3"):
                        try:
                            measured = {**kernel_stages(k, x, w, ex, transform), **whole_op(x, w, dy, ex, transform)}
                        except Exception as err:  # report and go on: one broken variant must not hide the rest
                            row["error"] = f"{type(err).__name__}: {str(err).strip().splitlines()[0][:200]}"
                            measured = None
                    if measured is not None:
                        row.update(measured)
                        row.update({f"expected_{stage}": err for stage, err in expected[transform, mix].items()})
                        row["verdict"] = verdict(measured, expected[transform, mix])
                    rows.append(row)
                    write_json(args.json, dev, rows)
                    print(" ".join(f"{k_}={v:.2e}" if isinstance(v, float) else f"{k_}={v}" for k_, v in row.items()),
                          flush=True)
    write_json(args.json, dev, rows)
    return 0


def write_json(path: str | None, dev: str, rows: list[dict]) -> None:
    """The rows so far to path, whole (temp file, then rename): a probe stopped by its time limit keeps them."""
    if path:
        from amg_fast._files import atomic_write_text

        gpu = torch.cuda.get_device_name(0) if dev == "cuda" else "cpu (interpreter)"
        atomic_write_text(path, json.dumps({"gpu": gpu, "torch": torch.__version__, "rows": rows}, indent=1))


if __name__ == "__main__":
    sys.exit(main())
