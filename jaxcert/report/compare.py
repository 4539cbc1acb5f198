r"""Comparison board: several certification (or λ) reports side by side (``docs/compare.md``).

``build_board(paths)`` loads report JSON files (:func:`load`: ``jaxcert-report/1`` from
``jaxcert certify --json``, ``jaxcert-lambda/1`` from ``jaxcert lambda --json``), checks that they
can be compared, aligns them and returns the board as a strict-JSON dict (schema
``jaxcert-board/1``); :func:`board_table` renders it for a terminal and :func:`board_html` as one
self-contained page (inline CSS and JS, no network).

Rows are models (one per file), columns are probes (λ: structures).  A certification cell holds
the probe's score (the mean over elements), its gate, defect (± stderr where the probe reports
one), evaluations and status, and the per-element values behind them; a λ cell holds λ for one
structure and, where the λ JSON carries a gate, its verdict.

What is refused (an :class:`~jaxcert.core.inputs.InputError` naming the files and the difference):

* a missing file, a file that is not JSON (or too large or too deeply nested), a JSON without a known
  ``schema``, a field of the wrong type or out of range (:mod:`jaxcert.report.schema`: the message names
  the file and the field, e.g. ``r.json: probes[0].score: got nan; allowed: ...``);
* a partial report (``"complete": false``, written by an interrupted run);
* reports of both kinds at once;
* different ``jaxcert`` versions (unless ``allow_version_mismatch``);
* different element sets, probe sets or λ structure sets, unless ``align="intersection"``: then the
  common elements / probes / structures are kept, in the order of the first file, and what was
  dropped is recorded in ``board["dropped"]``.  A report that lost elements has its cells
  recomputed from its per-element values (score: mean of the finite scores; defect: mean of the
  non-skipped ones; gate: all gated elements; evaluations: summed); one that lost probes or
  elements has its overall score recomputed with its own aggregation method; λ mean and max are
  recomputed over the kept structures.  Wall time is always the whole run's.

Nothing is recomputed when nothing was dropped: the cells are the input values.
"""

from __future__ import annotations

import dataclasses
import html
import json
import math
import os
import textwrap
from collections.abc import Sequence
from typing import Any

from jaxcert.core.inputs import InputError, integer
from jaxcert.report import board_page, naming
from jaxcert.report import gates as gate_profiles
from jaxcert.report import schema as report_schema
from jaxcert.report.explain import EXPLANATIONS, explain, short_name, wrapped
from jaxcert.report.html import colour_bar, ramp_colour, score_colour, score_legend, score_tip, text_colour
from jaxcert.report.schema import LAMBDA_SCHEMA, REPORT_SCHEMA, STRUCTURE_PROBES
from jaxcert.report.summary import (
    NOT_RUN,
    combine_scores,
    combined_stderr,
    compilation_line,
    element_stderr,
    format_defect,
    printable,
    to_jsonable,
)

__all__ = [
    "BOARD_SCHEMA", "REPORT_SCHEMA", "LAMBDA_SCHEMA", "ALIGN_MODES", "Source", "load", "build_board",
    "sort_keys", "sort_rows", "board_table", "board_html", "board_json", "lambda_colour", "lambda_position",
    "LAYOUTS", "MIN_WIDTH",
]

BOARD_SCHEMA = "jaxcert-board/1"
ALIGN_MODES = ("strict", "intersection")
#: λ at or below this is coloured fully blue, at or above :data:`LAMBDA_RED` fully red (log scale between).
LAMBDA_GREEN, LAMBDA_RED = 1e-7, 1e-1


# ------------------------------------------------------------------------------------------------ loading
@dataclasses.dataclass(frozen=True)
class Source:
    """One loaded report: where it came from, its kind (``"report"`` or ``"lambda"``) and its JSON."""

    path: str
    kind: str
    data: dict[str, Any]

    @property
    def name(self) -> str:
        """The file name as given on the command line (for messages)."""
        return self.path

    @property
    def model_name(self) -> str:
        """The model's name (``model.name`` of a certification report, ``model`` of a λ report)."""
        m = self.data.get("model")
        return str(m.get("name", "?") if isinstance(m, dict) else m)

    @property
    def jaxcert_version(self) -> str | None:
        """The jaxcert version that wrote the file, ``None`` where not recorded."""
        v = self.data.get("versions")
        return str(v["jaxcert"]) if isinstance(v, dict) and "jaxcert" in v else None

    @property
    def columns(self) -> list[str]:
        """Probe names (report) or structure names (λ), in the file's order."""
        if self.kind == "report":
            return [str(p["name"]) for p in self.data["probes"]]
        return [str(k) for k in self.data["lambda"]]


def load(path: str | os.PathLike) -> Source:
    """Read and check one report JSON file (see the module docstring for what is refused; every field the board
    reads is checked by :func:`jaxcert.report.schema.load`)."""
    p = os.fspath(path)
    kind, data = report_schema.load(p)
    if data.get("complete") is False:
        raise InputError(f"{p}: partial report (\"complete\": false: the run that wrote it was interrupted); "
                         "finish it with `jaxcert certify ... --resume` (same arguments) and compare the finished "
                         "file")
    return Source(path=p, kind=kind, data=data)


# ------------------------------------------------------------------------------------------------ checks
def _join(xs: Sequence[str]) -> str:
    return ", ".join(xs) if xs else "(none)"


def _check_same_kind(sources: Sequence[Source]) -> str:
    kinds = {s.kind for s in sources}
    if len(kinds) > 1:
        by = "; ".join(f"{s.name} is {s.data['schema']}" for s in sources)
        raise InputError(f"cannot compare certification reports with λ reports ({by}); compare each kind "
                         "separately")
    return kinds.pop()


def _check_versions(sources: Sequence[Source], allow: bool) -> list[str]:
    known = {s.jaxcert_version for s in sources if s.jaxcert_version is not None}
    notes = []
    if len(known) > 1:
        by = "; ".join(f"{s.name} {s.jaxcert_version or 'unknown'}" for s in sources)
        if not allow:
            raise InputError(f"jaxcert versions differ ({by}): probe definitions may differ between versions, "
                             "so the scores need not be comparable; rerun with one version, or pass "
                             "--allow-version-mismatch (allow_version_mismatch=True) to compare anyway")
        notes.append(f"jaxcert versions differ ({by}); compared anyway (--allow-version-mismatch)")
    unknown = [s.name for s in sources if s.jaxcert_version is None]
    if unknown:
        notes.append(f"jaxcert version not recorded in {_join(unknown)} (not checked)")
    return notes


def _align(sources: Sequence[Source], what: str, get, align: str
           ) -> tuple[list[str], dict[str, list[str]], str | None]:
    """Common items (first file's order), per file what was dropped, and the mismatch (strict mode) or ``None``.

    No common item at all is refused in either mode.
    """
    sets = [get(s) for s in sources]
    first = sets[0]
    common = [x for x in first if all(x in other for other in sets[1:])]
    if all(set(x) == set(first) for x in sets[1:]):
        return list(first), {}, None
    by = "; ".join(f"{s.name} has {_join(x)}" for s, x in zip(sources, sets, strict=True))
    not_all = sorted({x for xs in sets for x in xs} - set(common))
    if not common:
        raise InputError(f"{what} sets differ ({by}) and no {what} is common to all of them, so they cannot be "
                         "aligned")
    dropped = {s.name: [x for x in xs if x not in common] for s, xs in zip(sources, sets, strict=True)}
    problem = (f"{what} sets differ ({by}; not in every file: {_join(not_all)}; common: {_join(common)})"
               if align != "intersection" else None)
    return common, {k: v for k, v in dropped.items() if v}, problem


def _refuse(problems: list[str | None], what: str) -> None:
    found = [p for p in problems if p]
    if found:
        raise InputError("; ".join(found) + f"; compare reports with the same {what}, or pass --align "
                         "intersection (align='intersection') to keep the common ones")


# ------------------------------------------------------------------------------------------------ cells
def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _mean(vals: Sequence[Any]) -> float | None:
    ok = [float(v) for v in vals if _finite(v)]
    return sum(ok) / len(ok) if ok else None


def _status(statuses: Sequence[str]) -> str:
    for s in ("error", "non-finite"):
        if s in statuses:
            return s
    if statuses and all(s in NOT_RUN for s in statuses):
        return "skipped"
    return "ok"


def _verdict(name: str, e: dict[str, Any], profile: str, precision: str, message: Any = None) -> Any:
    """The gate of one stored element entry, judged again under ``profile`` (:func:`jaxcert.report.gates.judge`)."""
    det = e.get("details") if isinstance(e.get("details"), dict) else {}
    status = e.get("status", "ok")
    if status not in ("ok", "non-finite", "error", "skipped", "unsupported"):
        status = "error"
    return gate_profiles.judge(name, e.get("defect"), det, status, profile, precision,
                               message=message if isinstance(message, str) else None)


def _element_entry(name: str, e: dict[str, Any], profile: str, precision: str, message: Any = None
                   ) -> dict[str, Any]:
    se = e.get("defect_stderr")
    if se is None:
        se = element_stderr(e.get("details"))
    status = e.get("status", "ok")
    v = _verdict(name, e, profile, precision, message)
    return {"score": e.get("score"), "defect": e.get("defect"), "defect_stderr": se,
            "gate": v.passed, "reason": v.reason, "status": status, "n_evals": e.get("n_evals")}


def _all_gates(entries: Sequence[dict[str, Any]]) -> bool | None:
    judged = [bool(e["gate"]) for e in entries if e["gate"] is not None]
    return all(judged) if judged else None


def _reasons(per: dict[str, dict[str, Any]]) -> list[str]:
    return [f"{el}: {e['reason']}" for el, e in per.items() if e.get("reason")]


def _report_cell(path: str, p: dict[str, Any], elements: list[str], recompute: bool, profile: str = "exact",
                 precision: str = "float64") -> dict[str, Any]:
    per_all = p["per_element"]
    name = p["name"]
    precision = gate_profiles.precision_of_probe(precision, p.get("host_evaluations"))
    if name in STRUCTURE_PROBES:  # rows are named structures (lam), not elements: its own summary
        rows = {k: _element_entry(name, e, profile, precision, p.get("message")) for k, e in per_all.items()
                if isinstance(e, dict)}
        blank = {"score": None, "defect": None, "defect_stderr": None, "gate": None, "reason": None,
                 "status": "skipped", "n_evals": 0}
        return {"score": p.get("score"), "defect": p.get("defect"), "defect_stderr": p.get("defect_stderr"),
                "gate": _all_gates(list(rows.values())), "reasons": _reasons(rows), "status": p.get("status", "ok"),
                "n_evals": p.get("n_evals"), "message": p.get("message"),
                "per_element": {el: dict(blank) for el in elements}}
    per = {el: _element_entry(name, per_all[el], profile, precision, p.get("message")) for el in elements}
    if not recompute:
        return {"score": p.get("score"), "defect": p.get("defect"), "defect_stderr": p.get("defect_stderr"),
                "gate": _all_gates(list(per.values())), "reasons": _reasons(per), "status": p.get("status", "ok"),
                "n_evals": p.get("n_evals"), "message": p.get("message"), "per_element": per}
    es = list(per.values())
    statuses = [e["status"] for e in es]
    live = [e for e in es if e["status"] not in NOT_RUN]
    broken = any(e["status"] == "error" or (e["defect"] is None) for e in live)
    defect = None if broken else _mean([e["defect"] for e in live])
    stderr = None
    if not broken and any(e["defect_stderr"] is not None for e in live):
        stderr = combined_stderr([e["defect"] for e in live], [e["defect_stderr"] for e in live])
    return {"score": _mean([e["score"] for e in es]), "defect": defect, "defect_stderr": stderr,
            "gate": _all_gates(live), "reasons": _reasons(per), "status": _status(statuses),
            "n_evals": sum(int(e["n_evals"] or 0) for e in es), "message": p.get("message"), "per_element": per}


def _combine(scores: list[Any], method: str) -> float | None:

    v = combine_scores([float(s) for s in scores if _finite(s)], method)
    return v if math.isfinite(v) else None


def _report_row(s: Source, probes: list[str], elements: list[str], dropped_el: bool, dropped_pr: bool,
                profile: str = "exact") -> dict[str, Any]:
    d = s.data
    agg = d["aggregate"]
    by_name = {p["name"]: p for p in d["probes"]}
    precision = gate_profiles.model_precision(d.get("model") if isinstance(d.get("model"), dict) else None,
                                              d.get("card") if isinstance(d.get("card"), dict) else None,
                                              str(d.get("dtype")))
    cells = {name: _report_cell(s.name, by_name[name], elements, dropped_el, profile, precision) for name in probes}
    recompute = dropped_el or dropped_pr
    method = agg.get("method", "geometric")
    gated = [c["gate"] for c in cells.values() if c["gate"] is not None]
    if recompute:
        overall = _combine([c["score"] for c in cells.values()], method)
        per_el = {el: _combine([c["per_element"][el]["score"] for c in cells.values()], method) for el in elements}
        n_evals = sum(int(c["n_evals"] or 0) for c in cells.values())
    else:
        overall, n_evals = agg.get("overall"), agg.get("n_evals")
        per_el = {el: (agg.get("per_element_overall") or {}).get(el) for el in elements}
    who = naming.identity(d.get("model") if isinstance(d.get("model"), dict) else s.model_name,
                          d.get("card") if isinstance(d.get("card"), dict) else None, precision)
    return {
        "label": who.label(profile), "family": who.family, "checkpoint": who.checkpoint, "origin": "jaxcert",
        "file": s.name, "model": d.get("model"), "dtype": d.get("dtype"),
        "seed": d.get("seed"), "agg": method, "versions": d.get("versions") or {},
        "elements_in_report": d.get("elements"), "wall_time_s": d.get("wall_time_s"), "n_evals": n_evals,
        "host_evaluations": agg.get("host_evaluations"), "overall": overall,
        "gates_passed": sum(bool(g) for g in gated), "gates_total": len(gated),
        "gate_profile": profile, "precision": precision,
        "per_element_overall": per_el, "recomputed": recompute, "cells": cells,
        "machine": (d.get("machine") or {}).get("cpu_model") or (d.get("machine") or {}).get("processor"),
        "computed_at": _computed(d),
        **_speed(d),
    }


def _computed(d: dict[str, Any]) -> str | None:
    """When a report was computed, in words: the time it was finished (``finished_utc``, written by
    :func:`jaxcert.checkpoint.write_report`) or, for a report written before that stamp, the dates of the commits
    that changed it (``computed_between_utc``); ``None`` when neither is there."""
    if isinstance(d.get("finished_utc"), str):
        return f"finished {d['finished_utc']}"
    if isinstance(d.get("computed_between_utc"), str):
        return f"committed {d['computed_between_utc']} (written before reports stamped their finish time)"
    return None


def _speed(d: dict[str, Any]) -> dict[str, Any]:
    """A report's model card and throughput (``jaxcert certify --throughput``, ``jaxcert board``; None where the
    report has none), the two rates the board sorts by: model evaluations per second of the suite and atom·steps
    per second on the published board's NaCl cell (``throughput.nacl``; the rate of another cell, ``md``, is not
    comparable with the published column and stays in the card), and what the page filters by: the training set
    the model's package states and the device (docs/board.md, "Throughput")."""
    t = d.get("throughput") if isinstance(d.get("throughput"), dict) else {}
    card = d.get("card") if isinstance(d.get("card"), dict) else {}
    suite, nacl = t.get("suite") or {}, t.get("nacl") or {}
    training = card.get("training_data")
    return {"card": d.get("card"), "throughput": d.get("throughput"),
            "compilation": d.get("compilation") if isinstance(d.get("compilation"), dict) else None,
            "evals_per_s": suite.get("evals_per_s") if _finite(suite.get("evals_per_s")) else None,
            "atom_steps_per_s": nacl.get("atom_steps_per_s") if _finite(nacl.get("atom_steps_per_s")) else None,
            "atom_steps_per_s_stdev": (nacl.get("atom_steps_per_s_stdev")
                                       if _finite(nacl.get("atom_steps_per_s_stdev")) else None),
            "parameters": card.get("parameters") if isinstance(card.get("parameters"), int) else None,
            "training_set": training if isinstance(training, str) and training.strip() else None,
            "device": t.get("device") or card.get("device")}


def has_speed(board: dict[str, Any]) -> bool:
    """Whether any row of a certification board carries a throughput (then the board shows the rate columns)."""
    return board["kind"] == "report" and any(r.get("evals_per_s") is not None or r.get("atom_steps_per_s")
                                             is not None for r in board["rows"])


def _lambda_gate(d: dict[str, Any]) -> tuple[float | None, bool | None]:
    """(threshold, verdict) of the λ gate the JSON carries (``gate_threshold``, ``gate``), ``None`` where absent.

    The gate of :func:`jaxcert.lam` is max λ over the evaluated structures ≤ ``gate_threshold``.
    """
    threshold, passed = d.get("gate_threshold"), d.get("gate")
    return (float(threshold) if _finite(threshold) else None), (passed if isinstance(passed, bool) else None)


def _lambda_row(s: Source, structures: list[str], dropped: bool) -> dict[str, Any]:
    d = s.data
    lam, skipped, evals = d["lambda"], d.get("skipped") or {}, d.get("n_evals") or {}
    threshold, passed = _lambda_gate(d)
    cells = {}
    for k in structures:
        v = lam.get(k)
        evaluated = k not in skipped
        gate = None if threshold is None or not evaluated else bool(_finite(v) and v <= threshold)
        cells[k] = {"lambda": v, "skipped": skipped.get(k), "n_evals": evals.get(k), "gate": gate}
    vals = [c["lambda"] for c in cells.values() if _finite(c["lambda"])]
    if dropped:
        mean, mx = (sum(vals) / len(vals), max(vals)) if vals else (None, None)
        if threshold is not None:  # as jaxcert.lam: every evaluated structure within the gate, and at least one
            gates = [c["gate"] for c in cells.values() if c["gate"] is not None]
            passed = bool(gates) and all(gates)
        n_evals = sum(int(c["n_evals"] or 0) for c in cells.values())
    else:
        mean, mx = d.get("mean"), d.get("max")
        n_evals = sum(int(v or 0) for v in evals.values()) if evals else None
    return {
        "label": s.model_name, "file": s.name, "model": d.get("model"), "method": d.get("method"),
        "dtype": d.get("dtype"), "versions": d.get("versions") or {}, "wall_time_s": d.get("wall_time_s"),
        "n_evals": n_evals, "mean": mean, "max": mx, "gate": passed, "gate_threshold": threshold,
        "recomputed": dropped, "cells": cells,
        "machine": (d.get("machine") or {}).get("cpu_model") or (d.get("machine") or {}).get("processor"),
    }


def _unique_labels(rows: list[dict[str, Any]]) -> None:
    """Make row labels unique: the model name, + [dtype] where that tells duplicates apart, + (file name)."""
    def groups() -> dict[str, list[dict[str, Any]]]:
        g: dict[str, list[dict[str, Any]]] = {}
        for r in rows:
            g.setdefault(r["label"], []).append(r)
        return {k: v for k, v in g.items() if len(v) > 1}

    for group in groups().values():
        if len({str(r.get("dtype")) for r in group}) > 1:
            for r in group:
                r["label"] = f"{r['label']} [{r.get('dtype')}]"
    for group in groups().values():
        for r in group:
            r["label"] = f"{r['label']} ({os.path.basename(r['file'])})"
    for group in groups().values():
        for k, r in enumerate(group):
            r["label"] = f"{r['label']} #{k + 1}"


def _version_keys(rows: list[dict[str, Any]]) -> list[str]:
    """Version columns: jaxcert and jax always, then every other package whose version differs."""
    keys: list[str] = []
    for r in rows:
        keys += [k for k in r["versions"] if k not in keys]
    always = [k for k in ("jaxcert", "jax") if any(k in r["versions"] for r in rows)]
    differ = [k for k in keys if k not in always and len({str(r["versions"].get(k)) for r in rows}) > 1]
    return always + differ


# ------------------------------------------------------------------------------------------------ board
def build_board(sources: Sequence[str | os.PathLike | Source], align: str = "strict",
                allow_version_mismatch: bool = False, gates: str = gate_profiles.DEFAULT_PROFILE) -> dict[str, Any]:
    """The comparison board of ``sources`` (paths or :class:`Source`) as a strict-JSON dict.

    Args:
      sources: report files (at least one), all ``jaxcert-report/1`` or all ``jaxcert-lambda/1``.
      align: ``"strict"`` (refuse different element / probe / structure sets) or ``"intersection"``.
      allow_version_mismatch: compare reports written by different jaxcert versions.
      gates: the gate profile every cell is judged under (:mod:`jaxcert.report.gates`), recomputed from the
        stored defects and details, so reports written under either profile (or before profiles existed)
        compare on one footing.
    """
    if gates not in gate_profiles.PROFILES:
        raise InputError(f"--gates: got {gates!r}; allowed: {', '.join(gate_profiles.PROFILES)}")
    if align not in ALIGN_MODES:
        raise InputError(f"--align: got {align!r}; allowed: {', '.join(ALIGN_MODES)}")
    srcs = [s if isinstance(s, Source) else load(s) for s in sources]
    if not srcs:
        raise InputError("reports: got none; allowed: one or more report JSON files")
    kind = _check_same_kind(srcs)
    notes = _check_versions(srcs, allow_version_mismatch)
    if kind == "report":
        elements, drop_el, bad_el = _align(srcs, "element", lambda s: [str(e) for e in s.data["elements"]], align)
        columns, drop_pr, bad_pr = _align(srcs, "probe", lambda s: s.columns, align)
        _refuse([bad_el, bad_pr], "elements and probes" if bad_el and bad_pr else
                "elements" if bad_el else "probes")
        rows = [_report_row(s, columns, elements, s.name in drop_el, s.name in drop_pr, gates) for s in srcs]
        for s, row in zip(srcs, rows, strict=True):  # the verdict count under every profile, side by side
            row["gates_by_profile"] = {gates: {"passed": row["gates_passed"], "total": row["gates_total"]}}
            for other in gate_profiles.PROFILES:
                if other != gates:
                    o = _report_row(s, columns, elements, s.name in drop_el, s.name in drop_pr, other)
                    row["gates_by_profile"][other] = {"passed": o["gates_passed"], "total": o["gates_total"]}
        dropped = [{"file": s.name, "elements": drop_el.get(s.name, []), "probes": drop_pr.get(s.name, [])}
                   for s in srcs if s.name in drop_el or s.name in drop_pr]
        methods = sorted({r["agg"] for r in rows})
        if len(methods) > 1:
            notes.append(f"overall scores use different aggregations ({', '.join(methods)})")
        explanations = {c: explain(c) for c in columns}
    else:
        elements = []
        columns, drop_st, bad_st = _align(srcs, "structure", lambda s: s.columns, align)
        _refuse([bad_st], "structures")
        rows = [_lambda_row(s, columns, s.name in drop_st) for s in srcs]
        dropped = [{"file": s.name, "structures": drop_st[s.name]} for s in srcs if s.name in drop_st]
        methods = sorted({str(r["method"]) for r in rows})
        if len(methods) > 1:
            notes.append(f"λ methods differ ({', '.join(methods)})")
        explanations = {"lambda": explain("lam")}
    _unique_labels(rows)
    dtypes = sorted({str(r["dtype"]) for r in rows if r["dtype"] is not None})
    if len(dtypes) > 1:
        notes.append(f"precisions differ ({', '.join(dtypes)}): round-off floors differ")
    return to_jsonable({
        "schema": BOARD_SCHEMA, "kind": kind, "align": align, "gate_profile": gates, "columns": columns,
        "elements": elements,
        "dropped": dropped, "notes": notes, "version_keys": _version_keys(rows), "explanations": explanations,
        "rows": rows,
    })


def board_json(board: dict[str, Any], path: str | None = None) -> str:
    """The board as strict JSON text (``allow_nan=False``), written to ``path`` when given."""
    text = json.dumps(board, indent=2, allow_nan=False)
    if path is not None:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text + "\n")
    return text


# ------------------------------------------------------------------------------------------------ sorting
def _fixed_keys(kind: str) -> dict[str, tuple[Any, bool]]:
    """Sort key → (getter, descending by default)."""
    common = {
        "model": (lambda r: r["label"].lower(), False),
        "evals": (lambda r: r["n_evals"], False),
        "wall": (lambda r: r["wall_time_s"], False),
        "dtype": (lambda r: r["dtype"], False),
    }
    if kind == "report":
        return {**common, "overall": (lambda r: r["overall"], True),
                "gates": (lambda r: (r["gates_passed"] / r["gates_total"]) if r["gates_total"] else None, True),
                "evals_per_s": (lambda r: r.get("evals_per_s"), True),
                "atom_steps_per_s": (lambda r: r.get("atom_steps_per_s"), True),
                "parameters": (lambda r: r.get("parameters"), True),
                "source": (lambda r: board_page.source_text(r).lower(), False)}
    return {**common, "mean": (lambda r: r["mean"], False), "max": (lambda r: r["max"], False),
            "gate": (lambda r: None if r["gate"] is None else int(r["gate"]), True)}


def _column_getter(kind: str, col: str) -> tuple[Any, bool]:
    if kind == "report":
        return (lambda r: r["cells"][col]["score"]), True
    return (lambda r: r["cells"][col]["lambda"]), False


def sort_keys(board: dict[str, Any]) -> list[str]:
    """Every accepted ``sort`` key: the fixed columns, then the probe (λ: structure) names."""
    return list(_fixed_keys(board["kind"])) + list(board["columns"])


def sort_rows(board: dict[str, Any], key: str | None = None, reverse: bool = False) -> list[dict[str, Any]]:
    """Rows ordered by ``key`` (scores and gates highest first; λ, evaluations, wall time and names lowest
    first; ``reverse`` flips), missing values last, ties in file order.  ``None`` keeps the file order."""
    rows = list(board["rows"])
    if key is None:
        return rows[::-1] if reverse else rows
    fixed = _fixed_keys(board["kind"])
    if key in fixed:
        get, desc = fixed[key]
    elif key in board["columns"]:
        get, desc = _column_getter(board["kind"], key)
    else:
        raise InputError(f"--sort: got {key!r}; allowed: {', '.join(sort_keys(board))}")
    desc = desc != reverse
    have = [r for r in rows if get(r) is not None]
    none = [r for r in rows if get(r) is None]
    return sorted(have, key=get, reverse=desc) + none


# ------------------------------------------------------------------------------------------------ text
def _score_cell(c: dict[str, Any]) -> str:
    if c["status"] == "skipped" or (c["score"] is None and c["status"] != "error"):
        return "skip"
    if c["status"] == "error":
        return "crash"
    mark = "" if c["gate"] is None else (" ✓" if c["gate"] else " ✗")
    return f"{c['score']:.3f}{mark}"


def _lambda_cell(c: dict[str, Any]) -> str:
    if c["skipped"] is not None or not _finite(c["lambda"]):
        return "skip"
    mark = "" if c["gate"] is None else (" ✓" if c["gate"] else " ✗")
    return f"{c['lambda']:.2e}{mark}"


def _num(v: Any, fmt: str) -> str:
    return "—" if not _finite(v) else format(v, fmt)


def _gate_text(v: bool | None) -> str:
    return "" if v is None else ("PASS" if v else "FAIL")


def _table_rows(board: dict[str, Any], rows: list[dict[str, Any]], labels: list[str]) -> list[list[str]]:
    out = []
    vkeys = board["version_keys"]
    for r in rows:
        if board["kind"] == "report":
            head = [r["label"], _num(r["overall"], ".4f"), f"{r['gates_passed']}/{r['gates_total']}"]
            body = [_score_cell(r["cells"][c]) for c in board["columns"]]
        else:
            head = [r["label"], _num(r["mean"], ".2e"), _num(r["max"], ".2e"), _gate_text(r["gate"])]
            body = [_lambda_cell(r["cells"][c]) for c in board["columns"]]
        tail = [_num(r["n_evals"], "d"), _num(r["wall_time_s"], ".1f"), str(r["dtype"] or "—")]
        if has_speed(board):
            tail += [_num(r.get("evals_per_s"), ".3g"), _num(r.get("atom_steps_per_s"), ".3g")]
        out.append(head + body + tail + [str(r["versions"].get(k, "—")) for k in vkeys])
    return [[_line(c) for c in row] for row in [labels] + out]


def _line(text: Any) -> str:
    """A value from a report for one terminal line: control characters (ESC, BEL, newlines, ...) as visible
    escapes (:func:`jaxcert.report.summary.printable`; docs/compare.md, "Hostile reports")."""
    return printable(text, keep="")


def _header(board: dict[str, Any]) -> list[str]:
    if board["kind"] == "report":
        head = ["Model", "Overall", "Gates"] + [short_name(c) for c in board["columns"]]
    else:
        head = ["Model", "λ mean", "λ max", "Gate"] + list(board["columns"])
    speed = ["Evals/s", "NaCl atom·steps/s"] if has_speed(board) else []
    return head + ["Evals", "Wall s", "dtype"] + speed + list(board["version_keys"])


def _summary_line(board: dict[str, Any]) -> str:
    n = len(board["rows"])
    if board["kind"] == "report":
        what = (f"{n} certification report{'s' * (n != 1)} · elements {_join(board['elements'])} · gates: "
                f"{board.get('gate_profile', gate_profiles.DEFAULT_PROFILE)} profile")
    else:
        what = f"{n} λ report{'s' * (n != 1)} · {len(board['columns'])} structures"
    return _line(f"jaxcert comparison board · {what} · alignment {board['align']}")


def _reason_lines(board: dict[str, Any], rows: list[dict[str, Any]], width: int) -> list[str]:
    """One line per failed or skipped (model, probe, element): why, under the gate profile of the board."""
    if board["kind"] != "report":
        return []
    out = []
    for r in rows:
        for col in board["columns"]:
            for reason in r["cells"][col].get("reasons") or []:
                mark = "FAIL" if not reason.split(": ", 1)[-1].startswith("not run") else "skip"
                text = _line(f"{mark} {r['label']} · {col} [{reason.replace(': ', ']: ', 1)}")
                out.extend(textwrap.wrap(text, width=width, initial_indent="  ", subsequent_indent="      "))
    if out:
        out = [f"why (gate profile {board.get('gate_profile', gate_profiles.DEFAULT_PROFILE)}):"] + out
    return out


def _dropped_lines(board: dict[str, Any]) -> list[str]:
    out = []
    for d in board["dropped"]:
        parts = [f"{what} {_join(d[what])}" for what in ("elements", "probes", "structures") if d.get(what)]
        out.append("  " + _line(f"dropped from {d['file']}: {'; '.join(parts)}"))
    if out:
        redo = ("cells of reports that lost elements and overall scores of reports that lost probes or elements "
                "are recomputed over what is kept" if board["kind"] == "report" else
                "λ mean and max are recomputed over the kept structures")
        out = ["aligned by intersection (" + redo + "):"] + out
    return out


LAYOUTS = ("auto", "models", "probes")
#: Narrowest terminal board (``width``): the legend and the probe sentences wrap with a hanging indent.
MIN_WIDTH = 40


def _render(table: list[list[str]]) -> list[str]:
    """Aligned pipe table: first column left, the others right, a rule under the header."""
    ncol = len(table[0])
    widths = [max(len(r[c]) for r in table) for c in range(ncol)]
    lines = []
    for k, r in enumerate(table):
        cells = [r[0].ljust(widths[0])] + [r[c].rjust(widths[c]) for c in range(1, ncol)]
        lines.append("| " + " | ".join(cells) + " |")
        if k == 0:
            lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return lines


def board_table(board: dict[str, Any], sort: str | None = None, reverse: bool = False, width: int = 110,
                layout: str = "auto") -> str:
    """The board for a terminal, then the legend, alignment notes and one sentence per probe saying what it
    tests.

    ``layout="models"``: one row per report (the order of :func:`sort_rows` top to bottom), probe columns
    under short names; ``"probes"``: transposed, one row per probe (full names) and one column per report,
    in the sorted order left to right; ``"auto"``: models as rows when that table fits in ``width``
    characters, else transposed.
    """
    if layout not in LAYOUTS:
        raise InputError(f"--layout: got {layout!r}; allowed: {', '.join(LAYOUTS)}")
    width = integer("width", width, minimum=MIN_WIDTH)
    rows = sort_rows(board, sort, reverse)
    header = _header(board)
    table = _table_rows(board, rows, header)
    lines = _render(table)
    if layout == "probes" or (layout == "auto" and max(map(len, lines)) > width):
        layout = "probes"
        full = [_line(h) for h in header]
        n_fixed = 3 if board["kind"] == "report" else 4
        full[n_fixed:n_fixed + len(board["columns"])] = [_line(c) for c in board["columns"]]
        first = "Probe" if board["kind"] == "report" else "Structure"
        lines = _render([[first] + [r[0] for r in table[1:]]] +
                        [[full[c]] + [r[c] for r in table[1:]] for c in range(1, len(full))])
    out = [_summary_line(board), ""] + lines + [""]
    order = "in file order" if sort is None else f"sorted by {sort}" + (" (reversed)" if reverse else "")
    where = "rows" if layout == "models" else "columns (left to right)"
    if board["kind"] == "report":
        legend = [f"cells: probe score, mean over elements (1 = the identity holds); ✓ gate passed, ✗ gate "
                  f"failed, no mark: graded only; models as {where} {order}"]
        abbrev = [f"{short_name(c)} = {c}" for c in board["columns"] if short_name(c) != c]
        if abbrev and layout == "models":
            legend.append("columns: " + ", ".join(abbrev))
    else:
        legend = [f"cells: λ per structure (0 = conservative forces); ✓/✗ the λ gate where the report has one; "
                  f"models as {where} {order}"]
    for text in legend:
        out.extend(textwrap.wrap(text, width=width, subsequent_indent="  ", break_on_hyphens=False))
    out += _reason_lines(board, rows, width)
    out += _dropped_lines(board)
    out += [_line(f"note: {n}") for n in board["notes"]]
    names = list(board["columns"]) if board["kind"] == "report" else ["lam"]  # λ reports: the lam probe's sentence
    why = wrapped(names, width=width, title="what each probe tests (identity; what a failure means):")
    if why:
        out += [""] + why
    return printable("\n".join(out))  # every line above is already clean: this is the safety net


# ------------------------------------------------------------------------------------------------ html
def lambda_position(v: float | None) -> float | None:
    """Where λ sits on the colour scale: 1 at ≤ 1e-7 (round-off) … 0 at ≥ 0.1, linear in log10 λ."""
    if not _finite(v):
        return None
    if v <= LAMBDA_GREEN:
        return 1.0
    t = (math.log10(LAMBDA_RED) - math.log10(v)) / (math.log10(LAMBDA_RED) - math.log10(LAMBDA_GREEN))
    return min(max(t, 0.0), 1.0)


def lambda_colour(v: float | None) -> str:
    """Fill colour of a λ value: blue at ≤ 1e-7 (round-off), red at ≥ 0.1, log-linear between (the colours of
    :func:`jaxcert.report.html.ramp_colour`)."""
    return ramp_colour(lambda_position(v))


def _lambda_legend(values: list[Any]) -> str:
    ticks = [(lambda_position(10.0 ** -k), f"1e-{k}" + (" or more" if k == 1 else " or less" if k == 7 else ""))
             for k in range(1, 8)]
    vals = [float(v) for v in values if _finite(v)]
    span, said = None, "There is no λ on this board."
    if vals:
        lo, hi = min(vals), max(vals)
        span = (lambda_position(hi), lambda_position(lo), f"this board: {lo:.1e} – {hi:.1e}")
        said = f"The λ values on this board span {lo:.2e} – {hi:.2e}."
    caption = ("Colour: log10 λ, from blue at round-off (λ ≤ 1e-7) to red (λ ≥ 0.1). " + said + " Grey: skipped.")
    return (f"<div class=legend data-lo='{_v(min(vals)) if vals else ''}' data-hi='{_v(max(vals)) if vals else ''}'>"
            + colour_bar(ticks, caption, span) + f"<p class=note>{_e(caption)}</p></div>")


# The page: a left margin (body padding), the wide board inside its own horizontally scrolling container
# (div.scroll) with the model column fixed (position: sticky), drill-downs kept in view while it scrolls.
_CSS = (
    "body{font-family:sans-serif;margin:0;padding:1.5em 32px 3em;color:#222}"
    "h1{margin:.2em 0 .4em}main{max-width:1600px}"
    "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 7px;text-align:right}"
    "td:first-child,th:first-child{text-align:left}th{background:#f4f4f4;white-space:nowrap}"
    "div.scroll{overflow-x:auto;max-width:100%;border:1px solid #ddd;margin:.8em 0}"
    "table.board{border-collapse:separate;border-spacing:0}table.board td,table.board th{border-width:0 1px 1px 0}"
    "table.board th{cursor:pointer;position:sticky;top:0}"
    "table.board thead th:first-child,table.board tr.main>td:first-child{position:sticky;left:0;z-index:2;"
    "background:#fff;box-shadow:2px 0 3px rgba(0,0,0,.15)}table.board thead th:first-child{background:#f4f4f4;"
    "z-index:3}table.board tr.main>td:first-child{white-space:nowrap}"
    "th[aria-sort=ascending]::after{content:' ▲'}"
    "th[aria-sort=descending]::after{content:' ▼'}td.cell{font-weight:bold;white-space:nowrap}"
    "td.skip{background:#ccc;color:#333}.pass{color:#1a7f37}.fail{color:#c62828}"
    "td.cell .pass,td.cell .fail{color:inherit}button.tog{border:0;background:none;cursor:pointer;font-size:100%}"
    "tr.drill>td{background:#fafafa;padding:0}div.drillbox{position:sticky;left:0;width:max-content;"
    "max-width:calc(100vw - 90px);overflow-x:auto;padding:6px 10px}"
    "tr.drill table td{font-size:90%}.note{color:#555;max-width:1100px}"
    "details{margin:.4em 0}summary{cursor:pointer;max-width:1100px}"
    "a.why{text-decoration:none;font-size:85%}abbr{text-decoration:none}"
    "table.files td,table.files th{text-align:left;overflow-wrap:anywhere;max-width:420px}"
)

# Sorting: a header click orders the <tbody class=row> groups (a model row and its drill-down row) by the
# data-v of the clicked column, numbers numerically, blanks last; the first click uses data-first.
# No JavaScript is built from data (docs/compare.md, "Hostile reports"): the only inline handlers are the fixed
# calls jcSort(this) and jcToggle(this); a link to a probe's section carries the section's id in data-open (an
# HTML-escaped attribute), and this script attaches its click handler and reads the id as text.
_JS = """
function jcSort(th){
  var table=th.closest('table'), idx=Array.prototype.indexOf.call(th.parentNode.children, th);
  var dir=th.getAttribute('aria-sort')==='descending'?'ascending':
          th.getAttribute('aria-sort')==='ascending'?'descending':th.dataset.first;
  Array.prototype.forEach.call(th.parentNode.children, function(h){h.removeAttribute('aria-sort');});
  th.setAttribute('aria-sort', dir);
  var num=th.dataset.type==='num', sign=dir==='ascending'?1:-1;
  var groups=Array.prototype.slice.call(table.querySelectorAll('tbody.row'));
  function val(g){var v=g.rows[0].cells[idx].dataset.v; if(v===undefined||v==='') return null;
                  return num?parseFloat(v):v.toLowerCase();}
  groups.sort(function(a, b){var x=val(a), y=val(b);
    if(x===null&&y===null) return 0; if(x===null) return 1; if(y===null) return -1;
    return (x<y?-1:x>y?1:0)*sign;});
  groups.forEach(function(g){table.appendChild(g);});
  jcPinOrder(); jcSortState(th, dir);
}
function jcOpen(id){var d=document.getElementById(id); if(d&&d.tagName==='DETAILS') d.open=true;}
function jcToggle(b){
  var d=b.closest('tbody').querySelector('tr.drill'); d.hidden=!d.hidden;
  b.textContent=d.hidden?'\u25b8':'\u25be'; b.setAttribute('aria-expanded', String(!d.hidden));
}
Array.prototype.forEach.call(document.querySelectorAll('a[data-open]'), function(a){
  a.addEventListener('click', function(ev){ev.stopPropagation(); jcOpen(a.getAttribute('data-open'));});
});
""" + board_page.JS


def _e(x: Any) -> str:
    return html.escape(str(x))


def _v(x: Any) -> str:
    """A data-v attribute value: numbers in repr form, blanks for missing."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return ""
    return _e(repr(float(x)) if isinstance(x, (int, float)) and not isinstance(x, bool) else x)


def _th(text: str, key_type: str, first: str, title: str = "", link: str = "", full: str = "",
        sorted_as: str | None = None) -> str:
    """A sortable header; ``full``: the column's full name where ``text`` is its short form (``data-name``, the
    name the exports use); ``sorted_as``: the direction the rows are sorted by this column now, if they are."""
    t = f" title='{_e(title)}'" if title else ""
    a = (f" <a class=why href='#{_e(link)}' data-open='{_e(link)}' "
         f"title='what this probe tests, per element'>?</a>") if link else ""
    label = f"<abbr title='{_e(full)}'>{_e(text)}</abbr>" if full and full != text else _e(text)
    now = f" aria-sort={sorted_as}" if sorted_as else ""
    return (f"<th onclick='jcSort(this)' data-type={key_type} data-first={first} data-name='{_e(full or text)}'"
            f"{now}{t}>{label}{a}</th>")


def _gate_html(g: bool | None) -> str:
    return "" if g is None else ("<span class=pass>✓</span>" if g else "<span class=fail>✗</span>")


def _fill(colour: str) -> str:
    """Inline style of a coloured cell: the fill and the text colour that reads on it."""
    return f"background:{colour};color:{text_colour(colour)}"


def _score_td(c: dict[str, Any]) -> str:
    text = _score_cell(c)
    if text in ("skip", "crash") and c["score"] is None:
        return f"<td class='cell skip' data-v='' title='{_e(c.get('message') or c['status'])}'>{text}</td>"
    tip = (f"score {score_tip(c['score'])} · defect {format_defect(c['defect'], c['defect_stderr'])} · "
           f"{c['n_evals']} evaluations · {c['status']}")
    return (f"<td class=cell style='{_fill(score_colour(c['score']))}' data-v='{_v(c['score'])}' "
            f"title='{_e(tip)}'>{c['score']:.3f} {_gate_html(c['gate'])}</td>")


def _element_td(e: dict[str, Any]) -> str:
    if e["status"] in NOT_RUN or e["score"] is None:
        return f"<td class='skip' title='{_e(e.get('reason') or e['status'])}'>{_e(e['status'])}</td>"
    why = f" · {e['reason']}" if e.get("reason") else ""
    return (f"<td class=cell style='{_fill(score_colour(e['score']))}' "
            f"title='score {_e(score_tip(e['score']) + why)}'>"
            f"{e['score']:.3f} {_gate_html(e['gate'])}<br><small>defect "
            f"{_e(format_defect(e['defect'], e['defect_stderr']))}</small></td>")


def _lambda_td(c: dict[str, Any]) -> str:
    if c["skipped"] is not None or not _finite(c["lambda"]):
        return f"<td class='cell skip' data-v='' title='{_e(c['skipped'] or 'no value')}'>skip</td>"
    return (f"<td class=cell style='{_fill(lambda_colour(c['lambda']))}' data-v='{_v(c['lambda'])}' "
            f"title='{_e(c['n_evals'])} evaluations'>{c['lambda']:.2e} {_gate_html(c['gate'])}</td>")


def _report_drill(board: dict[str, Any], r: dict[str, Any]) -> str:
    """Per-element scores and defects of one model: probes × elements (plus the per-element overall)."""
    els = board["elements"]
    out = ["<table><tr><th>probe</th>" + "".join(f"<th>{_e(el)}</th>" for el in els) + "</tr>"]
    for col in board["columns"]:
        c = r["cells"][col]
        tds = [_element_td(c["per_element"][el]) for el in els]
        out.append(f"<tr><td><a href='#probe-{_e(col)}' data-open='probe-{_e(col)}'>{_e(col)}</a></td>"
                   f"{''.join(tds)}</tr>")
    po = r.get("per_element_overall") or {}
    out.append("<tr><td><b>overall</b></td>" + "".join(f"<td>{_num(po.get(el), '.4f')}</td>" for el in els)
               + "</tr></table>")
    why = [f"<li><b>{_e(col)}</b> [{_e(reason.replace(': ', ']: ', 1))}</li>" for col in board["columns"]
           for reason in r["cells"][col].get("reasons") or []]
    if why:
        out.append(f"<p class=note>why each ✗ and skip (gate profile {_e(r.get('gate_profile'))}, "
                   f"{_e(r.get('precision'))} floor):</p><ul class=why>" + "".join(why) + "</ul>")
    model = r["model"] if isinstance(r["model"], dict) else {"name": r["model"]}
    info = " · ".join(f"{_e(k)}: {_e(v)}" for k, v in model.items())
    host = r.get("host_evaluations")
    extra = f"<br>host model evaluations: {_e(host)}" if host else ""
    return (f"<p class=note>{_e(r['file'])} · seed {_e(r.get('seed'))} · aggregation {_e(r['agg'])}"
            f"{' · recomputed over the aligned set' if r['recomputed'] else ''}<br>{info}{extra}</p>"
            + "".join(out))


def _lambda_drill(board: dict[str, Any], r: dict[str, Any]) -> str:
    out = ["<table><tr><th>structure</th><th>λ</th><th>gate</th><th>evaluations</th><th>note</th></tr>"]
    for col in board["columns"]:
        c = r["cells"][col]
        lam = "skip" if not _finite(c["lambda"]) else f"{c['lambda']:.3e}"
        out.append(f"<tr><td>{_e(col)}</td><td>{lam}</td><td>{_gate_html(c['gate'])}</td>"
                   f"<td>{_e(c['n_evals'])}</td><td style='text-align:left'>{_e(c['skipped'] or '')}</td></tr>")
    thr = r.get("gate_threshold")
    return (f"<p class=note>{_e(r['file'])} · method {_e(r['method'])}"
            f"{f' · gate λ < {thr:g}' if _finite(thr) else ''}"
            f"{' · mean/max recomputed over the aligned set' if r['recomputed'] else ''}</p>" + "".join(out) +
            "</table>")


def _rate(x: Any, unit: str) -> str:
    return "—" if not _finite(x) else f"{x:.3g} {unit}".rstrip()


def _gb(x: Any) -> str:
    return "—" if not isinstance(x, int) or isinstance(x, bool) else f"{x / 1e9:.2f} GB"


def _nacl_text(t: dict[str, Any]) -> str:
    """The NaCl measurement of a throughput object, in words (docs/board.md, "Throughput")."""
    n = t.get("nacl") or {}
    if not n:
        return "not measured (report written before this measurement existed)"
    if n.get("error"):
        return f"not measured: {n['error']}"
    sd = n.get("atom_steps_per_s_stdev")
    return (_rate(n.get("atom_steps_per_s"), "atom·steps/s") + (f" ± {sd:.3g}" if _finite(sd) else "") +
            f" ({n.get('system')}, {n.get('n_atoms')} atoms; {n.get('warmup_steps')} warm-up steps, "
            f"{n.get('n_repeats')} × {n.get('timed_steps')} timed steps; compiled ahead in "
            f"{_num(n.get('compile_s'), '.1f')} s)" + (" — kept from an earlier run" if n.get("kept") else "") +
            _separately(n))


def _separately(n: dict[str, Any]) -> str:
    """A NaCl measurement made after the report's probes (benchmarks/board_nacl.py), in words: when, on what, at
    which commit and its own process's peak memory."""
    if not n.get("measured_separately"):
        return ""
    hw = n.get("hardware") if isinstance(n.get("hardware"), dict) else {}
    commit = n.get("jaxcert_commit")
    peak = n.get("peak_rss_bytes")
    return (f" — measured after the probes, on its own, {n.get('measured_utc') or 'at a time not recorded'}"
            + (f" on {hw['device']}" if isinstance(hw.get("device"), str) else "")
            + (f", jaxcert {commit[:10]}" if isinstance(commit, str) else "")
            + (f", peak memory {_gb(peak)}" if isinstance(peak, int) else ""))


def _memory_text(t: dict[str, Any]) -> str | None:
    m = t.get("peak_memory") or {}
    if not m:
        return None
    text = f"host {_gb(m.get('host_rss_bytes'))} resident ({m.get('host_scope') or 'scope not recorded'})"
    if m.get("device_bytes") is not None:
        text += f"; device {_gb(m.get('device_bytes'))} ({m.get('device_scope')})"
    return text


def _hardware_text(t: dict[str, Any], c: dict[str, Any]) -> str:
    h = t.get("hardware") or {}
    if not h:
        return str(t.get("device") or c.get("device") or "not recorded")
    parts = [str(h.get("device") or "")]
    if h.get("host_memory_bytes"):
        parts.append(f"{_gb(h['host_memory_bytes'])} host memory")
    if h.get("accelerator_memory_bytes"):
        parts.append(f"{_gb(h['accelerator_memory_bytes'])} on the accelerator")
    return ", ".join(p for p in parts if p)


def card_html(row: dict[str, Any]) -> str:
    """A row's model card and throughput as a small definition table (its drill-down; docs/board.md)."""
    c = row.get("card") or {}
    t = row.get("throughput") or {}
    md = t.get("md") or {}
    suite = t.get("suite") or {}
    files = "; ".join(f"{f['role']} {f['path']} ({f['bytes']} B) sha256 {f['sha256']}" for f in c.get("files") or [])
    other = None
    if md:
        other = (_rate(md.get("atom_steps_per_s"), "atom·steps/s") +
                 (f" ({md.get('n_atoms')} {md.get('element')} atoms, {md.get('n_steps')} steps)"
                  if md.get("n_atoms") else "") + (f" — {md['error']}" if md.get("error") else "") +
                 "; not comparable with the published column (another cell)")
    items = [
        ("parameters", c.get("parameters") if c.get("parameters") is not None else
         f"— ({c.get('parameters_counted_as', 'not recorded')})"),
        ("cutoff (Å)", c.get("cutoff_A")), ("species", ", ".join(c["species"]) if c.get("species") else "any"),
        ("precision", c.get("precision")), ("run dtype", c.get("dtype")),
        ("packages", ", ".join(f"{k} {v}" for k, v in (c.get("packages") or {}).items())),
        ("checkpoint", c.get("checkpoint")), ("files", files or None), ("stated sha256", c.get("stated_sha256")),
        ("training data", c.get("training_data") or "not stated by the model's package"),
        ("source", c.get("source")), ("computed", row.get("computed_at")), ("hardware", _hardware_text(t, c)),
        ("suite throughput", _rate(suite.get("evals_per_s"), "evaluations/s")),
        ("NaCl throughput", _nacl_text(t) if t else None),
        ("MD throughput, own cell", other),
        ("peak memory", _memory_text(t)),
        ("compilation", compilation_line(row["compilation"]).removeprefix("compilation: ")
         if row.get("compilation") else None),
    ]
    body = "".join(f"<tr><th>{_e(k)}</th><td style='text-align:left'>{_e(v)}</td></tr>" for k, v in items
                   if v is not None)
    return f"<table class=card><caption>model card</caption>{body}</table>"


def cards_section(rows: Sequence[dict[str, Any]]) -> str:
    """Throughput and model cards of every row: one table, one row per model (published rows included)."""
    head = ("<tr><th>model</th><th>source</th><th>evaluations/s (suite)</th><th>NaCl atom·steps/s</th>"
            "<th>hardware</th><th>peak memory</th><th>parameters</th><th>cutoff (Å)</th><th>precision</th>"
            "<th>training data</th></tr>")
    out = []
    for r in rows:
        c, t = r.get("card") or {}, r.get("throughput") or {}
        pub = r.get("published") or {}
        sd = r.get("atom_steps_per_s_stdev")
        rate = _rate(r.get("atom_steps_per_s"), "") + (f" ± {sd:.2g}" if _finite(sd) else "")
        hw = pub.get("hardware") if pub else _hardware_text(t, c)
        mem = _memory_text(t) if not pub else "not published"
        params = r.get("parameters") if r.get("parameters") is not None else "—"
        out.append(
            f"<tr><td>{_e(r['label'])}</td><td>{_e(board_page.source_text(r))}</td>"
            f"<td>{_e(_rate(r.get('evals_per_s'), ''))}</td><td>{_e(rate)}</td>"
            f"<td style='text-align:left'>{_e(hw or '—')}</td><td style='text-align:left'>{_e(mem or '—')}</td>"
            f"<td>{_e(params)}</td><td>{_e(c.get('cutoff_A', '—'))}</td><td>{_e(r.get('precision') or '—')}</td>"
            f"<td style='text-align:left'>{_e(r.get('training_set') or 'not stated')}</td></tr>")
    return ("<h2 id=throughput>Throughput and model cards</h2><p class=note>Suite: model evaluations per second "
            "of the probes that ran (compilation included). NaCl: atom·steps per second of NVE velocity Verlet on the "
            "published board's cell (NaCl rocksalt, 100 atoms; 20 warm-up steps, then the mean ± standard deviation "
            "of three 100-step runs), the published board's speed column measured its way; rates on different "
            "hardware do not compare. A model's full card is in its drill-down (▸).</p>"
            f"<div class=scroll><table id=cards>{head}{''.join(out)}</table></div>")


def _probe_sections(board: dict[str, Any], rows: list[dict[str, Any]]) -> list[str]:
    """One expandable section per probe, the only place its explanation is written out: the sentence, then a
    models × elements table (score, gate, defect ± stderr) of our rows (a published row has no per-element
    values)."""
    out = ["<h2>Per probe and element</h2><p class=note>Click a probe for what it tests and its per-element "
           "values.</p>"]
    els = board["elements"]
    ours = [r for r in rows if r.get("origin") != "published"]
    for col in board["columns"]:
        why = board["explanations"].get(col) or ""
        out.append(f"<details id='probe-{_e(col)}'><summary><b>{_e(col)}</b> — {_e(why)}</summary>")
        out.append("<table><tr><th>model</th><th>mean</th>" + "".join(f"<th>{_e(el)}</th>" for el in els) + "</tr>")
        for r in ours:
            c = r["cells"][col]
            tds = [_score_td(c)] + [_element_td(c["per_element"][el]) for el in els]
            out.append(f"<tr><td>{_e(r['label'])}</td>{''.join(tds)}</tr>")
        out.append("</table></details>")
    return out


def _summary_html(board: dict[str, Any]) -> str:
    """The summary line without the title (the page's <h1> says it once)."""
    return _summary_line(board).removeprefix("jaxcert comparison board · ")


#: Sort key of :func:`sort_rows` -> the header of :func:`board_html` it orders by.
_SORT_HEADS = {"model": "Model", "overall": "Overall", "gates": "Gates", "evals": "Evals", "wall": "Wall (s)",
               "dtype": "dtype", "evals_per_s": "Evals/s", "atom_steps_per_s": "NaCl atom·steps/s",
               "parameters": "Parameters", "source": "Source"}


def board_html(board: dict[str, Any], sort: str | None = None, reverse: bool = False) -> str:
    """The board as one self-contained HTML page (inline CSS and JS; no external resources).

    The page fits a 1,400-px window: the board scrolls sideways inside its own container with the model column
    fixed; the title and each probe's explanation appear once (tests/test_pages.py checks both in Chromium).
    A board of certification reports also gets the filters, search, pins and exports, the charts, and for
    published rows and their twins the published card and the per-probe difference (:mod:`board_page`);
    ``sort`` orders the rows now (the header shows it) and a header click orders them again.
    """
    rows = sort_rows(board, sort, reverse)
    kind = board["kind"]
    report = kind == "report"
    desc = _fixed_keys(kind)[sort][1] if sort in _fixed_keys(kind) else (sort in board["columns"] and report)
    now = None if sort is None else ("descending" if desc != reverse else "ascending")
    sort_head = _SORT_HEADS.get(sort, sort) if sort is not None else None

    def th(text: str, key_type: str, first: str, **kw: Any) -> str:
        name = kw.get("full") or text
        return _th(text, key_type, first, sorted_as=now if name == sort_head or text == sort_head else None, **kw)

    published = report and any(r.get("origin") == "published" for r in rows)
    params = report and any(r.get("parameters") is not None for r in rows)
    heads = [th("Model", "text", "ascending")]
    if published:
        heads.append(th("Source", "text", "ascending", title="jaxcert (exact derivatives) or the published "
                        "finite-difference board"))
    if report:
        heads += [th("Overall", "num", "descending"), th("Gates", "num", "descending")]
        heads += [th(short_name(c), "num", "descending", title=board["explanations"].get(c) or "",
                     link=f"probe-{c}", full=c) for c in board["columns"]]
    else:
        why = board["explanations"].get("lambda") or ""
        heads += [th("λ mean", "num", "ascending", title=why, link="why-lambda"),
                  th("λ max", "num", "ascending", title=why), th("Gate", "num", "descending")]
        heads += [th(c, "num", "ascending", title=why) for c in board["columns"]]
    heads += [th("Evals", "num", "ascending"), th("Wall (s)", "num", "ascending"), th("dtype", "text", "ascending")]
    speed = has_speed(board)
    if speed:
        heads += [th("Evals/s", "num", "descending", title="model evaluations per second of the suite "
                     "(compilation included)"),
                  th("NaCl atom·steps/s", "num", "descending", title="NVE velocity Verlet on the published "
                     "board's 100-atom NaCl cell, measured its way (docs/board.md)")]
    if params:
        heads.append(th("Parameters", "num", "descending", title="the model's parameter count (its card)"))
    heads += [th(k, "text", "ascending") for k in board["version_keys"]]
    ncol = len(heads)
    body = []
    ids = {k: f"r{k}" for k in range(len(rows))}
    for k, r in enumerate(rows):
        pin = "<button class=pin aria-pressed=false aria-label='pin this row' title='pin: keep shown, on top'>" \
              "</button>" if report else ""
        tds = [f"<td data-v='{_e(r['label'].lower())}'>{pin}<button class=tog aria-expanded=false "
               f"onclick='jcToggle(this)' title='per-element scores'>▸</button> {_e(r['label'])}</td>"]
        if published:
            src = board_page.source_text(r)
            tds.append(f"<td class=src data-v='{_e(src)}'>{_e(src)}</td>")
        if report:
            frac = r["gates_passed"] / r["gates_total"] if r["gates_total"] else None
            tds.append(f"<td data-v='{_v(r['overall'])}'>{_num(r['overall'], '.4f')}</td>")
            tds.append(f"<td data-v='{_v(frac)}'>{r['gates_passed']}/{r['gates_total']}</td>")
            tds += [_score_td(r["cells"][c]) for c in board["columns"]]
            if r.get("origin") == "published":
                drill = board_page.published_card(r)
            else:
                drill = (_report_drill(board, r) + board_page.twin_table(r)
                         + (card_html(r) if r.get("card") or r.get("throughput") else ""))
        else:
            g = None if r["gate"] is None else int(r["gate"])
            tds.append(f"<td data-v='{_v(r['mean'])}'>{_num(r['mean'], '.2e')}</td>")
            tds.append(f"<td data-v='{_v(r['max'])}'>{_num(r['max'], '.2e')}</td>")
            tds.append(f"<td data-v='{_v(g)}'>{_gate_html(r['gate'])}</td>")
            tds += [_lambda_td(r["cells"][c]) for c in board["columns"]]
            drill = _lambda_drill(board, r)
        tds.append(f"<td data-v='{_v(r['n_evals'])}'>{_num(r['n_evals'], 'd')}</td>")
        tds.append(f"<td data-v='{_v(r['wall_time_s'])}'>{_num(r['wall_time_s'], '.1f')}</td>")
        tds.append(f"<td data-v='{_e(r['dtype'] or '')}'>{_e(r['dtype'] or '—')}</td>")
        if speed:
            tds += [f"<td data-v='{_v(r.get(k))}'>{_num(r.get(k), '.3g')}</td>"
                    for k in ("evals_per_s", "atom_steps_per_s")]
        if params:
            tds.append(f"<td data-v='{_v(r.get('parameters'))}'>{_num(r.get('parameters'), 'd')}</td>")
        tds += [f"<td data-v='{_e(r['versions'].get(k, ''))}'>{_e(r['versions'].get(k, '—'))}</td>"
                for k in board["version_keys"]]
        attrs = (" " + board_page.row_attributes(r, ids[k])) if report else ""
        body.append(f"<tbody class=row{attrs}><tr class=main>{''.join(tds)}</tr>"
                    f"<tr class=drill hidden><td colspan={ncol}><div class=drillbox>{drill}</div></td></tr></tbody>")
    order = "in file order" if sort is None else f"sorted by {_e(sort_head)} ({now})"
    if kind == "report":
        legend = ("Cells: probe score, the mean over elements (1 = the identity holds; colours below); ✓ gate "
                  "passed, ✗ gate failed, no mark: graded only. ")
        if published:
            legend += ("Shaded rows, scores in italics: the published finite-difference board's own scores and "
                       "gates (its source is in each row's card). ")
        abbrev = [f"{short_name(c)} = {c}" for c in board["columns"] if short_name(c) != c]
        if abbrev:
            legend += "Columns: " + ", ".join(abbrev) + ". "
        colours = score_legend([r["cells"][c]["score"] for r in rows for c in board["columns"]])
    else:
        legend = "Cells: λ per structure (0 = conservative forces); ✓/✗ the λ gate where the report has one. "
        colours = _lambda_legend([r["cells"][c]["lambda"] for r in rows for c in board["columns"]])
    notes = [f"<p class=note>{_e(line.strip())}</p>" for line in _dropped_lines(board)]
    notes += [f"<p class=note>note: {_e(n)}</p>" for n in board["notes"]]
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>jaxcert comparison board</title>",
        "<meta name=viewport content='width=device-width, initial-scale=1'>",
        f"<style>{_CSS}{board_page.CSS}</style></head><body><main>",
        "<h1>jaxcert comparison board</h1>",
        f"<p class=summary>{_e(_summary_html(board))}</p>",
        f"<p class=note>{_e(legend)}Click a column header to sort (rows now {order}); click ▸ for a model's "
        "per-element values and card, ? for a probe's.</p>",
        *notes,
        board_page.controls(rows, f"rows {order}") if report else "",
        f"<div class=scroll><table id=board class=board><thead><tr>{''.join(heads)}</tr></thead>{''.join(body)}"
        "</table></div>",
        colours,
    ]
    if report:
        parts.append(board_page.charts(rows, ids))
        if any(r.get("card") or r.get("throughput") or r.get("published") for r in rows):
            parts.append(cards_section(rows))
        parts += _probe_sections(board, rows)
    else:  # no per-structure sections: the λ probe's sentence, once
        parts.append("<h2 id=why>What λ tests</h2><dl>" + "".join(
            f"<dt id='why-{_e(n)}'>{_e(n)}</dt><dd>{_e(EXPLANATIONS.get(n, 'no explanation recorded'))}</dd>"
            for n in ["lambda"]) + "</dl>")
    parts.append("<h2>Reports</h2><table class=files><tr><th>model</th><th>file</th><th>dtype</th><th>versions</th>"
                 "<th>machine</th></tr>" + "".join(
                     f"<tr><td>{_e(r['label'])}</td><td>{_e(r['file'])}</td>"
                     f"<td>{_e(r['dtype'] or '—')}</td><td>"
                     f"{_e(', '.join(f'{k} {v}' for k, v in r['versions'].items()) or '—')}</td>"
                     f"<td>{_e(r.get('machine') or '—')}</td></tr>" for r in rows)
                 + "</table>")
    parts.append(f"</main><script>{_JS}</script></body></html>")
    return "\n".join(parts)
