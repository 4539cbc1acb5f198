"""Section ``rung0`` — DFT vs experiment, no model: Rung-0 and the floor on raw MP vs experiment.

err = raw MP formation energy − experimental formation enthalpy on the 334 compounds; the fitted per-element
constants must track the published MP2020 corrections with the derived sign (a positive control with a known
answer; docs/controls.md, section 14.4).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from jaxcert import datasets
from jaxcert.controls._reference import noise_floor, rung0_report
from jaxcert.controls._robust import system_split
from jaxcert.controls.benchmark.context import Context
from jaxcert.controls.benchmark.results import SectionResult
from jaxcert.controls.benchmark.stats import error_block, fmt
from jaxcert.core.result import Status

__all__ = ["NAME", "run", "mp2020_expected"]

NAME = "rung0"
#: Correlations with MP2020 are taken over elements with at least this many training rows.
MIN_SUPPORT = 5


def mp2020_expected(mp: Any, corr: Any) -> tuple[np.ndarray, dict[str, float]]:
    """−(published MP2020 constant) per element column: the sign a fit of raw − experiment should find.

    MP2020 adds its correction to the raw energy to reach experiment, so raw − experiment ≈ −correction · x.
    Anions: the composition corrections (O: the "oxide" value); the U metals: the GGA/GGA+U mixing values
    (which MP applies only to GGA+U oxides and fluorides, so a single per-element constant mixes them with the
    element's GGA compounds).
    """
    pub = dict(corr.anion_constants("oxide"))
    for m, v in corr.u_mixing.get("O", {}).items():
        pub.setdefault(m, v)
    return np.array([-pub.get(e, np.nan) for e in mp.elements]), pub


def _rung0_dict(r: Any, columns: Sequence[str], expected: np.ndarray) -> dict[str, Any]:
    """A Rung0Report's dict with the constants and their support named by element column."""
    d = r.to_dict()
    fit = d.pop("fit")
    d["constants"] = dict(zip(columns, fit["constants"], strict=True))
    d["support"] = dict(zip(columns, fit["support"], strict=True)) if fit.get("support") is not None else None
    d["fit"] = {k: v for k, v in fit.items() if k not in ("constants", "support")}
    d["expected_minus_mp2020"] = dict(zip(columns, expected, strict=True))
    return d


def run(ctx: Context) -> SectionResult:
    """The two Rung-0 fits (the paper's and without the fit cut), the MP2020 refit anchor and the floor."""
    cfg = ctx.cfg
    t0 = time.perf_counter()
    mp, corr = datasets.get("mp-raw-vs-exp"), datasets.get("mp2020-corrections")
    err = np.asarray(mp.e_form_raw - mp.e_form_exp)
    groups = np.asarray(mp.chemsys)
    held = system_split(groups, 0.3)
    train = ~held
    expected, pub = mp2020_expected(mp, corr)
    fits = {}
    for name, kw, X, cols, exp_vec in (
        ("paper", {}, mp.fractions, list(mp.elements), expected),
        ("no_fit_cut", {"fit_cut": None}, mp.fractions, list(mp.elements), expected),
    ):
        r = rung0_report(err, X, train, groups=groups, ref_diff=exp_vec, min_support=MIN_SUPPORT, **kw)
        fits[name] = _rung0_dict(r, cols, exp_vec)
    umetals = [m for m in corr.u_mixing.get("O", {}) if m in mp.elements]
    has_u = np.asarray(mp.fractions)[:, [list(mp.elements).index(m) for m in umetals]].sum(1) > 0
    n_u_gga = int(np.sum(has_u & ~np.asarray(mp.is_hubbard)))
    # the known answer itself: CorrectionCalculator's uncertainty-weighted least squares on MP2020's fit set
    species = ["oxide", "peroxide", "superoxide"] + [s for s in corr.composition if s not in
                                                     ("oxide", "peroxide", "superoxide", "ozonide")]
    species += [m for m in corr.u_mixing.get("O", {}) if m not in species]
    col = {e: j for j, e in enumerate(mp.elements)}
    ox = np.array(mp.oxide_type)
    Xs = np.stack([np.where(ox == s, mp.fractions[:, col["O"]], 0.0) if s in ("oxide", "peroxide", "superoxide")
                   else (mp.fractions[:, col[s]] if s in col else np.zeros(len(mp))) for s in species], axis=1)
    sel = np.asarray(mp.in_mp2020_fit)
    sig = np.where(mp.exp_uncertainty == 0, np.nan, mp.exp_uncertainty)[sel]
    sig = np.where(np.isnan(sig), np.nanmean(sig), sig)
    beta = np.linalg.lstsq(Xs[sel] / sig[:, None], -err[sel] / sig, rcond=None)[0]
    published = {**corr.composition, **corr.u_mixing.get("O", {})}
    refit_dev = {s: float(beta[j] - published[s]) for j, s in enumerate(species)}
    floor = noise_floor(mp.e_form_raw, mp.e_form_exp, groups, mp.fractions, train_mask=train)
    side = {}
    for c in sorted(pub, key=lambda e: list(mp.elements).index(e) if e in mp.elements else 99):
        if c not in mp.elements:
            continue
        side[c] = {"minus_mp2020": -pub[c], "paper": fits["paper"]["constants"][c],
                   "no_fit_cut": fits["no_fit_cut"]["constants"][c],
                   "n_rows": int(np.sum(np.asarray(mp.fractions)[:, list(mp.elements).index(c)] > 0))}
    fields = {
        "protocol": "err = raw MP formation energy - experimental formation enthalpy (eV/atom), 334 compounds; "
                    "train/test = system_split(chemsys, 0.3) (system-disjoint 70/30); rung0_report with the LAD "
                    "loss and ridge 1e-3; ref_diff = -MP2020 constant per element (the sign derived: MP2020 adds "
                    "its correction to raw to reach experiment, so raw - experiment = -correction x fraction); "
                    f"correlations over elements with >= {MIN_SUPPORT} training rows",
        "fits": fits,
        "variants": {"paper": "the paper's Rung-0: per-element constants, fit cut |err| < 0.5 eV/atom",
                     "no_fit_cut": "the same without the fit cut: the known-answer setting (MP2020's GGA/GGA+U "
                                   "mixing corrections reach 4.4 eV per metal atom, so the rows that carry them "
                                   "exceed the cut and the U metals go unfitted with it)"},
        "u_metal_rows": {"n": int(has_u.sum()), "n_not_gga_u": n_u_gga,
                         "note": "every compound here with a U metal (V, Cr, Mn, Fe, Co, Ni, Mo, W) is a GGA+U oxide "
                                 "or fluoride when n_not_gga_u is 0, so a per-element constant is MP2020's species "
                                 "constant for these metals"},
        "side_by_side": side,
        "mp2020_refit": {"what": "uncertainty-weighted least squares of experiment - raw on MP2020's fit set with "
                                 "CorrectionCalculator's design: reproduces the published constants (the anchor of "
                                 "the known answer)", "deviation": refit_dev,
                         "max_abs_deviation": float(max(abs(v) for v in refit_dev.values()))},
        "floor": floor.to_dict(),
        "raw_vs_exp": error_block(err, groups, 1.0, cfg.n_boot, cfg.seed),
        "wall_s": time.perf_counter() - t0}
    fp, fn = fits["paper"], fits["no_fit_cut"]
    ctx.log(f"  rung0: held-out trimmed MAE raw {fp['raw']['value']:.3f} -> {fp['corrected']['value']:.3f} eV/atom "
            f"(paper), {fn['corrected']['value']:.3f} (no fit cut); r(constants, -MP2020) "
            f"{fmt(fp['ref_corr_r'])} / {fmt(fn['ref_corr_r'])}")
    return SectionResult(NAME, Status.OK, fields)
