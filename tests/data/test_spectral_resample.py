"""omega_f on signals and 2D fields with known spectra; periodic cubic resampling (1D and per axis in 2D),
exactness and order."""
import numpy as np
import pytest
import torch

from amg_fast.data.resample import to_resolution
from amg_fast.data.spectral import unresolved_energy_ratio, unresolved_energy_ratio_per_state


def wave(N, n, amplitude=1.0, phase=0.0):
    x = np.arange(N) / N
    return amplitude * np.sin(2 * np.pi * n * x + phase)


@pytest.mark.parametrize("f,expected", [(32, 0.25 / 1.25), (39, 0.25 / 1.25), (40, 0.0), (64, 0.0), (4, 1.0)],
                         ids=["f32", "f39-cutoff19", "f40-cutoff20", "f64", "f4"])
def test_two_wave_signal(f, expected):
    """Energy 1 at |n| = 3 and 0.25 at |n| = 20: unresolved iff the mode exceeds f//2."""
    u = wave(128, 3) + wave(128, 20, 0.5, 0.3)
    assert unresolved_energy_ratio(u, f) == pytest.approx(expected, abs=1e-14)


def test_nyquist_mode_counts_as_n_over_2():
    u = np.cos(np.pi * np.arange(16))  # n = 8 = N/2
    assert unresolved_energy_ratio(u, 16) == 0.0
    assert unresolved_energy_ratio(u, 14) == pytest.approx(1.0)


def test_average_over_leading_dims_and_zero_states():
    states = np.stack([wave(64, 2), wave(64, 30), np.zeros(64)])  # ratios 0, 1, 0 (zero state)
    assert unresolved_energy_ratio_per_state(states, 32).tolist() == pytest.approx([0.0, 1.0, 0.0], abs=1e-14)
    assert unresolved_energy_ratio(states.reshape(1, 3, 64), 32) == pytest.approx(1 / 3)
    assert unresolved_energy_ratio(torch.tensor(states), 32) == pytest.approx(1 / 3)


def test_omega_bad_f():
    with pytest.raises(ValueError, match="f .* must be an int >= 1, got 0"):
        unresolved_energy_ratio(np.zeros(8), 0)
    with pytest.raises(TypeError, match="u must hold real numbers, got dtype complex128"):
        unresolved_energy_ratio(np.zeros(8, dtype=complex), 4)


def smooth(x):
    return np.exp(np.sin(2 * np.pi * x)) + 0.3 * np.cos(6 * np.pi * x)


def test_exact_at_shared_nodes_node_grid():
    rng = np.random.default_rng(0)
    u = rng.standard_normal((3, 5, 512))
    assert np.allclose(to_resolution(u, 32), u[..., ::16], rtol=0, atol=1e-12)
    assert np.allclose(to_resolution(u, 512), u, rtol=0, atol=1e-12)


def test_cell_grid_is_offset_by_half_a_cell():
    """Cell centres (j + 1/2)/N are the odd points of the 2N grid; a node-grid reading would miss them."""
    u = np.random.default_rng(1).standard_normal((2, 64))
    fine = to_resolution(u, 128, source_grid="cell")
    assert np.allclose(fine[..., 1::2], u, rtol=0, atol=1e-12)
    assert not np.allclose(to_resolution(u, 128, source_grid="node")[..., 1::2], u, atol=1e-3)


@pytest.mark.parametrize("source_grid", ["node", "cell"])
def test_fourth_order_between_nodes(source_grid):
    offset = 0.5 if source_grid == "cell" else 0.0
    errors = []
    for N in (64, 128, 256):
        u = smooth((np.arange(N) + offset) / N)
        target = 3 * N // 4 + 1  # points that mostly fall between source nodes
        errors.append(np.abs(to_resolution(u, target, source_grid=source_grid) - smooth(np.arange(target) / target)).max())
    orders = np.log2(np.array(errors[:-1]) / np.array(errors[1:]))
    assert errors[-1] < 1e-6 and np.all((orders > 3.5) & (orders < 4.5)), (errors, orders)


def test_dtype_and_torch_input():
    u32 = np.random.default_rng(2).standard_normal((4, 64)).astype(np.float32)
    assert to_resolution(u32, 32).dtype == np.float32
    assert np.allclose(to_resolution(torch.from_numpy(u32), 32), to_resolution(u32, 32))


@pytest.mark.parametrize("kwargs,match", [({"f": 0}, "f .* must be an int >= 1, got 0"),
                                          ({"f": 8, "source_grid": "edge"}, "source_grid must be one of")],
                         ids=["f0", "bad-grid"])
def test_resample_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        to_resolution(np.zeros((2, 16)), **kwargs)


# ----------------------------------------------------------------------------- 2D fields


def plane_wave(N, nx, ny, amplitude=1.0):
    x = np.arange(N) / N
    return amplitude * np.cos(2 * np.pi * (nx * x[:, None] + ny * x[None, :]))


@pytest.mark.parametrize("f,expected", [(32, 0.25 / 1.5), (40, 0.0), (30, 0.25 / 1.5), (28, 0.5 / 1.5), (4, 1.0)],
                         ids=["f32", "f40", "f30-corner-resolved", "f28-corner-unresolved", "f4"])
def test_2d_ratio_counts_modes_outside_the_square_band(f, expected):
    """Energy 1 at n = (3, 1), 0.25 at (2, 20), 0.25 at the corner (15, 15): a mode is unresolved when
    max(|n_x|, |n_y|) > f//2. The corner (radius 21.2) is resolved at f = 30 and 32: a radial rule
    |n| > f//2 would count it."""
    u = plane_wave(64, 3, 1) + plane_wave(64, 2, 20, 0.5) + plane_wave(64, 15, 15, 0.5)
    assert unresolved_energy_ratio(u, f, spatial_dims=2) == pytest.approx(expected, abs=1e-14)


def test_2d_ratio_reduces_to_1d_for_fields_constant_along_y():
    rows = np.random.default_rng(3).standard_normal((5, 64))
    fields = np.repeat(rows[:, :, None], 16, axis=2)  # [5, 64, 16], constant along y
    assert np.allclose(unresolved_energy_ratio_per_state(fields, 20, spatial_dims=2),
                       unresolved_energy_ratio_per_state(rows, 20), rtol=1e-12, atol=0)


def test_2d_ratio_chunks_agree_with_one_state_at_a_time(monkeypatch):
    import amg_fast.data.spectral as spectral

    fields = np.random.default_rng(4).standard_normal((3, 4, 16, 16))
    whole = unresolved_energy_ratio_per_state(fields, 8, spatial_dims=2)
    monkeypatch.setattr(spectral, "_CHUNK_VALUES", 3 * 256)  # 3 states per chunk: a ragged last chunk
    assert whole.shape == (3, 4)
    assert np.array_equal(unresolved_energy_ratio_per_state(fields, 8, spatial_dims=2), whole)
    one_by_one = [unresolved_energy_ratio(s, 8, spatial_dims=2) for s in fields.reshape(12, 16, 16)]
    assert np.allclose(whole.ravel(), one_by_one, rtol=1e-14, atol=0)


def test_2d_ratio_bad_input():
    with pytest.raises(ValueError, match=r"spatial_dims must be 1 \(\[..., N\]\) or 2"):
        unresolved_energy_ratio(np.zeros((4, 4)), 2, spatial_dims=3)
    with pytest.raises(ValueError, match="u must have rank >= 2"):
        unresolved_energy_ratio(np.zeros(4), 2, spatial_dims=2)
    with pytest.raises(ValueError, match=r"u holds NaN or Inf values \(1 of 2 states\)"):
        unresolved_energy_ratio(np.stack([np.zeros((4, 4)), np.full((4, 4), np.inf)]), 2, spatial_dims=2)


@pytest.mark.parametrize("source_grid", ["node", "cell"])
def test_2d_resample_is_the_1d_resample_per_axis(source_grid):
    """A separable field a(x) b(y) resamples to the outer product of the 1D resamples (tensor-product
    splines), exactly at the shared nodes of the node grid."""
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((2, 32)), rng.standard_normal((2, 24))
    fields = a[:, :, None] * b[:, None, :]
    out = to_resolution(fields, 12, source_grid=source_grid, spatial_dims=2)
    expected = (to_resolution(a, 12, source_grid=source_grid)[:, :, None]
                * to_resolution(b, 12, source_grid=source_grid)[:, None, :])
    assert out.shape == (2, 12, 12) and np.allclose(out, expected, rtol=0, atol=1e-12)
    if source_grid == "node":
        square = rng.standard_normal((3, 64, 64))
        assert np.allclose(to_resolution(square, 16, spatial_dims=2), square[:, ::4, ::4], rtol=0, atol=1e-12)
