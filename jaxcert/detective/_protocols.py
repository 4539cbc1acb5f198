r"""Protocols: configurations + observable + falsifiable checks with numeric thresholds + a continuous severity.

docs/detective.md §2.  A :class:`Protocol` turns a *region* (an element pair, a metal–adsorbate pair, a
constraint on an element) into configurations, evaluates them identically on every committee model
(:class:`~jaxcert.detective.Committee`) and returns one :class:`Cell` per region: per-model values of the
observable (larger = worse), per-model metrics, the curve for the figure and the :class:`~jaxcert.detective.Signal`.

This module holds the base class, the cell and the dimer protocol (§2.1); the surface protocols are in
:mod:`jaxcert.detective._surfaces` (§2.2, §2.3), the eight constraints in :mod:`jaxcert.detective._constraints`
(§2.4).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from jaxcert.core.result import Result
from jaxcert.core.structure import Structure
from jaxcert.detective._observables import (
    WALL_HEIGHT,
    Observable,
    ObservableSignal,
    barrier_above_asymptote,
    branches,
    by_name,
    collapse,
    force_energy_mismatch,
    judge,
    secondary_well,
    wall_dip,
)
from jaxcert.detective._signals import SUSPICIOUS, Signal, classify

__all__ = ["Cell", "Variant", "Protocol", "Dimers", "DimerConfig", "dimer_metrics", "dimer_grid", "dimer_structure",
           "supported", "pair_key"]


@dataclasses.dataclass(frozen=True)
class Cell(Result):
    """One region of one protocol, evaluated on every model (docs/detective.md §2); a
    :class:`~jaxcert.core.result.Result` (``to_dict``: strict JSON, NaN as ``None``; :meth:`from_dict` reads it back).

    Attributes:
      protocol: protocol name.
      key: region label, e.g. ``"Sb-Sb"``, ``"Cu(111)/CO"``, ``"born:Si"``.
      region: the region as data (``{"elements": [...]}``, ``{"metal": ..., "adsorbate": ...}``, ...).
      values: model name -> observable value (larger = worse; NaN = not evaluated).
      metrics: model name -> further metrics of that model's curve.
      signal: the label (docs/detective.md §3).
      data: plot data: ``{"x": [...], "y": {model: [...]}, "xlabel": ..., "ylabel": ...}`` (may be empty).
      variant: ``"screen"`` or the probe variant that produced it (e.g. ``"fine"``).
      observables: observable name -> its :class:`~jaxcert.detective._observables.ObservableSignal` (the
        relative and absolute signals kept apart; docs/detective.md §2.0); empty for a protocol with one
        observable, whose label is ``signal``.  ``signal`` is the first (primary) observable's combined label.
      excluded: committee model -> why it failed the protocol's own physical checks in this cell
        (:meth:`Protocol.sanity`, docs/detective.md §3.5); an excluded member takes no part in the signals.
    """

    protocol: str
    key: str
    region: dict[str, Any]
    values: dict[str, float]
    metrics: dict[str, dict[str, float]]
    signal: Signal
    data: dict[str, Any] = dataclasses.field(default_factory=dict)
    variant: str = "screen"
    observables: dict[str, ObservableSignal] = dataclasses.field(default_factory=dict)
    excluded: dict[str, str] = dataclasses.field(default_factory=dict)

    @property
    def suspicious(self) -> bool:
        """Any observable of the cell seeds a hypothesis (docs/detective.md §3)."""
        return self.signal.label in SUSPICIOUS or any(o.combined.label in SUSPICIOUS
                                                      for o in self.observables.values())

    def signal_of(self, observable: str | None) -> Signal:
        """The combined label of ``observable`` (``signal`` for None or a cell without that observable)."""
        if observable is None or observable not in self.observables:
            return self.signal
        return self.observables[observable].combined

    def suspicious_in(self, observable: str | None) -> bool:
        return self.signal_of(observable).label in SUSPICIOUS

    def values_of(self, observable: str | None, metric: str | None = None) -> dict[str, float]:
        """model -> value of ``observable`` (its ``metric`` in the per-model metrics); ``values`` for None."""
        if observable is None or metric is None:
            return dict(self.values)
        return {m: float(_nan(v.get(metric))) for m, v in self.metrics.items()}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Cell:
        return cls(protocol=d["protocol"], key=d["key"], region=dict(d["region"]),
                   values={k: _nan(v) for k, v in d["values"].items()},
                   metrics={k: {kk: _nan(vv) for kk, vv in v.items()} for k, v in d["metrics"].items()},
                   signal=Signal.from_dict(d["signal"]),
                   data=dict(d.get("data") or {}), variant=d.get("variant", "screen"),
                   observables={k: ObservableSignal.from_dict(v) for k, v in (d.get("observables") or {}).items()},
                   excluded=dict(d.get("excluded") or {}))


def _nan(x: Any) -> Any:
    """JSON ``null`` (a non-finite float on writing) back to NaN; other values unchanged."""
    return float("nan") if x is None else x


@dataclasses.dataclass(frozen=True)
class Variant:
    """One pre-registered nuisance variant of a protocol (docs/detective.md §4.6).

    Attributes:
      name: short label (``"3x3 cell"``).
      variable: the nuisance variable it changes (``"lateral size"``, ``"layers"``, ``"site"``, ...).
      convergence: True when the variant moves the protocol toward its converged limit (a larger cell, more
        layers, a finer grid, a deeper floor): a finding that disappears there is an artefact of the base
        geometry.  False for an alternative physical situation (another site, a relaxed slab): a finding that
        holds at some of them only is fragile, not an artefact.
      config: the protocol settings that differ from the base (fields of the protocol's config).
    """

    name: str
    variable: str
    convergence: bool
    config: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def supported(model: Any, symbols: Sequence[str]) -> bool:
    """True when ``model`` has parameters for every symbol (``model.elements`` None = any)."""
    from ase.data import atomic_numbers

    el = getattr(model, "elements", None)
    return el is None or all(atomic_numbers[s] in el for s in symbols)


def pair_key(a: str, b: str) -> str:
    """``"A-B"`` in a canonical order (by atomic number, then symbol)."""
    from ase.data import atomic_numbers

    x, y = sorted((a, b), key=lambda s: (atomic_numbers[s], s))
    return f"{x}-{y}"


class Protocol:
    """Base class (docs/detective.md §2).  Subclasses set the class attributes and implement the hooks.

    Attributes:
      name: the protocol's name (``--protocols`` value).
      kind: ``"disagreement"`` or ``"constraint"`` (which surrogate signal decides suspicion).
      importance: how much the region matters in applications (ranking weight of the rule-based proposer).
      observable: what the value is, for the report; ``unit`` its unit.
      threshold, floor, z_min: the anomaly threshold, the floor of the committee scale and the z cut.
      application: what a failure breaks (report section 3).
      observables: the protocol's observables (docs/detective.md §2.0), the first the primary one whose values
        are ``Cell.values``; empty: one observable, the ``threshold``/``floor`` above.
    """

    name = "protocol"
    kind = "disagreement"
    importance = 1.0
    observable = ""
    unit = ""
    threshold = 0.0
    floor = 1.0
    z_min = 3.0
    application = ""
    observables: tuple[Observable, ...] = ()

    def observable_named(self, name: str | None) -> Observable | None:
        """The observable called ``name`` (None for None: the protocol's single value)."""
        return None if name is None else by_name(self.observables, name)

    # ------------------------------------------------------------ required hooks
    def regions(self, elements: Sequence[str], committee: Any) -> list[dict[str, Any]]:
        """The screen's regions over ``elements`` (only what the target supports)."""
        raise NotImplementedError

    def run(self, committee: Any, regions: Sequence[dict[str, Any]], variant: str = "screen") -> list[Cell]:
        """Evaluate ``regions`` on every model; ``variant`` "fine" is the scope probe's finer version."""
        raise NotImplementedError

    def key(self, region: Mapping[str, Any]) -> str:
        raise NotImplementedError

    def scope_of(self, cells: Sequence[Cell]) -> dict[str, Any]:
        """The scope a hypothesis built on ``cells`` (the suspicious ones) claims."""
        raise NotImplementedError

    def in_scope(self, region: Mapping[str, Any], scope: Mapping[str, Any]) -> bool:
        raise NotImplementedError

    def neighbourhood(self, scope: Mapping[str, Any], elements: Sequence[str], committee: Any) -> list[dict]:
        """Regions for the scope probe: every in-scope region and the out-of-scope ones next to it."""
        raise NotImplementedError

    def configurations(self, region: Mapping[str, Any], committee: Any, cell: Cell | None = None
                       ) -> list[tuple[str, Any]]:
        """(label, ase.Atoms) for the DFT verification card (a handful per region)."""
        raise NotImplementedError

    # -------------------------------------------------------------- optional hooks
    def mechanism(self, committee: Any, scope: Mapping[str, Any], cells: Sequence[Cell]) -> dict[str, Any]:
        """Mechanism probe: why it occurs (docs/detective.md §4.3, §2).  Returns summary, numbers, confounds."""
        return {"summary": "no mechanism probe for this protocol", "numbers": {}, "confounds": []}

    def impact(self, committee: Any, scope: Mapping[str, Any], cells: Sequence[Cell]) -> dict[str, Any]:
        """Impact probe: does it matter in bulk or MD, and where it does not (docs/detective.md §4.3)."""
        return {"summary": "no impact probe for this protocol", "boundary": "", "numbers": {}, "evals": 0}

    def statement(self, scope: Mapping[str, Any]) -> str:
        """The hypothesis in one sentence."""
        return f"the target fails the {self.name} protocol in {scope}"

    def sanity(self, metrics: Mapping[str, float]) -> str | None:
        """The protocol's physical checks on one committee member's curve in one cell (docs/detective.md §3.5):
        None when the member may serve as a reference there, else the reason it may not.  Default: finite."""
        return None

    def variants(self) -> list[Variant]:
        """The pre-registered nuisance variants the robustness probe re-runs an escalation over
        (docs/detective.md §4.6); empty: the protocol declares no nuisance variable."""
        return []

    def not_varied(self) -> list[str]:
        """What the protocol holds fixed and no variant changes, for the claims of the report (§5.3)."""
        return ["no reference calculation (DFT) was run; the verdict is a human's"]

    def image_check(self, base: Cell, lateral: Cell, target: str, signal: float) -> dict[str, str]:
        """Committee members whose curves in ``base`` and in the larger-cell variant ``lateral`` differ by more
        than ``signal``, the target's value of the observable (floored at its threshold): image interactions
        larger than the signal (docs/detective.md §3.5).  member -> reason.  Default: none (an isolated protocol
        has no images)."""
        return {}

    def describe(self) -> dict[str, Any]:
        """The protocol's checks for the report and the memory."""
        return {"name": self.name, "kind": self.kind, "observable": self.observable, "unit": self.unit,
                "threshold": self.threshold, "floor": self.floor, "z_min": self.z_min,
                "importance": self.importance, "application": self.application,
                "observables": [o.describe() for o in self.observables]}

    # ------------------------------------------------------------------ helpers
    def make_cell(self, region: dict[str, Any], values: dict[str, float], metrics: dict[str, dict[str, float]],
                  target: str, data: dict[str, Any] | None = None, variant: str = "screen",
                  threshold: float | None = None, floor: float | None = None, kind: str | None = None,
                  skip_reason: str | None = None, exclude: Mapping[str, str] | None = None) -> Cell:
        values = {k: (float(v) if v is not None and math.isfinite(float(v)) else float("nan"))
                  for k, v in values.items()}
        # committee sanity (docs/detective.md §3.5): a member that fails the protocol's own physical checks here is
        # no reference; ``exclude`` adds members found wanting elsewhere (the robustness probe's image check)
        excluded = {m: r for m in metrics if m != target and (r := self.sanity(metrics[m])) is not None}
        excluded.update({m: r for m, r in (exclude or {}).items() if m != target and m in metrics})
        judged = {m: (float("nan") if m in excluded else v) for m, v in values.items()}
        obs: dict[str, ObservableSignal] = {}
        for o in self.observables:
            vals = {m: (float("nan") if m in excluded else float(v.get(o.metric, float("nan"))))
                    for m, v in metrics.items()}
            obs[o.name] = judge(o, vals, target, self.z_min, skip_reason=skip_reason)
        if self.observables:
            sig = obs[self.observables[0].name].combined
        else:
            sig = classify(judged, target, self.threshold if threshold is None else threshold,
                           kind=kind or self.kind, floor=self.floor if floor is None else floor, z_min=self.z_min,
                           skip_reason=skip_reason)
        return Cell(protocol=self.name, key=self.key(region), region=dict(region), values=values, metrics=metrics,
                    signal=sig, data=data or {}, variant=variant, observables=obs, excluded=excluded)

    def rejudge(self, cell: Cell, target: str, exclude: Mapping[str, str]) -> Cell:
        """``cell`` judged again with the members of ``exclude`` taken out (their reasons recorded)."""
        merged = dict(cell.excluded)
        for m, r in exclude.items():  # every reason kept: a member can fail more than one check
            merged[m] = r if m not in merged or r in merged[m] else f"{merged[m]}; {r}"
        return self.make_cell(dict(cell.region), dict(cell.values), cell.metrics, target, cell.data, cell.variant,
                              exclude=merged)


# ============================================================================ dimers (§2.1)
@dataclasses.dataclass(frozen=True)
class DimerConfig:
    """Dimer scan settings (docs/detective.md §2.1).

    Attributes:
      r_start: first distance as a multiple of the covalent-radius sum: the physical floor of the scan (0.3; a
        real pair is tens of eV above its asymptote there, a screened-nuclear (ZBL) C–O repulsion is about 230 eV
        at 0.3 × 1.42 Å, so a wall must have risen; 0.4 before, where three collapses of nequix-mp-1 fell to the
        scan's first point and one model's collapse was missed entirely).
      r_end: last scanned distance in Å (6.0), raised to the largest committee cutoff + 0.5 Å and to
        ``r_tail`` + ``tail_window`` + 0.5 Å, at most ``r_cap``.
      r_cap: upper bound of the scan in Å (10).
      r_far: the dissociated reference E_∞ in Å (8.0, the paper's E(R) − E(8 Å)), raised to ``r_end`` + 1 Å.
      step: grid spacing in Å (0.05; the scope probe halves it).
      r_tail: where the tail fraction is read (4.5 Å, the paper's), raised per pair to 1.5 × the
        covalent-radius sum so that it stays well beyond the bond.
      tail_window: half-width in Å of the window around ``r_tail`` over which the decay length is fitted (0.5).
      tail_threshold: tail fractions above it are anomalous (0.08: the paper's committee keeps <= 4 %, the
        defect 9-17 %).
      floor: floor of the committee scale for z (0.01, i.e. 1 % of the well depth).
      z_min: z cut (3).
      barrier_threshold, barrier_floor, barrier_limit: the barrier above the asymptote (eV): relative anomaly
        threshold 0.02, z floor 0.01, absolute limit 0.05 (the seed paper's DFT reference rises 0.022 eV on the
        CO/Cu(111) path where the defective model rises 0.209 eV).
      well_threshold, well_floor, well_limit: the secondary well (eV): 0.01, 0.005, and 0.05 (2 kT at 300 K).
      collapse_threshold, collapse_floor, collapse_limit: the collapse of the wall (eV): 0.01, 0.01, 0.01 (exact:
        the wall must rise monotonically; 0.01 eV tolerates float32 round-off at hundreds of eV).
      mismatch_threshold, mismatch_floor, mismatch_limit: the force–energy mismatch (eV/Å): 0.01, 0.005, 0.05
        (exact: F = −dE/dR; the Simpson quadrature error of the check is < 1e-3 eV/Å at 0.1 Å steps).
      wall_height: eV above the asymptote that the wall's crest must reach inside the scan, and the cap below
        which force–energy consistency is checked (1.0).
      dip_threshold, dip_floor, dip_limit: a dip on the outer repulsive wall (eV): 0.02, 0.01, 0.1 (a physical
        criterion: a repulsive branch falls monotonically from the crest to the well; an avoided crossing can put
        a small shoulder there, so the limit is not the round-off floor).
      refine: evaluate a grid of a quarter step around every extremum of every model's curve (crest, inner
        minimum, well, barrier, secondary well, wall dip) and judge on the merged grid, so that no observable is
        read off a coarse grid point (docs/detective.md §2.1).
      max_binding: a committee member whose well is deeper than this (eV) is no reference for the cell (the
        strongest diatomic bond, CO, is 11.1 eV).
      offset: the grid starts this fraction of a step above the floor (0; a nuisance variant shifts it by half a
        step).
    """

    r_start: float = 0.3
    r_end: float = 6.0
    r_cap: float = 10.0
    r_far: float = 8.0
    step: float = 0.05
    r_tail: float = 4.5
    tail_window: float = 0.5
    tail_threshold: float = 0.08
    floor: float = 0.01
    z_min: float = 3.0
    barrier_threshold: float = 0.02
    barrier_floor: float = 0.01
    barrier_limit: float = 0.05
    well_threshold: float = 0.01
    well_floor: float = 0.005
    well_limit: float = 0.05
    collapse_threshold: float = 0.01
    collapse_floor: float = 0.01
    collapse_limit: float = 0.01
    mismatch_threshold: float = 0.01
    mismatch_floor: float = 0.005
    mismatch_limit: float = 0.05
    wall_height: float = WALL_HEIGHT
    dip_threshold: float = 0.02
    dip_floor: float = 0.01
    dip_limit: float = 0.1
    refine: bool = True
    max_binding: float = 12.0
    offset: float = 0.0


def dimer_observables(cfg: DimerConfig) -> tuple[Observable, ...]:
    """The dimer protocol's observables with the thresholds of ``cfg`` (docs/detective.md §2.1)."""
    return (
        Observable("tail_fraction", "tail_fraction", "1",
                   "share of the model's own well depth still bound at R_tail", cfg.tail_threshold, cfg.floor,
                   None, weight=1.0,
                   paper="Appendix C: SevenNet-Omni keeps 17 % (Sb₂), 11 % (Mo₂), 9 % (W₂) of its well depth at "
                         "4.5 Å, the committee at most 4 %; no absolute bound (a residual binding can be real)."),
        Observable("barrier", "barrier", "eV", "largest rise above the model's own dissociation asymptote beyond the "
                   "well", cfg.barrier_threshold, cfg.barrier_floor, cfg.barrier_limit, exact=False, weight=1.5,
                   paper="The headline finding: MACE-MPA-0 rises +0.22 eV (rigid scan), +0.209 eV (CI-NEB) above "
                         "the desorbed state of CO/Cu(111), DFT +0.022 eV, no committee model above its "
                         "asymptote; the paper asks for criteria on 'unphysical dissociation limits, barriers'."),
        Observable("secondary_well", "secondary_well", "eV", "deepest secondary well beyond the main one (a "
                   "non-monotonic attractive branch, extra force sign changes)", cfg.well_threshold,
                   cfg.well_floor, cfg.well_limit, exact=False, weight=1.0,
                   paper="The CO/Cu(111) path drops into a secondary well of −0.054 eV beyond its barrier; MLIP "
                         "Arena's diatomics metrics count force sign flips (reference-free, aggregated)."),
        Observable("collapse", "collapse", "eV", "fall of the energy at short range inside the wall's crest, or the "
                   "crest below the wall height", cfg.collapse_threshold, cfg.collapse_floor, cfg.collapse_limit,
                   exact=True, weight=1.5,
                   paper="'A repulsive wall at short range' is one of the eight constraints of the inspection "
                         "specification; the prototype run spent a probe on short-range repulsion."),
        Observable("wall_dip", "wall_dip", "eV", "largest rise met moving outward on the repulsive branch between "
                   "the wall's crest and the well (a dip on the outer wall)", cfg.dip_threshold, cfg.dip_floor,
                   cfg.dip_limit, exact=False, weight=1.2,
                   paper="'A repulsive wall at short range' (the specification's constraint); MLIP Arena's "
                         "diatomics metrics count energy sign changes of the slope, aggregated over the curve."),
        Observable("force_energy_mismatch", "force_energy_mismatch", "eV/Å", "largest |ΔE + ∫F·r̂ dR|/ΔR along the "
                   "scan (F = −dE/dR)", cfg.mismatch_threshold, cfg.mismatch_floor, cfg.mismatch_limit,
                   exact=True, weight=1.2,
                   paper="'Energy–force consistency (F = −∇E)' is the first constraint of the specification; the "
                         "paper names 'force–energy inconsistencies' among the relational failures a protocol "
                         "exposes, and skips the check for models conservative by construction."),
    )


def _rcov(sym: str) -> float:
    from ase.data import atomic_numbers, covalent_radii

    r = float(covalent_radii[atomic_numbers[sym]])
    return r if math.isfinite(r) and r > 0 else 0.75


def dimer_grid(a: str, b: str, cfg: DimerConfig, cutoff: float | None, step: float | None = None
               ) -> tuple[np.ndarray, float, float]:
    """(R grid ending with R_far, R_tail, R_far) in Å for the pair (a, b)."""
    rsum = _rcov(a) + _rcov(b)
    r_tail = max(cfg.r_tail, 1.5 * rsum)
    r_end = max(cfg.r_end, (cutoff or 0.0) + 0.5, r_tail + cfg.tail_window + 0.5)
    r_end = min(r_end, cfg.r_cap)
    r_far = max(cfg.r_far, r_end + 1.0)
    h = cfg.step if step is None else step
    R = np.arange(cfg.r_start * rsum + cfg.offset * h, r_end + 1e-9, h)
    return np.append(R, r_far), float(r_tail), float(r_far)


def dimer_structure(a: str, b: str, r: float, dtype: Any) -> Structure:
    """Two atoms on the x axis at distance ``r`` Å, no periodicity."""
    return Structure.create([[0.0, 0.0, 0.0], [r, 0.0, 0.0]], [a, b], pbc=False, dtype=dtype, min_distance=None)


def _spearman(x: np.ndarray, y: np.ndarray) -> float:
    if x.size < 3 or np.ptp(y) == 0:
        return float("nan")
    from scipy.stats import spearmanr

    return float(spearmanr(x, y).statistic)


_DIMER_KEYS = ("tail_fraction", "tail_decay_length", "conservation_deviation", "spearman_repulsive",
               "spearman_attractive", "tortuosity", "energy_jump", "force_flips", "well_depth", "r_min",
               "binding_at_tail", "r_asymptote", "barrier", "r_barrier", "secondary_well", "r_secondary_well",
               "collapse", "r_collapse", "wall_height", "force_energy_mismatch", "r_mismatch", "extra_force_flips",
               "wall_dip", "r_wall_dip", "r_crest", "floor_energy", "r_floor")


def dimer_metrics(R: np.ndarray, E: np.ndarray, Fr: np.ndarray | None, r_tail: float, tail_window: float,
                  wall: float = WALL_HEIGHT) -> dict[str, float]:
    r"""Curve metrics of one model's dimer scan (docs/detective.md §2.1).

    ``R`` (Å) ends with R_far; ``E`` (eV) the energies there; ``Fr`` the force on the second atom along the bond
    (eV/Å, positive = repulsive) or None.  With ΔE(R) = E(R) − E(R_far), the crest k_top (highest point: the
    wall) and the main well k_min (lowest point beyond the crest; :func:`~jaxcert.detective._observables.branches`)
    and D = −ΔE(R_min) (the model's own well depth):

    * ``tail_fraction`` = −ΔE(R_tail)/D (linear interpolation), 0 for an unbound curve (D <= 0);
    * ``barrier`` (eV): the largest rise above the asymptote beyond the well, at ``r_barrier``;
    * ``secondary_well`` (eV): the deepest fall below the asymptote-capped envelope beyond the well, at
      ``r_secondary_well`` (a non-monotonic attractive branch); ``extra_force_flips``: sign changes of F·r̂ beyond
      the well (|F| < 1e-3 eV/Å dropped; ideal 0);
    * ``collapse`` (eV): the fall of the energy inside the wall's crest, or how far the crest stays below
      ``wall`` eV above the asymptote (ideal 0), lowest inner point at ``r_collapse``; ``wall_height`` ΔE at the
      crest;
    * ``wall_dip`` (eV): the largest rise met moving outward between the crest and the well (a non-monotonic
      repulsive branch), its bottom at ``r_wall_dip``; ``r_crest`` the crest's position, ``floor_energy`` ΔE at
      the scan's first point ``r_floor`` (below 0: the curve ends below its dissociated energy);
    * ``force_energy_mismatch`` (eV/Å): the largest |ΔE + ∫F dR|/ΔR over double steps under ``wall`` eV
      (Simpson's rule; :func:`~jaxcert.detective._observables.force_energy_mismatch`), at ``r_mismatch``;
    * ``tail_decay_length``: −1/slope of ln(−ΔE) on [R_tail − w, R_tail + w] where −ΔE > 0 (NaN if < 3 points);
    * ``conservation_deviation`` = ⟨|F·r̂ + dE/dR|⟩ with dE/dR from central differences of the scan, over the points
      less than ``wall`` eV above the asymptote;
    * ``spearman_repulsive`` ρ(R, E) for R <= R_min (ideal −1) and ``spearman_attractive`` for R >= R_min (ideal
      +1);
    * ``tortuosity`` = Σ|ΔE_k| / (|E_0 − E_min| + |E_last − E_min|) (ideal 1);
    * ``energy_jump`` = Σ|ΔE_k| over steps where the slope changes sign, except at the main minimum (eV);
    * ``force_flips``: sign changes of F·r̂ (|F| < 1e-3 eV/Å dropped; ideal 1);
    * ``well_depth`` D (eV), ``r_min`` (Å), ``binding_at_tail`` −ΔE(R_tail) (eV).
    """
    R, E = np.asarray(R, float), np.asarray(E, float)
    out: dict[str, float] = {}
    ok = np.isfinite(E)
    if ok.sum() < 10 or not np.any(R[ok] > r_tail + tail_window):
        return {k: float("nan") for k in _DIMER_KEYS}
    if not ok[-1]:
        # the model refuses R_far (e.g. a graph network on atoms beyond its cutoff): its own asymptote is the
        # energy at the largest distance it evaluates (docs/detective.md §2.1)
        last = int(np.nonzero(ok)[0][-1])
        ok[last + 1:] = False
        R, E = np.append(R[:last][ok[:last]], R[last]), np.append(E[:last][ok[:last]], E[last])
        if Fr is not None:
            Fr = np.asarray(Fr, float)[: last + 1][ok[: last + 1]]
    elif not np.all(ok):
        keep = ok.copy()
        R, E = R[keep], E[keep]
        if Fr is not None:
            Fr = np.asarray(Fr, float)[keep]
    out["r_asymptote"] = float(R[-1])
    out["E_asymptote"] = float(E[-1])
    r, e = R[:-1], E[:-1] - E[-1]
    k_top, k_min = branches(e)
    D = -float(e[k_min])
    out["well_depth"] = D
    out["r_min"] = float(r[k_min])
    bind = -float(np.interp(r_tail, r, e))
    out["binding_at_tail"] = bind
    out["tail_fraction"] = bind / D if D > 1e-9 else 0.0
    out["barrier"], kb = barrier_above_asymptote(e, k_min)
    out["r_barrier"] = float(r[kb])
    out["secondary_well"], ks = secondary_well(e, k_min)
    out["r_secondary_well"] = float(r[ks])
    out["collapse"], kc = collapse(e, k_top, wall)
    out["r_collapse"] = float(r[kc])
    out["wall_height"] = float(e[k_top])
    out["r_crest"] = float(r[k_top])
    out["floor_energy"], out["r_floor"] = float(e[0]), float(r[0])
    out["wall_dip"], kd = wall_dip(e, k_top, k_min)
    out["r_wall_dip"] = float(r[kd])
    win = (r >= r_tail - tail_window) & (r <= r_tail + tail_window) & (-e > 1e-12)
    if win.sum() >= 3:
        slope = np.polyfit(r[win], np.log(-e[win]), 1)[0]
        out["tail_decay_length"] = float(-1.0 / slope) if slope < 0 else float("inf")
    else:
        out["tail_decay_length"] = float("nan")
    if Fr is not None and np.all(np.isfinite(Fr)):
        f = np.asarray(Fr, float)[:-1]
        dEdr = np.gradient(E[:-1], r)
        # below the wall height only: on the steep short-range wall the scan's central differences are
        # truncation-dominated (hundreds of eV/Å at 0.1 Å steps) and would read as a force–energy mismatch
        low = e <= wall
        out["conservation_deviation"] = float(np.mean(np.abs(f - (-dEdr))[low])) if low.any() else float("nan")
        s = np.sign(f[np.abs(f) > 1e-3])
        out["force_flips"] = float(np.sum(s[1:] != s[:-1]))
        fo = f[k_min + 1:]
        so = np.sign(fo[np.abs(fo) > 1e-3])
        out["extra_force_flips"] = float(np.sum(so[1:] != so[:-1]))
        out["force_energy_mismatch"], out["r_mismatch"] = force_energy_mismatch(r, e, f, k_top, wall)
    else:
        out["conservation_deviation"] = out["force_flips"] = out["extra_force_flips"] = float("nan")
        out["force_energy_mismatch"] = out["r_mismatch"] = float("nan")
    out["spearman_repulsive"] = _spearman(r[:k_min + 1], e[:k_min + 1])
    out["spearman_attractive"] = _spearman(r[k_min:], e[k_min:])
    d = np.diff(e)
    span = abs(e[0] - e[k_min]) + abs(e[-1] - e[k_min])
    out["tortuosity"] = float(np.sum(np.abs(d)) / span) if span > 0 else float("nan")
    sg = np.sign(d)
    flips = np.nonzero(sg[1:] * sg[:-1] < 0)[0] + 1
    out["energy_jump"] = float(sum(abs(d[k]) for k in flips if k != k_min))
    return out


class Dimers(Protocol):
    """Homo- and heteronuclear dimer scans (docs/detective.md §2.1).

    Observables (docs/detective.md §2.1), each judged on its own: the tail fraction (share of the model's own well
    depth still bound at R_tail; the primary one, ``Cell.values``), the barrier above the asymptote, a secondary
    well, the collapse of the short-range wall and the force–energy mismatch along the scan.  Regions: every
    unordered pair of the elements, homonuclear included.
    """

    name = "dimers"
    kind = "disagreement"
    importance = 0.4
    observable = "tail fraction: share of the model's own well depth still bound at R_tail"
    unit = "1"
    application = ("dilute gas-phase thermodynamics (dimerisation equilibria, nucleation onsets) and any simulation "
                   "sampling isolated pairs at mid range")

    def __init__(self, config: DimerConfig = DimerConfig()) -> None:
        self.config = config
        self.threshold = config.tail_threshold
        self.floor = config.floor
        self.z_min = config.z_min
        self.observables = dimer_observables(config)

    def key(self, region: Mapping[str, Any]) -> str:
        a, b = region["elements"]
        return pair_key(a, b)

    def regions(self, elements: Sequence[str], committee: Any) -> list[dict[str, Any]]:
        els = [e for e in elements if supported(committee.target, [e])]
        return [{"elements": list(p)} for p in itertools.combinations_with_replacement(els, 2)]

    def _grid(self, committee: Any, a: str, b: str, variant: str) -> tuple[np.ndarray, float, float]:
        cut = committee.cutoff(dimer_structure(a, b, 3.0, committee.dtype))
        step = self.config.step / 2 if variant == "fine" else None
        return dimer_grid(a, b, self.config, cut, step)

    def run(self, committee: Any, regions: Sequence[dict[str, Any]], variant: str = "screen") -> list[Cell]:
        grids, structs, spans = [], [], []
        for reg in regions:
            a, b = reg["elements"]
            R, r_tail, r_far = self._grid(committee, a, b, variant)
            grids.append((R, r_tail, r_far))
            k0 = len(structs)
            structs.extend(dimer_structure(a, b, float(r), committee.dtype) for r in R)
            spans.append((k0, len(structs)))
        E, F = committee.energies_forces(structs)
        curves = []
        for (R, _, _), (k0, k1) in zip(grids, spans, strict=True):
            e = E[:, k0:k1]
            fr = np.array([[F[mi][k][1, 0] if F[mi][k] is not None else np.nan for k in range(k0, k1)]
                           for mi in range(len(committee.names))])
            curves.append((R, e, fr))
        if self.config.refine:
            curves = self._refined(committee, regions, grids, curves)
        cells = []
        for reg, (_, r_tail, _), (R, e_all, f_all) in zip(regions, grids, curves, strict=True):
            values, metrics, ys = {}, {}, {}
            for mi, name in enumerate(committee.names):
                e = e_all[mi]
                m = dimer_metrics(R, e, f_all[mi], r_tail, self.config.tail_window, self.config.wall_height)
                m["r_tail"] = r_tail
                metrics[name] = m
                values[name] = m["tail_fraction"]
                e_inf = m.get("E_asymptote", float("nan"))
                ys[name] = (e[:-1] - e_inf).tolist() if math.isfinite(e_inf) else []
            data = {"x": R[:-1].tolist(), "y": ys, "xlabel": "R (Å)", "ylabel": f"E(R) − E({R[-1]:.1f} Å) (eV)",
                    "marks": {"R_tail": r_tail}}
            cells.append(self.make_cell(dict(reg), values, metrics, committee.target_name, data, variant))
        return cells

    def _refined(self, committee: Any, regions: Sequence[dict[str, Any]], grids: Sequence[tuple],
                 curves: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> list[tuple]:
        """Each curve with a quarter-step grid added around every extremum of every model's curve (crest, inner
        minimum, well, barrier top, secondary well, wall dip), the same points for every model; the merged grid
        keeps R_far last (docs/detective.md §2.1)."""
        extra: list[np.ndarray] = []
        structs = []
        for reg, (_, r_tail, _), (R, e_all, f_all) in zip(regions, grids, curves, strict=True):
            h = float(R[1] - R[0]) if len(R) > 2 else self.config.step
            lo, hi = float(R[0]), float(R[-2])
            at: set[float] = set()
            for mi in range(e_all.shape[0]):
                m = dimer_metrics(R, e_all[mi], f_all[mi], r_tail, self.config.tail_window, self.config.wall_height)
                for key, gate in (("r_crest", None), ("r_collapse", "collapse"), ("r_min", None),
                                  ("r_barrier", "barrier"), ("r_secondary_well", "secondary_well"),
                                  ("r_wall_dip", "wall_dip")):
                    r0 = m.get(key, float("nan"))
                    if math.isfinite(r0) and (gate is None or m.get(gate, 0.0) > 0.0):
                        at.add(round(r0, 6))
            pts = sorted({round(r0 + j * h / 4.0, 6) for r0 in at for j in (-3, -2, -1, 1, 2, 3)
                          if lo <= r0 + j * h / 4.0 <= hi} - {round(float(x), 6) for x in R})
            extra.append(np.asarray(pts, float))
            a, b = reg["elements"]
            structs.extend(dimer_structure(a, b, float(r), committee.dtype) for r in pts)
        if not structs:
            return list(curves)
        E, F = committee.energies_forces(structs)
        out, k = [], 0
        for (R, e_all, f_all), pts in zip(curves, extra, strict=True):
            n = len(pts)
            e_x = E[:, k:k + n]
            f_x = np.array([[F[mi][j][1, 0] if F[mi][j] is not None else np.nan for j in range(k, k + n)]
                            for mi in range(E.shape[0])]).reshape(E.shape[0], n)
            k += n
            r = np.concatenate([R[:-1], pts])
            order = np.argsort(r, kind="stable")
            out.append((np.append(r[order], R[-1]),
                        np.concatenate([np.concatenate([e_all[:, :-1], e_x], 1)[:, order], e_all[:, -1:]], 1),
                        np.concatenate([np.concatenate([f_all[:, :-1], f_x], 1)[:, order], f_all[:, -1:]], 1)))
        return out

    def sanity(self, metrics: Mapping[str, float]) -> str | None:
        """A committee member is a reference for a dimer cell only when its own curve is physical there
        (docs/detective.md §3.5): finite, a repulsive wall (no collapse, the crest at least ``wall_height`` eV up,
        no dip on the outer wall beyond its limit) and a well no deeper than ``max_binding``."""
        c = self.config
        if not math.isfinite(metrics.get("well_depth", float("nan"))):
            return "its curve is not finite (or it refuses the pair)"
        if metrics.get("collapse", 0.0) > c.collapse_limit:
            return (f"its own short-range wall collapses ({metrics['collapse']:.3g} eV at "
                    f"{metrics.get('r_collapse', float('nan')):.2f} Å)")
        if metrics.get("wall_dip", 0.0) > c.dip_limit:
            return (f"its own repulsive wall dips ({metrics['wall_dip']:.3g} eV at "
                    f"{metrics.get('r_wall_dip', float('nan')):.2f} Å)")
        if metrics["well_depth"] > c.max_binding:
            return f"its well is {metrics['well_depth']:.3g} eV deep (> {c.max_binding:g} eV, deeper than any diatomic)"
        return None

    def variants(self) -> list[Variant]:
        """Scan range and step (docs/detective.md §4.6): a finer step and a shifted grid (the observables must not
        depend on where the grid points fall), a deeper floor and a farther asymptote (convergence variables)."""
        c = self.config
        return [Variant("step ×0.6", "grid step", True, {"step": round(c.step * 0.6, 6)}),
                Variant("grid shifted by half a step", "grid offset", True, {"offset": 0.5}),
                Variant("floor 0.25×", "scan floor", True, {"r_start": max(c.r_start - 0.05, 0.1)}),
                Variant("asymptote +2 Å", "asymptote", True, {"r_far": c.r_far + 2.0})]

    def not_varied(self) -> list[str]:
        return ["two atoms in vacuum, no spin state chosen (an MLIP has none; DFT of transition-metal dimers needs "
                "one, often beyond single-reference DFT)",
                "no reference calculation (DFT) was run; the verdict is a human's"]

    def scope_of(self, cells: Sequence[Cell]) -> dict[str, Any]:
        els: set[str] = set()
        for c in cells:
            els.update(c.region["elements"])
        from ase.data import atomic_numbers

        return {"elements": sorted(els, key=lambda s: atomic_numbers[s]),
                "pairs": sorted({c.key for c in cells})}

    def in_scope(self, region: Mapping[str, Any], scope: Mapping[str, Any]) -> bool:
        return all(e in scope["elements"] for e in region["elements"])

    def neighbourhood(self, scope: Mapping[str, Any], elements: Sequence[str], committee: Any) -> list[dict]:
        els = [e for e in elements if supported(committee.target, [e])]
        regs = [{"elements": list(p)} for p in itertools.combinations_with_replacement(els, 2)
                if any(x in scope["elements"] for x in p)]
        return regs

    def statement(self, scope: Mapping[str, Any], observable: str | None = None) -> str:
        els = ", ".join(scope["elements"])
        c = self.config
        if observable == "barrier":
            return (f"the target's dimer curves of {els} rise above their own dissociation asymptote beyond the well "
                    f"(a spurious barrier, > {c.barrier_threshold:g} eV; physical limit {c.barrier_limit:g} eV) where "
                    "the committee rises monotonically, and nowhere else")
        if observable == "secondary_well":
            return (f"the target's dimer curves of {els} turn down again beyond the well into a secondary well "
                    f"(> {c.well_threshold:g} eV below the envelope) that the committee lacks, and nowhere else")
        if observable == "collapse":
            return (f"the target's short-range wall collapses in dimers of {els} (the energy falls as the atoms "
                    f"approach, or never rises {c.wall_height:g} eV above the asymptote), and nowhere else")
        if observable == "wall_dip":
            return (f"the target's repulsive wall in dimers of {els} is not monotonic: moving out from the crest the "
                    f"energy dips and rises again (> {c.dip_threshold:g} eV) where the committee's falls "
                    "monotonically to the well, and nowhere else")
        if observable == "force_energy_mismatch":
            return (f"the target's forces are not −dE/dR along dimer scans of {els} (mismatch > "
                    f"{c.mismatch_limit:g} eV/Å), and nowhere else")
        return (f"the target keeps a spurious mid-range attraction in dimers of {els} "
                f"(tail fraction > {self.threshold:g} at R_tail, the committee far lower), and nowhere else")

    def configurations(self, region: Mapping[str, Any], committee: Any, cell: Cell | None = None
                       ) -> list[tuple[str, Any]]:
        a, b = region["elements"]
        R, r_tail, r_far = self._grid(committee, a, b, "screen")
        r_min = 2.0 * (_rcov(a) + _rcov(b)) / 2.0
        if cell is not None:
            tm = cell.metrics.get(committee.target_name, {})
            r_min = float(tm.get("r_min", r_min)) if math.isfinite(tm.get("r_min", float("nan"))) else r_min
        pts = [("r_min", r_min), ("tail-0.5", r_tail - 0.5), ("tail", r_tail), ("tail+0.5", r_tail + 0.5),
               ("far", r_far)]
        if cell is not None:  # the points where the other observables fired (barrier top, secondary well, ...)
            tm = cell.metrics.get(committee.target_name, {})
            for obs, at in _WHERE.items():
                if cell.suspicious_in(obs) and math.isfinite(tm.get(at, float("nan"))):
                    pts.insert(-1, (obs, float(tm[at])))
        return [(f"{pair_key(a, b)}_{lab}_{r:.2f}A", dimer_structure(a, b, r, np.float64).to_ase()) for lab, r in pts]

    def mechanism(self, committee: Any, scope: Mapping[str, Any], cells: Sequence[Cell],
                  observable: str | None = None) -> dict[str, Any]:
        """Mechanism probe (docs/detective.md §2.1): for the tail, is it in the energy (forces consistent) and how
        long is its decay; for the other observables, where on the curve it sits and what the forces do there."""
        if observable not in (None, "tail_fraction"):
            return _dimer_shape_mechanism(self, committee, scope, cells, observable)
        t = committee.target_name
        inside = [c for c in cells if self.in_scope(c.region, scope)]
        cons = [c.metrics[t].get("conservation_deviation", float("nan")) for c in inside]
        lam_t = [c.metrics[t].get("tail_decay_length", float("nan")) for c in inside]
        lam_c = [max((c.metrics[m].get("tail_decay_length", float("nan")) for m in committee.names[1:]
                      if math.isfinite(c.metrics[m].get("tail_decay_length", float("nan")))), default=float("nan"))
                 for c in inside]
        fmax_cons = float(np.nanmax(cons)) if cons and np.any(np.isfinite(cons)) else float("nan")
        force_consistent = math.isfinite(fmax_cons) and fmax_cons < 0.05
        parts = []
        for c, lt, lc in zip(inside, lam_t, lam_c, strict=True):
            parts.append(f"{c.key}: decay length {lt:.2f} Å (target) vs {lc:.2f} Å (longest in the committee)")
        summary = ("The tail is in the energy itself: forces stay consistent with the scanned energy "
                   f"(⟨|F·r̂ + dE/dR|⟩ <= {fmax_cons:.2g} eV/Å, finite-difference floor), so it is not a force "
                   "artefact. " if force_consistent else
                   f"Forces and energy disagree along the scan (⟨|F·r̂ + dE/dR|⟩ up to {fmax_cons:.2g} eV/Å). ")
        summary += "Fitted tail decay lengths: " + "; ".join(parts) + "."
        confounds = []
        if force_consistent:
            confounds.append("force–energy inconsistency: excluded (conservation deviation at the finite-difference "
                             "floor on every in-scope curve)")
        confounds.append("grid resolution: excluded (the scope probe repeats every scan at half the step)")
        return {"summary": summary, "numbers": {"max_conservation_deviation": fmax_cons,
                                                 "tail_decay_length_target": dict(zip([c.key for c in inside], lam_t,
                                                                                      strict=True)),
                                                 "tail_decay_length_committee_max": dict(
                                                     zip([c.key for c in inside], lam_c, strict=True))},
                "confounds": confounds}

    def impact(self, committee: Any, scope: Mapping[str, Any], cells: Sequence[Cell],
               observable: str | None = None) -> dict[str, Any]:
        """Gas-phase weight of the residual binding (kT at 1200 K) and the bulk check: does the tail change the
        reference crystal's energy per atom beyond the committee spread?  Other observables: their own
        application weight (docs/detective.md §2.1) and the same bulk check as the domain boundary."""
        from ase.units import kB

        if observable not in (None, "tail_fraction"):
            return _dimer_shape_impact(self, committee, scope, cells, observable)
        t = committee.target_name
        kT = kB * 1200.0
        inside = [c for c in cells if self.in_scope(c.region, scope)]
        gas = {c.key: c.metrics[t].get("binding_at_tail", float("nan")) / kT for c in inside}
        n0 = committee.n_evals
        bulk = _bulk_check(committee, scope["elements"])
        in_spread = [el for el, b in bulk.items() if math.isfinite(b["z"]) and abs(b["z"]) < 3.0]
        worst = max(gas.items(), key=lambda kv: kv[1] if math.isfinite(kv[1]) else -1, default=("", float("nan")))
        summary = (f"At R_tail the target still binds {worst[0]} by {worst[1]:.1f} kT at 1200 K, which distorts "
                   "pair-association weights by a factor of about e^(that) in dilute gas-phase thermodynamics. ")
        if bulk:
            summary += ("Bulk check (energy per atom to expand the reference crystal by 10 %, target vs committee): "
                        + "; ".join(
                f"{el}: z = {b['z']:.1f}" for el, b in bulk.items()) + ".")
        boundary = (("Where it does not matter: in the bulk crystal of " + ", ".join(in_spread) +
                     " the expansion energy stays within the committee spread (|z| < 3), so condensed-phase "
                     "simulations of these elements are not visibly affected.") if in_spread else
                    "No domain boundary found among the reference crystals: the tail also shifts bulk energies "
                    "beyond the committee spread.")
        return {"summary": summary, "boundary": boundary, "numbers": {"binding_at_tail_over_kT_1200K": gas,
                                                                       "bulk": bulk},
                "evals": committee.n_evals - n0}


def _bulk_check(committee: Any, elements: Sequence[str]) -> dict[str, dict[str, float]]:
    """Energy per atom to expand each element's reference crystal by 10 %, target vs committee robust z
    (an energy difference, so each model's energy referencing cancels; docs/detective.md §2.1)."""
    from jaxcert.core.elements import reference_crystal
    from jaxcert.detective._signals import robust_z

    structs, labels = [], []
    for el in elements:
        atoms = reference_crystal(el)
        if atoms is None:
            continue
        big = atoms.copy()
        big.set_cell(atoms.get_cell() * 1.1, scale_atoms=True)
        structs += [Structure.from_ase(a, dtype=committee.dtype) for a in (atoms, big)]
        labels.append(el)
    bulk: dict[str, dict[str, float]] = {}
    if structs:
        E = committee.energies(structs)
        for k, el in enumerate(labels):
            n_at = int(np.sum(np.asarray(structs[2 * k].mask)))
            e = (E[:, 2 * k + 1] - E[:, 2 * k]) / n_at  # reference-free: the energy referencing cancels
            z, med, _ = robust_z(float(e[0]), [float(v) for v in e[1:]], floor=0.02)
            bulk[el] = {"expansion_energy_per_atom_target": float(e[0]), "committee_median": med, "z": z}
    return bulk


#: metric holding the position (Å) of each shape observable on the target's curve.
_WHERE = {"barrier": "r_barrier", "secondary_well": "r_secondary_well", "collapse": "r_collapse",
          "force_energy_mismatch": "r_mismatch", "wall_dip": "r_wall_dip"}


def _dimer_shape_mechanism(p: Dimers, committee: Any, scope: Mapping[str, Any], cells: Sequence[Cell],
                           observable: str) -> dict[str, Any]:
    """Mechanism probe for the shape observables (docs/detective.md §2.1): where on the target's curve the anomaly
    sits, its size against the committee's largest, and whether the forces agree with the energy there (a shape
    in the energy itself, or an artefact of the force head)."""
    o = p.observable_named(observable)
    t = committee.target_name
    inside = [c for c in cells if p.in_scope(c.region, scope) and c.suspicious_in(observable)]
    rows, numbers = [], {}
    for c in inside:
        m = c.metrics[t]
        com = [c.metrics[n].get(o.metric, float("nan")) for n in committee.names[1:]]
        com_max = max((v for v in com if math.isfinite(v)), default=float("nan"))
        rows.append(f"{c.key}: {m.get(o.metric, float('nan')):.3g} {o.unit} at R ≈ {m.get(_WHERE[observable]):.2f} Å "
                    f"(committee at most {com_max:.3g}); well {m.get('well_depth', float('nan')):.3g} eV at "
                    f"{m.get('r_min', float('nan')):.2f} Å; extra force sign changes beyond the well "
                    f"{m.get('extra_force_flips', float('nan')):.0f}; force–energy mismatch "
                    f"{m.get('force_energy_mismatch', float('nan')):.2g} eV/Å")
        numbers[c.key] = {"value": m.get(o.metric), "where": m.get(_WHERE[observable]), "committee_max": com_max,
                          "force_energy_mismatch": m.get("force_energy_mismatch"),
                          "extra_force_flips": m.get("extra_force_flips"), "wall_height": m.get("wall_height")}
    mis = [c.metrics[t].get("force_energy_mismatch", float("nan")) for c in inside]
    worst = float(np.nanmax(mis)) if mis and np.any(np.isfinite(mis)) else float("nan")
    confounds = ["grid resolution: excluded (the scope probe repeats every scan at half the step)"]
    if observable == "force_energy_mismatch":
        summary = ("The forces along the bond are not the derivative of the energy: the work of the forces over a "
                   "double step differs from the energy change (Simpson's rule, quadrature error < 1e-3 eV/Å). A "
                   "direct force head or a broken gradient path is the likely cause; the energy curve itself is "
                   "judged separately. ")
    else:
        ok = math.isfinite(worst) and worst < p.config.mismatch_limit
        summary = ("The anomaly is in the energy itself: forces agree with −dE/dR on every in-scope curve "
                   f"(mismatch <= {worst:.2g} eV/Å). " if ok else
                   f"Forces and energy also disagree on these curves (mismatch up to {worst:.2g} eV/Å). ")
        if ok:
            confounds.insert(0, "force–energy inconsistency: excluded (the forces integrate to the energy along "
                                "every in-scope curve)")
    summary += "Where: " + ("; ".join(rows) or "no in-scope anomaly") + "."
    return {"summary": summary, "numbers": {"observable": observable, "cells": numbers,
                                            "max_force_energy_mismatch": worst}, "confounds": confounds}


def _dimer_shape_impact(p: Dimers, committee: Any, scope: Mapping[str, Any], cells: Sequence[Cell],
                        observable: str) -> dict[str, Any]:
    """Impact probe for the shape observables (docs/detective.md §2.1): the anomaly's weight in the application
    it breaks, with the bulk check (energy to expand the reference crystal by 10 %) as the domain boundary."""
    from ase.units import kB

    o = p.observable_named(observable)
    t = committee.target_name
    inside = [c for c in cells if p.in_scope(c.region, scope) and c.suspicious_in(observable)]
    vals = {c.key: float(c.metrics[t].get(o.metric, float("nan"))) for c in inside}
    n0 = committee.n_evals
    bulk = _bulk_check(committee, scope["elements"])
    if observable == "barrier":
        kT = kB * 300.0
        w = {k: math.exp(-v / kT) for k, v in vals.items()}
        summary = ("Pair association over the spurious barrier is slowed by the Arrhenius factor e^(−ΔE/kT) at "
                   "300 K: " + "; ".join(f"{k}: ×{x:.2g}" for k, x in w.items()) + " (the barrier height ΔE alone: "
                   "no prefactor, entropy or zero-point term; gas-phase dimerisation, cluster nucleation and every "
                   "collision that crosses the barrier's distance).")
        numbers: dict[str, Any] = {"arrhenius_factor_300K": w}
    elif observable == "secondary_well":
        kT = kB * 300.0
        w = {k: v / kT for k, v in vals.items()}
        summary = ("A spurious metastable pair state: the secondary well is " + "; ".join(
            f"{k}: {x:.1f} kT" for k, x in w.items()) + " deep at 300 K, enough to trap pairs in MD at mid range.")
        numbers = {"secondary_well_over_kT_300K": w}
    elif observable == "collapse":
        kT = kB * 3000.0
        w = {k: v / kT for k, v in vals.items()}
        summary = ("Atoms that approach closer than the wall's crest fall into the hole: the collapse is " +
                   "; ".join(f"{k}: {x:.1f} kT" for k, x in w.items()) + " at 3000 K; high-temperature MD, "
                   "radiation damage and high-pressure runs can reach it and never come back.")
        numbers = {"collapse_over_kT_3000K": w}
    elif observable == "wall_dip":
        kT = kB * 3000.0
        w = {k: v / kT for k, v in vals.items()}
        summary = ("A pocket on the repulsive wall traps colliding pairs at short range: the dip is " + "; ".join(
            f"{k}: {x:.1f} kT" for k, x in w.items()) + " at 3000 K (high-temperature MD, sputtering and radiation "
            "damage reach the wall).")
        numbers = {"wall_dip_over_kT_3000K": w}
    else:
        summary = ("Forces that are not −∇E do work around closed paths: NVE energy drifts and relaxations stop "
                   "where the force, not the energy, vanishes; largest mismatch " + "; ".join(
                       f"{k}: {v:.2g} eV/Å" for k, v in vals.items()) + ".")
        numbers = {"force_energy_mismatch": vals}
    in_spread = [el for el, b in bulk.items() if math.isfinite(b["z"]) and abs(b["z"]) < 3.0]
    summary += (" Bulk check (energy per atom to expand the reference crystal by 10 %, target vs committee): "
                + "; ".join(f"{el}: z = {b['z']:.1f}" for el, b in bulk.items()) + ".") if bulk else ""
    if observable == "force_energy_mismatch":
        boundary = ("Where it does not matter: single-point energies and anything computed from energies alone "
                    "(formation energies, energy-based screening) are untouched; only force-driven simulations see "
                    "it.")
    elif in_spread:
        boundary = ("Where it does not matter: in the bulk crystal of " + ", ".join(in_spread) + " the expansion "
                    "energy stays within the committee spread (|z| < 3), so near-equilibrium condensed-phase "
                    "simulations of these elements are not visibly affected.")
    else:
        boundary = ("No domain boundary found among the reference crystals: the anomaly also shifts bulk energies "
                    "beyond the committee spread.")
    numbers["bulk"] = bulk
    return {"summary": summary, "boundary": boundary, "numbers": numbers, "evals": committee.n_evals - n0}
