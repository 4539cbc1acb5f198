r"""Resumable sweeps: (structure × attack × ε × seed) runs into an SQLite store, one row per finished run.

The experiment of docs/attacks.md §5 is a set of independent runs keyed by their
parameters.  :func:`sweep` computes the keys of every requested run, skips the
keys already in the store, and runs the rest with :func:`jaxcert.attacks.run_grid`
in chunks of structures (each chunk one vmapped program over its pending
(attack, ε, seed) grid; structures of different sizes are padded to a common
size).

Durability (what a ``kill -9`` can and cannot lose):

* the per-atom arrays of a chunk are written first, to a temporary file that is
  fsynced and renamed into place (``<db>.arrays/chunk-<hash>.npz``, the hash of
  the chunk's run keys);
* then the chunk's rows, each pointing at that file, are inserted in **one
  SQLite transaction** (``INSERT OR IGNORE`` on the key, the primary key).

A killed sweep therefore loses at most the chunks in flight: a row exists only
once its arrays are on disk, a rerun skips every stored key and never
duplicates one, and an interrupted chunk leaves at worst an unreferenced NPZ
that the rerun overwrites (same keys, same name) or that stays unused.

A row stores the run's parameters as columns, the full metric row
(:func:`jaxcert.attacks.metrics.run_metrics`) as JSON, the dtype, the
configuration hash and the jaxcert version (docs/attacks.md §5, proposed).  The key
is the SHA-256 of (model, structure label, attack, n, α/ε, ε, seed,
configuration hash), with the dtype appended when it is not float64 (float64 keys
are those of stores written before the dtype was recorded).

Executors: ``"local"`` runs the chunks one after another in this process;
``"dask"`` submits each chunk as a task to ``dask.distributed`` (a
``LocalCluster`` by default, or the scheduler at ``scheduler``, or a given
``client``) and stores results as they complete; the calling process stays the
only writer of the SQLite file and the NPZ directory.  The model is shipped to
the workers with cloudpickle.

Export: :meth:`Store.export` writes one flat row per run (nested metrics as
dotted columns) to CSV, or to Parquet when pyarrow is installed.

Boundary (docs/attacks.md §8): :func:`sweep` checks its arguments (ε finite and
> 0, seeds integers in [0, 2³¹ − 1], chunk and max_chunks integers ≥ 1, every
structure with at least two atoms) before it computes anything, and raises
:class:`~jaxcert.core.inputs.InputError` naming the argument.

Progress (docs/attacks.md §5): :class:`SweepProgress` renders the events of
:func:`sweep` with ``rich.progress`` on a terminal (bar, runs done, elapsed time,
time remaining) and as one plain line per chunk (elapsed, ETA) otherwise.

Provenance: an ``ase.Atoms`` structure carrying ``info["jaxcert_source"]`` (and
``info["supercell"]``) has them recorded in its rows as ``structure_source`` and
``repeats``; ``info["jaxcert_key"]`` (set by
:func:`jaxcert.attacks.crystals.element_cell`) enters the run key, so that runs on
a differently built cell under the same label are never taken as done.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import io
import json
import math
import os
import sqlite3
import sys
import time
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import numpy as np

from jaxcert._version import __version__
from jaxcert.attacks.metrics import run_metrics
from jaxcert.attacks.pipeline import ATTACKS, AttackSpec, PipelineConfig, check_attackable, run_grid
from jaxcert.core import inputs
from jaxcert.core.files import atomic_write
from jaxcert.core.inputs import InputError
from jaxcert.core.structure import Structure

__all__ = ["Store", "check_store", "APPLICATION_ID", "SCHEMA_VERSION", "task_key", "sweep", "grid_rows",
           "text_progress", "SweepProgress", "ARRAY_FIELDS"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    structure TEXT NOT NULL,
    attack TEXT NOT NULL,
    n_steps INTEGER NOT NULL,
    alpha_ratio REAL NOT NULL,
    epsilon REAL NOT NULL,
    seed INTEGER NOT NULL,
    config_hash TEXT NOT NULL,
    version TEXT NOT NULL,
    row TEXT NOT NULL,
    dtype TEXT NOT NULL DEFAULT 'float64',
    arrays TEXT
)
"""
_COLUMNS = ("key", "model", "structure", "attack", "n_steps", "alpha_ratio", "epsilon", "seed", "config_hash",
            "version", "row", "dtype", "arrays")

#: Per-atom arrays stored for every run (real atoms only; Å, eV/Å, eV, amu-free): ``<key>/<field>`` in the NPZ.
ARRAY_FIELDS = ("numbers", "cell", "positions_reference", "forces_reference", "energy_reference",
                "positions_adversarial", "forces_adversarial", "energy_adversarial", "positions_final",
                "forces_final", "energy_final")


def _config_hash(cfg: PipelineConfig) -> str:
    return hashlib.sha256(json.dumps(dataclasses.asdict(cfg), sort_keys=True).encode()).hexdigest()[:16]


def task_key(model: str, structure: str, spec: AttackSpec, eps: float, seed: int, cfg: PipelineConfig,
             dtype: str = "float64", structure_tag: str | None = None) -> str:
    """SHA-256 key of one run's parameters.

    The dtype enters only when it is not float64, the R+FGSM random start only when it is on and
    ``structure_tag`` (how an element's cell was built) only when given, so keys of stores written before these
    existed are unchanged (module docstring).
    """
    doc = [model, structure, spec.name, spec.n_steps, repr(float(spec.alpha)), repr(float(eps)), int(seed),
           _config_hash(cfg)]
    if dtype != "float64":
        doc.append(dtype)
    if spec.sign_start > 0:
        doc.append(f"random_start=sign:{spec.sign_start!r}")
    if structure_tag is not None:
        doc.append(f"structure={structure_tag}")
    return hashlib.sha256(json.dumps(doc).encode()).hexdigest()


#: SQLite ``PRAGMA application_id`` of a jaxcert sweep store: the bytes ``"JXCS"`` (0x4A584353), stamped on
#: creation; a file with another id belongs to another application and is never opened for writing.
APPLICATION_ID = 0x4A584353
#: SQLite ``PRAGMA user_version`` of the store schema: 1 = the ``runs`` table without ``dtype``/``arrays`` (stores
#: written before either existed), 2 = today's table (:data:`_COLUMNS`).
SCHEMA_VERSION = 2
#: Columns every jaxcert ``runs`` table has had since the first release (how a store made before the
#: application id existed is recognised).
_LEGACY_COLUMNS = frozenset(_COLUMNS) - {"dtype", "arrays"}
_SQLITE_MAGIC = b"SQLite format 3\x00"


def check_store(path: str, name: str = "path", *, create: bool = True) -> str:
    """Decide, before anything is written, whether ``path`` may be opened as a sweep store; returns ``"new"``,
    ``"jaxcert"`` (stamped store of this or an older schema) or ``"legacy"`` (a store made before the application id
    existed, recognised by its ``runs`` table).  Reads only: the file is left byte for byte as it was.

    Refused with :class:`~jaxcert.core.inputs.InputError` naming ``name``: a file that is not SQLite, an SQLite file
    with another application id, an unstamped SQLite file whose tables are not a jaxcert store (no ``runs``
    table, or one with other columns), a store of a newer schema, and (``create=False``) a missing or empty file.
    """
    p = str(path)
    if p == ":memory:":
        return "new"
    if os.path.islink(p):  # sqlite would open (and write) the file the link points at
        raise inputs.InputError(f"{name}: {p!r} is a symbolic link; allowed: a jaxcert sweep store or a new path, "
                                "not a link (jaxcert writes nothing through a link)")
    if not os.path.exists(p) or (os.path.isfile(p) and os.path.getsize(p) == 0):
        if not create:
            raise inputs.InputError(f"{name}: no sweep store at {p!r}" + (" (the file is empty)" if os.path.exists(p)
                                                                          else "") + "; allowed: an SQLite file "
                                    "written by jaxcert sweep")
        return "new"
    if not os.path.isfile(p):
        raise inputs.InputError(f"{name}: {p!r} is not a regular file; allowed: an SQLite file written by jaxcert "
                                "sweep, or a new path")
    try:
        with open(p, "rb") as fh:
            head = fh.read(100)
    except OSError as err:
        raise inputs.InputError(f"{name}: cannot read {p!r} ({err.strerror or err})") from None
    if len(head) < 100 or not head.startswith(_SQLITE_MAGIC):
        raise inputs.InputError(f"{name}: {p!r} is not an SQLite file; allowed: a jaxcert sweep store or a new "
                                "path (the file was left unchanged)")
    app = int.from_bytes(head[68:72], "big")
    version = int.from_bytes(head[60:64], "big")
    if app == APPLICATION_ID:
        if version > SCHEMA_VERSION:
            raise inputs.InputError(f"{name}: {p!r} is a jaxcert sweep store of schema {version}, newer than this "
                                    f"jaxcert's {SCHEMA_VERSION}; allowed: a store of schema <= {SCHEMA_VERSION} "
                                    "(upgrade jaxcert)")
        return "jaxcert"
    if app != 0:
        raise inputs.InputError(f"{name}: {p!r} belongs to another application (SQLite application_id "
                                f"0x{app:08X}, jaxcert's is 0x{APPLICATION_ID:08X}); allowed: a jaxcert sweep store "
                                "or a new path (the file was left unchanged)")
    # no application id: a store written before jaxcert stamped one, or somebody else's database
    try:
        ro = sqlite3.connect(f"file:{urllib.parse.quote(os.path.abspath(p))}?mode=ro", uri=True)
        try:
            tables = {r[0] for r in ro.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            cols = {r[1] for r in ro.execute("PRAGMA table_info(runs)")} if "runs" in tables else set()
        finally:
            ro.close()
    except sqlite3.Error as err:
        raise inputs.InputError(f"{name}: cannot read {p!r} as SQLite ({err}); allowed: a jaxcert sweep store or "
                                "a new path") from None
    if "runs" not in tables or not _LEGACY_COLUMNS <= cols or not cols <= set(_COLUMNS):
        what = ("has no tables" if not tables else f"has no 'runs' table (tables: {', '.join(sorted(tables)[:5])})"
                if "runs" not in tables else f"has a 'runs' table with other columns ({', '.join(sorted(cols))})")
        raise inputs.InputError(f"{name}: {p!r} is an SQLite file without jaxcert's application id that {what}: not "
                                "a jaxcert sweep store; allowed: a jaxcert sweep store or a new path (the file was "
                                "left unchanged)")
    return "legacy"


class Store:
    """SQLite store of finished runs, with per-atom arrays in NPZ files next to it.

    The file identifies itself (docs/attacks.md §5, "Store identity"): ``PRAGMA application_id`` =
    :data:`APPLICATION_ID` and ``PRAGMA user_version`` = :data:`SCHEMA_VERSION`, set when the store is created.
    An existing file is opened only when it carries that id, or when it is a store written before the id existed
    (no id, and a ``runs`` table with exactly jaxcert's columns), which is then migrated and stamped.  Anything
    else (not SQLite, another application's id, other tables) raises :class:`~jaxcert.core.inputs.InputError` naming
    ``name`` before the file is written to (:func:`check_store`).

    Args:
      path: the SQLite file (created or resumed), or ``":memory:"``.
      arrays: directory of the NPZ files; default ``<path>.arrays`` for a file store, none (no arrays kept) for
        ``":memory:"``.
      name: how error messages name the path (the CLI passes ``--db``).
      create: create the store when ``path`` does not exist (``False``: refuse, for readers such as plot-sweep).
    """

    def __init__(self, path: str, arrays: str | None = None, *, name: str = "path", create: bool = True):
        self.path = str(path)
        kind = check_store(self.path, name, create=create)
        try:
            self.db = sqlite3.connect(self.path)
            with self.db:
                if kind == "new":
                    self.db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                self.db.execute(_SCHEMA)
                have = {r[1] for r in self.db.execute("PRAGMA table_info(runs)")}
                if "dtype" not in have:  # a store written before dtypes were recorded: all its runs were float64
                    self.db.execute("ALTER TABLE runs ADD COLUMN dtype TEXT NOT NULL DEFAULT 'float64'")
                if "arrays" not in have:
                    self.db.execute("ALTER TABLE runs ADD COLUMN arrays TEXT")
                if kind != "jaxcert" or int(self.db.execute("PRAGMA user_version").fetchone()[0]) < SCHEMA_VERSION:
                    self.db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                    self.db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        except sqlite3.Error as err:
            raise inputs.InputError(f"{name}: cannot open {self.path!r} as a sweep store ({err})") from None
        if arrays is None and self.path != ":memory:":
            arrays = self.path + ".arrays"
        self.arrays_dir = arrays

    def keys(self) -> set[str]:
        return {k for (k,) in self.db.execute("SELECT key FROM runs")}

    def put(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Insert rows (dicts with the columns of the ``runs`` table) in one transaction; existing keys are kept."""
        q = f"INSERT OR IGNORE INTO runs ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})"
        with self.db:
            self.db.executemany(q, [tuple(r.get(c) for c in _COLUMNS) for r in rows])

    def write_arrays(self, keys: Sequence[str], arrays: Mapping[str, Mapping[str, np.ndarray]]) -> str | None:
        """Write the per-atom arrays of one chunk atomically (temp file, fsync, rename); returns the file name."""
        if self.arrays_dir is None or not arrays:
            return None
        if os.path.islink(self.arrays_dir):
            raise InputError(f"{self.arrays_dir!r} is a symbolic link; jaxcert writes no file through a link")
        os.makedirs(self.arrays_dir, exist_ok=True)
        name = "chunk-" + hashlib.sha256("\n".join(sorted(keys)).encode()).hexdigest()[:20] + ".npz"
        buf = io.BytesIO()
        np.savez(buf, **{f"{k}/{f}": np.asarray(v) for k, d in arrays.items() for f, v in d.items()})
        atomic_write(os.path.join(self.arrays_dir, name), buf.getvalue())  # exclusive temporary, fsync, rename
        return name

    def arrays(self, key: str) -> dict[str, np.ndarray]:
        """The per-atom arrays of one run (:data:`ARRAY_FIELDS`)."""
        got = self.db.execute("SELECT arrays FROM runs WHERE key = ?", (key,)).fetchone()
        if got is None:
            raise KeyError(f"no finished run with key {key!r} in {self.path}")
        if got[0] is None or self.arrays_dir is None:
            raise KeyError(f"run {key[:12]}… has no stored arrays (store without an arrays directory)")
        with np.load(os.path.join(self.arrays_dir, got[0])) as z:
            return {f: z[f"{key}/{f}"] for f in ARRAY_FIELDS if f"{key}/{f}" in z.files}

    def rows(self, **where: Any) -> list[dict[str, Any]]:
        """Metric rows (dicts, with ``key``, ``model``, ``dtype``), optionally filtered on columns, e.g.
        ``rows(structure="srtio3")``."""
        q = "SELECT key, model, dtype, structure, row FROM runs"
        if where:
            unknown = set(where) - set(_COLUMNS)
            if unknown:
                raise KeyError(f"unknown column(s) {sorted(unknown)}; filter on {', '.join(_COLUMNS[1:10])} or dtype")
            q += " WHERE " + " AND ".join(f"{k} = ?" for k in where)
        out = []
        order = " ORDER BY model, dtype, structure, attack, n_steps, alpha_ratio, epsilon, seed"
        for key, model, dtype, label, row in self.db.execute(q + order, tuple(where.values())):
            d = json.loads(row)
            d.update({"structure": label, "key": key, "model": model, "dtype": dtype})
            out.append(d)
        return out

    def export(self, path: str, **where: Any) -> int:
        """Write the rows as a flat table (nested metrics as ``stage.metric`` columns) to ``path``.

        ``.csv`` always works; ``.parquet`` needs pyarrow (``pip install 'jaxcert[sweep]'``).  Returns the number
        of rows written.
        """
        flat = [_flatten(r) for r in self.rows(**where)]
        ident = ["key", "model", "dtype", "structure", "attack", "attack_label", "n_steps", "alpha_ratio", "epsilon",
                 "seed"]
        cols = [c for c in ident if any(c in r for r in flat)]
        cols += sorted({c for r in flat for c in r} - set(cols))
        ext = os.path.splitext(str(path))[1].lower()
        if ext == ".parquet":
            try:
                import pyarrow as pa
                import pyarrow.parquet as pq
            except ImportError:
                raise ImportError("Store.export to Parquet needs pyarrow: pip install 'jaxcert[sweep]' (or pyarrow); "
                                  "a .csv path needs nothing extra") from None
            buf = io.BytesIO()
            pq.write_table(pa.table({c: _column([r.get(c) for r in flat]) for c in cols}), buf)
            atomic_write(str(path), buf.getvalue())  # atomically, never through a link (jaxcert.core.files)
        elif ext == ".csv":
            text = io.StringIO(newline="")
            w = csv.DictWriter(text, fieldnames=cols)
            w.writeheader()
            w.writerows(flat)
            atomic_write(str(path), text.getvalue())
        else:
            raise InputError(f"Store.export: unknown format {ext or '(no extension)'!r}; use .csv or .parquet")
        return len(flat)

    def __len__(self) -> int:
        return int(self.db.execute("SELECT COUNT(*) FROM runs").fetchone()[0])

    def close(self) -> None:
        self.db.close()


def _flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        name = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(_flatten(v, name + "."))
        elif isinstance(v, (list, tuple)):
            out.update({f"{name}.{i}": x for i, x in enumerate(v)})
        else:
            out[name] = v
    return out


def _column(values: list[Any]) -> list[Any]:
    """One Parquet column: bools stay bools, mixed ints and floats become floats, anything else strings."""
    present = [v for v in values if v is not None]
    if present and all(isinstance(v, bool) for v in present):
        return values
    if present and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present):
        if any(isinstance(v, float) for v in present):
            return [None if v is None else float(v) for v in values]
        return values
    return [None if v is None else str(v) for v in values]


# ----------------------------------------------------------------------------------------------- progress
def _hms(seconds: float) -> str:
    """``h:mm:ss`` (``--:--:--`` when unknown)."""
    if not math.isfinite(seconds) or seconds < 0:
        return "-:--:--"
    s = int(round(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def _eta(ev: Mapping[str, Any]) -> float:
    """Seconds left for the runs this call still has to compute, at the mean rate so far (compilation included)."""
    rate = ev["computed"] / ev["elapsed_s"] if ev["elapsed_s"] > 0 else math.nan
    left = ev.get("scheduled", ev["total"] - ev["done"] + ev["computed"]) - ev["computed"]
    return left / rate if rate and rate > 0 else math.nan


def text_progress(stream: Any = None) -> Callable[[Mapping[str, Any]], None]:
    """Plain-text progress for :func:`sweep` (logs, CI, a stderr that is not a terminal): one line per event, e.g.
    ``sweep: chunk 3/6 (si_1, si_2): 120/240 runs (50%), elapsed 0:01:23, eta 0:01:23``; no escape codes."""
    stream = sys.stderr if stream is None else stream

    def show(ev: Mapping[str, Any]) -> None:
        if ev["event"] == "start":
            stream.write(f"sweep: {ev['total']} runs requested, {ev['done']} already stored, "
                         f"{ev.get('scheduled', '?')} to compute in {ev['n_chunks']} chunk(s)\n")
        elif ev["event"] == "chunk_done":
            frac = ev["done"] / max(ev["total"], 1)
            stream.write(f"sweep: chunk {ev['chunk']}/{ev['n_chunks']} ({', '.join(ev['labels'])}): "
                         f"{ev['done']}/{ev['total']} runs ({100 * frac:.0f}%), elapsed {_hms(ev['elapsed_s'])}, "
                         f"eta {_hms(_eta(ev))}\n")
        elif ev["event"] == "end":
            stream.write(f"sweep: {ev['computed']} run(s) computed in {_hms(ev.get('elapsed_s', math.nan))}\n")
        stream.flush()

    return show


def _remaining_column() -> Any:
    """A rich column ``eta h:mm:ss``: elapsed × (runs left / runs done), the mean rate so far.

    rich's own ``TimeRemainingColumn`` needs two finished chunks inside its speed window (a sweep's chunks can be
    minutes apart, and the first one includes compilation), so it would show no estimate for a long time."""
    import rich.progress as rp
    import rich.text

    class Remaining(rp.ProgressColumn):
        def render(self, task: Any) -> Any:
            left = math.nan
            if task.completed and task.elapsed and task.total is not None:
                left = task.elapsed * (task.total - task.completed) / task.completed
            return rich.text.Text(f"eta {_hms(left)}", style="progress.remaining")

    return Remaining()


class SweepProgress:
    """Progress display for :func:`sweep`: ``rich.progress`` on a terminal, :func:`text_progress` lines otherwise.

    The rich bar shows runs done of those this call computes, the elapsed time and an estimate of the time
    remaining (from the mean rate of the finished chunks, live between chunks).  Use as a context manager (or call
    :meth:`close`) so that the live display is stopped even when the sweep raises.

    Args:
      stream: where to write (default stderr).
      terminal: force (True) or refuse (False) the rich display; default: ``stream.isatty()``.
    """

    def __init__(self, stream: Any = None, *, terminal: bool | None = None):
        self.stream = sys.stderr if stream is None else stream
        tty = bool(getattr(self.stream, "isatty", lambda: False)()) if terminal is None else bool(terminal)
        self._plain = None if tty else text_progress(self.stream)
        self._progress: Any = None
        self._task: Any = None

    def __call__(self, ev: Mapping[str, Any]) -> None:
        if self._plain is not None:
            self._plain(ev)
            return
        if ev["event"] == "start":
            import rich.console
            import rich.progress as rp

            console = rich.console.Console(file=self.stream, force_terminal=True)
            console.print(f"sweep: {ev['total']} runs requested, {ev['done']} already stored, "
                          f"{ev.get('scheduled', '?')} to compute in {ev['n_chunks']} chunk(s)", highlight=False)
            self._progress = rp.Progress(rp.TextColumn("sweep"), rp.BarColumn(), rp.MofNCompleteColumn(),
                                         rp.TextColumn("runs"), rp.TimeElapsedColumn(), _remaining_column(),
                                         rp.TextColumn("{task.fields[chunk]}"), console=console)
            self._progress.start()
            self._task = self._progress.add_task("sweep", total=max(int(ev.get("scheduled", 0)), 1),
                                                 chunk=f"0/{ev['n_chunks']} chunks")
        elif ev["event"] == "chunk_done" and self._progress is not None:
            self._progress.update(self._task, advance=ev["stored"],
                                  chunk=f"{ev['chunk']}/{ev['n_chunks']} chunks ({', '.join(ev['labels'])})")
        elif ev["event"] == "end":
            self.close()

    def close(self) -> None:
        """Stop the live display (idempotent)."""
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def __enter__(self) -> SweepProgress:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


# ----------------------------------------------------------------------------------------------- the sweep
def _structure(x: Any, dtype: Any):

    if isinstance(x, Structure):
        return x if dtype is None or x.dtype == dtype else Structure.from_ase(x.to_ase(), dtype=dtype)
    return Structure.from_ase(x, dtype=dtype)


def _provenance(x: Any) -> dict[str, Any]:
    """``structure_source`` and ``repeats`` of an ``ase.Atoms`` that records them in ``info`` (else nothing)."""
    info = getattr(x, "info", None) or {}
    out: dict[str, Any] = {}
    if "jaxcert_source" in info:
        out["structure_source"] = str(info["jaxcert_source"])
    if "supercell" in info:
        out["repeats"] = [int(m) for m in info["supercell"]]
    return out


def _unique(name: str, values: list[float]) -> list[float]:
    dup = sorted({v for v in values if values.count(v) > 1})
    if dup:
        raise inputs.InputError(f"{name}: {dup} given more than once; each value must appear once")
    return values


def _run_chunk(model: Any, job: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, dict[str, np.ndarray]]]:
    """Compute one chunk (in this process or on a dask worker): metric rows and per-atom arrays of its runs."""
    if job["dtype"] == "float64":  # a fresh dask worker process starts without x64 and would silently use float32
        jax.config.update("jax_enable_x64", True)
    g = run_grid(model, job["structures"], job["epsilons"], job["seeds"], attacks=job["attacks"], config=job["config"])
    got = str(np.asarray(g.reference.structure.positions).dtype)
    if got != job["dtype"]:
        raise RuntimeError(f"sweep chunk computed in {got}, requested {job['dtype']}")
    rows, arrays = [], {}
    ref_pos = np.asarray(g.reference.structure.positions, np.float64)
    ref_F = np.asarray(g.reference.forces, np.float64)
    masks = np.asarray(g.reference.structure.mask)
    for t in job["tasks"]:
        s, a, e, k = t["index"]
        row = run_metrics(g, s, a, e, k)
        row["structure"] = t["label"]
        row.update(job.get("provenance", {}).get(t["label"], {}))
        rows.append({**t["columns"], "row": json.dumps(_plain(row), allow_nan=True)})
        if job["with_arrays"]:
            m = masks[s]
            adv, fin = g.runs.adversarial, g.runs.final
            run = [np.asarray(x)[s, a, e, k] for x in (adv.structure.positions, adv.forces, adv.energy,
                                                      fin.structure.positions, fin.forces, fin.energy)]
            arrays[t["columns"]["key"]] = {
                "numbers": np.asarray(g.reference.structure.numbers)[s][m],
                "cell": np.asarray(g.reference.structure.cell, np.float64)[s],
                "positions_reference": ref_pos[s][m], "forces_reference": ref_F[s][m],
                "energy_reference": np.float64(np.asarray(g.reference.energy)[s]),
                "positions_adversarial": np.asarray(run[0], np.float64)[m],
                "forces_adversarial": np.asarray(run[1], np.float64)[m], "energy_adversarial": np.float64(run[2]),
                "positions_final": np.asarray(run[3], np.float64)[m],
                "forces_final": np.asarray(run[4], np.float64)[m], "energy_final": np.float64(run[5]),
            }
    return rows, arrays


def sweep(model, structures: Mapping[str, Any], epsilons: Sequence[float], seeds: Sequence[int] = (42,),
          attacks: Sequence[AttackSpec] = ATTACKS, config: PipelineConfig | None = None, store: Store | None = None,
          chunk: int = 8, max_chunks: int | None = None, dry_run: bool = False,
          progress: Callable[[Mapping[str, Any]], None] | None = None, dtype: Any = None,
          executor: str = "local", scheduler: str | None = None, client: Any = None,
          cluster_kwargs: Mapping[str, Any] | None = None) -> dict[str, int]:
    """Run every missing (structure, attack, ε, seed) and store it (module docstring).

    Args:
      model: a JAX :class:`~jaxcert.Model`.
      structures: label → ``ase.Atoms`` or :class:`~jaxcert.Structure`.
      epsilons, seeds, attacks, config: the grid (see :func:`jaxcert.attacks.run_grid`; default PipelineConfig()).
      store: the :class:`Store` (default: in memory).
      chunk: structures per vmapped program (one task with dask), an integer ≥ 1.
      max_chunks: compute at most this many chunks, an integer ≥ 1 (for time-boxed jobs; rerun to continue).
      dry_run: count requested, stored and pending runs and compute nothing.
      progress: optional callback receiving event dicts (``start`` with ``total``/``done``/``scheduled`` runs,
        ``chunk_done`` with ``done``/``total``/``computed``/``elapsed_s``, ``end``); :class:`SweepProgress` renders
        them (rich bar on a terminal, plain lines otherwise).
      dtype: cast every structure to this float dtype (default: the structures' own, all the same).
      executor: ``"local"`` or ``"dask"``.
      scheduler: dask scheduler address (``tcp://host:8786``) instead of a LocalCluster.
      client: an existing ``distributed.Client`` (overrides ``scheduler``; not closed here).
      cluster_kwargs: keyword arguments of the default ``LocalCluster``.

    Returns:
      counts: ``requested``, ``already_done``, ``computed``, ``remaining``.

    Raises:
      InputError (a ValueError), before anything is computed, on a bad ε, seed, chunk, max_chunks, executor or
      attack, or a structure with fewer than two atoms (docs/attacks.md §8).
    """

    inputs.choice("executor", executor, ("local", "dask"))
    chunk = inputs.integer("chunk", chunk, minimum=1)
    if max_chunks is not None:
        max_chunks = inputs.integer("max_chunks", max_chunks, minimum=1)
    eps = _unique("epsilons", inputs.number_list("epsilons", list(np.atleast_1d(np.asarray(epsilons, object))),
                                                 unit="Å"))
    seeds = inputs.integer_list("seeds", list(np.atleast_1d(np.asarray(seeds, object))), seeds=True)
    if isinstance(attacks, AttackSpec):
        attacks = (attacks,)
    attacks = tuple(attacks)
    if not attacks or not all(isinstance(x, AttackSpec) for x in attacks):
        raise inputs.InputError(f"attacks: got {attacks!r}; allowed: a non-empty sequence of AttackSpec")
    store = store if store is not None else Store(":memory:")
    config = config if config is not None else PipelineConfig()
    provenance = {lab: _provenance(x) for lab, x in structures.items()}
    tags = {lab: (x.info.get("jaxcert_key") if hasattr(x, "info") else None) for lab, x in structures.items()}
    objs = {lab: _structure(x, dtype) for lab, x in structures.items()}
    for lab, s in objs.items():
        check_attackable(f"structures[{lab!r}]", s)
    dtypes = {str(s.dtype) for s in objs.values()}
    if len(dtypes) > 1:
        raise InputError(f"structures of mixed dtypes {sorted(dtypes)}; pass dtype= to cast them")
    dt = dtypes.pop() if dtypes else "float64"
    chash = _config_hash(config)
    done = store.keys()
    grid_keys = {
        lab: {(a, e, k): task_key(model.name, lab, spec, ev, sd, config, dt, tags[lab])
              for a, spec in enumerate(attacks) for e, ev in enumerate(eps) for k, sd in enumerate(seeds)}
        for lab in objs
    }
    requested = sum(len(v) for v in grid_keys.values())
    already = sum(key in done for v in grid_keys.values() for key in v.values())
    pending = [lab for lab, v in grid_keys.items() if any(key not in done for key in v.values())]
    jobs = []
    for start in range(0, len(pending), chunk):
        labels = pending[start : start + chunk]
        # the chunk's grid: every attack/ε/seed still missing for some structure of the chunk
        need = [ix for ix in grid_keys[labels[0]] if any(grid_keys[lab][ix] not in done for lab in labels)]
        a_idx = sorted({ix[0] for ix in need})
        e_idx = sorted({ix[1] for ix in need})
        k_idx = sorted({ix[2] for ix in need})
        tasks = []
        for s, lab in enumerate(labels):
            for ai, a in enumerate(a_idx):
                for ei, e in enumerate(e_idx):
                    for ki, k in enumerate(k_idx):
                        key = grid_keys[lab][(a, e, k)]
                        if key in done:
                            continue
                        spec = attacks[a]
                        tasks.append({"index": (s, ai, ei, ki), "label": lab, "columns": {
                            "key": key, "model": model.name, "structure": lab, "attack": spec.name,
                            "n_steps": spec.n_steps, "alpha_ratio": float(spec.alpha), "epsilon": eps[e],
                            "seed": seeds[k], "config_hash": chash, "version": __version__, "dtype": dt}})
        jobs.append({"labels": labels, "structures": [objs[lab] for lab in labels], "epsilons": [eps[i] for i in e_idx],
                     "seeds": [seeds[i] for i in k_idx], "attacks": [attacks[i] for i in a_idx], "config": config,
                     "tasks": tasks, "with_arrays": store.arrays_dir is not None, "dtype": dt,
                     "provenance": {lab: provenance[lab] for lab in labels}})
    if max_chunks is not None:
        jobs = jobs[:max_chunks]
    if dry_run:
        jobs = []
    state = {"computed": 0, "chunks": 0, "t0": time.perf_counter()}
    emit = progress if progress is not None else (lambda ev: None)
    emit({"event": "start", "total": requested, "done": already, "n_chunks": len(jobs),
          "scheduled": sum(len(j["tasks"]) for j in jobs)})

    def store_chunk(job, rows, arrays):
        name = store.write_arrays([r["key"] for r in rows], arrays)
        store.put([{**r, "arrays": name} for r in rows])
        state["computed"] += len(rows)
        state["chunks"] += 1
        emit({"event": "chunk_done", "chunk": state["chunks"], "n_chunks": len(jobs), "labels": job["labels"],
              "stored": len(rows), "computed": state["computed"], "done": already + state["computed"],
              "total": requested, "scheduled": sum(len(j["tasks"]) for j in jobs),
              "elapsed_s": time.perf_counter() - state["t0"]})

    if executor == "local":
        for job in jobs:
            store_chunk(job, *_run_chunk(model, job))
    elif jobs:
        _dask_run(model, jobs, store_chunk, scheduler, client, cluster_kwargs)
    emit({"event": "end", "computed": state["computed"], "elapsed_s": time.perf_counter() - state["t0"]})
    remaining = requested - already - state["computed"]
    return {"requested": requested, "already_done": already, "computed": state["computed"], "remaining": remaining}


def grid_rows(store: Store, model_name: str, structures: Mapping[str, Any], epsilons: Sequence[float],
              seeds: Sequence[int], attacks: Sequence[AttackSpec], config: PipelineConfig, dtype: str = "float64"
              ) -> list[dict[str, Any]]:
    """The stored rows of one grid (what :func:`sweep` with these arguments computes or finds done), in the store's
    order; runs not stored yet are absent.  ``jaxcert sweep`` prints them as a table
    (:func:`jaxcert.attacks.report.sweep_table`)."""
    keys = {task_key(model_name, lab, spec, ev, sd, config, dtype,
                     x.info.get("jaxcert_key") if hasattr(x, "info") else None)
            for lab, x in structures.items() for spec in attacks for ev in epsilons for sd in seeds}
    return [r for r in store.rows(model=model_name, dtype=dtype) if r["key"] in keys]


def _dask_run(model, jobs, store_chunk, scheduler, client, cluster_kwargs) -> None:
    """Submit every chunk as a dask task; store each result in this process as it completes."""
    try:
        from distributed import Client, LocalCluster, as_completed
    except ImportError:
        raise ImportError("executor='dask' needs dask.distributed: pip install 'jaxcert[sweep]' "
                          "(or 'dask[distributed]')") from None
    cluster = own = None
    if client is None:
        if scheduler:
            client = own = Client(scheduler)
        else:
            cluster = LocalCluster(**dict({"dashboard_address": None}, **(cluster_kwargs or {})))
            client = own = Client(cluster)
    try:
        # one copy of the model per worker, reused by all its tasks: a model unpickled per task would carry new
        # function objects and recompile every chunk
        remote_model = client.scatter(model, broadcast=True)
        futures = {client.submit(_run_chunk, remote_model, job, pure=False): job for job in jobs}
        try:
            for fut in as_completed(futures):
                store_chunk(futures[fut], *fut.result())
        except BaseException:
            client.cancel(list(futures))
            raise
    finally:
        if own is not None:
            own.close()
        if cluster is not None:
            cluster.close()


def _plain(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, (np.generic,)):
        return x.item()
    return x
