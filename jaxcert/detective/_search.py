r"""The search loop: screen, propose, pre-register, probe, decide; one hypothesis at a time (docs/detective.md §4).

1. **Screen** every protocol cheaply on the target and the committee (one batched program per model); cells
   that every model fails are recorded as protocol artefacts and never become hypotheses.
2. A :class:`Proposer` ranks candidate hypotheses (protocol × region); :class:`RuleBasedProposer` is the
   default.  The top one is selected, the others stay in the backlog.
3. The selected hypothesis is **pre-registered** in the evidence memory before any of its probes runs: the
   cells expected to fail (in scope), the cells expected clean (out of scope, next to it), and the numeric
   criteria that would refute it.
4. Three probes: *scope* (the protocol re-run on the neighbourhood with finer settings), *mechanism* and
   *impact*; each report goes to the memory.
5. Verdict, from the pre-registered criteria only: **escalate** or **reject** (with the reason).  An escalation
   writes the report directory and ends the search; a rejection returns to 2 with the memory updated.

The search stops early when the budget (model evaluations, :attr:`Committee.n_evals`) is spent.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, runtime_checkable
from typing import Protocol as TypingProtocol

from jaxcert.core.inputs import InputError
from jaxcert.core.result import Result
from jaxcert.detective._committee import Committee
from jaxcert.detective._constraints import Constraints
from jaxcert.detective._memory import EvidenceMemory
from jaxcert.detective._observables import Observable, severity_of
from jaxcert.detective._protocols import Cell, Protocol
from jaxcert.detective._registry import PROTOCOLS, make_protocol, protocol_config
from jaxcert.detective._signals import ARTEFACT, CONSTRAINT, DISAGREEMENT, PHYSICAL, SKIPPED, SUSPICIOUS

__all__ = ["Hypothesis", "Proposer", "RuleBasedProposer", "InvestigationResult", "investigate", "make_protocol",
           "PROTOCOLS", "MIN_IN_SCOPE", "MAX_OUT_OF_SCOPE", "severity_ratio", "robustness", "ROBUST", "FRAGILE",
           "ARTEFACT_OF_BASE"]

#: Pre-registered criteria (docs/detective.md §4.5): at least this share of the in-scope cells must show the
#: anomaly in the scope probe, and at most this share of the out-of-scope cells.
MIN_IN_SCOPE = 0.5
MAX_OUT_OF_SCOPE = 0.1


def severity_ratio(p: Protocol, cell: Cell, target: str) -> float:
    """Continuous severity of a cell for ranking: target value / threshold (÷ floor when the threshold is 0)."""
    v = cell.values.get(target, float("nan"))
    if not math.isfinite(v):
        return 0.0
    den = cell.signal.threshold if cell.signal.threshold > 0 else p.floor
    return float(max(v, 0.0) / den)


@dataclasses.dataclass
class Hypothesis:
    """A falsifiable failure hypothesis (docs/detective.md §4.2).

    Attributes:
      id: ``protocol:hash-of-scope`` (stable across runs).
      protocol: the protocol that tests it.
      scope: the region it claims (``elements`` for chemistry, ``pairs`` for adsorption/desorption, ...).
      statement: one sentence.
      signal_type: "exact-constraint violation" or "committee disagreement".
      importance, severity, priority: the proposer's ranking inputs and result.
      seed_cells: keys of the screen cells it started from.
      origin: why it was proposed (e.g. "screen", "narrowed after rejection of ...").
      observable: the protocol observable it is about (docs/detective.md §2.0); None: the protocol's single or
        primary value (``Cell.signal``).
      evidence: the ranking inputs in physical units: the largest target value and its unit, the number of seed
        cells, how many of them break the absolute criterion and how many only disagree with the committee.
    """

    id: str
    protocol: str
    scope: dict[str, Any]
    statement: str
    signal_type: str
    importance: float
    severity: float
    priority: float
    seed_cells: list[str]
    origin: str = "screen"
    observable: str | None = None
    evidence: dict[str, Any] = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def hypothesis_id(protocol: str, scope: Mapping[str, Any], observable: str | None = None) -> str:
    """``protocol:hash`` (``protocol:observable:hash`` for a hypothesis about one observable), stable across runs."""
    doc = dict(scope) if observable is None else {"scope": scope, "observable": observable}
    h = hashlib.sha1(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:10]
    return f"{protocol}:{h}" if observable is None else f"{protocol}:{observable}:{h}"


def _accepts(fn: Callable[..., Any], name: str) -> bool:
    """Does ``fn`` take the keyword ``name`` (a user protocol's hooks may predate observables)?"""
    import inspect

    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def breadth(n_cells: int) -> float:
    """Scope factor of the ranking: 1 + 0.25·log2(cells) (1 cell 1.0, 4 cells 1.5, 16 cells 2.0)."""
    return 1.0 + 0.25 * math.log2(max(int(n_cells), 1))


@runtime_checkable
class Proposer(TypingProtocol):
    """Ranks candidate hypotheses (docs/detective.md §4.2); plug in your own (an LLM agent, a Bayesian one).

    ``propose`` gets the screens (protocol name -> cells), the protocols, the target's name and the evidence
    memory (read the verdicts to condition on them) and returns hypotheses, best first.  Settled ones
    (``memory.settled()``) are dropped by the loop, so returning them again is harmless.
    """

    def propose(self, screens: Mapping[str, Sequence[Cell]], protocols: Mapping[str, Protocol], target: str,
                memory: EvidenceMemory) -> list[Hypothesis]:
        ...


class RuleBasedProposer:
    """The default proposer: rules over the protocol table (docs/detective.md §4.2).

    * one hypothesis per protocol *observable* from the cells that observable flags (per constraint for
      ``constraints``), scope = the protocol's :meth:`~Protocol.scope_of` those cells;
    * severity in the criterion's own units: the largest target value / its absolute limit (/ its relative
      threshold without a limit; :func:`~jaxcert.detective._observables.severity_of`), e.g. a 0.2 eV barrier
      against a 0.05 eV limit is 4;
    * priority = importance × observable weight × evidence × (1 + min(10, severity)) × :func:`breadth`, evidence
      1.5 when a seed cell breaks the absolute criterion, else 1 (disagreement only allocates suspicion);
    * memory: when a hypothesis was rejected, its *narrowed* form (only the cells with z >= 2 z_min, or value
      >= 2 × the criterion) is proposed next if it differs.
    """

    def _make(self, p: Protocol, cells: Sequence[Cell], target: str, origin: str,
              obs: Observable | None = None) -> Hypothesis:
        scope = p.scope_of(cells)
        name = obs.name if obs is not None else None
        if obs is None:
            sev = max(severity_ratio(p, c, target) for c in cells)
            absolute = sum(c.signal.label in (CONSTRAINT, PHYSICAL) for c in cells)
            sig_type = "exact-constraint violation" if p.kind == "constraint" else "committee disagreement"
            weight, vmax, unit = 1.0, max(c.values.get(target, float("nan")) for c in cells), p.unit
            evidence_w = 1.0
        else:
            vals = [c.metrics.get(target, {}).get(obs.metric, float("nan")) for c in cells]
            sev = max(severity_of(obs, v) for v in vals)
            absolute = sum(c.signal_of(name).label in (CONSTRAINT, PHYSICAL) for c in cells)
            sig_type = (("exact-constraint violation" if obs.exact else "physical-criterion violation") if absolute
                        else "committee disagreement")
            weight, vmax, unit = obs.weight, max((v for v in vals if math.isfinite(v)), default=float("nan")), obs.unit
            evidence_w = 1.5 if absolute else 1.0
        stmt = p.statement(scope, name) if name is not None and _accepts(p.statement, "observable") else \
            p.statement(scope)
        evidence = {"observable": name or p.observable, "unit": unit, "max_target_value": vmax,
                    "n_cells": len(cells), "n_absolute": int(absolute), "n_disagreement": len(cells) - int(absolute)}
        return Hypothesis(id=hypothesis_id(p.name, scope, name), protocol=p.name, scope=scope, statement=stmt,
                          signal_type=sig_type, importance=p.importance, severity=sev,
                          priority=p.importance * weight * evidence_w * (1.0 + min(10.0, sev)) * breadth(len(cells)),
                          seed_cells=[c.key for c in cells], origin=origin, observable=name, evidence=evidence)

    def _strong(self, p: Protocol, cells: Sequence[Cell], target: str, obs: Observable | None) -> list[Cell]:
        if obs is None:
            return [c for c in cells if (c.signal.z >= 2 * p.z_min if c.signal.label == DISAGREEMENT
                                         else c.values[target] >= 2 * c.signal.threshold)]
        out = []
        for c in cells:
            sig = c.signal_of(obs.name)
            v = c.metrics.get(target, {}).get(obs.metric, float("nan"))
            if (sig.z >= 2 * p.z_min) if sig.label == DISAGREEMENT else (v >= 2 * sig.threshold):
                out.append(c)
        return out

    def propose(self, screens: Mapping[str, Sequence[Cell]], protocols: Mapping[str, Protocol], target: str,
                memory: EvidenceMemory) -> list[Hypothesis]:
        out: list[Hypothesis] = []
        rejected = {r["hypothesis_id"] for r in memory.of_type("verdict") if r["verdict"] == "reject"}
        for name, cells in screens.items():
            p = protocols[name]
            groups: list[tuple[Observable | None, list[Cell]]]
            if p.observables:
                groups = [(o, [c for c in cells if c.suspicious_in(o.name)]) for o in p.observables]
            else:
                sus = [c for c in cells if c.suspicious]
                groups = ([(None, [c for c in sus if c.region["constraint"] == k])
                           for k in sorted({c.region["constraint"] for c in sus})]
                          if isinstance(p, Constraints) else [(None, sus)])
            for obs, g in groups:
                if not g:
                    continue
                h = self._make(p, g, target, "screen", obs)
                out.append(h)
                if h.id in rejected:
                    strong = self._strong(p, g, target, obs)
                    if strong and len(strong) < len(g):
                        out.append(self._make(p, strong, target, f"narrowed after the rejection of {h.id}", obs))
        out.sort(key=lambda h: -h.priority)
        return out


@dataclasses.dataclass(frozen=True)
class InvestigationResult(Result):
    """What :func:`investigate` returns (also written to ``escalation.json``); a
    :class:`~jaxcert.core.result.Result`."""

    escalated: bool
    hypothesis: Hypothesis | None
    stop_reason: str
    verdicts: list[dict[str, Any]]
    artefacts: list[dict[str, Any]]
    n_evals: int
    wall_s: float
    out: str
    escalation: dict[str, Any] | None = None


def _fingerprint(p: Protocol, committee: Committee, elements: Sequence[str]) -> str:
    doc = {"protocol": p.name, "config": protocol_config(p), "elements": list(elements),
           "models": list(committee.names), "dtype": str(committee.dtype)}
    return hashlib.sha1(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _fraction(cells: Sequence[Cell], labels: Sequence[str], observable: str | None = None
              ) -> tuple[float, int, int]:
    scored = [c for c in cells if c.signal_of(observable).label != SKIPPED]
    hit = sum(c.signal_of(observable).label in labels for c in scored)
    return (hit / len(scored) if scored else float("nan")), hit, len(scored)


def declare(h: Hypothesis, p: Protocol, regions: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The pre-registration of ``h`` (docs/detective.md §4.3), written before its probes run.

    For a hypothesis about one observable the criteria name it, with its relative threshold, z floor and
    absolute limit; a cell counts as failing when that observable is flagged by either kind (a disagreement or
    an absolute violation), and the two kinds are counted apart in the verdict.
    """
    keys_in = [p.key(r) for r in regions if p.in_scope(r, h.scope)]
    keys_out = [p.key(r) for r in regions if not p.in_scope(r, h.scope)]
    obs = p.observable_named(h.observable) if h.observable is not None else None
    if obs is None:
        label = CONSTRAINT if p.kind == "constraint" else DISAGREEMENT
        labels = [label]
        crit_obs = {"observable": None, "threshold": p.threshold, "z_min": p.z_min, "floor": p.floor,
                    "limit": None}
        what = f"the {label} signal"
    else:
        label = (CONSTRAINT if obs.exact else PHYSICAL) if h.signal_type != "committee disagreement" else DISAGREEMENT
        labels = list(SUSPICIOUS)
        crit_obs = {"observable": obs.name, "metric": obs.metric, "unit": obs.unit, "threshold": obs.threshold,
                    "z_min": p.z_min, "floor": obs.floor, "limit": obs.limit, "exact": obs.exact}
        what = (f"the {obs.name} anomaly (a disagreement, z >= {p.z_min:g} above {obs.threshold:g} {obs.unit}, or "
                + (f"a value above the limit {obs.limit:g} {obs.unit})" if obs.limit is not None else "no limit)"))
    return {
        "hypothesis": h.to_dict(),
        "expected_failures": keys_in,
        "expected_clean": keys_out,
        "scope": h.scope,
        "criteria": {"signal": label, "labels": labels, "min_in_scope_fraction": MIN_IN_SCOPE,
                     "max_out_of_scope_fraction": MAX_OUT_OF_SCOPE, "variant": "fine", **crit_obs},
        "refuted_if": [
            f"fewer than {MIN_IN_SCOPE:.0%} of the in-scope cells show {what} in the scope probe (finer settings)",
            f"more than {MAX_OUT_OF_SCOPE:.0%} of the out-of-scope cells show it (the scope is wrong)",
            "every committee model shows the same anomaly in scope (a protocol artefact, not the target)",
            "the anomaly holds in none of the nuisance variants, or disappears in a convergence variant (a larger "
            "cell, more layers, a finer or shifted grid): an artefact of the base geometry",
        ],
        "variants": [v.to_dict() for v in p.variants()],
        "protocol": p.describe(),
        "regions": list(regions),
    }


def decide(decl: Mapping[str, Any], p: Protocol, cells: Sequence[Cell],
           robust: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Apply the pre-registered criteria to the scope probe's cells: escalate or reject (with the reason).

    Only the pre-registered observable's labels count (an artefact of another observable changes nothing).  With
    the robustness probe's report (:func:`robustness`), a finding that is an artefact of the base geometry is
    rejected; a robust or fragile one keeps its label in the verdict.
    """
    crit = decl["criteria"]
    label = crit["signal"]
    labels = tuple(crit.get("labels") or (label,))
    obs = crit.get("observable")
    inside = [c for c in cells if c.key in set(decl["expected_failures"])]
    outside = [c for c in cells if c.key in set(decl["expected_clean"])]
    f_in, n_in, d_in = _fraction(inside, labels, obs)
    f_out, n_out, d_out = _fraction(outside, labels, obs)
    art_in = sum(c.signal_of(obs).label == ARTEFACT for c in inside)
    abs_in = sum(c.signal_of(obs).label in (CONSTRAINT, PHYSICAL) for c in inside)
    numbers = {"in_scope_fraction": f_in, "in_scope_hits": n_in, "in_scope_scored": d_in,
               "out_of_scope_fraction": f_out, "out_of_scope_hits": n_out, "out_of_scope_scored": d_out,
               "in_scope_artefacts": art_in, "observable": obs, "in_scope_absolute": abs_in,
               "in_scope_disagreement": sum(c.signal_of(obs).label == DISAGREEMENT for c in inside)}
    shown = f"the {obs} anomaly" if obs else f"the {label} signal"
    reasons = []
    if not d_in:
        reasons.append("no in-scope cell could be scored")
    elif f_in < crit["min_in_scope_fraction"]:
        reasons.append(f"only {n_in}/{d_in} in-scope cells show {shown} (< "
                       f"{crit['min_in_scope_fraction']:.0%} pre-registered)")
    if d_out and f_out > crit["max_out_of_scope_fraction"]:
        reasons.append(f"{n_out}/{d_out} out-of-scope cells show it too (> {crit['max_out_of_scope_fraction']:.0%} "
                       "pre-registered): the scope is wrong")
    if d_in and art_in and art_in >= max(1, d_in - n_in):
        reasons.append(f"{art_in} in-scope cells are failed by every model: a protocol artefact")
    label = (robust or {}).get("label")
    if label is not None:
        numbers["robustness"] = label
    if label == ARTEFACT_OF_BASE:
        reasons.append("the finding does not survive the pre-registered nuisance variants (" + robust["summary"]
                       + "): an artefact of the base geometry")
    verdict = "reject" if reasons else "escalate"
    kinds = (f" ({abs_in} break the absolute criterion, {numbers['in_scope_disagreement']} only disagree with the "
             "committee)") if obs else ""
    held = f"; {label} across the nuisance variants" if label else ""
    return {"verdict": verdict, "reason": "; ".join(reasons) if reasons else
            f"{n_in}/{d_in} in-scope and {n_out}/{d_out} out-of-scope cells show {shown}{kinds}, as "
            f"pre-registered{held}", "numbers": numbers}


#: Robustness labels of a finding across the pre-registered nuisance variants (docs/detective.md §4.6).
ROBUST, FRAGILE, ARTEFACT_OF_BASE = "robust", "fragile", "artefact"


def robustness(p: Protocol, committee: Committee, h: Hypothesis, decl: Mapping[str, Any],
               scope_cells: Sequence[Cell]) -> tuple[dict[str, Any], list[Cell], list[Cell]]:
    """The robustness probe (docs/detective.md §4.6): the in-scope regions re-run, target and committee alike, in
    every pre-registered nuisance variant of the protocol (:meth:`Protocol.variants`), each judged on its own.

    * Committee sanity across variants: a member whose path changes between the base cell and the larger-cell
      variant by more than the target's signal (:meth:`Protocol.image_check`) is excluded from every variant of
      that cell, with the reason.
    * Per in-scope cell that fails in the scope probe: **robust** when the anomaly holds in every variant that
      applies, **artefact** when it holds in no variant or disappears in a convergence variant (a larger cell, more
      layers, a finer or shifted grid: the base geometry was not converged), **fragile** otherwise (it holds at some
      alternatives, a site or a relaxed slab, and not others).  The hypothesis is robust when every such cell is,
      an artefact when every one is, fragile otherwise.
    * A committee member is **clean** in a cell when it stays at or below the observable's threshold in the base
      and every variant; with no clean member the relative criterion cannot decide there (the absolute one still
      can).

    Returns (report, the scope cells judged again with the exclusions, the variant cells).
    """
    variants = p.variants()
    obs_name = h.observable
    obs = p.observable_named(obs_name) if obs_name is not None else None
    t = committee.target_name
    failing = {c.key for c in scope_cells if c.key in set(decl["expected_failures"]) and c.suspicious_in(obs_name)}
    regions = [r for r in decl["regions"] if p.key(r) in failing]
    if not variants or not regions:
        return {"variants": [], "label": None, "cells": {}, "summary": "no nuisance variant declared"
                if not variants else "no in-scope cell failed in the scope probe"}, list(scope_cells), []
    base = {c.key: c for c in scope_cells}
    runs: dict[str, dict[str, Cell]] = {}
    cfg = protocol_config(p)
    for v in variants:
        q = make_protocol(p.name, {**cfg, **v.config})
        runs[v.name] = {c.key: dataclasses.replace(c, variant=v.name) for c in q.run(committee, regions)}
    # image interactions larger than the signal exclude a member from every variant of the cell
    exclude: dict[str, dict[str, str]] = {}
    for v in variants:
        if v.variable != "lateral size":
            continue
        for key, c in runs[v.name].items():
            b = base[key]
            val = (b.metrics.get(t, {}).get(obs.metric, float("nan")) if obs is not None
                   else b.values.get(t, float("nan")))
            thr = obs.threshold if obs is not None else p.threshold
            signal = max(val if math.isfinite(val) else 0.0, thr)
            exclude.setdefault(key, {}).update(p.image_check(b, c, t, signal))
    scope_cells = [p.rejudge(c, t, exclude[c.key]) if exclude.get(c.key) else c for c in scope_cells]
    base = {c.key: c for c in scope_cells}
    for v in variants:
        runs[v.name] = {k: p.rejudge(c, t, exclude[k]) if exclude.get(k) else c for k, c in runs[v.name].items()}
    thr = obs.threshold if obs is not None else p.threshold
    metric = obs.metric if obs is not None else None
    per_cell: dict[str, Any] = {}
    for key in sorted(failing):
        rows, holds, conv_fail = [], [], False
        for v in variants:
            c = runs[v.name].get(key)
            if c is None or c.signal_of(obs_name).label == SKIPPED:
                rows.append({"variant": v.name, "variable": v.variable, "applies": False})
                continue
            ok = c.suspicious_in(obs_name)
            holds.append(ok)
            conv_fail |= v.convergence and not ok
            rows.append({"variant": v.name, "variable": v.variable, "convergence": v.convergence, "applies": True,
                         "holds": ok, "label": c.signal_of(obs_name).label,
                         "values": c.values_of(obs_name, metric), "excluded": dict(c.excluded)})
        label = (ROBUST if holds and all(holds) else
                 ARTEFACT_OF_BASE if not any(holds) or conv_fail else FRAGILE)
        clean, dirty = [], {}
        for m in committee.names[1:]:
            seen = [(base[key].variant, base[key].values_of(obs_name, metric).get(m, float("nan")),
                     m in base[key].excluded)]
            seen += [(v.name, runs[v.name][key].values_of(obs_name, metric).get(m, float("nan")),
                      m in runs[v.name][key].excluded) for v in variants if key in runs[v.name]]
            bad = [(name, val, exc) for name, val, exc in seen if exc or not math.isfinite(val) or val > thr]
            if bad:
                dirty[m] = [{"variant": name, "value": val, "excluded": exc} for name, val, exc in bad]
            else:
                clean.append(m)
        per_cell[key] = {"label": label, "variants": rows, "base_excluded": dict(base[key].excluded),
                         "clean_committee": clean, "not_clean": dirty, "relative_decidable": bool(clean)}
    labels = [v["label"] for v in per_cell.values()]
    label = (ROBUST if all(x == ROBUST for x in labels) else
             ARTEFACT_OF_BASE if all(x == ARTEFACT_OF_BASE for x in labels) else FRAGILE)
    summary = (f"{label}: " + "; ".join(
        f"{k}: {v['label']}, holds in {sum(r.get('holds', False) for r in v['variants'])}/"
        f"{sum(r['applies'] for r in v['variants'])} variants"
        + ("" if v["relative_decidable"] else " (no committee member is clean in every variant: the relative "
           "criterion cannot decide; the absolute one still can)") for k, v in per_cell.items()))
    report = {"label": label, "summary": summary, "variants": [v.to_dict() for v in variants], "cells": per_cell,
              "excluded": exclude, "observable": obs_name}
    return report, scope_cells, [c for v in variants for c in runs[v.name].values()]


def _labelled(p: Protocol, c: Cell) -> list[tuple[str | None, Any]]:
    """(observable name, combined signal) of every observable of ``c`` ((None, signal) without observables)."""
    if p.observables and c.observables:
        return [(o.name, c.signal_of(o.name)) for o in p.observables if o.name in c.observables]
    return [(None, c.signal)]


def investigate(
    committee: Committee,
    protocols: Sequence[str | Protocol] = PROTOCOLS,
    elements: Sequence[str] = ("Cu", "Ni", "Pt", "C", "O"),
    budget: int = 1_000_000,
    out: str | os.PathLike = "investigation",
    proposer: Proposer | None = None,
    log: Callable[[str], None] | None = print,
    write: bool = True,
    oracle_s: float = 60.0,
    robust: bool = True,
) -> InvestigationResult:
    """Run the failure-mode search (docs/detective.md §4) and write the report directory ``out``.

    Args:
      committee: target + committee (:class:`Committee`).
      protocols: protocol names (``"dimers"``, ``"desorption"``, ``"adsorption"``, ``"constraints"``) or
        :class:`Protocol` instances.
      elements: the chemistry to search (element symbols).
      budget: model evaluations (:attr:`Committee.n_evals`) after which the search stops.
      out: the report directory; ``out/evidence.jsonl`` is the evidence memory (a rerun resumes from it).
      proposer: ranks hypotheses (default :class:`RuleBasedProposer`).
      log: progress lines (None: quiet).
      write: write the report files (escalation.json, report.md/html, reproduce.py, the DFT card).
      oracle_s: seconds the GFN2-xTB oracle may spend on the report (0: off); indicative only, never decides.
      robust: run the robustness probe over the protocol's nuisance variants before a verdict (docs/detective.md
        §4.6); False skips it (a quicker screen whose escalations carry no robustness label; the report says so).

    Returns:
      :class:`InvestigationResult`.
    """
    from jaxcert.detective._report import write_report

    t0 = time.perf_counter()
    say = log or (lambda _m: None)
    out = os.fspath(out)
    os.makedirs(out, exist_ok=True)
    memory = EvidenceMemory(os.path.join(out, "evidence.jsonl"))
    resumed = bool(memory.records)
    built = [p if isinstance(p, Protocol) else make_protocol(p) for p in protocols]
    protos = {p.name: p for p in built}
    proposer = proposer or RuleBasedProposer()
    # a resumed folder whose evidence escalated a hypothesis of a protocol this run does not have cannot be
    # rebuilt: refuse before appending anything (its escalation is rebuilt from the protocol's definition)
    escalated = {v.get("hypothesis_id") for v in memory.of_type("verdict") if v.get("verdict") == "escalate"}
    missing = sorted({str(r["hypothesis"].get("protocol")) for r in memory.of_type("declaration")
                      if isinstance(r.get("hypothesis"), dict) and r["hypothesis"].get("id") in escalated}
                     - set(protos))
    if missing:
        raise InputError(f"--protocols: the evidence in {out} escalated a hypothesis of protocol(s) "
                         f"{', '.join(missing)}, which this run does not include ({', '.join(protos)}); "
                         "resume with the same --protocols, or use another --out")
    committee.n_evals = memory.n_evals()
    memory.append("run", target=committee.target_name, committee=committee.names[1:], specs=committee.specs,
                  protocols=list(protos), elements=list(elements), budget=int(budget), resumed=resumed,
                  proposer=type(proposer).__name__)
    screens: dict[str, list[Cell]] = {}
    stop = None
    names = list(protos)
    for k, (name, p) in enumerate(protos.items()):
        fp = _fingerprint(p, committee, elements)
        rec = memory.screen(name, fp)
        if rec is not None:
            screens[name] = [Cell.from_dict(c) for c in rec["cells"]]
            say(f"[screen {k + 1}/{len(names)}] {name}: {len(screens[name])} cells from the evidence memory")
            continue
        if committee.n_evals >= budget:
            stop = "budget"
            break
        t1 = time.perf_counter()
        n0 = committee.n_evals
        regions = p.regions(elements, committee)
        say(f"[screen {k + 1}/{len(names)}] {name}: {len(regions)} regions × {len(committee.models)} models ...")
        cells = p.run(committee, regions) if regions else []
        screens[name] = cells
        memory.append("screen", protocol=name, fingerprint=fp, config=protocol_config(p), cells=[c.to_dict() for c
                                                                                                 in cells],
                      evals=committee.n_evals - n0, wall_s=time.perf_counter() - t1)
        n_art = 0
        for c in cells:
            for oname, sig in _labelled(p, c):
                if sig.label == ARTEFACT:  # an artefact of this observable only (docs/detective.md §3.3)
                    n_art += 1
                    memory.append("artefact", protocol=name, cell=c.key, observable=oname, reason=sig.reason,
                                  values=c.values_of(oname, getattr(p.observable_named(oname), "metric", None)))
        n_sus = sum(c.suspicious for c in cells)
        per = ""
        if p.observables:
            counts = {o.name: sum(c.suspicious_in(o.name) for c in cells) for o in p.observables}
            per = " (" + ", ".join(f"{k} {v}" for k, v in counts.items() if v) + ")" if any(counts.values()) else ""
        say(f"    {n_sus} suspicious cells{per}, {n_art} protocol artefacts, "
            f"{committee.n_evals - n0} evaluations, {time.perf_counter() - t1:.1f} s")
    hypothesis: Hypothesis | None = None
    escalation = None
    done = [v for v in memory.of_type("verdict") if v["verdict"] == "escalate"]
    if done and stop is None:  # a finished run: rebuild its escalation from the memory, recompute nothing
        hid = done[-1]["hypothesis_id"]
        decl = {k: v for k, v in memory.declaration(hid).items() if k not in ("type", "t")}
        hypothesis = Hypothesis(**decl["hypothesis"])
        p = protos[hypothesis.protocol]
        rrec = memory.probe(hid, "robustness")
        scope = rrec["scope_cells"] if rrec is not None else memory.probe(hid, "scope")["cells"]
        probes = {n: memory.probe(hid, n)["report"] for n in ("mechanism", "impact")}
        if rrec is not None:
            probes["robustness"] = rrec["report"]
        escalation = {"hypothesis": hypothesis, "declaration": decl,
                      "scope_cells": [Cell.from_dict(c) for c in scope], "probes": probes,
                      "verdict": {k: v for k, v in done[-1].items() if k not in ("type", "t", "hypothesis_id")},
                      "screen": screens.get(hypothesis.protocol, []), "protocol": p}
        stop = "escalated"
        say(f"[hypothesis] {hid}: escalated in an earlier run (from the evidence memory)")
    while stop is None:
        settled = memory.settled()
        cands = [h for h in proposer.propose(screens, protos, committee.target_name, memory) if h.id not in settled]
        if not cands:
            stop = "exhausted"
            break
        if committee.n_evals >= budget:
            stop = "budget"
            break
        h = cands[0]
        p = protos[h.protocol]
        decl_rec = memory.declaration(h.id)
        if decl_rec is None:
            regions = p.neighbourhood(h.scope, elements, committee)
            decl = declare(h, p, regions)
            decl["backlog"] = [c.to_dict() for c in cands[1:]]
            memory.append("declaration", **decl)
            say(f"[hypothesis] {h.id} (priority {h.priority:.2f}): {h.statement}")
            say(f"    pre-registered: {len(decl['expected_failures'])} cells expected to fail, "
                f"{len(decl['expected_clean'])} expected clean")
        else:
            decl = {k: v for k, v in decl_rec.items() if k not in ("type", "t")}
            say(f"[hypothesis] {h.id}: declaration from the evidence memory")
        probes: dict[str, Any] = {}
        rec = memory.probe(h.id, "scope")
        if rec is None:
            n0 = committee.n_evals
            cells = p.run(committee, decl["regions"], variant="fine")
            rec = memory.append("probe", hypothesis_id=h.id, probe="scope", cells=[c.to_dict() for c in cells],
                                evals=committee.n_evals - n0)
        scope_cells = [Cell.from_dict(c) for c in rec["cells"]]
        for pname, fn in (("mechanism", p.mechanism), ("impact", p.impact)):
            prec = memory.probe(h.id, pname)
            if prec is None:
                n0 = committee.n_evals
                res = (fn(committee, h.scope, scope_cells, observable=h.observable) if h.observable is not None
                       and _accepts(fn, "observable") else fn(committee, h.scope, scope_cells))
                res.pop("evals", None)
                prec = memory.append("probe", hypothesis_id=h.id, probe=pname, report=res,
                                     evals=committee.n_evals - n0)
            probes[pname] = prec["report"]
        v = decide(decl, p, scope_cells)
        if v["verdict"] == "escalate" and decl.get("variants") and robust:
            rrec = memory.probe(h.id, "robustness")
            if rrec is None:
                n0 = committee.n_evals
                say(f"    robustness: {len(decl['variants'])} nuisance variants ...")
                rob, judged, var_cells = robustness(p, committee, h, decl, scope_cells)
                rrec = memory.append("probe", hypothesis_id=h.id, probe="robustness", report=rob,
                                     scope_cells=[c.to_dict() for c in judged],
                                     cells=[c.to_dict() for c in var_cells], evals=committee.n_evals - n0)
            scope_cells = [Cell.from_dict(c) for c in rrec["scope_cells"]]
            probes["robustness"] = rrec["report"]
            v = decide(decl, p, scope_cells, rrec["report"])
        memory.append("verdict", hypothesis_id=h.id, **v)
        say(f"    verdict: {v['verdict']} ({v['reason']})")
        if v["verdict"] == "escalate":
            hypothesis = h
            escalation = {"hypothesis": h, "declaration": decl, "scope_cells": scope_cells, "probes": probes,
                          "verdict": v, "screen": screens.get(h.protocol, []), "protocol": p}
            stop = "escalated"
    memory.append("stop", reason=stop, evals=0, n_evals=committee.n_evals)
    verdicts = memory.of_type("verdict")
    artefacts = memory.of_type("artefact")
    result = InvestigationResult(escalated=stop == "escalated", hypothesis=hypothesis, stop_reason=stop,
                                 verdicts=verdicts, artefacts=artefacts, n_evals=committee.n_evals,
                                 wall_s=time.perf_counter() - t0, out=out)
    if write:
        doc = write_report(out, committee, result, escalation, screens, protos, elements, memory, oracle_s=oracle_s)
        result = dataclasses.replace(result, escalation=doc, wall_s=time.perf_counter() - t0)
    say(f"[done] {stop}: {committee.n_evals} evaluations, {result.wall_s:.1f} s; report in {out}")
    return result
