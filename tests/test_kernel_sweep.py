"""bench/kernel_sweep.py's feed-forward tile sweep (a GPU tool), run here in Triton's interpreter with a
stand-in timer: each configuration is what the row GEMMs launch with while it is timed, in each mode's
policy entry and TF32 setting; the best is the fastest; the policy and the TF32 setting come back."""
import copy

import pytest
import torch
from helpers import interpreter_only, load_bench, record_launches

from amg_fast.kernels import ffn_gemm

pytestmark = interpreter_only  # the sweeps run on CPU tensors here

SPACE = dict(BLOCK_M=[16, 32], BLOCK_N=[16], BLOCK_K=[16], num_warps=[4], num_stages=[2])


def test_ffn_gemm_sweep_times_each_config_in_each_mode_and_restores(capsys, allow_tf32):
    sweep = load_bench("kernel_sweep")
    allow_tf32(False)
    before = copy.deepcopy(ffn_gemm.LAUNCH_POLICY)
    seen, tiles = [], []
    real_tiles = ffn_gemm._tiles

    def spy(*args):  # the tiles each row GEMM launches with
        tiles.append(real_tiles(*args))
        return tiles[-1]

    def timer(run):
        tiles.clear()
        run()  # the step itself, on the kernels
        seen.append((torch.backends.cuda.matmul.allow_tf32, copy.deepcopy(ffn_gemm.LAUNCH_POLICY["cpu"]),
                     {t["BLOCK_M"] for t in tiles}))
        if not torch.backends.cuda.matmul.allow_tf32 and tiles[0]["BLOCK_M"] == 32:
            raise RuntimeError("out of resources")  # a config the compiler refuses: skipped
        return float(tiles[0]["BLOCK_M"])

    ffn_gemm._tiles = spy
    try:
        rows = sweep.sweep_ffn_gemm_configs((1,), width=16, rows_per_s=40, space=SPACE, device="cpu", timer=timer)
    finally:
        ffn_gemm._tiles = real_tiles
    assert [(r["mode"], r["config"]["BLOCK_M"], r["fwdbwd_ms"]) for r in rows] == [
        ("fp32", 16, 16.0), ("tf32", 16, 16.0), ("tf32", 32, 32.0)]
    # fp32 mode: the "x3" entry under TF32 off; tf32 mode: "default" under TF32 on (each config, then the
    # policy's own: on CPU "default" for both, 256-row tiles cut to the 40 rows' 64)
    assert [(tf32, policy["x3"]["BLOCK_M"], used) for tf32, policy, used in seen[:3]] == [
        (False, 16, {16}), (False, 32, {32}), (False, 256, {64})]
    assert [(tf32, policy["default"]["BLOCK_M"], used) for tf32, policy, used in seen[3:]] == [
        (True, 16, {16}), (True, 32, {32}), (True, 256, {64})]
    out = capsys.readouterr().out
    assert "S=1 fp32 {'BLOCK_M': 32" in out and "RuntimeError" in out
    assert "S=1 tf32: policy" in out and "-> best {'BLOCK_M': 16" in out
    assert ffn_gemm.LAUNCH_POLICY == before and torch.backends.cuda.matmul.allow_tf32 is False


def test_ffn_gemm_sweep_restores_policy_and_tf32_when_interrupted(allow_tf32):
    """An exception the sweep does not swallow (here a BaseException from the timer, as Ctrl-C) leaves the
    policy and the TF32 setting as they were: the config under test is not left in LAUNCH_POLICY."""
    sweep = load_bench("kernel_sweep")
    allow_tf32(False)
    before = copy.deepcopy(ffn_gemm.LAUNCH_POLICY)

    class Interrupted(BaseException):
        pass

    def timer(run):
        assert ffn_gemm.LAUNCH_POLICY["cpu"]["x3"]["BLOCK_M"] == 16  # the config under test is in place
        raise Interrupted

    with pytest.raises(Interrupted):
        sweep.sweep_ffn_gemm_configs((1,), width=16, rows_per_s=40, space=SPACE, device="cpu", timer=timer)
    assert ffn_gemm.LAUNCH_POLICY == before and torch.backends.cuda.matmul.allow_tf32 is False


def record_returns(monkeypatch, module, name: str) -> list:
    """Wraps module.name for the test: each call's result is appended to the list returned (the caller gets a
    copy of a dict result)."""
    real, returned = getattr(module, name), []

    def spy(*args, **kwargs):
        returned.append(real(*args, **kwargs))
        return dict(returned[-1]) if isinstance(returned[-1], dict) else returned[-1]

    monkeypatch.setattr(module, name, spy)
    return returned


def s4d_sweep_setup(monkeypatch, allow_tf32, policy: str, tiling: str):
    """(the kernel_sweep module, kernels.s4d_scan, a copy of its policy `policy`, the spied `tiling` results) for
    an S4D sweep test, TF32 off."""
    from amg_fast.kernels import s4d_scan

    allow_tf32(False)
    return (load_bench("kernel_sweep"), s4d_scan, copy.deepcopy(getattr(s4d_scan, policy)),
            record_returns(monkeypatch, s4d_scan, tiling))


def test_s4d_sweep_times_each_tiling_in_each_mode_and_restores(capsys, allow_tf32, monkeypatch):
    """The S4D Toeplitz tiling sweep: each configuration is TOEPLITZ_DOT_POLICY[device] while it is timed
    (the kernels launch with its BH, BN and grid), in fp32 mode and under TF32; the policy and the TF32
    setting come back."""
    sweep, s4d_scan, before, tilings = s4d_sweep_setup(monkeypatch, allow_tf32, "TOEPLITZ_DOT_POLICY", "_dot_tiling")
    seen = []

    def timer(run):
        tilings.clear()
        run()
        seen.append((torch.backends.cuda.matmul.allow_tf32, {(t["BH"], t["BN"], t["grid"][0]) for t in tilings}))
        return float(tilings[0]["BH"])

    space = dict(elements=[256, 512], BN=[16], num_warps=[4], programs=[2])
    rows = sweep.sweep_s4d_configs((4,), batch=2, T=4, width=8, n=2, space=space, device="cpu", timer=timer)
    assert [(r["mode"], r["config"]["elements"], r["fwdbwd_ms"]) for r in rows] == [
        ("fp32", 256, 1.0), ("fp32", 512, 2.0), ("tf32", 256, 1.0), ("tf32", 512, 2.0)]
    # T = 4 pads to 16: BH = elements / 256 channels; 8 columns (2 x 4) in groups of 16 -> 1 program; then the
    # policy's own (CPU: one program over all channels)
    assert [(tf32, used) for tf32, used in seen] == [
        (False, {(1, 16, 1)}), (False, {(2, 16, 1)}), (False, {(8, 64, 1)}),
        (True, {(1, 16, 1)}), (True, {(2, 16, 1)}), (True, {(8, 64, 1)})]
    assert "s4d-toeplitz S=4 tf32: policy" in capsys.readouterr().out
    assert s4d_scan.TOEPLITZ_DOT_POLICY == before and torch.backends.cuda.matmul.allow_tf32 is False


def test_main_writes_the_json_after_each_sweep(tmp_path, monkeypatch):
    """The command line (GPU only; its sweeps stubbed here): the JSON holds each finished sweep as soon as it
    ends, so a run stopped at a time limit keeps them; --quick narrows the S4D tiling space; the sweeps
    not asked for do not run."""
    import json

    sweep = load_bench("kernel_sweep")
    out = tmp_path / "sweep.json"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "stub GPU")
    calls = []

    def s4d_configs(sizes, space=None):
        calls.append(("s4d_configs", sizes, space))
        return [{"S": 128}]

    def s4d_method(lengths):
        saved = json.loads(out.read_text())  # each sweep written before the next
        assert saved["s4d_configs"] == [{"S": 128}]
        calls.append(("s4d_method", lengths, None))
        raise KeyboardInterrupt  # stopped here: the first sweep's results stay

    monkeypatch.setattr(sweep, "sweep_s4d_configs", s4d_configs)
    monkeypatch.setattr(sweep, "sweep_s4d", s4d_method)
    for name in ("sweep_spectral_transform", "sweep_spectral_configs", "sweep_ffn_gemm_configs", "sweep_gate_configs"):
        monkeypatch.setattr(sweep, name, lambda *a, **k: pytest.fail("a sweep not asked for ran"))
    with pytest.raises(KeyboardInterrupt):
        sweep.main(["--only", "s4d", "--quick", "--out", str(out)])
    assert calls[0] == ("s4d_configs", [128], sweep.S4D_TOEPLITZ_QUICK) and calls[1][0] == "s4d_method"
    saved = json.loads(out.read_text())
    assert saved["gpu"] == "stub GPU" and "s4d_method" not in saved


def test_gate_sweep_times_each_kernels_tiles_in_each_mode_and_restores(capsys, allow_tf32, monkeypatch):
    """The gate tiling sweep: each configuration is the swept kernel's policy entry while it is timed (its
    launch takes the entry's BLOCK_K / num_warps / programs, as on a GPU), the other
    kernels keep theirs, in fp32 mode (tf32x3 dots) and under TF32; both policies and TF32 come back."""
    from amg_fast.kernels import gate_fusion

    sweep = load_bench("kernel_sweep")
    allow_tf32(False)
    before = copy.deepcopy((gate_fusion.TILE_POLICY, gate_fusion.WGRAD_POLICY))
    launches, seen = [], []

    def timer(run):
        launches.clear()
        run()
        options = {name: kwargs for name, _, kwargs in launches}
        seen.append((torch.backends.cuda.matmul.allow_tf32, options))
        return float(options["_gate_fusion_fwd_kernel"].get("BLOCK_K", 0) + options["_gate_fusion_bwd_kernel"]
                     ["num_warps"])

    spaces = {"fwd": dict(BLOCK_M=[16], BLOCK_K=[32, 128], num_warps=[4], num_stages=[2]),
              "bwd_readout": dict(BLOCK_M=[16], BLOCK_K=[32], BLOCK_N=[16], num_warps=[4, 2], num_stages=[1]),
              "wgrad": dict(BLOCK_M=[16], BLOCK_O=[64], BLOCK_I=[64, 128], num_warps=[4], programs=[2])}
    record_launches(gate_fusion, launches, monkeypatch)
    monkeypatch.setattr(gate_fusion, "_on_cpu", lambda config, *args: config)  # the GPU's tiles as swept
    monkeypatch.setenv("AMG_FAST_GATE_X3", "dot")  # the sweep times the split weights' tiles whatever this says
    rows = sweep.sweep_gate_configs((1,), batch=1, T=2, width=128, spaces=spaces, device="cpu", timer=timer)
    assert [(r["kernel"], r["mode"], r["fwdbwd_ms"]) for r in rows] == [
        ("fwd", "fp32", 40.0), ("fwd", "fp32", 136.0), ("fwd", "tf32", 36.0), ("fwd", "tf32", 132.0),
        ("bwd_readout", "fp32", 36.0), ("bwd_readout", "fp32", 34.0),
        ("bwd_readout", "tf32", 36.0), ("bwd_readout", "tf32", 34.0),
        ("wgrad", "fp32", 40.0), ("wgrad", "fp32", 40.0), ("wgrad", "tf32", 40.0), ("wgrad", "tf32", 40.0)]
    # fwd: the plain gate, each BLOCK_K then the policy's (fp32 mode 32, TF32 64); its backward keeps the
    # policy's 8 warps in fp32 mode, 4 under TF32
    fwd = [(tf32, o["_gate_fusion_fwd_kernel"]["BLOCK_K"], o["_gate_fusion_fwd_kernel"]["READOUT"])
           for tf32, o in seen[:6]]
    assert fwd == [(False, 32, False), (False, 128, False), (False, 32, False),
                   (True, 32, False), (True, 128, False), (True, 64, False)]
    # bwd_readout: the memory gate's backward takes each num_warps, its forward keeps the policy's 8
    readout = [(o["_gate_fusion_bwd_kernel"]["num_warps"], o["_gate_fusion_bwd_kernel"]["BLOCK_N"],
                o["_gate_fusion_fwd_kernel"]["num_warps"], o["_gate_fusion_bwd_kernel"]["READOUT"])
               for _, o in seen[6:12]]
    assert readout == [(4, 16, 8, True), (2, 16, 8, True), (8, 32, 8, True)] * 2
    # wgrad: the weight-gradient kernel's BLOCK_I (the CPU policy's own 128 last)
    assert [o["_weight_grad_kernel"]["BLOCK_I"] for _, o in seen[12:]] == [64, 128, 128] * 2
    assert "gate-wgrad S=1 tf32: policy" in capsys.readouterr().out
    assert (gate_fusion.TILE_POLICY, gate_fusion.WGRAD_POLICY) == before
    assert torch.backends.cuda.matmul.allow_tf32 is False


def test_spectral_sweep_times_each_kernels_tiles_in_each_mode_and_restores(capsys, allow_tf32, monkeypatch):
    """The spectral conv's tile sweep: each configuration is the swept kernel's policy entry while it is timed
    (its launches take it; the other kernels keep the policy's), in fp32 mode (tf32x3 dots: "x3"; the mixing on
    W's split planes, three TF32 dots a product: "x3split") and under
    TF32 ("tf32", where the policy's own is "default"), on our Triton kernels with reduced-precision dots
    whatever the switches say (AMG_FAST_SPECTRAL_MIX=torch would launch no mixing kernel,
    _REDUCED_DOTS=0 tf32x3 dots under TF32); the policy, the switches and TF32 come back."""
    from amg_fast.kernels import spectral_conv

    sweep = load_bench("kernel_sweep")
    allow_tf32(False)
    before = copy.deepcopy(spectral_conv.LAUNCH_POLICY)
    launches, seen = [], []

    def timer(run):
        launches.clear()
        run()
        seen.append((torch.backends.cuda.matmul.allow_tf32,  # (kernel: "mix" of _spectral_conv1d_mix_kernel, ...)
                     sorted({(name.split("_")[-2], kw["DOT_PRECISION"], kw["num_warps"]) for name, _, kw in launches
                             if name != "_mix_weight_planes_kernel"})))  # fp32 mode's split W planes: no dots
        return float(len(seen))

    def tiles(warps):
        return dict(BLOCK_R=16, BLOCK_I=16, BLOCK_O=16, num_warps=warps)

    policy = {"transform": {"default": dict(BLOCK_M=16, BLOCK_J=16, BLOCK_N=16, num_warps=4, X_LEFT=True)},
              "mix": {"default": tiles(8), "x3": tiles(2), "x3split": tiles(4)},
              "dweight": {"default": dict(tiles(8), SPLIT_R=1), "x3": dict(tiles(2), SPLIT_R=1)}}
    spaces = {"mix": dict(BLOCK_R=[16], BLOCK_I=[16], BLOCK_O=[16], num_warps=[1]),
              "dweight": dict(BLOCK_R=[16], BLOCK_I=[16], BLOCK_O=[16], SPLIT_R=[1, 2], num_warps=[1])}
    record_launches(spectral_conv, launches, monkeypatch)
    monkeypatch.setitem(spectral_conv.LAUNCH_POLICY, "cpu", copy.deepcopy(policy))
    monkeypatch.setattr(spectral_conv, "MIX_METHOD", "torch")
    monkeypatch.setattr(spectral_conv, "REDUCED_PRECISION_DOTS", False)
    rows = sweep.sweep_spectral_configs((8,), rows=3, width=16, spaces=spaces, device="cpu", timer=timer)
    assert [(r["kernel"], r["mode"], r["config"].get("SPLIT_R")) for r in rows] == [
        ("mix", "fp32", None), ("mix", "tf32", None),
        ("dweight", "fp32", 1), ("dweight", "fp32", 2), ("dweight", "tf32", 1), ("dweight", "tf32", 2)]
    # mix: its config (1 warp), then the policy's own ("x3split": 4 warps; under TF32 "default": 8), the
    # transform's and the dweight's kept; fp32 mode at tf32x3 dots (the split mixing: plain TF32 dots, three a
    # product), TF32 at plain tf32
    x3 = "tf32x3"
    assert seen[:4] == [
        (False, [("dweight", x3, 2), ("mix", "tf32", 1), ("transform", x3, 4)]),
        (False, [("dweight", x3, 2), ("mix", "tf32", 4), ("transform", x3, 4)]),
        (True, [("dweight", "tf32", 8), ("mix", "tf32", 1), ("transform", "tf32", 4)]),
        (True, [("dweight", "tf32", 8), ("mix", "tf32", 8), ("transform", "tf32", 4)])]
    assert [sorted(w for name, _, w in used if name == "dweight") for _, used in seen[4:]] == [
        [1], [1], [2], [1], [1], [8]]
    out = capsys.readouterr().out
    assert "spectral-dweight S=8 tf32: policy" in out and "spectral-mix S=8 fp32: policy" in out
    assert spectral_conv.LAUNCH_POLICY["cpu"] == policy and torch.backends.cuda.matmul.allow_tf32 is False
    assert (spectral_conv.MIX_METHOD, spectral_conv.REDUCED_PRECISION_DOTS) == ("torch", False)
    monkeypatch.undo()
    assert spectral_conv.LAUNCH_POLICY == before


def test_transform_sweep_times_both_paths_in_each_mode_and_restores(capsys, allow_tf32):
    """The transform crossover sweep: "dft", "fft" and the reference, forward and fwd + bwd, for each S in fp32
    mode (TF32 off) and under TF32, each run under its mode's setting; the setting comes back, also when the
    timer is interrupted."""
    sweep = load_bench("kernel_sweep")
    allow_tf32(False)
    seen = []

    def timer(run):
        run()
        seen.append(torch.backends.cuda.matmul.allow_tf32)
        return float(len(seen))

    rows = sweep.sweep_spectral_transform([8, 16], rows=3, width=4, device="cpu", timer=timer)
    assert [(r["S"], r["mode"]) for r in rows] == [(8, "fp32"), (8, "tf32"), (16, "fp32"), (16, "tf32")]
    assert all(set(r) == {"S", "mode"} | {f"{p}_{t}_ms" for p in ("reference", "dft", "fft") for t in ("fwd", "fwdbwd")}
               for r in rows)
    assert seen == ([False] * 6 + [True] * 6) * 2 and torch.backends.cuda.matmul.allow_tf32 is False
    assert "S=16 mode=tf32 reference_fwd_ms=" in capsys.readouterr().out

    def interrupted(run):
        raise KeyboardInterrupt

    allow_tf32(False)
    with pytest.raises(KeyboardInterrupt):
        sweep.sweep_spectral_transform([8], rows=3, width=4, modes={"tf32": True}, device="cpu", timer=interrupted)
    assert torch.backends.cuda.matmul.allow_tf32 is False


def test_quick_ffn_sweep_times_the_bench_size_then_the_runs(tmp_path, monkeypatch):
    """--only ffn --quick: the row GEMMs' quick space in fp32 mode at S = 128 (the bench's targets) first, then at
    S = 32 (issue 21's runs), in one sweep written to the JSON."""
    import json

    sweep = load_bench("kernel_sweep")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "stub GPU")
    calls = []
    monkeypatch.setattr(sweep, "sweep_ffn_gemm_configs",
                        lambda sizes, space=None, modes=None: calls.append((sizes, space, modes)) or [{"S": 128}])
    out = tmp_path / "sweep.json"
    assert sweep.main(["--only", "ffn", "--quick", "--out", str(out)]) == 0
    assert calls == [([128, 32], sweep.FFN_GEMM_QUICK, sweep.FFN_GEMM_QUICK_MODES)]
    assert json.loads(out.read_text())["ffn_gemm_configs"] == [{"S": 128}]
