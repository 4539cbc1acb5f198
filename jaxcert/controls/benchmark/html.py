"""HTML page of the offline mini-benchmark (docs/controls.md, "14. The offline mini-benchmark").

One self-contained page: the headline, then one part per section stating what it compares against, its
tables and inline SVG figures (no plotting dependency; axes ticked by :mod:`jaxcert.report.html`).
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from ase.data import atomic_numbers

from jaxcert.core.result import Status
from jaxcert.report.html import PALETTE, line_plot, linear_ticks, tick_label

__all__ = ["render"]

_OK = Status.OK.value

_CSS = """
body{font-family:sans-serif;max-width:1200px;margin:1em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1em;font-size:13px}
th,td{border:1px solid #ccc;padding:3px 7px;text-align:right}
th{background:#f2f2f2} td.l,th.l{text-align:left}
.cmp{background:#eef5ff;border-left:4px solid #1f77b4;padding:.4em .8em;margin:.5em 0}
.proto{color:#555;font-size:13px}
.fig{display:inline-block;vertical-align:top;margin:4px}
.bad{color:#b00}.ok{color:#070}
"""


def _e(x: Any) -> str:
    return html.escape(str(x))


class _Html(str):
    """A table cell that is already HTML (built from :func:`_num` and :func:`_e`): :func:`_table` inserts it as it
    is and escapes every other string (a model spec, a reason, a structure name)."""


def _num(x: Any, spec: str = ".3g") -> str:
    if x is None:
        return "–"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, (int, float)):
        if isinstance(x, float) and not math.isfinite(x):
            return "–"
        return format(x, spec)
    return _e(x)


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]], left: int = 1) -> str:
    out = ["<table><tr>" + "".join(f'<th class="{"l" if i < left else ""}">{_e(h)}</th>' for i, h in
                                   enumerate(header)) + "</tr>"]
    for r in rows:
        out.append("<tr>" + "".join(f'<td class="{"l" if i < left else ""}">{_cell(v)}'
                                    f"</td>" for i, v in enumerate(r)) + "</tr>")
    out.append("</table>")
    return "".join(out)


def _cell(v: Any) -> str:
    """One table cell: :class:`_Html` as it is, any other string escaped, a number formatted."""
    if isinstance(v, _Html):
        return v
    return _e(v) if isinstance(v, str) else _num(v)


def _arr(x: Any) -> np.ndarray:
    if x is None:
        return np.zeros(0)
    if isinstance(x, np.ndarray):
        return x.astype(np.float64).ravel()
    return np.array([np.nan if v is None else v for v in x], dtype=np.float64)


def _scatter(series: list[tuple[str, Any, Any]], title: str, xlabel: str, ylabel: str, diagonal: bool = True,
             width: int = 440, height: int = 340) -> str:
    """SVG scatter plot of (label, x, y) series, with the y = x line when ``diagonal``."""
    clean = []
    for label, x, y in series:
        x, y = _arr(x), _arr(y)
        ok = np.isfinite(x) & np.isfinite(y)
        if ok.any():
            clean.append((label, x[ok], y[ok]))
    if not clean:
        return f"<p><em>{_e(title)}: no data</em></p>"
    xs = np.concatenate([c[1] for c in clean])
    ys = np.concatenate([c[2] for c in clean])
    lo, hi = float(min(xs.min(), ys.min())), float(max(xs.max(), ys.max()))
    if diagonal:
        x0, x1, xt = linear_ticks(lo, hi)
        y0, y1, yt = x0, x1, xt
    else:
        x0, x1, xt = linear_ticks(float(xs.min()), float(xs.max()))
        y0, y1, yt = linear_ticks(float(ys.min()), float(ys.max()))
    pl, pr, ptop, pb = 58, 130, 28, 40
    W, H = width - pl - pr, height - ptop - pb

    def px(v: float) -> float:
        return pl + (v - x0) / (x1 - x0) * W

    def py(v: float) -> float:
        return ptop + H - (v - y0) / (y1 - y0) * H

    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
         f'font-size="11"><text x="{pl}" y="16" font-size="13" font-weight="bold">{_e(title)}</text>',
         f'<rect x="{pl}" y="{ptop}" width="{W}" height="{H}" fill="none" stroke="#999"/>']
    xs_step = xt[1] - xt[0] if len(xt) > 1 else None
    ys_step = yt[1] - yt[0] if len(yt) > 1 else None
    for v in xt:
        o.append(f'<text x="{px(v):.1f}" y="{ptop + H + 14}" text-anchor="middle">{tick_label(v, xs_step)}</text>')
    for v in yt:
        o.append(f'<text x="{pl - 4}" y="{py(v) + 4:.1f}" text-anchor="end">{tick_label(v, ys_step)}</text>')
        o.append(f'<line x1="{pl}" x2="{pl + W}" y1="{py(v):.1f}" y2="{py(v):.1f}" stroke="#eee"/>')
    if diagonal:
        o.append(f'<line x1="{px(x0):.1f}" y1="{py(y0):.1f}" x2="{px(x1):.1f}" y2="{py(y1):.1f}" stroke="#888" '
                 'stroke-dasharray="4 3"/>')
    o.append(f'<text x="{pl + W / 2}" y="{height - 6}" text-anchor="middle">{_e(xlabel)}</text>')
    o.append(f'<text x="12" y="{ptop + H / 2}" transform="rotate(-90 12 {ptop + H / 2})" text-anchor="middle">'
             f"{_e(ylabel)}</text>")
    for k, (label, x, y) in enumerate(clean):
        c = PALETTE[k % len(PALETTE)]
        o.extend(f'<circle cx="{px(a):.1f}" cy="{py(b):.1f}" r="3" fill="{c}" fill-opacity="0.75"/>'
                 for a, b in zip(x, y, strict=True))
        o.append(f'<text x="{pl + W + 8}" y="{ptop + 12 + 14 * k}" fill="{c}">{_e(label)}</text>')
    o.append("</svg>")
    return "".join(o)


def _fig(svg: str) -> str:
    return f'<div class="fig">{svg}</div>'


def _ok_models(sec: dict) -> dict[str, dict]:
    return {m: r for m, r in (sec.get("models") or {}).items() if r.get("status") == _OK}


def _not_ok(sec: dict) -> str:
    bad = {m: r for m, r in (sec.get("models") or {}).items() if r.get("status") != _OK}
    if not bad:
        return ""
    return "<p>" + "; ".join(f"<b>{_e(m)}</b>: {_e(r.get('status'))}" for m, r in bad.items()) + \
        " (the reason, once per model, is in the Models table at the end)</p>"


def _ci(b: dict | None, scale: float = 1.0, spec: str = ".3g") -> str:
    if not b or b.get("lo") is None:
        return "–"
    return _Html(f"[{_num(b['lo'] * scale, spec)}, {_num(b['hi'] * scale, spec)}]")


def _section_head(name: str, title: str, sec: dict) -> str:
    status = sec.get("status", "unfinished")
    return (f'<h2 id="{name}">{_e(title)} <small>({_e(status)}, {_num(sec.get("section_wall_s"), ".0f")} s)</small>'
            f'</h2><div class="cmp"><b>Compares:</b> {_e(sec.get("compares", ""))}</div>'
            f'<p class="proto">{_e(sec.get("protocol", ""))}</p>')


def _eos(sec: dict) -> str:
    out = [_section_head("eos", "1. Equations of state vs WIEN2k (dcdft)", sec)]
    fl = sec.get("floor", {})
    rows = []
    for m, r in _ok_models(sec).items():
        d, of = r["delta"], r["on_floor_elements"]
        rows.append([m, r["n_elements"], r.get("delta_mean_meV"), d["median_abs"], d["trimmed"]["value"],
                     _ci(d["ci"]), _pct(r["v0_rel"]["trimmed"]["value"]), _pct(r["b0_rel"]["trimmed"]["value"]),
                     of.get("delta_model_vs_experiment_mean_meV"), of["minus_floor"].get("estimate"),
                     _ci(of["minus_floor"])])
    if fl:
        d = fl["delta"]
        rows.append(["floor: WIEN2k vs experiment", len(fl.get("symbols", [])), fl.get("delta_mean_meV"),
                     d["median_abs"], d["trimmed"]["value"], _ci(d["ci"]), _pct(fl["v0_rel"]["trimmed"]["value"]),
                     _pct(fl["b0_rel"]["trimmed"]["value"]), None, None, "–"])
    out.append(_table(["model", "n", "Δ mean (meV/atom)", "Δ median", "Δ trimmed", "95 % CI (elements)",
                       "|V0 err| trimmed (%)", "|B0 err| trimmed (%)", "Δ vs experiment", "Δ − floor",
                       "95 % CI"], rows))
    out.append(_not_ok(sec))
    series = []
    for m, r in _ok_models(sec).items():
        pe = r["per_element"]
        series.append((m, [atomic_numbers[s] for s in pe["symbols"]], pe["delta_meV"]))
    if fl.get("symbols"):
        series.append(("WIEN2k vs exp", [atomic_numbers[s] for s in fl["symbols"]], fl["delta_meV"]))
    out.append(_fig(line_plot(series, "Δ per element", "Z", "Δ (meV/atom)", logy=True, markers=True, width=760)))
    return "".join(out)


def _pct(x: Any) -> float | None:
    return None if x is None else 100.0 * x


def _elastic(sec: dict) -> str:
    out = [_section_head("elastic", "2. Elastic K and G of cubic metals vs experiment", sec)]
    rows = []
    for m, r in _ok_models(sec).items():
        for route in ("exact", "finite_strain"):
            c = r[f"compare_{route}"]
            row = [f"{m} ({route.replace('_', ' ')})"]
            for q in ("K", "G"):
                row += [c[q]["n"], c[q]["r"], c[q]["slope"], c[q]["bias"]]
                st = c[q].get("strata") or {}
                row += [st.get("magnetic 3d", {}).get("r"), st.get("other", {}).get("r")]
            rows.append(row)
    out.append(_table(["model (route)", "n K", "K log-r", "K slope", "K bias", "K r mag-3d", "K r other",
                       "n G", "G log-r", "G slope", "G bias", "G r mag-3d", "G r other"], rows))
    rows = [[m, r["routes"]["max_abs_dC_GPa"], r["routes"].get("max_truncation_estimate_GPa"),
             r["routes"].get("max_abs_dC_extrapolated_GPa"), r["routes"]["max_abs_dK_GPa"],
             r["routes"]["max_abs_dG_GPa"], f"{r['routes']['n_agree']}/{r['routes']['n']}",
             r["max_abs_reference_stress_GPa"], _nanmax_abs(r["K_hill_exact_minus_eos_B0_GPa"])]
            for m, r in _ok_models(sec).items()]
    out.append("<p>Exact vs finite-strain route (the model against itself):</p>")
    out.append(_table(["model", "max |ΔC| (GPa)", "max truncation est.", "max |ΔC| extrapolated", "max |ΔK|",
                       "max |ΔG|", "agree", "max |σ| at V0 (GPa)", "max |K_exact − B0_EOS|"], rows))
    ex = sec.get("excluded_inconsistent_experiment", {}).get("ratio", {})
    if ex:
        out.append("<p>Excluded (inconsistent experimental K, G, E): "
                   + ", ".join(f"{_e(k)} ({v:.2f})" for k, v in ex.items()) + "</p>")
    out.append(_not_ok(sec))
    for q in ("K", "G"):
        series = [(m, np.log10(_arr(r[f"{q}_exp"])), np.log10(np.clip(_arr(r[f"{q}_exact"]), 1e-3, None)))
                  for m, r in _ok_models(sec).items()]
        out.append(_fig(_scatter(series, f"{q}: model (exact) vs experiment", f"log10 {q} experiment (GPa)",
                                 f"log10 {q} model (GPa)")))
    series = [(m, _arr(r["K_exact"]), _arr(r["K_finite_strain"])) for m, r in _ok_models(sec).items()]
    out.append(_fig(_scatter(series, "K: exact vs finite strain", "K exact (GPa)", "K finite strain (GPa)")))
    return "".join(out)


def _nanmax_abs(x: Any) -> float | None:
    a = np.abs(_arr(x))
    return float(np.nanmax(a)) if np.isfinite(a).any() else None


def _prototypes(sec: dict) -> str:
    out = [_section_head("prototypes", "3. Symmetry retention vs symprec and volume drift (AFLOW all-metal)", sec),
           f'<p class="proto">{_e(sec.get("decoration", ""))}</p>']
    rows = []
    for m, r in _ok_models(sec).items():
        ret, vd = r["retention"], r["volume_drift"]
        cells = [_Html(f"{_num(f, '.3f')} [{_num(lo, '.2f')}, {_num(hi, '.2f')}]")
                 for f, lo, hi in zip(ret["fraction"], ret["lo"], ret["hi"], strict=True)]
        rows.append([m, r["decoration"], r["n"], f"{r['n_converged']}/{r['n']} ≤ {r['max_steps']}",
                     r["n_failed_guard"], *cells, vd["median"], vd["median_abs"], vd["frac_abs_above_0.1"]])
    sp = sec.get("symprec", [0.01, 0.05, 0.1])
    out.append(_table(["model", "structures", "n", "converged", "failed (guard)"]
                      + [f"retention @ {t} Å [95 % CI]" for t in sp]
                      + ["median drift V/V0−1", "median |drift|", "frac |drift| > 10 %"], rows, left=2))
    out.append(_not_ok(sec))
    series = [(m, r["retention"]["symprec"], r["retention"]["fraction"]) for m, r in _ok_models(sec).items()]
    series += [(m + " (converged)", r["retention_converged_only"]["symprec"],
                r["retention_converged_only"]["fraction"]) for m, r in _ok_models(sec).items()]
    out.append(_fig(line_plot(series, "Space-group retention vs symprec", "symprec (Å)", "fraction retained",
                              markers=False, width=560)))
    return "".join(out)


def _rung0(sec: dict) -> str:
    out = [_section_head("rung0", "4. Rung-0 and the floor: raw MP vs experiment (known answer: MP2020)", sec)]
    rows = []
    for k, f in (sec.get("fits") or {}).items():
        rows.append([k, sec.get("variants", {}).get(k, ""), f["raw"]["value"], f["corrected"]["value"], f["gain"],
                     f["gain_fraction"], f["minimality"]["passed"], f["cv_mean"], f["cv_std"], f["ref_corr_r"],
                     f["ref_corr_n"]])
    out.append(_table(["fit", "what", "held-out raw (eV/atom)", "corrected", "gain", "gain fraction", "minimal",
                       "CV mean", "CV sd", "r(c, −MP2020)", "n el."], rows, left=2))
    side = sec.get("side_by_side") or {}
    rows = [[e, d["minus_mp2020"], d["paper"], d["no_fit_cut"], d["n_rows"]] for e, d in side.items()]
    out.append("<p>Fitted constants (eV per atom of the element) beside −(published MP2020 correction):</p>")
    out.append(_table(["element", "−MP2020", "paper (cut 0.5)", "no fit cut", "rows"], rows))
    rf = sec.get("mp2020_refit", {})
    if rf:
        out.append(f"<p>{_e(rf.get('what', ''))}: max |deviation| {_num(rf.get('max_abs_deviation'))} eV/atom.</p>")
    fl = sec.get("floor", {})
    if fl:
        out.append(_table(["floor (raw MP vs experiment)", "median |d|", "trimmed MAE", "n", "systems",
                           "R² in-sample", "R² held-out", "held-out raw", "held-out corrected"],
                          [["DFT vs experiment", fl["median_abs"], fl["trimmed"]["value"], fl["n"], fl["n_systems"],
                            fl["r2_in_sample"], fl["r2_held_out"], fl["held_out_raw"], fl["held_out_corrected"]]]))
    series = []
    for k in ("paper", "no_fit_cut"):
        f = (sec.get("fits") or {}).get(k)
        if f:
            cols = [c for c, v in f["expected_minus_mp2020"].items() if v is not None]
            series.append((k, [f["expected_minus_mp2020"][c] for c in cols], [f["constants"][c] for c in cols]))
    out.append(_fig(_scatter(series, "Rung-0 constants vs −MP2020", "−MP2020 correction (eV/atom)",
                             "fitted constant (eV/atom)")))
    return "".join(out)


def _consensus(sec: dict) -> str:
    out = [_section_head("consensus", "5. The consensus test (panel of shipped checkpoints)", sec)]
    info = sec.get("panel_info") or {}
    out.append(_table(["panel member", "status", "evaluated", "reused (eos)", "median |E − ref| (eV/atom)"],
                      [[m, i.get("status"), i.get("n_evaluated"), i.get("n_reused_from_eos"),
                        (sec.get("per_model") or {}).get(m, {}).get("median_abs_vs_reference")]
                       for m, i in info.items()]))
    if sec.get("status") != _OK:
        return "".join(out + [f"<p>{_e(sec.get('reason', ''))}</p>"])
    r = sec["result"]
    out.append(f"<p>min_models = {_e(sec['min_models'])}; {_e(r['n_structures'])} structures, "
               f"{_e(r['n_scored'])} scored, {_e(r['n_discrepancies'])} discrepancies (S &lt; {_e(r['s_max'])}, "
               f"|gap| &gt; {_e(r['d_min'])}, z ≥ {_e(r['z_min'])}).</p>")
    if sec.get("discrepancies"):
        out.append(_table(["discrepancy", "gap C − ref (eV/atom)", "spread S", "z"],
                          [[d["name"], d["gap"], d["spread"], d["z"]] for d in sec["discrepancies"]]))
    pc = sec["positive_control"]
    out.append(f"<p>Positive control: {_e(pc['what'])}.</p>")
    out.append(_table(["δ (eV/atom)", "corrupted", "testable (S < s_max)", "recall", "recall (testable)",
                       "flagged clean", "new false positives", "expected"],
                      [[c["delta_eV_per_atom"], c["n_corrupted"], c["n_testable"], c["recall"], c["recall_testable"],
                        c["flagged_clean"], c["new_false_positives"], c["expected"]] for c in pc["runs"]]))
    gap, spread = _arr(r["gap"]), _arr(r["spread"])
    out.append(_fig(_scatter([("structures", spread, np.abs(gap))], "consensus gap vs spread", "spread S (eV/atom)",
                             "|C − ref| (eV/atom)", diagonal=False)))
    return "".join(out)


def _hull(sec: dict) -> str:
    out = [_section_head("hull", "6. Hull invariance (MP raw compounds)", sec)]
    rows = []
    for k in ("invariance_fitted_constants", "invariance_random_constants"):
        v = sec.get(k)
        if v:
            rows.append([k.replace("_", " "), v["max_change_invariant"], v["max_change_compounds_only"],
                         v["n_flips_invariant"], v["n_flips_compounds_only"], v["passed"]])
    out.append(_table(["shift", "max ΔE_hull invariant (eV/atom)", "max ΔE_hull compounds only", "flips invariant",
                       "flips compounds only", "passed"], rows))
    rows = []
    for k in ("stability_raw_vs_experiment", "stability_rung0_corrected_vs_experiment"):
        v = sec.get(k)
        if v:
            rows.append([k.replace("_", " "), v["n"], v["precision"], v["recall"], v["f1"], v["mae"]])
    out.append(_table(["hull", "n", "precision", "recall", "F1", "E_hull MAE (eV/atom)"], rows))
    return "".join(out)


def _val(x: Any) -> str:
    """One headline value with four significant digits; a small mapping as ``key: value`` pairs."""
    if isinstance(x, dict):
        return _Html(", ".join(f"{_e(k)}: {_val(v)}" for k, v in x.items()))
    return _Html(_num(x, ".4g"))


def _headline_tables(h: dict[str, Any], models: Sequence[str]) -> str:
    """The headline as tables with four significant digits: one table of the per-model numbers (a column per
    quantity), one per nested quantity (rows × its keys), and one of the single numbers."""
    per_model: dict[str, dict[str, Any]] = {}
    singles: list[list[Any]] = []
    out: list[str] = []
    for key, v in h.items():
        label = key.replace("_", " ")
        if not isinstance(v, dict):
            singles.append([label, v])
        elif v and all(not isinstance(x, dict) for x in v.values()) and set(v) <= set(models):
            for m, x in v.items():
                per_model.setdefault(m, {})[label] = x
        elif v and all(isinstance(x, dict) for x in v.values()):
            cols = list(dict.fromkeys(c for x in v.values() for c in x))
            out.append(f"<h3>{_e(label)}</h3>" + _table([""] + [str(c).replace("_", " ") for c in cols],
                                                         [[k] + [_val(x.get(c)) for c in cols]
                                                          for k, x in v.items()]))
        else:
            out.append(f"<h3>{_e(label)}</h3>" + _table(["", "value"], [[k, _val(x)] for k, x in v.items()]))
    if per_model:
        cols = list(dict.fromkeys(c for x in per_model.values() for c in x))
        out.insert(0, _table(["model"] + cols, [[m] + [_val(x.get(c)) for c in cols]
                                                for m, x in per_model.items()]))
    if singles:
        out.append(_table(["quantity", "value"], [[k, _val(x)] for k, x in singles]))
    return "".join(out)


def render(result: dict[str, Any]) -> str:
    """The whole page."""
    sec = result.get("sections", {})
    h = result.get("headline", {})
    cfg = result.get("config", {})
    head = (f"<h1>jaxcert controls: offline mini-benchmark</h1><p>{'complete' if result.get('complete') else 'partial'}"
            f", wall {_num(result.get('wall_s'), '.0f')} s, load average at start "
            f"{_num((result.get('loadavg_start') or [None])[0], '.2f')} / end "
            f"{_num((result.get('loadavg') or [None])[0], '.2f')}; {_e(result.get('load_note', ''))}</p>"
            f"<p class='proto'>config: {_e(json.dumps(cfg))}</p>")
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>jaxcert controls benchmark</title>"
             f"<style>{_CSS}</style></head><body>", head, "<h2>Headline</h2>",
             _headline_tables(h, list(result.get("models") or {}))]
    for name, fn in (("eos", _eos), ("elastic", _elastic), ("prototypes", _prototypes), ("rung0", _rung0),
                     ("consensus", _consensus), ("hull", _hull)):
        if name in sec:
            try:
                parts.append(fn(sec[name]))
            except (KeyError, TypeError, ValueError) as err:  # a partial section: say so, keep the page
                parts.append(f"<h2>{_e(name)}</h2><p class='bad'>could not render ({_e(err)})</p>")
    models = result.get("models") or {}
    if models:
        parts.append("<h2>Models</h2>" + _table(["spec", "status", "kind", "name", "load (s)", "reason"],
                                                [[k, v.get("status"), v.get("kind"), v.get("name"), v.get("load_s"),
                                                  v.get("reason", "")] for k, v in models.items()], left=4))
    parts.append("</body></html>")
    return "".join(parts)
