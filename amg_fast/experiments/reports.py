"""Reports: the records of a sweep's runs -> the paper's tables (md, csv, tex) and figures (png, pdf).

A record is one run directory (runner.read_record): "name", "run_dir", "status", the RunSpec fields
(with "overrides" as a {setting: value} dict), "results" (amg_fast.train.rundir.RunResults or None;
results.get(name) reads a metric: a field of results.json or one of its DIAGNOSTICS), "history"
(metrics.jsonl rows) and "error". A missing or non-numeric value is no value. A run counts toward a
table cell when its results hold the cell's metric; a cell without any shows the state of its runs
(diverged, failed, running, partial, missing) in markdown and "-" in LaTeX. Several seeds give mean ± sample
std [n=k]. Training curves in the figures use every run's history, finished or not.

REPORTERS[experiment id](records, out_dir) writes table.md, table.csv, table.tex and the figures
into out_dir (created) and returns their paths; write_report checks the id first.
"""
from __future__ import annotations

import csv
import importlib
import io
import math
import statistics
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Callable

from amg_fast._files import atomic_path
from amg_fast.experiments.registry import EXPERIMENTS, NORM_INC, RAW_OUTPUT
from amg_fast.train.config import output_default
from amg_fast.train.rundir import DIAGNOSTIC_STEP, GATE_EPOCHS

__all__ = ["REPORTERS", "write_report", "Stats", "Versus", "Table", "Ablation", "Artefact", "DIAGNOSTICS"]

MODEL_NAMES = {"factformer": "FactFormer", "gkt": "GKT", "unet": "U-Net", "ffno": "FFNO",
               "multi_input_ffno": "Multi-Input FFNO", "s4ffno": "S4FFNO", "amgfno": "AMGFNO"}
TABLE2_ORDER = tuple(MODEL_NAMES)  # Table 2's rows, top to bottom
MODEL_NAMES_2D = {"ffno2d": "FFNO2d", "s4ffno2d": "S4FFNO2d", "amgfno2d": "AMGFNO2d"}  # the ns2d report's rows
MODEL_NAMES.update(MODEL_NAMES_2D)
BAR_MODELS = ("ffno", "multi_input_ffno", "s4ffno", "amgfno")
PDE_NAMES = {"ks": "KS", "burgers": "Burgers", "ns2d": "NS2D"}
GATE_REFERENCE = ("ks", 0.1)  # the ns2d report's 1D comparison: the paper's Table 3 g-bar on KS at this nu
HEADLINE_NU = 0.1  # the KS viscosity of the paper's per-f figures
GBAR = r"mean gate $\bar{g}$"  # figures: mathtext, not a font's "ḡ" glyph
# A cell without values shows the first of these among its runs' states ("-" when none applies).
EMPTY_STATES = ("diverged", "failed", "running", "partial", "missing")
SETTING = ("model", "pde", "nu", "res")
_SPEC_DEFAULTS = {"fusion": "residual", "alpha": None, "variant": None, "omega": None, "seed": 0, "reading": None}
_TEX = {"_": r"\_", "%": r"\%", "&": r"\&", "#": r"\#", "±": r"$\pm$", "ν": r"$\nu$", "α": r"$\alpha$",
        "ω": r"$\omega$", "Δ": r"$\Delta$", "ḡ": r"$\bar g$", "−": "-"}


# -- values -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Stats:
    """One metric over the seeds of a cell; `state` says why a cell has no values."""

    values: tuple[float, ...] = ()
    state: str = "missing"

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def mean(self) -> float | None:
        return statistics.fmean(self.values) if self.values else None

    @property
    def std(self) -> float | None:
        return statistics.stdev(self.values) if len(self.values) >= 2 else None


@dataclass(frozen=True)
class Versus:
    """Ours beside the paper's value: "ours (paper)"."""

    ours: Stats
    paper: float | None


def _metric(record: dict, key) -> float | None:
    """A finite number of the run's results: key names it (results.get), or is a function of the
    results (anything with .get: RunResults, or _Extended)."""
    results = record.get("results")
    if results is None:
        return None
    value = key(results) if callable(key) else results.get(key)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) \
        else None


class _Extended:
    """A run's results with extra named values (a report's derived column), read by .get as results are."""

    def __init__(self, results, **extra):
        self.results, self.extra = results, extra

    def get(self, name: str, default=None):
        if name in self.extra:
            return self.extra[name]
        return self.results.get(name, default) if self.results is not None else default


def _per_epoch(results: dict):
    wall, epochs = results.get("wall_time_s"), results.get("epochs")
    return wall / epochs if isinstance(wall, (int, float)) and isinstance(epochs, int) and epochs > 0 else None


# The fidelity diagnostics of docs/fidelity.md as report columns: label -> a RunResults field or
# property (amg_fast.train.rundir.DIAGNOSTICS: each computed there, once).
DIAGNOSTICS = {
    "one-step": "one_step_nrmse", "step 1": "nrmse_step1", "step 5": "nrmse_step5",
    "last step": "nrmse_last_step", "amp 5": "amplitude_step5", "amp last": "amplitude_last_step",
    "train loss": "train_one_step_loss", "test loss": "test_one_step_loss", "train rollout": "train_nrmse",
    "ḡ": "gate_mean",
}


def _span(counts: set[int], nominal: int) -> str:
    """How much of a statistic defined over `nominal` epochs or steps these runs had: str(nominal) when
    every run had that many, else the counts they had ('2', or '2-20' when they differ)."""
    if not counts or counts == {nominal}:
        return str(nominal)
    return str(min(counts)) if len(counts) == 1 else f"{min(counts)}-{max(counts)}"


def _gate_epochs(records: list[dict]) -> str:
    """The epochs that 'ḡ last 20' (gate_mean_last20_epochs) averages in these runs: GATE_EPOCHS, or all
    of a shorter run's ('2' for 2-epoch runs)."""
    return _span({min(GATE_EPOCHS, int(epochs)) for r in records
                  if _metric(r, "gate_mean_last20_epochs") is not None and (epochs := _metric(r, "epochs"))},
                 GATE_EPOCHS)


def _diagnostic_step(records: list[dict]) -> str:
    """The rollout step that 'step 5' and 'amp 5' hold in these runs: DIAGNOSTIC_STEP, or the last step of
    a shorter rollout ('3' for rollouts of 3 steps)."""
    return _span({min(DIAGNOSTIC_STEP, len(steps)) for r in records if r.get("results") is not None
                  and (steps := r["results"].get("nrmse_per_step"))}, DIAGNOSTIC_STEP)


def _diagnostic_columns(step: str) -> dict[str, str]:
    """DIAGNOSTICS with its 'step 5' and 'amp 5' labelled by the step they hold (_diagnostic_step)."""
    return {{"nrmse_step5": f"step {step}", "amplitude_step5": f"amp {step}"}.get(key, label): key
            for label, key in DIAGNOSTICS.items()}


def _stats(records: list[dict], key="nrmse") -> Stats:
    values = tuple(v for v in (_metric(r, key) for r in records) if v is not None)
    states = {r.get("status") for r in records}
    return Stats(values, "done" if values else next((s for s in EMPTY_STATES if s in states),
                                                   "-" if records else "missing"))


def _ratio(ours: Stats, paper: float | None) -> float | None:
    return ours.mean / paper if ours.n and paper else None


def _delta_pct(base: float | None, other: float | None) -> float | None:
    """100 (other - base) / base: the paper's Delta-% (positive: `other` is worse)."""
    return 100.0 * (other - base) / base if base and other is not None else None


def _num(value: float | None) -> str:
    return "-" if value is None else format(value, ".4g")


def _fmt(value, md: bool = True) -> str:
    """A table value as text: None "-", numbers to 4 significant digits, Stats "mean ± std [n=k]"."""
    if value is None:
        return "-"
    if isinstance(value, Versus):
        return f"{_fmt(value.ours, md)} ({_num(value.paper)})"
    if isinstance(value, Stats):
        if not value.n:
            return value.state if md else "-"
        return _num(value.mean) + ("" if value.n < 2 else f" ± {_num(value.std)} [n={value.n}]")
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float)):
        return _num(value)
    return str(value)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:+.1f}%"


def _setting_label(pde: str, nu: float, res: int) -> str:
    return f"{PDE_NAMES.get(pde, pde)} ν={nu:g} f={res}"


# -- records ------------------------------------------------------------------------------------
def _get(record: dict, key: str):
    if key == "overrides":
        return record.get("overrides") if isinstance(record.get("overrides"), dict) else {}
    return record.get(key, _SPEC_DEFAULTS.get(key))


def _plain(record: dict) -> bool:
    """A run as the paper trains it: no overrides, the default data."""
    return not _get(record, "overrides") and _get(record, "reading") is None


def _select(records: list[dict], plain: bool = True, **want) -> list[dict]:
    """Records with these field values (records without a setting, e.g. no job.json, left out);
    plain: only runs as the paper trains them (the paper's tables)."""
    return [r for r in records if all(r.get(k) is not None for k in SETTING) and (_plain(r) or not plain)
            and all(_get(r, k) == v for k, v in want.items())]


def _sort_key(key: tuple):
    """Orders tuples of (pde, nu, res, ...) settings: KS before Burgers, then by value; None first."""
    return tuple((0, list(PDE_NAMES).index(v), "") if v in PDE_NAMES else (1, 0, "") if v is None
                 else (2, v, "") if isinstance(v, (int, float)) else (3, 0, str(v)) for v in key)


def _group(records: list[dict], *fields: str) -> dict[tuple, list[dict]]:
    """Records by the values of `fields`, in setting order."""
    groups: dict[tuple, list[dict]] = {}
    for r in records:
        groups.setdefault(tuple(_get(r, f) for f in fields), []).append(r)
    return dict(sorted(groups.items(), key=lambda item: _sort_key(item[0])))


def _paper(table: str, **key) -> float | None:
    paper = importlib.import_module("amg_fast.experiments.paper")
    return paper.paper_value(table, **key)


def _curve(records: list[dict], key: str) -> tuple[list[int], list[float]]:
    """A history column over epochs, averaged over the runs (seeds) that logged it."""
    by_epoch: dict[int, list[float]] = {}
    for r in records:
        for row in r.get("history") or []:
            value = row.get(key)
            if isinstance(value, (int, float)) and math.isfinite(value):
                by_epoch.setdefault(row["epoch"], []).append(float(value))
    epochs = sorted(by_epoch)
    return epochs, [statistics.fmean(by_epoch[e]) for e in epochs]


# -- tables -------------------------------------------------------------------------------------
@dataclass
class Table:
    """A table of values (None, str, numbers, Stats, Versus); tex=False keeps it out of table.tex."""

    title: str
    headers: list[str]
    rows: list[list]
    caption: str = ""
    tex: bool = True


def _to_tex(text: str) -> str:
    return "".join(_TEX.get(ch, ch) for ch in text)


def _markdown(table: Table) -> str:
    lines = [f"## {table.title}", ""] + ([table.caption, ""] if table.caption else [])
    lines += ["| " + " | ".join(table.headers) + " |", "|" + "---|" * len(table.headers)]
    lines += ["| " + " | ".join(_fmt(v) for v in row) + " |" for row in table.rows]
    return "\n".join(lines) + "\n"


def _latex(table: Table) -> str:
    body = [" & ".join(_to_tex(_fmt(v, md=False)) for v in row) + r" \\" for row in table.rows]
    return "\n".join([r"\begin{table}[ht]", r"\centering",
                      r"\caption{" + _to_tex(table.title + (". " + table.caption if table.caption else "")) + "}",
                      r"\begin{tabular}{l" + "r" * (len(table.headers) - 1) + "}", r"\hline",
                      " & ".join(_to_tex(h) for h in table.headers) + r" \\", r"\hline", *body, r"\hline",
                      r"\end{tabular}", r"\end{table}", ""])


def _versus_columns(label: str) -> list[str]:
    return [f"{label} (ours)", f"{label} (paper)", "ours/paper"]


def _versus_values(ours: Stats, paper: float | None) -> list:
    return [ours, paper, _ratio(ours, paper)]


# -- files --------------------------------------------------------------------------------------
def _write_atomic(path: Path, data: str | bytes) -> Path:
    with atomic_path(path) as tmp:  # also removes dead writers' temp files
        tmp.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


CSV_BASE = ("name", "model", "pde", "nu", "res", "seed")
CSV_TAIL = ("nrmse", "wall_time_s", "status", "run_dir", "error")
_RESULT_COLUMNS = {"gate_mean": "gate_mean", "gate_mean_last20": "gate_mean_last20_epochs",
                   "nrmse": "nrmse", "wall_time_s": "wall_time_s", "epochs": "epochs",
                   **{key: key for key in ("one_step_nrmse", "train_nrmse", "test_one_step_loss", "train_one_step_loss")},
                   "amplitude_last": "amplitude_last_step"}


def _overrides_text(record: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(_get(record, "overrides").items()))


def _csv(records: list[dict], extra: tuple[str, ...]) -> str:
    """One row per run: its spec fields, `extra` columns, results and state."""
    columns = CSV_BASE + extra + CSV_TAIL
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    order = ("pde", "nu", "res", "model", "fusion", "alpha", "variant", "seed")
    for r in sorted(records, key=lambda r: _sort_key(tuple(_get(r, k) for k in order))):
        row = [_metric(r, _RESULT_COLUMNS[c]) if c in _RESULT_COLUMNS else _overrides_text(r) if c == "overrides"
               else _get(r, c) for c in columns]
        writer.writerow(["" if v is None else v for v in row])
    return out.getvalue()


# -- figures ------------------------------------------------------------------------------------
def _figure(panels: int, width: float = 4.2, height: float = 3.4):
    """A Figure (Agg canvas, no pyplot state) with `panels` axes side by side."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise ImportError("the report figures need matplotlib: pip install 'amg_fast[plot]'") from exc
    fig = Figure(figsize=(width * panels, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig, list(fig.subplots(1, panels, squeeze=False)[0])


def _save_figure(fig, out_dir: Path, stem: str) -> list[Path]:
    """stem.png and stem.pdf, each byte for byte the same for the same figure (no creation date in the
    PDF), so that reporting a committed tree again leaves it unchanged."""
    paths = []
    for ext in ("png", "pdf"):
        buf = io.BytesIO()
        fig.savefig(buf, format=ext, dpi=150, metadata={"CreationDate": None} if ext == "pdf" else None)
        paths.append(_write_atomic(out_dir / f"{stem}.{ext}", buf.getvalue()))
    return paths


def _errorbar(ax, xs, stats: list[Stats], **kwargs) -> None:
    ax.errorbar(xs, [s.mean for s in stats], yerr=[s.std or 0.0 for s in stats], marker="o", capsize=3, **kwargs)


# -- Table 2 ------------------------------------------------------------------------------------
def _table2_runs(records: list[dict]) -> list[dict]:
    return _select(records, variant=None, fusion="residual")


def _table2_tables(records: list[dict]) -> list[Table]:
    groups = _group(_table2_runs(records), "model", "pde", "nu", "res")
    models = [m for m in TABLE2_ORDER if any(k[0] == m for k in groups)]
    models += sorted({k[0] for k in groups} - set(models), key=str)
    # The paper's columns: KS by f, then nu; Burgers last.
    settings = sorted({k[1:] for k in groups}, key=lambda s: _sort_key((s[0], s[2], s[1])))
    wide = Table("Table 2: nRMSE, ours (paper)", ["Model"] + [_setting_label(*s) for s in settings],
                 [[MODEL_NAMES.get(m, m)] + [Versus(_stats(groups.get((m, *s), [])), _paper("nrmse", model=m, pde=s[0],
                                                                                            nu=s[1], res=s[2]))
                                            for s in settings] for m in models])
    long = Table("Per cell", ["Model", "PDE", "ν", "f", *_versus_columns("nRMSE"), "rollout ḡ"],
                 [[MODEL_NAMES.get(m, m), PDE_NAMES.get(pde, pde), f"{nu:g}", res,
                   *_versus_values(_stats(runs), _paper("nrmse", model=m, pde=pde, nu=nu, res=res)),
                   _stats(runs, "gate_mean") if m == "amgfno" else None]
                  for (m, pde, nu, res), runs in sorted(groups.items(), key=lambda item: (
                      models.index(item[0][0]), _sort_key(item[0][1:])))], tex=False)
    return [wide, long]


def _alpha_star_stats(records: list[dict], pde: str, nu: float, res: int) -> Stats:
    """nRMSE of convex-fusion S4FFNO at its alpha* for one setting (no values without a sweep)."""
    cell = _alpha_cells("convex", _select(records, pde=pde, nu=nu, res=res)).get((pde, nu, res), {})
    star = _alpha_star(cell)
    return cell[star] if star is not None else Stats()


def _bars(records: list[dict], vary: str, **fixed) -> object | None:
    """KS nRMSE bars of FFNO / Multi-Input FFNO / S4FFNO / S4FFNO at alpha* (where the alpha-convex
    runs are in the records) / AMGFNO, one group per value of `vary`; paper values as black ticks,
    AMGFNO's bars labelled with its rollout g-bar."""
    runs = _select(_table2_runs(records), pde="ks", **fixed)
    groups = _group(runs, "model", vary)
    xs = sorted({k[1] for k in groups})
    series = [(MODEL_NAMES[m], m, {x: _stats(groups.get((m, x), [])) for x in xs}) for m in BAR_MODELS]
    star = ("S4FFNO α*", None, {x: _alpha_star_stats(records, "ks", **{**fixed, vary: x}) for x in xs})
    series.insert(3, star)  # the paper's order: ..., S4FFNO, alpha*, AMGFNO
    series = [(label, m, cells) for label, m, cells in series if any(c.n for c in cells.values())]
    if not series:
        return None
    fig, (ax,) = _figure(1, width=6.0)
    width = 0.8 / len(series)
    for i, (label, m, by_x) in enumerate(series):
        cells = [(j + (i - (len(series) - 1) / 2) * width, x, by_x[x]) for j, x in enumerate(xs) if by_x[x].n]
        ax.bar([c[0] for c in cells], [c[2].mean for c in cells], width, yerr=[c[2].std or 0.0 for c in cells],
               color=f"C{i}", label=label, capsize=2)
        for pos, x, s in cells:
            paper = _paper("nrmse", model=m, pde="ks", **{**fixed, vary: x}) if m else None
            if paper:
                ax.plot(pos, paper, "k_", markersize=12)
            gate = _stats(groups[(m, x)], "gate_mean") if m == "amgfno" else Stats()
            if gate.n:
                ax.annotate(rf"$\bar{{g}}$={gate.mean:.3g}", (pos, s.mean), textcoords="offset points", xytext=(0, 3),
                            ha="center", fontsize=7)
    ax.set_xticks(range(len(xs)), [f"{'ν' if vary == 'nu' else 'f'}={x:g}" for x in xs])
    fixed_label = ", ".join(f"{'ν' if k == 'nu' else 'f'}={v:g}" for k, v in fixed.items())
    ax.set(yscale="log", ylabel="nRMSE", title=f"KS, {fixed_label} (black ticks: paper)")
    ax.legend(fontsize=8)
    return fig


# -- Table 3 ------------------------------------------------------------------------------------
def _amgfno_runs(records: list[dict], variant: str | None = None) -> list[dict]:
    return _select(records, model="amgfno", variant=variant)


def _table3_tables(records: list[dict]) -> list[Table]:
    amgfno = _amgfno_runs(records)
    groups = _group(amgfno, "pde", "nu", "res")
    epochs = _gate_epochs(amgfno)  # the paper's 20, or fewer in short runs
    shorter = "" if epochs == str(GATE_EPOCHS) else f"; {epochs} in these runs"
    return [Table(f"Table 3: AMGFNO's mean gate ḡ (mean of the last {GATE_EPOCHS} training epochs{shorter})",
                  ["PDE", "ν", "f", f"ḡ last {epochs} epochs (ours)",
                   *_versus_columns(f"ḡ last {GATE_EPOCHS} epochs")[1:], "rollout ḡ", "nRMSE"],
                  [[PDE_NAMES.get(pde, pde), f"{nu:g}", res,
                    *_versus_values(_stats(runs, "gate_mean_last20_epochs"), _paper("gate", pde=pde, nu=nu, res=res)),
                    _stats(runs, "gate_mean"), _stats(runs)] for (pde, nu, res), runs in groups.items()])]


def _gate_training_figure(records: list[dict]):
    """g-bar per training epoch: one panel per PDE, a line per (f, nu)."""
    curves = {k: c for k, runs in _group(_amgfno_runs(records), "pde", "nu", "res").items()
              if (c := _curve(runs, "gate_mean"))[0]}
    pdes = list(dict.fromkeys(k[0] for k in curves))
    if not pdes:
        return None
    fig, axes = _figure(len(pdes))
    for ax, pde in zip(axes, pdes):
        keys = [k for k in curves if k[0] == pde]
        nus, resolutions = sorted({k[1] for k in keys}), sorted({k[2] for k in keys})
        for _, nu, res in keys:
            ax.plot(*curves[(pde, nu, res)], color=f"C{resolutions.index(res)}",
                    linestyle=("-", "--", ":", "-.")[nus.index(nu) % 4], label=f"f={res}, ν={nu:g}")
        ax.set(yscale="log", xlabel="epoch", ylabel=GBAR, title=PDE_NAMES.get(pde, pde))
        ax.legend(fontsize=7)
    return fig


def _nrmse_gate_figure(records: list[dict]):
    """Test nRMSE and g-bar over epochs, one panel per f (KS nu=0.1 where it ran, else the first setting)."""
    groups = _group(_amgfno_runs(records), "pde", "nu", "res")
    panels = []
    for res in sorted({k[2] for k in groups}):
        keys = [k for k in groups if k[2] == res]
        keys.sort(key=lambda k: k != ("ks", HEADLINE_NU, res))
        key = next((k for k in keys if _curve(groups[k], "test_nrmse")[0]), None)
        if key:
            panels.append((key, _curve(groups[key], "test_nrmse"), _curve(groups[key], "gate_mean")))
    if not panels:
        return None
    fig, axes = _figure(len(panels))
    for ax, (key, nrmse, gate) in zip(axes, panels):
        ax.plot(*nrmse, "o-", color="C0", markersize=3)
        ax.set(yscale="log", xlabel="epoch", title=_setting_label(*key))
        ax.set_ylabel("test nRMSE", color="C0")
        if gate[0]:
            twin = ax.twinx()
            twin.plot(*gate, color="C1")
            twin.set_ylabel(GBAR, color="C1")
    return fig


# -- ablations ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Ablation:
    """AMGFNO (variant None) against one variant; paper(pde, nu, res) -> the paper's (full nRMSE,
    variant nRMSE, printed Delta-% or None: then computed from the two)."""

    variant: str
    title: str
    full_label: str
    variant_label: str
    paper: Callable[[str, float, int], tuple[float | None, float | None, float | None]]


def _omega_paper(pde, nu, res):
    return tuple(_paper(table, pde=pde, nu=nu, res=res) for table in ("omega_fixed", "omega_batch", "omega_delta_pct"))


def _freq_gate_paper(pde, nu, res):
    return _paper("ablation_amgfno", pde=pde, nu=nu, res=res), _paper("no_freq_gate", pde=pde, nu=nu, res=res), None


OMEGA = Ablation("omega-batch", "Table 4: AMGFNO with fixed vs per-batch ω_f (nRMSE)", "fixed ω_f",
                 "per-batch ω_f", _omega_paper)
FREQ_GATE = Ablation("no-freq-gate", "Table 5: AMGFNO with and without the frequency-aware gate (nRMSE)",
                     "AMGFNO", "w/o frequency gate", _freq_gate_paper)


def _ablation_tables(ablation: Ablation, records: list[dict]) -> list[Table]:
    """Settings where the variant has runs; the full model's runs (Table 2's AMGFNO) beside them."""
    full = _group(_amgfno_runs(records), "pde", "nu", "res")
    rows = []
    for (pde, nu, res), runs in _group(_amgfno_runs(records, ablation.variant), "pde", "nu", "res").items():
        ours = _stats(full.get((pde, nu, res), [])), _stats(runs)
        paper_full, paper_variant, paper_delta = ablation.paper(pde, nu, res)
        if paper_delta is None:
            paper_delta = _delta_pct(paper_full, paper_variant)
        rows.append([PDE_NAMES.get(pde, pde), f"{nu:g}", res, Versus(ours[0], paper_full),
                     *_versus_values(ours[1], paper_variant),
                     _pct(_delta_pct(ours[0].mean, ours[1].mean)), _pct(paper_delta)])
    caption = (f"Δ% = 100 ({ablation.variant_label} − {ablation.full_label}) / {ablation.full_label}, the paper's "
               f"convention (positive: the variant is worse), ours from seed means, the paper's as printed or from "
               f"its columns; ours/paper is the variant's nRMSE ratio.")
    return [Table(ablation.title, ["PDE", "ν", "f", f"{ablation.full_label}, ours (paper)",
                                   *_versus_columns(ablation.variant_label), "Δ% (ours)", "Δ% (paper)"], rows,
                  caption)]


# -- alpha sweeps -------------------------------------------------------------------------------
def _alpha_cells(fusion: str, records: list[dict]) -> dict[tuple, dict[float, Stats]]:
    """(pde, nu, res) -> {alpha: nRMSE Stats} of S4FFNO with this fusion."""
    runs_of_fusion = _select(records, fusion=fusion)
    if fusion == "additive":  # h + 1 * z is the residual S4FFNO: its runs are the sweep's alpha = 1
        runs_of_fusion += [{**r, "fusion": "additive", "alpha": 1.0} for r in _select(records, model="s4ffno",
                                                                                         fusion="residual")]
    cells: dict[tuple, dict[float, Stats]] = {}
    for (pde, nu, res, alpha), runs in _group(runs_of_fusion, "pde", "nu", "res", "alpha").items():
        cells.setdefault((pde, nu, res), {})[alpha] = _stats(runs)
    return cells


def _alpha_star(cell: dict[float, Stats]) -> float | None:
    """argmin over alpha of the seed-mean nRMSE (over the alphas with results)."""
    done = {a: s.mean for a, s in cell.items() if s.n}
    return min(done, key=done.get) if done else None


def _alpha_tables(fusion: str, records: list[dict]) -> list[Table]:
    from amg_fast.experiments.registry import ALPHAS

    cells = _alpha_cells(fusion, records)
    alphas = sorted({a for cell in cells.values() for a in cell if a is not None})
    rows = []
    for (pde, nu, res), cell in cells.items():
        # k of the experiment's K alphas (not of those the sweep has: a partial sweep's alpha* is marked)
        star, done = _alpha_star(cell), sum(1 for a, s in cell.items() if s.n and a in ALPHAS[fusion])
        if star is not None:
            star = f"{star:g}" + ("" if done == len(ALPHAS[fusion]) else f" ({done}/{len(ALPHAS[fusion])} α)")
        rows.append([PDE_NAMES.get(pde, pde), f"{nu:g}", res, *(cell.get(a, Stats()) for a in alphas), star,
                     _paper("alpha_star", fusion=fusion, pde=pde, nu=nu, res=res)])
    return [Table(f"S4FFNO nRMSE vs a fixed {fusion} memory weight α, and α*",
                  ["PDE", "ν", "f", *(f"α={a:g}" for a in alphas), "α* (ours)", "α* (paper)"], rows,
                  "α* = argmin over α of the seed-mean nRMSE; (k/K α): only k of the K α values have results. "
                  "The paper states α* in its text (no table of nRMSE per α)."
                  + (" Additive α = 1 (h + z) is the residual S4FFNO, Table 2's run." if fusion == "additive" else ""))]


def _alpha_sweep_figure(fusion: str, records: list[dict]):
    """nRMSE vs alpha, one panel per f, a line per nu, a star at alpha*."""
    cells = {k: {a: s for a, s in cell.items() if s.n} for k, cell in _alpha_cells(fusion, records).items()}
    resolutions = sorted({k[2] for k, cell in cells.items() if cell})
    if not resolutions:
        return None
    fig, axes = _figure(len(resolutions))
    for ax, res in zip(axes, resolutions):
        for i, (pde, nu, _) in enumerate(k for k in cells if k[2] == res and cells[k]):
            cell = cells[(pde, nu, res)]
            alphas = sorted(cell)
            _errorbar(ax, alphas, [cell[a] for a in alphas], color=f"C{i}",
                      label=f"ν={nu:g}" if pde == "ks" else _setting_label(pde, nu, res))
            star = _alpha_star(cell)
            ax.plot(star, cell[star].mean, "*", color=f"C{i}", markersize=15, markeredgecolor="k")
        ax.set(yscale="log", xlabel=f"α ({fusion})", ylabel="nRMSE", title=f"f = {res}")
        ax.legend(fontsize=8)
    return fig


def _alpha_heatmap_figure(fusion: str, records: list[dict]):
    """alpha* over (nu, f); the paper's alpha* in parentheses where it states one."""
    cells = _alpha_cells(fusion, records)
    stars = {k: star for k, cell in cells.items() if (star := _alpha_star(cell)) is not None}
    if not stars:
        return None
    rows = sorted({k[:2] for k in stars}, key=_sort_key)
    cols = sorted({k[2] for k in stars})
    grid = [[stars.get((pde, nu, res), math.nan) for res in cols] for pde, nu in rows]
    fig, (ax,) = _figure(1, width=1.6 * len(cols) + 2.0, height=1.0 * len(rows) + 1.6)
    alphas = [a for cell in cells.values() for a in cell if a is not None]  # colours span the swept range
    image = ax.imshow(grid, cmap="viridis", aspect="auto", vmin=min(alphas), vmax=max(alphas))
    for i, (pde, nu) in enumerate(rows):
        for j, res in enumerate(cols):
            if (pde, nu, res) in stars:
                paper = _paper("alpha_star", fusion=fusion, pde=pde, nu=nu, res=res)
                ax.text(j, i, f"{stars[(pde, nu, res)]:g}" + ("" if paper is None else f"\n({paper:g})"),
                        ha="center", va="center", color="w", fontsize=9)
    ax.set_xticks(range(len(cols)), [f"f={res}" for res in cols])
    ax.set_yticks(range(len(rows)), [f"ν={nu:g}" if pde == "ks" else f"{PDE_NAMES.get(pde, pde)} ν={nu:g}"
                                     for pde, nu in rows])
    ax.set_title(f"α* ({fusion}; paper in parentheses)")
    fig.colorbar(image, ax=ax, label="α*")
    return fig


# -- our studies: headline, fidelity, precision, grids ------------------------------------------
PARAMETRISATIONS = {"raw": RAW_OUTPUT, "--normalize --increment": NORM_INC}


def _shared_settings(records: list[dict], varied) -> dict:
    """The overrides every record has with one value, outside the keys its experiment varies: a
    sweep's `--set n_train=256` (records_for selects only runs with it). They label no cell."""
    items = [set(_get(r, "overrides").items()) for r in records]
    return {k: v for k, v in set.intersection(*items) if k not in varied} if items else {}


def _own_overrides(record: dict, shared: dict) -> dict:
    return {k: v for k, v in _get(record, "overrides").items() if k not in shared}


def _parametrisation(record: dict, shared: dict) -> str:
    """The run's output parametrisation (its normalize / increment: its overrides', else its PDE's default at the
    time, amg_fast.train.config.output_default), then its other overrides besides the shared settings."""
    own = _own_overrides(record, shared)
    output = {k: own.pop(k, output_default(_get(record, "pde"), k)) for k in NORM_INC}
    label = next((label for label, o in PARAMETRISATIONS.items() if o == output),
                 _overrides_text({"overrides": output}))
    return " ".join(filter(None, [label, _overrides_text({"overrides": own})]))


def _versus_gate(runs: list[dict], pde: str, nu: float, res: int, model: str) -> list:
    if model != "amgfno":
        return [None, None]
    return [_stats(runs, "gate_mean_last20_epochs"), _paper("gate", pde=pde, nu=nu, res=res)]


def _reduction(s4: list[dict], amg: list[dict]) -> tuple[float | None, Stats]:
    """AMGFNO's nRMSE reduction against S4FFNO in %, from the seed means, and over paired seeds."""
    mean = _delta_pct(_stats(s4).mean, _stats(amg).mean)
    by_seed = {_get(r, "seed"): _metric(r, "nrmse") for r in s4}
    paired = tuple(-_delta_pct(by_seed[_get(r, "seed")], _metric(r, "nrmse")) for r in amg
                   if by_seed.get(_get(r, "seed")) is not None and _metric(r, "nrmse") is not None)
    return (None if mean is None else -mean), Stats(paired, "done" if paired else "missing")


def _paper_reduction(pde: str, nu: float, res: int) -> str:
    """The paper's AMGFNO-vs-S4FFNO reduction (Table 2) in %, with the range its values' rounding allows
    where that range is wider than 2 points (f = 128: 0.005 -> 0.003 reads 40%, anything from 22% to 55%)."""
    s4, amg = (_paper("nrmse", model=m, pde=pde, nu=nu, res=res) for m in ("s4ffno", "amgfno"))
    if s4 is None or amg is None:
        return "-"
    half = 0.5 * 10.0 ** -importlib.import_module("amg_fast.experiments.paper").TABLE2_DECIMALS
    low, high = (100.0 * (1 - (amg + half) / (s4 - half)), 100.0 * (1 - (amg - half) / (s4 + half))) \
        if s4 > half else (None, None)
    text = _pct(100.0 * (s4 - amg) / s4)
    return text if low is None or high - low <= 2 else f"{text} ({low:+.0f}% to {high:+.0f}%: rounding)"


def _data_seed_note(runs: list[dict]) -> str:
    """Whether the seeds of a cell trained on one data set or each on its own."""
    seeds = [_get(r, "overrides").get("data_seed") for r in runs]
    fixed = sorted({s for s in seeds if s is not None}, key=str)
    own = (" Each seed draws its own data set (its data seed is the run's seed), so the spread over seeds holds "
           "the data's too." if None in seeds else "")
    return own + (f" Runs with a data_seed setting ({', '.join(map(str, fixed))}) share that data set across seeds."
                  if fixed else "")


def _gate_definition_note(runs: list[dict]) -> str:
    """How far the final model's test-rollout gate (results.json gate_mean: the paper's eq. app-mean-gate, at
    the last epoch) lies from the training gate averaged over the last epochs, over these AMGFNO runs."""
    gaps = [abs(a - b) for r in runs if _get(r, "model") == "amgfno"
            for a, b in [(_metric(r, "gate_mean"), _metric(r, "gate_mean_last20_epochs"))]
            if a is not None and b is not None]
    return (f" The paper averages the gate of the test rollouts; ours, of the training batches (teacher forcing): "
            f"the final model's test-rollout gate differs from it by at most {max(gaps):.2g} in these runs."
            if gaps else "")


def _headline_tables(records: list[dict]) -> list[Table]:
    runs = [r for r in _select(records, plain=False, fusion="residual", variant=None) if _get(r, "reading") is None]
    shared = _shared_settings(runs, NORM_INC)
    groups = _group([{**r, "parametrisation": _parametrisation(r, shared)} for r in runs], "pde", "nu", "res",
                    "model", "parametrisation")
    order = {m: i for i, m in enumerate(("ffno", "s4ffno", "amgfno"))}
    keys = sorted(groups, key=lambda k: (_sort_key(k[:3]), order.get(k[3], 9), k[4] != "raw", str(k[4])))
    epochs = _gate_epochs(runs)
    paper_epochs = "" if epochs == str(GATE_EPOCHS) else f": {GATE_EPOCHS}"
    cells = Table("Per cell: nRMSE, ours beside the paper; g-bar; the fidelity diagnostics",
                  ["PDE", "ν", "f", "Model", "output", *_versus_columns("nRMSE"), f"ḡ last {epochs} (ours)",
                   "ḡ (paper)", "one-step", "amp last", "train rollout", "s / epoch"],
                  [[PDE_NAMES.get(pde, pde), f"{nu:g}", res, MODEL_NAMES.get(m, m), p,
                    *_versus_values(_stats(rs), _paper("nrmse", model=m, pde=pde, nu=nu, res=res)),
                    *_versus_gate(rs, pde, nu, res, m), _stats(rs, "one_step_nrmse"),
                    _stats(rs, DIAGNOSTICS["amp last"]), _stats(rs, "train_nrmse"), _stats(rs, _per_epoch)]
                   for (pde, nu, res, m, p) in keys for rs in [groups[(pde, nu, res, m, p)]]],
                  f"ours: mean ± sample std over seeds [n]; ḡ last {epochs}: AMGFNO's mean gate over the last "
                  f"{epochs} training epochs (the paper's Table 3{paper_epochs}); amp last: rollout norm / true norm "
                  "at the last step." + _data_seed_note(runs) + _gate_definition_note(runs)
                  + (" Burgers: our PDEBench-style data (generated, docs/data.md; its omega_32 0.0118 against the "
                     "paper's 0.0062), not PDEBench's file." if any(_get(r, "pde") == "burgers" for r in runs) else ""))
    reduction_rows = []
    for (pde, nu, res, p) in dict.fromkeys((k[0], k[1], k[2], k[4]) for k in keys):
        s4, amg = groups.get((pde, nu, res, "s4ffno", p), []), groups.get((pde, nu, res, "amgfno", p), [])
        if s4 and amg:
            mean, paired = _reduction(s4, amg)
            reduction_rows.append([PDE_NAMES.get(pde, pde), f"{nu:g}", res, p, _stats(s4), _stats(amg),
                                   _pct(mean), paired, _paper_reduction(pde, nu, res)])
    reduction = Table("AMGFNO vs S4FFNO: nRMSE reduction", ["PDE", "ν", "f", "output", "S4FFNO", "AMGFNO",
                                                            "reduction (means)", "reduction per seed (%)",
                                                            "reduction (paper)"], reduction_rows,
                      "reduction = 100 (S4FFNO − AMGFNO) / S4FFNO; per seed: over the seeds both have (the same "
                      "data set each), mean ± std; paper: from Table 2's values, printed to 3 decimals (the range "
                      "their rounding allows where it is wider than 2 points).")
    effect_rows = []
    for (pde, nu, res, m) in dict.fromkeys(k[:4] for k in keys):
        base, ni = (_stats(groups.get((pde, nu, res, m, p), [])) for p in PARAMETRISATIONS)
        if base.n and ni.n:
            effect_rows.append([PDE_NAMES.get(pde, pde), f"{nu:g}", res, MODEL_NAMES.get(m, m), base, ni,
                                _pct(_delta_pct(base.mean, ni.mean)), _beyond_spread(ni, base)])
    effect = Table("--normalize --increment against raw", ["PDE", "ν", "f", "Model", "raw",
                                                                   "--normalize --increment", "change",
                                                                   "lower by more than the seed spread"],
                   effect_rows, "seed spread: the larger sample std of the two cells (needs 2+ seeds each; -: a "
                                "cell with one seed). " + _default_decision(effect_rows))
    return [cells, reduction, effect]


def _beyond_spread(lower: Stats, higher: Stats) -> str:
    """"yes" when higher's mean nRMSE is above lower's by more than the seed spread (the larger sample std of
    the two cells), else "no"; "-" (undecided: no spread to compare with) when a cell has fewer than 2 seeds."""
    if lower.n < 2 or higher.n < 2:
        return "-"
    return "yes" if higher.mean - lower.mean > max(lower.std or 0.0, higher.std or 0.0) else "no"


def _default_decision(effect_rows: list[list]) -> str:
    """Issue 21's rule for the default output parametrisation, on the cells where both ran: the
    default when it lowers the mean nRMSE of all three models by more than the seed spread."""
    verdicts = {}
    for pde, nu, res, model, *_, beyond in effect_rows:
        verdicts.setdefault((pde, nu, res), {})[model] = beyond
    lines = []
    for (pde, nu, res), by_model in verdicts.items():
        wanted = [MODEL_NAMES.get(m, m) for m in ("ffno", "s4ffno", "amgfno")]
        missing = [m for m in wanted if m not in by_model] + [m for m in wanted if by_model.get(m) == "-"]
        if "no" in (by_model.get(m) for m in wanted):
            verdict = "no (" + ", ".join(m for m in wanted if by_model.get(m) == "no") + " not lower by more than " \
                      "the spread): keep it opt-in"
        elif missing:
            verdict = "undecided (" + ", ".join(missing) + ": not run, or fewer than 2 seeds)"
        else:
            verdict = "yes for all three: the default (since 2026-12-01; raw is --no-normalize --no-increment)"
        lines.append(f"{pde} ν = {nu}, f = {res}: {verdict}")
    return ("Rule (issue 21): --normalize --increment becomes the default if it lowers the mean nRMSE of all three "
            "models by more than the seed spread. " + "; ".join(lines) + ".") if lines else ""


def _fidelity_label(record: dict, shared: dict) -> str:
    from amg_fast.experiments.registry import FIDELITY_VARIANTS

    overrides, reading = _own_overrides(record, shared), _get(record, "reading")
    return next((name for name, (o, rd) in FIDELITY_VARIANTS.items() if o == overrides and rd == reading),
                " ".join(filter(None, [_overrides_text({"overrides": overrides}), reading and f"reading={reading}"]))
                or "base")


def _diagnostics_table(title: str, label_headers: list[str], groups: dict[tuple, list[dict]], caption: str,
                       extra: dict | None = None) -> Table:
    """One row per group: its labels, n, rollout nRMSE, extra columns and the fidelity diagnostics."""
    step = _diagnostic_step([r for rs in groups.values() for r in rs])
    columns = {"nRMSE": "nrmse", **(extra or {}), **_diagnostic_columns(step)}
    if step != str(DIAGNOSTIC_STEP):
        caption += f" step {step}: step {DIAGNOSTIC_STEP}, or the last step of a shorter rollout."
    return Table(title, [*label_headers, "n", *columns],
                 [[*labels, _stats(rs).n, *(_stats(rs, key) for key in columns.values())]
                  for labels, rs in groups.items()], caption)


_DIAGNOSTICS_CAPTION = ("Mean ± sample std over seeds. nRMSE: rollout from u_0 (the paper's metric); one-step: the "
                        "same with teacher forcing; step k: rollout nRMSE at step k; amp: rollout norm / true norm; "
                        "train / test loss: the training loss on training and test trajectories; train rollout: "
                        "the rollout nRMSE on training trajectories; ḡ: AMGFNO's rollout gate.")


def _fidelity_tables(records: list[dict]) -> list[Table]:
    from amg_fast.experiments.registry import FIDELITY_VARIANTS

    runs = _select(records, plain=False)
    shared = _shared_settings(runs, {key for overrides, _ in FIDELITY_VARIANTS.values() for key in overrides})
    runs = [{**r, "label": _fidelity_label(r, shared), "model_name": MODEL_NAMES.get(r["model"], r["model"])}
            for r in runs]
    groups = {(k[3], k[4], *k[:3]): v for k, v in _group(runs, "pde", "nu", "res", "model_name", "label").items()}
    return [_diagnostics_table("Fidelity variants (docs/fidelity.md)", ["Model", "variant", "PDE", "ν", "f"],
                               {(m, v, PDE_NAMES.get(pde, pde), f"{nu:g}", res): rs
                                for (m, v, pde, nu, res), rs in groups.items()},
                               _DIAGNOSTICS_CAPTION + " Variants: base = raw (--no-normalize --no-increment); "
                               "norm / inc / norm-inc = --normalize / --increment / both; lastblock = "
                               "--decoder-input last_block; ff = fourierflow's options; @lpsda / @lpsda5 = the "
                               "S4FFNO authors' KS data readings.")]


def _precision_tables(records: list[dict]) -> list[Table]:
    runs = [{**r, "precision": _get(r, "overrides").get("precision", "fp32")} for r in _select(records, plain=False)]
    groups = _group(runs, "model", "pde", "nu", "res", "precision")
    fp32 = {k[:4]: _stats(v).mean for k, v in groups.items() if k[4] == "fp32"}

    def versus_fp32(r: dict, setting: tuple) -> dict:  # the run's nRMSE over fp32's seed mean, as a result
        nrmse, base = _metric(r, "nrmse"), fp32.get(setting)
        return {**r, "results": _Extended(r.get("results"), vs_fp32=nrmse / base if nrmse and base else None)}
    rows = {(MODEL_NAMES.get(m, m), PDE_NAMES.get(pde, pde), f"{nu:g}", res, p): [versus_fp32(r, (m, pde, nu, res))
                                                                                  for r in rs]
            for (m, pde, nu, res, p), rs in groups.items()}
    return [_diagnostics_table("Precision modes", ["Model", "PDE", "ν", "f", "precision"], rows,
                               _DIAGNOSTICS_CAPTION + " vs fp32: nRMSE over fp32's seed mean.",
                               {"vs fp32": "vs_fp32", "s / epoch": _per_epoch}),
            _precision_decision(groups)]


def _precision_decision(groups: dict[tuple, list[dict]]) -> Table:
    """Issue 19 item 6: each mode's nRMSE against fp32's in the same cell, and the rule that picks the paper
    preset's mode -- a mode may replace fp32 when its mean nRMSE is not above fp32's by more than the seed
    spread (the larger sample std of the two cells; 2+ seeds each, else undecided)."""
    rows, verdicts = [], {}
    for (m, pde, nu, res, p), runs in groups.items():
        base, other = _stats(groups.get((m, pde, nu, res, "fp32"), [])), _stats(runs)
        if p == "fp32" or not (base.n and other.n):
            continue
        worse = _beyond_spread(base, other)
        rows.append([MODEL_NAMES.get(m, m), PDE_NAMES.get(pde, pde), f"{nu:g}", res, p, base, other,
                     _pct(_delta_pct(base.mean, other.mean)), worse])
        verdicts[p] = verdicts.get(p, set()) | {worse}
    lines = [f"{p}: " + ("undecided (fewer than 2 seeds in a cell)" if "-" in v else
                         "worse than fp32 by more than the seed spread: not for the paper preset" if "yes" in v else
                         "within fp32's seed spread: may train the paper preset")
             for p, v in verdicts.items()]
    return Table("Each mode against fp32", ["Model", "PDE", "ν", "f", "precision", "fp32", "this mode", "change",
                                            "worse by more than the seed spread"], rows,
                 "Rule (issue 19): the paper preset may train in a mode whose mean nRMSE is not above fp32's by "
                 "more than the seed spread (the larger sample std of the two cells; 2+ seeds each). "
                 + ("; ".join(lines) + "." if lines else ""))


# -- 2D Navier-Stokes (issue 22) ----------------------------------------------------------------------
def _ns2d_groups(records: list[dict]) -> dict[tuple, list[dict]]:
    """The ns2d runs by (model, nu, res), models in MODEL_NAMES_2D's order, then by setting."""
    groups = _group(_select(records, pde="ns2d", variant=None, fusion="residual"), "model", "nu", "res")
    order = list(MODEL_NAMES_2D)
    return dict(sorted(groups.items(), key=lambda item: (order.index(item[0][0]) if item[0][0] in order
                                                         else len(order), str(item[0][0]), _sort_key(item[0][1:]))))


def _gate_rows(records: list[dict]) -> dict[str, dict[int, tuple[Stats, Stats | None]]]:
    """AMGFNO2d's (g-bar last 20 epochs, rollout g-bar) per setting label and f, then the paper's 1D
    KS row (Table 3) at the same f for comparison."""
    rows: dict[str, dict[int, tuple[Stats, Stats | None]]] = {}
    for (model, nu, res), runs in _ns2d_groups(records).items():
        if model == "amgfno2d":
            rows.setdefault(f"NS2D ν={nu:g}", {})[res] = (_stats(runs, "gate_mean_last20_epochs"),
                                                           _stats(runs, "gate_mean"))
    resolutions = sorted({res for cells in rows.values() for res in cells})
    pde, nu = GATE_REFERENCE
    paper = {res: _paper("gate", pde=pde, nu=nu, res=res) for res in resolutions}
    if rows and any(v is not None for v in paper.values()):
        rows[f"{PDE_NAMES[pde]} ν={nu:g} (paper, 1D)"] = {res: (Stats((v,), "done"), None) for res, v in paper.items()
                                                           if v is not None}  # no rollout g-bar in the paper
    return rows


def _ns2d_tables(records: list[dict]) -> list[Table]:
    groups = _ns2d_groups(records)
    models = list(dict.fromkeys(k[0] for k in groups))
    settings = sorted({k[1:] for k in groups}, key=_sort_key)
    epochs = _gate_epochs([r for rs in groups.values() for r in rs])
    wide = Table("nRMSE (rollout from u_0) per model, ν and f", ["Model"] + [f"ν={nu:g} f={res}" for nu, res in settings],
                 [[MODEL_NAMES.get(m, m)] + [_stats(groups.get((m, *s), [])) for s in settings] for m in models])
    cells = Table("Per cell", ["Model", "ν", "f", "nRMSE", "one-step", "amp last", "rollout ḡ", f"ḡ last {epochs}",
                               "s / epoch"],
                  [[MODEL_NAMES.get(m, m), f"{nu:g}", res, _stats(rs), _stats(rs, "one_step_nrmse"),
                    _stats(rs, DIAGNOSTICS["amp last"]), *((_stats(rs, "gate_mean"),
                                                            _stats(rs, "gate_mean_last20_epochs")) if m == "amgfno2d"
                                                           else (None, None)), _stats(rs, _per_epoch)]
                   for (m, nu, res), rs in groups.items()],
                  "Mean ± sample std over seeds. one-step: the nRMSE with teacher forcing; amp last: rollout norm / "
                  f"true norm at the last step; ḡ: AMGFNO2d's mean gate (rollout; last {epochs} training epochs).")
    gate_rows = []
    for label, by_res in _gate_rows(records).items():
        lowest = by_res[min(by_res)][0].mean
        for res, (last20, rollout) in sorted(by_res.items()):
            ratio = lowest / last20.mean if lowest is not None and last20.mean else None
            gate_rows.append([label, res, last20, rollout, ratio])
    gate = Table("Does the gate open at low resolution and close at high resolution?",
                 ["setting", "f", f"ḡ last {epochs} epochs", "rollout ḡ", "ḡ at the lowest f / ḡ at f"],
                 gate_rows,
                 "AMGFNO2d's mean gate per f; the paper's 1D KS values (Table 3) for comparison. The gate opens at "
                 "low resolution where ḡ is large there (the paper's KS: 0.70 at f = 32) and falls with f (the last "
                 "column grows). Its frequency factor starts at χ = sigmoid(2 ln ω_f + 3.8), below 0.01 for "
                 "ω_f < 0.01: a flow whose f x f observation misses less energy than that keeps the gate shut."
                 + ("" if epochs == str(GATE_EPOCHS) else f" The paper's values: the last {GATE_EPOCHS} epochs."))
    return [wide, cells, gate]


def _log2_axis(ax, resolutions) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xticks(resolutions, [str(r) for r in resolutions])
    ax.minorticks_off()


def _ns2d_nrmse_figure(records: list[dict]):
    """nRMSE vs f, a line per model (error bars: std over seeds), one panel per nu."""
    groups = _ns2d_groups(records)
    nus = sorted({k[1] for k in groups if _stats(groups[k]).n})
    if not nus:
        return None
    fig, axes = _figure(len(nus))
    for ax, nu in zip(axes, nus):
        for i, model in enumerate(MODEL_NAMES_2D):
            cells = [(res, _stats(rs)) for (m, n, res), rs in groups.items() if m == model and n == nu]
            cells = [(res, st) for res, st in cells if st.n]
            if cells:
                _errorbar(ax, [c[0] for c in cells], [c[1] for c in cells], color=f"C{i}", label=MODEL_NAMES[model])
        _log2_axis(ax, sorted({k[2] for k in groups}))
        ax.set(yscale="log", xlabel="f (grid points per axis)", ylabel="nRMSE", title=f"NS2D ν={nu:g}")
        ax.legend(fontsize=8)
    return fig


def _ns2d_gate_figure(records: list[dict]):
    """AMGFNO2d's g-bar (mean of the last 20 epochs) vs f, a line per nu, with the paper's 1D KS line."""
    rows = _gate_rows(records)
    if not rows:
        return None
    fig, (ax,) = _figure(1, width=5.0)
    for i, (label, by_res) in enumerate(rows.items()):
        cells = [(res, last20) for res, (last20, _) in sorted(by_res.items()) if last20.n]
        paper = "paper" in label
        _errorbar(ax, [c[0] for c in cells], [c[1] for c in cells], label=label,
                  color="k" if paper else f"C{i}", linestyle="--" if paper else "-")
    _log2_axis(ax, sorted({res for by_res in rows.values() for res in by_res}))
    epochs = _gate_epochs(_select(records, pde="ns2d", model="amgfno2d", variant=None, fusion="residual"))
    ax.set(yscale="log", xlabel="f (grid points per axis)", ylabel=GBAR + f" (last {epochs} epochs)",
           title="AMGFNO2d: gate vs resolution")
    ax.legend(fontsize=8)
    return fig


GRID_AXES = ("model", "pde", "nu", "res", "fusion", "alpha", "variant", "omega", "reading")


def _grid_tables(records: list[dict]) -> list[Table]:
    """A row per combination of the settings that vary among the runs (seeds pooled)."""
    from amg_fast.train.config import TrainConfig

    defaults = {k: v for k, v in TrainConfig().to_dict().items() if v is not None and k != "cache_dir"}

    def setting(r: dict, key: str):  # an override, else TrainConfig's default ("-": the preset's value)
        return _get(r, "overrides").get(key, defaults.get(key, "-")) if key not in GRID_AXES else _get(r, key)
    keys = list(GRID_AXES) + sorted({k for r in records for k in _get(r, "overrides")})
    axes = [k for k in keys if len({repr(setting(r, k)) for r in records}) > 1] or ["model"]
    groups: dict[tuple, list[dict]] = {}
    for r in records:
        groups.setdefault(tuple(setting(r, k) for k in axes), []).append(r)
    groups = dict(sorted(groups.items(), key=lambda item: _sort_key(item[0])))
    return [_diagnostics_table("Grid: one row per setting (seeds pooled)", axes, groups,
                               _DIAGNOSTICS_CAPTION + " Columns before n: the settings that vary among the runs "
                               "('-': the preset's value).", {"s / epoch": _per_epoch})]


# -- reporters ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Artefact:
    """What a reporter writes: its tables, its figures (stem -> builder, None when no data), the CSV's
    columns beyond the common ones."""

    tables: Callable[[list[dict]], list[Table]]
    figures: dict[str, Callable[[list[dict]], object | None]] = field(default_factory=dict)
    csv_columns: tuple[str, ...] = ()


def _state_counts(records: list[dict]) -> str:
    counts = {s: sum(1 for r in records if r.get("status") == s) for s in ("done",) + EMPTY_STATES}
    return ", ".join(f"{n} {s}" for s, n in counts.items() if n) or "none"


def _training_setups(records: list[dict]) -> Table | None:
    """The finished runs grouped by how they trained -- machine, precision, kernels, CUDA graph, code (commit,
    AMG_FAST_* switches, torch / triton; machine.json's software, absent before 2026-11-27) -- with their count
    and start dates: a sweep continued across GPU sessions mixes them. None without a finished run."""
    from amg_fast.experiments.runner import SOFTWARE_KEY, STARTED_KEY

    groups: dict[tuple, list[str]] = {}
    for r in records:
        results = r.get("results")
        if r.get("status") != "done" or results is None:
            continue
        machine = r.get("machine") or {}
        sw = machine.get(SOFTWARE_KEY) or {}
        commit = (sw["commit"][:10] + (" (uncommitted changes)" if sw.get("commit_dirty") else "")
                  if sw.get("commit") else "-")
        switches = ", ".join(f"{k}={v}" for k, v in (sw.get("kernel_switches") or {}).items())
        versions = f"{sw.get('torch', '-')} / {sw.get('triton') or '-'}" if sw else "-"
        kernels = "Triton" if results.get("fast_kernels") else "reference"
        key = (machine.get("name") or "-", results.get("precision"), kernels,
               "yes" if results.get("cuda_graph") else "no", commit, switches or ("none" if sw else "-"), versions)
        groups.setdefault(key, []).append(str(machine.get(STARTED_KEY) or "")[:10])
    if not groups:
        return None
    rows = []
    for key, dates in sorted(groups.items(), key=lambda item: -len(item[1])):
        known = sorted(d for d in dates if d)
        rows.append([*key, len(dates), (known[0] if known[0] == known[-1] else f"{known[0]} to {known[-1]}")
                     if known else "-"])
    return Table("How the runs trained", ["machine", "precision", "kernels", "CUDA graph", "commit", "kernel switches",
                                          "torch / triton", "runs", "started"], rows, tex=False)


def _preset_line(preset: str | None, records: list[dict]) -> list[str]:
    """What table.md says of the sweep's preset (its scale): the paper's protocol (unless runs override its
    settings), or a shorter one whose ratios to the paper's values say little about the method."""
    if preset is None:
        return []
    changed = sorted({key for r in records for key in _get(r, "overrides")})
    if preset != "paper":
        return [f"Sweep preset: {preset}, trained far less than the paper preset: its values, and their ratios "
                "to the paper's, check the pipeline, not the method.", ""]
    if changed:
        return [f"Sweep preset: paper; some runs override its settings ({', '.join(changed)}).", ""]
    return ["Sweep preset: paper (the paper's training protocol).", ""]


def _report(experiment_id: str, artefact: Artefact, records: list[dict], out_dir: Path,
            preset: str | None = None) -> list[Path]:
    """Figures first (a missing matplotlib fails before any file), then table.md/.csv/.tex; preset: the
    sweep's (experiments.specs.PRESETS), said in table.md, or None."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written, notes = [], []
    for stem, build in artefact.figures.items():
        fig = build(records)
        if fig is None:
            notes.append(f"- {stem}: skipped, no data in these runs")
        else:
            written += _save_figure(fig, out_dir, stem)
            notes.append(f"- {stem}.png, {stem}.pdf")
    tables = artefact.tables(records)
    experiment = EXPERIMENTS.get(experiment_id)
    md = [f"# {experiment_id}: {experiment.artefact if experiment else ''}".rstrip(": "), "",
          f"Runs: {len(records)} ({_state_counts(records)}). Cells: ours (paper); "
          "several seeds give mean ± sample std [n=seeds].", ""] + _preset_line(preset, records)
    md += [_markdown(t) for t in tables] or ["No runs.\n"]
    setups = _training_setups(records)
    md += [_markdown(setups)] if setups else []
    if notes:
        md += ["## Figures", "", *notes, ""]
    failed = [r for r in records if r.get("error")]
    if failed:
        md += ["## Failed runs", "", *(f"- {r.get('name')} ({r.get('status')}): "
                                      f"{str(r['error']).strip().splitlines()[-1][:300]}"
                                      for r in failed if str(r["error"]).strip()), ""]
    tex = [f"% {experiment_id}: generated by amg_fast.experiments.reports", ""] + [_latex(t) for t in tables if t.tex]
    written += [_write_atomic(out_dir / "table.md", "\n".join(md)),
                _write_atomic(out_dir / "table.csv", _csv(records, artefact.csv_columns)),
                _write_atomic(out_dir / "table.tex", "\n".join(tex))]
    return written


def _alpha_artefact(fusion: str) -> Artefact:
    return Artefact(partial(_alpha_tables, fusion), {"alpha_sweep": partial(_alpha_sweep_figure, fusion),
                                                     "alpha_star_heatmap": partial(_alpha_heatmap_figure, fusion)},
                    ("fusion", "alpha"))


_ABLATION_COLUMNS = ("variant", "omega", "gate_mean", "gate_mean_last20")
_DIAGNOSTIC_COLUMNS = ("gate_mean", "gate_mean_last20", "one_step_nrmse", "amplitude_last", "train_nrmse",
                       "test_one_step_loss", "train_one_step_loss", "epochs")
ARTEFACTS: dict[str, Artefact] = {
    "alpha-convex": _alpha_artefact("convex"),
    "alpha-additive": _alpha_artefact("additive"),
    "table2": Artefact(_table2_tables, {"bars_by_nu_f64": partial(_bars, vary="nu", res=64),
                                        "bars_by_f_nu0.1": partial(_bars, vary="res", nu=HEADLINE_NU)},
                       ("fusion", "alpha", "omega", "gate_mean")),  # fusion/alpha: the alpha* bars' runs
    "table3": Artefact(_table3_tables, {"gate_during_training": _gate_training_figure,
                                        "nrmse_and_gate_over_epochs": _nrmse_gate_figure},
                       ("omega", "gate_mean", "gate_mean_last20")),
    "omega-ablation": Artefact(partial(_ablation_tables, OMEGA), csv_columns=_ABLATION_COLUMNS),
    "freq-gate-ablation": Artefact(partial(_ablation_tables, FREQ_GATE), csv_columns=_ABLATION_COLUMNS),
    "headline": Artefact(_headline_tables, csv_columns=("overrides",) + _DIAGNOSTIC_COLUMNS),
    "fidelity": Artefact(_fidelity_tables, csv_columns=("overrides", "reading") + _DIAGNOSTIC_COLUMNS),
    "precision": Artefact(_precision_tables, csv_columns=("overrides",) + _DIAGNOSTIC_COLUMNS),
    "ns2d": Artefact(_ns2d_tables, {"nrmse_by_model_f": _ns2d_nrmse_figure, "gate_vs_f": _ns2d_gate_figure},
                     ("gate_mean", "gate_mean_last20", "one_step_nrmse", "amplitude_last", "epochs")),
    "grid": Artefact(_grid_tables, csv_columns=("fusion", "alpha", "variant", "omega", "reading", "overrides")
                     + _DIAGNOSTIC_COLUMNS),
}
REPORTERS: dict[str, Callable[..., list[Path]]] = {
    name: partial(_report, name, artefact) for name, artefact in ARTEFACTS.items()}


def write_report(experiment_id: str, records: list[dict], out_dir: Path, preset: str | None = None) -> list[Path]:
    """Write the report of `experiment_id` from its run records into out_dir (created); the files written.
    preset: the sweep's preset, said in table.md (None: not said)."""
    if experiment_id not in REPORTERS:
        raise ValueError(f"no report for experiment {experiment_id!r}; known: {', '.join(REPORTERS)}")
    return REPORTERS[experiment_id](records, Path(out_dir), preset=preset)
