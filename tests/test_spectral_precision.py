"""bench/spectral_precision.py, the CPU emulation of the spectral conv's operand rounding: its rounding
primitives against torch's own conversions and hand-made bit patterns, and its chain against fp64."""
import importlib.util
import math
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).parents[1]


@pytest.fixture(scope="module")
def emu():
    spec = importlib.util.spec_from_file_location("bench_spectral_precision", ROOT / "bench" / "spectral_precision.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_round_mantissa_matches_bf16_conversion(emu, gen):
    """7 bits, to nearest even = torch's fp32 -> bf16 conversion, on random values and exact ties."""
    t = torch.randn(10000, generator=gen) * 10.0 ** torch.randint(-5, 5, (10000,), generator=gen)
    ties = torch.tensor([1 + 2 ** -8, 1 + 3 * 2 ** -8, -(1 + 2 ** -8)])  # halfway: to even (down, up, down)
    for values in (t, ties):
        assert torch.equal(emu.round_mantissa(values, 7, nearest=True), values.bfloat16().float())


def test_truncation_and_ties_away(emu):
    one_plus = torch.tensor([1 + 2 ** -11 + 2 ** -20, -(1 + 2 ** -11), 1 + 2 ** -10 - 2 ** -23])
    assert emu.round_mantissa(one_plus, 10, nearest=False).tolist() == [1.0, -1.0, 1.0]  # toward zero
    assert emu.round_away(one_plus, 10).tolist() == [1 + 2 ** -10, -(1 + 2 ** -10), 1 + 2 ** -10]  # ties away


def test_tf32x3_is_fp32_accurate_and_tf32_is_not(emu, gen):
    a, b = torch.randn(32, 64, generator=gen), torch.randn(64, 16, generator=gen)
    exact = a.double() @ b.double()
    err = {mode: emu.rel(emu.dot(a, b, mode), exact) for mode in ("tf32x3", "tf32", "bf16")}
    assert err["tf32x3"] < 1e-6 < 1e-4 < err["tf32"] < 2e-3 and err["bf16"] > 1e-3


@pytest.mark.parametrize("transform", ["dft", "fft"])
def test_chain_in_fp32_mode_is_fp32_accurate(emu, transform, gen):
    """With operands kept in fp32 the emulated chain (both product forms) is within fp32 rounding of the
    exact fp64 one: the emulation's stages are the op (checked independently: the exact stages against
    the reference op)."""
    from amg_fast.ops import spectral_conv1d_ref

    x = torch.randn(3, 24, 8, generator=gen)
    w = torch.randn(13, 8, 8, 2, generator=gen) / math.sqrt(8)
    exact = emu.spectral_conv_exact(x, w)
    assert emu.rel(spectral_conv1d_ref(x.double(), w.double()), exact["y"]) < 1e-12
    for method in emu.MIX_METHODS:
        errors = emu.expected_errors(x, w, "fp32", method, transform)
        assert max(errors.values()) < 1e-6, errors


@pytest.mark.parametrize("transform", ["dft", "fft"])
def test_rounding_what_the_kernels_form_beats_truncating_it(emu, transform, gen):
    """Plain TF32 as the kernels run it (the bases, stored spectra and Gauss sums rounded to nearest, the
    inputs and W truncated by the MMA) lies between every operand truncated and every operand rounded;
    on the dft path it halves the truncated chain's error (2e-3 before 2026-11-27 evening)."""
    x = torch.randn(4, 64, 32, generator=gen)
    w = torch.randn(32, 32, 32, 2, generator=gen) / math.sqrt(32)
    err = {mode: emu.expected_errors(x, w, mode, "gauss", transform)["y"] for mode in ("tf32-rn", "tf32", "tf32-trunc")}
    assert err["tf32-rn"] < err["tf32"] < err["tf32-trunc"], err
    if transform == "dft":
        assert err["tf32"] < 0.6 * err["tf32-trunc"], err
