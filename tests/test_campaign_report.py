"""scripts/campaign_report.py: run directories -> fidelity.json / precision.json and the markdown.

The run directories here are fabricated (the trainer's file layout, made-up numbers).
"""
import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import run_results

from amg_fast.train.rundir import RunDir

ROOT = Path(__file__).parents[1]


def fake_run(path, model, res, *, precision="fp32", epochs=4, done=4, nrmse=None, gates=None):
    path.mkdir(parents=True)
    cfg = {"model": model, "pde": "ks", "nu": 0.1, "res": res, "epochs": epochs, "cuda_graph": True,
           "fast_kernels": True, "precision": precision}
    (path / "config.json").write_text(json.dumps(cfg))
    rows = [{"epoch": e, "train_loss": 1.0 / e, "time_s": 2.0, "gate_mean": None if gates is None else gates[e - 1]}
            for e in range(1, done + 1)]
    for row in rows[1::2]:
        row["test_nrmse"] = 0.5 / row["epoch"]
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    if nrmse is not None:
        RunDir(path).write_results(run_results(model=model, res=res, nrmse=nrmse, gate_mean=0.6,
                                               gate_mean_last20_epochs=0.65, precision=precision))


def test_report_pairs_each_run_with_the_papers_numbers(tmp_path):
    fake_run(tmp_path / "fidelity" / "ffno-f32", "ffno", 32, nrmse=0.892)
    fake_run(tmp_path / "fidelity" / "amgfno-f128", "amgfno", 128, done=3, gates=[0.5, 0.3, 0.1])
    fake_run(tmp_path / "precision" / "fp32-seed0", "amgfno", 32, nrmse=0.2)
    fake_run(tmp_path / "precision" / "bf16-seed0", "amgfno", 32, precision="bf16", nrmse=0.25)
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "campaign_report.py"), str(tmp_path)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    rows = {r["run"]: r for r in json.loads((tmp_path / "fidelity.json").read_text())}
    ffno, amg = rows["ffno-f32"], rows["amgfno-f128"]
    assert ffno["status"] == "finished" and ffno["paper_nrmse"] == 0.446
    assert ffno["ratio_to_paper"] == pytest.approx(0.892 / 0.446) and ffno["paper_gate_mean"] is None
    assert amg["status"] == "unfinished" and amg["epochs_done"] == 3 and amg["paper_nrmse"] == 0.003
    assert amg["nrmse"] == pytest.approx(0.25)  # its last test nRMSE (epoch 2)
    assert amg["train_time_s"] == pytest.approx(6.0) and amg["eval_time_s"] == 0
    assert amg["gate_mean_last20_epochs"] == pytest.approx(0.3) and amg["paper_gate_mean"] == 0.0008
    precision = {r["precision"]: r for r in json.loads((tmp_path / "precision.json").read_text())}
    assert precision["bf16"]["nrmse_vs_fp32"] == pytest.approx(1.25)
    assert "| ffno-f32 | ffno | 32 | 4/4 | 0.8920 | 0.446 | 2.00 |" in proc.stdout


def test_missing_results_directory_is_an_error(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "campaign_report.py"), str(tmp_path / "none")],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "does not exist" in proc.stderr
