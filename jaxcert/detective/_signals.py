r"""The two label-free surrogate signals and how a screen cell is labelled (docs/detective.md §3).

* **Exact-constraint violation** (protocols of kind ``"constraint"``): the target crosses the check's numeric
  threshold.  Decisive on its own: no committee agreement is needed.
* **Committee disagreement** (kind ``"disagreement"``): the target crosses the anomaly threshold *and* sits far
  from the committee on the robust scale

  .. math::  z = \frac{v_\mathrm{target} - \operatorname{median}_c v_c}
                    {\max(1.4826\,\operatorname{median}_c |v_c - \operatorname{median} v|,\ s_\mathrm{floor})}

  (the scale of :mod:`jaxcert.controls._consensus`).  Disagreement only allocates suspicion; it never decides.
* **Protocol artefact**: the target *and every* committee model cross the threshold (for a disagreement
  protocol: while the target is no outlier, z < z_min).  Then the protocol, not the model, is suspect
  (docs/detective.md §3.3); such a cell is labelled and never escalated.

A model whose value is NaN (it could not evaluate the configurations) takes no part.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from jaxcert.core.result import Result, Status

__all__ = ["MAD_SCALE", "NONE", "WEAK", "DISAGREEMENT", "CONSTRAINT", "PHYSICAL", "ARTEFACT", "SKIPPED",
           "SUSPICIOUS",
           "Signal", "robust_z", "classify"]

#: 1.4826 · MAD estimates σ for normal data (as in jaxcert.controls._consensus).
MAD_SCALE = 1.4826

NONE = "none"                    # the target does not cross the threshold
WEAK = "weak"                    # the target crosses it but the committee does not single it out (z < z_min)
DISAGREEMENT = "disagreement"    # committee disagreement: the target crosses the threshold and z >= z_min
CONSTRAINT = "constraint"        # exact-constraint violation by the target (decisive on its own)
PHYSICAL = "physical"            # the target breaks an observable's absolute physical criterion (§3.4)
ARTEFACT = "protocol_artefact"   # every model (target and committee) crosses the threshold
SKIPPED = Status.SKIPPED.value   # the target could not be evaluated, or the check is guaranteed by construction

#: Labels that make a cell suspicious enough to seed a hypothesis.
SUSPICIOUS = (DISAGREEMENT, CONSTRAINT, PHYSICAL)


@dataclasses.dataclass(frozen=True)
class Signal(Result):
    """The label of one screen cell (docs/detective.md §3); a :class:`~jaxcert.core.result.Result` (``to_dict``
    writes a non-finite ``z`` or median as ``None``; :meth:`from_dict` reads it back as NaN).

    Attributes:
      label: one of NONE, WEAK, DISAGREEMENT, CONSTRAINT, PHYSICAL, ARTEFACT, SKIPPED.
      z: robust z of the target against the committee (NaN without committee values).
      target: the target's value of the observable.
      committee_median: median of the committee's values.
      committee_scale: 1.4826·MAD of the committee's values (unfloored).
      n_committee: committee models that gave a value.
      n_committee_anomalous: how many of them cross the threshold too.
      threshold: the anomaly threshold (a value above it is anomalous).
      reason: a sentence for the report.
    """

    label: str
    z: float
    target: float
    committee_median: float
    committee_scale: float
    n_committee: int
    n_committee_anomalous: int
    threshold: float
    reason: str

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Signal:
        return cls(**{f.name: (float("nan") if d[f.name] is None else d[f.name]) for f in dataclasses.fields(cls)})


def robust_z(target: float, committee: Sequence[float], floor: float) -> tuple[float, float, float]:
    """(z, median, 1.4826·MAD) of ``target`` against the finite committee values; z NaN if there are none.

    The scale entering z is floored at ``floor`` (same unit as the values), so a committee that agrees
    exactly does not turn round-off into an infinite z (docs/detective.md §3.2).
    """
    c = np.asarray([v for v in committee if v is not None and math.isfinite(v)], np.float64)
    if c.size == 0 or not math.isfinite(target):
        return float("nan"), float("nan"), float("nan")
    med = float(np.median(c))
    scale = float(MAD_SCALE * np.median(np.abs(c - med)))
    return (float(target) - med) / max(scale, float(floor)), med, scale


def classify(values: Mapping[str, float], target: str, threshold: float, *, kind: str, floor: float,
             z_min: float = 3.0, skip_reason: str | None = None) -> Signal:
    """Label one cell from per-model values (larger = worse) of one observable.

    Args:
      values: model name -> value (NaN: not evaluated).
      target: the target model's name (a key of ``values``).
      threshold: a value strictly above it is anomalous.
      kind: ``"constraint"`` or ``"disagreement"`` (docs/detective.md §3).
      floor: the floor of the committee scale in the robust z.
      z_min: the disagreement cut on z.
      skip_reason: when given, the cell is SKIPPED with this reason.
    """
    if kind not in ("constraint", "disagreement"):
        raise ValueError(f"kind: got {kind!r}; allowed: constraint, disagreement")
    v_t = float(values.get(target, float("nan")))
    others = [float(v) for k, v in values.items() if k != target]
    finite = [v for v in others if math.isfinite(v)]
    z, med, scale = robust_z(v_t, finite, floor)
    n_anom = sum(v > threshold for v in finite)
    common = dict(z=z, target=v_t, committee_median=med, committee_scale=scale, n_committee=len(finite),
                  n_committee_anomalous=int(n_anom), threshold=float(threshold))
    if skip_reason is not None or not math.isfinite(v_t):
        return Signal(SKIPPED, reason=skip_reason or "the target gave no value", **common)
    if v_t <= threshold:
        return Signal(NONE, reason=f"target {v_t:.4g} <= threshold {threshold:.4g}", **common)
    outlier = kind == "disagreement" and math.isfinite(z) and z >= z_min
    if finite and n_anom == len(finite) and not outlier:
        return Signal(ARTEFACT, reason=f"every model crosses the threshold ({n_anom}/{len(finite)} committee): the "
                      "protocol, not the target, is suspect", **common)
    if kind == "constraint":
        return Signal(CONSTRAINT, reason=f"target {v_t:.4g} > threshold {threshold:.4g} (exact constraint; "
                      f"{n_anom}/{len(finite)} committee models cross it too)", **common)
    if outlier:
        note = (" (every committee model crosses the threshold too, so the threshold says little here; the target "
                "is still an outlier)") if finite and n_anom == len(finite) else ""
        return Signal(DISAGREEMENT, reason=f"target {v_t:.4g} > threshold {threshold:.4g} and robust z = {z:.1f} "
                      f">= {z_min:g} against the committee median {med:.4g}{note}", **common)
    return Signal(WEAK, reason=f"target {v_t:.4g} > threshold {threshold:.4g} but z = {z:.1f} < {z_min:g}: the "
                  "committee does not single it out", **common)
