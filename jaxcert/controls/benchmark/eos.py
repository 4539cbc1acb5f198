"""Section ``eos`` — against DFT: equations of state of the dcdft set, model vs WIEN2k PBE.

Seven volumes 94…106 % of the WIEN2k V0, third-order Birch–Murnaghan fits, Δ (symmetric) per element and its
mean over elements (the Δ gauge), V0 and B0 relative errors, bootstraps over elements.  WIEN2k vs experiment on
the same elements, with the same statistic, is the reference-vs-reference floor (docs/controls.md, section 14.1).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from jaxcert import datasets
from jaxcert.controls._eos import DELTA_VOLUME_FACTORS, birch_murnaghan_fit, eos_scan
from jaxcert.controls.benchmark.config import QUICK_EOS, V0_CUTOFF
from jaxcert.controls.benchmark.context import Context
from jaxcert.controls.benchmark.geometry import scaled
from jaxcert.controls.benchmark.models import bridged, host_energies, supports
from jaxcert.controls.benchmark.results import ModelRun, SectionResult
from jaxcert.controls.benchmark.stats import boot, delta, error_block, finite_or_nan, fmt, nanmean
from jaxcert.core.result import Status

__all__ = ["NAME", "run"]

NAME = "eos"
#: Trims (a threshold-censored mean, as trimmed_mae): Δ in meV/atom, B0 as a relative error (V0: V0_CUTOFF).
DELTA_CUTOFF_MEV = 1000.0
B0_CUTOFF = 1.0


def run(ctx: Context) -> SectionResult:
    """Every model's EOS on the dcdft elements it supports, with the floor; one :class:`ModelRun` per model."""
    cfg = ctx.cfg
    dc = datasets.get("dcdft")
    symbols = list(QUICK_EOS) if cfg.quick else list(dc.symbols)
    idx = np.array([dc.symbols.index(s) for s in symbols])
    sym = np.array(symbols)
    v0, b0, b1 = dc.v0[idx], dc.b0[idx], dc.b1[idx]
    ev0, eb0, eb1 = dc.exp_v0[idx], dc.exp_b0[idx], dc.exp_b1[idx]
    has_exp = np.isfinite(ev0) & np.isfinite(eb0) & np.isfinite(eb1)
    d_floor = delta(v0, b0, b1, ev0, eb0, eb1)
    floor = {
        "what": "WIEN2k PBE vs experiment (DFT vs experiment), same statistic as the models",
        "symbols": sym[has_exp],
        "delta_meV": d_floor[has_exp],
        "delta_mean_meV": float(np.nanmean(d_floor[has_exp])) if has_exp.any() else None,
        "delta": error_block(d_floor[has_exp], sym[has_exp], DELTA_CUTOFF_MEV, cfg.n_boot, cfg.seed),
        "v0_rel": error_block(((v0 - ev0) / ev0)[has_exp], sym[has_exp], V0_CUTOFF, cfg.n_boot, cfg.seed),
        "b0_rel": error_block(((b0 - eb0) / eb0)[has_exp], sym[has_exp], B0_CUTOFF, cfg.n_boot, cfg.seed),
    }
    fields = {
        "protocol": "7 volumes 94..106 % of the WIEN2k V0 (the Delta protocol), cell scaled at fixed fractional "
                    "coordinates, third-order Birch-Murnaghan fit; Delta symmetric (centre = mean V0), mean over "
                    "elements = the Delta gauge; bootstrap resamples elements",
        "trims": {"delta_meV": DELTA_CUTOFF_MEV, "v0_rel": V0_CUTOFF, "b0_rel": B0_CUTOFF},
        "n_elements": len(symbols), "floor": floor}
    ctx.begin(NAME, fields)
    return ctx.per_model(NAME, fields, lambda spec: _model(ctx, spec, dc, symbols, idx, sym, has_exp, d_floor))


def _model(ctx: Context, spec: str, dc: Any, symbols: list[str], idx: np.ndarray, sym: np.ndarray,
           has_exp: np.ndarray, d_floor: np.ndarray) -> ModelRun:
    """One model's EOS statistics (or why there are none)."""
    cfg = ctx.cfg
    v0, b0, b1 = dc.v0[idx], dc.b0[idx], dc.b1[idx]
    ev0, eb0, eb1 = dc.exp_v0[idx], dc.exp_b0[idx], dc.exp_b1[idx]
    model, info = ctx.models.get(spec)
    if model is None:
        return ModelRun(Status.ERROR, info.reason)
    t0 = time.perf_counter()
    keep = np.array([supports(model, [s]) for s in symbols])
    if not keep.any():
        return ModelRun(Status.SKIPPED, "the model supports none of the dcdft elements")
    ii = idx[keep]
    f = np.asarray(DELTA_VOLUME_FACTORS, np.float64)
    vols = f[None, :] * dc.v0[ii][:, None]
    if bridged(model):
        geoms = [scaled(dc.at_v0(dc.symbols[i]), k) for i in ii for k in f]
        n_at = np.repeat([len(dc.atoms[i]) for i in ii], len(f))
        E = (host_energies(model, geoms) / n_at).reshape(len(ii), len(f))
        route = "host batch: every element's 7 volumes in the backend's batched torch calls"
    else:
        E = np.full((len(ii), len(f)), np.nan)
        for r, i in enumerate(ii):
            try:
                E[r] = eos_scan(model, dc.atoms[i], f, v0=float(dc.v0[i])).energies
            except Exception as err:  # noqa: BLE001 - recorded as NaN for this element
                ctx.log(f"  eos {spec} {dc.symbols[i]}: {type(err).__name__}: {err}")
        route = "jaxcert.controls.eos_scan (one vmapped jitted call per element)"
    fit = birch_murnaghan_fit(vols, E)
    mv0, mb0, mb1 = finite_or_nan(fit.v0), finite_or_nan(fit.b0), finite_or_nan(fit.b1)
    d = delta(mv0, mb0, mb1, v0[keep], b0[keep], b1[keep])
    v_rel, b_rel = (mv0 - v0[keep]) / v0[keep], (mb0 - b0[keep]) / b0[keep]
    s_k = sym[keep]
    he = has_exp[keep]
    d_exp = delta(mv0, mb0, mb1, ev0[keep], eb0[keep], eb1[keep])
    fl = d_floor[keep]
    res = {
        "route": route, "n_elements": int(keep.sum()),
        "unsupported": sym[~keep], "n_failed_fit": int(np.sum(~np.isfinite(d))),
        "delta_mean_meV": float(np.nanmean(d)) if np.isfinite(d).any() else None,
        "delta": error_block(d, s_k, DELTA_CUTOFF_MEV, cfg.n_boot, cfg.seed),
        "v0_rel": error_block(v_rel, s_k, V0_CUTOFF, cfg.n_boot, cfg.seed),
        "b0_rel": error_block(b_rel, s_k, B0_CUTOFF, cfg.n_boot, cfg.seed),
        "on_floor_elements": {
            "what": "on the elements with experimental data: model vs WIEN2k (DFT), the floor (WIEN2k vs "
                    "experiment) and model vs experiment; minus_floor = mean Delta(model, WIEN2k) - mean "
                    "Delta(WIEN2k, experiment), paired bootstrap over elements (negative: the model is closer "
                    "to PBE than PBE is to experiment)",
            "n": int(np.sum(he & np.isfinite(d))),
            "delta_model_vs_dft_mean_meV": nanmean(d[he]),
            "delta_floor_mean_meV": nanmean(fl[he]),
            "delta_model_vs_experiment_mean_meV": nanmean(d_exp[he]),
            "minus_floor": boot("mean", d[he], s_k[he], cfg.n_boot, cfg.seed, paired=fl[he]),
        },
        "per_element": {"symbols": s_k, "v0": mv0, "b0": mb0, "b1": mb1, "e0": finite_or_nan(fit.e0),
                        "delta_meV": d, "delta_vs_experiment_meV": d_exp, "v0_rel": v_rel, "b0_rel": b_rel,
                        "residual_rms": finite_or_nan(fit.residual_rms), "in_range": np.asarray(fit.in_range),
                        "e_at_wien2k_v0": E[:, int(np.argmin(np.abs(f - 1.0)))]},
        "wall_s": time.perf_counter() - t0,
    }
    ctx.log(f"  eos {spec}: {res['n_elements']} elements, mean Delta {fmt(res['delta_mean_meV'])} meV/atom "
            f"({res['wall_s']:.0f} s)")
    return ModelRun(Status.OK, values=res)
