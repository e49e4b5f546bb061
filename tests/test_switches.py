"""The kernel switches (environment variables, docs/kernels.md) that a GPU session times: every one the
code reads is documented and resolvable here, every one scripts/gpu_campaign.sh's default
CAMPAIGN_VARIANTS sets is a switch, changes the choice it names, and a bad value is refused by name.

Each switch is resolved in a fresh interpreter (the spectral ones and AMG_FAST_SPECTRAL_TRANSFORM
are read at import), all of them in one subprocess.
"""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import amg_fast.kernels.limits as L

ROOT = Path(__file__).parents[1]

# switch -> the expression that resolves it (kernels.limits as L, kernels.spectral_conv as sc)
RESOLVERS = {
    "AMG_FAST_FFN_METHOD": "L.ffn_method('auto', torch.float32)",
    "AMG_FAST_FFN_PERSISTENT": "L.ffn_persistent(False)",
    "AMG_FAST_FFN_DH": "L.ffn_dh_method()",
    "AMG_FAST_READOUT_GEMM": "L.readout_gemm(False)",
    "AMG_FAST_S4D_METHOD": "L.s4d_method('auto', 25)",
    "AMG_FAST_S4D_CHANNELS_FIRST": "L.s4d_channels_first(False)",
    "AMG_FAST_WGRAD": "L.wgrad_method('auto', torch.float32)",
    "AMG_FAST_GATE_X3": "L.gate_x3()",
    "AMG_FAST_GATE_METHOD": "L.gate_method('auto', torch.float32)",
    "AMG_FAST_GATE_BWD_WGMMA": "L.gate_bwd_wgmma(False)",
    "AMG_FAST_MEMORY_READOUT": "L.memory_readout()",
    "AMG_FAST_SPECTRAL_TRANSFORM": "L.spectral_transform('auto', 128)",
    "AMG_FAST_SPECTRAL_MIX": "sc._mix_method(torch.float32, 'cuda')",  # auto as in the fp32 / TF32 step on a GPU
    "AMG_FAST_SPECTRAL_DFT_GEMM": "sc._dft_gemm(torch.float32, 'cuda')",
    "AMG_FAST_SPECTRAL_REDUCED_DOTS": "sc.REDUCED_PRECISION_DOTS",
    "AMG_FAST_SPECTRAL_WEIGHT_PLANES": "sc.WEIGHT_PLANES",
    "AMG_FAST_SPECTRAL_X3": "sc._x3_method()",
}

_RESOLVE = """
import importlib, json, os, sys
import torch
settings = json.loads(sys.argv[1])
out = []
for env in settings:
    for name in {names}:
        os.environ.pop(name, None)
    os.environ.update(env)
    try:
        import amg_fast.kernels.limits as L
        import amg_fast.kernels.spectral_conv as sc
        L, sc = importlib.reload(L), importlib.reload(sc)
        out.append({{name: repr(eval(expr)) for name, expr in {resolvers}.items()}})
    except ValueError as exc:
        out.append({{"error": str(exc)}})
print(json.dumps(out))
"""


def resolve(settings: list[dict]) -> list[dict]:
    """For each environment setting, every switch's resolved choice (or the error the setting raised)."""
    code = _RESOLVE.format(names=list(RESOLVERS), resolvers=RESOLVERS)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AMG_FAST_")}
    env["TRITON_INTERPRET"] = "1"
    proc = subprocess.run([sys.executable, "-c", code, json.dumps(settings)], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[-1])


def campaign_variants() -> list[tuple[str, dict]]:
    """(name, environment) of each --variant word in gpu_campaign.sh's default CAMPAIGN_VARIANTS."""
    script = (ROOT / "scripts" / "gpu_campaign.sh").read_text()
    default = re.search(r"VARIANTS=\$\{CAMPAIGN_VARIANTS:-(.*?)\}", script, re.S).group(1)
    words = default.replace("\\\n", " ").split()
    return [(w.split(":", 1)[0], dict(item.split("=", 1) for item in w.split(":", 1)[1].split(","))) for w in words]


def test_every_switch_in_the_code_is_documented_and_resolved_here():
    sources = [p.read_text() for d in ("kernels", "amg_fast/ops", "amg_fast/layers", "amg_fast/models")
               for p in (ROOT / d).rglob("*.py")]  # where the kernels' switches are read (not train/'s cache)
    in_code = {name for text in sources for name in re.findall(r"\bAMG_FAST_[A-Z0-9_]+[A-Z0-9]\b", text)}
    assert in_code == set(RESOLVERS)
    assert set(L.KERNEL_SWITCHES) == set(RESOLVERS)  # the ones bench/gpu_summary.py sets in its own process
    docs = (ROOT / "docs" / "kernels.md").read_text()
    assert [name for name in RESOLVERS if f"`{name}`" not in docs] == []


def test_campaign_variants_name_switches_that_change_their_choice():
    variants = campaign_variants()
    assert variants and len({word for word, _ in variants}) == len(variants)  # parsed, each name once
    assert all(name in RESOLVERS for _, env in variants for name in env), variants
    default, *chosen = resolve([{}] + [env for _, env in variants])
    for (word, env), got in zip(variants, chosen):
        assert "error" not in got, (word, got)
        for name in env:
            assert got[name] != default[name], f"variant {word}: {name}={env[name]} changed nothing"


def test_bad_values_are_refused_by_name_and_empty_means_default():
    names = list(RESOLVERS)
    default, *results = resolve([{}] + [{name: "bogus"} for name in names] + [{name: ""} for name in names])
    bad, empty = results[:len(names)], results[len(names):]
    for name, got in zip(names, bad):
        assert name in got.get("error", ""), (name, got)
    for name, got in zip(names, empty):
        assert got == default, (name, got)
