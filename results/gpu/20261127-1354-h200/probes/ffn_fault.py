"""Scratch (GPU session 2026-11-27): which fused feed-forward kernel / tiling faults in bf16 on a GPU.
Each case in its own process (a CUDA fault is sticky), CUDA_LAUNCH_BLOCKING=1."""
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

CASE = r'''
import json, sys, torch
from amg_fast.kernels import feed_forward as K
from amg_fast.kernels._common import dot_precision, next_pow2, cdiv
kernel, dtype_name, M, H, F, BM, BF, W, S, reload, wdt, dydt = sys.argv[1:]
M, H, F, BM, BF, W, S = map(int, (M, H, F, BM, BF, W, S))
dtype = getattr(torch, dtype_name)
torch.manual_seed(0)
import os; dev = os.environ.get("PROBE_DEV", "cuda")
x = torch.randn(M, H, device=dev).to(dtype)
wd = getattr(torch, wdt)
w1 = (torch.randn(F, H, device=dev) * H ** -0.5).to(wd)
b1 = (torch.randn(F, device=dev) * 0.1).to(wd)
w2 = (torch.randn(H, F, device=dev) * F ** -0.5).to(wd)
b2 = (torch.randn(H, device=dev) * 0.1).to(wd)
dy = torch.randn(M, H, device=dev).to(getattr(torch, dydt))
dots = dot_precision(dtype, reduced=True)
cfg = dict(BLOCK_M=BM, BLOCK_F=BF, num_warps=W, num_stages=S, BLOCK_I=next_pow2(H), BLOCK_O=next_pow2(H))
xd, w1d, b1d, w2d, b2d, dyd = (t.double() for t in (x, w1, b1, w2, b2, dy))
pre = xd @ w1d.T + b1d
dh = (dyd @ w2d) * (pre > 0)
if kernel == "fwd":
    out = torch.empty(M, H, device=dev, dtype=dtype)
    K._ffn_fwd_kernel[(cdiv(M, BM),)](x, w1, b1, w2, b2, out, out, M, H, F, H, RESIDUAL=False, DOT_PRECISION=dots, **cfg)
    want = pre.relu() @ w2d.T + b2d
elif kernel == "dx":
    out = torch.empty(M, H, device=dev, dtype=dtype)
    K._ffn_bwd_dx_kernel[(cdiv(M, BM),)](x, w1, b1, w2, dy, out, M, H, F, H, DOT_PRECISION=dots, **cfg)
    want = dh @ w1d
else:
    n_f = cdiv(F, BF); groups = max(1, min(cdiv(M, BM), 256 // n_f))
    rpg = cdiv(cdiv(M, groups), BM) * BM
    part = torch.empty(groups, F * H * 2 + F + H, device=dev, dtype=torch.float32)
    K._ffn_bwd_dw_kernel[(n_f, groups)](x, w1, b1, w2, dy, part, M, H, F, H, rpg, part.stride(0),
                                         DOT_PRECISION=dots, RELOAD_T=reload == "1", **cfg)
    out = part.sum(0)[: F * H].view(F, H)
    want = dh.T @ xd
torch.cuda.synchronize() if dev == "cuda" else None
err = ((out.double() - want).norm() / want.norm()).item()
print(json.dumps({"rel_err": err}))
'''

CASES = []
for wdt, dydt in (("float32", "bfloat16"), ("float32", "float32"), ("bfloat16", "float32")):
    for k in ("fwd", "dx", "dw"):
        CASES.append((k, "bfloat16", 3200, 128, 512, 64, 32, 8, 2, "0", wdt, dydt))
CASES.append(("dw", "bfloat16", 3200, 128, 512, 16, 64, 8, 2, "1", "float32", "float32"))
CASES.append(("dx", "bfloat16", 200, 16, 80, 64, 32, 8, 2, "0", "float32", "float32"))


def run(case):
    env = dict(os.environ, CUDA_LAUNCH_BLOCKING="1")
    try:
        p = subprocess.run([sys.executable, "-c", CASE, *map(str, case)], capture_output=True, text=True, timeout=100, env=env)
        tail = (p.stdout + p.stderr).strip().splitlines()
        return {"case": case, "rc": p.returncode, "out": tail[-1] if tail else "", "err": "\n".join(tail[-4:])}
    except subprocess.TimeoutExpired:
        return {"case": case, "rc": "timeout"}


if __name__ == "__main__":
    out = sys.argv[1]
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(run, CASES))
    for r in results:
        print(r["case"], r["rc"], r["out"][:200])
    with open(out, "w") as f:
        json.dump(results, f, indent=1)
