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

#: two cheap probes, then one more: the killed process compiles its programs one at a time
#: (JAXCERT_COMPILE_WORKERS=0), so a kill after the second checkpoint lands while the third compiles
PROBES = "parity,equivariance,betti"
VOLATILE = ("wall_s", "wall_time_s", "machine")


def _cmd(path, *extra):
    return [sys.executable, "-m", "jaxcert.cli", "certify", "--model", "lj", "--elements", "Si,C", "--probes",
            PROBES, "--json", str(path), "--quiet", *extra]


def _env(**extra):
    return dict(os.environ, JAXCERT_CACHE_DIR="off", JAX_PLATFORMS="cpu", **extra)


def _stable(doc):
    """The report without what legitimately differs between runs: wall times and the machine load."""
    if isinstance(doc, dict):
        return {k: _stable(v) for k, v in doc.items() if k not in VOLATILE}
    if isinstance(doc, list):
        return [_stable(v) for v in doc]
    return doc


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
    assert "cannot read" in capsys.readouterr().err


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
