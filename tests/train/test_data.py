"""amg_fast.train.data: the normalisation statistics against explicit numpy formulas, and the
evaluation batches."""
import numpy as np
import pytest
import torch

from amg_fast.data.datasets import TrajectoryDataset
from amg_fast.train.config import TrainConfig
from amg_fast.train.data import eval_batches, normalization_stats
from amg_fast.train.trainer import train


@pytest.fixture
def u(gen):
    """[N, T, S, C] with a different mean and scale per channel."""
    return torch.randn(5, 6, 8, 2, generator=gen, dtype=torch.float64) * torch.tensor([1.0, 3.0]) + torch.tensor(
        [0.5, -2.0])


def test_statistics_of_the_states_and_the_next_states(u):
    stats = normalization_stats(u, normalize=True, increment=False)
    x = u.numpy()
    assert stats["in_mean"].numpy() == pytest.approx(x.mean(axis=(0, 1, 2)), rel=1e-6)
    assert stats["in_std"].numpy() == pytest.approx(x.reshape(-1, 2).std(axis=0, ddof=1), rel=1e-6)
    assert stats["out_mean"].numpy() == pytest.approx(x[:, 1:].mean(axis=(0, 1, 2)), rel=1e-6)
    assert stats["out_std"].numpy() == pytest.approx(x[:, 1:].reshape(-1, 2).std(axis=0, ddof=1), rel=1e-6)
    assert all(v.dtype == torch.float32 and v.shape == (2,) for v in stats.values())


def test_increment_statistics_telescope(u):
    """The mean increment over t is (u_{T-1} - u_0) / (T - 1) (a telescoping sum); its std is
    that of the explicit differences."""
    stats = normalization_stats(u, normalize=True, increment=True)
    x = u.numpy()
    T = x.shape[1]
    assert stats["out_mean"].numpy() == pytest.approx((x[:, -1] - x[:, 0]).mean(axis=(0, 1)) / (T - 1),
                                                      rel=1e-5, abs=1e-7)
    diffs = np.stack([x[:, t + 1] - x[:, t] for t in range(T - 1)], axis=1)
    assert stats["out_std"].numpy() == pytest.approx(diffs.reshape(-1, 2).std(axis=0, ddof=1), rel=1e-6)
    assert stats["in_mean"].numpy() == pytest.approx(x.mean(axis=(0, 1, 2)), rel=1e-6)


def test_no_normalisation_is_the_identity(u):
    assert normalization_stats(u, normalize=False, increment=True) == {}
    assert normalization_stats(u, normalize=False, increment=False) == {}


def test_constant_data_gets_a_positive_std():
    stats = normalization_stats(torch.ones(2, 3, 4, 1), normalize=True, increment=True)
    assert float(stats["out_std"]) > 0 and float(stats["in_mean"]) == 1.0 and float(stats["out_mean"]) == 0.0


def test_a_normalised_run_stores_the_training_splits_statistics(tiny_data, tmp_path):
    """The checkpoint's Normalized buffers are the statistics of the training split as the
    dataset reads it (numpy over all its frames), not of the test split."""
    out = tmp_path / "run"
    train(TrainConfig(data=str(tiny_data), out=str(out), epochs=1, normalize=True, increment=True, res=32, n_train=12,
                      n_test=4, batch_size=4, width=8, modes=8, eval_every=100, device="cpu"), log=lambda *a: None)
    state = torch.load(out / "checkpoint.pt", weights_only=True)["model"]
    ds = TrajectoryDataset(tiny_data, 32, split="train")
    x = np.stack([ds[i][0].numpy() for i in range(len(ds))]).astype(np.float64)  # [12, T, 32, 1]
    assert len(ds) == 12
    assert state["in_mean"].numpy() == pytest.approx(x.mean(axis=(0, 1, 2)), rel=1e-5, abs=1e-7)
    assert state["in_std"].numpy() == pytest.approx(x.reshape(-1, 1).std(axis=0, ddof=1), rel=1e-5)
    assert state["out_std"].numpy() == pytest.approx(np.diff(x, axis=1).reshape(-1, 1).std(axis=0, ddof=1), rel=1e-5)


def test_eval_batches_keep_the_order_and_the_limit():
    u, w = torch.arange(7.0)[:, None, None, None].expand(7, 2, 3, 1), torch.arange(7.0)
    batches = eval_batches(u, w, 3, torch.device("cpu"))
    assert [b[1].tolist() for b in batches] == [[0, 1, 2], [3, 4, 5], [6]]
    assert all(torch.equal(b[0][:, 0, 0, 0], b[1]) for b in batches)
    assert [b[1].tolist() for b in eval_batches(u, w, 3, torch.device("cpu"), limit=4)] == [[0, 1, 2], [3]]
    assert [b[1].tolist() for b in eval_batches(u, w, 10, torch.device("cpu"), limit=100)] == [list(range(7))]
