r"""Resumable sweeps: (structure × attack × ε × seed) runs into an SQLite store, one row per finished run.

The experiment of ATTACKS.md §5 is a set of independent runs keyed by their
parameters.  :func:`sweep` computes the keys of every requested run, skips the
keys already in the store, and runs the rest with :func:`jaxcert.attacks.run_grid`
in chunks of structures (each chunk one vmapped program over its pending
(attack, ε, seed) grid; structures of different sizes are padded to a common
size).  Each chunk's rows are written in one transaction, so an interrupted
sweep loses at most the chunk in flight and a rerun resumes without recomputing
or duplicating finished rows.

A row stores the run's parameters as columns, the full metric row
(:func:`jaxcert.attacks.metrics.run_metrics`) as JSON, the configuration hash
and the jaxcert version (ATTACKS.md §5, proposed).  The key is the SHA-256 of
(model, structure label, attack, n, α/ε, ε, seed, configuration).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from jaxcert.attacks.pipeline import ATTACKS, AttackSpec, PipelineConfig, run_grid

__all__ = ["Store", "task_key", "sweep"]

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
    row TEXT NOT NULL
)
"""


def _config_hash(cfg: PipelineConfig) -> str:
    return hashlib.sha256(json.dumps(dataclasses.asdict(cfg), sort_keys=True).encode()).hexdigest()[:16]


def task_key(model: str, structure: str, spec: AttackSpec, eps: float, seed: int, cfg: PipelineConfig) -> str:
    """SHA-256 key of one run's parameters."""
    doc = [model, structure, spec.name, spec.n_steps, repr(float(spec.alpha)), repr(float(eps)), int(seed),
           _config_hash(cfg)]
    return hashlib.sha256(json.dumps(doc).encode()).hexdigest()


class Store:
    """SQLite store of finished runs (``path`` may be ``":memory:"``)."""

    def __init__(self, path: str):
        self.path = path
        self.db = sqlite3.connect(path)
        with self.db:
            self.db.execute(_SCHEMA)

    def keys(self) -> set[str]:
        return {k for (k,) in self.db.execute("SELECT key FROM runs")}

    def put(self, rows: Sequence[tuple]) -> None:
        """Insert rows (key, model, structure, attack, n, α/ε, ε, seed, config hash, version, row JSON) atomically."""
        with self.db:
            self.db.executemany("INSERT OR IGNORE INTO runs VALUES (?,?,?,?,?,?,?,?,?,?,?)", rows)

    def rows(self, **where: Any) -> list[dict[str, Any]]:
        """Metric rows (dicts), optionally filtered on columns, e.g. ``rows(structure="srtio3")``."""
        q = "SELECT structure, row FROM runs"
        if where:
            q += " WHERE " + " AND ".join(f"{k} = ?" for k in where)
        out = []
        for label, row in self.db.execute(q + " ORDER BY structure, attack, epsilon, seed", tuple(where.values())):
            d = json.loads(row)
            d["structure"] = label
            out.append(d)
        return out

    def __len__(self) -> int:
        return int(self.db.execute("SELECT COUNT(*) FROM runs").fetchone()[0])

    def close(self) -> None:
        self.db.close()


def sweep(model, structures: Mapping[str, Any], epsilons: Sequence[float], seeds: Sequence[int] = (42,),
          attacks: Sequence[AttackSpec] = ATTACKS, cfg: PipelineConfig | None = None, store: Store | None = None,
          chunk: int = 8, max_chunks: int | None = None,
          progress: Callable[[str], None] | None = None) -> dict[str, int]:
    """Run every missing (structure, attack, ε, seed) and store it.

    Args:
      model: a JAX :class:`~jaxcert.Model`.
      structures: label → ``ase.Atoms`` or :class:`~jaxcert.Structure`.
      epsilons, seeds, attacks, cfg: the grid (see :func:`jaxcert.attacks.run_grid`; cfg default PipelineConfig()).
      store: the :class:`Store` (default: in memory).
      chunk: structures per vmapped program.
      max_chunks: stop after this many chunks (for time-boxed jobs; rerun to continue).
      progress: optional callback receiving one line per chunk.

    Returns:
      counts: ``requested``, ``already_done``, ``computed``, ``remaining``.
    """
    from jaxcert import __version__
    from jaxcert.attacks.metrics import run_metrics
    from jaxcert.structure import Structure

    store = store if store is not None else Store(":memory:")
    cfg = cfg if cfg is not None else PipelineConfig()
    attacks = tuple(attacks)
    eps = [float(e) for e in epsilons]
    seeds = [int(k) for k in seeds]
    chash = _config_hash(cfg)
    done = store.keys()
    grid_keys = {
        lab: {(a, e, k): task_key(model.name, lab, spec, ev, sd, cfg)
              for a, spec in enumerate(attacks) for e, ev in enumerate(eps) for k, sd in enumerate(seeds)}
        for lab in structures
    }
    requested = sum(len(v) for v in grid_keys.values())
    already = sum(key in done for v in grid_keys.values() for key in v.values())
    pending = [lab for lab, v in grid_keys.items() if any(key not in done for key in v.values())]
    computed = 0
    for c, start in enumerate(range(0, len(pending), chunk)):
        if max_chunks is not None and c >= max_chunks:
            break
        labels = pending[start : start + chunk]
        # the chunk's grid: every attack/ε/seed still missing for some structure of the chunk
        need = [ix for ix in grid_keys[labels[0]] if any(grid_keys[lab][ix] not in done for lab in labels)]
        a_idx = sorted({ix[0] for ix in need})
        e_idx = sorted({ix[1] for ix in need})
        k_idx = sorted({ix[2] for ix in need})
        objs = [structures[lab] if isinstance(structures[lab], Structure) else Structure.from_ase(structures[lab])
                for lab in labels]
        g = run_grid(model, objs, [eps[i] for i in e_idx], [seeds[i] for i in k_idx],
                     attacks=[attacks[i] for i in a_idx], cfg=cfg)
        rows = []
        for s, lab in enumerate(labels):
            for ai, a in enumerate(a_idx):
                for ei, e in enumerate(e_idx):
                    for ki, k in enumerate(k_idx):
                        key = grid_keys[lab][(a, e, k)]
                        if key in done:
                            continue
                        row = run_metrics(g, s, ai, ei, ki)
                        row["structure"] = lab
                        spec = attacks[a]
                        rows.append((key, model.name, lab, spec.name, spec.n_steps, float(spec.alpha), eps[e],
                                     seeds[k], chash, __version__, json.dumps(_plain(row), allow_nan=True)))
        store.put(rows)
        done |= {r[0] for r in rows}
        computed += len(rows)
        if progress is not None:
            progress(f"chunk {c + 1}: {', '.join(labels)}: {len(rows)} runs stored")
    remaining = requested - already - computed
    return {"requested": requested, "already_done": already, "computed": computed, "remaining": remaining}


def _plain(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, (np.generic,)):
        return x.item()
    return x
