"""The board people choose a model with (docs/board.md, "Reading the board page", "The published rows"):
one naming scheme, the published finite-difference rows beside ours with the difference per probe, ``--rebuild``
from the reports on disk, and the page's filters, search, pins, exports and charts in headless Chromium at
1,400 px, offline and in print.

One real board for the module: LJ, LJ with a curl force and LJ on float32 structures (``jaxcert board`` from a
TOML file, two probes on Cu and Al, throughput measured), with the published board's rows added from the
committed transcription (``benchmarks/results/board/published_pescert.json``), its LJ entry stated on Cu and Al
so that our LJ row has its published twin.  Every expectation is computed from the board's JSON and the
published file, never written out.
"""

from __future__ import annotations

import copy
import csv
import io
import json
import re
from pathlib import Path

import pytest

from jaxcert.cli import main
from jaxcert.report import board_page, compare, naming, published
from jaxcert.report.summary import combine_scores
from tests import _browser

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED = ROOT / "benchmarks" / "results" / "board" / "published_pescert.json"
ELEMENTS, PROBES = "Cu,Al", "parity,equivariance"
TOML = ('[[models]]\nspec = "lj"\n\n[[models]]\nspec = "lj"\nname = "lj-curl"\ndefects = ["curl=1.0"]\n\n'
        '[[models]]\nspec = "lj"\nname = "lj-float32"\ndtype = "float32"\n')


def _read(path):
    return json.loads(Path(path).read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """The board (module docstring): its folder, exit code, terminal output, board.json, page, files."""
    d = tmp_path_factory.mktemp("board-page")
    (d / "models.toml").write_text(TOML)
    pub = _read(PUBLISHED)
    pub["models"]["lennard-jones"]["elements"] = ", ".join(ELEMENTS.split(","))  # this board's elements
    (d / "published.json").write_text(json.dumps(pub))
    out = d / "b"
    buf_out, buf_err = io.StringIO(), io.StringIO()
    import contextlib

    with contextlib.redirect_stdout(buf_out), contextlib.redirect_stderr(buf_err):
        code = main(["board", "--models", str(d / "models.toml"), "--elements", ELEMENTS, "--probes", PROBES,
                     "--out", str(out), "--published", str(d / "published.json"), "--quiet"])
    return {"dir": d, "out": out, "code": code, "stdout": buf_out.getvalue(), "board": _read(out / "board.json"),
            "page": (out / "index.html").read_text(encoding="utf-8"), "published": pub,
            "argv": ["board", "--models", str(d / "models.toml"), "--elements", ELEMENTS, "--probes", PROBES,
                     "--out", str(out), "--published", str(d / "published.json"), "--quiet"]}


def _ours(board):
    return [r for r in board["rows"] if r["origin"] != "published"]


# ------------------------------------------------------------------ names, published rows, twins
def test_one_name_per_row_in_the_terminal_the_json_and_the_page(made):
    board = made["board"]
    for r in _ours(board):
        doc = _read(made["out"] / r["file"])
        who = naming.identity(doc["model"], doc["card"], r["precision"])
        assert r["label"] == who.label() and (r["family"], r["checkpoint"]) == (who.family, who.checkpoint)
        assert r["label"].split(naming.SEPARATOR)[0] == naming.FAMILY_NAMES["lj"]
        assert r["label"].endswith(naming.SEPARATOR + r["precision"])
    assert len({r["label"] for r in board["rows"]}) == len(board["rows"])
    # judged under the other gate profile, the name says so
    ref = compare.build_board([made["out"] / r["file"] for r in _ours(board)], gates="reference")
    assert [r["label"] for r in ref["rows"]] == [r["label"] + naming.SEPARATOR + "reference gates"
                                                 for r in _ours(board)]
    shown = [html_text(m) for m in re.findall(r"<tr class=main><td data-v='[^']*'>.*?</button> (.*?)</td>",
                                               made["page"])]
    assert sorted(shown) == sorted(r["label"] for r in board["rows"])  # the page: one row per board row
    for r in board["rows"]:
        assert r["label"] in made["stdout"]  # the terminal board


def test_the_names_docs_give_are_the_names_the_board_gives():
    """Each row of docs/board.md's table of names: the committed report of that spec (or, for the defect, the
    model as loaded) is named as the table says."""
    from jaxcert.board import entry_name
    from jaxcert.report import gates
    from jaxcert.specs import load_model

    docs = (ROOT / "docs" / "board.md").read_text(encoding="utf-8")
    section = docs[docs.index("## Names"):docs.index("## Reading the board page")]
    rows = re.findall(r"^\| `([^`]+)`([^|]*)\| ([^|]+?) \|$", section, re.M)
    assert len(rows) == 4
    for spec, how, label in rows:
        if "--defect" in how:
            model = load_model(spec, [how.split("--defect ")[1].strip("` ")])
            who = naming.identity({"name": model.name, **dict(model.info)}, None, "float64")
        else:
            doc = _read(ROOT / "benchmarks" / "results" / "board" / f"{entry_name(spec)}.json")
            # @float32 is the network's precision (a CHGNet report written before bridges stated it lacks it)
            precision = "float32" if "float32" in spec.partition("@")[2] else gates.model_precision(
                doc["model"], doc["card"], doc["dtype"])
            who = naming.identity(doc["model"], doc["card"], precision)
        assert who.label() == label, (spec, how)


def html_text(s: str) -> str:
    import html

    return html.unescape(s)


def test_published_rows_are_marked_and_our_twin_shows_the_difference_per_probe(made):
    board, pub = made["board"], made["published"]
    rows = [r for r in board["rows"] if r["origin"] == "published"]
    assert [r["published"]["slug"] for r in rows] == list(pub["models"])
    src = pub["source"]
    method = _ours(board)[0]["agg"]
    for r in rows:
        m = pub["models"][r["published"]["slug"]]
        assert r["label"].endswith("published (FD)") and r["published"]["method"] == "finite differences"
        assert (r["published"]["repo"], r["published"]["commit"], r["published"]["date"]) == (
            src["repo"], src["commit"], src["generated"])
        assert r["published"]["url"] == f"https://github.com/{src['repo']}/blob/{src['commit']}/{src['path']}"
        assert r["atom_steps_per_s"] == m["throughput"]["atom_steps_per_s"]
        scores = [0.0 if m["scores"][c] is None else m["scores"][c] for c in board["columns"]]
        assert r["overall"] == pytest.approx(combine_scores(scores, method))
        assert r["published"]["hardware"] == (f"gpu ({m['gpu']['name']})" if m["gpu"] else
                                              "not recorded by the published board")
    # our LJ in float64 is the published LJ's twin (same family, no checkpoint, float64, the same elements);
    # the curl-defect and float32 rows are not
    lj = pub["models"]["lennard-jones"]
    twins = {r["label"]: r.get("published_twin") for r in _ours(board)}
    [twin_label] = [k for k, v in twins.items() if v]
    row = next(r for r in _ours(board) if r["label"] == twin_label)
    assert (row["family"], row["checkpoint"], row["precision"]) == (lj["twin"]["family"], lj["twin"]["checkpoint"],
                                                                     lj["precision"])
    tw = row["published_twin"]
    assert next(r for r in rows if r["published"]["slug"] == "lennard-jones")["published"]["twins"] == [twin_label]
    for probe in board["columns"]:
        d = tw["probes"][probe]
        assert d["diff"] == pytest.approx(row["cells"][probe]["score"] - lj["scores"][probe])
        assert d["flagged"] == (abs(d["diff"]) > published.FLAG)
        assert d["explanation"] == published.why(probe)[1] and d["explanation"]
    assert made["page"].count("<table class=twin>") == 1  # the difference is in that row's drill-down


def test_a_twin_certified_on_other_elements_is_not_set_beside_ours(made):
    """The committed file states the published LJ on Li…S: a board on Cu and Al gets the published rows but no
    per-probe difference (it would compare different elements), and a note says so."""
    sources = [compare.load(made["out"] / r["file"]) for r in _ours(made["board"])]
    board = compare.build_board(sources)
    published.add(board, published.load(PUBLISHED))
    assert not any(r.get("published_twin") for r in board["rows"])
    assert any(n.startswith("not set beside their published twin") and "LJ · float64" in n for n in board["notes"])


def test_the_reasons_on_the_page_are_the_docs_words():
    docs = " ".join((ROOT / "docs" / "board.md").read_text(encoding="utf-8").split())
    for kind, (_, sentence) in published.WHY.items():
        assert " ".join(sentence.split()) in docs, kind
    every = [p for probes, _ in published.WHY.values() for p in probes]
    from jaxcert.probes import PROBES as ALL

    assert sorted(every) == sorted(n for n in ALL if ALL[n].structures is None)  # each probe has its reason once


def test_the_nacl_cell_is_the_published_one():
    """100 atoms of rocksalt NaCl, a = 5.64 Å (nearest Na–Cl distance a/2, like ions a/√2 apart), the primitive
    cell repeated 5 × 5 × 2 (volume 100 a³/8)."""
    import numpy as np

    from jaxcert.probes import throughput

    s = throughput.nacl_cell()
    z = np.asarray(s.numbers)
    assert z.shape == (100,) and (z == 11).sum() == 50 and (z == 17).sum() == 50
    cell, pos = np.asarray(s.cell), np.asarray(s.positions)
    assert abs(np.linalg.det(cell)) == pytest.approx(100 * throughput.NACL_A ** 3 / 8, rel=1e-12)
    frac = np.linalg.solve(cell.T, (pos[:, None] - pos[None]).reshape(-1, 3).T).T
    d = np.linalg.norm((frac - np.round(frac)) @ cell, axis=1).reshape(100, 100) + np.eye(100) * 1e9
    unlike = d[np.ix_(z == 11, z == 17)]
    assert unlike.min() == pytest.approx(throughput.NACL_A / 2) and d[np.ix_(z == 11, z == 11)].min() == \
        pytest.approx(throughput.NACL_A / 2 ** 0.5)


def test_the_certify_line_names_the_nacl_rate_or_why_it_is_missing(made):
    """``jaxcert certify --throughput``'s terminal line: the NaCl rate ± its spread, or the reason it was not
    measured (a model without Na or Cl) beside the rate on the model's own cell."""
    from jaxcert.report.certification import throughput_line

    t = _read(made["out"] / "lj.json")["throughput"]
    n = t["nacl"]
    line = throughput_line(t)
    assert f"{n['atom_steps_per_s']:.3g} ± {n['atom_steps_per_s_stdev']:.2g} atom·steps/s (NVE on the published " \
           "board's NaCl cell, 100 atoms)" in line and f"peak memory {t['peak_memory']['host_rss_bytes'] / 1e9:.2f}" \
           in line
    missing = {**t, "nacl": {"error": "the model has no parameters for Na, Cl"},
               "md": {"atom_steps_per_s": 5e3, "n_atoms": 125, "element": "Cu"}}
    line = throughput_line(missing)
    assert "NaCl throughput not measured (the model has no parameters for Na, Cl)" in line and "125 Cu atoms" in line


def test_each_card_says_when_its_report_was_computed_and_a_later_nacl_measurement_says_so(made):
    """A finished report carries its finish time, and its card shows it; a report written before that stamp shows
    the commit dates it carries instead; a NaCl rate measured after the probes (benchmarks/board_nacl.py) says
    when, on what and its own peak memory, and one measured with the probes says none of that."""
    import datetime

    doc = _read(made["out"] / "lj.json")
    when = datetime.datetime.fromisoformat(doc["finished_utc"])
    assert when.tzinfo is not None and abs(datetime.datetime.now(datetime.timezone.utc) - when).days < 1
    row = next(r for r in made["board"]["rows"] if r["file"] == "lj.json")
    assert row["computed_at"] == f"finished {doc['finished_utc']}"
    assert f"<th>computed</th><td style='text-align:left'>finished {doc['finished_utc']}</td>" in \
        compare.card_html(row)
    assert "measured after the probes" not in compare.card_html(row)
    old = {k: v for k, v in doc.items() if k != "finished_utc"}
    assert compare._computed(old) is None
    old["computed_between_utc"] = "2026-11-20 to 2026-11-24"
    assert compare._computed(old).startswith("committed 2026-11-20 to 2026-11-24")
    later = copy.deepcopy(row)
    later["throughput"]["nacl"].update({"measured_separately": True, "measured_utc": "2026-12-08T00:10:00+00:00",
                                        "hardware": {"device": "cpu (Test CPU, 2 cores)"},
                                        "jaxcert_commit": "0123456789abcdef", "peak_rss_bytes": 1_750_000_000})
    card = compare.card_html(later)
    assert ("measured after the probes, on its own, 2026-12-08T00:10:00+00:00 on cpu (Test CPU, 2 cores), jaxcert "
            "0123456789, peak memory 1.75 GB") in card


# ------------------------------------------------------------------ --rebuild and bad input
def test_rebuild_writes_the_same_board_without_loading_a_model(made, monkeypatch, capsys):
    import jaxcert.specs

    def no(*a, **k):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr(jaxcert.specs, "load_model", no)
    out = made["out"]
    reports = sorted(p for p in out.glob("*.json") if p.name != "board.json")
    before = {p: p.stat().st_mtime_ns for p in reports}
    assert main([*made["argv"], "--rebuild"]) == made["code"]
    assert {p: p.stat().st_mtime_ns for p in reports} == before  # no report touched
    assert _read(out / "board.json") == made["board"]
    assert (out / "index.html").read_text(encoding="utf-8") == made["page"]
    assert capsys.readouterr().err.count("complete report kept (nothing recomputed)") == len(reports)
    # a report that is missing, or partial: refused, naming --rebuild and the file; nothing is rewritten
    stamp = (out / "board.json").stat().st_mtime_ns
    gone = reports[0]
    saved = gone.read_bytes()
    gone.unlink()
    try:
        assert main([*made["argv"], "--rebuild"]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "--rebuild" in err and gone.name in err and "no report" in err
        doc = json.loads(saved)
        doc["complete"] = False
        gone.write_text(json.dumps(doc))
        assert main([*made["argv"], "--rebuild"]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "--rebuild" in err and "partial report" in err
    finally:
        gone.write_bytes(saved)
    assert main([*made["argv"], "--seed", "1", "--rebuild"]) == 2  # reports of another run: refused
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--rebuild" in err and "seed = 0, this board has 1" in err
    assert (out / "board.json").stat().st_mtime_ns == stamp


@pytest.mark.parametrize("edit,field", [
    (lambda d: d.pop("source"), "source"),
    (lambda d: d["source"].update(commit="3a4ab125"), "source.commit"),
    (lambda d: d["models"]["chgnet"]["scores"].update(parity=1.5), "models.chgnet.scores.parity"),
    (lambda d: d["models"]["chgnet"].update(precision="bf16"), "models.chgnet.precision"),
    (lambda d: d["models"]["chgnet"].update(twin={"checkpoint": "0.3.0"}), "models.chgnet.twin.family"),
])
def test_a_bad_published_file_is_refused_before_anything_runs(tmp_path, capsys, edit, field):
    doc = _read(PUBLISHED)
    edit(doc)
    path = tmp_path / "p.json"
    path.write_text(json.dumps(doc))
    argv = ["board", "--models", "lj", "--elements", "Si", "--probes", "parity", "--out", str(tmp_path / "o"),
            "--no-throughput", "--quiet", "--published", str(path)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("jaxcert: error: --published: ") and f"{field}:" in err
    assert not (tmp_path / "o" / "lj.json").exists()
    assert main([*argv[:-1], str(tmp_path / "none.json")]) == 2
    assert "--published" in capsys.readouterr().err


# ------------------------------------------------------------------ the page in a browser
pytestmark_browser = pytest.mark.skipif(_browser.chromium() is None, reason=_browser.SKIP_REASON)

_PAGE_JS = r"""
var C = __CONFIG__;
function groups(){ return Array.prototype.slice.call(document.querySelectorAll('#board tbody.row')); }
function seen(){ return groups().filter(function(g){ return g.getBoundingClientRect().height > 0; }); }
function cellText(td, i){ var t = td.innerText; if (i === 0) t = t.replace('\u25b8', '').replace('\u25be', '');
  return t.replace(/\s+/g, ' ').trim(); }
function table(){
  var head = Array.prototype.map.call(document.querySelectorAll('#board thead th'), function(th){
    return th.getAttribute('data-name'); });
  return [head].concat(seen().map(function(g){ return Array.prototype.map.call(g.rows[0].cells, cellText); }));
}
function charts(){
  Array.prototype.forEach.call(document.querySelectorAll('details.unplotted'), function(d){ d.open = true; });
  return Array.prototype.map.call(document.querySelectorAll('svg.chart'), function(svg){
    var fig = svg.closest('figure');
    function shown(el){ var r = el.getBoundingClientRect(); return r.width > 0 && r.height > 0; }
    return {key: svg.getAttribute('data-key'),
            points: Array.prototype.filter.call(svg.querySelectorAll('.pt'), shown).map(function(p){
              return p.getAttribute('data-row'); }),
            unplotted: Array.prototype.filter.call(fig.querySelectorAll('details.unplotted li'), shown).map(
              function(li){ return li.getAttribute('data-row'); })};
  });
}
function snap(name){
  R.states[name] = {ids: seen().map(function(g){ return g.getAttribute('data-row'); }), table: table(),
    csv: jcCsv(), json: JSON.parse(jcJson()), count: document.getElementById('jc-count').textContent,
    sort: document.getElementById('jc-sort').textContent, charts: charts()};
}
function select(key, value){ var s = document.querySelector('#jc-controls select[data-key="' + key + '"]');
  s.value = value; s.dispatchEvent(new Event('change')); }
function search(q){ var i = document.getElementById('jc-q'); i.value = q; i.dispatchEvent(new Event('input')); }
function reset(){ document.getElementById('jc-reset').click(); }
function byLabel(label){ return groups().filter(function(g){ return cellText(g.rows[0].cells[0], 0) === label; })[0]; }
R.labels = {}; groups().forEach(function(g){ R.labels[g.getAttribute('data-row')] = cellText(g.rows[0].cells[0], 0); });
R.states = {};
snap('all');
select('family', C.family); snap('family');
reset(); search(C.query); snap('search');
reset(); select('precision', 'float64'); select('origin', 'jaxcert (exact)'); snap('precision+source');
reset(); byLabel(C.pin).querySelector('button.pin').click(); select('family', C.family); snap('pinned');
var th = Array.prototype.filter.call(document.querySelectorAll('#board thead th'), function(h){
  return h.getAttribute('data-name') === 'Overall'; })[0];
th.click(); snap('sorted');
R.downloads = [];
jcDownload = function(name, type, text){ R.downloads.push([name, type, text]); };
Array.prototype.forEach.call(document.querySelectorAll('button[data-export]'), function(b){ b.click(); });
byLabel(C.pin).querySelector('button.pin').click(); reset();
R.opened = C.open.map(function(label){
  var id = byLabel(label).getAttribute('data-row');
  var p = Array.prototype.filter.call(document.querySelectorAll('svg.chart .pt'), function(q){
    return q.getAttribute('data-row') === id; })[0];
  p.dispatchEvent(new MouseEvent('click', {bubbles: true}));
  var drill = byLabel(label).querySelector('tr.drill');
  return {label: label, open: !drill.hidden && drill.getBoundingClientRect().height > 0,
          caption: Array.prototype.map.call(drill.querySelectorAll('caption'), function(c){ return c.innerText; })};
});
"""


def _guard(text: str) -> str:
    """What the CSV holds for a shown cell: itself, or with a leading ' where a spreadsheet would read a formula
    (docs/board.md, "Reading the board page")."""
    return "'" + text if re.match(r"[=+@\t\r-]", text) and not re.match(r"[-+]?[0-9.]", text) else text


def _export_problems(state: dict) -> list[str]:
    """Where the exports differ from the visible table (empty when they are equal)."""
    problems = []
    table = state["table"]
    rows = list(csv.reader(io.StringIO(state["csv"])))
    if rows != [[_guard(c) for c in r] for r in table]:
        problems.append(f"CSV: {len(rows) - 1} rows, the visible table {len(table) - 1}")
    got = state["json"]
    if got["columns"] != table[0] or [[r["shown"][c] for c in got["columns"]] for r in got["rows"]] != table[1:]:
        problems.append(f"JSON: {len(got['rows'])} rows, the visible table {len(table) - 1}")
    return problems


def _chart_problems(state: dict, board: dict, labels: dict) -> list[str]:
    """Where a chart's markers are not one per visible row that has the value (empty when they are)."""
    by_label = {r["label"]: r for r in board["rows"]}
    visible = set(state["ids"])
    problems = []
    for ch in state["charts"]:
        pts, left = ch["points"], set(ch["unplotted"])
        have = {i for i in visible if isinstance(by_label[labels[i]].get(ch["key"]), (int, float))}
        if len(pts) != len(set(pts)) or set(pts) != have:
            problems.append(f"{ch['key']}: markers {sorted(pts)}, visible rows with the value {sorted(have)}")
        if left != visible - have:
            problems.append(f"{ch['key']}: listed unplotted {sorted(left)}, visible without {sorted(visible - have)}")
    return problems


def _config(board: dict) -> dict:
    pub = next(r for r in board["rows"] if r["origin"] == "published" and r["family"] != "LJ")
    twin = next(r for r in board["rows"] if r.get("published_twin"))
    return {"family": "LJ", "query": "sevennet float32", "pin": pub["label"], "open": [pub["label"], twin["label"]]}


def _visible(board: dict, family=None, precision=None, origin=None, words=()) -> set[str]:
    """Labels a filter state shows, from the board's rows (family, precision, source, and every search word in the
    row's label, family, checkpoint, model name, training set, device or source)."""
    out = set()
    for r in board["rows"]:
        v = board_page._values(r)
        text = " ".join([r["label"], r.get("checkpoint") or "", str((r.get("model") or {}).get("name") or ""),
                         *v.values()]).lower()
        if (family is None or v["family"] == family) and (precision is None or v["precision"] == precision) \
                and (origin is None or v["origin"] == origin) and all(w in text for w in words):
            out.add(r["label"])
    return out


@pytestmark_browser
def test_filters_search_pins_sort_and_exports(made):
    board = made["board"]
    cfg = _config(board)
    res = _browser.run_in_browser(made["page"], _PAGE_JS.replace("__CONFIG__", json.dumps(cfg)))
    assert "error" not in res, res.get("error")
    assert res["fits"], res["overflowing"]
    st, labels = res["states"], res["labels"]

    def shown(name):
        return [labels[i] for i in st[name]["ids"]]

    n = len(board["rows"])
    assert shown("all") == [r["label"] for r in compare.sort_rows(board, "overall")]  # opens sorted by overall
    assert st["all"]["sort"] == "rows sorted by Overall (descending)" and st["all"]["count"] == f"{n} of {n} rows shown"
    assert set(shown("family")) == _visible(board, family=cfg["family"]) != set(shown("all"))
    assert set(shown("search")) == _visible(board, words=cfg["query"].split()) and shown("search")
    assert set(shown("precision+source")) == _visible(board, precision="float64", origin="jaxcert (exact)")
    # a pinned row stays shown whatever the filter, at the top; a sort keeps it there
    assert shown("pinned")[0] == cfg["pin"] and set(shown("pinned")) == _visible(board, family="LJ") | {cfg["pin"]}
    assert st["sorted"]["sort"] == "rows sorted by Overall (ascending)" and shown("sorted")[0] == cfg["pin"]
    rest = [r["label"] for r in compare.sort_rows(board, "overall", reverse=True)
            if r["label"] in set(shown("sorted")[1:])]
    assert shown("sorted")[1:] == rest
    for name, state in st.items():  # the exports are the visible table, in every state
        assert _export_problems(state) == [], name
        assert state["count"] == f"{len(state['ids'])} of {n} rows shown"
    # the buttons hand those files to the download
    assert [(d[0], d[1]) for d in res["downloads"]] == [("board.csv", "text/csv"), ("board.json", "application/json")]
    assert res["downloads"][0][2] == st["sorted"]["csv"] and json.loads(res["downloads"][1][2]) == st["sorted"]["json"]


@pytestmark_browser
def test_charts_have_one_marker_per_visible_row_and_a_click_opens_its_card(made):
    board = made["board"]
    cfg = _config(board)
    res = _browser.run_in_browser(made["page"], _PAGE_JS.replace("__CONFIG__", json.dumps(cfg)))
    assert "error" not in res, res.get("error")
    assert [c["key"] for c in res["states"]["all"]["charts"]] == [k for k, _, _ in board_page.CHARTS]
    for name, state in res["states"].items():
        assert _chart_problems(state, board, res["labels"]) == [], name
    assert all(c["points"] for c in res["states"]["all"]["charts"])  # each chart has markers here
    [pub, ours] = res["opened"]
    assert pub["open"] and "published card" in pub["caption"]
    assert ours["open"] and "model card" in ours["caption"] and any(c.startswith("beside the published board")
                                                                   for c in ours["caption"])


@pytestmark_browser
def test_the_checks_catch_exports_and_charts_that_ignore_the_filters(made):
    """The same checks on a page whose export takes every row and whose charts keep every marker: both fail, for
    those reasons (so the checks above can fail).  A label a spreadsheet would read as a formula is exported with
    a leading quote."""
    board = copy.deepcopy(made["board"])
    board["rows"][0]["label"] = "=1+1 " + board["rows"][0]["label"]
    page = compare.board_html(board, sort="overall")
    broken = page.replace("function jcShown(){return jcGroups().filter(function(g){return !g.hidden;});}",
                          "function jcShown(){return jcGroups();}")
    broken = broken.replace("p.style.display=(g&&!g.hidden)?'':'none';", "p.style.display='';")
    assert broken.count("function jcShown(){return jcGroups();}") == 1 and "p.style.display='';" in broken
    cfg = _config(board)
    res = _browser.run_in_browser(broken, _PAGE_JS.replace("__CONFIG__", json.dumps(cfg)))
    assert "error" not in res, res.get("error")
    assert _export_problems(res["states"]["all"]) == []  # nothing hidden yet: the same rows
    assert any(p.startswith("CSV: ") for p in _export_problems(res["states"]["family"]))
    assert any("markers" in p for p in _chart_problems(res["states"]["family"], board, res["labels"]))
    first = list(csv.reader(io.StringIO(res["states"]["all"]["csv"])))
    assert any(row[0].startswith("'=1+1 ") for row in first[1:])


_OFFLINE_JS = r"""
var s = document.querySelector('#jc-controls select[data-key="family"]');
s.value = s.options[1].value; s.dispatchEvent(new Event('change'));
R.count = document.getElementById('jc-count').textContent;
R.resources = performance.getEntriesByType('resource').map(function(e){ return e.name; });
R.loaders = Array.prototype.map.call(document.querySelectorAll('[src], link[href], object, embed, iframe'),
  function(e){ return e.outerHTML.slice(0, 120); });
"""


@pytestmark_browser
def test_the_page_works_offline_and_prints(made, tmp_path):
    """With every network request cut off the page loads nothing and its filters work; a page that pulled a script
    from a CDN would show here.  Printed (print media), it gives a PDF."""
    res = _browser.run_in_browser(made["page"], _OFFLINE_JS, extra_flags=_browser.NO_NETWORK)
    n = len(made["board"]["rows"])
    assert "error" not in res and res["resources"] == [] and res["loaders"] == [], res
    assert res["count"].endswith(f" of {n} rows shown") and not res["count"].startswith(f"{n} of")
    cdn = made["page"].replace("</head>", "<script src='https://cdn.example.org/plot.js'></script></head>")
    res = _browser.run_in_browser(cdn, _OFFLINE_JS, extra_flags=_browser.NO_NETWORK)
    assert res["loaders"] and "cdn.example.org" in res["loaders"][0]
    page = tmp_path / "index.html"
    page.write_text(made["page"], encoding="utf-8")
    pdf = _browser.print_pdf(page, tmp_path / "board.pdf", extra_flags=_browser.NO_NETWORK)
    assert pdf.startswith(b"%PDF") and len(re.findall(rb"/Type\s*/Page[^s]", pdf)) >= 1


def test_the_page_names_its_sort_and_every_export_column(made):
    """Every header carries the column's full name (the exports' column names), and the sorted header says so."""
    heads = re.findall(r"<th onclick='jcSort\(this\)'[^>]*>", made["page"])
    names = [re.search(r"data-name='([^']*)'", h).group(1) for h in heads]
    assert names[:4] == ["Model", "Source", "Overall", "Gates"] and names[4:4 + len(made["board"]["columns"])] == \
        made["board"]["columns"]
    assert [h for h in heads if "aria-sort=descending" in h] == [heads[2]]
