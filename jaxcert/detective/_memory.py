"""The evidence memory: an append-only JSON-lines file (docs/detective.md §4.4).

One record per line, each ``{"type": ..., "t": unix time, ...}``; types:

* ``run``: a run started (target, committee, protocols, elements, budget, the settings' fingerprint);
* ``screen``: one protocol's cheap screen (its cells, the evaluations it cost);
* ``artefact``: a cell that every model fails, labelled as a protocol artefact (never escalated);
* ``declaration``: a hypothesis pre-registered *before* its probes run (expected failures, scope, refutation);
* ``probe``: one probe's report (scope, mechanism, impact, robustness) for a declared hypothesis;
* ``verdict``: ``reject`` (with the reason) or ``escalate``;
* ``stop``: why the search ended (escalated, exhausted, budget).

Records are only ever appended (flushed and fsync'ed one by one), so a killed run loses at most the line being
written; a truncated last line is ignored on reading and its fragment removed before the next append (the only
bytes ever removed: a record that never completed).  A resumed run reads the records, reuses finished screens
and probes and skips settled hypotheses: finished work is never redone or lost.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from typing import Any

from jaxcert.core import inputs
from jaxcert.core.files import append_line
from jaxcert.core.inputs import InputError
from jaxcert.core.result import to_jsonable

__all__ = ["EvidenceMemory", "check_record", "RECORD_TYPES"]

#: The record types of the memory (module docstring), and the probes of a hypothesis.
RECORD_TYPES = ("run", "screen", "artefact", "declaration", "probe", "verdict", "stop")
_PROBES = ("scope", "mechanism", "impact", "robustness")
#: the probes every escalation has
_REQUIRED = ("scope", "mechanism", "impact")
_DAMAGED = ("the evidence memory is damaged (a hand-edited or foreign line); nothing was written: remove that line "
            "or start afresh in another --out")


def _num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


_TEXT = (lambda x: isinstance(x, str), "a string")
_TEXT_OR_NULL = (lambda x: x is None or isinstance(x, str), "a string or null")
_NUMBER = (_num, "a number")
_NUMBER_OR_NULL = (lambda x: x is None or _num(x), "a number or null")
_COUNT = (lambda x: _num(x) and x >= 0, "a number >= 0")
_OBJECT = (lambda x: isinstance(x, dict), "an object")
_OBJECT_OR_NULL = (lambda x: x is None or isinstance(x, dict), "an object or null")
_LIST = (lambda x: isinstance(x, list), "a list")
_TEXTS = (lambda x: isinstance(x, list) and all(isinstance(v, str) for v in x), "a list of strings")

#: per record type: field -> (test, allowed, required); what the search and the report read back
_RECORD_FIELDS: dict[str, dict[str, tuple[Any, str, bool]]] = {
    "run": {},
    "screen": {"protocol": (*_TEXT, True), "fingerprint": (*_TEXT, True), "cells": (*_LIST, True),
               "evals": (*_COUNT, False)},
    "artefact": {"protocol": (*_TEXT, True), "cell": (*_TEXT, True), "reason": (*_TEXT, True)},
    "declaration": {"hypothesis": (*_OBJECT, True), "regions": (*_LIST, True), "expected_failures": (*_TEXTS, True),
                    "expected_clean": (*_TEXTS, True), "criteria": (*_OBJECT, True), "refuted_if": (*_TEXTS, True),
                    "backlog": (*_LIST, False)},
    "probe": {"hypothesis_id": (*_TEXT, True), "probe": (lambda x: x in _PROBES, "one of " + ", ".join(_PROBES), True),
              "evals": (*_COUNT, False)},
    "verdict": {"hypothesis_id": (*_TEXT, True), "verdict": (lambda x: x in ("reject", "escalate"),
                                                              "reject or escalate", True),
                "reason": (*_TEXT, True), "numbers": (*_OBJECT, False)},
    "stop": {},
}
_HYPOTHESIS_FIELDS = {"id": (*_TEXT, True), "protocol": (*_TEXT, True), "scope": (*_OBJECT, True),
                      "statement": (*_TEXT, True), "signal_type": (*_TEXT, True), "importance": (*_NUMBER, True),
                      "severity": (*_NUMBER, True), "priority": (*_NUMBER, True), "seed_cells": (*_TEXTS, True),
                      "origin": (*_TEXT, False), "observable": (*_TEXT_OR_NULL, False),
                      "evidence": (*_OBJECT, False)}
_CRITERIA_FIELDS = {"signal": (*_TEXT, True), "min_in_scope_fraction": (*_NUMBER, True),
                    "max_out_of_scope_fraction": (*_NUMBER, True), "labels": (*_TEXTS, False),
                    "observable": (*_TEXT_OR_NULL, False)}
_CELL_FIELDS = {"protocol": (*_TEXT, True), "key": (*_TEXT, True), "region": (*_OBJECT, True),
                "values": (*_OBJECT, True), "metrics": (*_OBJECT, True), "signal": (*_OBJECT, True),
                "data": (*_OBJECT_OR_NULL, False), "variant": (*_TEXT, False), "observables": (*_OBJECT_OR_NULL, False)}
_SIGNAL_FIELDS = {"label": (*_TEXT, True), "z": (*_NUMBER_OR_NULL, True), "target": (*_NUMBER_OR_NULL, True),
                  "committee_median": (*_NUMBER_OR_NULL, True), "committee_scale": (*_NUMBER_OR_NULL, True),
                  "n_committee": (*_COUNT, True), "n_committee_anomalous": (*_COUNT, True),
                  "threshold": (*_NUMBER_OR_NULL, True), "reason": (*_TEXT, True)}
_OBSERVABLE_FIELDS = {"observable": (*_TEXT, True), "unit": (*_TEXT, True), "relative": (*_OBJECT, True),
                      "absolute": (*_OBJECT_OR_NULL, False), "combined": (*_OBJECT, True)}


def _fields(d: Any, fields: dict[str, tuple[Any, str, bool]], where: str, path: str) -> None:
    if not isinstance(d, dict):
        raise InputError(f"{where}: {path or 'the record'}: got {inputs.shown(d)}; allowed: an object; {_DAMAGED}")
    for key, (test, allowed, required) in fields.items():
        at = f"{path}.{key}" if path else key
        if key not in d:
            if required:
                raise InputError(f"{where}: {at}: missing; allowed: {allowed}; {_DAMAGED}")
            continue
        if not test(d[key]):
            raise InputError(f"{where}: {at}: got {inputs.shown(d[key])}; allowed: {allowed}; {_DAMAGED}")


def _signal(d: Any, where: str, path: str) -> None:
    _fields(d, _SIGNAL_FIELDS, where, path)


def _cell(c: Any, where: str, path: str) -> None:
    """One screen or scope cell as :meth:`jaxcert.detective._protocols.Cell.from_dict` reads it."""
    _fields(c, _CELL_FIELDS, where, path)
    for name, v in c["values"].items():
        if not _NUMBER_OR_NULL[0](v):
            raise InputError(f"{where}: {path}.values[{name!r}]: got {inputs.shown(v)}; allowed: a number or null; "
                             f"{_DAMAGED}")
    for name, v in c["metrics"].items():
        if not isinstance(v, dict):
            raise InputError(f"{where}: {path}.metrics[{name!r}]: got {inputs.shown(v)}; allowed: an object; "
                             f"{_DAMAGED}")
    _signal(c["signal"], where, f"{path}.signal")
    for name, o in (c.get("observables") or {}).items():
        at = f"{path}.observables[{name!r}]"
        _fields(o, _OBSERVABLE_FIELDS, where, at)
        for part in ("relative", "absolute", "combined"):
            if o.get(part) is not None:
                _signal(o[part], where, f"{at}.{part}")


def check_record(rec: Any, where: str) -> dict[str, Any]:
    """One record of the memory, checked for every field the search and the report read back (its type, the
    cells of a screen or scope probe, a declaration's hypothesis and criteria, a verdict); ``where`` names the
    file and the line.  Raises :class:`InputError` for the first problem; returns ``rec``."""
    if not isinstance(rec, dict):
        raise InputError(f"{where}: got {inputs.shown(rec)}; allowed: a JSON object (one record); {_DAMAGED}")
    if rec.get("type") not in RECORD_TYPES:
        raise InputError(f"{where}: type: got {inputs.shown(rec.get('type'))}; allowed: one of "
                         f"{', '.join(RECORD_TYPES)}; {_DAMAGED}")
    rtype = rec["type"]
    _fields(rec, _RECORD_FIELDS[rtype], where, "")
    if rtype == "screen":
        for j, c in enumerate(rec["cells"]):
            _cell(c, where, f"cells[{j}]")
    elif rtype == "declaration":
        _fields(rec["hypothesis"], _HYPOTHESIS_FIELDS, where, "hypothesis")
        _fields(rec["criteria"], _CRITERIA_FIELDS, where, "criteria")
    elif rtype == "probe":
        if rec["probe"] == "scope":
            _fields(rec, {"cells": (*_LIST, True)}, where, "")
            for j, c in enumerate(rec["cells"]):
                _cell(c, where, f"cells[{j}]")
        else:
            _fields(rec, {"report": (*_OBJECT, True)}, where, "")
    elif rtype == "verdict" and rec["verdict"] == "escalate":
        _fields(rec, {"numbers": (*_OBJECT, True)}, where, "")
    return rec


def _check_escalations(records: list[dict[str, Any]], path: str) -> None:
    """An escalation is rebuilt from the memory alone: its declaration and its three probes (scope, mechanism,
    impact; robustness where it ran) must be there."""
    for r in records:
        if r["type"] != "verdict" or r["verdict"] != "escalate":
            continue
        hid = r["hypothesis_id"]
        if not any(d["type"] == "declaration" and d["hypothesis"]["id"] == hid for d in records):
            raise InputError(f"{path}: the escalation of {inputs.shown(hid)} has no declaration record; {_DAMAGED}")
        for name in _REQUIRED:  # the robustness probe is optional (no variants, or a search without it)
            if not any(p["type"] == "probe" and p["hypothesis_id"] == hid and p["probe"] == name for p in records):
                raise InputError(f"{path}: the escalation of {inputs.shown(hid)} has no {name} probe record; "
                                 f"{_DAMAGED}")


class EvidenceMemory:
    """Append-only JSON-lines evidence memory at ``path`` (docs/detective.md §4.4)."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = os.fspath(path)
        self.records: list[dict[str, Any]] = []
        if os.path.exists(self.path):
            self.records = list(self._read())

    def _read(self) -> Iterator[dict[str, Any]]:
        """The records, each checked (:func:`check_record`) before any is used, so a damaged memory is refused
        with an :class:`InputError` naming the file and the line before a resumed run writes anything."""
        inputs.regular_file("--resume", self.path, what="an evidence memory (evidence.jsonl)")  # not a FIFO
        try:
            with open(self.path, encoding="utf-8") as fh:
                lines = fh.read().split("\n")
        except UnicodeDecodeError as err:
            raise InputError(f"{self.path}: not UTF-8 text (byte {err.start}); {_DAMAGED}") from None
        records = []
        for k, line in enumerate(lines):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except (json.JSONDecodeError, RecursionError, ValueError):
                if k >= len(lines) - 2:  # a line cut by a killed run: the record never completed
                    continue
                raise InputError(f"{self.path}: line {k + 1} is not JSON; {_DAMAGED}") from None
            check_record(rec, f"{self.path}: line {k + 1}")
            records.append(rec)
        _check_escalations(records, self.path)
        yield from records

    def append(self, rtype: str, **fields: Any) -> dict[str, Any]:
        """Append one record (flushed and fsync'ed) and return it."""
        rec = {"type": rtype, "t": round(time.time(), 3), **to_jsonable(fields)}
        line = json.dumps(rec, allow_nan=True, ensure_ascii=False)
        folder = os.path.dirname(os.path.abspath(self.path))
        os.makedirs(folder, exist_ok=True)
        # O_NOFOLLOW: a link (to somebody else's file) is refused, never appended to or cut; a record cut by a
        # killed run never completed, and only that fragment is dropped, through the same open file
        append_line(self.path, line, drop_unfinished=True)
        self.records.append(rec)
        return rec

    # ------------------------------------------------------------------ queries
    def of_type(self, rtype: str) -> list[dict[str, Any]]:
        return [r for r in self.records if r["type"] == rtype]

    def screen(self, protocol: str, fingerprint: str) -> dict[str, Any] | None:
        """The finished screen of ``protocol`` under the same settings, if any."""
        for r in reversed(self.records):
            if r["type"] == "screen" and r["protocol"] == protocol and r.get("fingerprint") == fingerprint:
                return r
        return None

    def declaration(self, hid: str) -> dict[str, Any] | None:
        for r in self.records:
            if r["type"] == "declaration" and r["hypothesis"]["id"] == hid:
                return r
        return None

    def probe(self, hid: str, name: str) -> dict[str, Any] | None:
        for r in self.records:
            if r["type"] == "probe" and r["hypothesis_id"] == hid and r["probe"] == name:
                return r
        return None

    def verdict(self, hid: str) -> dict[str, Any] | None:
        for r in self.records:
            if r["type"] == "verdict" and r["hypothesis_id"] == hid:
                return r
        return None

    def settled(self) -> set[str]:
        """Hypothesis ids with a verdict."""
        return {r["hypothesis_id"] for r in self.records if r["type"] == "verdict"}

    def n_evals(self) -> int:
        """Evaluations recorded by finished screens and probes."""
        return int(sum(r.get("evals", 0) for r in self.records if r["type"] in ("screen", "probe")))
