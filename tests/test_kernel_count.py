"""The kernel count of an AMGFNO training step does not regress (bench/_kernel_count.py, on CPU).

On a CPU the count is the aten ops that would each launch a kernel on a GPU (the same ops
dispatch there), so fusing ops lowers it and an op added to the step raises it; the GPU estimate
adds the library kernels the module models (cuBLAS split-K reductions, multi_tensor_apply launches),
which reproduces the H100's 140 at the code it counted (see the module docstring).
"""
import pytest
import torch
from helpers import interpreter_only, load_bench

from amg_fast.models import get_model
from amg_fast.train.evaluate import one_step_loss
from amg_fast.train.precision import autocast
# Measured with torch 2.13 (CPU) on the step below (B = 2, T = 4, S = 20, width 16): 246 ops (363 in
# bf16 autocast); 249 since the decoder's two Linears run as one (three tiny weight-side ops for one
# fewer activation GEMM and no [rows, 128] intermediate, forward and backward); 247 since log(omega +
# eps) is cached; 259 since the reference's inverse FFT zeroes the imaginary DC/Nyquist parts first
# (kernels._common.irfft_ortho, a correctness fix for cuFFT: 3 ops per spectral layer, forward and
# backward); 256 since the grid coordinates are cached and one forward's mean gate is not divided by
# one; 255 since the S4D powers' backward is written out (ops.s4d._Powers: cumprod's read the host).
# The ceiling is the count + ~5%; lower it when kernels are cut.
STEP_KERNEL_CEILING = 268
STEP_KERNEL_FLOOR = 120  # the forward alone runs 90: near that, the backward went uncounted
# The same step on the Triton backend (kernels in the interpreter, one count per launch): 164 before
# the S4D discretisation moved into the K kernel, 138 after, 130 with the frequency gate inside the
# gate kernels, 126 with the feed-forward's ReLU in its first GEMM's epilogue (the code the H100
# counted: 140 CUDA kernels there, which the GPU estimate reproduces), 85 with the fused feed-forward
# (residual in its epilogue), the S4D readout inside the gate kernels, GELU and dd in the S4D kernels,
# the gate's weight gradients in Triton, the grid cached; 89 since the spectral weight is copied into
# real / imaginary planes once per forward (one launch per spectral layer; AMG_FAST_SPECTRAL_WEIGHT_PLANES=0
# reads it in place: 85). Ceiling 89 + ~5%: the step with the fused feed-forward, which meets issue 19's
# 100 CUDA kernels (estimate 92 = 89 + 2 split-K GEMMs, the encoder's and the decoder's weight
# gradients, + 1 more fused-Adam launch for 38 tensors; the H200 counted 93 in fp32, 2026-11-27).
# The default step takes the cuBLASLt epilogue feed-forward since the H200 timed it 1.7x faster
# (kernels/limits.py, FFN_AUTO_METHOD): 113 launches, estimate 124 CUDA kernels (8 more split-K
# GEMMs), over the 100; ceiling 113 + ~5%. With the row-GEMM feed-forward (method "gemm", kernels/ffn_gemm.py:
# the bias gradients and the ReLU's backward in its kernels, no split-K reductions): 105, estimate 108.
# The decoder's two Linears in Triton (kernels/composed_linear.py: W2 W1 formed in the kernels, 1 launch
# forward and 2 backward against 3 + 8 aten ops and a split-K reduction) and the grid encoder
# (kernels/grid_linear.py: 3 launches against cat, GEMM, dW GEMM + split-K, bias sum): fused 80 (estimate
# 81), default 104 (113), gemm 96 (97: within issue 19's 100 as well). Ceilings at the count + ~5%. In fp32
# mode (this step's) the gate kernels' launchers split their weights into TF32 planes (one launch forward, one
# backward; AMG_FAST_GATE_X3=dot: none): fused 82 (83), default 106 (115), gemm 98 (99).
# Since 2026-11-29 the default readout is "separate" and fp32 mode's gate dots Triton's tf32x3 (no weight split;
# the H200 timed both faster): fused 85 (87), default 109 (119), gemm 101 (103). On a GPU the fp32 / TF32 step's
# spectral conv now runs on cuBLAS (kernels.spectral_conv.cublas_by_default, also timed faster): the bmm
# mixing, its zeroed modes and copies, the transforms' matmuls, +48 launches a step: fused 133 (135), default
# 157 (167), gemm 149 (151). The fused feed-forward, the only step within issue 19's 100 CUDA kernels (with
# the Triton spectral conv: 87), was removed the same day (1.2-1.9x slower than the epilogue on the H200, and a
# fault of its dx kernel in fp32 on sm_90): the fewest now is the Triton spectral conv with the row GEMMs, 103
# (the step time is what the kernel count was for). 2026-11-29 (late): the weight gradients of fp32 activations on
# cuBLAS (kernels.limits.wgrad_method; the H200's profile had the split-K kernel at 19 TFLOP/s under TF32): the
# gate's two GEMMs, db and dchi sums and their concatenation for one kernel and a sum, +3; the row-GEMM
# feed-forward's two GEMMs, db2, the sum of the dh kernel's db1 partials and the concatenation for one kernel
# and a sum, plus the backward's transposed weights (one launch), +3 a layer; the epilogue feed-forward's ReLU
# mask, db1 and db2 in one Triton pass and a sum (kernels/relu_grad.py) for threshold_backward and two sums, -1
# a layer: default 156 (168), gemm 164 (176); with the Triton spectral conv 108 (120) and 116 (128). With
# AMG_FAST_WGRAD=triton: default 153 (163), gemm 153 (155). 2026-11-29 (late): the cuBLAS spectral conv builds W's real
# blocks in one Triton launch (kernels.spectral_conv.weight_blocks: was neg, stack and a copy, two negs in the
# backward), forms dW from the bmm's blocks in one (dweight_parts: was a scale, add, sub and stack) and leaves the
# "dft" synthesis's ignored imaginary parts unzeroed (its basis is exactly 0 there): 10 launches a layer fewer,
# default 116 (128), gemm 124 (136). 2026-11-30: the row GEMMs are fp32 mode's default (FFN_AUTO_METHOD, timed
# 1.12-1.14x on the H200), the epilogue the other modes': each path is counted by name. The row GEMMs' db2 from
# the dh kernel (was a torch sum), one launch a layer fewer: gemm 120 (132), with the Triton spectral conv 112 (124).
# 2026-11-30 (late): this step takes the trainer's loss (one_step_loss), now mse_loss's sum over B T (5 launches
# forward and backward, 6 on CUDA: mse_loss sums its output in a second kernel, which the estimate models, against
# 9 for sub, square, sum, mean and their backward), and the cuBLAS spectral backward multiplies by the forward's W
# blocks transposed (W^H's real form; one launch a layer fewer): default 108 (121), gemm 112 (125); with the
# Triton spectral conv 104 (117) and 108 (121). 2026-11-30 (night): the row GEMMs' forward splits the
# backward's transposed weight planes in its own launch (fp32 mode), one launch a layer fewer: gemm 108 (121),
# with the Triton spectral conv 104 (117). 2026-12-01: "auto" takes our transform kernel for the DFT GEMMs on a
# GPU too (the "cublas" case: cuBLAS's mixing only), the same count, 108 (121); the planes weight gradients gone.
TRITON_STEP_KERNEL_CEILING = {("cublas", "epilogue"): 113, ("cublas", "gemm"): 113,
                              ("triton", "epilogue"): 109, ("triton", "gemm"): 109}
TRITON_STEP_KERNEL_FLOOR = 60
B, T, S = 2, 4, 20  # rows B*T*S = 160: no weight's dimension (16, 64, 128) equals it


def load_kernel_count():
    return load_bench("_kernel_count", "bench_kernel_count")


def test_counts_the_ops_a_gpu_would_launch():
    """Composites (linear, matmul), views and allocations launch nothing; mm, mul and sum one each."""
    a, b = torch.randn(4, 3), torch.randn(5, 3)

    def fn():
        y = torch.nn.functional.linear(a, b).view(-1).unsqueeze(0)
        return (y * 2).sum()

    assert load_kernel_count().count_kernels(fn, "cpu") == {"kernels": 3, "kernel_count_kind": "cpu_aten_kernel_ops"}


def test_rejects_other_devices():
    with pytest.raises(ValueError, match="device must be a cuda or cpu device, got 'meta'"):
        load_kernel_count().count_kernels(lambda: None, "meta")


@interpreter_only
def test_interpreted_triton_launch_counts_once():
    """A Triton launch in the interpreter counts one kernel, whatever the interpreter copies inside it."""
    from amg_fast.kernels.s4d_scan import s4d_conv_kernel_fwd

    lam, c = torch.rand(4, 3, 2) * 0.5, torch.randn(4, 3, 2)
    assert load_kernel_count().count_kernels(lambda: s4d_conv_kernel_fwd(lam, c, 5), "cpu")["kernels"] == 1


def amgfno_step(backend: str, precision: str = "fp32"):
    """(step, rows, parameter tensors) of the trainer's step: AMGFNO, teacher forcing, fused Adam; the forward
    and loss under the precision mode's autocast (bf16: torch.autocast, as the trainer)."""
    torch.manual_seed(0)
    model = get_model("amgfno", width=16, modes=8, omega=0.1, backend=backend)
    optimizer = torch.optim.Adam(model.parameters(), lr=torch.tensor(1e-3), fused=True)
    u = torch.randn(B, T + 1, S, 1)

    def step():
        optimizer.zero_grad(set_to_none=True)
        with autocast(precision, "cpu"):
            loss = one_step_loss(model(u[:, :-1]), u[:, 1:])  # the trainer's loss
        loss.backward()
        optimizer.step()

    step()  # warm-up: Adam's state is created lazily
    return step, B * T * S, len(list(model.parameters()))


def test_amgfno_reference_train_step_kernel_count():
    count = load_kernel_count().count_kernels(amgfno_step("reference")[0], "cpu")["kernels"]
    assert STEP_KERNEL_FLOOR < count <= STEP_KERNEL_CEILING, (
        f"{count} kernel-launching ops per step; allowed: more than {STEP_KERNEL_FLOOR}, at most {STEP_KERNEL_CEILING}")


@interpreter_only
@pytest.mark.parametrize("ffn", ["epilogue", "gemm"])
@pytest.mark.parametrize("spectral", ["cublas", "triton"])
def test_amgfno_triton_train_step_kernel_count(spectral, ffn, monkeypatch):
    """The Triton backend's step (kernels run by the interpreter on CPU) stays at or below its ceiling, with
    each feed-forward path and the spectral conv's mixing on cuBLAS (what "auto" picks for this fp32 step on a
    GPU, with our transform kernel) or on our kernels."""
    from amg_fast.kernels import spectral_conv

    for name, value in (("MIX_METHOD", "torch"), ("DFT_GEMM", "triton")) if spectral == "cublas" else (
            ("MIX_METHOD", "gauss"), ("DFT_GEMM", "triton")):
        monkeypatch.setattr(spectral_conv, name, value)
    monkeypatch.setenv("AMG_FAST_FFN_METHOD", ffn)
    step, rows, tensors = amgfno_step("triton")
    estimate = load_kernel_count().estimate_cuda_kernels(step, rows=rows, tensor_lists=tensors)
    count, ceiling = estimate["kernels"], TRITON_STEP_KERNEL_CEILING[spectral, ffn]
    assert TRITON_STEP_KERNEL_FLOOR < count <= ceiling, (
        f"{count} kernels per Triton step ({spectral} spectral conv, {ffn} feed-forward); allowed: more than "
        f"{TRITON_STEP_KERNEL_FLOOR}, at most {ceiling}")
    assert estimate["cuda_estimate"] == (count + estimate["cublas_split_k"] + estimate["multi_tensor_apply"]
                                         + estimate["loss_reductions"])
    assert estimate["loss_reductions"] == 1  # the trainer's loss: mse_loss, then its sum


# bf16 mode (the step under bf16 autocast; on CPU the spectral conv runs our kernels, as bf16 work does on a GPU,
# and the feed-forward the epilogue path, bf16's default): 152 launches, 46 of them casts -- autocast's cast of
# each fp32 parameter to bf16 and of its gradient back (the H200 profiled 186 CUDA kernels in bf16, 2026-11-30).
# 118 since the feed-forward casts its four weights in one launch and their gradients back in one
# (kernels._tf32.cast_weights; its bias gradients stay fp32 sums), and the gate its w_z and w_h in one, forward and
# backward (kernels._tf32.dot_operands). Ceiling 118 + 5%.
BF16_STEP_KERNEL_CEILING = 124


@interpreter_only
def test_amgfno_triton_bf16_step_kernel_count():
    """The Triton step under bf16 autocast stays at or below its ceiling: the feed-forward's and the gate's weights
    cast once each way a layer, not once a parameter."""
    step, rows, tensors = amgfno_step("triton", "bf16")
    count = load_kernel_count().estimate_cuda_kernels(step, rows=rows, tensor_lists=tensors)["kernels"]
    assert TRITON_STEP_KERNEL_FLOOR < count <= BF16_STEP_KERNEL_CEILING, (
        f"{count} kernels per bf16 Triton step; allowed: more than {TRITON_STEP_KERNEL_FLOOR}, at most "
        f"{BF16_STEP_KERNEL_CEILING}")


def test_gpu_estimate_models_split_k_multi_tensor_launches_and_loss_reductions():
    """A GEMM reducing over the `rows` activation rows counts a second (split-K) kernel, one over
    anything else does not; fused Adam over 40 tensors counts two launches (36 per launch); a reducing
    mse_loss two (its elementwise kernel and the sum over its output)."""
    kc = load_kernel_count()
    rows = 96
    dy, x, w, bias = torch.randn(rows, 8), torch.randn(rows, 4), torch.randn(4, 8), torch.zeros(8)

    def gemms():
        return dy.t().mm(x), torch.addmm(bias, x, w), x.mm(w)  # only the first reduces over the rows

    assert kc.estimate_cuda_kernels(gemms, rows=rows, tensor_lists=1)["cuda_estimate"] == 4
    loss = kc.estimate_cuda_kernels(lambda: torch.nn.functional.mse_loss(dy, dy, reduction="sum"), rows=rows,
                                    tensor_lists=1)
    assert (loss["kernels"], loss["loss_reductions"], loss["cuda_estimate"]) == (1, 1, 2)
    params = [torch.nn.Parameter(torch.randn(3)) for _ in range(40)]
    optimizer = torch.optim.Adam(params, lr=torch.tensor(1e-3), fused=True)
    for p in params:
        p.grad = torch.ones(3)
    optimizer.step()
    estimate = kc.estimate_cuda_kernels(optimizer.step, rows=rows, tensor_lists=len(params))
    assert estimate["multi_tensor_apply"] == 1 and estimate["cuda_estimate"] == estimate["kernels"] + 1


def test_gpu_kernel_names_on_request():
    names = load_kernel_count().count_kernels(lambda: torch.ones(3).mul(2).sum(), "cpu", names=True)["kernel_names"]
    assert names == {"aten::ones": 1, "aten::mul": 1, "aten::sum": 1}
