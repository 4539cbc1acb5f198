"""The certify report page and the comparison board in a real browser (headless Chromium, tests/_browser.py).

Both pages come from small real runs (LJ and LJ with a curl force, ``--defect curl=0.3``, on Si with three
probes), built once for the module.  Each page is checked at a 1,400-px window: it fits (no horizontal
scrolling of the page), the title and each probe's explanation appear once, and its controls work (the board:
sorting by a header click, a model's drill-down, a probe's section, the model column fixed while the wide
table scrolls in its own container).  Skipped, with the reason, where Chromium is not installed.
"""

from __future__ import annotations

import copy
import json

import pytest

import jaxcert
from jaxcert.probes import PROBES
from jaxcert.report import compare, explain
from jaxcert.report.html import score_colour
from tests import _browser

pytestmark = pytest.mark.skipif(_browser.chromium() is None, reason=_browser.SKIP_REASON)

PROBE_SET = "equivariance,trimer,config_temperature"


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    """The two reports (objects and JSON files), the two-model board and a wide board of all probes."""
    from jaxcert.models import defects

    d = tmp_path_factory.mktemp("pages")
    lj = jaxcert.models.get("lj")
    reports = {"lj": jaxcert.certify(lj, ["Si"], probes=PROBE_SET),
               "curl": jaxcert.certify(defects.curl(lj, 0.3), ["Si"], probes=PROBE_SET)}
    files = {}
    for name, rep in reports.items():
        files[name] = str(d / f"{name}.json")
        rep.to_json(files[name])
    # a wide board: every default probe as a column (each a copy of a measured one, renamed), three models
    wide = []
    for name in ("lj", "curl"):
        doc = json.loads(open(files[name], encoding="utf-8").read())
        measured = {p["name"]: p for p in doc["probes"]}
        doc["probes"] = []
        for k, probe in enumerate(n for n in PROBES if PROBES[n].structures is None):
            p = copy.deepcopy(measured.get(probe) or list(measured.values())[k % len(measured)])
            p["name"] = probe
            doc["probes"].append(p)
        for suffix in ("", "-b") if name == "lj" else ("",):
            doc["model"]["name"] = f"{name}{suffix}"
            if suffix:  # a third model a little below lj everywhere, so that no sort has ties
                for p in doc["probes"]:
                    for e in [p, *p["per_element"].values()]:
                        e["score"] = None if e["score"] is None else 0.99 * e["score"]
                doc["aggregate"]["overall"] *= 0.99
            path = d / f"wide-{name}{suffix}.json"
            path.write_text(json.dumps(doc), encoding="utf-8")
            wide.append(str(path))
    return {"reports": reports, "files": files, "board": compare.build_board([files["lj"], files["curl"]]),
            "wide": compare.build_board(wide), "dir": d}


# ------------------------------------------------------------------ the board
_BOARD_JS = r"""
var C = __CONFIG__, de = document.documentElement;
function labels(){
  return Array.prototype.map.call(document.querySelectorAll('#board tbody.row tr.main td:first-child'),
    function(td){ return td.textContent.replace('\u25b8', '').replace('\u25be', '').trim(); });
}
function header(text){
  var ths = document.querySelectorAll('#board thead th');
  for (var i = 0; i < ths.length; i++) if (ths[i].textContent.replace('?', '').trim() === text) return ths[i];
  return null;
}
var body = document.body.innerText;
function count(s){ var n = 0, i = body.indexOf(s); while (i >= 0) { n++; i = body.indexOf(s, i + 1); } return n; }
R.h1 = Array.prototype.map.call(document.querySelectorAll('h1'), function(h){ return h.textContent; });
R.title_count = count(C.title);
R.explanation_counts = C.explanations.map(count);
R.margin_left = Math.min(document.querySelector('h1').getBoundingClientRect().left,
                         document.querySelector('div.scroll').getBoundingClientRect().left);
var lg = document.querySelector('div.legend');
R.legend = lg ? {lo: lg.dataset.lo, hi: lg.dataset.hi, text: lg.innerText} : null;
R.initial = labels();
R.sorts = {};
C.sorts.forEach(function(h){
  var th = header(h); if (!th) { R.sorts[h] = null; return; }
  th.click(); var first = labels(), dir1 = th.getAttribute('aria-sort');
  th.click(); var second = labels(), dir2 = th.getAttribute('aria-sort');
  R.sorts[h] = {first: first, second: second, dirs: [dir1, dir2]};
});
// a model's drill-down
var btn = document.querySelector('#board tbody.row button.tog'), drill = btn.closest('tbody').querySelector('tr.drill');
R.drill_label = btn.parentNode.textContent.replace('\u25b8', '').trim();
R.drill_hidden_before = drill.hidden; btn.click();
R.drill_hidden_after = drill.hidden; R.drill_height = drill.getBoundingClientRect().height;
R.drill_text = drill.innerText.slice(0, 2000);
R.drill_right = drill.querySelector('.drillbox').getBoundingClientRect().right;
R.fits_with_drill = de.scrollWidth <= de.clientWidth;
btn.click(); R.drill_hidden_again = drill.hidden;
// a probe's section, opened by the ? of its header
var why = document.querySelector('#board thead a.why');
if (why) {
  var id = why.getAttribute('href').slice(1); why.click();
  R.section = {id: id, open: document.getElementById(id).open};
}
// the model column stays while the board scrolls sideways in its container
var sc = document.querySelector('div.scroll');
R.board_overflows = sc.scrollWidth > sc.clientWidth;
if (!R.board_overflows) sc.style.maxWidth = '360px';
var first = document.querySelector('#board tr.main td:first-child'), other = first.nextElementSibling;
var head = document.querySelector('#board thead th');
var l0 = first.getBoundingClientRect().left, o0 = other.getBoundingClientRect().left;
var h0 = head.getBoundingClientRect().left;
sc.scrollLeft = sc.scrollWidth;
R.scrolled_by = sc.scrollLeft;
R.model_moved = first.getBoundingClientRect().left - l0;
R.head_moved = head.getBoundingClientRect().left - h0;
R.other_moved = other.getBoundingClientRect().left - o0;
R.fits_scrolled = de.scrollWidth <= de.clientWidth;
"""


def _board_js(board: dict, sorts: list[str]) -> str:
    config = {"title": "jaxcert comparison board", "sorts": sorts,
              "explanations": [explain.explain(c) for c in board["columns"]]}
    return _BOARD_JS.replace("__CONFIG__", json.dumps(config))


def _check_board(board: dict, res: dict, initial: list[str] | None = None) -> None:
    """``initial``: the order the page opens in (default: the board's, as ``jaxcert compare`` writes it)."""
    assert "error" not in res, res.get("error")
    assert res["fits"], f"the board page is {res['scroll_width']} px wide in a {res['client_width']} px window: " \
                        f"{res['overflowing']}"
    assert res["h1"] == ["jaxcert comparison board"] and res["title_count"] == 1, "the title appears once"
    assert res["explanation_counts"] == [1] * len(board["columns"]), "each probe's explanation appears once"
    assert res["margin_left"] >= 16, "a left margin"
    labels = [r["label"] for r in board["rows"]]
    assert res["initial"] == (labels if initial is None else initial)
    # sorting as `--sort` orders the terminal table: Overall highest first, then reversed (ties keep their
    # order); Model by name, then reversed
    def order(key, reverse=False):
        return [r["label"] for r in compare.sort_rows(board, key, reverse)]

    assert res["sorts"]["Overall"]["first"] == order("overall")
    assert res["sorts"]["Overall"]["second"] == order("overall", reverse=True)
    assert res["sorts"]["Overall"]["dirs"] == ["descending", "ascending"]
    assert res["sorts"]["Model"]["first"] == order("model") and res["sorts"]["Model"]["second"] == order("model", True)
    col = board["columns"][0]
    assert res["sorts"][explain.short_name(col)]["first"] == order(col)
    # the drill-down opens, shows the model's per-element values, stays inside the window, and closes again
    assert res["drill_hidden_before"] and not res["drill_hidden_after"] and res["drill_hidden_again"]
    assert res["drill_height"] > 20 and res["drill_right"] <= res["client_width"] and res["fits_with_drill"]
    row = next(r for r in board["rows"] if r["label"] == res["drill_label"])
    for el, e in row["cells"][col]["per_element"].items():
        assert el in res["drill_text"] and f"{e['score']:.3f}" in res["drill_text"]
    assert res["section"]["open"] and res["section"]["id"] == f"probe-{col}"
    # the model column is fixed (sticky) while the rest of the board scrolls inside its container
    assert res["scrolled_by"] > 50, res
    assert abs(res["model_moved"]) < 1 and abs(res["head_moved"]) < 1 and res["other_moved"] < -50, res
    assert res["fits_scrolled"]
    scores = [c["score"] for r in board["rows"] for c in r["cells"].values() if c["score"] is not None]
    assert res["legend"] is not None and float(res["legend"]["lo"]) == min(scores)
    assert float(res["legend"]["hi"]) == max(scores) and "span" in res["legend"]["text"]


def test_board_fits_and_its_controls_work(pages):
    board = pages["board"]
    res = _browser.run_in_browser(compare.board_html(board), _board_js(board, ["Overall", "Model", "equivar"]))
    _check_board(board, res)


def test_wide_board_scrolls_inside_its_container(pages):
    """Every probe as a column: wider than the window, so the board scrolls in its container and the page fits."""
    board = pages["wide"]
    assert len(board["columns"]) == 14 and len(board["rows"]) == 3
    res = _browser.run_in_browser(compare.board_html(board), _board_js(board, ["Overall", "Model", "conserv"]))
    _check_board(board, res)
    assert res["board_overflows"], "14 probe columns are wider than 1,400 px: the container scrolls"


# ------------------------------------------------------------------ the certify report
_REPORT_JS = r"""
var C = __CONFIG__;
var body = document.body.innerText;
function count(s){ var n = 0, i = body.indexOf(s); while (i >= 0) { n++; i = body.indexOf(s, i + 1); } return n; }
R.h1 = Array.prototype.map.call(document.querySelectorAll('h1'), function(h){ return h.textContent; });
R.explanation_counts = C.explanations.map(count);
R.margin_left = document.querySelector('h1').getBoundingClientRect().left;
R.heat = Array.prototype.map.call(document.querySelectorAll('svg.heatmap g'), function(g){
  return {fill: g.querySelector('rect').getAttribute('fill'), text: g.querySelector('text').textContent,
          tip: g.querySelector('title').textContent}; });
var lg = document.querySelector('div.legend');
R.legend = lg ? {lo: lg.dataset.lo, hi: lg.dataset.hi, text: lg.innerText} : null;
R.plots = Array.prototype.map.call(document.querySelectorAll('.plots svg'), function(svg){
  var frame = svg.querySelector('rect').getBoundingClientRect();
  return {title: svg.querySelector('text').textContent, width: svg.getBoundingClientRect().width,
          refs: Array.prototype.map.call(svg.querySelectorAll('line.ref'), function(l){
            var r = l.getBoundingClientRect();
            return {inside: r.top >= frame.top - 0.5 && r.bottom <= frame.bottom + 0.5, width: r.width}; })}; });
R.notes = Array.prototype.map.call(document.querySelectorAll('p.plotnote'), function(p){ return p.innerText; });
"""


@pytest.mark.parametrize("name", ["lj", "curl"])
def test_report_page_fits_and_says_what_its_colours_and_plots_mean(pages, name):
    rep = pages["reports"][name]
    config = {"explanations": [explain.explain(o.name) for o in rep.outcomes]}
    res = _browser.run_in_browser(rep.to_html(), _REPORT_JS.replace("__CONFIG__", json.dumps(config)))
    assert "error" not in res, res.get("error")
    assert res["fits"], f"{res['scroll_width']} px in a {res['client_width']} px window: {res['overflowing']}"
    assert res["h1"] == [f"jaxcert certification: {rep.model['name']}"] and res["margin_left"] >= 16
    assert res["explanation_counts"] == [1] * len(rep.outcomes)
    # the heat map: one cell per probe and element, each coloured by its score on the documented scale
    scores = [float(o.score[0]) for o in rep.outcomes]
    assert [c["fill"] for c in res["heat"]] == [score_colour(s) for s in scores]
    assert all(c["text"] == f"{s:.3f}" for c, s in zip(res["heat"], scores, strict=True))
    assert float(res["legend"]["lo"]) == min(scores) and float(res["legend"]["hi"]) == max(scores)
    # T_conf/T_kin has its reference line at 1, inside the frame; ΔE₃ of a pair energy is a note, not a flat plot
    tconf = next(p for p in res["plots"] if p["title"].startswith("Configurational"))
    assert len(tconf["refs"]) == 1 and tconf["refs"][0]["inside"] and tconf["refs"][0]["width"] > 100
    assert not any(p["title"].startswith("Three-body") for p in res["plots"])
    assert any(n.startswith("Three-body decay ΔE₃: not plotted") and "no three-body energy" in n for n in res["notes"])


def test_screenshot_is_a_small_png(pages, tmp_path):
    page = tmp_path / "board.html"
    page.write_text(compare.board_html(pages["board"]), encoding="utf-8")
    png = _browser.screenshot(page, tmp_path / "board.png", width=1400, height=700)
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and 1_000 < len(data) < 300_000
    assert int.from_bytes(data[16:20], "big") == 1400  # the IHDR width
