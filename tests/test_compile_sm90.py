"""What a GPU compiles that Triton's interpreter does not check (bench/compile_sm90.py).

- Every tl.dot names its out_dtype and input_precision: triton 3.6 (the GPU machines') defaults
  out_dtype to float32 and asserts that an accumulator passed to tl.dot has that dtype, so an fp64
  dot without it fails to compile there (the spectral kernels did, 2026-11-27), while triton 3.9 and
  its interpreter infer it from the accumulator. Without input_precision a GPU rounds fp32 dots to
  TF32 where the interpreter multiplies exactly.
- The compile harness reaches every kernel: each launcher runs on meta tensors at the paper's shapes
  in every precision mode, and every @triton.jit kernel of kernels/ is launched by some case, with
  grid axes 1 and 2 within CUDA's 65535.
- The tiling cases (--ops gate_tiles / s4d_tiles / spectral_tiles) compile exactly what the GPU sweeps would time.
"""
import ast
import itertools
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
KERNELS = sorted((ROOT / "kernels").glob("*.py"))
SCRIPT = ROOT / "bench" / "compile_sm90.py"


def _load_harness():
    spec = importlib.util.spec_from_file_location("compile_sm90", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass resolves annotations through sys.modules
    spec.loader.exec_module(module)
    return module


def _dot_calls(path: Path):
    """(line, keyword names) of every tl.dot(...) call in a kernels/ file."""
    for node in ast.walk(ast.parse(path.read_text())):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "dot"
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "tl"):
            yield node.lineno, {kw.arg for kw in node.keywords}


def test_every_dot_names_its_out_dtype_and_input_precision():
    calls = [(path.name, line, kws) for path in KERNELS for line, kws in _dot_calls(path)]
    assert len(calls) >= 12  # the scan finds the kernels' dots (15 on 2026-11-29)
    missing = [f"{name}:{line} lacks {sorted({'out_dtype', 'input_precision'} - kws)}"
               for name, line, kws in calls if not {"out_dtype", "input_precision"} <= kws]
    assert not missing, "\n".join(missing)


def test_the_harness_launches_every_kernel_within_grid_limits():
    harness = _load_harness()
    launches, errors = harness.capture(sorted(harness.CASES), quick=True)
    assert not errors, errors
    launched = {launch.fn.fn.__name__ if hasattr(launch.fn, "fn") else launch.fn.__name__ for launch in launches}
    launchers = [path for path in KERNELS if path.name != "_common.py"]  # _common defines wrap_triton
    launchable = {node.args[0].id for path in launchers for node in ast.walk(ast.parse(path.read_text()))
                  if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None))
                  == "wrap_triton" and isinstance(node.args[0], ast.Name)}  # what the launchers launch
    assert len(launchable) >= 20
    assert launchable - launched == set(), "kernels no compile case launches"
    too_wide = [(launch.case, launch.grid) for launch in launches
                if any(n > harness.GRID_YZ_LIMIT for n in launch.grid[1:])]
    assert not too_wide


def test_loops_prefetch_their_tiles_on_sm90():
    """The forward kernels whose loops stream activations prefetch them (cp.async in their SASS, compiled for
    sm_90 with the Triton installed here) in fp32 mode and under TF32: the memory gate (its former num_stages 1
    fails this: checked by mutation), the encoder and the decoder (their former plain range loop, without a
    dot, fails it), the S4D Toeplitz dots. The last guards less than it says: triton 3.9 (CI's) also prefetches
    the dots' former form, with d u beside the dot, where triton 3.6 (the GPU machines') did not (bench/
    compile_sm90.py run with 3.6, docs/kernels.md). bf16's S4D dots convert u in registers: not prefetched.
    The memory gate with its fp32 dots on split weights (AMG_FAST_GATE_X3=split): by Triton's tf32x3 dot (the
    default since 2026-11-29, timed faster with it on the H200) its readout kernels spill 560-736 B a thread
    here and load without cp.async (triton 3.9); the plain gate's do not."""
    pytest.importorskip("triton.backends.nvidia.compiler")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"} | {"AMG_FAST_GATE_X3": "split"}
    kernels = ["_s4d_toeplitz_dot_fwd_kernel", "_gate_fusion_fwd_kernel", "_grid_linear_fwd_kernel",
               "_composed_linear_fwd_kernel"]
    proc = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--ops", "s4d", "gate", "encoder", "decoder",
                           "--kernels", *kernels], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.startswith(tuple(kernels)) and " ok " in line
             and not line.endswith(("bf16]", "fp64]"))]
    assert {line.split()[0] for line in lines} == set(kernels)
    assert any("readout" in line for line in lines)
    assert [line for line in lines if " cp.async" not in line] == []


def test_global_load_kinds_from_sass():
    """_global_loads reads the opcodes of cuobjdump -sass lines, predicated ones included."""
    loads = _load_harness()._global_loads
    sass = """
        /*0100*/                   LDG.E.128 R4, desc[UR6][R2.64] ;            /* 0x000000060204 */
        /*0110*/              @!P0 LDGSTS.E.BYPASS.128 [R9], desc[UR6][R6.64] ; /* 0x0000000006097fae */
        /*0120*/                   HMMA.1688.F32.TF32 R8, R12, R16, R8 ;       /* 0x000000100c08723c */
"""
    assert loads(sass) == "cp.async+ldg"
    assert loads(sass.replace("LDG.E.128", "STG.E.128")) == "cp.async"
    assert loads(sass.replace("@!P0 LDGSTS", "@P1 UTMALDG")) == "tma+ldg"
    assert loads("") == "-"


def test_the_tiling_cases_launch_each_configuration_the_sweeps_time():
    """--ops gate_tiles / s4d_tiles / spectral_tiles / ffn_tiles: each configuration of bench/kernel_sweep.py's quick
    spaces is what the swept kernel launches with in its case (in fp32 mode and under TF32; the feed-forward's in
    fp32 mode), and the policies come back."""
    import copy

    from amg_fast.kernels import ffn_gemm, gate_fusion, s4d_scan, spectral_conv

    harness = _load_harness()
    policies = (gate_fusion.TILE_POLICY, gate_fusion.WGRAD_POLICY, s4d_scan.TOEPLITZ_DOT_POLICY,
                spectral_conv.LAUNCH_POLICY, ffn_gemm.LAUNCH_POLICY)
    before = copy.deepcopy(policies)
    launches, errors = harness.capture(["gate_tiles", "s4d_tiles", "spectral_tiles", "ffn_tiles"], quick=True)
    assert not errors, errors
    swept = {"fwd": "_gate_fusion_fwd_kernel", "bwd": "_gate_fusion_bwd_kernel",
             "fwd_readout": "_gate_fusion_fwd_kernel", "bwd_readout": "_gate_fusion_bwd_kernel", "wgrad": "_weight_grad_kernel",
             "s4d-tiles": "_s4d_toeplitz_dot_bwd_kernel", "transform": "_spectral_conv1d_transform_kernel",
             "mix": "_spectral_conv1d_mix_kernel", "dweight": "_spectral_conv1d_dweight_kernel",
             "ffn-tiles": "_row_gemm_kernel"}
    checked = set()
    for launch in launches:
        words = launch.case.split()
        kernel = words[1] if words[0] in ("gate-tiles", "spectral-tiles") else words[0]
        if launch.fn.fn.__name__ != swept[kernel] or (kernel.startswith(("fwd", "bwd")) and
                                                     launch.kwargs["READOUT"] != kernel.endswith("readout")):
            continue
        config = dict(word.split("=") for word in words if "=" in word)
        kwarg = {key: key.upper() if key.upper() in launch.kwargs else key for key in config}  # channels_first
        launched = {key: str(launch.kwargs[kwarg[key]]) for key in config if kwarg[key] in launch.kwargs}
        assert launched == {key: config[key] for key in launched} and launched, launch.case
        checked.add(launch.case)
    sweep = harness._sweep_module()
    cases = sum(len(list(itertools.product(*space.values()))) for space in
                (*sweep.GATE_QUICK.values(), sweep.S4D_TOEPLITZ_QUICK, *sweep.SPECTRAL_QUICK.values()))
    ffn_cases = len(list(itertools.product(*sweep.FFN_GEMM_QUICK.values()))) * len(sweep.FFN_GEMM_QUICK_MODES)
    assert len(checked) == 2 * cases + ffn_cases  # every configuration, in both modes (the feed-forward's in its)
    assert policies == before
