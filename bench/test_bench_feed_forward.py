"""feed_forward (the FFNO block's Linear(H, 4H) -> ReLU -> Linear(4H, H)): reference vs
torch.compile(reference) vs the Triton backend (feed_forward's method="auto"; AMG_FAST_FFN_METHOD
picks the path), fwd / bwd / fwd+bwd.

x [B, T, S, H]; w1 [4H, H], b1 [4H], w2 [H, 4H], b2 [H]. bench/probe_ffn.py compares the two
Triton-backend paths side by side.
Run: pytest bench/test_bench_feed_forward.py --benchmark-only (knobs: see bench/_providers.py).
"""
import pytest

from _ops import bench_case
from _providers import cases, modes


@pytest.mark.parametrize("mode", modes())
@pytest.mark.parametrize("S, provider", cases())
def test_feed_forward(benchmark, S, provider, mode):
    bench_case(benchmark, "feed_forward", S, provider, mode)
