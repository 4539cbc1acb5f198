"""The benchmark's small statistics: bootstrap blocks, NaN-tolerant reductions, Δ elementwise, number formatting.

Every reduction returns ``None`` instead of NaN when nothing is finite, so the report stays strict JSON and a
section with no usable number says so rather than printing a NaN.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from jaxcert.controls._eos import delta_gauge
from jaxcert.controls._robust import cluster_bootstrap, trimmed_mae

__all__ = ["boot", "error_block", "finite_or_nan", "delta", "nanmean", "nanmax", "nanmedian", "rowmax", "fmt"]


def boot(stat: str, x: np.ndarray, groups: np.ndarray, n_boot: int, seed: int, *, cutoff: float | None = None,
         paired: np.ndarray | None = None) -> dict[str, Any]:
    """``cluster_bootstrap`` of ``stat`` over ``groups`` on the finite entries (without the replicates), plus ``n``."""
    ok = np.isfinite(x) if paired is None else np.isfinite(x) & np.isfinite(paired)
    if ok.sum() < 2:
        return {"estimate": None, "lo": None, "hi": None, "n": int(ok.sum())}
    r = cluster_bootstrap(stat, x[ok], groups[ok], n_boot=n_boot, seed=seed, cutoff=cutoff,
                          paired=None if paired is None else paired[ok])
    d = r.to_dict()
    d.pop("replicates", None)
    d["n"] = int(ok.sum())
    return d


def error_block(err: np.ndarray, groups: np.ndarray, cutoff: float, n_boot: int, seed: int) -> dict[str, Any]:
    """Median |e|, trimmed MAE (threshold-censored at ``cutoff``) and its bootstrap over ``groups``."""
    tm = trimmed_mae(err, cutoff)
    return {"median_abs": tm.median_abs, "trimmed": tm.to_dict(),
            "ci": boot("trimmed_mae", np.abs(err), groups, n_boot, seed, cutoff=cutoff)}


def finite_or_nan(x: Any) -> np.ndarray:
    """``x`` as float64 with every non-finite entry NaN."""
    a = np.asarray(x, np.float64)
    return np.where(np.isfinite(a), a, np.nan)


def delta(v0a: Any, b0a: Any, b1a: Any, v0b: Any, b0b: Any, b1b: Any) -> np.ndarray:
    """Δ (meV/atom) elementwise, NaN where either curve is unusable (instead of raising)."""
    a = [np.asarray(v, np.float64) for v in (v0a, b0a, b1a, v0b, b0b, b1b)]
    ok = np.isfinite(np.stack(a)).all(0) & (a[0] > 0) & (a[1] > 0) & (a[3] > 0) & (a[4] > 0)
    out = np.full(a[0].shape, np.nan)
    if ok.any():
        out[ok] = delta_gauge(*(v[ok] for v in a))
    return out


def nanmean(x: Any) -> float | None:
    """Mean of the finite entries, ``None`` when there is none."""
    x = np.asarray(x, np.float64)
    return float(np.nanmean(x)) if np.isfinite(x).any() else None


def nanmax(x: Any) -> float | None:
    """Maximum of the finite entries, ``None`` when there is none."""
    x = np.asarray(x, np.float64)
    return float(np.nanmax(x)) if np.isfinite(x).any() else None


def nanmedian(x: Any) -> float | None:
    """Median of the finite entries, ``None`` when there is none."""
    x = np.asarray(x, np.float64)
    return float(np.nanmedian(x)) if np.isfinite(x).any() else None


def rowmax(x: np.ndarray) -> np.ndarray:
    """Max over the (6, 6) block of each metal, NaN where the block is all NaN."""
    flat = x.reshape(len(x), -1)
    ok = np.isfinite(flat).any(1)
    out = np.full(len(x), np.nan)
    out[ok] = np.nanmax(flat[ok], axis=1)
    return out


def fmt(x: Any, spec: str = ".3g") -> str:
    """``x`` formatted with ``spec``, or "n/a" for ``None`` and non-finite floats."""
    return "n/a" if x is None or (isinstance(x, float) and not math.isfinite(x)) else format(x, spec)
