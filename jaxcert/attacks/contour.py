r"""Contour-exploration baseline (docs/attacks.md §4): ASE ``ContourExploration`` driven by a JAX model.

Per (seed, β):

1. relax the input at fixed cell to the contour reference R_c (FIRE, fmax
   0.01 eV/Å, 300 steps; the reference uses LBFGS here);
2. initial velocities: standard-normal components (only the direction matters)
   with the mean removed, from ``numpy.random.default_rng(seed + round(1000 β))``
   (the same generator is passed to ``ContourExploration`` as its ``rng``);
3. ``ContourExploration(maxstep=0.01 Å, parallel_drift=β, energy_target=E(R_c),
   angle_limit=20°)``, other arguments at ASE's defaults, ``n_steps`` = 500
   steps, one row per step 0…n: energy, target, deviation (eV and meV/atom), step
   size, curvature, mean/max displacement from R_c (minimum image), mean ‖ΔF‖
   from F(R_c), and the angle between successive step vectors (degrees);
4. endpoint metrics against R_c (:func:`jaxcert.attacks.metrics.compare`), then
   relax the endpoint and compare again, with steps, converged and final max force.

ASE's ``maxstep`` bounds the norm of the whole 3N step vector (not each atom's
step), so each atom moves about 0.01/√N Å per step and the path is at most
n·maxstep long in 3N-space: far smaller than most of the attack ε grid
(docs/attacks.md §4, caveats).  ``energy_shift_ev_per_atom`` targets E(R_c) + δ·N
instead (docs/attacks.md §4, proposed; default 0 = the reference).

The explorer is ASE's (host, sequential); the model is called through a small
ASE calculator (:class:`jaxcert.adapters.calculator.ModelCalculator`) that evaluates the model's jitted energy
and forces.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import numpy as np

from jaxcert.adapters.calculator import ModelCalculator
from jaxcert.attacks import metrics as _m
from jaxcert.core.model import Model
from jaxcert.core.structure import Structure
from jaxcert.optim.relax import fire

__all__ = ["ContourConfig", "contour"]


@dataclasses.dataclass(frozen=True)
class ContourConfig:
    """Contour settings (docs/attacks.md §4 defaults)."""

    maxstep: float = 0.01  # Å, norm of the 3N step vector
    angle_limit: float = 20.0  # degrees
    n_steps: int = 500
    fmax: float = 0.01  # eV/Å, pre- and post-relaxation
    max_steps: int = 300
    energy_shift_ev_per_atom: float = 0.0


_fire = jax.jit(fire, static_argnames=("max_steps",))


def _relax(model: Model, atoms, cfg: ContourConfig):
    s = model.prepare(Structure.from_ase(atoms, min_distance=None))
    r = _fire(model, s, fmax=cfg.fmax, max_steps=cfg.max_steps)
    out = atoms.copy()
    out.set_positions(np.asarray(r.structure.positions, np.float64)[np.asarray(s.mask)])
    return out, int(r.steps), bool(r.converged), float(r.fmax)


def _angle(u: np.ndarray, v: np.ndarray) -> float:
    nu, nv = np.linalg.norm(u), np.linalg.norm(v)
    if nu * nv <= 1e-300:
        return float("nan")
    return float(np.degrees(np.arccos(np.clip(np.vdot(u, v) / (nu * nv), -1.0, 1.0))))


def contour(model: Model, atoms: Any, seed: int = 42, beta: float = 0.1,
            config: ContourConfig | None = None) -> dict[str, Any]:
    """One contour run (module docstring); returns ``{"rows", "endpoint", "relaxed", ...}``."""
    from ase.md.contour_exploration import ContourExploration

    config = config if config is not None else ContourConfig()
    if isinstance(atoms, Structure):
        atoms = atoms.to_ase()
    calc = ModelCalculator(model)
    ref, pre_steps, pre_conv, pre_fmax = _relax(model, atoms, config)
    ref.calc = calc
    E_c = float(ref.get_potential_energy())
    F_c = ref.get_forces().copy()
    n = len(ref)
    target = E_c + config.energy_shift_ev_per_atom * n
    rng = np.random.default_rng(seed + round(1000 * beta))
    v = rng.standard_normal((n, 3))
    v -= v.mean(axis=0)
    work = ref.copy()
    work.calc = calc
    work.set_velocities(v)
    ce = ContourExploration(work, maxstep=config.maxstep, parallel_drift=beta, energy_target=target,
                            angle_limit=config.angle_limit, rng=rng)
    R_c = ref.get_positions()
    cell, pbc = ref.get_cell().array, ref.get_pbc()
    rows: list[dict[str, float]] = []
    last = {"R": work.get_positions().copy(), "dR": None}

    def record():
        R = work.get_positions()
        E = float(work.get_potential_energy())
        F = work.get_forces()
        d = np.linalg.norm(_m.min_image(R - R_c, cell, pbc), axis=1)
        dR = R - last["R"]
        rows.append({
            "step": len(rows), "energy": E, "energy_target": float(ce.energy_target),
            "energy_deviation": E - float(ce.energy_target),
            "energy_deviation_mev_per_atom": 1000.0 * (E - float(ce.energy_target)) / n,
            "step_size": float(ce.step_size), "curvature": float(ce.curvature),
            "mean_displacement": float(d.mean()), "max_displacement": float(d.max()),
            "mean_delta_force": float(np.linalg.norm(F - F_c, axis=1).mean()),
            "step_angle": _angle(last["dR"], dR) if last["dR"] is not None and len(rows) > 1 else float("nan"),
        })
        last["R"], last["dR"] = R.copy(), dR

    ce.attach(record, interval=1)  # ASE calls observers once before the first step too: rows 0…n
    ce.run(config.n_steps)
    end = work.copy()
    end.calc = calc
    E_end, F_end = float(end.get_potential_energy()), end.get_forces()
    endpoint = _m.compare(ref, end, F_c, F_end, E_c, E_end, fmax=config.fmax)
    relaxed, steps, conv, fm = _relax(model, end, config)
    relaxed.calc = calc
    post = _m.compare(ref, relaxed, F_c, relaxed.get_forces(), E_c, float(relaxed.get_potential_energy()),
                      fmax=config.fmax)
    dev = np.abs([r["energy_deviation_mev_per_atom"] for r in rows])
    return {
        "seed": seed, "beta": beta, "config": dataclasses.asdict(config),
        "pre_relaxation": {"steps": pre_steps, "converged": pre_conv, "fmax": pre_fmax},
        "reference_energy": E_c, "rows": rows, "endpoint": endpoint, "relaxed": post,
        "post_relaxation": {"steps": steps, "converged": conv, "fmax": fm},
        "summary": {"mean_abs_energy_deviation_mev_per_atom": float(dev.mean()),
                    "max_abs_energy_deviation_mev_per_atom": float(dev.max()),
                    "mean_step_size": float(np.mean([r["step_size"] for r in rows[1:]])),
                    "mean_curvature": float(np.mean([r["curvature"] for r in rows[1:]])),
                    "max_displacement": float(max(r["max_displacement"] for r in rows)),
                    "mean_delta_force": float(np.mean([r["mean_delta_force"] for r in rows]))},
    }
