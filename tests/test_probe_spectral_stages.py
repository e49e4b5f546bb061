"""bench/probe_spectral_stages.py (the GPU campaign's spectral probe) runs against the current kernels:
every variant and stage it times is called, on CPU tensors in Triton's interpreter, with the timer
replaced by one call (its numbers need a GPU; what is checked is that each timed call runs)."""
import pytest
from helpers import load_bench

from amg_fast.train.precision import precision_scope


@pytest.mark.parametrize("transform", ["dft", "fft"])
@pytest.mark.parametrize("tf32", [False, True], ids=["dots=tf32x3", "dots=tf32"])
def test_every_variant_and_stage_runs(transform, tf32, monkeypatch):
    from amg_fast.kernels import limits

    probe = load_bench("probe_spectral_stages")
    timed = []

    def call_once(fn):
        fn()
        timed.append(fn)
        return 1.0

    monkeypatch.setattr(probe, "graph_ms", call_once)
    monkeypatch.setattr(limits, "TRANSFORM_FFT_MIN_S", 16 if transform == "fft" else 512)  # the stages' transform
    with precision_scope("tf32" if tf32 else "fp32"):  # TF32 allowed: the probe's "dots=tf32" rows
        row = probe.stages(16, rows=2, width=16, device="cpu")
    assert row["auto_transform"] == transform
    variants = [f"{v}.{m}" for v in probe.VARIANTS for m in ("fwd", "fwd+bwd")]
    bf16 = [f"bf16.{v}.fwd+bwd" for v in probe.BF16_VARIANTS] if tf32 else []
    stages = ["stage.analysis", "stage.mix+synthesis", "stage.dweight", "stage.weight_planes", "stage.mix",
              "stage.mix.torch", "stage.dweight.torch"]
    references = [f"reference.{k}" for k in ("fwd", "fwd+bwd", "rfft", "einsum", "irfft")]
    assert sorted(k for k, v in row.items() if v == 1.0) == sorted(variants + bf16 + stages + references)
    assert len(timed) == len(variants) + len(bf16) + len(stages) + len(references)


def test_a_stopped_probe_keeps_what_its_current_row_measured(tmp_path, monkeypatch):
    """bench/_providers.probe_main: a row that SIGINT (the campaign's time limit, KeyboardInterrupt) stops
    part way is written with what its measure() had filled in and "stopped": true; exit 130; the rows
    before it are kept whole."""
    import json

    import torch

    probe_main = load_bench("probe_spectral_stages").probe_main  # bench/_providers.py's
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *_: "fake GPU")

    def measure(S, into):
        into["S"] = S
        into["first.ms"] = 1.0
        if S == 64:
            raise KeyboardInterrupt
        into["second.ms"] = 2.0

    out = tmp_path / "probe.json"
    code = probe_main(["--sizes", "32", "64", "128", "--json", str(out)], "doc", [32], "dots", (("tf32x3", False),),
                      measure)
    rows = json.loads(out.read_text())["rows"]
    assert code == 130
    assert rows == [{"dots": "tf32x3", "S": 32, "first.ms": 1.0, "second.ms": 2.0},
                    {"dots": "tf32x3", "S": 64, "first.ms": 1.0, "stopped": True}]
