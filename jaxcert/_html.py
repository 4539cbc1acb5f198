"""Self-contained HTML report with inline SVG plots (no plotting dependency, no external assets)."""

from __future__ import annotations

import html
from typing import Any

import numpy as np

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


def _fmt(v: float) -> str:
    if v == 0 or (1e-2 <= abs(v) < 1e4):
        return f"{v:.3g}"
    return f"{v:.1e}"


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
    x0, x1 = float(xs.min()), float(xs.max())
    y0, y1 = float(ys.min()), float(ys.max())
    if x1 == x0:
        x1 = x0 + 1.0
    if y1 == y0:
        y0, y1 = y0 - 0.5, y1 + 0.5
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
    for t in np.linspace(0, 1, 5):
        xv, yv = x0 + t * (x1 - x0), y0 + t * (y1 - y0)
        ylab = _fmt(10**yv) if logy else _fmt(yv)
        out.append(f'<text x="{px(xv):.1f}" y="{pad_t + H + 14}" text-anchor="middle">{_fmt(xv)}</text>')
        out.append(f'<text x="{pad_l - 4}" y="{py(yv) + 4:.1f}" text-anchor="end">{ylab}</text>')
        out.append(f'<line x1="{pad_l}" x2="{pad_l + W}" y1="{py(yv):.1f}" y2="{py(yv):.1f}" stroke="#eee"/>')
    out.append(f'<text x="{pad_l + W / 2}" y="{height - 6}" text-anchor="middle">{html.escape(xlabel)}</text>')
    out.append(f'<text x="12" y="{pad_t + H / 2}" transform="rotate(-90 12 {pad_t + H / 2})" text-anchor="middle">'
               f'{html.escape(ylabel + (" (log10 |·|)" if logy else ""))}</text>')
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
            if np.isfinite(v):
                red, green = int(220 * (1 - v)), int(180 * v + 40)
                fill, txt = f"rgb({red},{green},80)", f"{v:.2f}"
            else:
                fill, txt = "#ccc", "skip"
            out.append(f'<rect x="{left + cw * j}" y="{top + ch * i}" width="{cw - 2}" height="{ch - 2}" '
                       f'fill="{fill}"/><text x="{left + cw * j + cw / 2 - 1}" y="{top + ch * i + 14}" '
                       f'text-anchor="middle" fill="white">{txt}</text>')
    out.append("</svg>")
    return "".join(out)


def render_report(report: Any) -> str:
    """The whole page for a :class:`jaxcert.report.Report`."""
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
        ".plots{display:flex;flex-wrap:wrap;gap:12px}</style></head><body>",
        f"<h1>jaxcert certification: {html.escape(str(d['model'].get('name')))}</h1>",
        f"<p>Elements {html.escape(', '.join(els))} · seed {d['seed']} · {html.escape(d['dtype'])} · "
        f"overall <b>{agg['overall'] if agg['overall'] is None else round(agg['overall'], 4)}</b> ({agg['method']}) · "
        f"gates {agg['gates_passed']}/{agg['gates_total']} · {agg['n_evals']} model evaluations · "
        f"{d['wall_time_s']:.1f} s</p>",
        "<table><tr><th>Probe</th><th>Target</th><th>Defect</th><th>Score</th><th>Evals</th><th>Gate</th>"
        "<th>Status</th></tr>",
    ]
    for p in d["probes"]:
        gate = "" if p["gate"] is None else ("<span class=pass>PASS</span>" if p["gate"] else
                                             "<span class=fail>FAIL</span>")
        defect = "—" if p["defect"] is None else f"{p['defect']:.3e}"
        score = "—" if p["score"] is None else f"{p['score']:.3f}"
        status = html.escape(p["status"]) + (f": {html.escape(p['message'])}" if p["message"] else "")
        parts.append(f"<tr><td>{p['name']}</td><td>{p['target']:g}</td><td>{defect}</td><td>{score}</td>"
                     f"<td>{p['n_evals']}</td><td>{gate}</td><td style='text-align:left'>{status}</td></tr>")
    parts.append("</table>")
    names = [o.name for o in report.outcomes]
    grid = np.array([[float(o.score[k]) for k in range(len(els))] for o in report.outcomes]).reshape(len(names),
                                                                                                     len(els))
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
