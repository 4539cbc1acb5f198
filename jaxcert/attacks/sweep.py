r"""Resumable sweeps: (structure × attack × ε × seed) runs into an SQLite store, one row per finished run.

The experiment of ATTACKS.md §5 is a set of independent runs keyed by their
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
configuration hash and the jaxcert version (ATTACKS.md §5, proposed).  The key
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
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import json
import math
import os
import sqlite3
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from jaxcert.attacks.pipeline import ATTACKS, AttackSpec, PipelineConfig, run_grid

__all__ = ["Store", "task_key", "sweep", "text_progress", "ARRAY_FIELDS"]

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
             dtype: str = "float64") -> str:
    """SHA-256 key of one run's parameters (the dtype enters only when it is not float64, see module docstring)."""
    doc = [model, structure, spec.name, spec.n_steps, repr(float(spec.alpha)), repr(float(eps)), int(seed),
           _config_hash(cfg)]
    if dtype != "float64":
        doc.append(dtype)
    return hashlib.sha256(json.dumps(doc).encode()).hexdigest()


class Store:
    """SQLite store of finished runs, with per-atom arrays in NPZ files next to it.

    Args:
      path: the SQLite file (created or resumed), or ``":memory:"``.
      arrays: directory of the NPZ files; default ``<path>.arrays`` for a file store, none (no arrays kept) for
        ``":memory:"``.
    """

    def __init__(self, path: str, arrays: str | None = None):
        self.path = str(path)
        self.db = sqlite3.connect(self.path)
        with self.db:
            self.db.execute(_SCHEMA)
            have = {r[1] for r in self.db.execute("PRAGMA table_info(runs)")}
            if "dtype" not in have:  # a store written before dtypes were recorded: all its runs were float64
                self.db.execute("ALTER TABLE runs ADD COLUMN dtype TEXT NOT NULL DEFAULT 'float64'")
            if "arrays" not in have:
                self.db.execute("ALTER TABLE runs ADD COLUMN arrays TEXT")
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
        os.makedirs(self.arrays_dir, exist_ok=True)
        name = "chunk-" + hashlib.sha256("\n".join(sorted(keys)).encode()).hexdigest()[:20] + ".npz"
        final = os.path.join(self.arrays_dir, name)
        tmp = final + f".tmp{os.getpid()}"
        with open(tmp, "wb") as fh:
            np.savez(fh, **{f"{k}/{f}": np.asarray(v) for k, d in arrays.items() for f, v in d.items()})
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, final)
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
            pq.write_table(pa.table({c: _column([r.get(c) for r in flat]) for c in cols}), str(path))
        elif ext == ".csv":
            with open(path, "w", newline="") as fh:
                w = csv.DictWriter(fh, fieldnames=cols)
                w.writeheader()
                w.writerows(flat)
        else:
            raise ValueError(f"Store.export: unknown format {ext or '(no extension)'!r}; use .csv or .parquet")
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
def text_progress(stream: Any = None, width: int = 30) -> Callable[[Mapping[str, Any]], None]:
    """A text progress bar for :func:`sweep` (default on stderr): ``[####----] 120/240 runs (50%) chunk 3/6 …``.

    Redraws one line with ``\\r`` on a terminal, prints one line per finished chunk otherwise (logs, CI).
    """
    stream = sys.stderr if stream is None else stream
    tty = bool(getattr(stream, "isatty", lambda: False)())

    def show(ev: Mapping[str, Any]) -> None:
        if ev["event"] == "start":
            stream.write(f"sweep: {ev['total']} runs requested, {ev['done']} already stored, {ev['n_chunks']} "
                         f"chunk(s) to compute\n")
        elif ev["event"] == "chunk_done":
            total = max(ev["total"], 1)
            frac = ev["done"] / total
            fill = int(round(width * frac))
            rate = ev["computed"] / ev["elapsed_s"] if ev["elapsed_s"] > 0 else math.nan
            eta = (ev["total"] - ev["done"]) / rate if rate and rate > 0 else math.nan
            line = (f"[{'#' * fill}{'-' * (width - fill)}] {ev['done']}/{ev['total']} runs ({100 * frac:.0f}%) "
                    f"chunk {ev['chunk']}/{ev['n_chunks']} ({', '.join(ev['labels'])}) {ev['elapsed_s']:.0f} s"
                    + (f", eta {eta:.0f} s" if math.isfinite(eta) else ""))
            stream.write(("\r" + line) if tty else (line + "\n"))
        elif ev["event"] == "end" and tty:
            stream.write("\n")
        stream.flush()

    return show


# ----------------------------------------------------------------------------------------------- the sweep
def _structure(x: Any, dtype: Any):
    from jaxcert.structure import Structure

    if isinstance(x, Structure):
        return x if dtype is None or x.dtype == dtype else Structure.from_ase(x.to_ase(), dtype=dtype)
    return Structure.from_ase(x, dtype=dtype)


def _run_chunk(model: Any, job: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, dict[str, np.ndarray]]]:
    """Compute one chunk (in this process or on a dask worker): metric rows and per-atom arrays of its runs."""
    import jax

    from jaxcert.attacks.metrics import run_metrics

    if job["dtype"] == "float64":  # a fresh dask worker process starts without x64 and would silently use float32
        jax.config.update("jax_enable_x64", True)
    g = run_grid(model, job["structures"], job["epsilons"], job["seeds"], attacks=job["attacks"], cfg=job["cfg"])
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
          attacks: Sequence[AttackSpec] = ATTACKS, cfg: PipelineConfig | None = None, store: Store | None = None,
          chunk: int = 8, max_chunks: int | None = None,
          progress: Callable[[Mapping[str, Any]], None] | None = None, dtype: Any = None,
          executor: str = "local", scheduler: str | None = None, client: Any = None,
          cluster_kwargs: Mapping[str, Any] | None = None) -> dict[str, int]:
    """Run every missing (structure, attack, ε, seed) and store it (module docstring).

    Args:
      model: a JAX :class:`~jaxcert.Model`.
      structures: label → ``ase.Atoms`` or :class:`~jaxcert.Structure`.
      epsilons, seeds, attacks, cfg: the grid (see :func:`jaxcert.attacks.run_grid`; cfg default PipelineConfig()).
      store: the :class:`Store` (default: in memory).
      chunk: structures per vmapped program (one task with dask).
      max_chunks: compute at most this many chunks (for time-boxed jobs; rerun to continue).
      progress: optional callback receiving event dicts (``start``, ``chunk_done`` with ``done``/``total`` runs,
        ``end``); :func:`text_progress` renders them as a bar.
      dtype: cast every structure to this float dtype (default: the structures' own, all the same).
      executor: ``"local"`` or ``"dask"``.
      scheduler: dask scheduler address (``tcp://host:8786``) instead of a LocalCluster.
      client: an existing ``distributed.Client`` (overrides ``scheduler``; not closed here).
      cluster_kwargs: keyword arguments of the default ``LocalCluster``.

    Returns:
      counts: ``requested``, ``already_done``, ``computed``, ``remaining``.
    """
    from jaxcert import __version__

    if executor not in ("local", "dask"):
        raise ValueError(f"unknown executor {executor!r}; use 'local' or 'dask'")
    store = store if store is not None else Store(":memory:")
    cfg = cfg if cfg is not None else PipelineConfig()
    attacks = tuple(attacks)
    eps = [float(e) for e in epsilons]
    seeds = [int(k) for k in seeds]
    objs = {lab: _structure(x, dtype) for lab, x in structures.items()}
    dtypes = {str(s.dtype) for s in objs.values()}
    if len(dtypes) > 1:
        raise ValueError(f"structures of mixed dtypes {sorted(dtypes)}; pass dtype= to cast them")
    dt = dtypes.pop() if dtypes else "float64"
    chash = _config_hash(cfg)
    done = store.keys()
    grid_keys = {
        lab: {(a, e, k): task_key(model.name, lab, spec, ev, sd, cfg, dt)
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
                     "seeds": [seeds[i] for i in k_idx], "attacks": [attacks[i] for i in a_idx], "cfg": cfg,
                     "tasks": tasks, "with_arrays": store.arrays_dir is not None, "dtype": dt})
    if max_chunks is not None:
        jobs = jobs[: max(0, max_chunks)]
    state = {"computed": 0, "chunks": 0, "t0": time.perf_counter()}
    emit = progress if progress is not None else (lambda ev: None)
    emit({"event": "start", "total": requested, "done": already, "n_chunks": len(jobs)})

    def store_chunk(job, rows, arrays):
        name = store.write_arrays([r["key"] for r in rows], arrays)
        store.put([{**r, "arrays": name} for r in rows])
        state["computed"] += len(rows)
        state["chunks"] += 1
        emit({"event": "chunk_done", "chunk": state["chunks"], "n_chunks": len(jobs), "labels": job["labels"],
              "stored": len(rows), "computed": state["computed"], "done": already + state["computed"],
              "total": requested, "elapsed_s": time.perf_counter() - state["t0"]})

    if executor == "local":
        for job in jobs:
            store_chunk(job, *_run_chunk(model, job))
    elif jobs:
        _dask_run(model, jobs, store_chunk, scheduler, client, cluster_kwargs)
    emit({"event": "end", "computed": state["computed"]})
    remaining = requested - already - state["computed"]
    return {"requested": requested, "already_done": already, "computed": state["computed"], "remaining": remaining}


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
