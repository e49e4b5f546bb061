"""Time kernel launch configurations and method crossovers on a GPU (CUDA only).

Prints one table per sweep (median ms by triton.testing.do_bench) and writes them as JSON:
  - spectral conv: transform "dft" (basis GEMM) vs "fft" (torch.fft) per S, in fp32 mode and under TF32 ->
    TRANSFORM_FFT_MIN_S (and a mode's own: TRANSFORM_FFT_MIN_S_BY_MODE),
    and the tiles of its three kernels at the paper's shapes in fp32 mode (tf32x3 dots) and under TF32 ->
    kernels.spectral_conv.LAUNCH_POLICY["cuda"];
  - S4D: the Toeplitz kernels' tiling at T = 25 in fp32 mode and under TF32 -> kernels.s4d_scan.
    TOEPLITZ_DOT_POLICY["cuda"] (the op was 11x its HBM floor on the H200), then "toeplitz" vs "scan" per T
    -> TOEPLITZ_MAX_T;
  - the feed-forward's row GEMMs (method="gemm"): tile configurations in fp32 mode (3xTF32, the
    policy's "x3" entry) and under TF32 ("default"; --quick: fp32 mode only, each tiling also as persistent
    programs) -> kernels.ffn_gemm.LAUNCH_POLICY["cuda"];
  - the gate: its four kernels' tiles at H = 128 in fp32 mode (tf32x3 dots) and under TF32 ->
    kernels.gate_fusion.TILE_POLICY, and the weight-gradient kernel's -> WGRAD_POLICY["cuda"].
Usage: python bench/kernel_sweep.py [--out sweep.json] [--quick] [--only spectral|configs|s4d|ffn|gate ...]
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
from unittest import mock

import torch

from amg_fast._files import atomic_write_text


def bench(fn) -> float:
    import triton.testing

    return float(triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median"))


def fwd_bwd(fn, *inputs):
    def run():
        out = fn(*inputs)
        out = out[0] if isinstance(out, tuple) else out
        out.backward(torch.ones_like(out))
    return run


def time_configs(space: dict, apply, run, label: str, timer=None, keep=lambda cfg: True) -> list[tuple[dict, float]]:
    """[(config, ms)] for each configuration of space (name -> values) that keep() accepts: apply(config),
    then timer(run) (default bench); one that raises (a config the compiler refuses, e.g. out of shared
    memory) is printed after label and skipped."""
    timed = []
    for values in itertools.product(*space.values()):
        cfg = dict(zip(space, values))
        if not keep(cfg):
            continue
        apply(cfg)
        try:
            timed.append((cfg, (timer or bench)(run)))
        except Exception as exc:  # noqa: BLE001 (reported, the sweep goes on)
            print(f"{label} {cfg}: {type(exc).__name__}", flush=True)
    return timed


TRANSFORM_MODES = {"fp32": False, "tf32": True}  # mode -> TF32 allowed: each has its own crossover


def sweep_spectral_transform(sizes, rows=800, width=128, modes=None, device="cuda", timer=None):
    """The spectral conv's "dft" and "fft" paths (and the reference) per S of sizes and precision mode of modes
    (mode -> TF32 allowed; default TRANSFORM_MODES), forward alone and fwd + bwd at K = S/2 modes ->
    [{"S", "mode", "<path>_fwd_ms", "<path>_fwdbwd_ms"}]: each mode's crossover, TRANSFORM_FFT_MIN_S(_BY_MODE).
    The TF32 setting is restored after, also when interrupted."""
    from amg_fast.ops.spectral_conv import SpectralConv1dFn, spectral_conv1d_ref

    timer = timer or bench
    allowed, out = torch.backends.cuda.matmul.allow_tf32, []
    try:
        for S, (mode, tf32) in itertools.product(sizes, (modes or TRANSFORM_MODES).items()):
            torch.backends.cuda.matmul.allow_tf32 = tf32
            x = torch.randn(rows, S, width, device=device, requires_grad=True)
            w = torch.randn(S // 2, width, width, 2, device=device, requires_grad=True)
            row = {"S": S, "mode": mode}
            for name, fn in (("reference", lambda a, b: spectral_conv1d_ref(a, b)),
                             ("dft", lambda a, b: SpectralConv1dFn.apply(a, b, "dft")),
                             ("fft", lambda a, b: SpectralConv1dFn.apply(a, b, "fft"))):
                with torch.no_grad():
                    row[f"{name}_fwd_ms"] = timer(lambda: fn(x, w))
                row[f"{name}_fwdbwd_ms"] = timer(fwd_bwd(fn, x, w))
            out.append(row)
            print(" ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()),
                  flush=True)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = allowed
    return out


# The spectral conv's three kernels (kernels.spectral_conv.LAUNCH_POLICY[device][kernel][mode]: "x3" in fp32 mode,
# tf32x3 dots, "x3split" for the mixing on split W planes; "tf32" under TF32, where the policy's "default" serves
# until a sweep's winner is put there), each
# kernel's space timed with the others at their policy's tiles. bf16 takes "default" too (not swept: bf16
# activations). The mixing's BLOCK_O = 64 reads each X tile twice, the second time from L2 (the grid runs a row
# tile's output tiles next to each other).
SPECTRAL_SPACE = {
    "transform": dict(BLOCK_M=[64, 128], BLOCK_J=[16, 32, 64], BLOCK_N=[64, 128], num_warps=[4, 8],
                      num_stages=[2, 3], X_LEFT=[True, False]),
    "mix": dict(BLOCK_R=[32, 64, 128], BLOCK_I=[16, 32, 64], BLOCK_O=[64, 128], num_warps=[4, 8]),
    "dweight": dict(BLOCK_R=[16, 32, 64], BLOCK_I=[32, 64, 128], BLOCK_O=[64, 128], SPLIT_R=[1, 4], num_warps=[4, 8]),
}
SPECTRAL_QUICK = {  # --quick: 28 configurations a mode
    "transform": dict(BLOCK_M=[64, 128], BLOCK_J=[32], BLOCK_N=[64, 128], num_warps=[8], num_stages=[2, 3],
                      X_LEFT=[True, False]),
    "mix": dict(BLOCK_R=[64, 128], BLOCK_I=[16, 32], BLOCK_O=[64, 128], num_warps=[8]),
    "dweight": dict(BLOCK_R=[16, 32], BLOCK_I=[64], BLOCK_O=[64, 128], SPLIT_R=[1], num_warps=[4, 8]),
}


def spectral_fp32_entry(kernel: str) -> str:
    """The LAUNCH_POLICY entry a spectral kernel takes in fp32 mode: "x3split" for the mixing on W's split planes
    (AMG_FAST_SPECTRAL_X3=split, the default), else "x3"."""
    from amg_fast.kernels import spectral_conv as kernels

    return "x3split" if kernel == "mix" and kernels._x3_method() == "split" else "x3"


def sweep_spectral_configs(sizes, rows=800, width=128, spaces=None, device="cuda", timer=None):
    """The spectral conv's fwd + bwd (x [rows, S, width], K = S/2, transform "dft") under each tile configuration
    of spaces (kernel -> space; default SPECTRAL_SPACE) as that kernel's policy entry, in fp32 mode (tf32x3
    dots, "x3") and under TF32 ("tf32"; the policy's "default" its own) (sweep_policy_entries) -> rows tagged
    with "kernel". Timed on the "dft-gauss" variant with reduced-precision dots, whatever the switches say
    (AMG_FAST_SPECTRAL_MIX=torch would time cuBLAS, _REDUCED_DOTS=0 tf32x3 dots under TF32)."""
    from amg_fast.kernels import spectral_conv as kernels
    from amg_fast.ops.spectral_conv import SpectralConv1dFn

    def make_run(S):
        x = torch.randn(rows, S, width, device=device, requires_grad=True)
        w = (torch.randn(S // 2, width, width, 2, device=device) * width ** -0.5).requires_grad_()
        step = fwd_bwd(lambda a, b: SpectralConv1dFn.apply(a, b, "dft"), x, w)

        def run():
            with kernels.use_variant("dft-gauss", reduced=True):
                step()
        return run

    policy = kernels.LAUNCH_POLICY[torch.device(device).type]
    results = []
    for kernel, space in (spaces or SPECTRAL_SPACE).items():
        fp32_entry = spectral_fp32_entry(kernel)
        timed = sweep_policy_entries(policy[kernel], {"fp32": (fp32_entry, False), "tf32": ("tf32", True)}, space,
                                     sizes, make_run, f"spectral-{kernel}", timer, fallback="default")
        results += [dict(row, kernel=kernel) for row in timed]
    return results


def sweep_s4d(lengths, batch=32, S=128, width=128, n=32):
    from amg_fast.ops import s4d_scan_ref
    from amg_fast.ops import s4d_scan as s4d_mod

    out = []
    mag = torch.empty(width, n, device="cuda").uniform_(0.5, 0.99)
    phase = torch.empty(width, n, device="cuda").uniform_(0, 3.14)
    lam = torch.stack([mag * torch.cos(phase), mag * torch.sin(phase)], -1).requires_grad_()
    c = torch.randn(width, n, 2, device="cuda", requires_grad=True)
    d = torch.randn(width, device="cuda", requires_grad=True)
    for T in lengths:
        b = max(1, batch * 25 // T)
        u = torch.randn(b, T, S, width, device="cuda", requires_grad=True)
        row = {"T": T, "B": b}
        for name, fn in (("reference", lambda *a: s4d_scan_ref(*a)),
                         ("toeplitz", lambda *a: s4d_mod(*a, backend="triton", method="toeplitz")),
                         ("scan", lambda *a: s4d_mod(*a, backend="triton", method="scan"))):
            with torch.no_grad():
                row[f"{name}_fwd_ms"] = bench(lambda: fn(u, lam, c, d))
            row[f"{name}_fwdbwd_ms"] = bench(fwd_bwd(fn, u, lam, c, d))
        out.append(row)
        print(" ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()), flush=True)
    return out


FFN_GEMM_SPACE = dict(BLOCK_M=[64, 128], BLOCK_N=[64, 128], BLOCK_K=[32, 64], num_warps=[4, 8], num_stages=[2, 3, 4])
FFN_GEMM_MODES = {"fp32": ("x3", False), "tf32": ("default", True)}  # mode -> (policy entry, TF32 allowed)
# --quick: fp32 mode only (the row GEMMs are its default; TF32 and bf16 run the cuBLASLt epilogue), 32-deep K steps
# (at 64 the x3 tiles' 2 B planes and A leave room for 2 stages at most), 2 or 3 stages (4 with 128 x 128 tiles as
# persistent programs needs 240 KB of shared memory, over an H100's 227), each tiling also as persistent programs
# (LAUNCH_POLICY's "persistent"): 16 tilings, about 4 row-GEMM compilations each; all compile for sm_90 without
# spills (bench/compile_sm90.py --ops ffn_tiles --quick).
FFN_GEMM_QUICK = dict(BLOCK_M=[64, 128], BLOCK_N=[64, 128], BLOCK_K=[32], num_warps=[8], num_stages=[2, 3],
                      persistent=[False, True])
FFN_GEMM_QUICK_MODES = {"fp32": FFN_GEMM_MODES["fp32"]}
# The S4D Toeplitz kernels' tiling (kernels.s4d_scan.TOEPLITZ_DOT_POLICY): "elements" bounds a program's
# [BH, T_PAD, max(T_PAD, BN)] tile, so at T = 25 (T_PAD 32) it sets BH = elements / 1024 channels for BN <= 32
# (2..8) and elements / 2048 for BN = 64 (1..4): 4..32 contiguous bytes a row in fp32; BN columns a dot,
# "programs" the grid the column groups fill. 16384 elements is left out: its GELU backward needs 256-480 KB of
# shared memory in fp32 and TF32, more than an H100's 227 KB (bench/compile_sm90.py --ops s4d_tiles).
# channels_first: the grid's order (TOEPLITZ_DOT_POLICY's comment).
S4D_TOEPLITZ_SPACE = dict(elements=[2048, 4096, 8192], BN=[16, 32, 64], num_warps=[4, 8], programs=[512, 1024, 2048],
                          channels_first=[False, True])
S4D_TOEPLITZ_QUICK = dict(S4D_TOEPLITZ_SPACE, num_warps=[8], programs=[1024])  # --quick: 18 tilings a mode


def sweep_policy_entries(container: dict, entries: dict, space: dict, sizes, make_run, label: str, timer=None,
                         fallback: str | None = None) -> list[dict]:
    """For each S of sizes and each mode of entries (mode -> (key, TF32 allowed)): every configuration of
    space timed as container[key] (the launch policy entry the kernels read at launch) under that TF32
    setting, on make_run(S)'s fwd + bwd; then the policy's own (container[key], or container[fallback]
    where the kernels fall back to it for a missing key); the container and the TF32 setting restored
    after, also when interrupted. -> [{"S", "mode", "config", "fwdbwd_ms"}]; a configuration the compiler
    refuses is printed and skipped; each mode's best printed beside the policy's own."""
    timer = timer or bench
    saved, allowed = dict(container), torch.backends.cuda.matmul.allow_tf32
    results = []
    try:
        for S, (mode, (key, tf32)) in itertools.product(sizes, entries.items()):
            torch.backends.cuda.matmul.allow_tf32 = tf32
            run = make_run(S)
            default = dict(saved[key] if key in saved else saved[fallback])
            timed = time_configs(space, lambda cfg, key=key: container.__setitem__(key, cfg), run,
                                 f"{label} S={S} {mode}", timer)
            results += [{"S": S, "mode": mode, "config": cfg, "fwdbwd_ms": t} for cfg, t in timed]
            container[key] = default
            if timed:
                fastest, ms = min(timed, key=lambda c: c[1])
                print(f"{label} S={S} {mode}: policy {default} ({timer(run):.4g} ms) -> best {fastest} at "
                      f"{ms:.4g} ms", flush=True)
    finally:
        container.clear()
        container.update(saved)
        torch.backends.cuda.matmul.allow_tf32 = allowed
    return results


def sweep_ffn_gemm_configs(sizes, width=128, rows_per_s=800, space=None, device="cuda", timer=None, modes=None):
    """feed_forward(method="gemm") fwd + bwd (x [rows_per_s * S, width], F = 4 width, the residual on) under
    each tile configuration of space (default FFN_GEMM_SPACE) as kernels.ffn_gemm.LAUNCH_POLICY[device]'s
    entry for the mode (modes, default FFN_GEMM_MODES), every row GEMM of the step taking it
    (sweep_policy_entries)."""
    from amg_fast.kernels import ffn_gemm
    from amg_fast.ops.ffn import feed_forward

    policy = ffn_gemm.LAUNCH_POLICY[device]

    def make_run(S):
        x = torch.randn(rows_per_s * S, width, device=device, requires_grad=True)
        weights = [(torch.randn(*shape, device=device) / width ** 0.5).requires_grad_()
                   for shape in ((4 * width, width), (4 * width,), (width, 4 * width), (width,))]
        return fwd_bwd(lambda *a: feed_forward(*a, residual=a[0], backend="triton", method="gemm"), x, *weights)

    return sweep_policy_entries(policy, modes or FFN_GEMM_MODES, space or FFN_GEMM_SPACE, sizes, make_run, "ffn-gemm",
                                timer, fallback="default")


def sweep_s4d_configs(sizes, batch=32, T=25, width=128, n=32, space=None, device="cuda", timer=None):
    """s4d_scan(method="toeplitz", activation="gelu") fwd + bwd (the AMGFNO memory's op: u [batch, T, S, width],
    n poles) under each tiling of space (default S4D_TOEPLITZ_SPACE) as kernels.s4d_scan.TOEPLITZ_DOT_POLICY[device]
    (the batched dots), in fp32 mode and under TF32 (sweep_policy_entries)."""
    from amg_fast.kernels import s4d_scan as kernels
    from amg_fast.ops import s4d_scan

    mag = torch.empty(width, n, device=device).uniform_(0.5, 0.99)
    phase = torch.empty(width, n, device=device).uniform_(0, 3.14)
    params = [torch.stack([mag * torch.cos(phase), mag * torch.sin(phase)], -1).requires_grad_(),
              torch.randn(width, n, 2, device=device, requires_grad=True),
              torch.randn(width, device=device, requires_grad=True)]

    def make_run(S):
        u = torch.randn(batch, T, S, width, device=device, requires_grad=True)
        return fwd_bwd(lambda *a: s4d_scan(*a, backend="triton", method="toeplitz", activation="gelu"), u, *params)

    key = torch.device(device).type  # the kernels look their policy up by device type ("cuda:0" -> "cuda")
    entries = {"fp32": (key, False), "tf32": (key, True)}
    return sweep_policy_entries(kernels.TOEPLITZ_DOT_POLICY, entries, space or S4D_TOEPLITZ_SPACE, sizes, make_run,
                                "s4d-toeplitz", timer)


# The gate's kernels (kernels.gate_fusion.TILE_POLICY[kernel][mode] at H = 128, the weight gradients'
# WGRAD_POLICY), each kernel's space timed with the others at their policy's tiles. "fwd" / "bwd": the
# plain gate (op gate_fusion_freq); "*_readout" and "wgrad": AMGFNO's memory gate with the readout folded
# in (memory_gate_freq; BLOCK_K there is also the chunk of z's columns formed at a time). WGRAD_POLICY["cuda"]
# is one entry for every mode, and the feed-forward's row-GEMM path (method "gemm") takes its weight gradients
# from the same kernel: a winner there is checked with --only ffn too, and one that differs by mode needs the
# policy split by mode first. 128-row weight-gradient tiles mostly need more than an H100's 227 KB of shared
# memory (bench/compile_sm90.py --ops gate_tiles): only the full space tries them.
GATE_SPACE = {
    "fwd": dict(BLOCK_M=[32, 64, 128], BLOCK_K=[32, 64, 128], num_warps=[4, 8], num_stages=[1, 2]),
    "bwd": dict(BLOCK_M=[16, 32, 64], BLOCK_K=[32, 64], BLOCK_N=[16, 32, 64], num_warps=[4, 8], num_stages=[1, 2]),
    "fwd_readout": dict(BLOCK_M=[32, 64, 128], BLOCK_K=[16, 32, 64], num_warps=[4, 8], num_stages=[1, 2]),
    "bwd_readout": dict(BLOCK_M=[32, 64], BLOCK_K=[16, 32, 64], BLOCK_N=[16, 32], num_warps=[4, 8],
                        num_stages=[1, 2]),
    "wgrad": dict(BLOCK_M=[32, 64, 128], BLOCK_O=[64, 128], BLOCK_I=[64, 128], num_warps=[4, 8],
                  programs=[256, 512, 1024]),
}
GATE_QUICK = {  # --quick: 38 configurations a mode (the memory gate's at 8 warps, its defaults', 1 and 2 stages)
    "fwd": dict(BLOCK_M=[32, 64], BLOCK_K=[32, 64], num_warps=[4, 8], num_stages=[2]),
    "bwd": dict(BLOCK_M=[16, 32], BLOCK_K=[32, 64], BLOCK_N=[32], num_warps=[4, 8], num_stages=[2]),
    "fwd_readout": dict(BLOCK_M=[32, 64, 128], BLOCK_K=[32], num_warps=[8], num_stages=[1, 2]),
    "bwd_readout": dict(BLOCK_M=[32, 64], BLOCK_K=[16, 32], BLOCK_N=[32], num_warps=[8], num_stages=[1, 2]),
    "wgrad": dict(BLOCK_M=[32, 64], BLOCK_O=[64, 128], BLOCK_I=[64, 128], num_warps=[4], programs=[512]),
}


def sweep_gate_configs(sizes, batch=32, T=25, width=128, spaces=None, device="cuda", timer=None):
    """The gate's fwd + bwd (h, z [batch, T, S, width], the frequency gate on, as AMGFNO) under each tile
    configuration of spaces (kernel -> space; default GATE_SPACE) as that kernel's policy entry, in fp32
    mode (tf32x3 dots) and under TF32 (sweep_policy_entries) -> rows tagged with "kernel". fp32 mode on the
    split weights, whatever AMG_FAST_GATE_X3 says (its "dot" takes TILE_POLICY's "fp32-dot" entries, which
    the sweep does not set)."""
    from amg_fast.kernels import gate_fusion as kernels
    from amg_fast.ops.gate import gate_fusion_freq
    from amg_fast.ops.readout_gate import memory_gate_freq

    def param(*shape):
        return (torch.randn(shape, device=device) * width ** -0.5).requires_grad_()

    gate = [param(width, width), param(width, width), param(width)]
    freq = [torch.tensor(0.0, device=device), param(), param()]  # log(omega + eps) 0-dim, w1, b_omega
    readout = [param(2 * width, width), param(2 * width)]

    def make_run(with_readout: bool):
        def make(S):
            h, z = (torch.randn(batch, T, S, width, device=device, requires_grad=True) for _ in range(2))
            if with_readout:
                return fwd_bwd(lambda h_, a: memory_gate_freq(h_, a, *readout, *gate, *freq, backend="triton"), h, z)
            return fwd_bwd(lambda h_, z_: gate_fusion_freq(h_, z_, *gate, *freq, backend="triton"), h, z)
        return make

    key = torch.device(device).type  # WGRAD_POLICY is looked up by device type
    results = []
    with mock.patch.dict(os.environ, {"AMG_FAST_GATE_X3": "split"}):
        for kernel, space in (spaces or GATE_SPACE).items():
            if kernel == "wgrad":
                container, entries = kernels.WGRAD_POLICY, {"fp32": (key, False), "tf32": (key, True)}
            else:
                container, entries = kernels.TILE_POLICY[kernel], {"fp32": ("fp32", False), "tf32": ("tf32", True)}
            rows = sweep_policy_entries(container, entries, space, sizes, make_run(kernel not in ("fwd", "bwd")),
                                        f"gate-{kernel}", timer)
            results += [dict(row, kernel=kernel) for row in rows]
    return results


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="kernel_sweep.json", help="JSON file for the results")
    p.add_argument("--quick", action="store_true", help="fewer sizes and configurations")
    p.add_argument("--only", choices=["spectral", "configs", "s4d", "ffn", "gate"], action="append",
                   help="run only these sweeps (repeatable; default all)")
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("kernel_sweep.py needs a CUDA GPU", file=sys.stderr)
        return 2
    only = set(args.only or ["spectral", "configs", "s4d", "ffn", "gate"])
    res = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__}
    import triton

    res["triton"] = triton.__version__
    quick = args.quick
    sweeps = {  # key in the JSON -> the sweep; written after each, so a run stopped at a time limit keeps its part
        "spectral_transform": ("spectral", lambda: sweep_spectral_transform([32, 64, 128, 256, 512, 1024])),
        "s4d_configs": ("s4d", lambda: sweep_s4d_configs([128] if quick else [32, 128],
                                                         space=S4D_TOEPLITZ_QUICK if quick else None)),
        "s4d_method": ("s4d", lambda: sweep_s4d([25, 50, 100, 200] if quick else [25, 50, 100, 200, 400, 1000])),
        "spectral_configs": ("configs", lambda: sweep_spectral_configs([128] if quick else [32, 128, 1024],
                                                                       spaces=SPECTRAL_QUICK if quick else None)),
        # --quick: S = 128 first (the bench's targets), then 32 (issue 21's runs; the same kernels: timing only)
        "ffn_gemm_configs": ("ffn", lambda: sweep_ffn_gemm_configs([128, 32] if quick else [32, 128],
                                                                   space=FFN_GEMM_QUICK if quick else None,
                                                                   modes=FFN_GEMM_QUICK_MODES if quick else None)),
        "gate_configs": ("gate", lambda: sweep_gate_configs([128] if quick else [32, 128],
                                                            spaces=GATE_QUICK if quick else None)),
    }
    for key, (name, sweep) in sweeps.items():
        if name in only:
            res[key] = sweep()
            atomic_write_text(args.out, json.dumps(res, indent=1))
            print(f"wrote {args.out} ({key})", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
