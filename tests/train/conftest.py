import numpy as np
import pytest
from helpers import translating_waves

from amg_fast.data.h5 import write_amg_fast


@pytest.fixture
def tiny_data(tmp_path):
    """A small amg_fast-layout file: 12 train + 4 test trajectories, 6 frames, 64 points."""
    path = tmp_path / "tiny.h5"
    write_amg_fast(path, translating_waves(16), np.arange(64) / 64, np.arange(6) * 0.1,
                   attrs={"pde": "ks", "n_test": 4})
    return path
