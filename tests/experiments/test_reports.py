"""amg_fast.experiments.reports: fabricated run records -> tables (md, csv, tex) and figures.

The records and the paper's numbers here are made up; the paper module is replaced by a fake.
"""
from __future__ import annotations

import csv
import statistics
import sys
import types

import pytest
from helpers import run_results

from amg_fast.experiments import paper as real_paper
from amg_fast.experiments import reports
from amg_fast.experiments.reports import REPORTERS, write_report

pytest.importorskip("matplotlib")

# The fake paper: a few values, keyed like amg_fast.experiments.paper.
FAKE = {
    ("nrmse", ("amgfno", "ks", 0.1, 32)): 0.02, ("nrmse", ("ffno", "ks", 0.1, 32)): 0.4,
    ("gate", ("ks", 0.1, 32)): 0.5,
    ("omega_fixed", ("ks", 0.1, 32)): 0.02, ("omega_batch", ("ks", 0.1, 32)): 0.025,
    ("omega_delta_pct", ("ks", 0.1, 32)): 25.0,
    ("ablation_amgfno", ("ks", 0.1, 32)): 0.02, ("no_freq_gate", ("ks", 0.1, 32)): 0.03,
    ("alpha_star", ("convex", "ks", 0.1, 32)): 0.5,
}


@pytest.fixture(autouse=True)
def fake_paper(monkeypatch):
    def paper_value(table, **key):
        return FAKE.get((table, tuple(key.values())))

    module = types.ModuleType("amg_fast.experiments.paper")
    module.paper_value = paper_value
    monkeypatch.setitem(sys.modules, "amg_fast.experiments.paper", module)


def rec(model, pde="ks", nu=0.1, res=32, seed=0, *, nrmse=None, status=None, gate=None, fusion="residual",
        alpha=None, variant=None, history=(), error=None):
    """A run record; nrmse None: no results.json (status missing unless given)."""
    spec = dict(model=model, pde=pde, nu=nu, res=res, seed=seed, fusion=fusion, alpha=alpha, variant=variant,
                omega=None)
    results = None if nrmse is None else run_results(model=model, pde=pde, nu=nu, res=res, nrmse=nrmse,
                                                     nrmse_per_step=[nrmse], gate_mean=gate, wall_time_s=1.0,
                                                     gate_mean_last20_epochs=None if gate is None else gate + 0.01)
    return {"name": f"{model}-{variant}-{fusion}-{alpha}_{pde}_nu{nu:g}_f{res}_seed{seed}", "run_dir": f"/r/{seed}",
            "status": status or ("done" if results else "missing"), **spec, "results": results,
            "history": list(history), "error": error}


def curve(epochs=4, gate0=0.6):
    return [{"epoch": e, "train_loss": 1.0 / e, "gate_mean": gate0 / e, "time_s": 0.1,
             **({"test_nrmse": 0.1 / e} if e % 2 == 0 else {})} for e in range(1, epochs + 1)]


def amgfno(nu, res, seed=0, nrmse=0.03, variant=None, **kw):
    return rec("amgfno", "ks" if nu != 0.001 else "burgers", nu, res, seed, nrmse=nrmse, variant=variant,
               gate=0.4, history=curve(), **kw)


FAILED = dict(status="failed", error="Traceback ...\nTrainingDiverged: loss is nan at epoch 3")
RECORDS = {
    "alpha-convex": [rec("s4ffno", nu=nu, res=res, seed=seed, fusion="convex", alpha=a, nrmse=0.1 + a / 10 + seed / 100)
                     for nu in (0.1, 0.125) for res in (32, 64) for a in (0.0, 0.5, 1.0)
                     for seed in ((0, 1) if (nu, res) == (0.1, 32) else (0,))]
    + [rec("s4ffno", nu=0.075, res=32, fusion="convex", alpha=0.5, **FAILED),
       rec("s4ffno", nu=0.075, res=64, fusion="convex", alpha=0.5)],
    "table2": [rec(m, nu=nu, res=res, seed=seed, nrmse=0.01 * (i + 1) + seed / 1000,
                   gate=0.3 if m == "amgfno" else None)
               for i, m in enumerate(("ffno", "multi_input_ffno", "s4ffno", "amgfno"))
               for nu, res in ((0.1, 32), (0.1, 64), (0.075, 64)) for seed in ((0, 1) if m == "amgfno" else (0,))]
    + [rec("unet", nu=0.1, res=32, **FAILED), rec("unet", nu=0.1, res=64)],
    "table3": [amgfno(0.1, 32, seed) for seed in (0, 1)] + [amgfno(0.1, 64), amgfno(0.001, 32),
                                                            rec("amgfno", res=128, **FAILED)],
    "omega-ablation": [amgfno(0.1, 32, seed, nrmse=0.02 + seed / 100) for seed in (0, 1)]
    + [amgfno(0.1, 32, seed, nrmse=0.03 + seed / 100, variant="omega-batch") for seed in (0, 1)]
    + [rec("amgfno", res=64, variant="omega-batch", **FAILED)],
    "freq-gate-ablation": [amgfno(0.1, 32), amgfno(0.1, 32, nrmse=0.06, variant="no-freq-gate"),
                           rec("amgfno", res=64, variant="no-freq-gate"),
                           rec("amgfno", "burgers", 0.001, 64, variant="no-freq-gate", **FAILED)],
}
FIGURES = {"alpha-convex": ("alpha_sweep", "alpha_star_heatmap"), "alpha-additive": (),
           "table2": ("bars_by_nu_f64", "bars_by_f_nu0.1"),
           "table3": ("gate_during_training", "nrmse_and_gate_over_epochs"),
           "omega-ablation": (), "freq-gate-ablation": ()}


def test_reporters_cover_the_experiments():
    from amg_fast.experiments.registry import EXPERIMENTS

    assert set(REPORTERS) == set(EXPERIMENTS) == set(FIGURES)


@pytest.mark.parametrize("exp", [e for e in RECORDS])
def test_each_reporter_writes_its_tables_and_figures(tmp_path, exp):
    out = tmp_path / "reports" / exp
    paths = write_report(exp, RECORDS[exp], out)
    assert {p.name for p in paths} == {"table.md", "table.csv", "table.tex"} | {
        f"{stem}.{ext}" for stem in FIGURES[exp] for ext in ("png", "pdf")}
    assert all(p.parent == out and p.stat().st_size > 0 for p in paths)
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no temporary files left
    rows = list(csv.DictReader((out / "table.csv").read_text().splitlines()))
    assert len(rows) == len(RECORDS[exp])
    by_name = {r["name"]: r for r in RECORDS[exp]}
    for row in rows:
        record = by_name[row["name"]]
        assert row["status"] == record["status"] and row["model"] == record["model"]
        assert row["nrmse"] == ("" if record["results"] is None else repr(record["results"].nrmse))
    md, tex = (out / "table.md").read_text(), (out / "table.tex").read_text()
    assert "failed" in md and "TrainingDiverged: loss is nan" in md
    assert r"\begin{tabular}" in tex and "failed" not in tex and "missing" not in tex


def test_alpha_sweep_table(tmp_path):
    write_report("alpha-convex", RECORDS["alpha-convex"], tmp_path)
    md = (tmp_path / "table.md").read_text()
    # nu=0.1, f=32, alpha=0: seeds 0.1 and 0.11 -> mean +- sample std over 2 seeds
    std = statistics.stdev([0.1, 0.11])
    assert f"| KS | 0.1 | 32 | 0.105 ± {std:.4g} [n=2] | " in md
    assert "| 0 | 0.5 |" in md  # alpha* ours 0, paper 0.5
    lines = {line.split(" | ")[2]: line for line in md.splitlines() if line.startswith("| KS | 0.075")}
    assert "failed" in lines["32"] and "missing" in lines["64"]
    assert "(0/3 α)" not in md and "| - | - |" in lines["64"]  # no alpha*, no paper value
    rows = [r for r in csv.DictReader((tmp_path / "table.csv").read_text().splitlines())]
    assert {r["fusion"] for r in rows} == {"convex"} and {r["alpha"] for r in rows} == {"0.0", "0.5", "1.0"}


def test_table2_ours_beside_the_paper_with_ratio(tmp_path):
    write_report("table2", RECORDS["table2"], tmp_path)
    md = (tmp_path / "table.md").read_text()
    header = next(line for line in md.splitlines() if line.startswith("| Model"))
    # KS by f, then nu (the paper's column order); only the settings that have runs
    assert header == "| Model | KS ν=0.1 f=32 | KS ν=0.075 f=64 | KS ν=0.1 f=64 |"
    amg = statistics.fmean([0.04, 0.041])
    assert f"| AMGFNO | {amg:.4g} ± {statistics.stdev([0.04, 0.041]):.4g} [n=2] (0.02) |" in md
    assert "| FFNO | 0.01 (0.4) |" in md
    assert f"| AMGFNO | KS | 0.1 | 32 | {amg:.4g} ± " in md and f"| 0.02 | {amg / 0.02:.4g} | 0.3 ± 0 [n=2] |" in md
    assert "| U-Net | failed (-) | missing (-) | missing (-) |" in md
    tex = (tmp_path / "table.tex").read_text()
    assert r"$\pm$" in tex and "Multi-Input FFNO" in tex and "Per cell" not in tex


def test_table3_gate_against_the_paper(tmp_path):
    write_report("table3", RECORDS["table3"], tmp_path)
    md = (tmp_path / "table.md").read_text()
    assert "| KS | 0.1 | 32 | 0.41 ± 0 [n=2] | 0.5 | 0.82 |" in md
    assert "| KS | 0.1 | 128 | failed | - | - |" in md


def test_ablations_pair_the_variant_with_the_full_model(tmp_path):
    write_report("omega-ablation", RECORDS["omega-ablation"], tmp_path / "omega")
    md = (tmp_path / "omega" / "table.md").read_text()
    fixed, batch = statistics.fmean([0.02, 0.03]), statistics.fmean([0.03, 0.04])
    row = next(line for line in md.splitlines() if line.startswith("| KS | 0.1 | 32 |"))
    assert f"| {batch:.4g} ± " in row and f"| 0.025 | {batch / 0.025:.4g} |" in row
    assert row.endswith(f"| {100 * (batch - fixed) / fixed:+.1f}% | +25.0% |")
    assert "| KS | 0.1 | 64 | missing (-) | failed | - | - | - | - |" in md
    write_report("freq-gate-ablation", RECORDS["freq-gate-ablation"], tmp_path / "freq")
    md = (tmp_path / "freq" / "table.md").read_text()
    assert "| KS | 0.1 | 32 | 0.03 (0.02) | 0.06 | 0.03 | 2 | +100.0% | +50.0% |" in md


def test_empty_figures_are_skipped_and_said(tmp_path):
    records = [rec("amgfno", nu=0.1, res=32, nrmse=0.02, gate=0.5)]  # no history
    paths = write_report("table3", records, tmp_path)
    assert [p.name for p in paths] == ["table.md", "table.csv", "table.tex"]
    md = (tmp_path / "table.md").read_text()
    assert "gate_during_training: skipped, no data" in md and "nrmse_and_gate_over_epochs: skipped" in md
    write_report("alpha-additive", [], tmp_path / "none")  # no runs at all: still the three tables


def test_with_the_papers_numbers(tmp_path, monkeypatch):
    """The real paper module: every lookup's keys are ones paper_value takes."""
    monkeypatch.setitem(sys.modules, "amg_fast.experiments.paper", real_paper)
    for exp in REPORTERS:
        write_report(exp, RECORDS.get(exp, []), tmp_path / exp)
    assert "| AMGFNO | 0.0405 ± 0.0007071 [n=2] (0.023) |" in (tmp_path / "table2" / "table.md").read_text()
    assert "| 0.0249 | 1.406 | +40.0% | +10.1% |" in (tmp_path / "omega-ablation" / "table.md").read_text()


def test_unknown_experiment(tmp_path):
    with pytest.raises(ValueError, match=r"'table9'.*known: alpha-convex, alpha-additive, table2"):
        write_report("table9", [], tmp_path)


def test_missing_matplotlib_names_the_plot_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(ImportError, match=r"amg_fast\[plot\]"):
        write_report("table3", RECORDS["table3"], tmp_path)
    assert not list(tmp_path.iterdir())


def test_stats_format():
    assert reports._fmt(reports.Stats((0.5,))) == "0.5"
    assert reports._fmt(reports.Stats((1.0, 3.0))) == "2 ± 1.414 [n=2]"
    assert reports._fmt(reports.Stats((), "failed")) == "failed" and reports._fmt(reports.Stats(), md=False) == "-"


def test_table2_bars_show_s4ffno_at_alpha_star_from_the_sweeps_runs():
    """Table 2's bar charts take S4FFNO at alpha* from alpha-convex runs the sweep holds: the alpha
    with the lowest seed-mean nRMSE, and nothing where there is no sweep."""
    from amg_fast.experiments.reports import _alpha_star_stats

    sweep = [rec("s4ffno", fusion="convex", alpha=a, nrmse=e, seed=s)
             for a, errors in ((0.0, (0.5, 0.7)), (0.5, (0.3, 0.35)), (1.0, (0.2, 0.9))) for s, e in enumerate(errors)]
    stats = _alpha_star_stats(sweep + [rec("s4ffno", nrmse=0.1)], "ks", 0.1, 32)  # the residual run is not alpha*
    assert stats.values == (0.3, 0.35)
    assert _alpha_star_stats(sweep, "ks", 0.1, 128).n == 0
