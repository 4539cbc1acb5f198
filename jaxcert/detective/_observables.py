r"""Observables: several falsifiable checks per protocol, each with its own two signals (docs/detective.md §2.0, §3).

A protocol's scan gives one curve per model; an :class:`Observable` reads one number from each model's curve
metrics (larger = worse, in a stated unit) and judges it twice, the two kinds kept apart:

* **relative** (committee disagreement): the robust z of the target against the committee on *this* observable
  (median / 1.4826·MAD, the scale floored), z >= z_min and the target above the observable's anomaly threshold;
  every model above the threshold with the target no outlier is a protocol artefact *for this observable only*;
* **absolute** (a physical criterion, optional): the target's value above a stated limit in the observable's own
  unit is a violation whatever the committee says; every model above it is again an artefact for this observable.

So a committee that disagrees on one observable (the reference LJ's long tails make every model "bind at 4.5 Å")
masks nothing else: the barrier, the wall and the forces of the same curves are judged on their own.

The curve helpers here (:func:`branches`, :func:`barrier_above_asymptote`, :func:`secondary_well`,
:func:`collapse`, :func:`force_energy_mismatch`) are shared by the dimer and desorption protocols.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from jaxcert.core.result import Result
from jaxcert.detective._signals import (
    ARTEFACT,
    CONSTRAINT,
    DISAGREEMENT,
    NONE,
    PHYSICAL,
    SKIPPED,
    WEAK,
    Signal,
    classify,
)

__all__ = ["Observable", "ObservableSignal", "judge", "branches", "barrier_above_asymptote", "secondary_well",
           "collapse", "wall_dip", "force_energy_mismatch", "WALL_HEIGHT", "severity_of", "values_of", "by_name"]

#: eV above the dissociation asymptote that the repulsive wall must reach inside the scan, and the energy up to
#: which the force–energy consistency is checked (above it the quadrature error of a 0.1 Å grid on the wall
#: exceeds 0.01 eV/Å; docs/detective.md §2.1).
WALL_HEIGHT = 1.0


@dataclasses.dataclass(frozen=True)
class Observable:
    """One observable of a protocol and its two criteria (docs/detective.md §2.0).

    Attributes:
      name: short name (``"barrier"``); a hypothesis names the observable it is about.
      metric: the key of the per-model metrics that holds the value (larger = worse).
      unit: the value's unit (``"eV"``, ``"eV/Å"``, ``"1"`` for a fraction).
      description: what the value is, in one line.
      threshold: relative signal: the target must exceed it (and stand out, z >= z_min) to be anomalous.
      floor: floor of the committee scale in the robust z (the observable's unit).
      limit: absolute physical criterion: a target value above it is a violation whatever the committee says;
        None when physics sets no such bound (a residual binding at 4.5 Å can be real).
      exact: the absolute criterion is an exact constraint (F = −∇E, a repulsive wall, size consistency), so a
        violation is "exact-constraint violation"; otherwise "physical-criterion violation" (a barrier above the
        asymptote is unphysical for these protocols but a reference may still show a small one).
      weight: ranking weight of the observable within its protocol (severity of what it breaks).
      paper: what the seed paper says about it (for the report and the docs).
    """

    name: str
    metric: str
    unit: str
    description: str
    threshold: float
    floor: float
    limit: float | None = None
    exact: bool = False
    weight: float = 1.0
    paper: str = ""

    def describe(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class ObservableSignal(Result):
    """The judgement of one observable in one cell: the two kinds apart, and their combination.

    Attributes:
      observable: the observable's name.
      unit: its unit.
      relative: the committee-disagreement label (NONE, WEAK, DISAGREEMENT, ARTEFACT, SKIPPED).
      absolute: the physical-criterion label (NONE, CONSTRAINT or PHYSICAL, ARTEFACT, SKIPPED), or None without
        a stated limit.
      combined: the label that counts: an absolute violation, else a disagreement, else an artefact (of this
        observable only), else weak / none / skipped; z, median and scale are the relative signal's.
    """

    observable: str
    unit: str
    relative: Signal
    absolute: Signal | None
    combined: Signal

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ObservableSignal:
        return cls(observable=d["observable"], unit=d["unit"], relative=Signal.from_dict(d["relative"]),
                   absolute=None if d.get("absolute") is None else Signal.from_dict(d["absolute"]),
                   combined=Signal.from_dict(d["combined"]))


def judge(obs: Observable, values: Mapping[str, float], target: str, z_min: float = 3.0,
          skip_reason: str | None = None) -> ObservableSignal:
    """Label one observable of one cell from per-model values (docs/detective.md §3).

    The relative signal is :func:`~jaxcert.detective._signals.classify` of kind ``"disagreement"`` with the
    observable's threshold and floor; the absolute one is a ``"constraint"`` classification at ``obs.limit``
    (relabelled PHYSICAL unless the criterion is exact).  Combined: absolute violation > disagreement >
    artefact > weak > none > skipped.
    """
    rel = classify(values, target, obs.threshold, kind="disagreement", floor=obs.floor, z_min=z_min,
                   skip_reason=skip_reason)
    ab = None
    if obs.limit is not None:
        ab = classify(values, target, obs.limit, kind="constraint", floor=obs.floor, z_min=z_min,
                      skip_reason=skip_reason)
        if ab.label == CONSTRAINT:
            kind = "exact constraint" if obs.exact else "physical criterion"
            ab = dataclasses.replace(ab, label=CONSTRAINT if obs.exact else PHYSICAL,
                                     reason=f"{obs.name}: target {ab.target:.4g} {obs.unit} > limit {obs.limit:g} "
                                            f"{obs.unit} ({kind}; {ab.n_committee_anomalous}/{ab.n_committee} "
                                            "committee models exceed it too)")
    if ab is not None and ab.label in (CONSTRAINT, PHYSICAL):
        comb = dataclasses.replace(rel, label=ab.label, threshold=ab.threshold,
                                   n_committee_anomalous=ab.n_committee_anomalous,
                                   reason=ab.reason + f"; relative: {rel.label} (z = {rel.z:.1f})")
    elif rel.label == DISAGREEMENT:
        comb = dataclasses.replace(rel, reason=f"{obs.name}: {rel.reason}")
    elif rel.label == ARTEFACT or (ab is not None and ab.label == ARTEFACT):
        src = rel if rel.label == ARTEFACT else ab
        comb = dataclasses.replace(rel, label=ARTEFACT, threshold=src.threshold,
                                   n_committee_anomalous=src.n_committee_anomalous,
                                   reason=f"{obs.name}: {src.reason} (an artefact of this observable only)")
    else:
        comb = dataclasses.replace(rel, reason=f"{obs.name}: {rel.reason}")
    assert comb.label in (NONE, WEAK, DISAGREEMENT, CONSTRAINT, PHYSICAL, ARTEFACT, SKIPPED)
    return ObservableSignal(observable=obs.name, unit=obs.unit, relative=rel, absolute=ab, combined=comb)


def severity_of(obs: Observable, value: float) -> float:
    """Severity of a target value in units of its criterion: value / limit (value / threshold without a limit,
    ÷ floor when that is 0); dimensionless, so observables of different units rank on one scale."""
    if not math.isfinite(value):
        return 0.0
    den = obs.limit if obs.limit else (obs.threshold if obs.threshold > 0 else obs.floor)
    return float(max(value, 0.0) / den)


# ============================================================================ curve helpers
def branches(e: np.ndarray) -> tuple[int, int]:
    """(k_top, k_min) of a curve ``e`` (energies relative to the asymptote, ordered by increasing distance).

    k_top is the highest point of the scan (the crest of the repulsive wall; index 0 for a physical curve, whose
    energy is highest at the shortest distance), k_min the lowest point at or beyond it (the main well).  The
    inner branch [0, k_top] is where the wall is judged, the outer branch [k_min, end] where barriers, secondary
    wells and tails are: a hole at short range (a collapse) then cannot pose as the well.
    """
    k_top = int(np.argmax(e))
    k_min = k_top + int(np.argmin(e[k_top:]))
    return k_top, k_min


def barrier_above_asymptote(e: np.ndarray, k_min: int) -> tuple[float, int]:
    """(largest rise above the asymptote beyond the main well, eV (0 if none); its index)."""
    k = k_min + int(np.argmax(e[k_min:]))
    return float(max(e[k], 0.0)), k


def secondary_well(e: np.ndarray, k_min: int) -> tuple[float, int]:
    """(depth of the deepest secondary well beyond the main one, eV; its index).

    Moving outward from the well the energy must rise monotonically to the asymptote.  The depth is the largest
    fall below the highest energy already reached, that height capped at the asymptote:
    max_k [min(max_{k_min<=j<=k} e_j, 0) − e_k].  A barrier above the asymptote that then falls back to it
    counts nothing here (that is :func:`barrier_above_asymptote`); a dip below it after a shoulder does.
    """
    tail = e[k_min:]
    env = np.minimum(np.maximum.accumulate(tail), 0.0)
    fall = env - tail
    k = int(np.argmax(fall))
    return float(max(fall[k], 0.0)), k_min + k


def collapse(e: np.ndarray, k_top: int, wall: float = WALL_HEIGHT) -> tuple[float, int]:
    """(collapse of the short-range wall, eV; the index of the lowest point inside the crest).

    The energy must rise steeply as the atoms approach: moving inward from the crest it may not fall, and the
    crest must reach ``wall`` eV above the asymptote inside the scan.  Value: max(the fall below the crest
    inside it, ``wall`` − the crest height), 0 for a physical curve.
    """
    inner = e[: k_top + 1]
    k = int(np.argmin(inner))
    fall = float(e[k_top] - inner[k])
    short = float(wall - e[k_top])
    return max(fall, short, 0.0), k


def wall_dip(e: np.ndarray, k_top: int, k_min: int) -> tuple[float, int]:
    """(largest dip on the outer repulsive wall, eV; the index of its bottom).

    Between the wall's crest ``k_top`` and the main well ``k_min`` the energy must fall monotonically as the atoms
    separate.  The dip is the largest rise met moving outward on that branch,
    max_{k_top <= i <= j <= k_min} (e_j − e_i): a local minimum on the wall followed by a shoulder (a non-monotonic
    repulsive branch), 0 for a physical wall.
    """
    seg = e[k_top: k_min + 1]
    if seg.size < 2:
        return 0.0, k_top
    low = np.minimum.accumulate(seg)
    rise = seg - low
    j = int(np.argmax(rise))
    i = int(np.argmin(seg[: j + 1]))
    return float(max(rise[j], 0.0)), k_top + i


def force_energy_mismatch(r: np.ndarray, e: np.ndarray, f: np.ndarray | None, k_top: int,
                          cap: float = WALL_HEIGHT) -> tuple[float, float]:
    r"""(largest force–energy mismatch along the scan, eV/Å; where, Å).

    ``f`` is the force along the scan coordinate, positive when it pushes to larger ``r`` (F = −dE/dr for a
    conservative model).  On every pair of equal steps [r_k, r_{k+2}] beyond the crest whose energies stay below
    ``cap`` eV above the asymptote, Simpson's rule gives the work W = (h/3)(F_k + 4F_{k+1} + F_{k+2}); the
    mismatch is |E_{k+2} − E_k + W| / (r_{k+2} − r_k), a mean force error over the double step.  Its quadrature
    error is h⁴/180 · max|F''''| for a smooth curve (< 1e-3 eV/Å for a Morse at h = 0.1 Å under the cap); a
    curve only C¹ (the reference LJ's switch) reaches 0.01 eV/Å at h = 0.1 Å, a fifth of the 0.05 eV/Å limit.
    """
    if f is None:
        return float("nan"), float("nan")
    f = np.asarray(f, float)
    if not np.all(np.isfinite(f)):
        return float("nan"), float("nan")
    best, where = 0.0, float("nan")
    for k in range(k_top, len(r) - 2):
        h1, h2 = r[k + 1] - r[k], r[k + 2] - r[k + 1]
        if abs(h1 - h2) > 1e-6 * max(h1, 1e-12) or max(e[k], e[k + 1], e[k + 2]) > cap:
            continue
        work = h1 / 3.0 * (f[k] + 4.0 * f[k + 1] + f[k + 2])
        mis = abs(e[k + 2] - e[k] + work) / (2.0 * h1)
        if mis > best:
            best, where = float(mis), float(r[k + 1])
    return best, where


def values_of(cell_metrics: Mapping[str, Mapping[str, float]], obs: Observable) -> dict[str, float]:
    """model -> the observable's value (NaN where the metric is missing)."""
    return {m: float(v.get(obs.metric, float("nan"))) if v.get(obs.metric) is not None else float("nan")
            for m, v in cell_metrics.items()}


def by_name(observables: Sequence[Observable], name: str) -> Observable:
    for o in observables:
        if o.name == name:
            return o
    raise KeyError(f"observable {name!r}; known: {', '.join(o.name for o in observables)}")
