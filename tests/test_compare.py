"""The comparison board (jaxcert/report/compare.py, `jaxcert compare`, docs/compare.md) on real small reports."""

import html
import json
import re

import numpy as np
import pytest

import jaxcert
from jaxcert.cli import main
from jaxcert.core.inputs import InputError
from jaxcert.probes.suite import combine_scores
from jaxcert.report import compare, explain, gates, naming
from jaxcert.report import schema as report_schema
from tests._tamper import DELETE, set_field
from tests.test_report import cheap_reports


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Report JSON files: the cheap certification reports plus two λ reports on two molecules."""
    from jaxcert.models import defects
    from jaxcert.probes import substrates

    d = tmp_path_factory.mktemp("reports")
    out = {}
    for name, rep in cheap_reports().items():
        out[name] = str(d / f"{name}.json")
        rep.to_json(out[name])
    structures = substrates.lambda_structures()
    lj = jaxcert.models.get("lj")
    for name, model, keys in (("lam_clean", lj, ("H2O", "NH3")), ("lam_curl", defects.curl(lj, 0.3), ("H2O", "NH3")),
                              ("lam_other", lj, ("H2O", "C2H2"))):  # 4 atoms as NH3: lam_clean's program
        res = jaxcert.lam(model, structures={k: structures[k] for k in keys})
        out[name] = str(d / f"{name}.json")
        with open(out[name], "w") as fh:
            json.dump(res.to_dict(), fh, allow_nan=False)
    out["dir"] = d
    return out


def _read(path):
    with open(path) as fh:
        return json.load(fh)


def _variant(files, name, new_name, edit):
    """A copy of report ``name`` with ``edit(dict)`` applied (e.g. written by another version)."""
    d = _read(files[name])
    edit(d)
    path = files["dir"] / f"{new_name}.json"
    path.write_text(json.dumps(d))
    return str(path)


def _table_rows(text):
    """(label, cells) of the board's data rows, in printed order."""
    lines = [ln for ln in text.splitlines() if ln.startswith("| ")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    rows = [[c.strip() for c in ln.strip("|").split("|")] for ln in lines[1:]]
    return header, rows


# ------------------------------------------------------------------ cells
def test_cells_are_the_input_values(files):
    paths = [files["clean"], files["curl"], files["c_si"]]
    board = compare.build_board(paths)
    assert board["kind"] == "report" and board["columns"] == ["equivariance", "stress_consistency"]
    assert board["elements"] == ["Si", "C"] and board["dropped"] == []
    for row, path in zip(board["rows"], paths, strict=True):
        src = _read(path)
        assert row["file"] == path and not row["recomputed"]
        assert row["overall"] == src["aggregate"]["overall"] and row["n_evals"] == src["aggregate"]["n_evals"]
        assert row["dtype"] == src["dtype"] and row["versions"] == src["versions"]
        assert (row["gates_passed"], row["gates_total"]) == (src["aggregate"]["gates_passed"],
                                                             src["aggregate"]["gates_total"])
        for p in src["probes"]:
            cell = row["cells"][p["name"]]
            assert (cell["score"], cell["gate"], cell["defect"], cell["n_evals"]) == (
                p["score"], p["gate"], p["defect"], p["n_evals"])
            for el, e in p["per_element"].items():
                assert (cell["per_element"][el]["score"], cell["per_element"][el]["gate"]) == (e["score"], e["gate"])
    labels = [r["label"] for r in board["rows"]]
    curl = _read(files["curl"])  # named family · checkpoint · precision (docs/board.md, "Names"): LJ · +curl(0.3) · …
    who = naming.identity(curl["model"], curl.get("card"), gates.model_precision(curl["model"], curl.get("card"),
                                                                                 curl["dtype"]))
    assert len(set(labels)) == 3 and labels[1] == who.label() == board["rows"][1]["label"]
    assert who.family == naming.FAMILY_NAMES["lj"] and curl["model"]["name"].partition("+")[2] in who.checkpoint
    # the curl model fails the equivariance gate on the board as in its report
    assert board["rows"][1]["cells"]["equivariance"]["gate"] is False


def test_board_json_is_strict_and_reproduces_the_board(files, tmp_path, capsys):
    out = tmp_path / "board.json"
    assert main(["compare", files["clean"], files["curl"], "--json", str(out)]) == 0
    text = out.read_text()
    d = json.loads(text, parse_constant=lambda c: pytest.fail(f"non-strict JSON constant {c}"))
    assert d["schema"] == "jaxcert-board/1"
    assert d == compare.build_board([files["clean"], files["curl"]])


# ------------------------------------------------------------------ sorting
@pytest.mark.parametrize("key", ["overall", "wall", "model", "equivariance"])
def test_terminal_board_is_sorted_by_the_requested_column(files, capsys, key):
    paths = [files["clean"], files["curl"], files["c_si"]]
    assert main(["compare", *paths, "--sort", key, "--layout", "models"]) == 0
    header, rows = _table_rows(capsys.readouterr().out)
    board = compare.build_board(paths)
    by_label = {r["label"]: r for r in board["rows"]}
    printed = [by_label[r[0]] for r in rows]
    value = {"overall": lambda r: r["overall"], "wall": lambda r: r["wall_time_s"],
             "model": lambda r: r["label"].lower(), "equivariance": lambda r: r["cells"]["equivariance"]["score"]}[key]
    values = [value(r) for r in printed]
    descending = key in ("overall", "equivariance")
    assert values == sorted(values, reverse=descending)
    assert len(printed) == 3
    out = _flat(compare.board_table(board, sort=key))
    assert all(_flat(explain.explain(c)) in out for c in board["columns"])  # every probe column is explained
    # transposed (probes as rows), the models are the columns, in the same order
    assert main(["compare", *paths, "--sort", key, "--layout", "probes"]) == 0
    t_header, t_rows = _table_rows(capsys.readouterr().out)
    assert t_header[1:] == [r[0] for r in rows]
    assert [r[0] for r in t_rows][:3] == ["Overall", "Gates", *board["columns"][:1]]
    # --reverse flips the order (ties keep file order either way)
    assert main(["compare", *paths, "--sort", key, "--reverse", "--layout", "models"]) == 0
    _, again = _table_rows(capsys.readouterr().out)
    rev = [value(by_label[r[0]]) for r in again]
    assert rev == sorted(values, reverse=not descending)
    col = header.index(explain.short_name(key)) if key == "equivariance" else None
    if col is not None:  # the printed cell is the input score with its gate mark
        for r in rows:
            c = by_label[r[0]]["cells"]["equivariance"]
            assert r[col] == f"{c['score']:.3f} {'✓' if c['gate'] else '✗'}"


def test_auto_layout_transposes_a_board_too_wide_for_the_terminal(files):
    board = compare.build_board([files["clean"], files["curl"]])
    wide, narrow = compare.board_table(board, width=1000), compare.board_table(board, width=60)
    assert _table_rows(wide)[0][0] == "Model" and _table_rows(narrow)[0][0] == "Probe"
    assert max(len(ln) for ln in wide.splitlines() if ln.startswith("|")) > 60
    assert _table_rows(narrow)[0][1:] == [r["label"] for r in board["rows"]]


def test_unknown_sort_column_is_an_input_error(files, capsys):
    assert main(["compare", files["clean"], "--sort", "bogus"]) == 2
    err = capsys.readouterr().err
    assert "--sort" in err and "overall" in err and len(err.strip().splitlines()) == 1


# ------------------------------------------------------------------ html
def test_html_board_is_self_contained_sortable_and_explained(files, tmp_path, capsys):
    page_path = tmp_path / "board.html"
    assert main(["compare", files["clean"], files["curl"], "--html", str(page_path), "--sort", "overall"]) == 0
    page = page_path.read_text(encoding="utf-8")
    assert not re.search(r"""(?:src|href)\s*=\s*['"]?\s*(?:https?:)?//""", page, re.I)
    assert "<link" not in page and not re.search(r"<script[^>]+src", page)
    script = re.findall(r"<script>(.*?)</script>", page, re.S)
    assert len(script) == 1 and "function jcSort(th)" in script[0] and "function jcToggle(b)" in script[0]
    board = page[page.index("<table id=board"):page.index("<h2>Per probe")]
    heads = re.findall(r"<th [^>]*>", board.split("</thead>")[0])
    assert heads and all("onclick='jcSort(this)'" in h for h in heads)
    d = compare.build_board([files["clean"], files["curl"]])
    main_rows = re.findall(r"<tr class=main>(.*?)</tr>", board, re.S)
    assert len(main_rows) == 2 and board.count("<tr class=drill hidden>") == 2
    for row in d["rows"]:
        tr = next(t for t in main_rows if f"> {row['label']}</td>" in t)
        for cell in row["cells"].values():
            mark, cls = ("✓", "pass") if cell["gate"] else ("✗", "fail")
            value = re.escape(repr(float(cell["score"])))
            assert re.search(rf"data-v='{value}' [^>]*>{cell['score']:.3f} <span class={cls}>{mark}</span>", tr)
    for name in d["columns"]:  # every probe column links its explanation and per-element drill-down
        why = html.escape(explain.explain(name))
        assert f"title='{why}'" in board and f"href='#probe-{name}'" in board
        assert re.search(rf"<details id='probe-{name}'><summary><b>{name}</b> — {re.escape(why)}</summary>", page)
    # the drill-down holds every element's score
    for row in d["rows"]:
        for el, e in row["cells"]["equivariance"]["per_element"].items():
            assert f"{e['score']:.3f}" in page and f"<th>{el}</th>" in page


# ------------------------------------------------------------------ alignment
def test_different_elements_are_refused_unless_aligned(files):
    with pytest.raises(InputError) as err:
        compare.build_board([files["clean"], files["si_al"]])
    msg = str(err.value)
    assert files["clean"] in msg and files["si_al"] in msg and "element" in msg and "Al" in msg and "C" in msg
    assert "--align intersection" in msg
    board = compare.build_board([files["clean"], files["si_al"]], align="intersection")
    assert board["elements"] == ["Si"]
    assert {d["file"]: d["elements"] for d in board["dropped"]} == {files["clean"]: ["C"], files["si_al"]: ["Al"]}
    src = _read(files["clean"])
    row = board["rows"][0]
    assert row["recomputed"]
    for p in src["probes"]:
        si = p["per_element"]["Si"]
        cell = row["cells"][p["name"]]
        assert (cell["score"], cell["defect"], cell["gate"], cell["n_evals"]) == (
            si["score"], si["defect"], si["gate"], si["n_evals"])
        assert list(cell["per_element"]) == ["Si"]
    assert row["overall"] == pytest.approx(combine_scores([p["per_element"]["Si"]["score"] for p in src["probes"]],
                                                          src["aggregate"]["method"]))
    assert "dropped from" in compare.board_table(board) and "aligned by intersection" in compare.board_table(board)


def test_same_elements_in_another_order_are_compared(files):
    board = compare.build_board([files["clean"], files["c_si"]])
    assert board["dropped"] == [] and board["elements"] == ["Si", "C"]


def test_different_probes_are_refused_unless_aligned(files):
    with pytest.raises(InputError, match="probe sets differ") as err:
        compare.build_board([files["clean"], files["one_probe"]])
    assert "equivariance" in str(err.value) and files["one_probe"] in str(err.value)
    board = compare.build_board([files["clean"], files["one_probe"]], align="intersection")
    assert board["columns"] == ["stress_consistency"]
    assert board["dropped"] == [{"file": files["clean"], "elements": [], "probes": ["equivariance"]}]
    src = _read(files["clean"])
    kept = next(p for p in src["probes"] if p["name"] == "stress_consistency")
    assert board["rows"][0]["overall"] == pytest.approx(kept["score"])
    assert board["rows"][1]["overall"] == _read(files["one_probe"])["aggregate"]["overall"]  # nothing dropped


def test_different_jaxcert_versions_are_refused(files):
    def bump(d):
        d["versions"]["jaxcert"] = d["versions"]["jaxcert"] + ".post1"

    other = _variant(files, "curl", "curl_newer", bump)
    with pytest.raises(InputError, match="jaxcert versions differ") as err:
        compare.build_board([files["clean"], other])
    assert files["clean"] in str(err.value) and other in str(err.value)
    board = compare.build_board([files["clean"], other], allow_version_mismatch=True)
    assert any("versions differ" in n for n in board["notes"])


def test_partial_report_is_refused_with_the_resume_hint(files, capsys):
    partial = _variant(files, "clean", "partial", lambda d: d.update(complete=False))
    with pytest.raises(InputError, match="--resume") as err:
        compare.load(partial)
    assert partial in str(err.value) and "partial" in str(err.value)
    assert main(["compare", files["clean"], partial]) == 2
    assert "--resume" in capsys.readouterr().err
    done = _variant(files, "clean", "finished", lambda d: d.update(complete=True))
    assert compare.load(done).kind == "report"


def test_bad_input_names_the_file(files, tmp_path, capsys):
    cases = {
        "missing": (str(tmp_path / "nope.json"), "no such file"),
        "text": (tmp_path / "t.json", "not JSON"),
        "noschema": (tmp_path / "n.json", "schema"),
        "unknown": (tmp_path / "u.json", "unknown schema 'jaxcert-report/9'"),
        "truncated": (tmp_path / "p.json", "model: missing; allowed: an object"),
    }
    cases["text"][0].write_text("not json {")
    cases["noschema"][0].write_text(json.dumps({"probes": []}))
    cases["unknown"][0].write_text(json.dumps({"schema": "jaxcert-report/9"}))
    cases["truncated"][0].write_text(json.dumps({"schema": "jaxcert-report/1", "elements": ["Si"]}))
    for path, text in cases.values():
        with pytest.raises(InputError, match=re.escape(text)) as err:
            compare.build_board([files["clean"], str(path)])
        assert str(path) in str(err.value)
        assert main(["compare", files["clean"], str(path)]) == 2
        err_text = capsys.readouterr().err
        assert str(path) in err_text and len(err_text.strip().splitlines()) == 1


# ------------------------------------------------------------------ λ
def test_lambda_reports_compare_with_their_gate(files, capsys):
    paths = [files["lam_curl"], files["lam_clean"]]
    board = compare.build_board(paths)
    assert board["kind"] == "lambda" and board["columns"] == ["H2O", "NH3"]
    for row, path in zip(board["rows"], paths, strict=True):
        src = _read(path)
        assert row["mean"] == src["mean"] and row["max"] == src["max"]
        assert {k: c["lambda"] for k, c in row["cells"].items()} == src["lambda"]
        assert row["gate"] is src["gate"] and row["gate_threshold"] == src["gate_threshold"]
        assert {k: c["gate"] for k, c in row["cells"].items()} == {
            k: v <= src["gate_threshold"] for k, v in src["lambda"].items()}
    assert [r["gate"] for r in board["rows"]] == [False, True]  # the curl force fails the λ gate
    assert main(["compare", *paths, "--sort", "max", "--layout", "models"]) == 0
    out = capsys.readouterr().out
    header, rows = _table_rows(out)
    assert [r[0] for r in rows] == ["lj", "lj+curl(0.3)"]  # lowest λ first
    assert [r[header.index("Gate")] for r in rows] == ["PASS", "FAIL"]
    assert _flat(explain.explain("lam")) in _flat(out)  # the λ probe's sentence ("lam" since λ is a probe)


def test_lambda_structures_align_and_kinds_do_not_mix(files):
    with pytest.raises(InputError, match="structure sets differ"):
        compare.build_board([files["lam_clean"], files["lam_other"]])
    board = compare.build_board([files["lam_clean"], files["lam_other"]], align="intersection")
    assert board["columns"] == ["H2O"]
    h2o = _read(files["lam_other"])["lambda"]["H2O"]
    assert board["rows"][1]["mean"] == board["rows"][1]["max"] == h2o
    assert board["rows"][1]["gate"] is (h2o <= _read(files["lam_other"])["gate_threshold"])
    assert board["dropped"] == [{"file": files["lam_clean"], "structures": ["NH3"]},
                                {"file": files["lam_other"], "structures": ["C2H2"]}]
    with pytest.raises(InputError, match="cannot compare certification reports with λ reports") as err:
        compare.build_board([files["clean"], files["lam_clean"]])
    assert files["clean"] in str(err.value) and files["lam_clean"] in str(err.value)


def _flat(text):
    return " ".join(text.split())


def test_a_probe_on_named_structures_keeps_its_own_summary(files):
    """A certify report with the lam probe (one row per λ structure, none per element) is read by label: the
    cell is the probe's own summary and its per-element entries are blank, where it used to be refused."""
    rows = {"H2O": {"defect": 3e-3, "score": 0.0, "gate": False, "n_evals": 9, "status": "ok", "details": {}},
            "diamond": {"defect": 1e-3, "score": 0.0, "gate": False, "n_evals": 24, "status": "ok", "details": {}}}
    lam = {"name": "lam", "target": 0.0, "defect": 2e-3, "score": 0.0, "gate": False, "n_evals": 33, "status": "ok",
           "message": None, "wall_s": 1.0, "per_element": rows,
           "details": {"per_element_score": {k: 0.0 for k in rows}, "per_element_defect": {k: v["defect"]
                                                                                           for k, v in rows.items()}}}
    paths = [_variant(files, name, f"{name}_lam", lambda d: d["probes"].append(json.loads(json.dumps(lam))))
             for name in ("clean", "curl")]
    board = compare.build_board(paths)
    assert board["columns"][-1] == "lam" and board["elements"] == ["Si", "C"]
    for row in board["rows"]:
        cell = row["cells"]["lam"]
        assert (cell["score"], cell["gate"], cell["defect"], cell["n_evals"]) == (0.0, False, 2e-3, 33)
        assert all(e["status"] == "skipped" and e["score"] is None for e in cell["per_element"].values())
        assert row["gates_total"] == _read(files["clean"])["aggregate"]["gates_total"] + 1
    assert explain.short_name("lam") in compare.board_table(board)


# ------------------------------------------------------------------ validated input reports (issue 23)
REPORTS = ("clean", "curl", "si_al", "c_si", "one_probe")
LAMBDAS = ("lam_clean", "lam_curl", "lam_other")


def _one_error(capsys, *needles):
    """The single stderr line of an exit-2 run, checked to hold every needle."""
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("jaxcert: error: "), err
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


def test_every_report_the_writer_produces_passes_the_schema(files):
    """The checker is the writer's layout: every real report passes, the writer's keys are the checker's tables
    (required keys always written, nothing written that the tables do not name)."""
    from jaxcert.probes import PROBES

    def keys_match(written, table, where):
        required = {k for k, (_, req) in table.items() if req}
        assert required <= set(written) <= set(table), (where, set(written) ^ set(table))

    for name in REPORTS + LAMBDAS:
        kind, doc = report_schema.load(files[name])
        assert kind == ("lambda" if name in LAMBDAS else "report")
        if kind == "lambda":
            keys_match(doc, report_schema.LAMBDA_FIELDS, name)
            continue
        keys_match(doc, report_schema.REPORT_FIELDS, name)
        keys_match(doc["aggregate"], report_schema.AGGREGATE_FIELDS, name)
        for p in doc["probes"]:
            keys_match(p, report_schema.PROBE_FIELDS, p["name"])
            for e in p["per_element"].values():
                keys_match(e, report_schema.ELEMENT_FIELDS, p["name"])
    # the probes on named structures are the registry's
    assert set(report_schema.STRUCTURE_PROBES) == {n for n, spec in PROBES.items() if spec.structures is not None}


def test_committed_benchmark_reports_pass_the_schema():
    """The reports in benchmarks/results (bridged CHGNet and SevenNet runs, ten elements, older λ files without a
    dtype) are writer output too: each passes, and they still make boards."""
    import pathlib

    found = {"report": [], "lambda": []}
    for path in sorted((pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "results").glob("*.json")):
        doc = _read(path)
        if isinstance(doc, dict) and doc.get("schema") in report_schema.KINDS:
            kind, _ = report_schema.load(path)
            found[kind].append(str(path))
    assert len(found["report"]) >= 2 and len(found["lambda"]) >= 2
    for paths in found.values():
        board = compare.build_board(paths, align="intersection", allow_version_mismatch=True)
        assert len(board["rows"]) == len(paths)


def _set(*path_value):
    """An edit setting ``doc[path...] = value`` (``DELETE``: remove the key)."""
    *path, value = path_value
    return lambda d: set_field(d, tuple(path), value)


NAN = float("nan")
# (case, edit of the clean report (elements Si, C; probes equivariance, stress_consistency), field in the message)
TAMPERED = [
    ("n_evals_text", _set("aggregate", "n_evals", "abc"), "aggregate.n_evals: got 'abc'; allowed: an integer >= 0"),
    ("overall_object", _set("aggregate", "overall", {}), "aggregate.overall: got {}; allowed: a number in [0, 1]"),
    ("probe_score_nan", _set("probes", 0, "score", NAN), "probes[0].score: got nan; allowed: a finite number"),
    ("element_score_nan", _set("probes", 1, "per_element", "C", "score", NAN),
     "probes[1].per_element.C.score: got nan"),
    ("defect_infinity", _set("probes", 0, "defect", float("inf")), "probes[0].defect: got inf"),
    ("element_missing", _set("probes", 1, "per_element", "C", DELETE),
     "probes[1].per_element.C: missing; allowed: an object with the element's result"),
    ("element_extra", _set("probes", 0, "per_element", "Al", {}), "probes[0].per_element.Al: got {}; allowed: entries"),
    ("name_missing", _set("probes", 0, "name", DELETE), "probes[0].name: missing; allowed: a non-empty string"),
    ("name_duplicate", _set("probes", 1, "name", "equivariance"), "probes[1].name: got 'equivariance'"),
    ("probes_null", _set("probes", None), "probes: got None; allowed: a list"),
    ("probe_not_object", _set("probes", 0, "x"), "probes[0]: got 'x'; allowed: an object"),
    ("per_element_list", _set("probes", 0, "per_element", []), "probes[0].per_element: got []; allowed: an object"),
    ("status_unknown", _set("probes", 0, "per_element", "Si", "status", "fine"),
     "probes[0].per_element.Si.status: got 'fine'; allowed: one of ok, non-finite, error, skipped, unsupported"),
    ("score_above_one", _set("probes", 0, "score", 1.5), "probes[0].score: got 1.5; allowed: a number in [0, 1]"),
    ("gate_text", _set("probes", 0, "gate", "yes"), "probes[0].gate: got 'yes'; allowed: true, false or null"),
    ("n_evals_negative", _set("probes", 0, "per_element", "Si", "n_evals", -1), "probes[0].per_element.Si.n_evals"),
    ("n_evals_float", _set("probes", 0, "n_evals", 2.5), "probes[0].n_evals: got 2.5"),
    ("elements_unknown", _set("elements", ["Si", "Xx"]), "elements[1]: got 'Xx'; allowed: a non-empty list of element"),
    ("elements_twice", _set("elements", ["Si", "Si"]), "elements[1]: got 'Si'"),
    ("seed_negative", _set("seed", -1), "seed: got -1; allowed: an integer in [0, 2147483647]"),
    ("method_unknown", _set("aggregate", "method", "median"), "aggregate.method: got 'median'; allowed: one of "),
    ("per_element_overall", _set("aggregate", "per_element_overall", "C", DELETE),
     "aggregate.per_element_overall.C: missing"),
    ("gates_counts", _set("aggregate", "gates_passed", 9), "aggregate.gates_passed: got 9"),
    ("model_name", _set("model", "name", DELETE), "model.name: missing"),
    ("version_number", _set("versions", "jaxcert", 3), "versions.jaxcert: got 3; allowed: a string"),
    ("dtype_number", _set("dtype", 64), "dtype: got 64; allowed: a non-empty string"),
    ("details_null", _set("probes", 0, "per_element", "Si", "details", None),
     "probes[0].per_element.Si.details: got None"),
]


@pytest.mark.parametrize("edit,field", [c[1:] for c in TAMPERED], ids=[c[0] for c in TAMPERED])
def test_tampered_report_is_refused_naming_file_and_field(files, capsys, edit, field):
    """Each field compare reads is checked: a wrong type, a value out of range, NaN where the writer writes none,
    a missing element or name are one input error (exit 2) naming the file and the field, never a board."""
    path = _variant(files, "clean", "tampered", edit)
    assert main(["compare", files["clean"], path]) == 2
    _one_error(capsys, f"jaxcert: error: {path}: {field}")
    with pytest.raises(InputError, match=re.escape(field)):
        compare.load(path)


LAMBDA_TAMPERED = [
    ("lambda_nan", _set("lambda", "H2O", NAN), "lambda.H2O: got nan"),
    ("lambda_negative", _set("lambda", "H2O", -1.0), "lambda.H2O: got -1.0; allowed: a finite number >= 0 or null"),
    ("lambda_null_map", _set("lambda", None), "lambda: got None; allowed: an object"),
    ("n_evals_missing", _set("n_evals", "NH3", DELETE), "n_evals.NH3: missing"),
    ("n_evals_text", _set("n_evals", "H2O", "abc"), "n_evals.H2O: got 'abc'"),
    ("skipped_unknown", _set("skipped", "CH4", "no"), "skipped.CH4: got 'no'"),
    ("gate_text", _set("gate", "yes"), "gate: got 'yes'; allowed: true or false"),
    ("threshold_zero", _set("gate_threshold", 0), "gate_threshold: got 0; allowed: a finite number > 0"),
    ("mean_text", _set("mean", "small"), "mean: got 'small'"),
    ("model_object", _set("model", {}), "model: got {}; allowed: a non-empty string"),
]


@pytest.mark.parametrize("edit,field", [c[1:] for c in LAMBDA_TAMPERED], ids=[c[0] for c in LAMBDA_TAMPERED])
def test_tampered_lambda_report_is_refused_naming_file_and_field(files, capsys, edit, field):
    path = _variant(files, "lam_clean", "lam_tampered", edit)
    assert main(["compare", files["lam_clean"], path]) == 2
    _one_error(capsys, f"jaxcert: error: {path}: {field}")


def test_hostile_files_are_input_errors(files, tmp_path, capsys):
    """Deep nesting (json itself recurses), nesting below the recursion limit, an oversized file and an
    integer of more digits than Python parses: each one line, exit 2, naming the file."""
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 200_000 + "]" * 200_000)
    nested = _variant(files, "clean", "nested", _set("model", "extra", json.loads("[" * 200 + "]" * 200)))
    huge = tmp_path / "huge.json"
    with open(huge, "wb") as fh:  # sparse: refused by its size before a byte is read
        fh.truncate(report_schema.MAX_BYTES + 1)
    digits = tmp_path / "digits.json"
    digits.write_text('{"schema": "jaxcert-report/1", "seed": ' + "9" * 5000 + "}")
    for path, text in ((deep, "nested too deeply"), (nested, f"nested more than {report_schema.MAX_DEPTH} levels"),
                       (huge, "allowed: a report file of at most 32 MiB"), (digits, "not JSON that can be read")):
        assert main(["compare", files["clean"], str(path)]) == 2
        _one_error(capsys, f"jaxcert: error: {path}: ", text)


def test_width_is_checked_and_named(files, capsys):
    assert main(["compare", files["clean"], "--width", "0"]) == 2
    assert _one_error(capsys) == f"jaxcert: error: --width: got 0; allowed: an integer >= {compare.MIN_WIDTH}"
    with pytest.raises(InputError, match="width: got -5"):
        compare.board_table(compare.build_board([files["clean"]]), width=-5)
    assert main(["compare", files["clean"], "--width", str(compare.MIN_WIDTH)]) == 0


def test_outputs_are_checked_before_any_report_is_read(files, tmp_path, capsys):
    """--json / --html: writable files, not the same file, and never one of the reports compared (the board would
    overwrite an input); all refused before a report is read (a broken report is not even opened)."""
    broken = tmp_path / "broken.json"
    broken.write_text("not json")
    before = _read(files["clean"])
    cases = [
        (["--json", files["clean"]], "--json: ", "is the same file as REPORT.json"),
        (["--html", files["curl"]], "--html: ", "is the same file as REPORT.json"),
        (["--json", str(tmp_path / "b"), "--html", str(tmp_path / "b")], "--html: ", "is the same file as --json"),
        (["--json", str(tmp_path)], "--json: ", "is a directory"),
        (["--html", str(tmp_path / "no" / "such" / "b.html")], "--html: no such directory", ""),
    ]
    for extra, flag, text in cases:
        assert main(["compare", files["clean"], files["curl"], str(broken), *extra]) == 2
        _one_error(capsys, flag, text)
    assert _read(files["clean"]) == before
    assert not (tmp_path / "b").exists()


def test_html_board_says_its_title_and_each_explanation_once_and_scrolls_in_its_own_container(files):
    """The page's visible text names the board once and explains each probe once (the headers' tooltips aside);
    the wide table sits in a scrolling container with the model column sticky (tests/test_pages.py checks the
    layout in Chromium)."""
    d = compare.build_board([files["clean"], files["curl"]])
    page = compare.board_html(d)
    visible = re.sub(r"<(?:style|script)>.*?</(?:style|script)>|<title>.*?</title>", "", page, flags=re.S)
    visible = html.unescape(re.sub(r"<[^>]*>", "", visible))  # tags and their attributes (tooltips) removed
    assert visible.count("jaxcert comparison board") == 1
    for name in d["columns"]:
        assert visible.count(explain.explain(name)) == 1, name
    assert "<div class=scroll><table id=board" in page and "div.scroll{overflow-x:auto" in page
    assert "tr.main>td:first-child{position:sticky;left:0" in page and "padding:1.5em 32px" in page
    scores = [c["score"] for r in d["rows"] for c in r["cells"].values()]
    assert f"data-lo='{min(scores)!r}' data-hi='{max(scores)!r}'" in page


def test_lambda_colours_share_the_scale_and_have_a_legend(files):
    from jaxcert.report.html import RAMP

    assert compare.lambda_colour(1e-9) == RAMP[-1] and compare.lambda_colour(0.5) == RAMP[0]
    pos = [compare.lambda_position(10.0 ** -k) for k in np.linspace(0, 8, 33)]
    assert all(b >= a for a, b in zip(pos, pos[1:], strict=False))
    page = compare.board_html(compare.build_board([files["lam_clean"], files["lam_curl"]]))
    assert "log10 λ, from blue at round-off (λ ≤ 1e-7) to red (λ ≥ 0.1)" in page
    assert "The λ values on this board" in page
    assert page.count("<h1>") == 1 and "What λ tests" in page
