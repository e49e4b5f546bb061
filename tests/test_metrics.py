"""nrmse: definition, perfect and zero predictors, bad input."""
import pytest
import torch
from helpers import randn

from amg_fast.metrics import nrmse, nrmse_per_sample_step


@pytest.mark.parametrize("shape", [(3, 5, 16), (2, 4, 8, 3), (2, 3, 6, 5, 1)],
                         ids=["B3-T5-S16", "B2-T4-S8-C3", "B2-T3-X6-Y5-C1"])
def test_matches_explicit_loop(shape, gen):
    pred, true = randn(*shape, generator=gen), randn(*shape, generator=gen)
    total = 0.0
    for b in range(shape[0]):
        for t in range(shape[1]):
            diff = (pred[b, t] - true[b, t]).flatten()
            total += float(diff.dot(diff).sqrt() / true[b, t].flatten().dot(true[b, t].flatten()).sqrt())
    assert float(nrmse(pred, true)) == pytest.approx(total / (shape[0] * shape[1]), rel=1e-12)


def test_perfect_predictor_is_zero_and_zero_predictor_is_one(gen):
    true = randn(4, 25, 32, generator=gen)
    assert float(nrmse(true.clone(), true)) == 0.0
    assert float(nrmse(torch.zeros_like(true), true)) == pytest.approx(1.0, rel=1e-12)


def test_per_sample_step_shape(gen):
    true = randn(2, 3, 8, 1, generator=gen)
    assert nrmse_per_sample_step(2 * true, true).shape == (2, 3)
    assert torch.allclose(nrmse_per_sample_step(2 * true, true), torch.ones(2, 3, dtype=torch.float64))


def test_bad_input():
    with pytest.raises(ValueError, match=r"pred must have the shape of true \(2, 3, 4\)"):
        nrmse(torch.zeros(2, 3, 5), torch.ones(2, 3, 4))
    with pytest.raises(ValueError, match=r"true must have rank 3 to 5 \(\[B, T, S\]"):
        nrmse(torch.zeros(2, 3), torch.ones(2, 3))
    with pytest.raises(ValueError, match=r"true\[1, 0\] is identically zero"):
        true = torch.ones(2, 2, 4)
        true[1, 0] = 0
        nrmse(torch.zeros_like(true), true)
