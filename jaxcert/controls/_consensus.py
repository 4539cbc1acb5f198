"""The consensus test for bad reference energies, its per-element re-referencing and third-database
adjudication (seed 001 Methods I; the "bad references" section). See docs/controls.md, "The consensus test".

A structure is a *discrepancy* when a panel of models agrees closely (small robust spread) and the reference
sits far from the panel's median, in absolute terms and in units of the spread. Part of each gap can be a
per-element reference offset, so the offset is fitted to the consensus gap, subtracted, and the cut applied
again; a third DFT database then sides with the models (a bad reference) or with the reference (a genuine,
shared model error), or is silent (unsettled). Host-side numpy float64, vectorised over structures.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from typing import Any

import numpy as np

from jaxcert.controls._reference import FIT_CUT, MAD_SCALE, RIDGE, Rung0Fit, _fractions, _mask, _vec, rung0_fit
from jaxcert.controls._result import ControlResult

__all__ = ["ConsensusResult", "ReReferencedConsensus", "Adjudication", "consensus_test", "rereference_consensus",
           "adjudicate"]

#: Seed 001 Methods I defaults.
MIN_MODELS = 6
S_MAX = 0.1       # eV/atom: the panel's robust spread must be below this ...
D_MIN = 0.3       # eV/atom: ... the reference must be farther than this from the consensus ...
Z_MIN = 5.0       # ... and this many (floored) spreads away.
S_FLOOR = 0.02    # eV/atom: floor on the spread in the z-score denominator.
GROSS = 50.0      # eV/atom: a model energy this far from the reference is a numerical failure, discarded.
#: The paper compares "on meV/atom values": every threshold comparison is made after scaling eV -> meV.
_MEV = 1000.0
_STRICT = ("mixed", "all", "none")


@dataclasses.dataclass(frozen=True)
class ConsensusResult(ControlResult):
    """Per-structure consensus statistics and the discrepancy flag (seed 001 Methods I).

    Arrays ``(n,)``: ``consensus`` C (median over the valid models, eV/atom), ``spread`` S (1.4826 x the median
    absolute deviation from C, not floored), ``gap`` C - ref (signed), ``distance`` |gap|, ``z`` = distance /
    max(S, s_floor), ``n_models`` (valid models after the gross-error discard), ``scored`` (at least
    ``min_models`` valid and a finite reference), ``discrepancy``; NaN where not scored. Counts: ``n_structures``,
    ``n_scored``, ``n_discrepancies``, ``n_gross`` (model entries discarded as numerical failures),
    ``n_lost_to_gross`` (structures with enough models before that discard and too few after). The thresholds and
    the ``strict`` reading are recorded.
    """

    consensus: np.ndarray
    spread: np.ndarray
    gap: np.ndarray
    distance: np.ndarray
    z: np.ndarray
    n_models: np.ndarray
    scored: np.ndarray
    discrepancy: np.ndarray
    n_structures: int
    n_scored: int
    n_discrepancies: int
    n_gross: int
    n_lost_to_gross: int
    min_models: int
    s_max: float
    d_min: float
    z_min: float
    s_floor: float
    gross: float
    strict: str


def _check_strict(strict: Any) -> str:
    if strict not in _STRICT:
        raise ValueError(f"strict must be one of {_STRICT}, got {strict!r}")
    return str(strict)


def _cut(spread: np.ndarray, distance: np.ndarray, scored: np.ndarray, s_max: float, d_min: float, z_min: float,
         s_floor: float, strict: str) -> tuple[np.ndarray, np.ndarray]:
    """``(z, discrepancy)`` from the spread and distance; comparisons on meV/atom values."""
    s = spread * _MEV
    d = distance * _MEV
    with np.errstate(invalid="ignore", divide="ignore"):
        z = d / np.maximum(s, s_floor * _MEV)
        if strict == "mixed":
            hit = (s < s_max * _MEV) & (d > d_min * _MEV) & (z >= z_min)
        elif strict == "all":
            hit = (s < s_max * _MEV) & (d > d_min * _MEV) & (z > z_min)
        else:
            hit = (s <= s_max * _MEV) & (d >= d_min * _MEV) & (z >= z_min)
    return np.where(scored, z, np.nan), hit & scored


def _float(x: Any, name: str, *, positive: bool = True) -> float:
    try:
        v = float(x)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {x!r}") from None
    if math.isnan(v) or (positive and not v > 0):
        raise ValueError(f"{name} must be > 0, got {x!r}")
    return v


def consensus_test(
    E: Any,
    ref: Any,
    min_models: int = MIN_MODELS,
    s_max: float = S_MAX,
    d_min: float = D_MIN,
    z_min: float = Z_MIN,
    s_floor: float = S_FLOOR,
    gross: float = GROSS,
    *,
    strict: str = "mixed",
) -> ConsensusResult:
    """The consensus test of seed 001 Methods I.

    ``E``: ``(n_structures, n_models)`` model formation energies (eV/atom, after each model's elemental-reference
    screen; NaN = the model did not score the structure); ``ref``: ``(n,)`` the reference formation energies.

    1. A model entry with ``|E - ref| > gross`` (50 eV/atom) is discarded as a numerical failure.
    2. A structure is scored when at least ``min_models`` (6) entries remain and ``ref`` is finite.
    3. C = median of the remaining entries; S = 1.4826 median |E - C|; gap = C - ref; z = |gap| / max(S, s_floor)
       with ``s_floor`` = 0.02 eV/atom (the floor enters only the z-score; S itself is compared unfloored).
    4. Discrepancy: S < ``s_max`` (0.1 eV/atom), |gap| > ``d_min`` (0.3 eV/atom) and z >= ``z_min`` (5).

    The paper writes "S < 0.1, dA > 0.3, and z >= 5; all strict inequalities on meV/atom values", which
    contradicts itself on z. ``strict`` chooses: ``"mixed"`` (default) = the inequalities as written (S <,
    |gap| >, z >=); ``"all"`` = all strict (z > z_min too); ``"none"`` = none strict (S <=, |gap| >=, z >=).
    Comparisons are made on meV/atom values (eV x 1000), as the paper says. See docs/controls.md, "The
    consensus test".
    """
    e = np.asarray(E, dtype=np.float64)
    if e.ndim != 2 or e.shape[0] == 0 or e.shape[1] == 0:
        raise ValueError(f"E must be a non-empty (n_structures, n_models) array, got shape {e.shape}")
    n = e.shape[0]
    r = _vec(ref, "ref", n)
    if isinstance(min_models, bool) or not isinstance(min_models, (int, np.integer)) or min_models < 1:
        raise ValueError(f"min_models must be a positive integer, got {min_models!r}")
    s_max, d_min, s_floor, gross = (_float(v, k) for v, k in ((s_max, "s_max"), (d_min, "d_min"),
                                                                (s_floor, "s_floor"), (gross, "gross")))
    z_min = _float(z_min, "z_min", positive=False)
    strict = _check_strict(strict)
    finite = np.isfinite(e)
    with np.errstate(invalid="ignore"):
        bad = finite & (np.abs(e - r[:, None]) > gross)
    valid = finite & ~bad
    ev = np.where(valid, e, np.nan)
    n_models = valid.sum(axis=1)
    ref_ok = np.isfinite(r)
    scored = (n_models >= min_models) & ref_ok
    lost = (finite.sum(axis=1) >= min_models) & ~scored & ref_ok
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rows: the median is NaN, as intended
        c = np.nanmedian(ev, axis=1)
        s = MAD_SCALE * np.nanmedian(np.abs(ev - c[:, None]), axis=1)
    c = np.where(scored, c, np.nan)
    s = np.where(scored, s, np.nan)
    gap = c - r
    dist = np.abs(gap)
    z, hit = _cut(s, dist, scored, s_max, d_min, z_min, s_floor, strict)
    return ConsensusResult(
        consensus=c, spread=s, gap=gap, distance=dist, z=z, n_models=n_models.astype(np.int64), scored=scored,
        discrepancy=hit, n_structures=n, n_scored=int(scored.sum()), n_discrepancies=int(hit.sum()),
        n_gross=int(bad.sum()), n_lost_to_gross=int(lost.sum()), min_models=int(min_models), s_max=s_max,
        d_min=d_min, z_min=z_min, s_floor=s_floor, gross=gross, strict=strict)


@dataclasses.dataclass(frozen=True)
class ReReferencedConsensus(ControlResult):
    """The consensus test before and after subtracting a per-element offset from the consensus.

    ``before``, ``after`` (:class:`ConsensusResult`; ``after.consensus`` = C - fractions @ offsets, same spread);
    ``fit``: the offset fit (:class:`~jaxcert.controls.Rung0Fit`, constants in eV/atom per column of
    ``fractions``); ``structure_offset``: ``(n,)`` fractions @ offsets; ``dropped`` (discrepant before, not after)
    and ``added`` (after, not before) masks with their counts.
    """

    before: ConsensusResult
    after: ConsensusResult
    fit: Rung0Fit
    structure_offset: np.ndarray
    dropped: np.ndarray
    added: np.ndarray
    n_dropped: int
    n_added: int


def rereference_consensus(
    E: Any,
    ref: Any,
    fractions: Any,
    *,
    fit_cut: float | None = FIT_CUT,
    ridge: float = RIDGE,
    loss: str = "ls",
    fit_kwargs: dict | None = None,
    **test_kwargs: Any,
) -> ReReferencedConsensus:
    """Re-referencing of the consensus gap (seed 001 Methods I; the paper's 15,278 -> 10,861 step).

    One offset per element is fitted to the signed gap C - ref over the scored structures with
    ``|C - ref| < fit_cut`` (0.5 eV/atom; None = all scored) as a ridge regression (``loss="ls"``, lambda = 1e-3, via
    :func:`jaxcert.controls.rung0_fit`; ``loss="lad"`` gives the robust variant). The composition-weighted offset
    is subtracted from the consensus (the spread is unchanged: the offset shifts every model of a structure
    alike) and the same cut is applied again. ``test_kwargs`` (``min_models``, ``s_max``, ``d_min``, ``z_min``,
    ``s_floor``, ``gross``, ``strict``) go to :func:`consensus_test` for both passes. See docs/controls.md, "The
    consensus test".
    """
    before = consensus_test(E, ref, **test_kwargs)
    n = before.n_structures
    f = _fractions(fractions, n)
    fit = rung0_fit(before.gap, f, before.scored, loss, ridge, fit_cut=fit_cut, **(fit_kwargs or {}))
    off = f @ fit.constants
    c2 = before.consensus - off
    gap2 = c2 - _vec(ref, "ref", n)
    dist2 = np.abs(gap2)
    z2, hit2 = _cut(before.spread, dist2, before.scored, before.s_max, before.d_min, before.z_min, before.s_floor,
                    before.strict)
    after = dataclasses.replace(before, consensus=c2, gap=gap2, distance=dist2, z=z2, discrepancy=hit2,
                                n_discrepancies=int(hit2.sum()))
    dropped = before.discrepancy & ~hit2
    added = hit2 & ~before.discrepancy
    return ReReferencedConsensus(before=before, after=after, fit=fit, structure_offset=off, dropped=dropped,
                                 added=added, n_dropped=int(dropped.sum()), n_added=int(added.sum()))


@dataclasses.dataclass(frozen=True)
class Adjudication(ControlResult):
    """Third-database verdicts on the discrepancies (seed 001 Methods I).

    ``verdict``: ``(n,)`` strings, ``"bad_reference"`` (the third database sides with the models),
    ``"model_error"`` (it sides with the reference: a genuine model error the panel shares), ``"unsettled"``
    (no same-crystal entry), ``""`` (not adjudicated); the masks ``bad_reference``, ``model_error``,
    ``unsettled``; ``third`` (the X used, the lowest of the supplied databases); counts ``n_adjudicated``,
    ``n_covered``, ``n_bad_reference``, ``n_model_error``, ``n_unsettled``; ``frac_sides_with_models`` (of the
    covered); ``median_gap_to_models`` / ``median_gap_to_reference``: median |X - C| and |X - ref| over the
    covered (eV/atom).
    """

    verdict: np.ndarray
    bad_reference: np.ndarray
    model_error: np.ndarray
    unsettled: np.ndarray
    third: np.ndarray
    n_adjudicated: int
    n_covered: int
    n_bad_reference: int
    n_model_error: int
    n_unsettled: int
    frac_sides_with_models: float
    median_gap_to_models: float
    median_gap_to_reference: float


def adjudicate(third: Any, consensus: Any, ref: Any, discrepancy: Any = None) -> Adjudication:
    """Let a third database settle each discrepancy (seed 001 Methods I, "Third-database checks").

    ``third``: ``(n,)`` or ``(n, k)`` formation energies (eV/atom) of the same crystal in one or more other
    databases, NaN where a database has no same-crystal entry; with several columns X is the lowest of them
    (the paper takes "the lowest formation energy X among the entries of Alexandria, OQMD, and MP"); pass one
    column to count one database alone, as the paper's per-database figures do. ``consensus``: ``(n,)`` the
    consensus C in the reference's frame (after re-referencing where the discrepancies are those that survive
    it: ``ReReferencedConsensus.after.consensus``), or a :class:`ConsensusResult`, whose ``discrepancy`` then
    is the default set; ``ref``: the reference formation energies; ``discrepancy``: which structures to
    adjudicate (default: all with finite C and ref, or the result's flags).

    Rule: the database sides with the models if |X - C| < |X - ref| (strict; a tie sides with the reference) ->
    ``bad_reference``; otherwise ``model_error``; X missing -> ``unsettled``. See docs/controls.md, "The
    consensus test".
    """
    default = None
    if isinstance(consensus, ConsensusResult):
        default = consensus.discrepancy
        consensus = consensus.consensus
    c = _vec(consensus, "consensus")
    n = c.shape[0]
    r = _vec(ref, "ref", n)
    t = np.asarray(third, dtype=np.float64)
    if t.ndim == 1:
        t = t[:, None]
    if t.ndim != 2 or t.shape[0] != n or t.shape[1] == 0:
        raise ValueError(f"third must have shape ({n},) or ({n}, k), got {np.shape(third)}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        x = np.nanmin(t, axis=1)
    if discrepancy is None:
        sel = default if default is not None else np.isfinite(c) & np.isfinite(r)
    else:
        sel = _mask(discrepancy, "discrepancy", n)
    sel = sel & np.isfinite(c) & np.isfinite(r)
    covered = sel & np.isfinite(x)
    to_models = np.abs(x - c)
    to_ref = np.abs(x - r)
    with np.errstate(invalid="ignore"):
        sides = covered & (to_models < to_ref)
    model_error = covered & ~sides
    unsettled = sel & ~covered
    verdict = np.full(n, "", dtype="<U13")
    verdict[sides] = "bad_reference"
    verdict[model_error] = "model_error"
    verdict[unsettled] = "unsettled"
    nc = int(covered.sum())
    return Adjudication(
        verdict=verdict, bad_reference=sides, model_error=model_error, unsettled=unsettled, third=x,
        n_adjudicated=int(sel.sum()), n_covered=nc, n_bad_reference=int(sides.sum()),
        n_model_error=int(model_error.sum()), n_unsettled=int(unsettled.sum()),
        frac_sides_with_models=float(sides.sum() / nc) if nc else math.nan,
        median_gap_to_models=float(np.median(to_models[covered])) if nc else math.nan,
        median_gap_to_reference=float(np.median(to_ref[covered])) if nc else math.nan)
