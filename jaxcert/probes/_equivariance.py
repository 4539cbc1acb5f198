r"""equivariance: E(QR) = E(R) and F(QR) = Q F(R) for random proper rotations Q (docs/probes.md §4.1).

Identity tested (seed 000, section "Symmetry & invariance").  For rotations Q_k
about the unweighted centroid R̄ = (1/N) Σ_i R_i (the reference's ``mean(0)``),
R_i' = Q_k (R_i − R̄) + R̄,

.. math::
   e_k = |E(R') - E(R)|, \qquad f_k = \lVert F(R') - F(R)\,Q_k^{T} \rVert_F ,

with the Frobenius norm over the whole N×3 force array (a total, not an RMS),
and F the model's *force output* (a direct force head is tested as it is).

Defect D = ē/s_E + f̄/s_F (ē, f̄ the means over rotations; s_E = 1e-3 eV,
s_F = 1e-3 eV/Å), score exp(−D) (λ = 1), gate ē < 5e-3 eV **and** f̄ < 5e-3 eV/Å.
Cost 1 + n_rot model evaluations (9 by default), all rotations evaluated in one
``vmap``.

Rotation sampling (docs/probes.md §10, §11.7).  The reference draws, per rotation, an
axis a ~ normal(3) (normalised) and an angle θ ~ U(0, 2π), then Rodrigues
Q = I + sinθ K + (1 − cosθ) K².  This is **not** Haar-uniform on SO(3): the Haar
angle density is (1 − cos θ)/π on [0, π], so the reference over-weights small
angles.  The default keeps the reference distribution so that scores stay
comparable with pescert (with ``jax.random`` instead of numpy's stream, so the
agreement is statistical); ``haar=True`` samples Haar-uniform rotations (random
unit quaternions) instead.

No derivative of a model output is taken, so the ``derivatives`` engine field is
unused (kept so a suite can set the engine uniformly on every config).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp

from jaxcert.core.derivatives import EXACT
from jaxcert.core.model import Model
from jaxcert.core.structure import Structure
from jaxcert.probes import kinds, stages
from jaxcert.probes.base import ProbeResult, ProbeSpec, finalize, register, resolve_substrate

__all__ = ["EquivarianceConfig", "equivariance", "random_rotations", "rodrigues"]


@dataclasses.dataclass(frozen=True)
class EquivarianceConfig:
    """Defaults of seed 000 / pescert (docs/probes.md §4.1).

    Attributes:
      n_rot: number of random rotations (8).
      scale_energy: s_E in eV (1e-3).
      scale_force: s_F in eV/Å (1e-3).
      gate_energy: gate on ē in eV (5e-3).
      gate_force: gate on f̄ in eV/Å (5e-3).
      haar: False = the reference's axis/angle sampling (not Haar); True = Haar-uniform.
      derivatives: unused here (no derivative of a model output is taken).
    """

    n_rot: int = 8
    scale_energy: float = 1e-3
    scale_force: float = 1e-3
    gate_energy: float = 5e-3
    gate_force: float = 5e-3
    haar: bool = False
    derivatives: Any = EXACT


def rodrigues(axis: jax.Array, angle: jax.Array) -> jax.Array:
    """Q = I + sinθ K + (1 − cosθ) K² for a unit ``axis`` (3,) and ``angle`` θ (rad)."""
    x, y, z = axis[0], axis[1], axis[2]
    zero = jnp.zeros_like(x)
    K = jnp.stack([jnp.stack([zero, -z, y]), jnp.stack([z, zero, -x]), jnp.stack([-y, x, zero])])
    eye = jnp.eye(3, dtype=axis.dtype)
    return eye + jnp.sin(angle) * K + (1 - jnp.cos(angle)) * (K @ K)


def _quaternion_matrix(q: jax.Array) -> jax.Array:
    w, x, y, z = q[0], q[1], q[2], q[3]
    return jnp.stack([
        jnp.stack([1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)]),
        jnp.stack([2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)]),
        jnp.stack([2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]),
    ])


def random_rotations(key: jax.Array, n: int, dtype: Any = jnp.float64, haar: bool = False) -> jax.Array:
    """``n`` proper rotations (n, 3, 3).

    ``haar=False``: the reference's stream, per rotation an axis ~ normal(3) and an
    angle ~ U(0, 2π), Rodrigues (not Haar-uniform).  ``haar=True``: unit quaternions
    from normal(4), which are Haar-uniform on SO(3).
    """
    if haar:
        q = jax.random.normal(key, (n, 4), dtype)
        q = q / jnp.linalg.norm(q, axis=1, keepdims=True)
        return jax.vmap(_quaternion_matrix)(q)
    k_axis, k_angle = jax.random.split(key)
    axes = jax.random.normal(k_axis, (n, 3), dtype)
    axes = axes / jnp.linalg.norm(axes, axis=1, keepdims=True)
    angles = jax.random.uniform(k_angle, (n,), dtype, 0.0, 2 * jnp.pi)
    return jax.vmap(rodrigues)(axes, angles)


def _centroid(s: Structure) -> jax.Array:
    w = s.mask.astype(s.positions.dtype)
    return jnp.sum(s.positions * w[:, None], axis=0) / jnp.sum(w)


def equivariance(
    model: Model,
    key: jax.Array,
    config: EquivarianceConfig = EquivarianceConfig(),
    substrate: Structure | str | None = None,
) -> ProbeResult:
    """Rotation invariance of E and equivariance of the force output; see the module docstring.

    Args:
      model: the potential.
      key: PRNG key for the rotations.
      config: :class:`EquivarianceConfig`.
      substrate: a cluster Structure (not relaxed), an element symbol, or None ("Ar").

    Returns:
      :class:`ProbeResult` with defect D (dimensionless), score exp(−D), gate, n_evals = 1 + n_rot and
      details n_rot, energy_residual (eV), force_residual (eV/Å), scale_energy, scale_force,
      energy_residuals (n_rot,), force_residuals (n_rot,), rotations (n_rot, 3, 3).
    """
    s = resolve_substrate(model, substrate, "cluster")
    return stages.run(model, plan, config, key, s)


def plan(cfg: EquivarianceConfig, facts: stages.Facts):
    """Stages (docs/architecture.md "Kinds and stages"): draw the rotations and ask for E, F at the
    reference and the n_rot rotated geometries (one batched ``evaluate`` request); then reduce."""
    del facts

    def ask(key, s):
        dt = s.positions.dtype
        Q = random_rotations(key, cfg.n_rot, dt, haar=cfg.haar)
        centre = _centroid(s)
        real = s.mask[:, None]
        R = jax.vmap(lambda Qk: jnp.where(real, (s.positions - centre) @ Qk.T + centre, s.positions))(Q)
        R = jnp.concatenate([s.positions[None], R])  # item 0: the reference geometry
        return stages.Ask((Q, s), kinds.evaluate(kinds.items(s, R)))

    def reduce(state, out):
        Q, s = state
        dt = s.positions.dtype
        real = s.mask[:, None]
        E0, F0 = out.energy[0], out.forces[0]

        def one(Qk, E, F):
            e = jnp.abs(E - E0)
            f = jnp.sqrt(jnp.sum(jnp.where(real, F - F0 @ Qk.T, 0.0) ** 2))
            return e, f

        e, f = jax.vmap(one)(Q, out.energy[1:], out.forces[1:])
        e_bar, f_bar = jnp.mean(e), jnp.mean(f)
        defect = e_bar / cfg.scale_energy + f_bar / cfg.scale_force
        score = jnp.exp(-jnp.abs(defect))
        gate = (e_bar < cfg.gate_energy) & (f_bar < cfg.gate_force)
        details = {
            "n_rot": jnp.asarray(cfg.n_rot),
            "energy_residual": e_bar,
            "force_residual": f_bar,
            "scale_energy": jnp.asarray(cfg.scale_energy, dt),
            "scale_force": jnp.asarray(cfg.scale_force, dt),
            "energy_residuals": e,
            "force_residuals": f,
            "rotations": Q,
        }
        return finalize(defect, score, gate, 1 + cfg.n_rot, details)

    return ask, reduce


register(ProbeSpec(
    name="equivariance", fn=equivariance, config=EquivarianceConfig, substrate="cluster",
    target=0.0, gated=True, needs_stress=False, needs_pbc=False, plan=plan,
))
