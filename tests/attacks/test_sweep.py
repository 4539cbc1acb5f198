"""SQLite sweep store: resumable, kill -9 safe, per-atom arrays in NPZ, CSV/Parquet export, dask executor.

Every sweep here uses the same grid shape (SW Si, 8 atoms, one FGSM run per chunk, max_steps 60) so that one compiled
program serves all of them.
"""

import csv
import hashlib
import io
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
from ase.build import bulk

import jaxcert
from jaxcert.attacks import AttackSpec, PipelineConfig, crystals, metrics
from jaxcert.attacks.sweep import ARRAY_FIELDS, Store, SweepProgress, _config_hash, sweep, task_key, text_progress

CFG = PipelineConfig(max_steps=60)
KW = dict(epsilons=[0.02], seeds=[42], attacks=[AttackSpec("fgsm", 1)], config=CFG, chunk=1)


def _structures(n=2):
    out = {}
    for seed in range(1, n + 1):
        a = bulk("Si", cubic=True)
        a.rattle(0.05, seed=seed)
        out[f"si_{seed}"] = a
    return out


@pytest.fixture(scope="module")
def model():
    return jaxcert.models.get("sw")


@pytest.fixture(scope="module")
def finished(model, tmp_path_factory):
    """A two-structure sweep, interrupted after one chunk and resumed."""
    path = str(tmp_path_factory.mktemp("sweep") / "sweep.sqlite")
    first = sweep(model, _structures(), store=Store(path), max_chunks=1, **KW)
    store = Store(path)  # reopened from disk
    n_after_first = len(store)
    second = sweep(model, _structures(), store=store, **KW)
    third = sweep(model, _structures(), store=store, **KW)
    return path, store, first, n_after_first, second, third


def test_keys_depend_on_every_parameter():
    spec = AttackSpec("pgd", 10)
    k = task_key("sw", "si", spec, 0.05, 42, CFG)
    assert k == task_key("sw", "si", AttackSpec("pgd", 10, 0.1), 0.05, 42, CFG)
    others = [task_key("lj", "si", spec, 0.05, 42, CFG), task_key("sw", "si2", spec, 0.05, 42, CFG),
              task_key("sw", "si", AttackSpec("pgd", 10, 0.2), 0.05, 42, CFG),
              task_key("sw", "si", spec, 0.051, 42, CFG), task_key("sw", "si", spec, 0.05, 43, CFG),
              task_key("sw", "si", spec, 0.05, 42, PipelineConfig(max_steps=61)),
              task_key("sw", "si", spec, 0.05, 42, CFG, dtype="float32")]
    assert len({k, *others}) == 8
    # float64 keys are those of stores written before the dtype was recorded
    old = ["sw", "si", "pgd", 10, repr(0.1), repr(0.05), 42, _config_hash(CFG)]
    assert k == hashlib.sha256(json.dumps(old).encode()).hexdigest()


def test_sweep_resumes(finished):
    path, store, first, n_after_first, second, third = finished
    assert first == {"requested": 2, "already_done": 0, "computed": 1, "remaining": 1}  # "interrupted"
    assert n_after_first == 1
    assert second == {"requested": 2, "already_done": 1, "computed": 1, "remaining": 0}
    assert third["computed"] == 0 and len(store) == 2
    rows = store.rows()
    assert [r["structure"] for r in rows] == ["si_1", "si_2"]
    assert all(r["attack"] == "fgsm" and r["epsilon_A"] == 0.02 and r["dtype"] == "float64" for r in rows)
    assert rows[0]["immediate"]["linf_displacement"] <= 0.02 + 1e-12
    assert store.rows(structure="si_2")[0]["seed"] == 42
    with pytest.raises(KeyError, match="unknown column"):
        store.rows(colour="red")


def test_arrays_match_the_rows(finished):
    path, store, *_ = finished
    files = sorted(os.listdir(path + ".arrays"))
    assert len(files) == 2 and all(f.endswith(".npz") for f in files)  # one per chunk, no temporary left
    for r in store.rows():
        arr = store.arrays(r["key"])
        assert set(arr) == set(ARRAY_FIELDS)
        assert arr["positions_final"].shape == (8, 3) and (arr["numbers"] == 14).all()
        ref = bulk("Si", cubic=True)
        ref.set_cell(arr["cell"])
        ref.set_positions(arr["positions_reference"])
        fin = ref.copy()
        fin.set_positions(arr["positions_final"])
        post = r["post_relaxation"]
        assert metrics.displacement(ref, fin)["max_displacement"] == pytest.approx(post["max_displacement"], rel=1e-12)
        assert float(arr["energy_final"] - arr["energy_reference"]) == pytest.approx(post["delta_energy"], rel=1e-9)
        dF = np.linalg.norm(arr["forces_adversarial"] - arr["forces_reference"], axis=1).max()
        assert dF == pytest.approx(r["immediate"]["max_delta_force"], rel=1e-12)
        # FGSM moved every coordinate by ±ε from the reference
        np.testing.assert_allclose(np.abs(arr["positions_adversarial"] - arr["positions_reference"]), 0.02,
                                   rtol=1e-9)
    with pytest.raises(KeyError, match="no finished run"):
        store.arrays("0" * 64)


def test_export_csv_and_parquet(finished, tmp_path, monkeypatch):
    _, store, *_ = finished
    rows = store.rows()
    assert store.export(tmp_path / "runs.csv") == 2
    with open(tmp_path / "runs.csv") as fh:
        got = list(csv.DictReader(fh))
    assert [g["structure"] for g in got] == ["si_1", "si_2"] and list(got[0])[:3] == ["key", "model", "dtype"]
    for g, r in zip(got, rows, strict=True):
        assert float(g["post_relaxation.max_displacement"]) == r["post_relaxation"]["max_displacement"]
        assert float(g["epsilon_percent_abc.2"]) == r["epsilon_percent_abc"][2]
    pq = pytest.importorskip("pyarrow.parquet")
    assert store.export(tmp_path / "runs.parquet", structure="si_2") == 1
    t = pq.read_table(tmp_path / "runs.parquet").to_pylist()
    assert t[0]["key"] == rows[1]["key"] and t[0]["steps_after"] == rows[1]["steps_after"]
    assert t[0]["immediate.delta_energy"] == rows[1]["immediate"]["delta_energy"]
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # pyarrow absent: a clear message, CSV still works
    with pytest.raises(ImportError, match="needs pyarrow"):
        store.export(tmp_path / "again.parquet")
    with pytest.raises(ValueError, match="use .csv or .parquet"):
        store.export(tmp_path / "runs.xlsx")


def test_old_store_is_migrated(tmp_path):
    path = str(tmp_path / "old.sqlite")
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE runs (key TEXT PRIMARY KEY, model TEXT NOT NULL, structure TEXT NOT NULL, attack TEXT "
               "NOT NULL, n_steps INTEGER NOT NULL, alpha_ratio REAL NOT NULL, epsilon REAL NOT NULL, seed INTEGER "
               "NOT NULL, config_hash TEXT NOT NULL, version TEXT NOT NULL, row TEXT NOT NULL)")
    db.execute("INSERT INTO runs VALUES ('k', 'sw', 'si', 'fgsm', 1, 1.0, 0.02, 42, 'h', '0.1.0', '{\"seed\": 42}')")
    db.commit()
    db.close()
    store = Store(path)
    (r,) = store.rows()
    assert r["dtype"] == "float64" and r["key"] == "k" and r["seed"] == 42
    with pytest.raises(KeyError, match="no stored arrays"):
        store.arrays("k")


EVENTS = [
    {"event": "start", "total": 5, "done": 1, "n_chunks": 2, "scheduled": 4},
    {"event": "chunk_done", "chunk": 1, "n_chunks": 2, "labels": ["a"], "stored": 1, "computed": 1, "done": 2,
     "total": 5, "scheduled": 4, "elapsed_s": 2.0},
    {"event": "end", "computed": 1, "elapsed_s": 2.5},
]


def test_text_progress_is_plain_lines_with_elapsed_and_eta():
    out = io.StringIO()
    show = text_progress(out)
    for ev in EVENTS:
        show(ev)
    lines = out.getvalue().splitlines()
    assert lines[0] == "sweep: 5 runs requested, 1 already stored, 4 to compute in 2 chunk(s)"
    # 1 run in 2 s, 3 of the 4 scheduled runs left: 6 s
    assert lines[1] == "sweep: chunk 1/2 (a): 2/5 runs (40%), elapsed 0:00:02, eta 0:00:06"
    assert "\r" not in out.getvalue() and "\x1b" not in out.getvalue()  # no escape codes off a terminal
    # SweepProgress falls back to the same lines when its stream is not a terminal
    plain = io.StringIO()
    with SweepProgress(plain) as progress:
        for ev in EVENTS:
            progress(ev)
    assert plain.getvalue() == out.getvalue()


def test_rich_progress_on_a_terminal():
    out = io.StringIO()
    progress = SweepProgress(out, terminal=True)
    progress(EVENTS[0])
    time.sleep(0.05)
    progress(EVENTS[1])
    progress.close()  # what the CLI does in a finally block; idempotent
    progress.close()
    text = out.getvalue()
    assert "\x1b[" in text  # rich drew a live display (ANSI codes), which the plain mode never does
    assert "1/4" in text and "1/2 chunks (a)" in text and "eta 0:00:0" in text


def test_dask_executor_matches_local(model, finished, tmp_path):
    distributed = pytest.importorskip("distributed")
    _, local, *_ = finished
    with distributed.LocalCluster(processes=False, n_workers=1, threads_per_worker=1, dashboard_address=None) as c:
        with distributed.Client(c) as client:
            store = Store(str(tmp_path / "dask.sqlite"))
            events = []
            counts = sweep(model, _structures(), store=store, executor="dask", client=client, progress=events.append,
                           **KW)
    assert counts == {"requested": 2, "already_done": 0, "computed": 2, "remaining": 0}
    assert [e["event"] for e in events] == ["start", "chunk_done", "chunk_done", "end"]
    assert store.rows() == local.rows()  # same keys, same metric rows
    for r in store.rows():
        np.testing.assert_array_equal(store.arrays(r["key"])["positions_final"],
                                      local.arrays(r["key"])["positions_final"])
    with pytest.raises(ValueError, match="executor: got 'ray'"):
        sweep(model, _structures(), executor="ray", **KW)


def test_kill_9_loses_nothing_finished_and_never_duplicates(model, tmp_path):
    """A sweep process killed (SIGKILL) while computing its second chunk; the rerun (in this process, with the
    module's model, whose programs the other sweeps compiled) completes the grid."""
    path = str(tmp_path / "killed.sqlite")
    script = textwrap.dedent(f"""
        import time, jax
        jax.config.update("jax_enable_x64", True)
        from ase.build import bulk
        import jaxcert
        from jaxcert.attacks import AttackSpec, PipelineConfig
        from jaxcert.attacks.sweep import Store, sweep
        structures = {{}}
        for seed in (1, 2, 3):
            a = bulk("Si", cubic=True)
            a.rattle(0.05, seed=seed)
            structures[f"si_{{seed}}"] = a
        def progress(ev):
            if ev["event"] == "chunk_done" and ev["chunk"] == 1:
                print("CHUNK1", flush=True)
                time.sleep(120)  # stands for the second chunk's computation
        sweep(jaxcert.models.get("sw"), structures, epsilons=[0.02], seeds=[42], attacks=[AttackSpec("fgsm", 1)],
              config=PipelineConfig(max_steps=60), chunk=1, store=Store({path!r}), progress=progress)
    """)
    root = os.path.dirname(os.path.dirname(jaxcert.__file__))
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=env)
    try:
        t0 = time.time()
        line = proc.stdout.readline()
        assert line.strip() == "CHUNK1", f"subprocess ended early ({time.time() - t0:.0f} s)"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    store = Store(path)
    assert len(store) == 1  # the finished chunk survived, nothing else
    (kept,) = store.rows()
    assert store.arrays(kept["key"])["positions_final"].shape == (8, 3)
    structures = _structures(3)
    counts = sweep(model, structures, store=store, **KW)
    assert counts == {"requested": 3, "already_done": 1, "computed": 2, "remaining": 0}
    keys = [r["key"] for r in store.rows()]
    assert len(keys) == len(set(keys)) == 3
    assert store.rows(structure=kept["structure"])[0]["key"] == kept["key"]


def test_element_cell_rows_record_the_build_and_the_stationary_start(model):
    """An element's cell (here unrepeated diamond Si, relaxed = ideal, g = 0 by symmetry): rows record how it was
    built, its tag enters the key, FGSM is flagged stationary and moves nothing, R+FGSM moves (same grid shape as
    the other sweeps, so no new compilation)."""
    atoms = crystals.element_cell("Si", min_length=0)
    store = Store(":memory:")
    kw = dict(KW, attacks=[AttackSpec("fgsm", 1), AttackSpec("fgsm", 1, random_start=True)], chunk=1)
    for spec in kw.pop("attacks"):
        sweep(model, {"Si": atoms}, store=store, attacks=[spec], **kw)
    plain, rs = sorted(store.rows(), key=lambda r: r["random_start"])  # "none" < "sign"
    for r in (plain, rs):
        assert r["structure_source"] == "ase.build.bulk('Si', cubic=True).repeat((1, 1, 1))"
        assert r["repeats"] == [1, 1, 1] and r["n_atoms"] == 8 and r["stationary_start"] is True
    assert plain["key"] == task_key(model.name, "Si", AttackSpec("fgsm", 1), 0.02, 42, CFG,
                                    structure_tag=atoms.info["jaxcert_key"])
    assert plain["key"] != task_key(model.name, "Si", AttackSpec("fgsm", 1), 0.02, 42, CFG)
    assert plain["immediate"]["linf_displacement"] == 0.0 and "stationary point" in plain["warnings"][0]
    assert "moved nothing" in plain["warnings"][0]
    assert rs["attack_label"] == "R+FGSM" and rs["alpha_ratio"] == 0.5
    assert rs["immediate"]["linf_displacement"] == pytest.approx(0.02, rel=1e-9)  # ±ε/2 ± ε/2 reaches ±ε
    assert "random sign start" in rs["warnings"][0] and rs["key"] != plain["key"]
