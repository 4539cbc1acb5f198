r"""Losses from findings: differentiable scalars of a model's parameters (docs/research.md §3).

Every loss is a :class:`Loss`: ``loss(params)`` is a JAX scalar, dimensionless (each violation divided by a
tolerance in its own unit, squared, averaged), zero when the model satisfies what the loss asks, and
differentiable with ``jax.grad`` (the structures are fixed: only the parameters are traced).

* :func:`wall_loss` — a dimer's short-range wall (docs/detective.md §2.1): from the scan's floor to the well the
  energy must fall monotonically as the atoms separate (no collapse, no dip on the outer wall), and it must not
  lie below the physical floor ½·E_ZBL(r) − 12 eV (:func:`jaxcert.repair._floor.wall_floor`);
* :func:`barrier_loss` — a path whose energies beyond its minimum must not rise above its own asymptote (a
  rigid desorption scan, docs/detective.md §2.2);
* :func:`probe_loss` — a certification probe's defect (docs/probes.md), divided by its gate;
* :func:`anchor_loss` — self-distillation: the energies and forces of the original model on a reference set of
  structures (no DFT): a repair must not move the model elsewhere;
* :func:`from_escalation` — the losses an ``escalation.json`` of ``jaxcert investigate`` names.
"""

from __future__ import annotations

import dataclasses
import json
import os
import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxcert.core.model import Model
from jaxcert.core.structure import Structure, stack
from jaxcert.repair._floor import wall_floor

__all__ = ["Loss", "Batch", "wall_loss", "barrier_loss", "desorption_loss", "probe_loss", "anchor_loss",
           "from_escalation",
           "WALL_TOL", "FLOOR_TOL", "BARRIER_TOL"]

#: eV: the monotonic-wall violation that counts as one unit of loss (the collapse limit of the detective).
WALL_TOL = 0.01
#: eV: a rise moving outward smaller than this costs nothing (float32 round-off on a dimer is ~1e-5 eV).
WALL_SLACK = 1e-3
#: eV: a wall 1 eV below its floor is one unit of loss.
FLOOR_TOL = 1.0
#: eV: a rise of 0.05 eV above the asymptote is one unit of loss (the detective's relative threshold).
BARRIER_TOL = 0.05


@dataclasses.dataclass(frozen=True)
class Loss:
    """A differentiable scalar of the model parameters.

    Attributes:
      name: what it measures (``"wall C-O"``, ``"barrier Mo(110)/CO"``, ``"anchor"``, ``"probe betti Si"``).
      kind: ``"wall"``, ``"barrier"``, ``"probe"`` or ``"anchor"``.
      fn: ``params -> scalar`` (dimensionless, >= 0; 0 where the model does what the loss asks).
      weight: its weight in the repair objective.
      info: what it was built from (the structures' labels, tolerances, the finding), for the report.
      report: ``params -> dict`` of physical numbers (eV, Å) for the report, or None.
    """

    name: str
    kind: str
    fn: Callable[[Any], jax.Array]
    weight: float = 1.0
    info: dict[str, Any] = dataclasses.field(default_factory=dict)
    report: Callable[[Any], dict[str, Any]] | None = None

    def __call__(self, params: Any) -> jax.Array:
        return self.fn(params)

    def with_weight(self, weight: float) -> Loss:
        return dataclasses.replace(self, weight=float(weight))


class Batch:
    """Fixed structures, grouped by periodicity and size and stacked, prepared once for ``model`` (edge lists,
    images): :meth:`energies` and :meth:`energies_forces` are pure functions of the parameters, in the input
    order.

    Structures of one periodicity and one atom count form one vmapped group: padding a dimer to the size of a
    16-atom molecule would spend 8× the work on padding atoms, and a repair evaluates its batches thousands of
    times (docs/research.md §3.3)."""

    def __init__(self, model: Model, structures: Sequence[Structure]) -> None:
        self.model = model
        self.n = len(structures)
        self.n_atoms = np.array([s.n_atoms for s in structures])
        groups: dict[Any, list[int]] = {}
        for i, s in enumerate(structures):
            groups.setdefault((s.pbc, s.n_atoms), []).append(i)
        self.groups = [(idx, model.prepare(stack([structures[i] for i in idx]))) for idx in groups.values()]
        order = np.concatenate([np.asarray(idx) for idx, _ in self.groups])
        self.inverse = np.argsort(order)
        # compiled once each (eager op-by-op dispatch of a vmapped model is slow on CPU); inside a traced loss
        # they inline
        self.energies = jax.jit(self._energies)
        self.energies_forces = jax.jit(self._energies_forces)

    def _energies(self, params: Any) -> jax.Array:
        """(n,) eV."""
        parts = [jax.vmap(lambda s: self.model.energy_of(params, s))(b) for _, b in self.groups]
        return jnp.concatenate(parts)[self.inverse]

    def _energies_forces(self, params: Any) -> tuple[jax.Array, list[jax.Array]]:
        """((n,) eV, per structure (n_atoms, 3) eV/Å), one reverse pass per group."""
        es, fs = [], [None] * self.n
        for idx, b in self.groups:
            e, f = jax.vmap(lambda s: self.model.energy_and_forces_of(params, s))(b)
            es.append(e)
            for k, i in enumerate(idx):
                fs[i] = f[k, : int(self.n_atoms[i])]
        return jnp.concatenate(es)[self.inverse], fs


def _relu(x: jax.Array) -> jax.Array:
    return jnp.maximum(x, 0.0)


def wall_loss(model: Model, a: str, b: str, *, r_floor: float = 0.3, r_end: float | None = None, step: float = 0.02,
              r_far: float = 8.0, dtype: Any = None, weight: float = 1.0) -> Loss:
    r"""The short-range wall of the dimer (a, b) as a loss.

    On the grid r_k = ``r_floor``·(r_cov,a + r_cov,b) … ``r_end`` in steps of ``step`` Å, with
    e_k = E(r_k) − E(``r_far``):

    .. math::  L = \langle \mathrm{relu}(e_{k+1} - e_k - s)^2 \rangle / \mathrm{tol_w}^2
                 + \langle [f_k > 0]\,\mathrm{relu}(f_k - e_k)^2 \rangle / \mathrm{tol_f}^2,

    f the physical floor ½·E_ZBL − 12 eV where it is positive (:func:`~jaxcert.repair._floor.wall_floor`),
    s = 1 meV of slack (far above float32 round-off on a dimer, far below any wall), tol_w = 0.01 eV
    (:data:`WALL_TOL`), tol_f = 1 eV (:data:`FLOOR_TOL`).  ``r_end`` (default): the last grid point before the
    *original* model's well, the lowest point beyond its crest on a scan out to 1.6 × the covalent-radius sum
    (so the repulsive branch only: beyond the well a curve rises by right).  Zero for a wall that falls
    monotonically to the well and stays above the floor; a collapse, a dip on the outer wall or a wall too soft
    all cost.
    """
    from ase.data import atomic_numbers

    from jaxcert.detective._protocols import _rcov, dimer_structure

    dtype = dtype or jnp.zeros(()).dtype
    rsum = _rcov(a) + _rcov(b)
    r = np.arange(r_floor * rsum, (1.6 * rsum if r_end is None else float(r_end)) + 1e-9, step)
    if r_end is None:  # the repulsive branch of the original model: up to its well
        scan = Batch(model, [dimer_structure(a, b, float(x), dtype) for x in r] +
                     [dimer_structure(a, b, r_far, dtype)])
        e0 = np.asarray(scan.energies(model.params), np.float64)
        e0 = e0[:-1] - e0[-1]
        top = int(np.nanargmax(e0))
        well = top + int(np.nanargmin(e0[top:]))
        r = r[: max(well, top + 2)]
    batch = Batch(model, [dimer_structure(a, b, float(x), dtype) for x in r] + [dimer_structure(a, b, r_far, dtype)])
    f = np.asarray(wall_floor(atomic_numbers[a], atomic_numbers[b], r), np.float64)
    floor = jnp.asarray(f, dtype)
    active = jnp.asarray(f > 0.0)

    def curve(params: Any) -> jax.Array:
        E = batch.energies(params)
        return E[:-1] - E[-1]

    def fn(params: Any) -> jax.Array:
        e = curve(params)
        rise = _relu(e[1:] - e[:-1] - WALL_SLACK) / WALL_TOL
        below = jnp.where(active, _relu(floor - e), 0.0) / FLOOR_TOL
        return jnp.mean(rise**2) + jnp.mean(below**2)

    def report(params: Any) -> dict[str, Any]:
        e = np.asarray(curve(params), np.float64)
        rise = np.maximum(np.diff(e), 0.0)
        below = np.where(f > 0.0, np.maximum(f - e, 0.0), 0.0)
        top = int(np.argmax(e))
        return {"largest_rise_outward_eV": float(rise.max(initial=0.0)), "rises": int(np.sum(rise > WALL_TOL)),
                "largest_shortfall_below_floor_eV": float(below.max(initial=0.0)),
                "crest_eV": float(e[top]), "r_crest_A": float(r[top]), "floor_energy_eV": float(e[0]),
                "monotonic": bool(np.all(rise <= WALL_TOL)), "above_floor": bool(np.all(below <= 0.0)),
                "r_to_A": float(r[-1])}

    key = "-".join(sorted((a, b), key=lambda s: (atomic_numbers[s], s)))
    return Loss(name=f"wall {key}", kind="wall", fn=fn, weight=weight, report=report,
                info={"pair": [a, b], "r_from": float(r[0]), "r_to": float(r[-1]), "step": step, "r_far": r_far,
                      "tolerances": {"wall_eV": WALL_TOL, "floor_eV": FLOOR_TOL}})


def barrier_loss(model: Model, path: Sequence[Structure], far: Structure, *, name: str = "barrier",
                 start: int = 0, weight: float = 1.0, info: Mapping[str, Any] | None = None,
                 x: Sequence[float] | None = None) -> Loss:
    r"""A path whose energies from index ``start`` on must stay at or below its own asymptote E(``far``):
    L = ⟨relu(E_k − E_far)²⟩ / tol², tol = 0.05 eV (:data:`BARRIER_TOL`)."""
    batch = Batch(model, list(path[start:]) + [far])

    def rel(params: Any) -> jax.Array:
        E = batch.energies(params)
        return E[:-1] - E[-1]

    def fn(params: Any) -> jax.Array:
        return jnp.mean((_relu(rel(params)) / BARRIER_TOL) ** 2)

    def report(params: Any) -> dict[str, Any]:
        e = np.asarray(rel(params), np.float64)
        k = int(np.argmax(e))
        out = {"rise_above_asymptote_eV": float(max(e[k], 0.0))}
        if x is not None:
            out["at"] = float(list(x)[start + k])
        return out

    return Loss(name=name, kind="barrier", fn=fn, weight=weight, report=report,
                info={"points": len(path) - start, "tolerance_eV": BARRIER_TOL, **dict(info or {})})


def desorption_loss(model: Model, metal: str, adsorbate: str, config: Mapping[str, Any] | None = None,
                    weight: float = 1.0, margin: float | None = 0.5) -> Loss:
    """:func:`barrier_loss` on the rigid desorption scan of ``adsorbate`` from ``metal`` (docs/detective.md §2.2,
    the protocol's settings ``config``), from the original model's scan minimum outward.

    ``margin`` (eV): the loss is evaluated only on the points whose original energy lies less than ``margin``
    below the asymptote (or above it); the points deeper in the well cannot rise above the asymptote without a
    change larger than the anchor allows, and evaluating every point of a 14-atom slab at every step made the
    loss the costliest part of a nequix repair (16 s of a step's gradient for 79 points).  The report reads the
    whole path.  ``None`` evaluates every point."""
    from jaxcert.detective._registry import make_protocol
    from jaxcert.detective._surfaces import placed, surface_label

    p = make_protocol("desorption", dict(config or {}))
    cfg = p.config
    dtype = jnp.zeros(()).dtype
    probe = placed(metal, adsorbate, 0.0, cfg)
    cut = model.cutoff_for(Structure.from_ase(probe, dtype=dtype, min_distance=None)) or 0.0
    top = max(cfg.dz_max, float(cut) + 1.5)
    dz = np.arange(-cfg.dz_below, top + 1e-9, cfg.dz_step)
    path = [Structure.from_ase(placed(metal, adsorbate, float(d), cfg), dtype=dtype, min_distance=None) for d in dz]
    far = Structure.from_ase(placed(metal, adsorbate, float(top + 2.0), cfg), dtype=dtype, min_distance=None)
    whole = Batch(model, path + [far])
    e0 = np.asarray(whole.energies(model.params), np.float64)
    start = int(np.argmin(e0[:-1]))
    rel0 = e0[:-1] - e0[-1]
    keep = [i for i in range(start, len(path)) if margin is None or rel0[i] > -float(margin)] or [len(path) - 1]
    key = f"{surface_label(metal)}/{adsorbate}"
    loss = barrier_loss(model, [path[i] for i in keep], far, name=f"barrier {key}", weight=weight,
                        info={"metal": metal, "adsorbate": adsorbate, "dz_from": float(dz[start]),
                              "dz_to": float(dz[-1]), "dz_far": float(top + 2.0), "points_scanned": len(path) - start,
                              "margin_eV": margin})

    def report(params: Any) -> dict[str, Any]:
        E = np.asarray(whole.energies(params), np.float64)
        rel = E[start:-1] - E[-1]
        k = int(np.argmax(rel))
        return {"rise_above_asymptote_eV": float(max(rel[k], 0.0)), "at": float(dz[start + k])}

    return dataclasses.replace(loss, report=report)


def probe_loss(model: Model, probe: str, element: str, *, seed: int = 0, config: Any = None,
               weight: float = 1.0, dtype: Any = None) -> Loss:
    """A certification probe's defect on ``element``'s substrate, divided by the probe's gate threshold (its
    target where it has no gate), as a function of the parameters (docs/research.md §1)."""
    from jaxcert.probes import PROBES
    from jaxcert.probes.base import resolve_substrate

    if probe not in PROBES:
        raise ValueError(f"probe: unknown {probe!r}; known: {', '.join(sorted(PROBES))}")
    spec = PROBES[probe]
    cfg = config if config is not None else spec.config()
    s = resolve_substrate(model, element, spec.substrate, dtype)
    key = jax.random.fold_in(jax.random.key(seed), zlib.crc32(probe.encode()) % (2**31))
    gate = getattr(cfg, "gate", None) or getattr(cfg, "gate_threshold", None) or 1.0

    def fn(params: Any) -> jax.Array:
        return jnp.abs(spec.fn(model.replace(params=params), key, cfg, substrate=s).defect) / gate

    return Loss(name=f"probe {probe} {element}", kind="probe", fn=fn, weight=weight,
                info={"probe": probe, "element": element, "gate": float(gate), "seed": seed})


def anchor_loss(model: Model, structures: Sequence[Structure], *, energy_tol: float = 0.002,
                force_tol: float = 0.03, weight: float = 1.0, labels: Sequence[str] | None = None,
                name: str = "anchor") -> Loss:
    r"""Self-distillation on ``structures``: the original model's energies and forces are the reference.

    L = ⟨((E − E₀)/N / tol_E)²⟩ + ⟨|F − F₀|² / tol_F²⟩ (per force component), tol_E = 2 meV/atom, tol_F =
    30 meV/Å: one unit of loss is a drift of that size.  The report gives the energy drift per atom and the
    force RMS per structure label.
    """
    batch = Batch(model, structures)
    e0, f0 = batch.energies_forces(model.params)
    e0 = jax.lax.stop_gradient(e0)
    f0 = [jax.lax.stop_gradient(f) for f in f0]
    n = jnp.asarray(batch.n_atoms, e0.dtype)
    labels = list(labels) if labels is not None else [f"s{k}" for k in range(len(structures))]

    def parts(params: Any) -> tuple[jax.Array, jax.Array]:
        e, f = batch.energies_forces(params)
        de = (e - e0) / n
        df2 = jnp.concatenate([jnp.ravel((a - b) ** 2) for a, b in zip(f, f0, strict=True)])
        return de, df2

    def fn(params: Any) -> jax.Array:
        de, df2 = parts(params)
        return jnp.mean((de / energy_tol) ** 2) + jnp.mean(df2) / force_tol**2

    def report(params: Any) -> dict[str, Any]:
        e, f = batch.energies_forces(params)
        de = np.abs(np.asarray((e - e0) / n, np.float64))
        per: dict[str, dict[str, float]] = {}
        for k, lab in enumerate(labels):
            cls = lab.split(":")[0]
            rms = float(np.sqrt(np.mean((np.asarray(f[k], np.float64) - np.asarray(f0[k], np.float64)) ** 2)))
            row = per.setdefault(cls, {"max_energy_drift_eV_per_atom": 0.0, "max_force_rms_eV_per_A": 0.0})
            row["max_energy_drift_eV_per_atom"] = max(row["max_energy_drift_eV_per_atom"], float(de[k]))
            row["max_force_rms_eV_per_A"] = max(row["max_force_rms_eV_per_A"], rms)
        return {"max_energy_drift_eV_per_atom": float(de.max(initial=0.0)),
                "max_force_rms_eV_per_A": max((r["max_force_rms_eV_per_A"] for r in per.values()), default=0.0),
                "by_class": per}

    return Loss(name=name, kind="anchor", fn=fn, weight=weight, report=report,
                info={"structures": labels, "energy_tol_eV_per_atom": energy_tol, "force_tol_eV_per_A": force_tol})


def from_escalation(model: Model, escalation: Mapping[str, Any] | str | os.PathLike, weight: float = 1.0
                    ) -> list[Loss]:
    """The losses an ``escalation.json`` of ``jaxcert investigate`` names (docs/detective.md §5.8):

    * dimers, observable ``collapse`` or ``wall_dip``: one :func:`wall_loss` per escalated pair (the cells of
      ``signals``, else the scope's pairs);
    * desorption, observable ``rise``: one :func:`desorption_loss` per escalated (metal, molecule), with the
      protocol settings of the search.

    Raises:
      ValueError: an escalation that did not escalate, or one this module has no loss for.
    """
    doc = escalation
    if not isinstance(doc, Mapping):
        with open(os.fspath(doc)) as fh:
            doc = json.load(fh)
    if not doc.get("escalated"):
        raise ValueError("escalation: it did not escalate; there is no finding to repair")
    proto, obs = doc.get("protocol"), doc.get("observable_name")
    scope = doc.get("scope") or {}
    if proto == "dimers" and obs in ("collapse", "wall_dip"):
        cfg = doc.get("protocol_config") or {}
        keys = [s["cell"] for s in doc.get("signals", [])] or list(scope.get("pairs", []))
        out = []
        for key in keys:
            a, b = key.split("-")
            out.append(wall_loss(model, a, b, r_floor=float(cfg.get("r_start", 0.3)), weight=weight))
        return out
    if proto == "desorption" and obs in ("rise", None):
        cfg = {k: (tuple(v) if isinstance(v, list) else v) for k, v in (doc.get("protocol_config") or {}).items()}
        return [desorption_loss(model, m, a, cfg, weight=weight) for m, a in scope.get("pairs", [])]
    raise ValueError(f"escalation: no loss for protocol {proto!r}, observable {obs!r} (known: dimers collapse and "
                     "wall_dip, desorption rise)")

