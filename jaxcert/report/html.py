"""Self-contained HTML report with inline SVG plots (no plotting dependency, no external assets).

Every probe row carries its one-sentence explanation (``jaxcert/report/explain.py``, listed in
``docs/reports.md``); plot axes are ticked at round numbers (steps of 1, 2, 5 × 10^k, powers of ten
on log axes: :func:`linear_ticks`, :func:`log_ticks`).  Ratios with a target carry a dashed reference
line (T_conf/T_kin = 1), and a panel whose curves carry no information (ΔE₃ within the probe's noise floor:
a model without three-body energy) is replaced by a one-line note saying why.

Scores are coloured on a logarithmic scale of −ln(score) (the defect in units of the probe's scale for
the probes scored exp(−defect/scale)), so that 0.9, 0.99 and 0.999 get distinct colours; the colours are
ColorBrewer's RdYlBu (red: broken, blue: exact), readable with the common colour-vision deficiencies.  Every
coloured table or map carries a legend (:func:`score_legend`) that states the mapped range and the range the
page's data span (``docs/reports.md`` "Colours").  The comparison board (``docs/compare.md``) reuses
:func:`score_colour`, :func:`ramp_colour` and :func:`colour_bar`.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

import numpy as np

from jaxcert.report.explain import explain
from jaxcert.report.summary import compilation_line, format_defect

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
              width: int = 520, height: int = 300, markers: bool = False,
              ref_lines: Sequence[tuple[float, str]] = ()) -> str:
    """SVG line plot of (label, x, y) series.

    ``ref_lines``: (y, label) pairs drawn as dashed horizontal reference lines (a ratio's target, a zero
    line), always inside the y range; on a log axis only positive ones.
    """
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
    refs = [(float(v), str(lab)) for v, lab in ref_lines if np.isfinite(v) and (not logy or v > 0)]
    refs = [(float(np.log10(v)) if logy else v, lab) for v, lab in refs]
    xs = np.concatenate([c[1] for c in clean])
    ys = np.concatenate([c[2] for c in clean] + [np.array([v for v, _ in refs], float)])
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
    for k, (yv, lab) in enumerate(refs):
        out.append(f'<line class="ref" x1="{pad_l}" x2="{pad_l + W}" y1="{py(yv):.1f}" y2="{py(yv):.1f}" '
                   f'stroke="#333" stroke-width="1.2" stroke-dasharray="6 4"/>'
                   f'<text class="reflabel" x="{pad_l + W + 8}" y="{pad_t + H - 4 - 14 * k}" fill="#333">'
                   f'- - {html.escape(lab)}</text>')
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


# ------------------------------------------------------------------ colours
#: ColorBrewer RdYlBu (11 classes), from broken (0) to exact (1); designed to stay distinct for the common
#: colour-vision deficiencies.  :func:`ramp_colour` interpolates linearly between the stops.
RAMP = ("#a50026", "#d73027", "#f46d43", "#fdae61", "#fee090", "#ffffbf", "#e0f3f8", "#abd9e9", "#74add1",
        "#4575b4", "#313695")
MISSING = "#ccc"
#: The score colour scale maps log10(−ln score) from SCORE_LOG_HI (red; score ≤ exp(−10) ≈ 4.5e-5, ten
#: scales of defect) to SCORE_LOG_LO (blue; score ≥ exp(−1e-5) ≈ 0.99999); score 0.99 (a defect of 1 % of the
#: scale) sits at the pale middle.
SCORE_LOG_LO, SCORE_LOG_HI = -5.0, 1.0


def _rgb(h: str) -> tuple[int, int, int]:
    return int(h[1:3], 16), int(h[3:5], 16), int(h[5:7], 16)


def ramp_colour(p: float | None) -> str:
    """The colour at position ``p`` ∈ [0, 1] of :data:`RAMP` (0 red, 1 blue; clipped); grey for a missing one."""
    if p is None or not np.isfinite(p):
        return MISSING
    x = float(np.clip(p, 0.0, 1.0)) * (len(RAMP) - 1)
    k = min(int(x), len(RAMP) - 2)
    f = x - k
    a, b = _rgb(RAMP[k]), _rgb(RAMP[k + 1])
    return "#" + "".join(f"{round(u + (v - u) * f):02x}" for u, v in zip(a, b, strict=True))


def text_colour(fill: str) -> str:
    """Black or white, whichever reads better on ``fill`` (``#rrggbb``; relative luminance split at 0.45)."""
    if not (fill.startswith("#") and len(fill) == 7):
        return "#222"
    r, g, b = (c / 255 for c in _rgb(fill))
    return "#222" if 0.2126 * r + 0.7152 * g + 0.0722 * b > 0.45 else "#fff"


def score_position(v: float | None) -> float | None:
    """Where a score in [0, 1] sits on the colour scale: 0 (score ≤ exp(−10)) … 1 (score ≥ exp(−1e-5)).

    The position is linear in log10(−ln score), monotone increasing in the score; ``None`` for a missing one.
    """
    if v is None or not np.isfinite(v):
        return None
    v = float(np.clip(v, 0.0, 1.0))
    if v >= 1.0:
        return 1.0
    if v <= 0.0:
        return 0.0
    t = float(np.log10(-np.log(v)))
    return float(np.clip((SCORE_LOG_HI - t) / (SCORE_LOG_HI - SCORE_LOG_LO), 0.0, 1.0))


def score_colour(v: float | None) -> str:
    """Fill colour of a score in [0, 1]: red (broken) … blue (exact) on the log scale of :func:`score_position`;
    grey for a missing score."""
    return ramp_colour(score_position(v))


def score_tip(v: float) -> str:
    """A score for a tooltip with the digits that matter near 1 (``0.99963 (1 − score = 3.7e-04)``)."""
    return f"{v:.6g}" + (f" (1 − score = {1 - v:.1e})" if 0.99 < v < 1 else "")


def colour_bar(ticks: list[tuple[float, str]], caption: str, span: tuple[float, float, str] | None = None,
               width: int = 440) -> str:
    """A horizontal SVG colour bar of :data:`RAMP` with ``ticks`` (position, label), and a bracket over the
    positions ``span`` = (p0, p1, label) that the page's data cover."""
    left, bar_w, top, bar_h, n = 12, width - 24, 30, 14, 88
    out = [f'<svg class=legend xmlns="http://www.w3.org/2000/svg" width="{width}" height="{top + bar_h + 20}" '
           f'font-family="sans-serif" font-size="11" role="img" aria-label="{html.escape(caption)}">']
    for k in range(n):
        out.append(f'<rect x="{left + bar_w * k / n:.2f}" y="{top}" width="{bar_w / n + 0.6:.2f}" height="{bar_h}" '
                   f'fill="{ramp_colour((k + 0.5) / n)}"/>')
    out.append(f'<rect x="{left}" y="{top}" width="{bar_w}" height="{bar_h}" fill="none" stroke="#888"/>')
    for p, label in ticks:
        x = left + bar_w * p
        anchor = "start" if p <= 0.02 else "end" if p >= 0.98 else "middle"
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top + bar_h}" y2="{top + bar_h + 4}" stroke="#555"/>'
                   f'<text x="{x:.1f}" y="{top + bar_h + 15}" text-anchor="{anchor}">{html.escape(label)}</text>')
    if span is not None:
        p0, p1, label = span
        x0, x1 = left + bar_w * min(p0, p1), left + bar_w * max(p0, p1)
        if x1 - x0 < 3:
            x0, x1 = x0 - 1.5, x1 + 1.5
        mid = min(max((x0 + x1) / 2, left + 60), left + bar_w - 60)
        out.append(f'<path d="M{x0:.1f},{top - 2} V{top - 7} H{x1:.1f} V{top - 2}" fill="none" stroke="#222" '
                   f'stroke-width="1.5"/><text class=span x="{mid:.1f}" y="{top - 11}" text-anchor="middle">'
                   f'{html.escape(label)}</text>')
    out.append("</svg>")
    return "".join(out)


#: Tick scores of the score legend: exp(−10^t) for t = 1, 0, −1, … −5.
_SCORE_TICKS = ((1.0, "≤4.5e-5"), (0.0, "0.37"), (-1.0, "0.90"), (-2.0, "0.99"), (-3.0, "0.999"), (-4.0, "0.9999"),
                (-5.0, "≥0.99999"))


def score_span(values: Any) -> tuple[float, float] | None:
    """(min, max) of the finite scores in ``values``; ``None`` when there is none."""
    v = np.asarray([x for x in np.asarray(values, dtype=object).ravel() if x is not None], float)
    v = v[np.isfinite(v)]
    return (float(v.min()), float(v.max())) if v.size else None


def score_legend(values: Any, width: int = 440) -> str:
    """The legend of the score colours: the bar with its ticks, the mapped range, and the range ``values`` (the
    page's scores) span, bracketed on the bar and said in words."""
    ticks = [((SCORE_LOG_HI - t) / (SCORE_LOG_HI - SCORE_LOG_LO), lab) for t, lab in _SCORE_TICKS]
    span = score_span(values)
    bracket, said = None, "There are no scores on this page."
    if span is not None:
        lo, hi = span
        bracket = (score_position(lo), score_position(hi), f"this page: {lo:.3f} – {hi:.3f}")
        gap = f" (1 − score down to {1 - hi:.1e})" if 0.999 < hi < 1 else ""
        said = f"The scores on this page span {lo:.3f} – {hi:.3f}{gap}."
    caption = ("Colour: a log scale of −ln(score), the defect in units of the probe's scale, from red (score ≤ "
               "4.5e-5, ten scales) through pale (0.99) to blue (≥ 0.99999), so 0.90, 0.99 and 0.999 differ in "
               "colour. " + said + " Grey: skipped.")
    lo_v, hi_v = ("", "") if span is None else (repr(span[0]), repr(span[1]))
    return (f"<div class=legend data-lo='{lo_v}' data-hi='{hi_v}'>" + colour_bar(ticks, caption, bracket, width)
            + f"<p class=note>{html.escape(caption)}</p></div>")


def heatmap(rows: list[str], cols: list[str], values: np.ndarray, title: str) -> str:
    """SVG heatmap of scores in [0, 1] (NaN = skipped, grey), coloured by :func:`score_colour`; each cell's
    tooltip gives the score with the digits that matter near 1.  Pair it with :func:`score_legend`."""
    cw, ch, top = 58, 20, 40
    left = 16 + 7 * max([len(r) for r in rows] + [4])
    width, height = left + cw * len(cols) + 20, top + ch * len(rows) + 10
    out = [f'<svg class=heatmap xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="11">',
           f'<text x="4" y="16" font-size="13" font-weight="bold">{html.escape(title)}</text>']
    for j, c in enumerate(cols):
        out.append(f'<text x="{left + cw * j + cw / 2}" y="{top - 8}" text-anchor="middle">{html.escape(c)}</text>')
    for i, r in enumerate(rows):
        out.append(f'<text x="{left - 6}" y="{top + ch * i + 14}" text-anchor="end">{html.escape(r)}</text>')
        for j, c in enumerate(cols):
            v = float(values[i, j])
            fill = score_colour(v)
            txt, tip = (f"{v:.3f}", f"{r}, {c}: score {score_tip(v)}") if np.isfinite(v) else ("skip", "skipped")
            out.append(f'<g><title>{html.escape(tip)}</title><rect x="{left + cw * j}" y="{top + ch * i}" '
                       f'width="{cw - 2}" height="{ch - 2}" fill="{fill}"/><text x="{left + cw * j + cw / 2 - 1}" '
                       f'y="{top + ch * i + 14}" text-anchor="middle" fill="{text_colour(fill)}">{txt}</text></g>')
    out.append("</svg>")
    return "".join(out)


# ------------------------------------------------------------------ plot panels
def flat_note(series: list[tuple[str, Any, Any]], tol: float = 0.0, about: float | None = None,
              unit: str = "") -> str | None:
    """Why a panel of ``series`` would carry no information, or ``None`` when it does.

    The panel is flat when every finite y value of every series lies within ``tol`` of ``about`` (default: the
    first value, i.e. a constant series; 1e-12 of the largest |y| is always allowed for round-off).  The text
    names the largest deviation.
    """
    ys = [np.asarray(y, float).ravel() for _, _, y in series if y is not None]
    ys = [y[np.isfinite(y)] for y in ys]
    ys = [y for y in ys if y.size]
    if not ys:
        return None
    allv = np.concatenate(ys)
    ref = float(ys[0][0]) if about is None else float(about)
    spread = float(np.max(np.abs(allv - ref)))
    if spread > max(float(tol), 1e-12 * float(np.max(np.abs(allv)))):
        return None
    u = f" {unit}" if unit else ""
    if about is None:
        return f"every value is {ref:.6g}{u} (spread {spread:.1e}{u})"
    return f"every value lies within {spread:.1e}{u} of {ref:g}{u}"


def panel_note(title: str, why: str) -> str:
    """The one-line note that stands in for a panel that carries no information."""
    return f"<p class=plotnote><b>{html.escape(title)}</b>: not plotted: {html.escape(why)}.</p>"


def _element_series(o: Any, els: list[str], xkey: str, ykey: str) -> list[tuple[str, Any, Any]]:
    return [(el, _find(o.details[k], xkey), _find(o.details[k], ykey)) for k, el in enumerate(els)
            if k < len(o.details)]


def _panel(plots: list[str], notes: list[str], series: list[tuple[str, Any, Any]], title: str, *args: Any,
           flat_tol: float = 0.0, flat_about: float | None = None, flat_unit: str = "", flat_why: str = "",
           **kw: Any) -> None:
    """Append the plot of ``series``, or the note saying why it is left out (no data, or a flat panel)."""
    live = [s for s in series if s[1] is not None and s[2] is not None and np.asarray(s[2], float).size]
    if not live:
        notes.append(panel_note(title, "no data recorded"))
        return
    flat = flat_note(live, flat_tol, flat_about, flat_unit)
    if flat is not None:
        notes.append(panel_note(title, f"{flat} for {', '.join(s[0] for s in live)}" + (f": {flat_why}"
                                                                                          if flat_why else "")))
        return
    plots.append(line_plot(live, title, *args, **kw))


def _plots(outcomes: dict[str, Any], els: list[str]) -> tuple[list[str], list[str]]:
    """The report's plot panels and the notes standing in for panels without information."""
    plots: list[str] = []
    notes: list[str] = []
    if "smoothness" in outcomes:
        o = outcomes["smoothness"]
        _panel(plots, notes, _element_series(o, els, "s_grid", "energies"), "Bond scan: energy",
               "displacement s (Å)", "E (eV)")
        _panel(plots, notes, _element_series(o, els, "s_grid", "projected_force"), "Bond scan: projected force",
               "displacement s (Å)", "F_j·û (eV/Å)", ref_lines=[(0.0, "F = 0")])
    if "zero_modes" in outcomes:
        o = outcomes["zero_modes"]
        series = []
        for k, el in enumerate(els[:len(o.details)]):
            ev = _find(o.details[k], "eigenvalues")
            if ev is None:
                ev = _find(o.details[k], "lowest_eigenvalues")
            if ev is not None:
                ev = np.sort(np.abs(np.asarray(ev, float)))
                series.append((el, np.arange(ev.size), ev))
        _panel(plots, notes, series, "Hessian spectrum |λ_i| (relaxed cluster)", "mode index", "|λ| (eV/Å²)",
               logy=True, markers=True)
    if "trimer" in outcomes:
        o = outcomes["trimer"]
        floors = [_find(d, "noise_floor") for d in o.details]
        floor = max([float(f) for f in floors if f is not None and np.isfinite(f)] + [0.0])
        _panel(plots, notes, _element_series(o, els, "separations", "delta_e3"), "Three-body decay ΔE₃",
               "apex offset (Å)", "ΔE₃ (eV)", ref_lines=[(0.0, "ΔE₃ = 0")], flat_tol=floor, flat_about=0.0,
               flat_unit="eV", flat_why=(f"below the probe's noise floor ({floor:.1e} eV) at every offset, so the "
                                         "model has no three-body energy (a pair potential), which the probe "
                                         "counts as exact; the curve would be a flat zero line"))
    if "config_temperature" in outcomes:
        o = outcomes["config_temperature"]
        series = []
        for k, el in enumerate(els[:len(o.details)]):
            r = _find(o.details[k], "ratio_series")
            if r is not None:
                series.append((el, np.arange(np.asarray(r).size), r))
        _panel(plots, notes, series, "Configurational / kinetic temperature per frame", "frame", "T_conf/T_kin",
               ref_lines=[(1.0, "target 1")])
    return plots, notes


def render_report(report: Any) -> str:
    """The whole page for a :class:`jaxcert.report.certification.Report`."""
    d = report.to_dict()
    agg = d["aggregate"]
    outcomes = {o.name: o for o in report.outcomes}
    els = report.elements
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        f"<title>jaxcert report: {html.escape(str(d['model'].get('name')))}</title>",
        "<style>body{font-family:sans-serif;max-width:1150px;margin:2em auto;padding:0 24px;color:#222}"
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}"
        "td:first-child,th:first-child,th.why{text-align:left}.pass{color:#1a7f37}.fail{color:#c62828}"
        ".plots{display:flex;flex-wrap:wrap;gap:12px}.heat{display:flex;flex-wrap:wrap;gap:24px;"
        "align-items:flex-start}.heat .legend{max-width:460px}.note{color:#555}p.plotnote{color:#555;margin:.4em 0}"
        "td.why{text-align:left;font-size:85%;color:#555;max-width:460px}</style></head><body>",
        f"<h1>jaxcert certification: {html.escape(str(d['model'].get('name')))}</h1>",
        f"<p>Elements {html.escape(', '.join(els))} · seed {html.escape(str(d['seed']))} · {html.escape(d['dtype'])} · "
        f"overall <b>{agg['overall'] if agg['overall'] is None else round(agg['overall'], 4)}</b> "
        f"({html.escape(str(agg['method']))}) · "
        f"{html.escape(report.gates_line(agg))} · {agg['n_evals']} model evaluations · "
        f"{d['wall_time_s']:.1f} s</p>",
        (f"<p class=note>{html.escape(compilation_line(d['compilation']))}</p>"
         if isinstance(d.get("compilation"), dict) else ""),
        "<table class=probes><tr><th>Probe</th><th>Target</th><th>Defect</th><th>Score</th><th>Evals</th>"
        "<th>Gate</th><th>Status</th><th class=why>Identity tested; what a failure means</th></tr>",
    ]
    for p in d["probes"]:
        gate = "" if p["gate"] is None else ("<span class=pass>PASS</span>" if p["gate"] else
                                             "<span class=fail>FAIL</span>")
        defect = "—" if p["defect"] is None else html.escape(format_defect(p["defect"], p.get("defect_stderr")))
        score = "—" if p["score"] is None else f"{p['score']:.3f}"
        status = html.escape(p["status"]) + (f": {html.escape(p['message'])}" if p["message"] else "")
        if p.get("reasons"):  # why each element failed or did not run, one line each
            status += "<ul class=reasons>" + "".join(f"<li>{html.escape(r)}</li>" for r in p["reasons"]) + "</ul>"
        if p.get("noise_floor") is not None and p["defect"] is not None:
            status += (f"<br><small>noise floor of an exact model {p['noise_floor']:.2g} "
                       f"({p['defect'] / p['noise_floor']:.1f}× it)</small>" if p["noise_floor"] > 0 else "")
        why = html.escape(explain(p["name"]) or "")
        parts.append(f"<tr id='probe-{html.escape(p['name'])}'><td>{html.escape(p['name'])}</td>"
                     f"<td>{p['target']:g}</td><td>{defect}</td><td>{score}</td><td>{p['n_evals']}</td>"
                     f"<td>{gate}</td><td style='text-align:left'>{status}</td><td class=why>{why}</td></tr>")
    parts.append("</table>")
    names = [o.name for o in report.outcomes]
    grid = np.array([[float(o.score[o.elements.index(el)]) if el in o.elements else np.nan for el in els]
                     for o in report.outcomes]).reshape(len(names), len(els))
    parts.append("<h2>Scores per probe and element</h2><div class=heat>" + heatmap(names, els, grid, "score")
                 + score_legend(grid) + "</div>")
    plots, notes = _plots(outcomes, els)
    parts.append("<h2>Plots</h2><div class=plots>" + "".join(plots) + "</div>" + "".join(notes))
    parts.append("<h2>Environment</h2><pre>" + html.escape(
        "\n".join(f"{k}: {v}" for k, v in {**d["versions"], **d["machine"]}.items())) + "</pre>")
    parts.append("</body></html>")
    return "\n".join(parts)
