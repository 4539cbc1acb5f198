"""Reading a report file back: the one schema check of what ``jaxcert compare`` and ``certify --resume`` read.

jaxcert writes two kinds of report JSON: the certification report (``jaxcert-report/1``,
:meth:`jaxcert.report.certification.Report.to_dict`, plus ``complete`` and ``probe_configs`` from
:func:`jaxcert.checkpoint.write_report`) and the λ report (``jaxcert-lambda/1``,
:meth:`jaxcert.LambdaResult.to_dict`).  Both are strict JSON (``allow_nan=False``: a non-finite
number is written as ``null``).  :func:`load` reads such a file and checks every field that the
readers use, so that a hand-edited, truncated or hostile file is refused with one
:class:`~jaxcert.core.inputs.InputError` naming the file, the field and what is allowed::

    --resume: r.json: probes[3].per_element.C: missing; allowed: an object with the element's result
    r.json: probes[0].score: got nan; allowed: a finite number or null (jaxcert writes no NaN or Infinity)
    r.json: aggregate.n_evals: got 'abc'; allowed: an integer >= 0

What is checked (the first problem found is reported):

* the file: at most :data:`MAX_BYTES`, UTF-8 JSON, nested at most :data:`MAX_DEPTH` levels, no
  ``NaN`` / ``Infinity`` anywhere, an object with a known ``schema``;
* a certification report: ``model`` (an object with a ``name``), ``elements`` (element symbols,
  each once), ``seed``, ``dtype``, every probe (a unique ``name``, ``target``, ``defect``,
  ``score`` in [0, 1], ``gate``, ``n_evals``, ``status``, ``wall_s``, ``message``, ``details``
  and ``per_element``: one entry per element of the report, each with its ``defect``, ``score``,
  ``gate``, ``n_evals``, ``status`` and ``details``; a probe on named structures, ``lam``, has one
  entry per structure instead) and ``aggregate`` (``overall``, ``method``, gate counts,
  ``n_evals``, ``sub_scores``, ``gates``, ``per_element_overall``);
* a λ report: ``model``, ``method``, ``dtype``, ``lambda`` (per structure, ≥ 0 or null),
  ``mean``, ``max``, ``n_evals`` and ``skipped`` per structure, and the gate where present;
* in both, when present: ``versions`` (package → version string), ``machine``, ``wall_time_s``;
* a certification report, when present: ``card`` (an object; every field the board and ``compare`` read of
  the type the writer gives it: ``parameters`` an integer >= 0 or null, ``species`` a list of strings,
  ``packages`` an object of strings, ``files`` a list of objects, the rest text; :data:`CARD_FIELDS`) and
  ``throughput`` (an object; ``suite.evals_per_s``, ``md.atom_steps_per_s`` and ``nacl.atom_steps_per_s``
  finite numbers >= 0 or null, ``hardware`` and ``peak_memory`` objects of text and byte counts;
  ``docs/board.md``).

Keys the readers do not use are allowed (a newer writer may add some); keys of ``per_element``
and ``per_element_overall`` must be the report's elements.  The field tables below are the
writer's keys; ``tests/test_compare.py`` checks them against reports the writer produced.

This module imports neither JAX nor the probes.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
from collections.abc import Callable
from typing import Any

from jaxcert.core.inputs import InputError
from jaxcert.report.summary import AGGREGATIONS, UNSUPPORTED

__all__ = [
    "REPORT_SCHEMA", "LAMBDA_SCHEMA", "KINDS", "MAX_BYTES", "MAX_DEPTH", "PROBE_STATUSES", "ELEMENT_STATUSES",
    "STRUCTURE_PROBES", "REPORT_FIELDS", "CARD_FIELDS", "THROUGHPUT_FIELDS", "RATE_FIELDS", "HARDWARE_FIELDS",
    "MEMORY_FIELDS", "PROBE_FIELDS",
    "ELEMENT_FIELDS", "AGGREGATE_FIELDS", "LAMBDA_FIELDS",
    "read_json", "check_report", "check_lambda", "load",
]

REPORT_SCHEMA = "jaxcert-report/1"
LAMBDA_SCHEMA = "jaxcert-lambda/1"
KINDS = {REPORT_SCHEMA: "report", LAMBDA_SCHEMA: "lambda"}
#: Largest report file read (bytes): a ten-element report of every probe is under 1 MB.
MAX_BYTES = 32 * 2**20
#: Deepest nesting read (the writer's reports nest about ten levels).
MAX_DEPTH = 64
#: Status of a probe (its summary over elements) and of one element's result.
PROBE_STATUSES = ("ok", "non-finite", "error", "skipped")
ELEMENT_STATUSES = (*PROBE_STATUSES, UNSUPPORTED)
#: Probes whose rows are named structures, not the report's elements (``ProbeSpec.structures``).
STRUCTURE_PROBES = ("lam",)
_INT_MAX = 2**63 - 1  # counts are read back into int64 arrays
_SOURCES = "a JSON file written by jaxcert certify --json or jaxcert lambda --json"


# ------------------------------------------------------------------------------------------------ value kinds
def _num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


@dataclasses.dataclass(frozen=True)
class Kind:
    """What a field may hold: a test, the words for the message, and for an object of values the kind of
    each value (checked value by value, so that the message names the key)."""

    test: Callable[[Any], bool]
    allowed: str
    each: Kind | None = None


NUMBER = Kind(_num, "a finite number")
NUMBER_OR_NULL = Kind(lambda x: x is None or _num(x), "a finite number or null")
NON_NEGATIVE = Kind(lambda x: _num(x) and x >= 0, "a finite number >= 0")
NON_NEGATIVE_OR_NULL = Kind(lambda x: x is None or (_num(x) and x >= 0), "a finite number >= 0 or null")
SCORE_OR_NULL = Kind(lambda x: x is None or (_num(x) and 0 <= x <= 1), "a number in [0, 1] or null")
COUNT = Kind(lambda x: _int(x) and 0 <= x <= _INT_MAX, "an integer >= 0")
SEED = Kind(lambda x: _int(x) and 0 <= x <= 2**31 - 1, "an integer in [0, 2147483647]")
BOOL = Kind(lambda x: isinstance(x, bool), "true or false")
BOOL_OR_NULL = Kind(lambda x: x is None or isinstance(x, bool), "true, false or null")
TEXT = Kind(lambda x: isinstance(x, str), "a string")
NAME = Kind(lambda x: isinstance(x, str) and bool(x.strip()), "a non-empty string")
TEXT_OR_NULL = Kind(lambda x: x is None or isinstance(x, str), "a string or null")
OBJECT = Kind(lambda x: isinstance(x, dict), "an object")
LIST = Kind(lambda x: isinstance(x, list), "a list")


def _one_of(values: tuple[str, ...]) -> Kind:
    return Kind(lambda x: isinstance(x, str) and x in values, "one of " + ", ".join(values))


def _map_of(kind: Kind) -> Kind:
    return Kind(lambda x: isinstance(x, dict), f"an object of {kind.allowed} values", each=kind)


#: Top level of a certification report (``elements``, ``probes`` and ``aggregate`` are checked on their own).
REPORT_FIELDS: dict[str, tuple[Kind, bool]] = {
    "schema": (_one_of((REPORT_SCHEMA,)), True),
    "model": (OBJECT, True),
    "elements": (LIST, True),
    "seed": (SEED, True),
    "dtype": (NAME, True),
    "probes": (LIST, True),
    "aggregate": (OBJECT, True),
    "versions": (_map_of(TEXT), False),
    "machine": (OBJECT, False),
    "wall_time_s": (NON_NEGATIVE, False),
    "complete": (BOOL, False),  # checkpoint files (jaxcert.checkpoint.write_report)
    "probe_configs": (_map_of(TEXT_OR_NULL), False),
    "card": (OBJECT, False),  # the model card (jaxcert.probes.card; docs/board.md)
    "throughput": (OBJECT, False),  # evaluations/s, atom·steps/s (jaxcert.probes.throughput; docs/board.md)
    "compilation": (OBJECT, False),  # traces, compiles and their seconds (jaxcert.core.compilation)
    # the gate profile of the written verdicts and the model precision it judged at (jaxcert.report.gates)
    "gate_profile": (_one_of(("exact", "reference")), False),
    "precision": (NAME, False),
    # when the report was finished (jaxcert.checkpoint.write_report); for a report written before that stamp,
    # the dates of the commits that changed it (benchmarks/board_nacl.py)
    "finished_utc": (TEXT_OR_NULL, False),
    "computed_between_utc": (TEXT_OR_NULL, False),
}
def _card_files(x: Any) -> bool:
    return isinstance(x, list) and all(
        isinstance(f, dict) and all(isinstance(f.get(k), str) for k in ("role", "path", "sha256"))
        and _int(f.get("bytes")) and f["bytes"] >= 0 for f in x)


#: What the board and ``compare`` read of ``card`` (``jaxcert/probes/card.py``; the page and the terminal table
#: join ``species``, iterate ``packages`` and ``files``): each of the type the writer gives it, or the report is
#: refused naming the field.  Other keys are free text written by jaxcert, shown as text.
CARD_FIELDS: dict[str, tuple[Kind, bool]] = {
    "name": (TEXT_OR_NULL, False),
    "parameters": (Kind(lambda x: x is None or (_int(x) and 0 <= x <= _INT_MAX), "an integer >= 0 or null"),
                   False),
    "parameters_stated": (Kind(lambda x: x is None or (_int(x) and 0 <= x <= _INT_MAX), "an integer >= 0 or null"),
                          False),
    "parameters_counted_as": (TEXT_OR_NULL, False),
    "cutoff_A": (Kind(lambda x: x is None or isinstance(x, str) or _num(x), "a finite number, a string or null"),
                 False),
    "species": (Kind(lambda x: x is None or (isinstance(x, list) and all(isinstance(e, str) for e in x)),
                     "a list of element symbols (strings) or null (any element)"), False),
    "precision": (TEXT_OR_NULL, False),
    "dtype": (TEXT_OR_NULL, False),
    "conservative_forces": (BOOL_OR_NULL, False),
    "stress_head": (BOOL_OR_NULL, False),
    "packages": (Kind(lambda x: x is None or isinstance(x, dict), "an object of package: version strings or null",
                      each=TEXT), False),
    "checkpoint": (TEXT_OR_NULL, False),
    "files": (Kind(lambda x: x is None or _card_files(x), "a list of objects with role, path and sha256 (strings) "
                   "and bytes (an integer >= 0), or null"), False),
    "stated_sha256": (TEXT_OR_NULL, False),
    "source": (TEXT_OR_NULL, False),
    "device": (TEXT_OR_NULL, False),
}
#: What the board reads of ``throughput.suite`` and ``throughput.md``.
THROUGHPUT_FIELDS: dict[str, tuple[Kind, bool]] = {
    "device": (TEXT_OR_NULL, False),
    "suite": (Kind(lambda x: x is None or isinstance(x, dict), "an object or null"), False),
    "md": (Kind(lambda x: x is None or isinstance(x, dict), "an object or null"), False),
    "nacl": (Kind(lambda x: x is None or isinstance(x, dict), "an object or null"), False),
    "hardware": (Kind(lambda x: x is None or isinstance(x, dict), "an object or null"), False),
    "peak_memory": (Kind(lambda x: x is None or isinstance(x, dict), "an object or null"), False),
}
#: What the board reads of ``throughput.hardware`` and ``throughput.peak_memory`` (shown as text and numbers).
HARDWARE_FIELDS: dict[str, tuple[Kind, bool]] = {
    "device": (TEXT_OR_NULL, False), "platform": (TEXT_OR_NULL, False), "cpu": (TEXT_OR_NULL, False),
    "cpu_cores": (Kind(lambda x: x is None or (_int(x) and 0 <= x <= _INT_MAX), "an integer >= 0 or null"), False),
    "host_memory_bytes": (Kind(lambda x: x is None or (_int(x) and 0 <= x <= _INT_MAX), "an integer >= 0 or null"),
                          False),
    "accelerator": (TEXT_OR_NULL, False),
    "accelerator_memory_bytes": (Kind(lambda x: x is None or (_int(x) and 0 <= x <= _INT_MAX),
                                      "an integer >= 0 or null"), False),
}
MEMORY_FIELDS: dict[str, tuple[Kind, bool]] = {
    "host_rss_bytes": (Kind(lambda x: x is None or (_int(x) and 0 <= x <= _INT_MAX), "an integer >= 0 or null"),
                       False),
    "host_scope": (TEXT_OR_NULL, False),
    "device_bytes": (Kind(lambda x: x is None or (_int(x) and 0 <= x <= _INT_MAX), "an integer >= 0 or null"),
                     False),
    "device_scope": (TEXT_OR_NULL, False),
}
RATE_FIELDS: dict[str, tuple[Kind, bool]] = {
    "evals_per_s": (NON_NEGATIVE_OR_NULL, False),
    "atom_steps_per_s": (NON_NEGATIVE_OR_NULL, False),
    "wall_s": (NON_NEGATIVE_OR_NULL, False),
    "atom_steps_per_s_stdev": (NON_NEGATIVE_OR_NULL, False),
    "n_atoms": (Kind(lambda x: x is None or (_int(x) and 0 <= x <= _INT_MAX), "an integer >= 0 or null"), False),
    "error": (TEXT_OR_NULL, False),
    "system": (TEXT_OR_NULL, False),
    "element": (TEXT_OR_NULL, False),
}
#: One probe of ``probes`` (``name`` and ``per_element`` are checked on their own).
PROBE_FIELDS: dict[str, tuple[Kind, bool]] = {
    "name": (NAME, True),
    "target": (NUMBER, True),
    "defect": (NUMBER_OR_NULL, True),
    "score": (SCORE_OR_NULL, True),
    "gate": (BOOL_OR_NULL, True),
    "n_evals": (COUNT, True),
    "status": (_one_of(PROBE_STATUSES), True),
    "wall_s": (NON_NEGATIVE, True),
    "message": (TEXT_OR_NULL, True),
    "details": (OBJECT, True),
    "per_element": (OBJECT, True),
    "defect_stderr": (NON_NEGATIVE_OR_NULL, False),
    "host_evaluations": (_map_of(COUNT), False),
    "gates": (_map_of(BOOL_OR_NULL), False),  # the verdict under each gate profile
    "reasons": (LIST, False),  # one line per failed or skipped element
    "noise_floor": (NON_NEGATIVE_OR_NULL, False),  # a statistical probe's exact-model defect
}
#: One element's (or structure's) entry of a probe's ``per_element``.
ELEMENT_FIELDS: dict[str, tuple[Kind, bool]] = {
    "defect": (NUMBER_OR_NULL, True),
    "score": (SCORE_OR_NULL, True),
    "gate": (BOOL_OR_NULL, True),
    "n_evals": (COUNT, True),
    "status": (_one_of(ELEMENT_STATUSES), True),
    "details": (OBJECT, True),
    "defect_stderr": (NON_NEGATIVE_OR_NULL, False),
    "gates": (_map_of(BOOL_OR_NULL), False),
    "gate_threshold": (TEXT_OR_NULL, False),
    "reason": (TEXT_OR_NULL, False),
    "noise_floor": (NON_NEGATIVE_OR_NULL, False),
}
#: ``aggregate`` (``per_element_overall`` is checked on its own).
AGGREGATE_FIELDS: dict[str, tuple[Kind, bool]] = {
    "overall": (SCORE_OR_NULL, True),
    "method": (_one_of(AGGREGATIONS), True),
    "gates_passed": (COUNT, True),
    "gates_total": (COUNT, True),
    "n_evals": (COUNT, True),
    "sub_scores": (_map_of(SCORE_OR_NULL), True),
    "gates": (_map_of(BOOL), True),
    "per_element_overall": (OBJECT, True),
    "host_evaluations": (_map_of(COUNT), False),
    "gate_profile": (_one_of(("exact", "reference")), False),
    "gates_by_profile": (OBJECT, False),
    "skipped_probes": (LIST, False),
    "stressed_substrates": (_map_of(OBJECT), False),
}
#: Top level of a λ report (``lambda``, ``n_evals`` and ``skipped`` are checked against the structures).
LAMBDA_FIELDS: dict[str, tuple[Kind, bool]] = {
    "schema": (_one_of((LAMBDA_SCHEMA,)), True),
    "model": (NAME, True),
    "method": (TEXT, True),
    "dtype": (TEXT_OR_NULL, False),  # absent from λ reports written before it was recorded
    "lambda": (_map_of(NON_NEGATIVE_OR_NULL), True),
    "mean": (NON_NEGATIVE_OR_NULL, True),
    "max": (NON_NEGATIVE_OR_NULL, True),
    "n_evals": (_map_of(COUNT), True),
    "skipped": (_map_of(TEXT), True),
    "gate_threshold": (Kind(lambda x: _num(x) and x > 0, "a finite number > 0"), False),
    "gate": (BOOL, False),
    "versions": (_map_of(TEXT), False),
    "machine": (OBJECT, False),
    "wall_time_s": (NON_NEGATIVE, False),
}
_MACHINE_TEXT = ("cpu_model", "processor")  # what the board shows of ``machine``


# ------------------------------------------------------------------------------------------------ messages
def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _key(k: Any) -> str:
    return f".{k}" if isinstance(k, str) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k) else f"[{k!r}]"


def _field(path: tuple[Any, ...]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else _key(part)
    return out.lstrip(".") or "(top level)"


class _Where:
    """The file being checked: builds the messages."""

    def __init__(self, path: str, name: str | None):
        self.prefix = f"{name}: {path}" if name else path

    def bad(self, path: tuple[Any, ...], value: Any, allowed: str) -> InputError:
        return InputError(f"{self.prefix}: {_field(path)}: got {_show(value)}; allowed: {allowed}")

    def missing(self, path: tuple[Any, ...], allowed: str) -> InputError:
        return InputError(f"{self.prefix}: {_field(path)}: missing; allowed: {allowed}")

    def whole(self, what: str) -> InputError:
        return InputError(f"{self.prefix}: {what}")


# ------------------------------------------------------------------------------------------------ reading
def read_json(path: str | os.PathLike, name: str | None = None, hint: str = "") -> Any:
    """The JSON document in ``path``, read with guards: a regular file of at most :data:`MAX_BYTES`, UTF-8,
    valid JSON nested at most :data:`MAX_DEPTH` levels, no NaN or Infinity anywhere (the writer writes strict
    JSON).  Any failure is an :class:`InputError` naming ``name`` (the argument, when given) and the file;
    ``hint`` is appended to the messages about an unreadable file."""
    p = os.fspath(path)
    at = _Where(p, name)
    tail = f"; {hint}" if hint else ""
    if not os.path.isfile(p):
        raise at.whole(f"no such file; allowed: {_SOURCES}")
    limit = f"a report file of at most {MAX_BYTES // 2**20} MiB"
    try:
        size = os.path.getsize(p)
        if size > MAX_BYTES:
            raise at.whole(f"{size} bytes; allowed: {limit}{tail}")
        with open(p, "rb") as fh:
            raw = fh.read(MAX_BYTES + 1)
    except OSError as err:
        raise at.whole(f"cannot be read ({err.strerror or type(err).__name__}){tail}") from None
    if len(raw) > MAX_BYTES:
        raise at.whole(f"more than {MAX_BYTES} bytes; allowed: {limit}{tail}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise at.whole(f"not UTF-8 text (byte {err.start}); allowed: {_SOURCES}{tail}") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as err:
        raise at.whole(f"not JSON ({err.msg} at line {err.lineno}, column {err.colno}); allowed: {_SOURCES}"
                       f"{tail}") from None
    except RecursionError:
        raise at.whole(f"not JSON that can be read (nested too deeply); allowed: {_SOURCES}, nested at most "
                       f"{MAX_DEPTH} levels{tail}") from None
    except ValueError as err:  # e.g. an integer of more than 4300 digits
        raise at.whole(f"not JSON that can be read ({str(err)[:120]}); allowed: {_SOURCES}{tail}") from None
    _scan(doc, at)
    return doc


def _scan(doc: Any, at: _Where) -> None:
    """Depth and non-finite numbers, without recursion, in document order."""
    stack: list[tuple[Any, tuple[Any, ...]]] = [(doc, ())]
    while stack:
        x, path = stack.pop()
        if len(path) > MAX_DEPTH:
            raise at.whole(f"{_field(path[:3])}...: nested more than {MAX_DEPTH} levels; allowed: {_SOURCES}, "
                           f"nested at most {MAX_DEPTH} levels")
        if isinstance(x, float) and not math.isfinite(x):
            raise at.bad(path, x, "a finite number or null (jaxcert writes no NaN or Infinity)")
        if isinstance(x, dict):
            stack.extend((v, (*path, k)) for k, v in reversed(list(x.items())))
        elif isinstance(x, list):
            stack.extend((v, (*path, k)) for k, v in reversed(list(enumerate(x))))


# ------------------------------------------------------------------------------------------------ checking
def _check_fields(d: dict[str, Any], fields: dict[str, tuple[Kind, bool]], path: tuple[Any, ...],
                  at: _Where) -> None:
    for key, (kind, required) in fields.items():
        if key not in d:
            if required:
                raise at.missing((*path, key), kind.allowed)
            continue
        value = d[key]
        if not kind.test(value):
            raise at.bad((*path, key), value, kind.allowed)
        if kind.each is not None and isinstance(value, dict):  # (a kind may also allow null)
            for k, v in value.items():
                if not kind.each.test(v):
                    raise at.bad((*path, key, k), v, kind.each.allowed)


def _object(value: Any, path: tuple[Any, ...], at: _Where, allowed: str = "an object") -> dict[str, Any]:
    if not isinstance(value, dict):
        raise at.bad(path, value, allowed)
    return value


def _keyed_by(d: dict[str, Any], rows: list[str], path: tuple[Any, ...], at: _Where, what: str) -> None:
    """``d`` has exactly one entry per row (the report's elements), no other."""
    for row in rows:
        if row not in d:
            raise at.missing((*path, row), what)
    for key in d:
        if key not in rows:
            raise at.bad((*path, key), d[key], f"entries for the report's elements only ({', '.join(rows)})")


def _elements(value: Any, at: _Where) -> list[str]:
    from ase.data import atomic_numbers

    allowed = "a non-empty list of element symbols (H..Og), each once"
    if not isinstance(value, list) or not value:
        raise at.bad(("elements",), value, allowed)
    for k, sym in enumerate(value):
        if not isinstance(sym, str) or sym not in atomic_numbers or sym == "X":
            raise at.bad(("elements", k), sym, allowed)
        if sym in value[:k]:
            raise at.bad(("elements", k), sym, f"{allowed} ({sym} is also elements[{value.index(sym)}])")
    return list(value)


def check_report(doc: Any, path: str, name: str | None = None) -> dict[str, Any]:
    """Check a certification report (``jaxcert-report/1``) as read from ``path``; returns it unchanged.

    Raises :class:`InputError` ``"[name: ]path: field: got VALUE; allowed: WHAT"`` for the first problem."""
    at = _Where(path, name)
    d = _object(doc, (), at, f"a JSON object ({REPORT_SCHEMA})")
    _check_fields(d, REPORT_FIELDS, (), at)
    model = d["model"]
    if "name" not in model:
        raise at.missing(("model", "name"), NAME.allowed)
    if not NAME.test(model["name"]):
        raise at.bad(("model", "name"), model["name"], NAME.allowed)
    _machine(d, at)
    if "card" in d:
        _check_fields(d["card"], CARD_FIELDS, ("card",), at)
    if "throughput" in d:
        _check_fields(d["throughput"], THROUGHPUT_FIELDS, ("throughput",), at)
        for part in ("suite", "md", "nacl"):
            if isinstance(d["throughput"].get(part), dict):
                _check_fields(d["throughput"][part], RATE_FIELDS, ("throughput", part), at)
        for part, fields in (("hardware", HARDWARE_FIELDS), ("peak_memory", MEMORY_FIELDS)):
            if isinstance(d["throughput"].get(part), dict):
                _check_fields(d["throughput"][part], fields, ("throughput", part), at)
    elements = _elements(d["elements"], at)
    seen: dict[str, int] = {}
    for k, p in enumerate(d["probes"]):
        where = ("probes", k)
        _object(p, where, at, "an object (one probe's result)")
        _check_fields(p, PROBE_FIELDS, where, at)
        if p["name"] in seen:
            raise at.bad((*where, "name"), p["name"], f"a probe name used once (also probes[{seen[p['name']]}])")
        seen[p["name"]] = k
        per = p["per_element"]
        if p["name"] in STRUCTURE_PROBES:  # rows are named structures
            if not per:
                raise at.bad((*where, "per_element"), per, "a non-empty object: one entry per structure")
        else:
            _keyed_by(per, elements, (*where, "per_element"), at, "an object with the element's result")
        for row, e in per.items():
            _object(e, (*where, "per_element", row), at, "an object (one element's result)")
            _check_fields(e, ELEMENT_FIELDS, (*where, "per_element", row), at)
    agg = d["aggregate"]
    _check_fields(agg, AGGREGATE_FIELDS, ("aggregate",), at)
    if agg["gates_passed"] > agg["gates_total"]:
        raise at.bad(("aggregate", "gates_passed"), agg["gates_passed"],
                     f"an integer >= 0 and <= aggregate.gates_total ({agg['gates_total']})")
    po = agg["per_element_overall"]
    _keyed_by(po, elements, ("aggregate", "per_element_overall"), at, SCORE_OR_NULL.allowed)
    for el, v in po.items():
        if not SCORE_OR_NULL.test(v):
            raise at.bad(("aggregate", "per_element_overall", el), v, SCORE_OR_NULL.allowed)
    return d


def _machine(d: dict[str, Any], at: _Where) -> None:
    for key in _MACHINE_TEXT:
        m = d.get("machine") or {}
        if key in m and not TEXT_OR_NULL.test(m[key]):
            raise at.bad(("machine", key), m[key], TEXT_OR_NULL.allowed)


def check_lambda(doc: Any, path: str, name: str | None = None) -> dict[str, Any]:
    """Check a λ report (``jaxcert-lambda/1``) as read from ``path``; returns it unchanged (messages as
    :func:`check_report`)."""
    at = _Where(path, name)
    d = _object(doc, (), at, f"a JSON object ({LAMBDA_SCHEMA})")
    _check_fields(d, LAMBDA_FIELDS, (), at)
    _machine(d, at)
    structures = list(d["lambda"])
    for k in structures:
        if not NAME.test(k):
            raise at.bad(("lambda",), k, "structure names that are non-empty strings")
    _keyed_by(d["n_evals"], structures, ("n_evals",), at, "the structure's evaluation count (an integer >= 0)")
    for k in d["skipped"]:
        if k not in structures:
            raise at.bad(("skipped", k), d["skipped"][k], f"reasons for structures of 'lambda' only "
                         f"({', '.join(structures) or 'none'})")
    return d


def load(path: str | os.PathLike, name: str | None = None, kinds: tuple[str, ...] = tuple(KINDS),
         hint: str = "") -> tuple[str, dict[str, Any]]:
    """(kind, document) of a checked report file: :func:`read_json`, then a known ``schema`` from ``kinds``,
    then :func:`check_report` or :func:`check_lambda`.  ``kind`` is ``"report"`` or ``"lambda"``."""
    p = os.fspath(path)
    doc = read_json(p, name, hint)
    at = _Where(p, name)
    if not isinstance(doc, dict) or "schema" not in doc:
        raise at.whole(f"JSON without a 'schema' key; allowed: a jaxcert report ({', '.join(kinds)})")
    schema = doc["schema"]
    if schema not in kinds:
        raise at.whole(f"unknown schema {_show(schema)}; allowed: {', '.join(kinds)}")
    kind = KINDS[schema]
    return kind, (check_report if kind == "report" else check_lambda)(doc, p, name)
