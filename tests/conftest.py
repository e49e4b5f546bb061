import pytest
import torch


@pytest.fixture
def gen(request):
    """A torch.Generator seeded from the test's node id: fresh inputs per test, reproducible runs."""
    import zlib

    return torch.Generator().manual_seed(zlib.crc32(request.node.nodeid.encode()))


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU (compiled Triton kernels / bf16); none on this machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)
