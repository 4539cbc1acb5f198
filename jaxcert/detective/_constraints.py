r"""The eight constraints of the inspection specification as one protocol (docs/detective.md §2.4).

Regions are (constraint, element).  Each check has a label-free procedure, a numeric threshold and a value
(larger = worse, a violation when above the threshold); an exact-constraint violation by the target is decisive
on its own (docs/detective.md §3.1).  Checks guaranteed by construction for the *target* are skipped with that
reason (F = −∇E for a model without a force head, σ = V⁻¹∂E/∂ε without a stress head).

=====================  =========================================================  ==========================
constraint             check                                                      threshold
=====================  =========================================================  ==========================
conservative_forces    probes.conservativeness defect (collinear F·û vs −dE/ds)   0.25 (the probe's gate)
translation            max(|ΣF|/N ÷ 5e-3 eV/Å, |E(R+t) − E(R)|/N ÷ 1e-3 eV)       1 (13-atom cluster)
repulsive_wall         largest energy rise with R on 0.5-0.8 × 2 r_cov, homonuclear  1e-3 eV
born_stability         −λ_min of the relaxed-ion elastic tensor (cell relaxed)     0.5 GPa
symmetry               1 if spglib's space group (1e-3 Å) changes on cell relax    0.5
stress_strain          probes.stress_consistency defect                            0.25 (the probe's gate)
dissociation_limit     |E(A⋯A at 12 Å) − 2 E(A)|                                   0.05 eV
smoothness             probes.smoothness defect D                                  1.0 (one excess flip/min)
=====================  =========================================================  ==========================

Every check reuses the probes and derivatives that exist (:mod:`jaxcert.probes`,
:func:`jaxcert.controls._elastic.elastic_tensor`, :func:`jaxcert.optim.relax.relax_cell`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import jax
import numpy as np

from jaxcert.core.model import is_unsupported_structure
from jaxcert.core.structure import Structure
from jaxcert.detective._protocols import Cell, Protocol, _rcov, supported

__all__ = ["CONSTRAINTS", "THRESHOLDS", "Constraints"]

CONSTRAINTS = ("conservative_forces", "translation", "repulsive_wall", "born_stability", "symmetry",
               "stress_strain", "dissociation_limit", "smoothness")

THRESHOLDS = {"conservative_forces": 0.25, "translation": 1.0, "repulsive_wall": 1e-3, "born_stability": 0.5,
              "symmetry": 0.5, "stress_strain": 0.25, "dissociation_limit": 0.05, "smoothness": 1.0}

_UNITS = {"conservative_forces": "probe defect", "translation": "× tolerance", "repulsive_wall": "eV",
          "born_stability": "GPa", "symmetry": "changed (0/1)", "stress_strain": "probe defect",
          "dissociation_limit": "eV", "smoothness": "probe defect"}

_TRANSLATION = np.array([0.37, -0.21, 0.53])


def _probe_defect(fn: Any, model: Any, el: str, seed: int = 0) -> float:
    try:
        r = fn(model, jax.random.key(seed), substrate=el)
        return float(r.defect)
    except Exception as err:  # noqa: BLE001 - a probe that cannot run on a model gives no value
        if is_unsupported_structure(err) or "Skip" in type(err).__name__:
            return float("nan")
        raise


class Constraints(Protocol):
    """The inspection specification's eight constraints (docs/detective.md §2.4)."""

    name = "constraints"
    kind = "constraint"
    importance = 0.8
    observable = "violation of an exact physical constraint (per-check value and threshold)"
    unit = "per check"
    application = "any simulation: an exact constraint holds for every configuration and every application"
    floor = 1e-9

    def __init__(self, checks: Sequence[str] = CONSTRAINTS) -> None:
        bad = [c for c in checks if c not in CONSTRAINTS]
        if bad:
            raise ValueError(f"checks: unknown {bad}; allowed: {', '.join(CONSTRAINTS)}")
        self.checks = tuple(checks)

    def key(self, region: Mapping[str, Any]) -> str:
        return f"{region['constraint']}:{region['element']}"

    def regions(self, elements: Sequence[str], committee: Any) -> list[dict[str, Any]]:
        els = [e for e in elements if supported(committee.target, [e])]
        return [{"constraint": c, "element": e} for c in self.checks for e in els]

    # ----------------------------------------------------------------- checks
    def _skip_reason(self, c: str, model: Any) -> str | None:
        if c == "conservative_forces" and model.conservative_forces:
            return "guaranteed by construction: forces are −∇E (no direct force head)"
        if c == "stress_strain" and model.stress_fn is None:
            return "guaranteed by construction: stress is V⁻¹∂E/∂ε (no direct stress head)"
        return None

    def _batched(self, committee: Any, regs: list[dict], variant: str) -> dict[str, dict[str, dict]]:
        """translation, repulsive_wall, dissociation_limit: single points, one batch per model."""
        structs: list[Structure] = []
        spans: list[tuple[str, str, int, int, Any]] = []
        scale = 1.03 if variant == "fine" else 1.0
        from jaxcert.probes import substrates

        for r in regs:
            c, el = r["constraint"], r["element"]
            k0 = len(structs)
            if c == "translation":
                s = substrates.cluster(el, dtype=committee.dtype, scale=scale)
                structs += [s, s.replace(positions=s.positions + np.asarray(_TRANSLATION, np.float64))]
                extra = int(np.sum(np.asarray(s.mask)))
            elif c == "repulsive_wall":
                d = 2 * _rcov(el)
                rs = np.linspace(0.5, 0.8, 25 if variant == "fine" else 13) * d
                structs += [Structure.create([[0, 0, 0], [x, 0, 0]], [el, el], dtype=committee.dtype,
                                             min_distance=None) for x in [*rs, 12.0]]
                extra = rs
            elif c == "dissociation_limit":
                far = 14.0 if variant == "fine" else 12.0
                structs += [Structure.create([[0, 0, 0], [far, 0, 0]], [el, el], dtype=committee.dtype,
                                             min_distance=None),
                            Structure.create([[0, 0, 0]], [el], dtype=committee.dtype, min_distance=None)]
                extra = None
            else:
                continue
            spans.append((c, el, k0, len(structs), extra))
        out: dict[str, dict[str, dict]] = {}
        if not structs:
            return out
        E, F = committee.energies_forces(structs)
        for c, el, k0, k1, extra in spans:
            res = {}
            for mi, name in enumerate(committee.names):
                e = E[mi, k0:k1]
                if not np.all(np.isfinite(e)):
                    res[name] = {"value": float("nan")}
                    continue
                if c == "translation":
                    n = extra
                    f = F[mi][k0]
                    net = float(np.linalg.norm(np.sum(f, axis=0))) / n if f is not None else float("nan")
                    dE = abs(float(e[1] - e[0])) / n
                    res[name] = {"value": max(net / 5e-3, dE / 1e-3), "net_force_per_atom": net,
                                 "translation_dE_per_atom": dE}
                elif c == "repulsive_wall":
                    wall, e_far = e[:-1], e[-1]
                    rise = float(np.max(np.diff(wall))) if wall.size > 1 else 0.0  # E must fall as R grows
                    below = float(e_far - wall[0])  # the wall must sit above the dissociation limit
                    res[name] = {"value": max(rise, below, 0.0), "max_rise_with_R": rise,
                                 "E_short_minus_far": float(wall[0] - e_far)}
                else:
                    gap = float(e[0] - 2 * e[1])
                    res[name] = {"value": abs(gap), "gap": gap}
            out[f"{c}:{el}"] = res
        return out

    def _crystal(self, committee: Any, model: Any, el: str) -> dict[str, float]:
        """born_stability and symmetry from one cell relaxation of the reference crystal."""
        from jaxcert.controls._elastic import elastic_tensor
        from jaxcert.controls._robust import _space_group
        from jaxcert.core.elements import reference_crystal
        from jaxcert.optim.relax import relax_cell

        atoms = reference_crystal(el)
        if atoms is None or not model.stress_available:
            return {"born": float("nan"), "sym": float("nan")}
        s = Structure.from_ase(atoms, dtype=committee.dtype)
        try:
            r = relax_cell(model, model.prepare(s), fmax=1e-3, max_steps=500)
            committee.n_evals += int(r.steps) + 1
            rs = r.structure
            sg0 = _space_group((np.asarray(atoms.get_cell()), atoms.get_scaled_positions(), atoms.numbers), 1e-3, -1)
            ra = rs.to_ase()
            sg1 = _space_group((np.asarray(ra.get_cell()), ra.get_scaled_positions(), ra.numbers), 1e-3, -1)
            et = elastic_tensor(model, rs.replace(neighbor_list=None, neighbor_state=None, images=None),
                                relaxed_ions=True)
            committee.n_evals += 6 * (3 * len(atoms) + 6)
            lam = float(np.min(np.linalg.eigvalsh(0.5 * (et.C + et.C.T))))
            return {"born": -lam, "sym": float(sg0 != sg1), "lambda_min_GPa": lam, "sg_before": sg0,
                    "sg_after": sg1, "converged": float(bool(r.converged))}
        except Exception as err:  # noqa: BLE001
            if is_unsupported_structure(err):
                return {"born": float("nan"), "sym": float("nan")}
            raise

    def run(self, committee: Any, regions: Sequence[dict[str, Any]], variant: str = "screen") -> list[Cell]:
        from jaxcert import probes

        regs = list(regions)
        batched = self._batched(committee, regs, variant)
        crystal: dict[tuple[int, str], dict] = {}
        cells = []
        t = committee.target_name
        for r in regs:
            c, el = r["constraint"], r["element"]
            skip = self._skip_reason(c, committee.target)
            values: dict[str, float] = {}
            metrics: dict[str, dict[str, float]] = {}
            if skip is None:
                for mi, (name, model) in enumerate(zip(committee.names, committee.models, strict=True)):
                    m: dict[str, float]
                    if c in ("translation", "repulsive_wall", "dissociation_limit"):
                        m = batched[f"{c}:{el}"][name]
                    elif c in ("born_stability", "symmetry"):
                        if (mi, el) not in crystal:
                            crystal[(mi, el)] = self._crystal(committee, model, el)
                        cr = crystal[(mi, el)]
                        m = {"value": cr["born"] if c == "born_stability" else cr["sym"],
                             **{k: v for k, v in cr.items() if k not in ("born", "sym")}}
                    elif c == "conservative_forces":
                        if model.conservative_forces:
                            m = {"value": 0.0, "note": 0.0}
                        else:
                            m = {"value": _probe_defect(probes.conservativeness, model, el)}
                            committee.n_evals += 62
                    elif c == "stress_strain":
                        if model.stress_fn is None:
                            m = {"value": 0.0}
                        else:
                            m = {"value": _probe_defect(probes.stress_consistency, model, el)}
                            committee.n_evals += 2
                    else:  # smoothness
                        m = {"value": _probe_defect(probes.smoothness, model, el)}
                        committee.n_evals += 81
                    values[name] = float(m["value"])
                    metrics[name] = {k: float(v) for k, v in m.items()}
            else:
                values = {name: float("nan") for name in committee.names}
                metrics = {name: {} for name in committee.names}
            cells.append(self.make_cell(dict(r), values, metrics, t, {}, variant, threshold=THRESHOLDS[c],
                                        skip_reason=skip))
        return cells

    # --------------------------------------------------------------- hypothesis
    def scope_of(self, cells: Sequence[Cell]) -> dict[str, Any]:
        from ase.data import atomic_numbers

        cons = sorted({c.region["constraint"] for c in cells})
        els = sorted({c.region["element"] for c in cells}, key=lambda s: atomic_numbers[s])
        return {"constraints": cons, "elements": els}

    def in_scope(self, region: Mapping[str, Any], scope: Mapping[str, Any]) -> bool:
        return region["constraint"] in scope["constraints"] and region["element"] in scope["elements"]

    def neighbourhood(self, scope: Mapping[str, Any], elements: Sequence[str], committee: Any) -> list[dict]:
        els = [e for e in elements if supported(committee.target, [e])]
        return [{"constraint": c, "element": e} for c in scope["constraints"] for e in els]

    def statement(self, scope: Mapping[str, Any]) -> str:
        return (f"the target violates the exact constraint(s) {', '.join(scope['constraints'])} for "
                f"{', '.join(scope['elements'])}")

    def configurations(self, region: Mapping[str, Any], committee: Any, cell: Cell | None = None
                       ) -> list[tuple[str, Any]]:
        from jaxcert.core.elements import reference_crystal
        from jaxcert.probes import substrates

        c, el = region["constraint"], region["element"]
        if c in ("born_stability", "symmetry", "stress_strain"):
            atoms = reference_crystal(el)
            return [(f"{c}_{el}_crystal", atoms)] if atoms is not None else []
        if c in ("repulsive_wall", "dissociation_limit"):
            from ase import Atoms

            r = 0.5 * 2 * _rcov(el) if c == "repulsive_wall" else 12.0
            a = Atoms([el, el], positions=[[0, 0, 0], [r, 0, 0]])
            return [(f"{c}_{el}_{r:.2f}A", a)]
        return [(f"{c}_{el}_cluster", substrates.cluster_atoms(el))]

    def mechanism(self, committee: Any, scope: Mapping[str, Any], cells: Sequence[Cell]) -> dict[str, Any]:
        t = committee.target_name
        inside = [c for c in cells if self.in_scope(c.region, scope) and c.suspicious]
        parts = [f"{c.key}: {c.values[t]:.3g} {_UNITS[c.region['constraint']]} (threshold "
                 f"{THRESHOLDS[c.region['constraint']]:g}; committee median {c.signal.committee_median:.3g})"
                 for c in inside]
        return {"summary": "Exact-constraint values of the target: " + "; ".join(parts) + ".",
                "numbers": {c.key: c.metrics[t] for c in inside},
                "confounds": ["a protocol artefact: excluded (not every committee model violates it)",
                              "the substrate geometry: excluded (the scope probe repeats the check on a 3 % "
                              "expanded substrate / a finer grid)"]}

    def impact(self, committee: Any, scope: Mapping[str, Any], cells: Sequence[Cell]) -> dict[str, Any]:
        return {"summary": "An exact constraint binds every configuration: the violation enters any simulation "
                           "that visits the checked geometry (MD energy drift, wrong relaxations, unstable cells).",
                "boundary": "Where it does not matter: elements and constraints outside the scope, which pass "
                            "(see the scope probe).", "numbers": {}, "evals": 0}


