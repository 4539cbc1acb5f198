"""``jaxcert board`` (docs/board.md): many models on one board, resumable per model and per probe, on Dask,
with model cards and throughput in every report.

Two small models (lj, emt) on two elements and two cheap probes: the board works from an empty folder, a
model that cannot load is a row with its reason, a rerun recomputes nothing finished (file mtimes and the
per-model counters), a run stopped after its first model resumes from there, a file finished with fewer
probes is completed probe by probe, and ``--workers 2`` (a local dask cluster) writes the same board as
the serial run, apart from wall times and throughput.
"""

from __future__ import annotations

import json
import statistics

import pytest

from jaxcert.board import BoardEntry, parse_models, run_board
from jaxcert.core.inputs import InputError
from jaxcert.probes import throughput
from jaxcert.report import naming
from jaxcert.report import schema as report_schema
from tests._stable import stable as _stable

ELEMENTS = "Cu,Al"
PROBES = "conservativeness,equivariance"
ARGS = ["--elements", ELEMENTS, "--probes", PROBES]



def _read(path):
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


@pytest.fixture(scope="module")
def serial(tmp_path_factory):
    """lj, emt and a model that cannot load, serially, throughput measured (the CLI's default)."""
    from jaxcert.cli import main

    out = tmp_path_factory.mktemp("board") / "b"
    code = main(["board", "--models", "lj,emt,nequix:/no/such/file.nqx", *ARGS, "--out", str(out)])
    return out, code


def test_board_from_an_empty_folder_with_cards_throughput_and_a_failed_row(serial, capsys):
    out, code = serial
    assert code == 1  # a model did not run
    board = _read(out / "board.json")
    for row, name in zip(board["rows"], ("lj", "emt"), strict=True):  # family · precision (an analytic model)
        doc = _read(out / f"{name}.json")
        assert row["label"] == naming.identity(doc["model"], doc["card"], "float64").label()
        assert row["label"] == f"{naming.FAMILY_NAMES[name]}{naming.SEPARATOR}float64"
    assert board["columns"] == PROBES.split(",") and board["elements"] == ELEMENTS.split(",")
    [failed] = board["failed"]
    assert failed["spec"] == "nequix:/no/such/file.nqx" and failed["stage"] == "load"
    assert "no Nequix checkpoint" in failed["reason"]
    for row in board["rows"]:
        card, rate = row["card"], row["throughput"]
        assert card["parameters"] > 0 and card["device"] and card["dtype"] == "float64"
        assert card["training_data"] is None  # analytic models state none; nothing is invented
        assert rate["suite"]["evals_per_s"] > 0 and rate["suite"]["n_evals"] == row["n_evals"]
        assert rate["hardware"]["device"] == rate["device"] == card["device"] and rate["hardware"]["cpu_cores"] >= 1
        mem = rate["peak_memory"]
        assert mem["host_rss_bytes"] > 10 * 2**20 and mem["host_scope"]  # the resident high-water mark, with scope
        report_schema.load(out / row["file"])  # every model file passes the reader's schema
        comp = row["compilation"]  # what the run compiled (jaxcert.core.compilation): these ran in this process
        assert comp["traces"] > 0 and comp["compile_s"] >= 0 and comp == _read(out / row["file"])["compilation"]
    assert board["rows"][1]["card"]["species"][:2] == ["H", "C"]  # emt's parameterised elements
    # LJ runs the published board's NaCl cell as it measures it; EMT has no Na or Cl: the reason, and the rate on
    # its own first element instead (in its card only: another cell, not comparable)
    nacl = board["rows"][0]["throughput"]["nacl"]
    assert (nacl["n_atoms"], nacl["warmup_steps"], nacl["timed_steps"], nacl["n_repeats"]) == (
        100, throughput.NACL_WARMUP_STEPS, throughput.NACL_TIMED_STEPS, throughput.NACL_REPEATS)
    reps = nacl["repeat_atom_steps_per_s"]
    assert len(reps) == 3 and nacl["atom_steps_per_s"] == pytest.approx(statistics.fmean(reps))
    assert nacl["atom_steps_per_s_stdev"] == pytest.approx(statistics.stdev(reps))
    assert abs(nacl["energy_drift_eV_per_atom"]) < 1e-3 and board["rows"][0]["throughput"]["md"] is None
    assert board["rows"][0]["atom_steps_per_s"] == nacl["atom_steps_per_s"]
    emt = board["rows"][1]["throughput"]
    assert emt["nacl"]["error"] == "the model has no parameters for Na, Cl"
    assert board["rows"][1]["atom_steps_per_s"] is None
    md = emt["md"]
    assert md["element"] == "Cu" and 64 <= md["n_atoms"] <= 150 and md["atom_steps_per_s"] > 0
    assert abs(md["energy_drift_eV_per_atom"]) < 1e-3  # a sane NVE run
    page = (out / "index.html").read_text()
    assert page.count("<table class=card>") == 2 and "id=failed" in page and "no Nequix checkpoint" in page
    assert "Throughput and model cards" in page


def test_rerun_recomputes_nothing_finished(serial):
    out, _ = serial
    files = [out / "lj.json", out / "emt.json"]
    before = [f.stat().st_mtime_ns for f in files]
    seen = []
    res = run_board("lj,emt", ELEMENTS, out, probes=PROBES, on_model=seen.append)
    assert [s["status"] for s in seen] == ["kept", "kept"] and all(s["computed"] == [] for s in seen)
    assert [f.stat().st_mtime_ns for f in files] == before
    assert res.failed == [] and res.gates_ok


def test_workers_2_give_the_serial_board(serial, tmp_path):
    pytest.importorskip("distributed")
    out, _ = serial
    res = run_board("lj,emt", ELEMENTS, tmp_path / "w", probes=PROBES, workers=2, throughput=False)
    assert [s["status"] for s in res.models] == ["ok", "ok"]
    a, b = _read(out / "board.json"), _read(tmp_path / "w" / "board.json")
    a["failed"] = []
    assert json.dumps(_stable(a), sort_keys=True) == json.dumps(_stable(b), sort_keys=True)
    for name in ("lj", "emt"):  # the model files too, probe by probe
        assert _stable(_read(out / f"{name}.json")) == _stable(_read(tmp_path / "w" / f"{name}.json"))


def test_stopped_after_the_first_model_resumes_from_there_and_probes_resume(tmp_path):
    """A TOML board (lj, and lj with a curl defect) stopped after its first model; the rerun keeps that model's
    file untouched and runs only the second.  Then one more probe: each file is completed by that probe only."""
    toml = tmp_path / "models.toml"
    toml.write_text('[[models]]\nspec = "lj"\n\n[[models]]\nspec = "lj"\nname = "lj-curl"\ndefects = ["curl=1.0"]\n')
    out = tmp_path / "b"

    def stop(status):
        raise KeyboardInterrupt("killed after the first model")

    with pytest.raises(KeyboardInterrupt):
        run_board(str(toml), "Si", out, probes="conservativeness", throughput=False, on_model=stop)
    assert (out / "lj.json").exists() and not (out / "lj-curl.json").exists() and not (out / "board.json").exists()
    mtime = (out / "lj.json").stat().st_mtime_ns
    res = run_board(str(toml), "Si", out, probes="conservativeness", throughput=False)
    assert [(s["name"], s["status"], s["computed"]) for s in res.models] == [
        ("lj", "kept", []), ("lj-curl", "ok", ["conservativeness"])]
    assert (out / "lj.json").stat().st_mtime_ns == mtime
    assert not res.gates_ok  # the curl defect fails the conservativeness gate
    res = run_board(str(toml), "Si", out, probes="conservativeness,equivariance", throughput=False)
    assert [(s["kept"], s["computed"]) for s in res.models] == [(["conservativeness"], ["equivariance"])] * 2
    assert [r["label"] for r in res.board["rows"]] == ["LJ · float64", "LJ · +curl(1) · float64"]


def test_exit_codes_and_bad_input(tmp_path, capsys):
    from jaxcert.cli import main

    assert main(["board", "--models", "lj,ejt", *ARGS, "--out", str(tmp_path / "x")]) == 2
    assert "--models: unknown model 'ejt'" in capsys.readouterr().err
    assert main(["board", "--models", "lj", *ARGS, "--out", str(tmp_path / "x"), "--workers", "0"]) == 2
    assert "--workers" in capsys.readouterr().err
    assert main(["board", "--models", "lj,lj", *ARGS, "--out", str(tmp_path / "x")]) == 2
    assert "two models would write lj.json" in capsys.readouterr().err
    bad = tmp_path / "m.toml"
    bad.write_text('[[models]]\nspec = "lj"\nbatch = 3\n')
    assert main(["board", "--models", str(bad), *ARGS, "--out", str(tmp_path / "x")]) == 2
    assert "models[0]: unknown key 'batch'" in capsys.readouterr().err
    assert not (tmp_path / "x" / "lj.json").exists()  # nothing ran


def test_gate_exit_codes(tmp_path, capsys):
    from jaxcert.cli import main

    toml = tmp_path / "m.toml"
    toml.write_text('[[models]]\nspec = "lj"\nname = "lj-curl"\ndefects = ["curl=1.0"]\n')
    argv = ["board", "--models", str(toml), "--elements", "Si", "--probes", "conservativeness", "--out",
            str(tmp_path / "b"), "--no-throughput"]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "gates failed: lj-curl (exit 1)" in err
    assert "[1/1] lj-curl conservativeness · elapsed" in err  # the serial run shows its probes as they run
    assert main([*argv, "--no-fail-on-gate"]) == 0  # the finished file is kept; only the exit code changes
    assert "conservativeness · elapsed" not in capsys.readouterr().err  # nothing ran, nothing shown
    assert main([*argv, "--no-fail-on-gate", "--probes", "conservativeness,parity", "--quiet"]) == 0
    err = capsys.readouterr().err
    assert "parity · elapsed" not in err and "1 probes computed, 1 kept" in err  # --quiet: the model's line only
    assert main([*argv, "--no-fail-on-gate", "--seed", "1"]) == 1  # the file is another run's: a failed row
    [failed] = _read(tmp_path / "b" / "board.json")["failed"]
    assert failed["stage"] == "resume" and "seed = 0, this run has 1" in failed["reason"]


def test_model_names_and_specs():
    assert [e.name for e in parse_models("lj, nequix:/w/nequix-mp-1.nqx@float32")] == [
        "lj", "nequix_nequix-mp-1.nqx@float32"]
    assert parse_models([BoardEntry("lj", "mine")])[0].name == "mine"
    with pytest.raises(InputError, match="an empty entry names nothing"):
        parse_models(" , ")


_PAGE_JS = r"""
var f = document.getElementById('failed');
R.failed = f ? f.nextElementSibling.innerText : null;
R.card_rows = document.querySelectorAll('#cards tr').length - 1;
R.cards_in_drills = {};  // by the row's label: the header clicks above have reordered the rows
Array.prototype.forEach.call(document.querySelectorAll('#board tbody.row'), function(tb){
  var label = tb.querySelector('tr.main td').textContent.replace('\u25b8', '').replace('\u25be', '').trim();
  var c = tb.querySelector('tr.drill table.card'); R.cards_in_drills[label] = c ? c.innerText : null; });
"""


def test_board_page_in_a_browser(serial):
    """The page ``jaxcert board`` writes, in headless Chromium at 1,400 px: it renders once, fits, sorts by
    every control including the two throughput columns, opens a drill-down that holds the model card, and
    lists the model that did not run."""
    from jaxcert.report import compare
    from tests import _browser
    from tests.test_pages import _board_js, _check_board

    if _browser.chromium() is None:
        pytest.skip(_browser.SKIP_REASON)
    out, _ = serial
    res = run_board("lj,emt,nequix:/no/such/file.nqx", ELEMENTS, out, probes=PROBES)  # other tests rewrite it
    assert [s["status"] for s in res.models] == ["kept", "kept", "failed"]
    board = _read(out / "board.json")
    page = (out / "index.html").read_text()
    # the page opens sorted by the overall score (its header says so): Model first, so Overall's first click sorts
    sorts = ["Model", "Overall", "conserv", "NaCl atom·steps/s", "Evals/s"]
    res = _browser.run_in_browser(page, _board_js(board, sorts) + _PAGE_JS)
    initial = [r["label"] for r in compare.sort_rows(board, "overall")]
    _check_board(board, res, initial)  # fits, title once, sorting, drill-down, sticky model column

    def order(key, reverse=False):
        return [r["label"] for r in compare.sort_rows(board, key, reverse)]

    for head, key in (("NaCl atom·steps/s", "atom_steps_per_s"), ("Evals/s", "evals_per_s")):
        assert res["sorts"][head]["first"] == order(key) and res["sorts"][head]["second"] == order(key, True)
        assert res["sorts"][head]["dirs"] == ["descending", "ascending"]
    assert "nequix:/no/such/file.nqx" in res["failed"] and "no Nequix checkpoint" in res["failed"]
    assert res["card_rows"] == 2
    assert sorted(res["cards_in_drills"]) == sorted(r["label"] for r in board["rows"])
    for row in board["rows"]:
        card = res["cards_in_drills"][row["label"]]
        assert card is not None and "model card" in card and str(row["card"]["parameters"]) in card
        nacl = row["throughput"]["nacl"]
        assert (f"{row['atom_steps_per_s']:.3g} atom·steps/s" if row["atom_steps_per_s"] is not None
                else f"not measured: {nacl['error']}") in card
        assert f"{row['compilation']['compiles']} XLA programs compiled" in card


def test_a_resumed_model_keeps_its_nve_measurement(serial, tmp_path):
    """One more probe on a finished model: that probe is computed and the NaCl rate measured before is kept
    (marked), not measured again; the suite rate is recomputed over all probes."""
    import shutil

    out, _ = serial
    b = tmp_path / "b"
    b.mkdir()
    shutil.copy(out / "lj.json", b / "lj.json")
    before = _read(b / "lj.json")["throughput"]["nacl"]
    res = run_board("lj", ELEMENTS, b, probes=PROBES + ",parity")
    assert [(s["status"], s["computed"]) for s in res.models] == [("ok", ["parity"])]
    rates = _read(b / "lj.json")["throughput"]
    nacl = rates["nacl"]
    assert nacl.pop("kept") is True and nacl == before
    assert rates["suite"]["probes"] == [*PROBES.split(","), "parity"]


def test_a_kept_report_gets_its_packages_training_statement_and_nothing_else(serial, tmp_path, monkeypatch):
    """A complete file written before the model card recorded the package's training-set statement (a SevenNet
    file converted by an older jaxcert) is kept, nothing recomputed, and gets the statement as the model
    states it now, in ``model`` and ``card``; every other byte of the report stays. A stale statement the
    model no longer makes is removed the same way."""
    import shutil

    import jaxcert.specs

    out, _ = serial
    b = tmp_path / "b"
    b.mkdir()
    shutil.copy(out / "lj.json", b / "lj.json")
    before = _read(b / "lj.json")
    real = jaxcert.specs.load_model
    stated = "a package's own words about its training set"

    def stating(spec, *a, **k):
        m = real(spec, *a, **k)
        return m.replace(info=(*m.info, ("training_data", stated)))

    monkeypatch.setattr(jaxcert.specs, "load_model", stating)
    res = run_board("lj", ELEMENTS, b, probes=PROBES)
    [st] = res.models
    assert st["status"] == "kept" and st["computed"] == [] and st["refreshed"] == ["training_data"]
    after = _read(b / "lj.json")
    assert after["model"]["training_data"] == stated and after["card"]["training_data"] == stated
    for doc in (before, after):
        doc["model"].pop("training_data", None)
        doc["card"].pop("training_data", None)
    assert after == before  # nothing computed or measured changed

    monkeypatch.setattr(jaxcert.specs, "load_model", real)  # the statement withdrawn: removed again
    [st] = run_board("lj", ELEMENTS, b, probes=PROBES).models
    assert st["refreshed"] == ["training_data"]
    again = _read(b / "lj.json")
    assert "training_data" not in again["model"] and again["card"]["training_data"] is None
    [st] = run_board("lj", ELEMENTS, b, probes=PROBES).models  # up to date: the file is not written
    assert st["status"] == "kept" and "refreshed" not in st

def test_a_toml_entry_with_its_own_dtype(tmp_path):
    """``dtype`` in a TOML entry: that model runs on structures of that dtype, the others on --dtype; a bad
    value is refused before anything runs."""
    toml = tmp_path / "m.toml"
    toml.write_text('[[models]]\nspec = "lj"\n\n[[models]]\nspec = "lj"\nname = "lj-float32"\ndtype = "float32"\n')
    res = run_board(str(toml), "Si", tmp_path / "b", probes="equivariance", throughput=False)
    assert [(r["label"], r["dtype"]) for r in res.board["rows"]] == [("LJ · float64", "float64"),
                                                                      ("LJ · float32", "float32")]
    assert any("precisions differ" in n for n in res.board["notes"])
    bad = tmp_path / "bad.toml"
    bad.write_text('[[models]]\nspec = "lj"\ndtype = "float16"\n')
    with pytest.raises(InputError, match=r"models\[0\]\.dtype: got 'float16'"):
        run_board(str(bad), "Si", tmp_path / "c", probes="equivariance", throughput=False)
