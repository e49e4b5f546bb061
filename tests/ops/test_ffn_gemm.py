"""kernels/ffn_gemm.py (the feed-forward's method="gemm"): the weights' TF32 planes, and the row GEMM
with each epilogue against an explicit fp64 formula, on the GPU's tiles (several K steps, partial row,
column and reduction tiles). The whole feed-forward against the reference: tests/ops/test_feed_forward.py."""
import pytest
import torch
from helpers import record_launches, rel_err

from amg_fast.kernels import _tf32, ffn_gemm
from amg_fast.kernels._tf32 import cast_weights, dot_operands, round_to_tf32, split_tf32, transposed_weights


@pytest.mark.parametrize("count", [1, 2, 3, 4])
def test_split_tf32_planes_are_exact_and_rounded(count, gen, kdev):
    """[hi1 | lo1 | hi2 | lo2 | ...] of one to four weights of different sizes (the largest over several
    programs; the gate kernels split up to three): hi is the weight rounded to TF32
    (round_to_tf32, itself checked against an independent formula in test_spectral_conv_triton.py), hi + lo is
    the weight exactly, |lo| <= 2^-11 |w|."""
    big = torch.randn(3000, generator=gen).to(kdev) * 10.0 ** torch.randint(-20, 20, (3000,), generator=gen).to(kdev)
    weights = [torch.randn(17, 3, generator=gen).to(kdev), big, torch.randn(5, generator=gen).to(kdev),
               torch.randn(2, 9, generator=gen).to(kdev)][:count]
    planes = split_tf32(*weights)
    assert planes.shape == (2 * sum(w.numel() for w in weights),) and planes.dtype == torch.float32
    offset = 0
    for w in weights:
        hi, lo = planes[offset:offset + 2 * w.numel()].view(2, -1)
        offset += 2 * w.numel()
        assert torch.equal(hi, round_to_tf32(w.flatten()))
        assert torch.equal(hi.double() + lo.double(), w.flatten().double())
        assert (lo.abs() <= w.flatten().abs() * 2.0 ** -11).all()


def test_transposed_planes_and_copies_are_exact(gen, kdev):
    """split_tf32(transpose=True): the planes of each weight's transpose, row-major (the backward's K-major
    operands in fp32 mode), against w.t() split on the host; transposed_weights: the transposes themselves, in
    the weights' dtype, bit for bit. Shapes over several programs, one not square, one a single row."""
    weights = [torch.randn(*shape, generator=gen, dtype=torch.float64).to(kdev)
               for shape in ((48, 40), (37, 64), (1, 5))]
    planes = split_tf32(*(w.float() for w in weights), transpose=True)
    flat = transposed_weights(*weights)
    assert planes.dtype == torch.float32 and flat.dtype == torch.float64
    offset = 0
    for w in weights:
        hi, lo = planes[2 * offset:2 * (offset + w.numel())].view(2, w.shape[1], w.shape[0])
        wt = w.float().t()
        assert torch.equal(hi, round_to_tf32(wt)) and torch.equal(hi.double() + lo.double(), wt.double())
        assert torch.equal(flat[offset:offset + w.numel()].view(w.shape[1], w.shape[0]), w.t())
        offset += w.numel()


def test_split_tf32_transposes_the_weights_flagged(gen, kdev, monkeypatch):
    """split_tf32 with one transpose flag a weight (the feed-forward's forward splits W1, W2 and their
    transposes in one launch): each slot as is or transposed, as split_tf32 of that weight alone makes it."""
    w1, w2 = (torch.randn(*shape, generator=gen).to(kdev) for shape in ((48, 40), (40, 48)))
    launches = []
    record_launches(_tf32, launches, monkeypatch)
    planes = split_tf32(w1, w2, w1, w2, transpose=(False, False, True, True))
    assert [name for name, *_ in launches] == ["_weight_planes_kernel"]
    want = torch.cat([split_tf32(w1), split_tf32(w2), split_tf32(w1, transpose=True), split_tf32(w2, transpose=True)])
    assert torch.equal(planes, want)


@pytest.mark.parametrize("source, target", [(torch.float32, torch.bfloat16), (torch.bfloat16, torch.float32),
                                            (torch.float64, torch.float32)])
def test_cast_weights_casts_each_weight_in_one_launch(source, target, gen, kdev, monkeypatch):
    """cast_weights: up to four weights (2-D and 1-D, one over several programs) in the target dtype, one after
    another in one flat buffer, in one launch: as torch's .to(target) makes them -- bit for bit where the cast
    is exact or on a GPU (round to nearest even); Triton's interpreter truncates to bf16, so on CPU within one
    bf16 step of it. A weight of another dtype than the first is cast to the first's first."""
    weights = [torch.randn(*shape, generator=gen, dtype=torch.float64).to(kdev, source)
               for shape in ((48, 40), (3000,), (5,))] + [torch.randn(7, 3, generator=gen).to(kdev)]
    launches = []
    record_launches(_tf32, launches, monkeypatch)
    flat = cast_weights(*weights, dtype=target)
    assert [name for name, *_ in launches] == ["_weight_planes_kernel"]
    assert flat.shape == (sum(w.numel() for w in weights),) and flat.dtype == target
    want = torch.cat([w.to(source).flatten().to(target) for w in weights])
    if target == torch.bfloat16 and kdev.type == "cpu":
        step = 2.0 ** (torch.frexp(want.float())[1] - 8).float()  # one bf16 step at each value's binade
        assert ((flat.float() - want.float()).abs() <= step).all()
    else:
        assert torch.equal(flat, want)


def test_dot_operands_cast_weights_of_another_dtype_together(gen, kdev, monkeypatch):
    """dot_operands: the weights in the activations' dtype, contiguous; two or more of another dtype (the gate's
    fp32 w_z, w_h under bf16 autocast) cast in one launch, values as cast_weights makes them; one alone, or none,
    without a kernel of this module (a torch cast or nothing)."""
    w_z, w_h = (torch.randn(16, 16, generator=gen).to(kdev) for _ in range(2))
    launches = []
    record_launches(_tf32, launches, monkeypatch)
    got = dot_operands(torch.bfloat16, w_z, w_h.t())
    assert [name for name, *_ in launches] == ["_weight_planes_kernel"]
    assert all(g.dtype == torch.bfloat16 and g.is_contiguous() for g in got)
    assert torch.equal(torch.cat([g.flatten() for g in got]), cast_weights(w_z, w_h.t(), dtype=torch.bfloat16))
    mixed = dot_operands(torch.bfloat16, w_z.bfloat16(), w_h)
    same = dot_operands(torch.float32, w_z, w_h.t())
    assert len(launches) == 2  # the call to cast_weights above; none since
    assert [g.dtype for g in mixed] == [torch.bfloat16] * 2 and torch.equal(mixed[1], w_h.bfloat16())
    assert same[0] is w_z and torch.equal(same[1], w_h.t()) and same[1].is_contiguous()


def test_weight_planes_name_bad_arguments():
    w = torch.ones(4)
    for weights in ((), (w,) * 5):
        with pytest.raises(ValueError, match="split_tf32 takes 1 to 4 weights, got"):
            split_tf32(*weights)
        with pytest.raises(ValueError, match="transposed_weights takes 1 to 4 weights, got"):
            transposed_weights(*weights)
    with pytest.raises(ValueError, match=r"transposed_weights\(transpose\) takes 2-D weights, got shapes \[\(4,\)\]"):
        transposed_weights(w)
    with pytest.raises(ValueError, match=r"split_tf32\(transpose\) takes 2-D weights, got shapes \[\(2, 2\), \(4,\)\]"):
        split_tf32(torch.ones(2, 2), w, transpose=(False, True))
    with pytest.raises(ValueError, match="cast_weights takes 1 to 4 weights, got 0"):
        cast_weights(dtype=torch.bfloat16)
    with pytest.raises(ValueError, match=r"cast_weights: dtype must be a floating-point torch.dtype, got torch.int32"):
        cast_weights(w, dtype=torch.int32)
    with pytest.raises(ValueError, match=r"split_tf32: transpose must be a bool or one bool a weight \(2\), got "
                                         r"\(True,\)"):
        split_tf32(w, w, transpose=(True,))


EPILOGUES = [dict(), dict(bias=True), dict(bias=True, relu=True), dict(mask=True), dict(residual=True),
             dict(bias=True, residual=True)]


def expected(a, w, transpose_w, bias=None, relu=False, mask=None, residual=None):
    """The explicit formula in fp64: a @ w^T (or w) + bias, ReLU, zero where mask <= 0, + residual."""
    c = torch.einsum("mk,nk->mn" if transpose_w else "mk,kn->mn", a.double(), w.double())
    if bias is not None:
        c = c + bias.double()
    if relu:
        c = c.clamp_min(0)
    if mask is not None:
        c = torch.where(mask <= 0, torch.zeros_like(c), c)
    return c if residual is None else c + residual.double()


@pytest.mark.parametrize("mode", ["fp32-x3", "tf32", "fp64"])
@pytest.mark.parametrize("transpose_w", [True, False], ids=["wT", "w"])
@pytest.mark.parametrize("epilogue", EPILOGUES, ids=lambda e: "+".join(e) or "plain")
def test_row_gemm_matches_the_formula_on_gpu_tiles(epilogue, transpose_w, mode, gen, kdev, monkeypatch, poisoned,
                                                   allow_tf32, tf32_mma):
    """M = 300, K = 80, N = 72 on the GPU's tiles (128 x 128 x 32; fp64 64 x 64 x 16): partial row,
    column and reduction tiles, several K steps; TF32 dots truncate their operands as a GPU's (tf32_mma).
    fp32-x3: the weight as its TF32 planes (three TF32 products, ~1e-7; a dropped product term or an
    unsplit A tile shows as ~3e-4), tf32: TF32 allowed, one dot (~8e-4)."""
    monkeypatch.setitem(ffn_gemm.LAUNCH_POLICY, kdev.type, ffn_gemm.LAUNCH_POLICY["cuda"])
    allow_tf32(mode == "tf32")
    dtype = torch.float64 if mode == "fp64" else torch.float32
    M, K, N = 300, 80, 72

    def rand(*shape):
        return torch.randn(*shape, generator=gen, dtype=torch.float64).to(kdev, dtype)

    a, w = rand(M, K), rand(N, K) if transpose_w else rand(K, N)
    extra = {"bias": rand(N) if epilogue.get("bias") else None, "relu": bool(epilogue.get("relu")),
             "mask": rand(M, N) if epilogue.get("mask") else None,
             "residual": rand(M, N) if epilogue.get("residual") else None}
    operand = split_tf32(w).view(2, *w.shape) if mode == "fp32-x3" else w
    c = ffn_gemm.row_gemm(a, operand, transpose_w=transpose_w, **extra)
    assert c.shape == (M, N) and c.dtype == dtype
    err = rel_err(c, expected(a, w, transpose_w, **extra))
    assert err <= {"fp32-x3": 1e-5, "tf32": 3e-3, "fp64": 1e-13}[mode]
    assert mode != "tf32" or err > 1e-5  # its operands truncated to TF32 (tf32_mma on CPU): the emulation bites


@pytest.mark.parametrize("persistent", [False, pytest.param(True, marks=pytest.mark.variant("ffn_persistent"))],
                         ids=["tile-a-program", "persistent"])
@pytest.mark.parametrize("sums_of", ["c", "a", "c+a"])
@pytest.mark.parametrize("mode", ["fp32-x3", "fp64"])
def test_row_gemm_column_sums(mode, sums_of, persistent, gen, kdev, monkeypatch, poisoned):
    """column_sums: C's column sums in the accumulation dtype too (the feed-forward's db1 from the dh kernel);
    input_sums: A's (its db2 from the same kernel), after C's when both; on the GPU's tiles with a partial last
    row tile, several N tiles (A's sums from one tile a row block) and K steps, a bias (which the padded rows
    must not add), the ReLU and a residual (not in the sums), against the fp64 formula. Persistent: the tiles
    (6, fp64's 10) over 4 programs (AMG_FAST_FFN_PERSISTENT=1), some looping over two or more."""
    policy = {kind: dict(entry, programs=4) for kind, entry in ffn_gemm.LAUNCH_POLICY["cuda"].items()}
    monkeypatch.setitem(ffn_gemm.LAUNCH_POLICY, kdev.type, policy)
    monkeypatch.setenv("AMG_FAST_FFN_PERSISTENT", "1" if persistent else "0")
    launches = []
    record_launches(ffn_gemm, launches, monkeypatch)
    tiles = policy["x3" if mode == "fp32-x3" else mode]
    dtype = torch.float64 if mode == "fp64" else torch.float32
    M, K, N = 300, 48, tiles["BLOCK_N"] + 40
    assert M % tiles["BLOCK_M"] and K > tiles["BLOCK_K"]
    a, w, bias, residual = (torch.randn(*shape, generator=gen, dtype=torch.float64).to(kdev, dtype)
                            for shape in ((M, K), (N, K), (N,), (M, N)))
    operand = split_tf32(w).view(2, N, K) if mode == "fp32-x3" else w
    c, sums = ffn_gemm.row_gemm(a, operand, transpose_w=True, bias=bias, relu=True, residual=residual,
                                column_sums="c" in sums_of, input_sums="a" in sums_of)
    want = expected(a, w, True, bias=bias, relu=True)
    want_sums = torch.cat([want.sum(0)] * ("c" in sums_of) + [a.double().sum(0)] * ("a" in sums_of))
    tol = 1e-13 if mode == "fp64" else 1e-5
    assert sums.shape == want_sums.shape and sums.dtype == dtype
    assert rel_err(c, want + residual.double()) <= tol and rel_err(sums, want_sums) <= tol
    n_tiles = -(-M // tiles["BLOCK_M"]) * -(-N // tiles["BLOCK_N"])
    assert n_tiles > 4 and [(grid, opts["PERSISTENT"]) for _, grid, opts in launches] == [
        ((4 if persistent else n_tiles,), persistent)]


def test_row_gemm_casts_a_to_the_weights_dtype_and_writes_out_dtype(gen, kdev):
    """An fp32 dy against fp64 weights (the backward of an op whose output is wider than x: the cast
    happens in the kernel), written in the asked dtype; no rows: an empty result, no launch."""
    a = torch.randn(40, 16, generator=gen).to(kdev)
    w = torch.randn(16, 24, generator=gen, dtype=torch.float64).to(kdev)
    c = ffn_gemm.row_gemm(a, w, transpose_w=False, out_dtype=torch.float64)
    assert c.dtype == torch.float64 and rel_err(c, expected(a, w, False)) <= 1e-13
    assert ffn_gemm.row_gemm(a[:0], w, transpose_w=False).shape == (0, 24)


def test_row_gemm_names_bad_arguments(gen, kdev):
    a, w = torch.randn(8, 16, device=kdev), torch.randn(24, 16, device=kdev)
    with pytest.raises(ValueError, match=r"row_gemm: a must be \[M, 24\] for this weight, got \(8, 16\)"):
        ffn_gemm.row_gemm(a, w, transpose_w=False)
    with pytest.raises(ValueError, match="mask and residual share one epilogue input"):
        ffn_gemm.row_gemm(a, w, transpose_w=True, mask=torch.ones(8, 24, device=kdev),
                          residual=torch.ones(8, 24, device=kdev))


@pytest.mark.parametrize("cublas", [False, True], ids=["triton-wgrad", "cublas-wgrad"])
@pytest.mark.parametrize("x_dtype,dy_dtype", [(torch.float32, torch.float64), (torch.float64, torch.float32)],
                         ids=["x32-dy64", "x64-dy32"])
def test_backward_takes_dy_of_another_dtype(x_dtype, dy_dtype, cublas, gen, kdev, poisoned):
    """dy wider or narrower than x (y takes a residual's dtype; under bf16 autocast an fp32 dy meets bf16
    x, which only a GPU test can run): dx and every weight gradient in x's dtype, against the explicit
    formula in fp64 (the weight-gradient dots in x's dtype: a dot of fp32 operands into an fp64
    accumulator, or the reverse, does not compile for a GPU), with the weight gradients by the split-K
    kernel and by torch GEMMs (db1 from the dh kernel's epilogue, db2 from its dy tiles)."""
    M, h_in, hidden, h_out = 40, 16, 48, 24

    def rand(*shape, dtype=x_dtype):
        return torch.randn(*shape, generator=gen, dtype=torch.float64).to(kdev, dtype)

    x, w1, b1, w2, b2 = rand(M, h_in), rand(hidden, h_in), rand(hidden), rand(h_out, hidden), rand(h_out)
    y, h, w_planes = ffn_gemm.feed_forward_gemm_fwd(x, w1, b1, w2, b2)
    dy = rand(M, h_out, dtype=dy_dtype)
    dx, flat = ffn_gemm.feed_forward_gemm_bwd(dy, x, h, w1, w2, True, "cublas" if cublas else "triton", w_planes)
    got = (dx, *ffn_gemm.gemm_weight_grads(flat, hidden, h_in, h_out))
    dy64, h64 = dy.double(), h.double()
    dh = (dy64 @ w2.double()) * (h64 > 0)
    want = (dh @ w1.double(), dh.T @ x.double(), dh.sum(0), dy64.T @ h64, dy64.sum(0))
    tol = 1e-5 if torch.float32 in (x_dtype, dy_dtype) else 1e-12
    for name, a, b in zip(("dx", "dw1", "db1", "dw2", "db2"), got, want):
        assert a.dtype == x_dtype and rel_err(a, b) <= tol, f"{name}: {a.dtype}, rel err {rel_err(a, b):.2e}"


@pytest.mark.parametrize("mode", ["fp32", "tf32", "fp64"])
def test_backward_operands_are_k_major_for_fp32_weights(mode, gen, kdev, allow_tf32):
    """The backward's weight operands (dh = dy W2, dx = dh W1): for fp32 weights the transposes W2^T, W1^T
    row-major (a TF32 wgmma's K-major operand), as TF32 planes where the dots are tf32x3 (fp32 mode) and as
    plain copies under TF32; fp64 (and 16-bit) weights as they are."""
    allow_tf32(mode == "tf32")
    dtype = torch.float64 if mode == "fp64" else torch.float32
    w1, w2 = (torch.randn(*s, generator=gen, dtype=dtype).to(kdev) for s in ((32, 8), (6, 32)))
    w1_op, w2_op, transposed = ffn_gemm._backward_operands(w1, w2)
    if mode == "fp64":
        assert not transposed and w1_op is w1 and w2_op is w2
        return
    assert transposed
    if mode == "fp32":
        assert w1_op.shape == (2, 8, 32) and w2_op.shape == (2, 32, 6)
        assert torch.equal(w1_op[0] + w1_op[1], w1.t()) and torch.equal(w2_op[0], round_to_tf32(w2.t()))
    else:
        assert torch.equal(w1_op, w1.t()) and torch.equal(w2_op, w2.t())


def test_fp32_forward_splits_the_backward_weights_too(gen, kdev, monkeypatch, allow_tf32):
    """fp32 mode: the forward's one weight launch also writes the planes of W1^T and W2^T, which the backward
    takes as its operands (the same as it would make) and so launches no weight kernel; TF32 or fp64: the
    forward returns none."""
    allow_tf32(False)
    M, h_in, hidden, h_out = 24, 16, 32, 8
    x, w1, b1, w2, b2 = (_rand32(gen, kdev, *s) for s in ((M, h_in), (hidden, h_in), (hidden,), (h_out, hidden),
                                                          (h_out,)))
    launches = []
    record_launches(_tf32, launches, monkeypatch)
    record_launches(ffn_gemm, launches, monkeypatch)
    y, h, w_planes = ffn_gemm.feed_forward_gemm_fwd(x, w1, b1, w2, b2)
    assert [name for name, *_ in launches] == ["_weight_planes_kernel", "_row_gemm_kernel", "_row_gemm_kernel"]
    own = ffn_gemm._backward_operands(w1, w2)
    for got, want in zip(ffn_gemm._backward_operands(w1, w2, w_planes), own):
        assert torch.equal(got, want) if isinstance(got, torch.Tensor) else got == want
    launches.clear()
    ffn_gemm.feed_forward_gemm_bwd(_rand32(gen, kdev, M, h_out), x, h, w1, w2, True, "cublas", w_planes)
    assert "_weight_planes_kernel" not in [name for name, *_ in launches]
    assert ffn_gemm.feed_forward_gemm_fwd(x.double(), *(t.double() for t in (w1, b1, w2, b2)))[2] is None
    allow_tf32(True)
    assert ffn_gemm.feed_forward_gemm_fwd(x, w1, b1, w2, b2)[2] is None



def _rand32(gen, kdev, *shape):
    return torch.randn(*shape, generator=gen, dtype=torch.float64).to(kdev, torch.float32)


def test_backward_names_a_bad_wgrad(kdev):
    """wgrad: "triton" or "cublas"."""
    x, w1, b1, w2, b2 = (torch.ones(*s, dtype=torch.float64, device=kdev) for s in ((4, 2), (3, 2), (3,), (2, 3),
                                                                                      (2,)))
    y, h, _ = ffn_gemm.feed_forward_gemm_fwd(x, w1, b1, w2, b2)
    with pytest.raises(ValueError, match=r"wgrad must be one of \('triton', 'cublas'\), got True"):
        ffn_gemm.feed_forward_gemm_bwd(y, x, h, w1, w2, True, True)
