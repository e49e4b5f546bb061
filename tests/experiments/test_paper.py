"""amg_fast.experiments.paper: the paper's numbers as data (counts, spot checks, lookup), and, where the
paper's LaTeX source sits beside the clone (../shared/paper/amgfno_paper.tex), a check of the
transcription against the source's tables."""
from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from amg_fast.experiments import paper

KS_NUS = (0.075, 0.1, 0.125)
RES = (32, 64, 128)
MODELS = ("ffno", "multi_input_ffno", "s4ffno", "amgfno", "factformer", "gkt", "unet")
SETTINGS = [("ks", nu, res) for nu in KS_NUS for res in RES] + [("burgers", 0.001, res) for res in RES]

TEX = Path(__file__).resolve().parents[2].parent / "shared" / "paper" / "amgfno_paper.tex"
needs_tex = pytest.mark.skipif(not TEX.is_file(), reason=f"paper source not found at {TEX} "
                               "(CI has shared/ beside the clone)")


def test_counts_and_keys():
    assert set(paper.TABLE2_NRMSE) == {(m, pde, nu, res) for m in MODELS for pde, nu, res in SETTINGS}
    assert len(paper.TABLE2_NRMSE) == 84
    for table in (paper.TABLE3_GATE, paper.OMEGA_F, paper.FREQ_GATE_ABLATION, paper.ABLATION_AMGFNO):
        assert set(table) == set(SETTINGS) and len(table) == 12
    assert set(paper.OMEGA_ABLATION) == {(nu, res) for nu in KS_NUS for res in RES}
    assert all(set(row) == {"fixed", "batch", "delta_pct"} for row in paper.OMEGA_ABLATION.values())
    assert len(paper.ALPHA_STAR) == 15
    assert {k for k in paper.ALPHA_STAR if k[0] == "additive"} == {("additive", "ks", nu, res)
                                                                  for nu in KS_NUS for res in RES}
    assert {k for k in paper.ALPHA_STAR if k[0] == "convex"} == {("convex", "ks", nu, res)
                                                                for nu in KS_NUS for res in (64, 128)}
    assert len(paper.ALPHA_STAR_NRMSE) == 3
    assert "Adaptive Memory Gate for Neural Operators" in paper.SOURCE


def _all_values():
    yield from paper.TABLE2_NRMSE.values()
    for table in (paper.TABLE3_GATE, paper.OMEGA_F, paper.FREQ_GATE_ABLATION, paper.ABLATION_AMGFNO,
                  paper.ALPHA_STAR, paper.ALPHA_STAR_NRMSE, paper.TEXT_VALUES):
        yield from table.values()
    for row in paper.OMEGA_ABLATION.values():
        yield from row.values()


def test_values_finite_nonnegative():
    values = list(_all_values())
    assert all(isinstance(v, float) and math.isfinite(v) and v >= 0 for v in values)
    assert all(0 < v < 1 for v in paper.TABLE3_GATE.values())
    assert all(0 < v < 1 for v in paper.OMEGA_F.values())


def test_spot_checks():
    t2 = paper.TABLE2_NRMSE
    assert t2["ffno", "ks", 0.1, 32] == 0.446
    assert t2["s4ffno", "ks", 0.1, 32] == 0.108
    assert t2["amgfno", "ks", 0.1, 32] == 0.023
    assert t2["gkt", "ks", 0.1, 32] == 0.601
    assert t2["factformer", "burgers", 0.001, 128] == 0.117
    assert t2["multi_input_ffno", "ks", 0.075, 128] == 0.057
    assert (paper.TABLE3_GATE["ks", 0.1, 32], paper.TABLE3_GATE["ks", 0.1, 64],
            paper.TABLE3_GATE["ks", 0.1, 128]) == (0.7036, 0.2150, 0.0008)
    assert paper.TABLE3_GATE["burgers", 0.001, 32] == 0.0267
    assert paper.OMEGA_F["ks", 0.075, 32] == paper.OMEGA_F["ks", 0.125, 32] == 0.584
    assert paper.OMEGA_F["burgers", 0.001, 128] == 0.0002
    assert paper.OMEGA_ABLATION[0.075, 64] == {"fixed": 0.0208, "batch": 0.0250, "delta_pct": 20.1}
    assert paper.FREQ_GATE_ABLATION["ks", 0.075, 32] == 0.0573
    assert paper.ALPHA_STAR["convex", "ks", 0.075, 64] == 0.25
    assert paper.ALPHA_STAR["additive", "ks", 0.1, 64] == 1.0


def test_cross_table_consistency():
    # Table 2's AMGFNO row is Table 5's AMGFNO row rounded; Table 4's fixed column is Table 5's KS part.
    for (pde, nu, res), precise in paper.ABLATION_AMGFNO.items():
        assert abs(paper.TABLE2_NRMSE["amgfno", pde, nu, res] - precise) <= 0.0005 + 1e-12
        if pde == "ks":
            assert paper.OMEGA_ABLATION[nu, res]["fixed"] == precise
    # Delta-% is the per-batch degradation relative to fixed, from unrounded values: it must lie in the
    # range the printed 4-decimal values allow.
    h = 0.00005
    for row in paper.OMEGA_ABLATION.values():
        lo = 100 * ((row["batch"] - h) - (row["fixed"] + h)) / (row["fixed"] + h)
        hi = 100 * ((row["batch"] + h) - (row["fixed"] - h)) / (row["fixed"] - h)
        assert lo - 0.05 <= row["delta_pct"] <= hi + 0.05
    deltas = [row["delta_pct"] for row in paper.OMEGA_ABLATION.values()]
    assert (min(deltas), max(deltas)) == (paper.TEXT_VALUES["omega_batch_degradation_pct_min"],
                                          paper.TEXT_VALUES["omega_batch_degradation_pct_max"])


def test_paper_value_lookup():
    pv = paper.paper_value
    assert pv("nrmse", model="amgfno", pde="ks", nu=0.10, res=32) == 0.023
    assert pv("gate", pde="ks", nu=0.1, res=64) == 0.2150
    assert pv("omega_f", pde="burgers", nu=0.001, res=32) == 0.0062
    assert pv("omega_batch", nu=0.075, res=32) == 0.0651
    assert pv("omega_batch", pde="ks", nu=0.075, res=32) == 0.0651
    assert pv("omega_batch", pde="burgers", nu=0.001, res=32) is None
    assert pv("no_freq_gate", pde="burgers", nu=0.001, res=128) == 0.0122
    assert pv("alpha_star", fusion="additive", pde="ks", nu=0.125, res=32) == 2.0
    assert pv("alpha_star", fusion="convex", pde="ks", nu=0.125, res=32) is None  # not per nu in the paper
    assert pv("nrmse", model="amgfno", pde="ks", nu=0.2, res=32) is None
    assert pv("nrmse", model="fno", pde="ks", nu=0.1, res=32) is None


def test_paper_value_errors():
    with pytest.raises(ValueError, match=r"unknown paper table 'table9'.*nrmse.*gate.*omega_f.*omega_batch"
                                         r".*no_freq_gate.*alpha_star"):
        paper.paper_value("table9", pde="ks", nu=0.1, res=32)
    with pytest.raises(ValueError, match=r"'nrmse'.*missing keys \['model'\]"):
        paper.paper_value("nrmse", pde="ks", nu=0.1, res=32)
    with pytest.raises(ValueError, match=r"'gate'.*unexpected keys \['model'\]"):
        paper.paper_value("gate", model="amgfno", pde="ks", nu=0.1, res=32)
    with pytest.raises(ValueError, match=r"missing keys \['fusion'\].*unexpected keys \['alpha'\]"):
        paper.paper_value("alpha_star", alpha=0.5, pde="ks", nu=0.1, res=32)


# ---- Transcription checks against the LaTeX source.

def _tabular(tex: str, label: str) -> str:
    """The tabular body (header included) of the table* / table labelled `label`."""
    start = tex.rfind(r"\begin{table", 0, tex.index(r"\label{" + label + "}"))
    end = tex.index(r"\end{table", start)
    body = tex[start:end]
    return body[body.index(r"\begin{tabular}"):body.index(r"\end{tabular}")]


def _rows(body: str) -> list[list[str]]:
    """The cells of the rows between \\midrule and \\bottomrule, \\textbf stripped."""
    body = body[body.index(r"\midrule") + len(r"\midrule"):body.index(r"\bottomrule")]
    body = re.sub(r"\\textbf\{([^}]*)\}", r"\1", body).replace(r"\midrule", "")
    rows = [r.strip() for r in body.split("\\\\")]
    return [[c.strip() for c in r.split("&")] for r in rows if r]


NUM = re.compile(r"^[+-]?\d*\.\d+$")


def _num(cell: str) -> float:
    cell = cell.strip().strip("$")
    assert NUM.match(cell), cell
    return float(cell)


def _header_order(body: str) -> None:
    """The header names KS f=32, 64, 128 with nu .075, .10, .125 each, then Burgers f=32, 64, 128."""
    header = body[:body.index(r"\midrule")]
    assert re.findall(r"\\nu\{=\}(\.\d+)", header) == [".075", ".10", ".125"] * 3
    assert re.findall(r"f\s*(?:\{=\}|=)\s*(\d+)", header) == ["32", "64", "128"] * 2
    assert header.index("Kuramoto") < header.index("Burgers")


@needs_tex
def test_table2_matches_tex():
    tex = TEX.read_text()
    body = _tabular(tex, "tab:main")
    _header_order(body)
    names = {"Factformer (1D)": "factformer", "GKT": "gkt", "U-Net": "unet", "FFNO": "ffno",
             "Multi Input FFNO": "multi_input_ffno", "S4FFNO": "s4ffno", "AMGFNO (Ours)": "amgfno"}
    seen = {}
    for cells in _rows(body):
        model = names[cells[0]]
        assert cells[1] in (r"\xmark", r"\cmark")
        values = [_num(c) for c in cells[2:]]
        assert len(values) == 12
        for (pde, nu, res), value in zip(paper._COLUMNS, values):
            seen[model, pde, nu, res] = value
    assert seen == paper.TABLE2_NRMSE


@needs_tex
def test_table3_matches_tex():
    body = _tabular(TEX.read_text(), "tab:omega_gate")
    seen = {}
    for cells in _rows(body):
        pde = "burgers" if "Burgers" in cells[0] else "ks"
        nu = float(cells[1])
        for res, cell in zip(RES, cells[2:]):
            seen[pde, nu, res] = _num(cell)
    assert seen == paper.TABLE3_GATE


@needs_tex
def test_omega_ablation_matches_tex():
    body = _tabular(TEX.read_text(), "tab:omega_ablation")
    seen = {}
    for cells in _rows(body):
        res, nu = int(cells[0]), float(cells[1])
        seen[nu, res] = {"fixed": _num(cells[2]), "batch": _num(cells[3]), "delta_pct": _num(cells[4])}
    assert seen == paper.OMEGA_ABLATION


@needs_tex
def test_freq_gate_ablation_matches_tex():
    body = _tabular(TEX.read_text(), "tab:ablation")
    _header_order(body)
    rows = {cells[0].replace(r"\quad", "").strip(): [_num(c) for c in cells[1:]] for cells in _rows(body)}
    assert dict(zip(paper._COLUMNS, rows["AMGFNO"])) == paper.ABLATION_AMGFNO
    assert dict(zip(paper._COLUMNS, rows["w/o frequency-aware"])) == paper.FREQ_GATE_ABLATION


@needs_tex
def test_omega_f_matches_tex_text():
    tex = TEX.read_text()
    quoted = re.findall(r"\\omega_\{32\}=([\d.]+)\$, \$\\omega_\{64\}=([\d.]+)\$, \$\\omega_\{128\}=([\d.]+)\$", tex)
    assert len(quoted) == 2  # KS, then Burgers
    for pde, nu, values in (("ks", 0.1, quoted[0]), ("burgers", 0.001, quoted[1])):
        assert [paper.OMEGA_F[pde, nu, res] for res in RES] == [float(v) for v in values]
