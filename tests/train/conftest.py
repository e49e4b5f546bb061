import numpy as np
import pytest
from helpers import translating_waves

from amg_fast.data.h5 import write_amg_fast
from amg_fast.train.config import TrainConfig
from amg_fast.train.trainer import train


@pytest.fixture
def tiny_data(tmp_path):
    """A small amg_fast-layout file: 12 train + 4 test trajectories, 6 frames, 64 points."""
    path = tmp_path / "tiny.h5"
    write_amg_fast(path, translating_waves(16), np.arange(64) / 64, np.arange(6) * 0.1,
                   attrs={"pde": "ks", "n_test": 4})
    return path


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """(run directory, data file) of a finished 1-epoch run on a tiny_data-like file (one per module)."""
    tmp = tmp_path_factory.mktemp("finished")
    data = tmp / "tiny.h5"
    write_amg_fast(data, translating_waves(16), np.arange(64) / 64, np.arange(6) * 0.1, attrs={"pde": "ks", "n_test": 4})
    cfg = dict(res=32, n_train=4, n_test=2, batch_size=4, width=8, eval_every=100, device="cpu", epochs=1)
    train(TrainConfig(data=str(data), out=str(tmp / "run"), **cfg), log=lambda *a: None)
    return tmp / "run", data
