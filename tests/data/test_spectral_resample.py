"""omega_f on signals with known spectra; periodic cubic resampling exactness and order."""
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
