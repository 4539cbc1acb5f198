"""Resumable certification: the report file is the checkpoint (``docs/cli.md``, "Resuming").

``jaxcert certify ... --json r.json`` rewrites ``r.json`` after every probe with
``"complete": false`` (atomically: a temporary file in the same directory, flushed,
fsync'ed, then ``os.replace``), and once more with ``"complete": true`` at the end.
A run killed at any moment (even ``kill -9``) leaves either the previous file or the
next one, never a torn one.

``--resume`` reads that file with :func:`load_finished` and hands the finished probes
to :func:`jaxcert.certify` (``finished=``), which keeps them as they are and runs only
the rest.  A probe counts as finished when it ran to a result (status ok, non-finite,
skipped or unsupported) with the same probe config; a probe that crashed is run again.
The file must come from the same model (its report metadata), elements, seed, dtype
and jaxcert/jax versions; otherwise :class:`~jaxcert.core.inputs.InputError` says which
field differs.  Metadata that describes a model without changing what it computes
(:data:`CARD_ONLY`: the training set its package states) is left out of that comparison, so
a report written before such a statement was recorded, or with other wording, still
resumes, and the resumed report carries the model's metadata as it is now.

The shared Langevin trajectory of the statistical-mechanics probes is not stored: if
some of them finished and others did not, the trajectory is recomputed (same seed,
same numbers) for the rest.
"""

from __future__ import annotations

import datetime
import json
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from jaxcert.core.device import device_name
from jaxcert.core.files import atomic_write
from jaxcert.core.inputs import InputError
from jaxcert.probes.base import PROBES
from jaxcert.probes.suite import ProbeOutcome
from jaxcert.report import SCHEMA, Report, to_jsonable
from jaxcert.report import schema as report_schema

__all__ = ["write_report", "write_json", "load_finished", "FINISHED", "CARD_ONLY"]

#: Keys of a report's ``model`` metadata that describe the model without changing its outputs (the model card's
#: quotation of its package, jaxcert/probes/card.py); :func:`load_finished` does not compare them.
CARD_ONLY = ("training_data",)


def _identity(model_meta: Any) -> Any:
    """``model_meta`` without the :data:`CARD_ONLY` keys (unchanged when it is not a dict)."""
    if not isinstance(model_meta, dict):
        return model_meta
    return {k: v for k, v in model_meta.items() if k not in CARD_ONLY}

#: Per-probe statuses that count as finished for ``--resume`` ("error" is run again).
FINISHED = ("ok", "non-finite", "skipped", "unsupported")


def write_json(doc: Any, path: str | os.PathLike, indent: int | None = 2) -> None:
    """Write strict JSON to ``path`` atomically (:func:`jaxcert.core.files.atomic_write`: an exclusive temporary
    in the same folder, fsync, ``os.replace``); a ``path`` that is a symbolic link or not a regular file is
    refused (:class:`~jaxcert.core.files.OutputFileError`, an ``InputError``), nothing written through it."""
    text = json.dumps(to_jsonable(doc), indent=indent, allow_nan=False) + "\n"
    atomic_write(path, text)


def write_report(report: Report, path: str | os.PathLike, complete: bool = True) -> None:
    """The report's JSON plus ``complete``, the probe configs (what ``--resume`` checks) and, when complete,
    ``finished_utc``: the UTC time the report was finished (ISO 8601; the board's cards show it).

    A partial report (``complete=False``, written after every probe) is compact JSON: it is rewritten
    once per probe, and the indented text cost more than the probes of a warm LJ run. The finished
    report is indented."""
    doc = report.to_dict()
    doc["complete"] = bool(complete)
    doc["probe_configs"] = {o.name: getattr(o, "config", None) for o in report.outcomes}
    if complete:
        doc["finished_utc"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    write_json(doc, path, indent=2 if complete else None)


def _nan(x: Any) -> float:
    return float("nan") if x is None else float(x)


def _outcome(p: dict[str, Any], elements: list[str], config: str | None) -> ProbeOutcome:
    per = p["per_element"]
    return ProbeOutcome(
        name=p["name"], target=float(p["target"]), gated=PROBES[p["name"]].gated, elements=list(elements),
        defect=np.array([_nan(per[el]["defect"]) for el in elements], float),
        score=np.array([_nan(per[el]["score"]) for el in elements], float),
        gate=np.array([bool(per[el]["gate"]) for el in elements], bool),
        n_evals=np.array([int(per[el]["n_evals"]) for el in elements], int),
        status=[per[el]["status"] for el in elements],
        details=[per[el]["details"] for el in elements],
        message=p.get("message"), wall_s=float(p.get("wall_s") or 0.0),
        host_evals=p.get("host_evaluations"), config=config,
    )


def _kept_rate(path: str | os.PathLike | None, key: str) -> dict[str, Any] | None:
    """``throughput[key]`` of an earlier run of the report at ``path``, when it was measured without error on this
    device (:func:`jaxcert.core.device.device_name`); else ``None``."""
    try:
        with open(path, encoding="utf-8") as fh:  # type: ignore[arg-type]
            rates = json.load(fh).get("throughput") or {}
    except (OSError, TypeError, ValueError, AttributeError):
        return None
    got = rates.get(key) if isinstance(rates, dict) else None
    if not isinstance(got, dict) or got.get("error") or rates.get("device") != device_name():
        return None
    return {k: v for k, v in got.items() if k != "kept"}


def kept_md(path: str | os.PathLike | None) -> dict[str, Any] | None:
    """The NVE throughput measurement of an earlier run of the report at ``path`` (``throughput.md``), when it
    was measured without error on this device; else ``None``.  A resumed run passes it to
    :func:`jaxcert.certify` (``md_kept``) instead of measuring it again."""
    return _kept_rate(path, "md")


def kept_nacl(path: str | os.PathLike | None) -> dict[str, Any] | None:
    """The measurement on the published board's NaCl cell (``throughput.nacl``) of an earlier run of the report at
    ``path``, as :func:`kept_md`."""
    return _kept_rate(path, "nacl")


def load_finished(path: str | os.PathLike, model: Any, elements: Sequence[str], seed: int, dtype: Any,
                  name: str = "--resume") -> list[ProbeOutcome]:
    """The finished probes of the report file at ``path`` (``[]`` if the file does not exist).

    Raises :class:`InputError` if the file is not a jaxcert certification report (every field read here is
    checked first by :func:`jaxcert.report.schema.load`: the message names the file and the field, e.g.
    ``--resume: r.json: probes[3].per_element.C: missing; allowed: ...``), or was written for a different
    model, element list, seed, dtype or jaxcert/jax version.
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        return []
    _, doc = report_schema.load(path, name, kinds=(SCHEMA,), hint="remove it or drop --resume")
    import jax.numpy as jnp

    here = Report.from_outcomes(model=model, elements=list(elements), seed=seed, dtype=str(jnp.dtype(dtype)),
                                agg="geometric", outcomes=[], wall_s=0.0)
    want = {"model": _identity(to_jsonable(here.model)), "elements": list(elements), "seed": seed, "dtype": here.dtype}
    want.update({f"versions.{k}": here.versions.get(k) for k in ("jaxcert", "jax", "jaxlib")})
    got = {k: doc.get(k) for k in ("model", "elements", "seed", "dtype")}
    got["model"] = _identity(got["model"])
    got.update({f"versions.{k}": (doc.get("versions") or {}).get(k) for k in ("jaxcert", "jax", "jaxlib")})
    for key, value in want.items():
        if got[key] != value:
            raise InputError(f"{name}: {path} was written with {key} = {got[key]!r}, this run has {value!r}; "
                             "use another --json file or drop --resume")
    configs = doc.get("probe_configs") or {}
    out = []
    for p in doc["probes"]:
        if p["name"] not in PROBES:
            continue
        # a probe on named structures (lam) has one row per structure, the others one per element
        rows = list(p["per_element"]) if PROBES[p["name"]].structures is not None else list(elements)
        if all(p["per_element"][row]["status"] in FINISHED for row in rows):
            out.append(_outcome(p, rows, configs.get(p["name"])))
    return out
