"""Self-contained HTML report with inline SVG plots (no plotting dependency, no external assets).

Every probe row carries its one-sentence explanation (``jaxcert/report/explain.py``, listed in
``docs/reports.md``); plot axes are ticked at round numbers (steps of 1, 2, 5 × 10^k, powers of ten
on log axes: :func:`linear_ticks`, :func:`log_ticks`).  The comparison board (``docs/compare.md``)
reuses :func:`score_colour`.
"""

from __future__ import annotations

import html
from typing import Any

import numpy as np

from jaxcert.report.explain import explain
from jaxcert.report.summary import format_defect

PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#7f7f7f",
           "#bcbd22", "#393b79", "#637939"]


def _find(tree: Any, key: str) -> Any:
    """First value stored under ``key`` anywhere in a nested dict."""
    if isinstance(tree, dict):
        if key in tree:
            return tree[key]
        for v in tree.values():
            got = _find(v, key)
            if got is not None:
                return got
    return None


# ------------------------------------------------------------------ axis ticks
_MANTISSAS = (1, 2, 5)


def _decimal(m: int, e: int) -> float:
    """m·10^e as the double nearest to the decimal number (no 0.30000000000000004)."""
    return float(f"{m}e{e}")


def nice_step(span: float, max_ticks: int = 6) -> tuple[int, int]:
    """The smallest step (m, e), step = m·10^e with m ∈ {1, 2, 5}, giving at most ``max_ticks`` intervals."""
    span = abs(float(span))
    if not np.isfinite(span) or span == 0:
        return 1, 0
    raw = span / max(int(max_ticks), 1)
    e = int(np.floor(np.log10(raw)))
    for ee in (e, e + 1):
        for m in _MANTISSAS:
            if _decimal(m, ee) >= raw * (1 - 1e-12):
                return m, ee
    return 1, e + 2  # pragma: no cover - unreachable: 10^(e+1) >= raw


def linear_ticks(lo: float, hi: float, max_ticks: int = 6) -> tuple[float, float, list[float]]:
    """Round ticks for a linear axis: (axis_lo, axis_hi, ticks).

    The step is 1, 2 or 5 × 10^k; every tick is an integer multiple of it and the axis is widened to the
    enclosing multiples, so both ends carry a tick.
    """
    lo, hi = float(min(lo, hi)), float(max(lo, hi))
    if hi == lo:
        pad = abs(lo) * 0.5 if lo else 1.0
        lo, hi = lo - pad, hi + pad
    m, e = nice_step(hi - lo, max_ticks)
    step = _decimal(m, e)
    k0, k1 = int(np.floor(lo / step + 1e-9)), int(np.ceil(hi / step - 1e-9))
    ticks = [_decimal(k * m, e) for k in range(k0, k1 + 1)]
    return ticks[0], ticks[-1], ticks


def log_ticks(lo_exp: float, hi_exp: float, max_ticks: int = 6) -> tuple[float, float, list[float]]:
    """Round ticks for a log10 axis given the data range in decades: (axis_lo_exp, axis_hi_exp, tick values).

    A range of at least one decade gets ticks at powers of ten (every 1, 2, 5, 10, ... decades); a shorter
    one at 1, 2 and 5 × 10^k.  Tick values are returned as numbers (not exponents); the axis ends are the
    outermost ticks.
    """
    lo_exp, hi_exp = float(min(lo_exp, hi_exp)), float(max(lo_exp, hi_exp))
    if hi_exp - lo_exp >= 1.0:
        m, e = nice_step(hi_exp - lo_exp, max_ticks)
        step = max(int(round(_decimal(m, e))), 1)  # whole decades
        k0, k1 = int(np.floor(lo_exp / step + 1e-9)), int(np.ceil(hi_exp / step - 1e-9))
        ticks = [_decimal(1, k * step) for k in range(k0, k1 + 1)]
        return float(k0 * step), float(k1 * step), ticks
    lo, hi = 10.0**lo_exp, 10.0**hi_exp
    e0 = int(np.floor(lo_exp)) - 1
    cands = [_decimal(m, e) for e in range(e0, e0 + 4) for m in _MANTISSAS]
    below = max(c for c in cands if c <= lo * (1 + 1e-12))
    above = min(c for c in cands if c >= hi * (1 - 1e-12))
    ticks = [c for c in cands if below <= c <= above]
    if len(ticks) < 3:  # a narrow range: evenly spaced round values (still multiples of 1, 2, 5 × 10^k)
        a, b, lin = linear_ticks(lo, hi, max_ticks)
        if a > 0:
            return float(np.log10(a)), float(np.log10(b)), lin
    return float(np.log10(below)), float(np.log10(above)), ticks


def tick_label(v: float, step: float | None = None) -> str:
    """A short label for a round tick value: ``0.02``, ``150``, ``2e-5`` (no float noise).

    With ``step`` (a linear axis) every label has the step's number of decimals.
    """
    if v == 0:
        return "0"
    a = abs(v)
    if 1e-3 <= a < 1e5:
        if step is not None and step >= 1e-4:
            digits = max(0, -int(np.floor(np.log10(step) + 1e-9)))
            return f"{v:.{digits}f}"
        return f"{v:.6g}"
    mant, _, exp = f"{v:.6e}".partition("e")
    mant = mant.rstrip("0").rstrip(".")
    return f"{mant}e{int(exp)}"


def line_plot(series: list[tuple[str, Any, Any]], title: str, xlabel: str, ylabel: str, logy: bool = False,
              width: int = 520, height: int = 300, markers: bool = False) -> str:
    """SVG line plot of (label, x, y) series."""
    clean = []
    for label, x, y in series:
        x, y = np.asarray(x, float).ravel(), np.asarray(y, float).ravel()
        if x.size != y.size or x.size == 0:
            continue
        ok = np.isfinite(x) & np.isfinite(y)
        if logy:
            y = np.abs(y)
            ok &= y > 0
            y = np.where(ok, np.log10(np.where(ok, y, 1.0)), 0.0)
        if ok.sum() >= 1:
            clean.append((label, x[ok], y[ok]))
    if not clean:
        return f"<p><em>{html.escape(title)}: no data</em></p>"
    xs = np.concatenate([c[1] for c in clean])
    ys = np.concatenate([c[2] for c in clean])
    x0, x1, xticks = linear_ticks(float(xs.min()), float(xs.max()))
    if logy:
        ylo, yhi = float(ys.min()), float(ys.max())
        if yhi == ylo:
            ylo, yhi = ylo - 0.5, yhi + 0.5
        y0, y1, yvals = log_ticks(ylo, yhi)
        yticks = [(float(np.log10(v)), tick_label(v)) for v in yvals]
    else:
        y0, y1, yvals = linear_ticks(float(ys.min()), float(ys.max()))
        ystep = yvals[1] - yvals[0] if len(yvals) > 1 else None
        yticks = [(v, tick_label(v, ystep)) for v in yvals]
    xstep = xticks[1] - xticks[0] if len(xticks) > 1 else None
    pad_l, pad_r, pad_t, pad_b = 64, 110, 28, 40
    W, H = width - pad_l - pad_r, height - pad_t - pad_b

    def px(x):
        return pad_l + (x - x0) / (x1 - x0) * W

    def py(y):
        return pad_t + H - (y - y0) / (y1 - y0) * H

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
           f'font-size="11">',
           f'<text x="{pad_l}" y="16" font-size="13" font-weight="bold">{html.escape(title)}</text>',
           f'<rect x="{pad_l}" y="{pad_t}" width="{W}" height="{H}" fill="none" stroke="#999"/>']
    for xv in xticks:
        out.append(f'<text class="xtick" x="{px(xv):.1f}" y="{pad_t + H + 14}" text-anchor="middle">'
                   f'{tick_label(xv, xstep)}</text>')
    for yv, ylab in yticks:
        out.append(f'<text class="ytick" x="{pad_l - 4}" y="{py(yv) + 4:.1f}" text-anchor="end">{ylab}</text>')
        out.append(f'<line x1="{pad_l}" x2="{pad_l + W}" y1="{py(yv):.1f}" y2="{py(yv):.1f}" stroke="#eee"/>')
    out.append(f'<text x="{pad_l + W / 2}" y="{height - 6}" text-anchor="middle">{html.escape(xlabel)}</text>')
    out.append(f'<text x="12" y="{pad_t + H / 2}" transform="rotate(-90 12 {pad_t + H / 2})" text-anchor="middle">'
               f'{html.escape(ylabel + (" (log scale)" if logy else ""))}</text>')
    for k, (label, x, y) in enumerate(clean):
        c = PALETTE[k % len(PALETTE)]
        pts = " ".join(f"{px(a):.1f},{py(b):.1f}" for a, b in zip(x, y, strict=True))
        if markers:
            out.extend(f'<circle cx="{px(a):.1f}" cy="{py(b):.1f}" r="2.5" fill="{c}"/>' for a, b in zip(x, y,
                                                                                                         strict=True))
        else:
            out.append(f'<polyline fill="none" stroke="{c}" stroke-width="1.5" points="{pts}"/>')
        out.append(f'<text x="{pad_l + W + 8}" y="{pad_t + 12 + 14 * k}" fill="{c}">{html.escape(label)}</text>')
    out.append("</svg>")
    return "".join(out)


def score_colour(v: float | None) -> str:
    """Fill colour of a score in [0, 1]: red (0) to green (1); grey for a missing score."""
    if v is None or not np.isfinite(v):
        return "#ccc"
    v = float(np.clip(v, 0.0, 1.0))
    return f"rgb({int(220 * (1 - v))},{int(180 * v + 40)},80)"


def heatmap(rows: list[str], cols: list[str], values: np.ndarray, title: str) -> str:
    """SVG heatmap of scores in [0, 1] (NaN = skipped, grey)."""
    cw, ch, left, top = 46, 20, 140, 60
    width, height = left + cw * len(cols) + 20, top + ch * len(rows) + 10
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
           f'font-size="11">', f'<text x="4" y="16" font-size="13" font-weight="bold">{html.escape(title)}</text>']
    for j, c in enumerate(cols):
        out.append(f'<text x="{left + cw * j + cw / 2}" y="{top - 8}" text-anchor="middle">{html.escape(c)}</text>')
    for i, r in enumerate(rows):
        out.append(f'<text x="{left - 6}" y="{top + ch * i + 14}" text-anchor="end">{html.escape(r)}</text>')
        for j in range(len(cols)):
            v = float(values[i, j])
            fill, txt = score_colour(v), (f"{v:.2f}" if np.isfinite(v) else "skip")
            out.append(f'<rect x="{left + cw * j}" y="{top + ch * i}" width="{cw - 2}" height="{ch - 2}" '
                       f'fill="{fill}"/><text x="{left + cw * j + cw / 2 - 1}" y="{top + ch * i + 14}" '
                       f'text-anchor="middle" fill="white">{txt}</text>')
    out.append("</svg>")
    return "".join(out)


def render_report(report: Any) -> str:
    """The whole page for a :class:`jaxcert.report.certification.Report`."""
    d = report.to_dict()
    agg = d["aggregate"]
    outcomes = {o.name: o for o in report.outcomes}
    els = report.elements
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        f"<title>jaxcert report: {html.escape(str(d['model'].get('name')))}</title>",
        "<style>body{font-family:sans-serif;max-width:1150px;margin:2em auto;color:#222}"
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}"
        "td:first-child,th:first-child{text-align:left}.pass{color:#1a7f37}.fail{color:#c62828}"
        ".plots{display:flex;flex-wrap:wrap;gap:12px}"
        "td.why{text-align:left;font-size:85%;color:#555;max-width:460px}</style></head><body>",
        f"<h1>jaxcert certification: {html.escape(str(d['model'].get('name')))}</h1>",
        f"<p>Elements {html.escape(', '.join(els))} · seed {d['seed']} · {html.escape(d['dtype'])} · "
        f"overall <b>{agg['overall'] if agg['overall'] is None else round(agg['overall'], 4)}</b> ({agg['method']}) · "
        f"gates {agg['gates_passed']}/{agg['gates_total']} · {agg['n_evals']} model evaluations · "
        f"{d['wall_time_s']:.1f} s</p>",
        "<table class=probes><tr><th>Probe</th><th>Target</th><th>Defect</th><th>Score</th><th>Evals</th>"
        "<th>Gate</th><th>Status</th><th>Identity tested; what a failure means</th></tr>",
    ]
    for p in d["probes"]:
        gate = "" if p["gate"] is None else ("<span class=pass>PASS</span>" if p["gate"] else
                                             "<span class=fail>FAIL</span>")
        defect = "—" if p["defect"] is None else html.escape(format_defect(p["defect"], p.get("defect_stderr")))
        score = "—" if p["score"] is None else f"{p['score']:.3f}"
        status = html.escape(p["status"]) + (f": {html.escape(p['message'])}" if p["message"] else "")
        why = html.escape(explain(p["name"]) or "")
        parts.append(f"<tr id='probe-{html.escape(p['name'])}'><td>{html.escape(p['name'])}</td>"
                     f"<td>{p['target']:g}</td><td>{defect}</td><td>{score}</td><td>{p['n_evals']}</td>"
                     f"<td>{gate}</td><td style='text-align:left'>{status}</td><td class=why>{why}</td></tr>")
    parts.append("</table>")
    names = [o.name for o in report.outcomes]
    grid = np.array([[float(o.score[o.elements.index(el)]) if el in o.elements else np.nan for el in els]
                     for o in report.outcomes]).reshape(len(names), len(els))
    parts.append("<h2>Scores per probe and element</h2>" + heatmap(names, els, grid, "score"))
    plots = []
    if "smoothness" in outcomes:
        o = outcomes["smoothness"]
        plots.append(line_plot([(el, _find(o.details[k], "s_grid"), _find(o.details[k], "energies"))
                                for k, el in enumerate(els)], "Bond scan: energy", "displacement s (Å)", "E (eV)"))
        plots.append(line_plot([(el, _find(o.details[k], "s_grid"), _find(o.details[k], "projected_force"))
                                for k, el in enumerate(els)], "Bond scan: projected force", "displacement s (Å)",
                               "F_j·û (eV/Å)"))
    if "zero_modes" in outcomes:
        o = outcomes["zero_modes"]
        series = []
        for k, el in enumerate(els):
            ev = _find(o.details[k], "eigenvalues")
            if ev is None:
                ev = _find(o.details[k], "lowest_eigenvalues")
            if ev is not None:
                ev = np.sort(np.abs(np.asarray(ev, float)))
                series.append((el, np.arange(ev.size), ev))
        plots.append(line_plot(series, "Hessian spectrum |λ_i| (relaxed cluster)", "mode index", "|λ| (eV/Å²)",
                               logy=True, markers=True))
    if "trimer" in outcomes:
        o = outcomes["trimer"]
        plots.append(line_plot([(el, _find(o.details[k], "separations"), _find(o.details[k], "delta_e3"))
                                for k, el in enumerate(els)], "Three-body decay ΔE₃", "apex offset (Å)",
                               "ΔE₃ (eV)"))
    if "config_temperature" in outcomes:
        o = outcomes["config_temperature"]
        series = []
        for k, el in enumerate(els):
            r = _find(o.details[k], "ratio_series")
            if r is not None:
                series.append((el, np.arange(np.asarray(r).size), r))
        plots.append(line_plot(series, "Configurational / kinetic temperature per frame", "frame", "T_conf/T_kin"))
    parts.append("<h2>Plots</h2><div class=plots>" + "".join(plots) + "</div>")
    parts.append("<h2>Environment</h2><pre>" + html.escape(
        "\n".join(f"{k}: {v}" for k, v in {**d["versions"], **d["machine"]}.items())) + "</pre>")
    parts.append("</body></html>")
    return "\n".join(parts)
