"""Resumable certification and determinism, with real processes.

* kill -9 mid-run: the report file written after each probe keeps every finished probe; ``--resume`` runs
  only the rest and the result equals an uninterrupted run byte for byte (apart from wall times and load).
  The killed run is a process of its own; the resume and the uninterrupted run are ``jaxcert.cli.main`` in
  the test's process (a third process only paid the start-up: the importing of JAX and the reference tables).
* the same command twice gives byte-identical JSON apart from wall times and machine load (f32 and f64).
"""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests._stable import stable as _stable
from tests._tamper import DELETE, set_field

#: two cheap probes, then one more: the killed process compiles its programs one at a time
#: (JAXCERT_COMPILE_WORKERS=0), so a kill after the second checkpoint lands while the third compiles
PROBES = "parity,equivariance,betti"


def _cmd(path, *extra):
    return [sys.executable, "-m", "jaxcert.cli", "certify", "--model", "lj", "--elements", "Si,C", "--probes",
            PROBES, "--json", str(path), "--quiet", *extra]


def _env(**extra):
    return dict(os.environ, JAXCERT_CACHE_DIR="off", JAX_PLATFORMS="cpu", **extra)



def _read(path):
    with open(path) as fh:
        return json.load(fh)


def test_kill_9_loses_nothing_and_resume_recomputes_nothing(tmp_path, capsys):
    from jaxcert.cli import main

    r = tmp_path / "r.json"
    proc = subprocess.Popen(_cmd(r), env=_env(JAXCERT_COMPILE_WORKERS="0"), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    deadline = time.time() + 600
    partial = None
    while time.time() < deadline and proc.poll() is None:
        if r.exists():
            partial = _read(r)  # written atomically: always a whole JSON document
            if len(partial["probes"]) >= 2:
                break
        time.sleep(0.02)
    assert proc.poll() is None, "the run finished before it could be killed: " + proc.stderr.read().decode()[-500:]
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    partial = _read(r)  # what the killed process left
    done = [p["name"] for p in partial["probes"]]
    assert partial["complete"] is False and 2 <= len(done) < len(PROBES.split(","))

    capsys.readouterr()
    assert main(_cmd(r, "--resume")[3:]) == 0  # the same command, in this process
    assert f"{len(done)} of {len(PROBES.split(','))} probes finished" in capsys.readouterr().err
    final = _read(r)
    assert final["complete"] is True and [p["name"] for p in final["probes"]] == PROBES.split(",")
    kept = {p["name"]: p for p in final["probes"] if p["name"] in done}
    for p in partial["probes"]:  # not recomputed: the very same entry, wall time included
        assert kept[p["name"]] == p
    # the report's wall time is the whole computation's: the kept probes' own time counts
    assert final["wall_time_s"] >= sum(p["wall_s"] for p in final["probes"])
    assert final["wall_time_s"] >= sum(p["wall_s"] for p in partial["probes"]) + \
        sum(p["wall_s"] for p in final["probes"] if p["name"] not in done)

    # determinism in float64: an uninterrupted run gives the same document (its first probes were computed by
    # the killed process, the rest by this one)
    fresh = tmp_path / "fresh.json"
    assert main(_cmd(fresh)[3:]) == 0
    assert _stable(_read(fresh)) == _stable(final)


def test_resume_refuses_a_report_of_another_run(tmp_path, capsys):
    from jaxcert.cli import main

    r = tmp_path / "r.json"
    assert main(["certify", "--model", "lj", "--elements", "Si", "--probes", "parity", "--json", str(r),
                 "--quiet"]) == 0
    assert main(["certify", "--model", "lj", "--elements", "Si", "--probes", "parity", "--json", str(r),
                 "--seed", "1", "--resume", "--quiet"]) == 2
    assert "written with seed = 0, this run has 1" in capsys.readouterr().err
    r.write_text("{not json")
    assert main(["certify", "--model", "lj", "--elements", "Si", "--probes", "parity", "--json", str(r),
                 "--resume", "--quiet"]) == 2
    assert "not JSON" in capsys.readouterr().err


def test_same_command_twice_gives_identical_json(tmp_path):
    """float32 here, two processes; float64 is the last assertion of the kill -9 test (the killed process's
    probes and this process's, one document).  The float32 pair stays two fresh processes: the test's process has
    x64 enabled, which a float32 command never turns on."""
    dtype = "float32"
    paths = [tmp_path / f"{k}.json" for k in range(2)]
    for p in paths:
        cmd = [sys.executable, "-m", "jaxcert.cli", "certify", "--model", "lj", "--elements", "Si,C", "--probes",
               "equivariance,betti", "--dtype", dtype, "--json", str(p), "--quiet"]
        res = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=600)
        assert res.returncode == 0, res.stderr[-2000:]
    a, b = (_read(p) for p in paths)
    assert a["dtype"] == dtype
    assert json.dumps(_stable(a), sort_keys=True) == json.dumps(_stable(b), sort_keys=True)
    assert a["machine"].keys() == b["machine"].keys()  # only the values (load) may differ


# ------------------------------------------------------------------ a resume file is validated (issue 23)
AR = ["certify", "--model", "lj", "--elements", "Ar", "--probes", "parity", "--quiet"]


@pytest.fixture(scope="module")
def ar_report(tmp_path_factory):
    """A real checkpoint file written by the CLI (complete, with its probe configs): lj on Ar, parity."""
    from jaxcert.cli import main

    path = tmp_path_factory.mktemp("resume") / "ar.json"
    assert main([*AR, "--json", str(path)]) == 0
    return _read(path)


def test_the_checkpoint_the_writer_produces_passes_the_schema_and_resumes(ar_report, tmp_path, capsys):
    from jaxcert.cli import main
    from jaxcert.report import schema as report_schema

    path = tmp_path / "r.json"
    path.write_text(json.dumps(ar_report))
    kind, doc = report_schema.load(path, "--resume", kinds=(report_schema.REPORT_SCHEMA,))
    assert kind == "report" and doc["complete"] is True and set(doc["probe_configs"]) == {"parity"}
    partial = dict(ar_report, complete=False)
    path.write_text(json.dumps(partial))
    capsys.readouterr()
    assert main([*AR, "--json", str(path), "--resume"]) == 0
    assert "1 of 1 probes finished" in capsys.readouterr().err



def test_a_card_statement_does_not_block_a_resume_but_a_computing_field_does(ar_report, tmp_path, capsys):
    """The training set a model's package states (``CARD_ONLY``) may be added or reworded between two runs (a
    weights file converted before the model card recorded it): the report still resumes, recomputes nothing,
    and carries the model's metadata as it is now. A field that says what the model computes (here its source,
    the potential it evaluates) is refused, naming ``model``."""
    from jaxcert.cli import main

    r = tmp_path / "r.json"
    doc = json.loads(json.dumps(ar_report))
    doc["model"]["training_data"] = "stated by an older conversion"
    doc["complete"] = False
    r.write_text(json.dumps(doc))
    capsys.readouterr()
    assert main([*AR, "--json", str(r), "--resume"]) == 0
    assert "1 of 1 probes finished" in capsys.readouterr().err
    out = _read(r)
    assert "training_data" not in out["model"] and out["model"] == ar_report["model"]
    assert out["probes"] == ar_report["probes"]  # the very same entry: not recomputed

    doc["model"]["source"] = "another potential"
    r.write_text(json.dumps(doc))
    assert main([*AR, "--json", str(r), "--resume"]) == 2
    assert "was written with model = " in capsys.readouterr().err


# (case, field path, value, what the message says)
RESUME_TAMPERED = [
    ("probes_null", ("probes",), None, "probes: got None; allowed: a list"),
    ("probe_null", ("probes", 0), None, "probes[0]: got None; allowed: an object"),
    ("per_element_null", ("probes", 0, "per_element"), None, "probes[0].per_element: got None; allowed: an object"),
    ("element_missing", ("probes", 0, "per_element", "Ar"), DELETE,
     "probes[0].per_element.Ar: missing; allowed: an object with the element's result"),
    ("name_missing", ("probes", 0, "name"), DELETE, "probes[0].name: missing; allowed: a non-empty string"),
    ("name_number", ("probes", 0, "name"), 7, "probes[0].name: got 7"),
    ("status_number", ("probes", 0, "per_element", "Ar", "status"), 3, "probes[0].per_element.Ar.status: got 3"),
    ("status_null", ("probes", 0, "status"), None, "probes[0].status: got None"),
    ("defect_text", ("probes", 0, "per_element", "Ar", "defect"), "x",
     "probes[0].per_element.Ar.defect: got 'x'; allowed: a finite number or null"),
    ("defect_nan", ("probes", 0, "per_element", "Ar", "defect"), float("nan"),
     "probes[0].per_element.Ar.defect: got nan"),
    ("score_list", ("probes", 0, "per_element", "Ar", "score"), [1], "probes[0].per_element.Ar.score: got [1]"),
    ("score_negative", ("probes", 0, "score"), -0.5, "probes[0].score: got -0.5; allowed: a number in [0, 1]"),
    ("gate_text", ("probes", 0, "per_element", "Ar", "gate"), "no", "probes[0].per_element.Ar.gate: got 'no'"),
    ("n_evals_float", ("probes", 0, "per_element", "Ar", "n_evals"), 1.5, "probes[0].per_element.Ar.n_evals: got 1.5"),
    ("n_evals_huge", ("probes", 0, "per_element", "Ar", "n_evals"), 2**70, "probes[0].per_element.Ar.n_evals"),
    ("details_list", ("probes", 0, "per_element", "Ar", "details"), [], "probes[0].per_element.Ar.details: got []"),
    ("target_text", ("probes", 0, "target"), "0", "probes[0].target: got '0'; allowed: a finite number"),
    ("wall_null", ("probes", 0, "wall_s"), None, "probes[0].wall_s: got None"),
    ("host_evaluations", ("probes", 0, "host_evaluations"), {"energy": "3"}, "probes[0].host_evaluations.energy"),
    ("configs_list", ("probe_configs",), ["parity"], "probe_configs: got ['parity']; allowed: an object"),
    ("versions_list", ("versions",), [], "versions: got []"),
    ("seed_text", ("seed",), "0", "seed: got '0'"),
    ("complete_text", ("complete",), "yes", "complete: got 'yes'; allowed: true or false"),
]


@pytest.mark.parametrize("path,value,field", [c[1:] for c in RESUME_TAMPERED], ids=[c[0] for c in RESUME_TAMPERED])
def test_tampered_resume_file_is_refused_naming_file_and_field(ar_report, tmp_path, capsys, path, value, field):
    """A wrong type, a missing element or name in the checkpoint is one input error (exit 2) naming --resume, the
    file and the field, not a traceback or a bare ``KeyError``; the file is left as it was."""
    from jaxcert.cli import main

    doc = json.loads(json.dumps(ar_report))
    set_field(doc, path, value)
    r = tmp_path / "r.json"
    r.write_text(json.dumps(doc))
    before = r.read_text()
    capsys.readouterr()
    assert main([*AR, "--json", str(r), "--resume"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"jaxcert: error: --resume: {r}: {field}"), err
    assert r.read_text() == before
