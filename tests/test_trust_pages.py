"""Hostile reports: no page jaxcert writes runs code from a report, and no terminal line obeys an escape sequence.

A report is data from anyone (a file mailed in, a board folder on a shared disk): every text field of it (the
model's name and info, probe names, messages, card and throughput fields, versions, dtype, file names) is
written into the comparison board (``jaxcert compare --html``), the ``jaxcert board`` page and the terminal.
The reports here are real (``jaxcert.certify`` of LJ on Si, one probe) with those fields replaced by three
injections, one per HTML context (a JavaScript string, a ``<script>`` element, an attribute), and by ESC / BEL
/ CSI sequences for the terminal (docs/compare.md, "Hostile reports").

Each page is checked structurally (parsed: every ``<script>`` is jaxcert's own, every ``on*`` attribute one of
its fixed calls, no link out of the page, the injections nowhere in the source as written and shown as text)
and, where headless Chromium is installed (tests/_browser.py), loaded, hovered and clicked everywhere, with
``document.title`` unchanged.
"""

from __future__ import annotations

import copy
import dataclasses
import html
import io
import json
from html.parser import HTMLParser
from pathlib import Path

import pytest

import jaxcert
from jaxcert.board import BoardResult, _page, main_progress
from jaxcert.cli import main
from jaxcert.core.inputs import InputError
from jaxcert.report import compare, published
from jaxcert.report.summary import printable
from jaxcert.specs import load_model
from tests import _browser

#: One injection per context: out of a JavaScript string in an event handler, out of the text into a script
#: element, out of a quoted attribute into a new event handler.
JS_STRING = 'x");document.title="PWNED";("'
SCRIPT = "</script><script>document.title='PWNED'</script>"
ATTRIBUTE = "' onmouseover='document.title=\"PWNED\""
PAYLOADS = {"js-string": JS_STRING, "script": SCRIPT, "attribute": ATTRIBUTE}
#: A file name is hostile too (a Linux file name may hold anything but / and NUL).
FILE_NAME = "r'\"><img src=x onerror=document.title='PWNED'>.json"
#: The only inline handlers the board has: fixed calls with no data in them.
FIXED_HANDLERS = {"jcSort(this)", "jcToggle(this)"}
#: Terminal: set the window title (OSC … BEL), clear the screen (CSI), 8-bit CSI, a bidirectional override.
TERMINAL = "\x1b]0;owned\x07\x1b[2J\x9b31m\u202e"


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    """A real report (LJ on Si, the parity probe): the object and its JSON document."""
    d = tmp_path_factory.mktemp("trust")
    report = jaxcert.certify(load_model("lj"), ["Si"], probes=["parity"])
    path = d / "clean.json"
    report.to_json(str(path))
    return {"report": report, "doc": json.loads(path.read_text(encoding="utf-8")), "dir": d, "path": str(path)}


def _hostile(doc: dict, text: str, crashed: bool) -> dict:
    """``doc`` with ``text`` in every text field a page or a terminal shows; ``crashed``: the probe raised, so its
    message is a reason line too."""
    d = copy.deepcopy(doc)
    probe = d["probes"][0]
    el = d["elements"][0]
    probe["name"] = text
    d["aggregate"]["sub_scores"] = {text: probe["score"]}
    d["aggregate"]["gates"] = {text: True}
    d["model"].update({"name": text, "source": text, "warning": text, text: text})
    d["dtype"] = text
    d["versions"].update({"jax": text, text: text + (" a" if crashed else " b")})
    d["machine"]["cpu_model"] = text
    d["card"].update({"training_data": text, "source": text, "device": text, "checkpoint": text, "precision": text,
                      "species": [text], "stated_sha256": text, "packages": {text: text},
                      "files": [{"role": text, "path": text, "bytes": 1, "sha256": text}]})
    d["throughput"] = {"device": text, "suite": {"evals_per_s": 10.0},
                       "md": {"atom_steps_per_s": 100.0, "n_atoms": 8, "element": text, "n_steps": text,
                              "error": text}}
    probe["message"] = text
    entry = probe["per_element"][el]
    entry.update({"reason": text, "gate_threshold": text})
    if crashed:
        probe["status"] = entry["status"] = "error"
    return d


def _write(folder, name: str, doc: dict) -> str:
    path = folder / name
    path.write_text(json.dumps(doc), encoding="utf-8")
    return str(path)


def _hostile_pair(clean, key: str) -> list[str]:
    """Two hostile reports of one injection (a crashed one and one whose file name is hostile), comparable."""
    folder = clean["dir"] / key
    folder.mkdir(exist_ok=True)
    text = PAYLOADS[key]
    return [_write(folder, "a.json", _hostile(clean["doc"], text, crashed=True)),
            _write(folder, FILE_NAME, _hostile(clean["doc"], text, crashed=False))]


# ------------------------------------------------------------------ the structural check
class _Scan(HTMLParser):
    """Start tags with their (decoded) attributes, the text of each script element, and the text shown."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.scripts: list[str] = []
        self.text: list[str] = []
        self._script = False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, attrs))
        if tag == "script":
            self._script = True
            self.scripts.append("")

    def handle_startendtag(self, tag, attrs):
        self.tags.append((tag, attrs))

    def handle_endtag(self, tag):
        if tag == "script":
            self._script = False

    def handle_data(self, data):
        if self._script:
            self.scripts[-1] += data
        else:
            self.text.append(data)


def _assert_inert(page: str, shown: list[str], scripts: tuple[str, ...] = (compare._JS,),
                  links: tuple[str, ...] = ()) -> None:
    """``page`` runs no code from data: each script element is one of ``scripts`` (without attributes), each
    ``on*`` attribute is one of the fixed handlers, links stay in the page (but for the addresses of ``links``,
    which jaxcert builds from checked parts), no element loads anything; the raw injections are nowhere in the
    source, and each text of ``shown`` is on the page as text (rendered, not dropped)."""
    scan = _Scan()
    scan.feed(page)
    scan.close()
    for text in [*PAYLOADS.values(), FILE_NAME]:
        assert text not in page, f"raw {text!r} in the page source"
    assert all(s in scripts for s in scan.scripts), [s[:200] for s in scan.scripts if s not in scripts]
    for tag, attrs in scan.tags:
        assert tag not in {"img", "iframe", "object", "embed", "base", "form", "link", "frame", "meta"} or (
            tag == "meta" and {a for a, _ in attrs} <= {"charset", "name", "content"}), (tag, attrs)
        if tag == "script":
            assert attrs == [], attrs
        for name, value in attrs:
            if name.startswith("on"):
                assert value in FIXED_HANDLERS, (tag, name, value)
            if name in ("href", "src", "action", "formaction", "xlink:href"):
                assert value is not None and (value.startswith("#") or (name == "href" and tag == "a"
                                                                          and value in links)), (tag, name, value)
            assert "PWNED" not in name, (tag, name)
    texts = "".join(scan.text)
    for text in shown:
        assert text in texts, f"{text!r} is not shown as text"


_CLICK_EVERYTHING = r"""
R.title_loaded = document.title;
// the export buttons hand their file to jcDownload: kept here instead of downloaded (a download can hold
// Chromium's --dump-dom), so the test reads what each button exported
R.exports = [];
if (typeof jcDownload === 'function') jcDownload = function(name, type, text){ R.exports.push([name, text]); };
var all = Array.prototype.slice.call(document.querySelectorAll('body *'));
R.handlers = [];
all.forEach(function(el){
  for (var i = 0; i < el.attributes.length; i++) {
    var a = el.attributes[i];
    if (a.name.indexOf('on') === 0) R.handlers.push(el.tagName.toLowerCase() + ' ' + a.name + '=' + a.value);
  }
});
R.scripts = Array.prototype.filter.call(document.scripts, function(s){ return s.text.indexOf('test-results') < 0; })
  .map(function(s){ return s.text; });  // the page's own scripts (the harness's one writes #test-results)
R.clicked = 0;
all.forEach(function(el){
  ['mouseover', 'mouseenter', 'focus'].forEach(function(t){
    el.dispatchEvent(new MouseEvent(t, {bubbles: true}));
  });
  // a link out of the page (a published row's source) would leave it: hovered, not followed
  if (el.tagName === 'A' && /^https:/.test(el.getAttribute('href') || '')) return;
  if (el.id !== 'test-results' && typeof el.click === 'function') { el.click(); R.clicked++; }
});
R.title = document.title;
"""


def _assert_inert_in_browser(page: str, scripts: tuple[str, ...] = (compare._JS,)) -> None:
    """Load ``page`` in headless Chromium, hover and click every element: the title stays, the scripts and
    inline handlers the browser sees are jaxcert's own."""
    if _browser.chromium() is None:
        return  # the structural check stands alone; tests/test_pages.py says where Chromium is missing
    r = _browser.run_in_browser(page, _CLICK_EVERYTHING)
    assert "error" not in r, r.get("error")
    assert r["clicked"] > 20
    assert r["title_loaded"] != "PWNED" and r["title"] != "PWNED", r
    assert all(s in scripts for s in r["scripts"]), r["scripts"]
    assert all(h.split("=", 1)[1] in FIXED_HANDLERS for h in r["handlers"]), r["handlers"]
    if "jcDownload" in page and "id=jc-controls" in page:  # both export buttons were clicked and gave their files
        assert sorted(name for name, _ in r["exports"]) == ["board.csv", "board.json"], r["exports"]
        json.loads(dict(r["exports"])["board.json"])


# ------------------------------------------------------------------ (a) pages
@pytest.mark.parametrize("key", list(PAYLOADS))
def test_compare_and_board_pages_run_no_code_from_a_hostile_report(clean, key, tmp_path):
    """``jaxcert compare --html`` and the ``jaxcert board`` page of two hostile reports: the probe link of each
    header and drill-down (once a JavaScript string in an onclick attribute) and every other field stay data."""
    text = PAYLOADS[key]
    files = _hostile_pair(clean, key)
    out = tmp_path / "board.html"
    assert main(["compare", *files, "--html", str(out)]) == 0
    page = out.read_text(encoding="utf-8")
    _assert_inert(page, shown=[text, FILE_NAME])
    _assert_inert_in_browser(page)

    board = compare.build_board(files)
    board["failed"] = [{"name": text, "spec": text, "stage": text, "reason": text}]
    full = _page(board, compare.board_html(board))
    assert "<h2 id=failed>" in full
    _assert_inert(full, shown=[text, FILE_NAME])
    _assert_inert_in_browser(full)
    empty = _page(board, None)  # no model produced a report: the list of failed models alone
    _assert_inert(empty, shown=[text], scripts=())


PUBLISHED = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "board" / "published_pescert.json"


def _hostile_published(text: str) -> dict:
    """The committed published file with ``text`` in every free-text field the page shows (the source's address
    parts are checked by the reader: :func:`test_a_published_file_with_a_hostile_source_is_refused`)."""
    doc = json.loads(PUBLISHED.read_text(encoding="utf-8"))
    doc["source"]["generated"] = text
    for m in doc["models"].values():
        m.update({"label": text, "family": text, "calculator": text, "packages": [text], "training_set": [text],
                  "gpu": {"name": text}, "twin": {"family": text, "checkpoint": text}})
        m["throughput"].update({"system": text, "integrator": text})
    return doc


@pytest.mark.parametrize("key", list(PAYLOADS))
def test_board_page_with_hostile_published_rows_runs_no_code(clean, key, tmp_path):
    """``--published``: the published rows' labels, families, calculator strings, package pins, training sets,
    hardware, protocol and date are data on the page (its cards, filters, search text, charts and exports); the one
    link out of the page is the source's address, built from its checked parts."""
    text = PAYLOADS[key]
    doc = _hostile_published(text)
    path = tmp_path / "published.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    board = compare.build_board(_hostile_pair(clean, key))
    published.add(board, published.load(path))
    board["failed"] = []
    page = _page(board, compare.board_html(board, sort="overall"))
    assert page.count("class='card published'") == len(doc["models"])
    _assert_inert(page, shown=[text, FILE_NAME], links=(published.source_url(doc["source"]),))
    _assert_inert_in_browser(page)


def test_a_published_file_with_a_hostile_source_is_refused(tmp_path, capsys):
    """The parts of the source's address (repository, path, commit) are checked: an injection there is refused
    with one line naming --published, the file and the field, before any model runs."""
    for field, value in (("repo", "x/y' onclick='a"), ("path", "javascript:alert(1)"), ("commit", SCRIPT)):
        doc = json.loads(PUBLISHED.read_text(encoding="utf-8"))
        doc["source"][field] = value
        path = tmp_path / f"{field}.json"
        path.write_text(json.dumps(doc), encoding="utf-8")
        out = tmp_path / f"out-{field}"
        assert main(["board", "--models", "lj", "--elements", "Si", "--probes", "parity", "--out", str(out),
                     "--published", str(path), "--no-throughput", "--quiet"]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "--published" in err and f"source.{field}" in err, err
        assert not (out / "lj.json").exists()


def test_lambda_board_of_hostile_structure_and_model_names_runs_no_code(clean, tmp_path):
    """A λ board: structure names, the model's name, method, dtype, skip reasons and versions are data."""
    lam = {"schema": "jaxcert-lambda/1", "model": SCRIPT, "method": ATTRIBUTE, "dtype": JS_STRING,
           "lambda": {t: 1e-3 for t in PAYLOADS.values()}, "mean": 1e-3, "max": 1e-3,
           "n_evals": {t: 1 for t in PAYLOADS.values()}, "skipped": {}, "gate_threshold": 1e-2, "gate": True,
           "versions": {"jaxcert": clean["doc"]["versions"]["jaxcert"], "jax": ATTRIBUTE}}
    other = {**lam, "lambda": {t: None for t in PAYLOADS.values()}, "skipped": {t: SCRIPT for t in PAYLOADS.values()}}
    files = [_write(tmp_path, "lam.json", lam), _write(tmp_path, FILE_NAME, other)]
    out = tmp_path / "lam.html"
    assert main(["compare", *files, "--html", str(out)]) == 0
    page = out.read_text(encoding="utf-8")
    _assert_inert(page, shown=[*PAYLOADS.values(), FILE_NAME])
    _assert_inert_in_browser(page)


def test_a_hostile_element_symbol_is_refused_naming_the_field(clean, tmp_path, capsys):
    """Elements are checked against the periodic table: an injection there is refused with one line naming the
    file and the field, and no page is written."""
    doc = copy.deepcopy(clean["doc"])
    doc["elements"] = [SCRIPT]
    path = _write(tmp_path, "el.json", doc)
    out = tmp_path / "el.html"
    assert main(["compare", path, "--html", str(out)]) == 2
    err = capsys.readouterr().err
    assert "el.json" in err and "elements[0]" in err and len(err.strip().splitlines()) == 1
    assert not out.exists()
    with pytest.raises(InputError, match=r"elements\[0\]"):
        compare.build_board([path])


def test_certify_page_of_a_hostile_model_runs_no_code(clean):
    """The certify --html page (jaxcert/report/html.py): the model's name (page title, heading), a probe's
    crash message and failure reason, versions and machine fields are escaped text, in the page and its SVG."""
    report = _hostile_report(clean["report"], SCRIPT + ATTRIBUTE + JS_STRING)
    page = report.to_html()
    _assert_inert(page, shown=[SCRIPT + ATTRIBUTE + JS_STRING], scripts=())
    _assert_inert_in_browser(page, scripts=())


def test_controls_benchmark_page_escapes_model_specs_and_reasons():
    """The controls page (jaxcert/controls/benchmark/html.py): a model spec, a status and a reason in its tables
    were written as they are; now every string cell is escaped and only jaxcert's own formatted cells pass."""
    from jaxcert.controls.benchmark import html as page_html

    result = {"models": {SCRIPT: {"status": "error", "kind": ATTRIBUTE, "name": JS_STRING, "reason": SCRIPT}},
              "headline": {"eos_delta_meV_per_atom": {SCRIPT: 41.38}, ATTRIBUTE: {SCRIPT: {"K": JS_STRING}}},
              "sections": {"hull": {"status": SCRIPT, "compares": ATTRIBUTE, "protocol": JS_STRING}}}
    page = page_html.render(result)
    _assert_inert(page, shown=[SCRIPT, ATTRIBUTE, JS_STRING], scripts=())
    assert "41.38<" in page  # a number the page formats is still a plain cell


# ------------------------------------------------------------------ (b) terminal
def _hostile_report(report, text: str):
    """``report`` with ``text`` in the model's name and warning, and its probe crashed with ``text`` as the
    message and a model note."""
    o = copy.copy(report.outcomes[0])
    o.status = ["error"] * len(o.elements)
    o.message = text
    o.details = [dict(d, model_notes=[text]) for d in o.details]
    o._details_json = None
    model = dict(report.model, name=text, warning=text)
    return dataclasses.replace(report, model=model, outcomes=[o], versions=dict(report.versions, jax=text),
                               machine=dict(report.machine, cpu_model=text))


def _assert_no_control(text: str) -> None:
    bad = sorted({c for c in text if (ord(c) < 32 and c not in "\n") or 0x7f <= ord(c) <= 0x9f
                  or c == "\u202e"})
    assert not bad, f"control characters {bad!r} reach the terminal"


def test_report_table_shows_escape_sequences_instead_of_obeying_them(clean):
    text = "lj" + TERMINAL
    out = _hostile_report(clean["report"], text).table(explain=True)
    _assert_no_control(out)
    assert "model warning: lj\\x1b]0;owned\\x07\\x1b[2J\\x9b31m\\u202e" in out  # shown, so the user sees it
    assert "model note: lj\\x1b]0;owned" in out and "crashed: lj\\x1b]0;owned" in " ".join(out.split())


def test_compare_terminal_shows_escape_sequences_instead_of_obeying_them(clean, tmp_path, capsys):
    """Model names, probe names, messages, versions, dtype and file names printed by ``jaxcert compare``."""
    text = "lj" + TERMINAL
    files = [_write(tmp_path, name, _hostile(clean["doc"], text, crashed=crashed))
             for name, crashed in (("a.json", True), ("b" + TERMINAL + ".json", False))]
    for layout in ("models", "probes"):
        assert main(["compare", *files, "--layout", layout]) == 0
        captured = capsys.readouterr()
        _assert_no_control(captured.out + captured.err)
        assert "lj\\x1b]0;owned\\x07\\x1b[2J" in captured.out
        assert "b\\x1b]0;owned" in captured.out  # the file name that tells the two rows apart
        assert "why (gate profile" in captured.out and "crashed: lj\\x1b" in " ".join(captured.out.split())
    # aligned by intersection: the dropped probes of each file are listed
    other = _hostile(clean["doc"], "parity" + TERMINAL, crashed=False)
    both = copy.deepcopy(other)
    both["probes"].append(copy.deepcopy(clean["doc"]["probes"][0]))
    files = [_write(tmp_path, "c.json", other), _write(tmp_path, "d" + TERMINAL + ".json", both)]
    assert main(["compare", *files, "--align", "intersection"]) == 0
    captured = capsys.readouterr()
    _assert_no_control(captured.out + captured.err)
    assert "dropped from" in captured.out and "d\\x1b]0;owned" in captured.out


def test_board_lines_show_escape_sequences_instead_of_obeying_them(monkeypatch, tmp_path, capsys):
    """``jaxcert board``: the line per finished model and the failed-model lines (a model's exception)."""
    stream = io.StringIO()
    main_progress({"status": "failed", "name": "m" + TERMINAL, "stage": "load", "reason": TERMINAL, "wall_s": 1.0},
                  1, 2, stream)
    main_progress({"status": "kept", "name": "m", "refreshed": [TERMINAL], "wall_s": 1.0}, 2, 2, stream)
    _assert_no_control(stream.getvalue().replace("\n", ""))
    assert "[1/2] m\\x1b]0;owned\\x07" in stream.getvalue()

    failed = {"name": "m", "spec": "mod:" + TERMINAL, "stage": "load", "reason": "ImportError: " + TERMINAL}

    def fake_run_board(*args, **kwargs):
        return BoardResult(board={"rows": [], "failed": [failed]}, models=[{"name": "m", "status": "failed"}],
                           json_path=str(tmp_path / "board.json"), html_path=str(tmp_path / "index.html"))

    monkeypatch.setattr("jaxcert.cli.board.run_board", fake_run_board)
    main(["board", "--models", "lj", "--elements", "Si", "--out", str(tmp_path / "b"), "--quiet"])
    captured = capsys.readouterr()
    _assert_no_control(captured.out + captured.err)
    assert "failed: m (mod:\\x1b]0;owned" in captured.out


def test_printable_escapes_every_control_character_visibly_and_keeps_text():
    assert printable("Cu₂O · ±1.0 Å\tok\n") == "Cu₂O · ±1.0 Å\tok\n"
    assert printable("a\x1b[2Jb\x07\x7f\x9b\u202e") == "a\\x1b[2Jb\\x07\\x7f\\x9b\\u202e"
    assert printable("a\nb\tc\r", keep="") == "a\\x0ab\\x09c\\x0d"
    assert printable(printable(TERMINAL)) == printable(TERMINAL)
    assert all(printable(chr(c)) != chr(c) for c in [*range(0, 9), *range(11, 32), *range(0x7f, 0xa0)])
    assert html.unescape(printable("&lt;")) == "<"  # nothing but control characters is touched
