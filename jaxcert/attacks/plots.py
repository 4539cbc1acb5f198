r"""Metric-vs-ε figures of the study (docs/attacks.md §3, "Plot-level statistics"; §4, "How it is compared").

For every metric, one figure: x = ε (Å, log scale), one line per attack (and step
count, so a step sweep does not mix with the ε grid) at the **median** over all
runs of that (attack, n, α/ε, ε), structures and seeds pooled, with the **IQR**
(Q25–Q75, linear interpolation) shaded.  When contour-exploration results are
given, their 5th–95th-percentile band is drawn as a horizontal band (the
baseline is not indexed by ε).

The numbers come from pure functions (:func:`attack_bands`, :func:`contour_band`)
that the tests check; :func:`write_plots` draws them with matplotlib's
object-oriented API on an Agg canvas (imported lazily; no pyplot, no global
backend change) and writes ``<metric>.png`` plus ``bands.json``.
"""

from __future__ import annotations

import io
import json
import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from jaxcert.attacks.metrics import value
from jaxcert.core.files import atomic_write

__all__ = ["PLOT_METRICS", "attack_bands", "contour_band", "write_plots"]

#: Default metrics: both stages of the displacement, force, topology, RDF, symmetry and energy metrics, and steps.
PLOT_METRICS = tuple(f"{st}.{m}" for st in ("immediate", "post_relaxation")
                     for m in ("median_displacement", "max_displacement", "median_delta_force", "jaccard_distance",
                               "coordination_change_max", "rdf_l1", "space_group_change", "symmetry_op_retention",
                               "delta_energy_per_atom")) + ("steps_after",)

#: Per-frame contour metrics (jaxcert.attacks.contour rows) that stand for an attack metric in the contour band.
_CONTOUR_FRAME = {"max_displacement": "max_displacement", "mean_displacement": "mean_displacement",
                  "mean_delta_force": "mean_delta_force"}


def attack_bands(rows: Sequence[Mapping[str, Any]], metric: str) -> list[dict[str, Any]]:
    """Median and IQR of ``metric`` per attack line and ε, over structures and seeds (NaN values dropped).

    Returns one dict per line, ordered by attack label then n: ``label`` (e.g. ``"PGD"`` or ``"I-FGSM n=20"`` when
    one attack has several step counts), ``attack_label``, ``n_steps``, ``alpha_ratio``, and per ε (ascending)
    lists ``epsilon``, ``median``, ``q25``, ``q75``, ``n`` (runs used).
    """
    groups: dict[tuple, dict[float, list[float]]] = {}
    for r in rows:
        v = value(dict(r), metric)
        if not math.isfinite(v):
            continue
        ratio = r.get("alpha_ratio")
        ratio = float(f"{float(ratio):.6g}") if ratio is not None else math.nan
        key = (r.get("attack_label", r["attack"]), int(r["n_steps"]), ratio)
        groups.setdefault(key, {}).setdefault(float(f"{float(r['epsilon']):.6g}"), []).append(v)
    n_per_label: dict[str, int] = {}
    for lab, _, _ in groups:
        n_per_label[lab] = n_per_label.get(lab, 0) + 1
    out = []
    for (lab, n, ratio), by_eps in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1], str(kv[0][2]))):
        eps = sorted(by_eps)
        q = [np.percentile(by_eps[e], [25, 50, 75]) for e in eps]
        name = lab if n_per_label[lab] == 1 else f"{lab} n={n}" + (f" a={ratio:g}eps" if lab == "PGD" else "")
        out.append({"label": name, "attack_label": lab, "n_steps": n, "alpha_ratio": ratio, "epsilon": eps,
                    "median": [float(x[1]) for x in q], "q25": [float(x[0]) for x in q],
                    "q75": [float(x[2]) for x in q], "n": [len(by_eps[e]) for e in eps]})
    return out


def contour_band(contour_results: Sequence[Mapping[str, Any]], metric: str,
                 percentiles: tuple[float, float] = (5.0, 95.0)) -> dict[str, Any] | None:
    """The contour baseline's band (5th–95th percentile by default) for an attack metric ``stage.name``.

    Values: every frame of every contour run when the frame rows carry that metric (displacements and mean ΔF, from
    R_c), otherwise the per-run endpoint (``immediate.*``) or relaxed-endpoint (``post_relaxation.*``) metric of
    :func:`jaxcert.attacks.contour.contour`.  ``None`` when no value exists.
    """
    stage, _, name = metric.rpartition(".")
    if name in _CONTOUR_FRAME and stage == "immediate":
        vals = [float(fr[_CONTOUR_FRAME[name]]) for c in contour_results for fr in c.get("rows", [])]
        source = "frames"
    else:
        part = {"immediate": "endpoint", "post_relaxation": "relaxed"}.get(stage)
        vals = [value(dict(c[part]), name) for c in contour_results if part and part in c]
        source = part or ""
    vals = [v for v in vals if math.isfinite(v)]
    if not vals:
        return None
    lo, hi = np.percentile(vals, percentiles)
    return {"low": float(lo), "high": float(hi), "percentiles": list(percentiles), "n": len(vals), "source": source}


def write_plots(rows: Sequence[Mapping[str, Any]], out_dir: str, metrics: Sequence[str] = PLOT_METRICS,
                contour: Sequence[Mapping[str, Any]] | None = None, title: str = "") -> list[str]:
    """Draw each metric vs ε (median line, IQR band, contour band) into ``out_dir``; returns the files written.

    Metrics without any finite value are skipped.  ``bands.json`` holds the plotted numbers.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    os.makedirs(out_dir, exist_ok=True)
    written, numbers = [], {}
    for metric in metrics:
        bands = attack_bands(rows, metric)
        if not bands:
            continue
        band_c = contour_band(contour, metric) if contour else None
        numbers[metric] = {"attacks": bands, "contour": band_c}
        fig = Figure(figsize=(6.0, 4.0))
        FigureCanvasAgg(fig)
        ax = fig.add_subplot()
        for b in bands:
            (line,) = ax.plot(b["epsilon"], b["median"], marker="o", ms=3, label=b["label"])
            ax.fill_between(b["epsilon"], b["q25"], b["q75"], color=line.get_color(), alpha=0.25, lw=0)
        if band_c is not None:
            ax.axhspan(band_c["low"], band_c["high"], color="0.5", alpha=0.2,
                       label=f"contour {band_c['percentiles'][0]:g}-{band_c['percentiles'][1]:g}%")
        if all(e > 0 for b in bands for e in b["epsilon"]):
            ax.set_xscale("log")
        ax.set_xlabel("epsilon (A)")
        ax.set_ylabel(metric)
        ax.set_title(title or f"{metric}: median, IQR over structures and seeds", fontsize=9)
        ax.legend(fontsize=7)
        fig.tight_layout()
        path = os.path.join(out_dir, metric.replace("/", "_") + ".png")
        png = io.BytesIO()
        fig.savefig(png, dpi=110, format="png")
        atomic_write(path, png.getvalue())  # every file atomically, never through a link (jaxcert.core.files)
        written.append(path)
    path = os.path.join(out_dir, "bands.json")
    atomic_write(path, json.dumps(numbers, indent=1, allow_nan=True))
    written.append(path)
    return written
