"""Section ``hull`` — exact arithmetic on DFT data: the hull's invariance to a self-consistent shift.

``hull_invariance`` on the MP raw formation energies with section ``rung0``'s constants (−MP2020 when that
section did not run) and with seeded random ones; stability scores of the raw-DFT and Rung-0-corrected hulls
against the experimental hull (docs/controls.md, section 14.6).
"""

from __future__ import annotations

import time

import numpy as np

from jaxcert import datasets
from jaxcert.controls._hull import e_above_hull, hull_invariance, stability_scores
from jaxcert.controls.benchmark.context import Context
from jaxcert.controls.benchmark.results import SectionResult
from jaxcert.controls.benchmark.rung0 import mp2020_expected
from jaxcert.core.result import Status

__all__ = ["NAME", "run"]

NAME = "hull"


def run(ctx: Context) -> SectionResult:
    """Invariance with fitted and random constants, and the stability scores."""
    cfg = ctx.cfg
    t0 = time.perf_counter()
    mp, corr = datasets.get("mp-raw-vs-exp"), datasets.get("mp2020-corrections")
    els = list(mp.elements)
    rung = ctx.earlier("rung0").get("fits", {}).get("no_fit_cut")
    if rung is not None:
        c_fit = np.array([rung["constants"][e] for e in els], np.float64)
        source = "Rung-0 constants of section rung0 (no fit cut)"
    else:
        expected, _ = mp2020_expected(mp, corr)
        c_fit = np.nan_to_num(expected, nan=0.0)
        source = "-MP2020 constants (section rung0 not run)"
    c_rand = np.random.default_rng(cfg.seed).uniform(-0.5, 0.5, len(els))
    inv_fit = hull_invariance(mp.fractions, mp.e_form_raw, c_fit, elements=els)
    inv_rand = hull_invariance(mp.fractions, mp.e_form_raw, c_rand, elements=els)
    eh_raw = e_above_hull(mp.fractions, mp.e_form_raw, els)
    eh_exp = e_above_hull(mp.fractions, mp.e_form_exp, els)
    e_cor = np.asarray(mp.e_form_raw) - np.asarray(mp.fractions) @ c_fit
    eh_cor = e_above_hull(mp.fractions, e_cor, els)
    mask = np.asarray(eh_exp.scored)
    fields = {
        "protocol": "hull_invariance on the 334 MP raw compounds (formation energies, corners at 0): baseline, "
                    "compounds and corners shifted by the same per-element constants (must not change E_hull) and "
                    "compounds only (must); stability: e_above_hull of raw DFT and of experiment on the hull of "
                    "these compounds alone (not MP's full phase diagram), stability_scores at 25 meV/atom on the "
                    "compounds in systems with >= 3 entries",
        "constants_source": source,
        "invariance_fitted_constants": inv_fit.to_dict(), "invariance_random_constants": inv_rand.to_dict(),
        "passed": bool(inv_fit.passed and inv_rand.passed),
        "stability_raw_vs_experiment": stability_scores(eh_raw.e_above_hull, eh_exp.e_above_hull, mask=mask).to_dict(),
        "stability_rung0_corrected_vs_experiment": stability_scores(eh_cor.e_above_hull, eh_exp.e_above_hull,
                                                                    mask=mask).to_dict(),
        "n_scored": int(mask.sum()), "wall_s": time.perf_counter() - t0}
    ctx.log(f"  hull: invariance passed={fields['passed']} (max change {inv_fit.max_change_invariant:.1e} invariant, "
            f"{inv_fit.max_change_compounds_only:.3f} eV/atom compounds only)")
    return SectionResult(NAME, Status.OK, fields)
