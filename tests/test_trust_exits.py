"""Exit codes exactly as docs/cli.md says ("Exit codes"), and bounded resources ("Trust, second round").

Each test is one finding of the hostile battery: 2 is bad input, refused before any work with one stderr line
naming the argument (and echoing at most ~200 characters of a value); 1 is a failed gate or a crashed model; 3 is
only our own bugs; Ctrl-C exits 130 and says exactly what was kept.  ``benchmarks/boundary_battery.py`` runs the
same cases as separate processes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from jaxcert.cli import main

ROOT = Path(__file__).resolve().parents[1]


def _env() -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if not k.startswith("JAXCERT_")}, "JAX_PLATFORMS": "cpu",
            "JAXCERT_CACHE_DIR": "off", "PYTHONPATH": str(ROOT)}


def _err_lines(capsys) -> list[str]:
    return [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]


# ------------------------------------------------------------------------------------------ sys.exit in the MD
EXIT_IN_MD = """
import sys
import jaxcert
base = jaxcert.models.get("lj")
def energy(params, s):
    if s.positions.shape[-2] > 60:  # only the ~100-atom cell of the throughput NVE run
        sys.exit(0)
    return base.energy_fn(params, s)
model = base.replace(energy_fn=energy, name="exit-in-md")
"""


def test_sys_exit_in_the_throughput_md_is_a_failed_measurement_not_the_end(tmp_path, monkeypatch, capsys):
    """The probes pass; the model calls sys.exit(0) in the NVE run only: the board keeps its row (the
    measurement records the exit) and writes board.json, and certify --throughput exits 0, not 3."""
    (tmp_path / "exit_in_md_board.py").write_text(EXIT_IN_MD)
    (tmp_path / "exit_in_md_cert.py").write_text(EXIT_IN_MD)
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "b"
    rc = main(["board", "--models", "exit_in_md_board:model", "--elements", "Ar", "--probes", "parity",
               "--out", str(out), "--quiet"])
    assert rc == 0, capsys.readouterr().err
    board = json.loads((out / "board.json").read_text())
    assert not board["failed"] and len(board["rows"]) == 1
    md = board["rows"][0]["throughput"]["md"]
    assert "sys.exit(0)" in md["error"]
    rc = main(["certify", "--model", "exit_in_md_cert:model", "--elements", "Ar", "--probes", "parity", "--quiet",
               "--throughput", "--json", str(tmp_path / "r.json")])
    assert rc == 0, capsys.readouterr().err
    assert "sys.exit(0)" in json.loads((tmp_path / "r.json").read_text())["throughput"]["md"]["error"]


# ------------------------------------------------------------------------------------------ --workers, --scheduler
def test_workers_beyond_the_bound_exit_2_before_a_cluster_starts(tmp_path, monkeypatch, capsys):
    distributed = pytest.importorskip("distributed")

    def no_cluster(*a, **k):
        raise AssertionError("a cluster was started")

    monkeypatch.setattr(distributed, "LocalCluster", no_cluster)
    rc = main(["board", "--models", "lj", "--elements", "Ar", "--probes", "parity", "--out", str(tmp_path / "b"),
               "--workers", "10000", "--quiet"])
    err = _err_lines(capsys)
    assert rc == 2 and len(err) == 1 and err[0].startswith("jaxcert: error: --workers: got '10000'")
    assert not (tmp_path / "b").exists()  # before any work: not even the folder


@pytest.mark.parametrize("address", ["nonsense", "tcp://[::1", "tcp://host:99999", "tcp://:8786", "http://h:1"])
def test_a_malformed_scheduler_address_exits_2_naming_it(tmp_path, address, capsys):
    pytest.importorskip("distributed")
    t0 = time.perf_counter()
    rc = main(["board", "--models", "lj", "--elements", "Ar", "--probes", "parity", "--out", str(tmp_path / "b"),
               "--scheduler", address, "--quiet"])
    err = _err_lines(capsys)
    assert rc == 2 and len(err) == 1 and err[0].startswith("jaxcert: error: --scheduler: got ")
    assert time.perf_counter() - t0 < 10 and not (tmp_path / "b").exists()


def test_a_scheduler_that_does_not_answer_exits_2_within_a_short_timeout(tmp_path, capsys):
    pytest.importorskip("distributed")
    from jaxcert.board import SCHEDULER_TIMEOUT_S

    t0 = time.perf_counter()
    rc = main(["board", "--models", "lj", "--elements", "Ar", "--probes", "parity", "--out", str(tmp_path / "b"),
               "--scheduler", "tcp://127.0.0.1:1", "--quiet"])
    err = _err_lines(capsys)
    assert rc == 2 and err[-1].startswith("jaxcert: error: --scheduler: cannot reach 'tcp://127.0.0.1:1'")
    assert time.perf_counter() - t0 < SCHEDULER_TIMEOUT_S + 10


# ------------------------------------------------------------------------------------------ a report's model card
@pytest.fixture(scope="module")
def report(tmp_path_factory) -> dict:
    path = tmp_path_factory.mktemp("rep") / "r.json"
    assert main(["certify", "--model", "lj", "--elements", "Ar", "--probes", "parity", "--quiet",
                 "--json", str(path)]) == 0
    return json.loads(path.read_text())


@pytest.mark.parametrize("field, value", [("species", ["Ar", 1]), ("packages", "jax 0.4"), ("files", [1]),
                                          ("files", [{}]), ("precision", [1])])
def test_a_malformed_model_card_exits_2_naming_file_and_field(report, tmp_path, field, value, capsys):
    doc = json.loads(json.dumps(report))
    doc["card"][field] = value
    (tmp_path / "bad.json").write_text(json.dumps(doc))
    rc = main(["compare", str(tmp_path / "bad.json"), "--html", str(tmp_path / "b.html")])
    err = _err_lines(capsys)
    assert rc == 2 and len(err) == 1 and f"bad.json: card.{field}: got " in err[0]


# ------------------------------------------------------------------------------------------ investigate --resume
EX = "jaxcert.detective.examples"
INVESTIGATE = ["investigate", "--target", f"{EX}:lj_planted_dimers", "--committee", f"lj,{EX}:lj_soft", "--protocols",
               "dimers", "--elements", "Sb", "--oracle-seconds", "0", "--quiet"]


@pytest.fixture(scope="module")
def investigated(tmp_path_factory) -> Path:
    """The report folder of a finished search (its evidence memory has run, screen, ..., stop records)."""
    out = tmp_path_factory.mktemp("inv") / "inv"
    assert main([*INVESTIGATE, "--out", str(out)]) == 0
    return out


@pytest.mark.parametrize("line, names", [
    ("[1, 2]", "line 2: got [1, 2]"),
    ('{"type": "screen"}', "line 2: protocol: missing"),
    ('{"type": "probe", "hypothesis_id": "h", "probe": "scope", "evals": "abc"}', "line 2: evals: got 'abc'"),
    ('{"type": "screen", "protocol": "dimers", "fingerprint": "f", "cells": [{"key": 1}]}', "line 2: cells[0]"),
    ('{"no": "type"}', "line 2: type: got None"),
])
def test_a_damaged_evidence_line_exits_2_naming_file_and_line_before_writing(investigated, tmp_path, line, names,
                                                                            capsys):
    import shutil

    out = tmp_path / "inv"
    shutil.copytree(investigated, out)
    memory = out / "evidence.jsonl"
    lines = memory.read_text().split("\n")
    lines[1] = line  # the screen record, damaged
    memory.write_text("\n".join(lines))
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    rc = main([*INVESTIGATE, "--out", str(out), "--resume"])
    err = _err_lines(capsys)
    assert rc == 2 and len(err) == 1 and f"evidence.jsonl: {names}" in err[0], err
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before  # nothing appended or rewritten


# ------------------------------------------------------------------------------------------ --models
@pytest.mark.parametrize("entry, names", [
    ('defects = ["curly=1"]', "models[1].defects[0]: unknown defect 'curly'"),
    ('defects = ["curl=nan"]', "models[1].defects[0]: got 'nan'"),
    ('defects = ["curl=abc"]', "models[1].defects[0]: got 'abc'"),
])
def test_every_toml_entry_is_checked_before_any_model_runs(tmp_path, entry, names, capsys):
    toml = tmp_path / "m.toml"
    toml.write_text(f'[[models]]\nspec = "lj"\n\n[[models]]\nspec = "lj"\nname = "lj-2"\n{entry}\n')
    rc = main(["board", "--models", str(toml), "--elements", "Ar", "--probes", "parity", "--out",
               str(tmp_path / "b"), "--quiet", "--no-throughput"])
    err = _err_lines(capsys)
    assert rc == 2 and len(err) == 1 and names in err[0], err
    assert not (tmp_path / "b").exists()  # lj was not certified first


@pytest.mark.parametrize("models", ["lj,,emt", "lj,", " ,emt"])
def test_an_empty_item_in_models_exits_2(tmp_path, models, capsys):
    rc = main(["board", "--models", models, "--elements", "Cu", "--probes", "parity", "--out", str(tmp_path / "b"),
               "--quiet", "--no-throughput"])
    err = _err_lines(capsys)
    assert rc == 2 and len(err) == 1 and err[0].startswith("jaxcert: error: --models: got ")
    assert not (tmp_path / "b").exists()


def test_a_directory_named_toml_is_refused(tmp_path, capsys):
    (tmp_path / "d.toml").mkdir()
    rc = main(["board", "--models", str(tmp_path / "d.toml"), "--elements", "Cu", "--out", str(tmp_path / "b")])
    err = _err_lines(capsys)
    assert rc == 2 and len(err) == 1 and "d.toml' is a directory" in err[0]


def test_a_fifo_given_as_the_models_toml_is_refused_without_opening_it(tmp_path):
    fifo = tmp_path / "m.toml"
    os.mkfifo(fifo)
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "jaxcert.cli", "board", "--models", str(fifo), "--elements", "Cu",
                        "--out", str(tmp_path / "b")], env=_env(), cwd=tmp_path, capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 2 and "m.toml' is a FIFO" in p.stderr.strip().splitlines()[-1], p.stderr
    assert time.perf_counter() - t0 < 30


# ------------------------------------------------------------------------------------------ echoed values
@pytest.mark.parametrize("argv, flag", [
    (["certify", "--model", "lj", "--elements", "X" * 100_000], "--elements"),
    (["certify", "--model", "lj", "--elements", ",".join(["Si"] * 30_000)], "--elements"),
    (["certify", "--model", "lj", "--elements", ",".join(["Xq"] * 30_000)], "--elements"),
    (["certify", "--model", "lj", "--elements", "Ar", "--probes", "p" * 100_000], "--probes"),
    (["board", "--models", "lj", "--elements", "Ar", "--out", "b", "--workers", "9" * 100_000], "--workers"),
    (["board", "--models", "lj", "--elements", "Ar", "--out", "b", "--scheduler", "tcp://" + "h" * 100_000],
     "--scheduler"),
])
def test_an_error_line_echoes_at_most_about_200_characters_of_a_value(tmp_path, monkeypatch, argv, flag, capsys):
    monkeypatch.chdir(tmp_path)
    t0 = time.perf_counter()
    assert main(argv) == 2
    err = _err_lines(capsys)
    assert len(err) == 1 and err[0].startswith(f"jaxcert: error: {flag}: "), err[0][:300]
    assert len(err[0]) < 1000, len(err[0])
    assert time.perf_counter() - t0 < 30


# ------------------------------------------------------------------------------------------ a huge cutoff
HUGE_CUTOFF = """
import jax.numpy as jnp
import jaxcert
CUT = 1e4
def energy(params, s):
    p = jaxcert.neighbors.pairs(s, cutoff=CUT)
    inside = p.mask & (p.r < CUT)
    return 0.5 * jnp.sum(jnp.where(inside, params["eps"] * ((2.3 / p.r) ** 12 - 2 * (2.3 / p.r) ** 6), 0.0))
model = jaxcert.Model(energy, params={"eps": 0.1}, name="huge-cutoff", cutoff=CUT)
"""


def test_a_huge_cutoff_on_a_small_cell_is_refused_before_allocating():
    """Model.prepare counts the images (a 10^4 Å cutoff on a 4 Å cell: about 10^11) and refuses before any is
    built, naming the cutoff, the image count and the memory."""
    import jaxcert
    from jaxcert.core.inputs import InputError
    from jaxcert.core.neighbors import TooManyImages
    from jaxcert.probes.substrates import bulk

    ns: dict = {}
    exec(HUGE_CUTOFF, ns)  # noqa: S102 - the test's own model source
    t0 = time.perf_counter()
    with pytest.raises(TooManyImages) as info:
        ns["model"].prepare(bulk("Ar"))
    assert isinstance(info.value, InputError) and time.perf_counter() - t0 < 5
    msg = str(info.value)
    assert "cutoff 10000 Å" in msg and "periodic images" in msg and " GB" in msg
    assert jaxcert.models.get("lj").prepare(bulk("Ar")).images is not None  # an ordinary cutoff is untouched


def test_a_huge_cutoff_exits_2_from_the_cli_within_a_memory_limit(tmp_path):
    (tmp_path / "huge_cutoff.py").write_text(textwrap.dedent(HUGE_CUTOFF))

    # at most 6 GB of address space (ulimit -v, in KiB): an allocation of the images fails, never swaps the machine
    limited = ["bash", "-c", f'ulimit -v {6 * 2**20} && exec "$0" "$@"', sys.executable]
    t0 = time.perf_counter()
    p = subprocess.run([*limited, "-m", "jaxcert.cli", "certify", "--model", "huge_cutoff:model",
                        "--elements", "Ar", "--probes", "parity,stress_consistency", "--quiet"], env=_env(),
                       cwd=tmp_path, capture_output=True, text=True, timeout=120)
    err = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 2, p.stderr[-2000:]
    assert len(err) == 1 and err[0].startswith("jaxcert: error: --model: model 'huge-cutoff': cutoff 10000 Å")
    assert time.perf_counter() - t0 < 60


# ------------------------------------------------------------------------------------------ Ctrl-C
def _interruptible() -> None:
    """In the child: SIGINT back to its default, as in a terminal.  A shell that runs the test suite in the
    background (``pytest … &``) starts it with SIGINT ignored, the child inherits that, and Python then installs
    no KeyboardInterrupt handler: the signal would be ignored and the run would end with 0."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _certify_and_interrupt(tmp_path: Path, when) -> tuple[subprocess.CompletedProcess, float]:
    """Run certify in a process, send SIGINT once ``when(stderr_lines)`` holds, and return what came back and
    the seconds from the signal to the exit."""
    p = subprocess.Popen([sys.executable, "-m", "jaxcert.cli", "certify", "--model", "lj", "--elements", "Ar",
                          "--probes", "parity,equivariance,conservativeness,smoothness,betti,trimer",
                          "--json", "r.json"], env=_env(), cwd=tmp_path, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, preexec_fn=_interruptible)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(p.stderr), daemon=True)
    reader.start()
    deadline = time.time() + 120
    while not when(lines) and p.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    assert p.poll() is None, "the run ended before it could be interrupted"
    t0 = time.perf_counter()
    p.send_signal(signal.SIGINT)
    try:
        p.wait(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    took = time.perf_counter() - t0
    reader.join(5)
    return subprocess.CompletedProcess(p.args, p.returncode, p.stdout.read(), "".join(lines)), took


def test_ctrl_c_after_a_probe_exits_130_quickly_and_names_what_was_kept(tmp_path):
    res, took = _certify_and_interrupt(tmp_path, lambda lines: (tmp_path / "r.json").exists())
    last = res.stderr.strip().splitlines()[-1]
    assert res.returncode == 130 and took < 10, (res.returncode, took, res.stderr[-2000:])
    doc = json.loads((tmp_path / "r.json").read_text())
    n = len(doc["probes"])
    assert doc["complete"] is False and 1 <= n < 6
    assert last == f"jaxcert: interrupted: {n} of 6 probes kept in r.json; rerun the same command with --resume to " \
                   "run the rest"


def test_ctrl_c_before_any_probe_finished_claims_no_report(tmp_path):
    res, took = _certify_and_interrupt(tmp_path, lambda lines: any(ln.startswith("[1/6]") for ln in lines))
    last = res.stderr.strip().splitlines()[-1]
    assert res.returncode == 130 and took < 10, (res.returncode, took, res.stderr[-2000:])
    if (tmp_path / "r.json").exists():  # the first probe finished before the signal arrived
        pytest.skip("a probe finished between the signal and its delivery")
    assert last == "jaxcert: interrupted: no probe had finished, nothing was written to r.json"
