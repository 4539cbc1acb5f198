"""The evidence memory: an append-only JSON-lines file (docs/detective.md §4.4).

One record per line, each ``{"type": ..., "t": unix time, ...}``; types:

* ``run``: a run started (target, committee, protocols, elements, budget, the settings' fingerprint);
* ``screen``: one protocol's cheap screen (its cells, the evaluations it cost);
* ``artefact``: a cell that every model fails, labelled as a protocol artefact (never escalated);
* ``declaration``: a hypothesis pre-registered *before* its probes run (expected failures, scope, refutation);
* ``probe``: one probe's report (scope, mechanism, impact) for a declared hypothesis;
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

from jaxcert.core.inputs import InputError
from jaxcert.core.result import to_jsonable

__all__ = ["EvidenceMemory"]


class EvidenceMemory:
    """Append-only JSON-lines evidence memory at ``path`` (docs/detective.md §4.4)."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = os.fspath(path)
        self.records: list[dict[str, Any]] = []
        if os.path.exists(self.path):
            self.records = list(self._read())

    def _read(self) -> Iterator[dict[str, Any]]:
        with open(self.path, encoding="utf-8") as fh:
            lines = fh.read().split("\n")
        for k, line in enumerate(lines):
            if not line.strip():
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                if k >= len(lines) - 2:  # a line cut by a killed run: the record never completed
                    continue
                raise InputError(f"{self.path}: line {k + 1} is not JSON; the evidence memory is corrupt") from None

    def append(self, rtype: str, **fields: Any) -> dict[str, Any]:
        """Append one record (flushed and fsync'ed) and return it."""
        rec = {"type": rtype, "t": round(time.time(), 3), **to_jsonable(fields)}
        line = json.dumps(rec, allow_nan=True, ensure_ascii=False)
        folder = os.path.dirname(os.path.abspath(self.path))
        os.makedirs(folder, exist_ok=True)
        if os.path.exists(self.path) and os.path.getsize(self.path) > 0:
            with open(self.path, "rb+") as fh:  # a record cut by a killed run never completed: drop its fragment
                data = fh.read()
                if not data.endswith(b"\n"):
                    fh.truncate(data.rfind(b"\n") + 1)
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")
            fh.flush()
            os.fsync(fh.fileno())
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
