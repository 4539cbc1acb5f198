r"""lam: the conservativeness ratio λ = ‖J_anti‖_F / ‖J‖_F of the force output (docs/probes.md §4.16).

Identity tested (seed 002; Bigi, Langer & Ceriotti, arXiv:2412.11569): for forces that are the
gradient of an energy, the force Jacobian J = ∂F/∂R is symmetric, so

.. math::  \lambda = \frac{\lVert \tfrac12 (J - J^T) \rVert_F}{\lVert J \rVert_F} \overset{!}{=} 0 .

λ grows towards 1 as the force field acquires curl. Unlike the 1-D bond scan of conservativeness,
it sees a transverse curl (docs/probes.md §8.4).

Substrate: not the per-element substrates but the ten fixed structures of the seed-002 benchmark
(:func:`jaxcert.probes.substrates.lambda_structures`: eight ASE molecules, cubic diamond, periodic
graphene), one report row per structure; the suite groups them by periodicity so that each group is
one padded, vmapped program (padded rows and columns of J are exactly zero and change neither norm).
A structure the model cannot evaluate is recorded as skipped with the reason; the others keep their
values. Not in the default run (docs/probes.md §4.16 says why); ``jaxcert certify --probes lam``
runs it, and :func:`jaxcert.lam` is the convenience that returns the per-structure table.

Defect d = λ (dimensionless); score exp(−λ/scale) with scale = gate/5; gate λ ≤ ``gate``
(:data:`LAMBDA_GATE` = 1e-4). ``n_evals``: 3N (one jvp per degree of freedom) exact, 6N with
central finite differences (``derivatives=FiniteDifference(order=2, step_size=1e-3)``, the peer
benchmark's 2 × 3N force calls).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxcert.core.derivatives import EXACT
from jaxcert.core.model import Model
from jaxcert.core.structure import Structure
from jaxcert.probes import kinds, stages, substrates
from jaxcert.probes.base import ProbeResult, ProbeSpec, finalize, register, score_map

__all__ = ["LamConfig", "lam", "lambda_of_jacobian", "LAMBDA_GATE"]

#: Gate on λ (``docs/cli.md``).  Conservative models sit at the floating-point floor: max λ 4.8e-8 (LJ)
#: and 9.5e-8 (EMT) in float32, ≤ 1e-10 in float64; the curl defect gives 3.1e-4 at strength 0.01 and
#: 1.6e-3 at 0.05 (LJ, measured with ``jaxcert lambda``).  1e-4 keeps three decades above the float32
#: floor and fails curl down to strength ≈ 0.01.
LAMBDA_GATE = 1e-4


def lambda_of_jacobian(J: jax.Array) -> jax.Array:
    """λ = ‖½(J − Jᵀ)‖_F / ‖J‖_F for J of shape (n, 3, n, 3) or (3n, 3n)."""
    n3 = int(np.sqrt(J.size))
    Jm = J.reshape(n3, n3)
    anti = 0.5 * (Jm - Jm.T)
    return jnp.linalg.norm(anti) / jnp.linalg.norm(Jm)


@dataclasses.dataclass(frozen=True)
class LamConfig:
    """Defaults: seed 002 (docs/probes.md §4.16).

    Attributes:
      gate: the largest λ that passes (:data:`LAMBDA_GATE`).
      derivatives: ``EXACT`` (``jacfwd`` of the force output) or ``FiniteDifference(order=2,
        step_size=...)`` (central differences of the forces, the peer benchmark's recipe).
    """

    gate: float = LAMBDA_GATE
    derivatives: Any = EXACT

    @property
    def scale(self) -> float:
        """λ of the score exp(−λ/scale): gate/5, as the other probes gate at 5 scales."""
        return self.gate / 5.0


def lam(
    model: Model,
    key: jax.Array | None = None,
    config: LamConfig = LamConfig(),
    substrate: Structure | str | None = None,
) -> ProbeResult:
    """λ of one structure (see the module docstring).

    Args:
      model: the potential.
      key: unused (no randomness); accepted for the common probe signature.
      config: :class:`LamConfig`.
      substrate: a Structure, the name of one of the ten λ structures (e.g. ``"H2O"``), or ``None``
        (``"H2O"``).

    Returns:
      :class:`ProbeResult` with defect λ, score exp(−λ/scale), gate λ ≤ ``config.gate``.
    """
    del key
    if substrate is None:
        substrate = "H2O"
    if not isinstance(substrate, Structure):
        sets = substrates.lambda_structures()
        if substrate not in sets:
            raise ValueError(f"substrate: {substrate!r} is not a λ structure; known: {', '.join(sets)}")
        substrate = sets[substrate]
    s = model.prepare(substrate)
    return stages.run(model, plan, config, None, s)


def plan(cfg: LamConfig, facts: stages.Facts):
    """Stages (docs/architecture.md "Kinds and stages"): ask for the 3N force-Jacobian columns J e_p (``tangent``
    along every unit DOF vector); then reduce."""
    del facts
    engine = cfg.derivatives

    def ask(key, s):
        del key
        n = s.n_atoms
        d = jnp.eye(3 * n, dtype=s.positions.dtype).reshape(3 * n, n, 3)  # column p: unit vector e_p
        return stages.Ask(s, kinds.tangent(kinds.items(s, jnp.broadcast_to(s.positions, d.shape)), d, engine))

    def reduce(s, jv):
        n3 = 3 * s.n_atoms
        value = lambda_of_jacobian(jv.forces.reshape(n3, n3).T)  # J[:, p] = J e_p
        n_real = jnp.sum(s.mask.astype(jnp.int32))
        n_evals = engine.cost(3) * n_real  # three force columns per atom
        details = {"lambda": value, "n_atoms": n_real, "exact": jnp.asarray(engine.exact)}
        return finalize(value, score_map(value, cfg.scale), value <= cfg.gate, n_evals, details)

    return ask, reduce


register(ProbeSpec("lam", lam, LamConfig, "lambda", default=False, structures=substrates.lambda_structures,
                   plan=plan))
