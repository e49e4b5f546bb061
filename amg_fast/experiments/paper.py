"""The paper's published numbers as data: what a reproduction is compared with.

Transcribed by hand from the paper (see `SOURCE`); every value is the one printed there, at the
printed precision. Keys follow the package's conventions: model ids "ffno", "multi_input_ffno",
"s4ffno", "amgfno", "factformer", "gkt", "unet"; pde ids "ks" and "burgers"; KS nu in
(0.075, 0.1, 0.125); Burgers nu = 0.001; resolutions f (`res`) in (32, 64, 128). Tables are named
by their caption and by their number in the paper's order of tables (Table 1 is the comparison of
architecture properties, which holds no numbers).

TABLE2_NRMSE      Table 2, "nRMSE values at different resolutions for KS and Burgers' equations":
                  (model, pde, nu, res) -> nRMSE of the autoregressive rollout, 3 decimals.
                  84 entries: 7 models x (9 KS + 3 Burgers). Column order of the table: KS
                  f=32 (nu=.075, .10, .125), f=64 (same nus), f=128 (same nus), Burgers f=32, 64, 128.
TABLE3_GATE       Table 3, "Converged mean gate value g-bar (mean of last 20 epochs) for AMGFNO":
                  (pde, nu, res) -> g-bar, 4 decimals. 12 entries.
OMEGA_F           omega_f, the training-set high-frequency energy ratio, as quoted in the text of the
                  appendix "Ablation: Effect of the Frequency-Aware Gate" (the paper has no table of
                  it): (pde, nu, res) -> omega_f. KS gives one value per f, independent of nu, which is
                  replicated for each KS nu. 12 entries.
OMEGA_ABLATION    Table 4, "Final test nRMSE on KS for fixed vs. per-batch omega_f" (appendix "Choice
                  of omega_f Computation: Fixed vs. Per-Batch"): (nu, res) -> {"fixed", "batch",
                  "delta_pct"}, KS only. 9 entries.
FREQ_GATE_ABLATION  Table 5, "Ablation of the frequency-aware gate in AMGFNO", row "w/o
                  frequency-aware": (pde, nu, res) -> nRMSE, 4 decimals. 12 entries.
ABLATION_AMGFNO   Table 5, row "AMGFNO" (the full model, 4 decimals; on KS the same numbers as the
                  "fixed" column of Table 4, and Table 2's AMGFNO row rounded to 3 decimals). 12.
ALPHA_STAR        The optimal fixed memory weight alpha* of the S4FFNO alpha sweeps on KS,
                  (fusion, "ks", nu, res) -> alpha*. The paper draws alpha* as heatmaps (Figure 1(d)
                  for convex fusion, the appendix figure of "Preliminaries Study: Memory Ablation under
                  Additive Fusion" for additive fusion) and has no table; the values here are those the
                  text states per setting. Additive: all 9 settings (appendix, Observations 1-3).
                  Convex: f=64 (section "Comparison with Optimal Fixed Scaling") and f=128
                  (Section 2.2, Observation 1) only; at f=32 the text gives only the set
                  alpha* in {0.5, 0.75} over the three nus, not which nu has which, so those three
                  keys are absent (see TEXT_VALUES "convex_alpha_star_f32_*"). 15 entries.
ALPHA_STAR_NRMSE  S4FFNO's nRMSE at alpha*, where the text quotes it: convex fusion, f=32 (Section
                  2.2, Observation 1: "from <alpha=1> to <alpha*>"). 3 entries.
TEXT_VALUES       Headline values quoted in the text, each with the .tex line in a comment.

`paper_value(table, **key)` looks one value up (None where the paper has none).
"""
from __future__ import annotations

import math

__all__ = ["SOURCE", "TABLE2_NRMSE", "TABLE2_DECIMALS",
           "TABLE3_GATE", "OMEGA_F", "OMEGA_ABLATION", "FREQ_GATE_ABLATION",
           "ABLATION_AMGFNO", "ALPHA_STAR", "ALPHA_STAR_NRMSE", "TEXT_VALUES", "TABLES", "paper_value"]

SOURCE = "How Much Memory Do We Need? Adaptive Memory Gate for Neural Operators (AMGFNO)"

_KS_NUS = (0.075, 0.1, 0.125)
_BURGERS_NU = 0.001
_RES = (32, 64, 128)
# The 12 (pde, nu, res) settings in the column order of Tables 2 and 5.
_COLUMNS = tuple([("ks", nu, res) for res in _RES for nu in _KS_NUS] + [("burgers", _BURGERS_NU, res) for res in _RES])


def _row(values: tuple[float, ...]) -> dict[tuple[str, float, int], float]:
    assert len(values) == len(_COLUMNS)
    return dict(zip(_COLUMNS, values))


# ---- Table 2 (main): nRMSE. Columns: KS f=32 nu=.075 .10 .125 | f=64 ... | f=128 ... | Burgers 32 64 128.
_TABLE2_ROWS = {
    "factformer":       (0.436, 0.391, 0.149, 0.195, 0.086, 0.022, 0.058, 0.030, 0.017, 0.190, 0.162, 0.117),
    "gkt":              (0.588, 0.601, 0.314, 0.401, 0.120, 0.016, 0.028, 0.013, 0.007, 0.356, 0.349, 0.307),
    "unet":             (0.542, 0.511, 0.249, 0.147, 0.062, 0.022, 0.033, 0.027, 0.014, 0.188, 0.171, 0.112),
    "ffno":             (0.500, 0.446, 0.187, 0.107, 0.033, 0.004, 0.006, 0.004, 0.002, 0.207, 0.146, 0.099),
    "multi_input_ffno": (0.364, 0.308, 0.092, 0.108, 0.046, 0.005, 0.057, 0.052, 0.023, 0.099, 0.054, 0.028),
    "s4ffno":           (0.139, 0.108, 0.031, 0.036, 0.011, 0.004, 0.008, 0.005, 0.003, 0.053, 0.037, 0.030),
    "amgfno":           (0.062, 0.023, 0.014, 0.021, 0.007, 0.003, 0.006, 0.003, 0.002, 0.024, 0.018, 0.020),
}
TABLE2_DECIMALS = 3  # every Table 2 value is printed to 3 decimals: each is known to +-0.0005
TABLE2_NRMSE: dict[tuple[str, str, float, int], float] = {
    (model, pde, nu, res): value
    for model, values in _TABLE2_ROWS.items() for (pde, nu, res), value in _row(values).items()}

# ---- Table 3: AMGFNO's converged mean gate g-bar (mean of the last 20 epochs).
TABLE3_GATE: dict[tuple[str, float, int], float] = {
    ("ks", 0.075, 32): 0.6915, ("ks", 0.075, 64): 0.4720, ("ks", 0.075, 128): 0.0030,
    ("ks", 0.1, 32): 0.7036, ("ks", 0.1, 64): 0.2150, ("ks", 0.1, 128): 0.0008,
    ("ks", 0.125, 32): 0.6976, ("ks", 0.125, 64): 0.0721, ("ks", 0.125, 128): 0.0002,
    ("burgers", 0.001, 32): 0.0267, ("burgers", 0.001, 64): 0.0165, ("burgers", 0.001, 128): 0.0020,
}

# ---- omega_f, from the text of the frequency-gate ablation appendix (no table in the paper).
# KS (tex line 986): "omega_32=0.584, omega_64=0.083, omega_128=0.0003", one value per f with no nu
# given, replicated here for each KS nu. Burgers (tex line 991): 0.0062, 0.0012, 0.0002.
_OMEGA_KS = {32: 0.584, 64: 0.083, 128: 0.0003}
_OMEGA_BURGERS = {32: 0.0062, 64: 0.0012, 128: 0.0002}
OMEGA_F: dict[tuple[str, float, int], float] = {
    **{("ks", nu, res): _OMEGA_KS[res] for nu in _KS_NUS for res in _RES},
    **{("burgers", _BURGERS_NU, res): _OMEGA_BURGERS[res] for res in _RES},
}

# ---- Table 4: fixed vs per-batch omega_f, KS. delta_pct is the printed Delta-%: the paper calls it the
# "performance degradation ... when omega_f is recomputed per batch", i.e. positive = per-batch worse.
# It matches 100 * (batch - fixed) / fixed (relative to the fixed variant) within the rounding of the
# printed 4-decimal nRMSEs, so it was computed from unrounded values: do not expect it to equal the
# ratio of the printed columns exactly (e.g. f=128 nu=0.125 prints 0.0019 / 0.0020 and +5.8).
OMEGA_ABLATION: dict[tuple[float, int], dict] = {
    (0.075, 32): {"fixed": 0.0616, "batch": 0.0651, "delta_pct": 5.8},
    (0.1, 32): {"fixed": 0.0226, "batch": 0.0249, "delta_pct": 10.1},
    (0.125, 32): {"fixed": 0.0142, "batch": 0.0168, "delta_pct": 18.2},
    (0.075, 64): {"fixed": 0.0208, "batch": 0.0250, "delta_pct": 20.1},
    (0.1, 64): {"fixed": 0.0069, "batch": 0.0077, "delta_pct": 11.9},
    (0.125, 64): {"fixed": 0.0033, "batch": 0.0039, "delta_pct": 17.2},
    (0.075, 128): {"fixed": 0.0058, "batch": 0.0068, "delta_pct": 18.5},
    (0.1, 128): {"fixed": 0.0030, "batch": 0.0033, "delta_pct": 11.1},
    (0.125, 128): {"fixed": 0.0019, "batch": 0.0020, "delta_pct": 5.8},
}

# ---- Table 5: frequency-aware gate ablation (same column order as Table 2).
ABLATION_AMGFNO: dict[tuple[str, float, int], float] = _row(
    (0.0616, 0.0226, 0.0142, 0.0208, 0.0069, 0.0033, 0.0058, 0.0030, 0.0019, 0.0244, 0.0179, 0.0202))
FREQ_GATE_ABLATION: dict[tuple[str, float, int], float] = _row(
    (0.0573, 0.0231, 0.0151, 0.0185, 0.0058, 0.0033, 0.0066, 0.0041, 0.0027, 0.0253, 0.0140, 0.0122))

# ---- alpha*: stated in the text (the per-setting heatmaps are figures only).
ALPHA_STAR: dict[tuple[str, str, float, int], float] = {
    # Convex h <- alpha z + (1 - alpha) h, alpha in {0, 0.25, 0.5, 0.75, 1}.
    # f=64, tex line 805: "alpha*=0.25 at nu=0.075, alpha*=0.50 at nu=0.10, and alpha*=0.00 at nu=0.125".
    ("convex", "ks", 0.075, 64): 0.25, ("convex", "ks", 0.1, 64): 0.5, ("convex", "ks", 0.125, 64): 0.0,
    # f=128, tex line 241: "alpha*=0 across all viscosities".
    ("convex", "ks", 0.075, 128): 0.0, ("convex", "ks", 0.1, 128): 0.0, ("convex", "ks", 0.125, 128): 0.0,
    # f=32: only "alpha* in {0.5, 0.75}" (tex line 239), not per nu: absent.
    # Additive h <- alpha z + h, alpha in {0, 0.5, 1, 1.5, 2}.
    # f=32, tex line 915: "alpha*=2.0 across all three viscosity values".
    ("additive", "ks", 0.075, 32): 2.0, ("additive", "ks", 0.1, 32): 2.0, ("additive", "ks", 0.125, 32): 2.0,
    # f=64, tex line 921: "alpha*=2.0 at nu=0.075, alpha*=1.0 at nu=0.1, and alpha*=0.0 at nu=0.125".
    ("additive", "ks", 0.075, 64): 2.0, ("additive", "ks", 0.1, 64): 1.0, ("additive", "ks", 0.125, 64): 0.0,
    # f=128, tex line 918: "alpha*=0.0 for all viscosity values".
    ("additive", "ks", 0.075, 128): 0.0, ("additive", "ks", 0.1, 128): 0.0, ("additive", "ks", 0.125, 128): 0.0,
}

# S4FFNO nRMSE at alpha*, convex, f=32 (tex lines 239-241: "from 0.070 to 0.067 at nu=0.075, from 0.037 to
# 0.028 at nu=0.10, and from 0.027 to 0.016 at nu=0.125"; the first number is alpha=1, in TEXT_VALUES).
ALPHA_STAR_NRMSE: dict[tuple[str, str, float, int], float] = {
    ("convex", "ks", 0.075, 32): 0.067, ("convex", "ks", 0.1, 32): 0.028, ("convex", "ks", 0.125, 32): 0.016,
}

# ---- Values quoted in the text (the comment gives the line of the paper's .tex source).
TEXT_VALUES: dict[str, float] = {
    "gbar_low_res_approx": 0.7,                    # 106 (abstract), 164: g-bar ~ 0.7 at low resolution
    "ks_gbar_f32_approx": 0.70,                    # 737, 774: "For KS, g-bar ~ 0.70" at f=32
    "ks_gbar_f128_max": 0.003,                     # 774: "g-bar <= 0.003" at f=128
    "ks_gbar_f64_nu0.075": 0.472,                  # 775 (0.4720 on line 744, Table 3)
    "ks_gbar_f64_nu0.125": 0.072,                  # 775 (0.0721 on line 745, Table 3)
    "burgers_gbar_f32": 0.0267,                    # 737
    "burgers_gbar_f64": 0.0165,                    # 737
    "burgers_gbar_max": 0.027,                     # 776: "g-bar <= 0.027" for Burgers
    "burgers_gbar_f128_approx": 0.001,             # 1089: "decreasing to ~0.001 at f=128" (Table 3: 0.0020)
    "ks_gbar_f32_range_low": 0.67,                 # 1025 ("0.67--0.69"), 1089 ("0.67--0.70")
    "low_res_reduction_vs_s4ffno_pct_min": 55.0,   # 106, 166: 55--79% nRMSE reduction over S4FFNO at f=32
    "low_res_reduction_vs_s4ffno_pct_max": 79.0,   # 106, 166; 625 (Table 2 caption): "up to 79%"
    "high_res_reduction_vs_s4ffno_pct_min": 25.0,  # 166: 25--40% at f=128
    "high_res_reduction_vs_s4ffno_pct_max": 40.0,  # 166
    "omega_batch_degradation_pct_min": 5.8,        # 934, 941 (Table 4 caption)
    "omega_batch_degradation_pct_max": 20.1,       # 934, 941
    "gate_init_w1": 2.0,                           # 566: frequency-aware gate init w_1 = 2.0
    "gate_init_b_omega": 3.8,                      # 566: b_omega = 3.8
    "convex_alpha_star_f32_low": 0.5,              # 239: alpha* in {0.5, 0.75} at f=32 (per nu not given)
    "convex_alpha_star_f32_high": 0.75,            # 239
    "convex_alpha1_nrmse_f32_nu0.075": 0.070,      # 239: nRMSE at alpha=1 (pure memory), convex
    "convex_alpha1_nrmse_f32_nu0.1": 0.037,        # 240
    "convex_alpha1_nrmse_f32_nu0.125": 0.027,      # 240
    "convex_alpha_star_max_reduction_pct": 41.0,   # 239: alpha* "reduces error by up to 41%" vs alpha=1
}

# ---- Lookup.
# table -> (required keys, optional keys). The one optional key, pde for the KS-only Table 4, only
# selects: any pde but "ks" gives None.
TABLES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "nrmse": (("model", "pde", "nu", "res"), ()),
    "gate": (("pde", "nu", "res"), ()),
    "omega_f": (("pde", "nu", "res"), ()),
    "omega_fixed": (("nu", "res"), ("pde",)),
    "omega_batch": (("nu", "res"), ("pde",)),
    "omega_delta_pct": (("nu", "res"), ("pde",)),
    "no_freq_gate": (("pde", "nu", "res"), ()),
    "ablation_amgfno": (("pde", "nu", "res"), ()),
    "alpha_star": (("fusion", "pde", "nu", "res"), ()),
    "alpha_star_nrmse": (("fusion", "pde", "nu", "res"), ()),
}

_ALL_NUS = _KS_NUS + (_BURGERS_NU,)


def _nu(nu) -> float:
    """The paper's nu a float matches (0.10 == 0.1, 0.1 + 1e-12 -> 0.1); other values unchanged."""
    nu = float(nu)
    for known in _ALL_NUS:
        if math.isclose(nu, known, rel_tol=1e-9):
            return known
    return nu


def paper_value(table: str, **key) -> float | None:
    """The paper's value in `table` for `key`, or None where the paper has none.

    table: one of TABLES; key: the keyword arguments that table needs, from model, pde, nu, res, fusion
    (e.g. paper_value("nrmse", model="amgfno", pde="ks", nu=0.1, res=32) -> 0.023).
    """
    if table not in TABLES:
        raise ValueError(f"unknown paper table {table!r}; allowed tables: {', '.join(TABLES)}")
    required, optional = TABLES[table]
    missing = [k for k in required if k not in key]
    extra = [k for k in key if k not in required and k not in optional]
    if missing or extra:
        parts = ([f"missing keys {missing}"] if missing else []) + ([f"unexpected keys {extra}"] if extra else [])
        raise ValueError(f"paper table {table!r} takes keys {list(required)}"
                         + (f" (optional {list(optional)})" if optional else "") + f": {'; '.join(parts)}")
    if "nu" in key:
        key["nu"] = _nu(key["nu"])
    if "res" in key:
        key["res"] = int(key["res"])
    if table == "nrmse":
        return TABLE2_NRMSE.get((key["model"], key["pde"], key["nu"], key["res"]))
    if table in ("alpha_star", "alpha_star_nrmse"):
        source = ALPHA_STAR if table == "alpha_star" else ALPHA_STAR_NRMSE
        return source.get((key["fusion"], key["pde"], key["nu"], key["res"]))
    if table.startswith("omega_") and table != "omega_f":
        if key.get("pde", "ks") != "ks":
            return None
        row = OMEGA_ABLATION.get((key["nu"], key["res"]))
        field = {"omega_fixed": "fixed", "omega_batch": "batch", "omega_delta_pct": "delta_pct"}[table]
        return None if row is None else row[field]
    source = {"gate": TABLE3_GATE, "omega_f": OMEGA_F, "no_freq_gate": FREQ_GATE_ABLATION,
              "ablation_amgfno": ABLATION_AMGFNO}[table]
    return source.get((key["pde"], key["nu"], key["res"]))
