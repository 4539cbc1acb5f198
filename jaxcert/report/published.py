r"""The published finite-difference board's rows beside ours (``jaxcert board --published FILE``; docs/board.md).

pescert-bench publishes one score per (model, probe), computed with central finite differences of each
model's outputs.  A file of its numbers (``benchmarks/results/board/published_pescert.json`` is one,
transcribed from that board's ``docs/index.json`` with the commit it comes from) is read by :func:`load` and
added to a board by :func:`add`:

* every published model becomes a row marked ``"origin": "published"``, named in the board's one scheme
  (:mod:`jaxcert.report.naming`) with ``· published (FD)`` appended, carrying its source (repository, file,
  commit, date), its hardware, its method ("finite differences"), its package pins, calculator string,
  training set and parameter count, and its speed: atom·steps per second on the NaCl cell
  (:func:`jaxcert.probes.throughput.nacl_rate` measures ours the same way);
* each of our rows whose model is a published model's **twin** (the ``twin`` the file states: family and
  checkpoint as our board names them, at the published precision, certified on the elements the published model
  was: its ``elements``) gets ``published_twin``: per probe our
  score, the published score, the difference, whether it is larger than :data:`FLAG`, and why the two
  boards differ on that probe (:data:`WHY`, the explanation docs/board.md gives in "Which board to believe,
  probe by probe").

The file (strict JSON, at most :data:`MAX_BYTES`)::

    {"source": {"repo": "owner/name", "path": "docs/index.json", "commit": "<40 hex digits>",
                "generated": "2026-09-17T11:55:21+00:00"},
     "models": {"<slug>": {"label": str, "precision": "float32" | "float64",
                           "scores": {probe: number in [0, 1] or null (a crash)},
                           "defects": {probe: number or null}, "gates": {probe: true, false or null},
                           "family": str, "twin": {"family": str, "checkpoint": str or null},
                           "calculator": str, "packages": [str], "training_set": [str],
                           "n_parameters": int or null, "wall_seconds": number, "seed": int,
                           "gpu": {"name": str, ...} or null,
                           "throughput": {"atom_steps_per_s": number, "atom_steps_per_s_stdev": number,
                                          "system": str, "integrator": str}}}}

``label``, ``precision`` and ``scores`` are required; everything else may be left out.  Any other problem
(a missing field, a wrong type, a commit that is not 40 hex digits, a repository that is not ``owner/name``)
is an :class:`~jaxcert.core.inputs.InputError` naming ``--published``, the file and the field.

Imports no JAX.
"""

from __future__ import annotations

import json
import math
import os
import re
from typing import Any

from jaxcert.core.inputs import InputError, regular_file, shown
from jaxcert.report import naming
from jaxcert.report.summary import combine_scores

__all__ = ["FLAG", "MAX_BYTES", "WHY", "METHOD", "ORIGIN", "why", "load", "rows", "add", "source_url"]

#: A difference of scores larger than this is flagged (the threshold of docs/board.md's tables).
FLAG = 0.05
#: Largest file read (bytes): the whole published board of 65 models is about 100 kB.
MAX_BYTES = 8 * 2**20
#: How the published board computes its derivatives.
METHOD = "finite differences"
#: The ``origin`` of a published row (ours are ``"jaxcert"``).
ORIGIN = "published"
#: Why the two boards differ, per kind of probe: (probes, the sentence the page shows).  The same words as
#: docs/board.md, "Which board to believe, probe by probe".
WHY: dict[str, tuple[tuple[str, ...], str]] = {
    "derivatives": (
        ("conservativeness", "stress_consistency", "cross_maxwell", "betti", "trimer", "reversibility"),
        "Derivative identity: the published board takes central finite differences of the model's outputs, "
        "jaxcert differentiates the model exactly. The finite-difference truncation (and, in float32, "
        "cancellation) error counts as a defect there; believe the exact value."),
    "symmetry": (
        ("equivariance", "parity", "representation", "smoothness"),
        "No derivative is taken: both boards evaluate the model on transformed structures and see the same "
        "model noise; a difference is the random draws."),
    "modes": (
        ("zero_modes",),
        "Both boards count the same near-zero modes; the continuous part depends on how far each board relaxed "
        "the cluster (the published relaxation stops after 200 BFGS steps) and, there, on a finite-difference "
        "Hessian."),
    "sampling": (
        ("config_temperature", "equipartition", "virial"),
        "Statistical estimate from one Langevin trajectory: ours carries a standard error, the published one "
        "none; read a difference against our standard error. The published equipartition also counts the "
        "cluster's rotation."),
}
_REPO = re.compile(r"[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}")
_PATH = re.compile(r"[A-Za-z0-9_./-]{1,300}")
_COMMIT = re.compile(r"[0-9a-f]{40}")
_PRECISIONS = ("float32", "float64")


def why(probe: str) -> tuple[str | None, str]:
    """(kind, sentence) of why the boards differ on ``probe`` (:data:`WHY`); ``(None, "")`` for a probe not
    listed there."""
    for kind, (probes, sentence) in WHY.items():
        if probe in probes:
            return kind, sentence
    return None, ""


# ------------------------------------------------------------------------------------------------ reading
class _At:
    def __init__(self, where: str, path: str):
        self.prefix = f"{where}: {path}"

    def bad(self, field: str, value: Any, allowed: str) -> InputError:
        return InputError(f"{self.prefix}: {field}: got {shown(value, 80)}; allowed: {allowed}")


def _num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _str(at: _At, field: str, x: Any, required: bool = False, pattern: re.Pattern | None = None,
         allowed: str = "a string") -> str | None:
    if x is None and not required:
        return None
    if not isinstance(x, str) or not x.strip() or (pattern is not None and not pattern.fullmatch(x)):
        raise at.bad(field, x, allowed)
    return x


def _strings(at: _At, field: str, x: Any) -> list[str]:
    if x is None:
        return []
    if not isinstance(x, list) or not all(isinstance(v, str) for v in x):
        raise at.bad(field, x, "a list of strings")
    return list(x)


def _model(at: _At, slug: str, m: Any) -> dict[str, Any]:
    f = f"models.{slug}"
    if not isinstance(m, dict):
        raise at.bad(f, m, "an object (one published model)")
    _str(at, f"{f}.label", m.get("label"), required=True)
    if m.get("precision") not in _PRECISIONS:
        raise at.bad(f"{f}.precision", m.get("precision"), "\"float32\" or \"float64\"")
    scores = m.get("scores")
    if not isinstance(scores, dict) or not scores:
        raise at.bad(f"{f}.scores", scores, "an object of probe: score")
    for k, v in scores.items():
        if v is not None and not (_num(v) and 0 <= v <= 1):
            raise at.bad(f"{f}.scores.{k}", v, "a number in [0, 1] or null (a crashed probe)")
    for key, test, allowed in (("defects", lambda v: v is None or _num(v), "a finite number or null"),
                               ("gates", lambda v: v is None or isinstance(v, bool), "true, false or null")):
        part = m.get(key, {})
        if not isinstance(part, dict):
            raise at.bad(f"{f}.{key}", part, f"an object of probe: value ({allowed})")
        for k, v in part.items():
            if not test(v):
                raise at.bad(f"{f}.{key}.{k}", v, allowed)
    for key in ("family", "calculator", "elements"):
        _str(at, f"{f}.{key}", m.get(key))
    for key in ("packages", "training_set"):
        _strings(at, f"{f}.{key}", m.get(key))
    n = m.get("n_parameters")
    if n is not None and not (isinstance(n, int) and not isinstance(n, bool) and n >= 0):
        raise at.bad(f"{f}.n_parameters", n, "an integer >= 0 or null")
    for key in ("wall_seconds", "seed"):
        if m.get(key) is not None and not (_num(m[key]) and m[key] >= 0):
            raise at.bad(f"{f}.{key}", m[key], "a finite number >= 0 or null")
    gpu = m.get("gpu")
    if gpu is not None and not (isinstance(gpu, dict) and isinstance(gpu.get("name"), str)):
        raise at.bad(f"{f}.gpu", gpu, "an object with a name (a string), or null")
    t = m.get("throughput")
    if t is not None:
        if not isinstance(t, dict):
            raise at.bad(f"{f}.throughput", t, "an object or null")
        for key in ("atom_steps_per_s", "atom_steps_per_s_stdev"):
            if t.get(key) is not None and not (_num(t[key]) and t[key] >= 0):
                raise at.bad(f"{f}.throughput.{key}", t[key], "a finite number >= 0 or null")
        for key in ("system", "integrator"):
            _str(at, f"{f}.throughput.{key}", t.get(key))
    twin = m.get("twin")
    if twin is not None:
        if not isinstance(twin, dict):
            raise at.bad(f"{f}.twin", twin, "an object with family and checkpoint, or null")
        _str(at, f"{f}.twin.family", twin.get("family"), required=True)
        _str(at, f"{f}.twin.checkpoint", twin.get("checkpoint"))
    return m


def load(path: str | os.PathLike, where: str = "--published") -> dict[str, Any]:
    """The published board's numbers in ``path`` (module docstring), checked; :class:`InputError` naming ``where``,
    the file and the field otherwise."""
    p = regular_file(where, path, max_bytes=MAX_BYTES, what="a JSON file of the published board's scores")
    at = _At(where, p)
    try:
        with open(p, "rb") as fh:
            text = fh.read(MAX_BYTES + 1).decode("utf-8")
        doc = json.loads(text, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(f"{c} is not allowed")))
    except OSError as err:
        raise InputError(f"{where}: {p}: cannot be read ({err.strerror or type(err).__name__})") from None
    except UnicodeDecodeError as err:
        raise InputError(f"{where}: {p}: not UTF-8 text (byte {err.start})") from None
    except (ValueError, RecursionError) as err:
        raise InputError(f"{where}: {p}: not strict JSON ({str(err)[:120]})") from None
    if not isinstance(doc, dict):
        raise at.bad("(top level)", doc, "an object with source and models")
    src = doc.get("source")
    if not isinstance(src, dict):
        raise at.bad("source", src, "an object with repo, path, commit and generated")
    _str(at, "source.repo", src.get("repo"), True, _REPO, "owner/name (letters, digits, . _ -)")
    _str(at, "source.path", src.get("path"), True, _PATH, "a path of letters, digits and . _ / -")
    _str(at, "source.commit", src.get("commit"), True, _COMMIT, "a commit: 40 lower-case hexadecimal digits")
    _str(at, "source.generated", src.get("generated"))
    models = doc.get("models")
    if not isinstance(models, dict) or not models:
        raise at.bad("models", models, "an object of slug: model")
    for slug, m in models.items():
        if not re.fullmatch(r"[A-Za-z0-9_.+-]{1,100}", slug):
            raise at.bad(f"models[{slug!r}]", slug, "a slug of letters, digits and . _ + -")
        _model(at, slug, m)
    return doc


def source_url(source: dict[str, Any]) -> str:
    """The address of the published file at its commit (its parts were checked by :func:`load`)."""
    return f"https://github.com/{source['repo']}/blob/{source['commit']}/{source['path']}"


# ------------------------------------------------------------------------------------------------ rows
def _cell(m: dict[str, Any], probe: str, elements: list[str]) -> dict[str, Any]:
    here = probe in m["scores"]
    score = m["scores"].get(probe)
    status = "ok" if here and score is not None else ("error" if here else "skipped")
    blank = {"score": None, "defect": None, "defect_stderr": None, "gate": None, "reason": None,
             "status": "published per element: not read", "n_evals": None}
    return {"score": score, "defect": (m.get("defects") or {}).get(probe), "defect_stderr": None,
            "gate": (m.get("gates") or {}).get(probe) if here else None, "reasons": [], "status": status,
            "n_evals": None, "message": None if here else "not on the published board",
            "per_element": {el: dict(blank) for el in elements}}


def _family(m: dict[str, Any]) -> str:
    twin = m.get("twin") or {}
    return twin.get("family") or m.get("family") or m["label"]


def rows(doc: dict[str, Any], columns: list[str], elements: list[str], method: str) -> list[dict[str, Any]]:
    """One board row per published model (module docstring), over the board's ``columns`` and ``elements``;
    the overall score is ``method`` (the board's aggregation) of the published scores of those columns, a crash
    counted as 0 (as both boards count it)."""
    src = doc["source"]
    out = []
    for slug, m in doc["models"].items():
        cells = {c: _cell(m, c, elements) for c in columns}
        scores = [0.0 if c["score"] is None and c["status"] == "error" else c["score"] for c in cells.values()
                  if c["status"] != "skipped"]
        overall = combine_scores([float(s) for s in scores], method) if scores else None
        gated = [c["gate"] for c in cells.values() if c["gate"] is not None]
        gpu = (m.get("gpu") or {}).get("name")
        t = m.get("throughput") or {}
        family = _family(m)
        out.append({
            "label": naming.label(family, slug, m["precision"]) + naming.SEPARATOR + "published (FD)",
            "family": family, "checkpoint": slug, "origin": ORIGIN, "precision": m["precision"], "dtype": None,
            "file": f"{src['repo']}/{src['path']}@{src['commit'][:12]}", "model": {"name": m["label"]},
            "seed": m.get("seed"), "agg": method, "versions": {}, "elements_in_report": list(elements),
            "wall_time_s": m.get("wall_seconds"), "n_evals": None, "host_evaluations": None,
            "overall": overall if overall is not None and math.isfinite(overall) else None,
            "gates_passed": sum(bool(g) for g in gated), "gates_total": len(gated), "gate_profile": ORIGIN,
            "per_element_overall": {el: None for el in elements}, "recomputed": False, "cells": cells,
            "machine": gpu, "card": None, "throughput": None, "compilation": None, "evals_per_s": None,
            "atom_steps_per_s": t.get("atom_steps_per_s"), "atom_steps_per_s_stdev": t.get("atom_steps_per_s_stdev"),
            "parameters": m.get("n_parameters"), "training_set": ", ".join(m.get("training_set") or []) or None,
            "device": f"gpu ({gpu})" if gpu else "not recorded by the published board",
            "published": {
                "repo": src["repo"], "path": src["path"], "commit": src["commit"], "date": src.get("generated"),
                "url": source_url(src), "slug": slug, "name": m["label"], "method": METHOD,
                "hardware": f"gpu ({gpu})" if gpu else "not recorded by the published board",
                "calculator": m.get("calculator"), "packages": list(m.get("packages") or []),
                "training_set": list(m.get("training_set") or []), "n_parameters": m.get("n_parameters"),
                "throughput": {k: t.get(k) for k in ("atom_steps_per_s", "atom_steps_per_s_stdev", "system",
                                                     "integrator")} if t else None,
                "twin": m.get("twin"), "twins": []},
        })
    return out


def _is_twin(row: dict[str, Any], twin: dict[str, Any] | None, precision: str) -> bool:
    return bool(twin) and row.get("origin", "jaxcert") != ORIGIN and row.get("precision") == precision \
        and str(row.get("family", "")).lower() == str(twin["family"]).lower() \
        and (row.get("checkpoint") or None) == (twin.get("checkpoint") or None)


def add(board: dict[str, Any], doc: dict[str, Any]) -> dict[str, Any]:
    """``board`` (a certification board) with the published rows appended and each twin of ours linked
    (module docstring); returns it.  ``board["published"]`` records the source."""
    if board["kind"] != "report":
        raise InputError("--published: the published rows go on a board of certification reports, not λ reports")
    ours = [r for r in board["rows"] if r.get("origin", "jaxcert") != ORIGIN]
    methods = [r["agg"] for r in ours if r.get("agg")]
    method = max(set(methods), key=methods.count) if methods else "arithmetic"
    new = rows(doc, list(board["columns"]), list(board["elements"]), method)
    taken = {r["label"] for r in board["rows"]}
    for r in new:
        base, k = r["label"], 1
        while r["label"] in taken:
            k += 1
            r["label"] = f"{base} #{k}"
        taken.add(r["label"])
    elsewhere = []
    for pub in new:
        m = doc["models"][pub["published"]["slug"]]
        stated = [e.strip() for e in str(m.get("elements") or "").split(",") if e.strip()]
        same = sorted(stated) == sorted(board["elements"])  # a difference of scores on other elements says nothing
        for r in ours:
            if not _is_twin(r, m.get("twin"), m["precision"]):
                continue
            if not same:
                elsewhere.append(f"{r['label']} (published on {', '.join(stated) or 'elements not stated'})")
                continue
            probes = {}
            for col in board["columns"]:
                o, p = r["cells"][col], pub["cells"][col]
                if p["status"] == "skipped":
                    continue
                diff = None if o["score"] is None or p["score"] is None else o["score"] - p["score"]
                kind, sentence = why(col)
                probes[col] = {"ours": o["score"], "ours_defect": o["defect"], "ours_stderr": o.get("defect_stderr"),
                               "published": p["score"], "published_defect": p["defect"], "diff": diff,
                               "flagged": diff is not None and abs(diff) > FLAG, "why": kind, "explanation": sentence}
            r["published_twin"] = {"label": pub["label"], "slug": pub["published"]["slug"],
                                   "method": METHOD, "flag": FLAG, "overall": {
                                       "ours": r["overall"], "published": pub["overall"],
                                       "diff": None if r["overall"] is None or pub["overall"] is None
                                       else r["overall"] - pub["overall"]},
                                   "probes": probes}
            pub["published"]["twins"].append(r["label"])
    board["rows"] = list(board["rows"]) + new
    board["published"] = {**{k: doc["source"].get(k) for k in ("repo", "path", "commit", "generated")},
                          "url": source_url(doc["source"]), "method": METHOD, "models": len(new), "flag": FLAG}
    board["notes"] = list(board.get("notes", [])) + [
        f"{len(new)} published rows ({METHOD}) from {doc['source']['repo']} {doc['source']['path']} at commit "
        f"{doc['source']['commit'][:12]}; their overall is the {method} mean of their published scores over this "
        "board's probes, their gates are the published board's"]
    if elsewhere:
        board["notes"].append("not set beside their published twin, whose elements differ from this board's ("
                              f"{', '.join(board['elements'])}): " + "; ".join(elsewhere))
    return board
