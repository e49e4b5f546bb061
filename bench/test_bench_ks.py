"""KS data generation: batched ETDRK4 (default step) vs the paper's scipy Radau pipeline.

Run: pytest bench/test_bench_ks.py --benchmark-only. One paper trajectory = 26 frames up to
t = 2.5 on N = 512 points, nu = 0.1; extra_info holds trajectories per second (from the median).
On a machine shared with other jobs, torch's two intra-op threads can slow down many-fold: compare
runs taken while the machine is otherwise idle.
"""
import pytest

from amg_fast.data.ks import DEFAULT_DT, KS_L, KS_TIMES, random_initial_conditions, solve_ks

NU = 0.1


def record(benchmark, method, batch):
    benchmark.group = "ks-generation"
    benchmark.extra_info.update(method=method, batch=batch, nu=NU, N=512, frames=len(KS_TIMES),
                                dt=DEFAULT_DT if method == "etdrk4" else "adaptive")
    if benchmark.stats is not None:  # None under --benchmark-disable (one untimed run)
        benchmark.extra_info["trajectories_per_s"] = batch / benchmark.stats.stats.median


@pytest.mark.parametrize("batch", [64, 256], ids=lambda b: f"B{b}")  # 256 = generate_ks batch_size
def test_etdrk4_batched(benchmark, batch):
    u0 = random_initial_conditions(batch, seed=0)
    benchmark.pedantic(solve_ks, args=(u0,), kwargs=dict(L=KS_L, nu=NU, t=KS_TIMES), rounds=3, warmup_rounds=1)
    record(benchmark, "etdrk4", batch)


def test_radau_one_trajectory(benchmark):
    u0 = random_initial_conditions(1, seed=0)
    benchmark.pedantic(solve_ks, args=(u0,), kwargs=dict(L=KS_L, nu=NU, t=KS_TIMES, method="radau"), rounds=2)
    record(benchmark, "radau", 1)
