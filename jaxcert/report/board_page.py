r"""The parts of the board page people use to choose a model (docs/board.md, "Reading the board page").

:func:`jaxcert.report.compare.board_html` draws the board; for a board of certification reports it adds what
this module makes:

* :func:`controls` — filters (family, training set, precision, device, source), a free-text search, CSV and
  JSON export of the rows shown, the number of rows shown and the current sort.  Pinned rows (☆ in a row)
  stay shown whatever the filters say, at the top.
* :func:`charts` — the overall score against atom·steps per second on the NaCl cell, against evaluations
  per second of the suite and against the parameter count: inline SVG, logarithmic x axes, one marker per row
  (model × precision; a circle for ours, a square for a published row), coloured by family.  A marker names
  its row (``data-row``); clicking it opens that row's card.  Rows without the value are listed under the
  chart instead.
* :func:`published_card` and :func:`twin_table` — a published row's card (source, commit, date, hardware,
  method, packages, calculator string, link) and, in each of our rows that has a published twin, the
  difference per probe with the reason the boards differ (:data:`jaxcert.report.published.WHY`).
* :data:`JS` and :data:`CSS` — the script and styles behind them (inline; the page loads nothing).

No script is built from data: every text from a report or a published file is HTML-escaped into text or into
a quoted attribute, and the script reads attributes as text (docs/compare.md, "Hostile reports").  The page
prints: the controls and buttons are left out, the table is shown whole.

Imports no JAX.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from typing import Any

from jaxcert.report.html import PALETTE, linear_ticks, log_ticks, tick_label

__all__ = ["FILTERS", "CHARTS", "row_attributes", "controls", "charts", "published_card", "twin_table", "JS",
           "CSS", "source_text"]

#: (data attribute, heading, what the value is) of each filter.
FILTERS = (("family", "Family"), ("training", "Training set"), ("precision", "Precision"), ("device", "Device"),
           ("origin", "Source"))
#: (row key, x-axis label, chart title) of each chart.
CHARTS = (
    ("atom_steps_per_s", "atom·steps/s, NVE on the 100-atom NaCl cell",
     "Overall score against speed on the published board's NaCl cell"),
    ("evals_per_s", "model evaluations/s of the suite (compilation included)",
     "Overall score against evaluations per second"),
    ("parameters", "parameters", "Overall score against parameter count"),
)
_NOT_STATED = "not stated"


def _e(x: Any) -> str:
    return html.escape(str(x))


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def source_text(row: dict[str, Any]) -> str:
    """The Source column: ``jaxcert (exact)`` for ours, ``published (FD)`` for a published row."""
    return "published (FD)" if row.get("origin") == "published" else "jaxcert (exact)"


def _values(row: dict[str, Any]) -> dict[str, str]:
    """The filter values of a row (text; module docstring)."""
    return {"family": str(row.get("family") or row["label"]), "training": str(row.get("training_set") or _NOT_STATED),
            "precision": str(row.get("precision") or row.get("dtype") or "—"),
            "device": str(row.get("device") or "not recorded"), "origin": source_text(row)}


def row_attributes(row: dict[str, Any], row_id: str) -> str:
    """The attributes of a row's ``<tbody>``: its id, its filter values and the text the search reads."""
    vals = _values(row)
    model = row.get("model") if isinstance(row.get("model"), dict) else {"name": row.get("model")}
    words = [row["label"], row.get("checkpoint") or "", str(model.get("name") or ""), *vals.values()]
    attrs = "".join(f" data-{k}='{_e(v)}'" for k, v in vals.items())
    return f"data-row='{_e(row_id)}'{attrs} data-search='{_e(' '.join(words).lower())}' data-pinned=false"


def controls(rows: Sequence[dict[str, Any]], order: str) -> str:
    """The filters, search, export buttons and the line saying how many rows are shown and how they are sorted."""
    selects = []
    for key, head in FILTERS:
        values = sorted({_values(r)[key] for r in rows}, key=str.lower)
        opts = "".join(f"<option value='{_e(v)}' title='{_e(v)}'>{_e(v if len(v) <= 60 else v[:57] + '...')}"
                       "</option>" for v in values)
        selects.append(f"<label>{_e(head)} <select data-key='{key}'><option value=''>all</option>{opts}</select>"
                       "</label>")
    return ("<div id=jc-controls class=controls role=search>"
            "<label>Search <input type=search id=jc-q placeholder='model, family, checkpoint, training set, device' "
            "aria-label='search the rows'></label> " + " ".join(selects) +
            " <button type=button id=jc-reset>show all</button>"
            " <button type=button data-export=csv>CSV of the rows shown</button>"
            " <button type=button data-export=json>JSON of the rows shown</button>"
            f"<p class=note><span id=jc-count>{len(rows)} of {len(rows)} rows shown</span> · "
            f"<span id=jc-sort>{_e(order)}</span> · ☆ pins a row: it stays shown, at the top.</p></div>")


# ------------------------------------------------------------------------------------------------ charts
_W, _H, _L, _R, _T, _B = 430, 300, 52, 26, 30, 46


def _family_colours(rows: Sequence[dict[str, Any]]) -> dict[str, str]:
    fams = sorted({_values(r)["family"] for r in rows}, key=str.lower)
    return {f: PALETTE[k % len(PALETTE)] for k, f in enumerate(fams)}


def _marker(row: dict[str, Any], x: float, y: float, colour: str, row_id: str, tip: str) -> str:
    common = (f"class=pt data-row='{_e(row_id)}' tabindex=0 role=button fill='{colour}' stroke='#222' "
              "stroke-width=0.8")
    title = f"<title>{_e(tip)}</title>"
    if row.get("origin") == "published":
        return f"<rect {common} x='{x - 5:.1f}' y='{y - 5:.1f}' width=10 height=10>{title}</rect>"
    return f"<circle {common} cx='{x:.1f}' cy='{y:.1f}' r=5.5>{title}</circle>"


def _chart(rows: Sequence[tuple[str, dict[str, Any]]], key: str, xlabel: str, title: str,
           colours: dict[str, str]) -> str:
    """One chart: ``rows`` are (data-row id, row) pairs."""
    have = [(i, r) for i, r in rows if _finite(r.get(key)) and r[key] > 0 and _finite(r.get("overall"))]
    missing = [(i, r) for i, r in rows if not (_finite(r.get(key)) and r[key] > 0 and _finite(r.get("overall")))]
    body = []
    if have:
        xs = [math.log10(float(r[key])) for _, r in have]
        x0, x1, xt = log_ticks(min(xs) - 0.05, max(xs) + 0.05, 5)
        ys = [float(r["overall"]) for _, r in have]
        y0, y1, yt = linear_ticks(min(min(ys), 0.95) - 0.01, 1.0, 5)
        y1 = max(y1, 1.0)
        pw, ph = _W - _L - _R, _H - _T - _B

        def px(v: float) -> float:
            return _L + (math.log10(v) - x0) / ((x1 - x0) or 1.0) * pw

        def py(v: float) -> float:
            return _T + (y1 - v) / ((y1 - y0) or 1.0) * ph

        body.append(f"<rect x={_L} y={_T} width={pw} height={ph} fill='#fff' stroke='#999'/>")
        for t in xt:
            body.append(f"<line x1='{px(t):.1f}' x2='{px(t):.1f}' y1={_T} y2={_T + ph} stroke='#eee'/>"
                        f"<text x='{px(t):.1f}' y={_T + ph + 14} text-anchor=middle font-size=11>"
                        f"{_e(tick_label(t))}</text>")
        step = yt[1] - yt[0] if len(yt) > 1 else None
        for t in yt:
            body.append(f"<line x1={_L} x2={_L + pw} y1='{py(t):.1f}' y2='{py(t):.1f}' stroke='#eee'/>"
                        f"<text x={_L - 5} y='{py(t) + 4:.1f}' text-anchor=end font-size=11>"
                        f"{_e(tick_label(t, step))}</text>")
        body.append(f"<text x='{_L + pw / 2:.0f}' y={_H - 8} text-anchor=middle font-size=11>{_e(xlabel)} "
                    "(log scale)</text>"
                    f"<text x=12 y='{_T + ph / 2:.0f}' transform='rotate(-90 12 {_T + ph / 2:.0f})' "
                    "text-anchor=middle font-size=11>overall score</text>")
        for i, r in have:
            tip = f"{r['label']}: {float(r[key]):.3g} {xlabel.split(',')[0]}, overall {r['overall']:.4f}"
            body.append(_marker(r, px(float(r[key])), py(float(r["overall"])), colours[_values(r)["family"]], i, tip))
    else:
        body.append(f"<text x={_W // 2} y={_H // 2} text-anchor=middle font-size=12>no row has this value</text>")
    svg = (f"<svg class=chart data-key='{key}' viewBox='0 0 {_W} {_H}' width={_W} height={_H} role=img "
           f"aria-label='{_e(title)}'><text x={_L} y=18 font-size=13 font-weight=bold>{_e(title)}</text>"
           + "".join(body) + "</svg>")
    left = "".join(f"<li data-row='{_e(i)}'>{_e(r['label'])}</li>" for i, r in missing)
    note = (f"<details class=unplotted><summary>not plotted: <span class=n>{len(missing)}</span> rows without this "
            f"value</summary><ul>{left}</ul></details>") if missing else ""
    return f"<figure class=chart>{svg}<figcaption>{note}</figcaption></figure>"


def charts(rows: Sequence[dict[str, Any]], ids: dict[int, str]) -> str:
    """The three charts (module docstring) with the colour and shape legend; ``ids``: each row's ``data-row``
    by its index in ``rows``."""
    colours = _family_colours(rows)
    legend = " ".join(f"<span class=key><svg width=12 height=12><circle cx=6 cy=6 r=5 fill='{c}'/></svg> {_e(f)}"
                      "</span>" for f, c in colours.items())
    pairs = [(ids[k], r) for k, r in enumerate(rows)]
    figs = "".join(_chart(pairs, key, xlabel, title, colours) for key, xlabel, title in CHARTS)
    return ("<h2 id=charts>Score against speed and size</h2><p class=note>One marker per model and precision: ● a "
            "row of ours (exact derivatives), ■ a published row (finite differences); colour: family. Hover for the "
            "values, click to open the row's card. The filters above apply to the charts too. Speeds on different "
            f"hardware do not compare: each card names its hardware.</p><p class=legend-keys>{legend}</p>"
            f"<div class=charts>{figs}</div>")


# ------------------------------------------------------------------------------------------------ cards
def _fmt(x: Any, spec: str = ".3g") -> str:
    return "—" if not _finite(x) else format(x, spec)


def published_card(row: dict[str, Any]) -> str:
    """A published row's card: where its numbers come from, how they were computed, and its scores."""
    p = row["published"]
    t = p.get("throughput") or {}
    rate = (f"{_fmt(t.get('atom_steps_per_s'))} ± {_fmt(t.get('atom_steps_per_s_stdev'))} atom·steps/s"
            f" ({t.get('system') or 'system not stated'}; {t.get('integrator') or 'integrator not stated'})"
            if t else "not published")
    items = [
        ("published as", p.get("name")), ("slug", p.get("slug")), ("method", p.get("method")),
        ("source", f"{p['repo']} {p['path']} at commit {p['commit']}"), ("date", p.get("date") or "not stated"),
        ("hardware", p.get("hardware")), ("calculator", p.get("calculator") or "not stated"),
        ("packages", ", ".join(p.get("packages") or []) or "none pinned"),
        ("training set", ", ".join(p.get("training_set") or []) or "none stated"),
        ("parameters", p.get("n_parameters") if p.get("n_parameters") is not None else "not stated"),
        ("wall time (s)", _fmt(row.get("wall_time_s"), ".1f")), ("NaCl throughput", rate),
        ("twin on this board", ", ".join(p.get("twins") or []) or "none"),
    ]
    body = "".join(f"<tr><th>{_e(k)}</th><td style='text-align:left'>{_e(v)}</td></tr>" for k, v in items)
    link = (f"<tr><th>link</th><td style='text-align:left'><a href='{_e(p['url'])}' rel='noopener noreferrer'>"
            f"{_e(p['url'])}</a></td></tr>")
    scores = "".join(
        f"<tr><td>{_e(name)}</td><td>{_fmt(c['score'], '.3f')}</td><td>{_fmt(c['defect'])}</td>"
        f"<td>{'' if c['gate'] is None else ('✓' if c['gate'] else '✗')}</td></tr>"
        for name, c in row["cells"].items())
    return (f"<table class='card published'><caption>published card</caption>{body}{link}</table>"
            "<table class=scores><caption>published scores (finite differences)</caption><tr><th>probe</th>"
            f"<th>score</th><th>defect</th><th>gate</th></tr>{scores}</table>")


def twin_table(row: dict[str, Any]) -> str:
    """Our row's scores beside its published twin's, per probe, with the difference and why the boards differ."""
    tw = row.get("published_twin")
    if not tw:
        return ""
    o = tw["overall"]
    lines = []
    for name, d in tw["probes"].items():
        mark = " **" if d["flagged"] else ""
        diff = "—" if d["diff"] is None else f"{d['diff']:+.3f}{mark}"
        lines.append(f"<tr><td>{_e(name)}</td><td>{_fmt(d['ours'], '.3f')} ({_fmt(d['ours_defect'], '.2g')})</td>"
                     f"<td>{_fmt(d['published'], '.3f')} ({_fmt(d['published_defect'], '.2g')})</td>"
                     f"<td>{_e(diff)}</td><td style='text-align:left'>{_e(d['explanation'])}</td></tr>")
    return (f"<table class=twin><caption>beside the published board: {_e(tw['label'])} (overall "
            f"{_fmt(o['ours'], '.3f')} here, {_fmt(o['published'], '.3f')} published)</caption><tr><th>probe</th>"
            "<th>jaxcert, exact (defect)</th><th>published, FD (defect)</th><th>Δ score</th>"
            f"<th>why the boards differ</th></tr>{''.join(lines)}</table><p class=note>** a difference larger than "
            f"{tw['flag']:g}. docs/board.md, \"Which board to believe, probe by probe\", says why per probe.</p>")


# ------------------------------------------------------------------------------------------------ page code
CSS = (
    "div.controls{display:flex;flex-wrap:wrap;gap:.3em .9em;align-items:center;margin:.6em 0;max-width:1300px}"
    "div.controls select{max-width:16em}div.controls p{flex-basis:100%;margin:.2em 0}"
    "button.pin{border:0;background:none;cursor:pointer;font-size:100%;padding:0 2px}"
    "button.pin::before{content:'\\2606'}button.pin[aria-pressed=true]::before{content:'\\2605';color:#b8860b}"
    "tbody.row[data-origin='published (FD)'] tr.main>td{background-image:linear-gradient(#f3f0ff,#f3f0ff)}"
    "tbody.row[data-origin='published (FD)'] tr.main>td.cell{background-image:none;font-style:italic}"
    "tbody.row.flash tr.main>td:first-child{outline:3px solid #ff7f0e}"
    "td.src{white-space:nowrap}div.charts{display:flex;flex-wrap:wrap;gap:10px}figure.chart{margin:0}"
    "svg.chart .pt{cursor:pointer}"
    "svg.chart .pt:hover,svg.chart .pt:focus{stroke-width:2.5}.legend-keys .key{margin-right:1em;white-space:nowrap}"
    "details.unplotted{font-size:90%;max-width:440px}table.twin td,table.published td{font-size:90%}"
    "table.twin td:last-child{max-width:520px}"
    "@media print{#jc-controls,button.pin,button.tog,a.why,details.unplotted{display:none!important}"
    "body{padding:0}main{max-width:none}div.scroll{overflow:visible;border:0}"
    "table.board th,table.board thead th:first-child,table.board tr.main>td:first-child{position:static;"
    "box-shadow:none}div.charts,figure.chart{break-inside:avoid}}"
)

# Filters, search, pins, export and chart clicks.  Every handler is attached here (no inline handler carries
# data); row ids are the page's own (r0, r1, ...), looked up in a map, never built into a selector.
JS = r"""
function jcGroups(){return Array.prototype.slice.call(document.querySelectorAll('#board tbody.row'));}
function jcById(){var m={}; jcGroups().forEach(function(g){m[g.getAttribute('data-row')]=g;}); return m;}
function jcHeaders(){return Array.prototype.slice.call(document.querySelectorAll('#board thead th'));}
function jcText(td, i){var t=td.textContent; if(i===0) t=t.replace('\u25b8','').replace('\u25be','');
  return t.replace(/\s+/g,' ').trim();}
function jcShown(){return jcGroups().filter(function(g){return !g.hidden;});}
function jcApply(){
  var c=document.getElementById('jc-controls'); if(!c) return;
  var q=(document.getElementById('jc-q').value||'').toLowerCase().split(/\s+/).filter(function(w){return w;});
  var sels=Array.prototype.slice.call(c.querySelectorAll('select[data-key]')), all=jcGroups(), n=0;
  all.forEach(function(g){
    var ok=g.getAttribute('data-pinned')==='true';
    if(!ok){ok=sels.every(function(s){
        return s.value===''||g.getAttribute('data-'+s.getAttribute('data-key'))===s.value;})
      && q.every(function(w){return g.getAttribute('data-search').indexOf(w)>=0;});}
    g.hidden=!ok; if(ok) n++;
  });
  document.getElementById('jc-count').textContent=n+' of '+all.length+' rows shown';
  var by=jcById();
  Array.prototype.forEach.call(document.querySelectorAll('svg.chart .pt, details.unplotted li'), function(p){
    var g=by[p.getAttribute('data-row')]; p.style.display=(g&&!g.hidden)?'':'none';});
  Array.prototype.forEach.call(document.querySelectorAll('details.unplotted'), function(d){
    var k=Array.prototype.filter.call(d.querySelectorAll('li'), function(li){return li.style.display!=='none';}).length;
    d.querySelector('span.n').textContent=String(k); d.style.display=k?'':'none';});
}
function jcPinOrder(){
  var t=document.getElementById('board'); if(!t) return; var gs=jcGroups();
  gs.filter(function(g){return g.getAttribute('data-pinned')==='true';}).concat(
    gs.filter(function(g){return g.getAttribute('data-pinned')!=='true';})).forEach(function(g){t.appendChild(g);});
}
function jcSortState(th, dir){
  var s=document.getElementById('jc-sort'); if(!s) return;
  s.textContent='rows sorted by '+th.getAttribute('data-name')+' ('+dir+')';
}
function jcTable(){
  var hs=jcHeaders(), rows=jcShown().map(function(g){
    return Array.prototype.map.call(g.rows[0].cells, function(td, i){return jcText(td, i);});});
  return {header: hs.map(function(h){return h.getAttribute('data-name');}), rows: rows};
}
function jcCsvCell(t){ if(/^[=+@\t\r-]/.test(t) && !/^[-+]?[0-9.]/.test(t)) t="'"+t;
  return '"'+t.replace(/"/g,'""')+'"';}
function jcCsv(){var d=jcTable();
  return [d.header].concat(d.rows).map(function(r){return r.map(jcCsvCell).join(',');}).join('\r\n')+'\r\n';}
function jcJson(){
  var hs=jcHeaders(), names=hs.map(function(h){return h.getAttribute('data-name');});
  var rows=jcShown().map(function(g){
    var tds=g.rows[0].cells, shown={}, values={};
    names.forEach(function(n, i){var td=tds[i]; shown[n]=jcText(td, i); var v=td.getAttribute('data-v');
      values[n]=hs[i].getAttribute('data-type')==='num'?(v===null||v===''?null:parseFloat(v)):(v===null?null:v);});
    return {label: shown[names[0]], source: g.getAttribute('data-origin'), family: g.getAttribute('data-family'),
            precision: g.getAttribute('data-precision'), training_set: g.getAttribute('data-training'),
            device: g.getAttribute('data-device'), pinned: g.getAttribute('data-pinned')==='true',
            shown: shown, values: values};});
  var s=document.getElementById('jc-sort');
  return JSON.stringify({title: document.title, sort: s?s.textContent:null, columns: names, rows: rows}, null, 1);
}
function jcDownload(name, type, text){
  var a=document.createElement('a'); a.download=name;
  a.href='data:'+type+';charset=utf-8,'+encodeURIComponent(text);  // a data: address: nothing to fetch or free
  document.body.appendChild(a); a.click(); a.remove();
}
function jcOpenRow(id){
  var g=jcById()[id]; if(!g) return null; var d=g.querySelector('tr.drill');
  if(d.hidden) jcToggle(g.querySelector('button.tog'));
  g.classList.add('flash'); setTimeout(function(){g.classList.remove('flash');}, 1500);
  if(g.scrollIntoView) g.scrollIntoView({block: 'center'});
  return g;
}
(function(){
  var c=document.getElementById('jc-controls'); if(!c) return;
  Array.prototype.forEach.call(c.querySelectorAll('select[data-key]'), function(s){
    s.addEventListener('change', jcApply);});
  document.getElementById('jc-q').addEventListener('input', jcApply);
  document.getElementById('jc-reset').addEventListener('click', function(){
    document.getElementById('jc-q').value='';
    Array.prototype.forEach.call(c.querySelectorAll('select[data-key]'), function(s){s.value='';}); jcApply();});
  Array.prototype.forEach.call(c.querySelectorAll('button[data-export]'), function(b){
    b.addEventListener('click', function(){
      if(b.getAttribute('data-export')==='csv') jcDownload('board.csv', 'text/csv', jcCsv());
      else jcDownload('board.json', 'application/json', jcJson());});});
  Array.prototype.forEach.call(document.querySelectorAll('#board button.pin'), function(b){
    b.addEventListener('click', function(ev){ev.stopPropagation(); var g=b.closest('tbody');
      var on=g.getAttribute('data-pinned')!=='true'; g.setAttribute('data-pinned', String(on));
      b.setAttribute('aria-pressed', String(on)); jcPinOrder(); jcApply();});});
  Array.prototype.forEach.call(document.querySelectorAll('svg.chart .pt'), function(p){
    function open(){jcOpenRow(p.getAttribute('data-row'));}
    p.addEventListener('click', open);
    p.addEventListener('keydown', function(ev){if(ev.key==='Enter'||ev.key===' ') open();});});
  jcApply();
})();
"""
