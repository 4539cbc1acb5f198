r"""Attack objectives J(s) (scalars the attacks *ascend*), built from models.

Every factory returns a pure function ``loss(s: Structure) -> scalar`` that closes
over the model(s); the structure must already be prepared (``model.prepare``)
because the losses run inside ``jit``/``vmap``.  The attack takes
g = ∂J/∂R at fixed cell (docs/attacks.md §1.2).

* :func:`energy` — J = E(R) in eV: the reference's untargeted objective
  (docs/attacks.md §1.2).  Ascending it moves atoms *against* the forces,
  sign(g) = −sign(F).  (The reference's ``main`` branch descends it; §1.8.)
* :func:`force_norm` — J = ½ Σ_i ‖F_i‖² in eV²/Å² (double backpropagation for
  conservative models).  The squared norm keeps ∂J/∂R defined at F = 0, and
  sign(∂J/∂R) equals sign(∂‖F‖/∂R) wherever F ≠ 0.
* :func:`deviation` — J = ½ Σ_i ‖F_i^a − F_i^b‖² (eV²/Å²) or ½ (E^a − E^b)²
  (eV²): disagreement with a second model.
* :func:`committee_variance` — J = (1/N) Σ_i Σ_k Var_m F^m_ik (eV²/Å²), the
  committee force variance (mean over real atoms of the per-atom variance summed
  over Cartesian components), the usual uncertainty-driven adversarial loss
  (Schwalbe-Koda, Tan & Gómez-Bombarelli, Nat. Commun. 12, 5104 (2021)).
* :func:`targeted_energy` — J = −(E − E*)² in eV²: ascent moves toward E*
  (the targeted mode of docs/attacks.md §1.2; the reference's MACE path gets this
  sign wrong).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp

from jaxcert.core.model import Model
from jaxcert.core.structure import Structure

__all__ = ["energy", "force_norm", "deviation", "committee_variance", "targeted_energy", "get"]

Loss = Callable[[Structure], jax.Array]


def energy(model: Model) -> Loss:
    """J = E(R) (eV), the model's total energy; the attacks ascend it."""

    def loss(s: Structure) -> jax.Array:
        return model.energy_of(model.params, s)

    return loss


def force_norm(model: Model) -> Loss:
    """J = ½ Σ_i ‖F_i(R)‖² (eV²/Å²) over real atoms."""

    def loss(s: Structure) -> jax.Array:
        F = model.forces_of(model.params, s)
        return 0.5 * jnp.sum(F * F)

    return loss


def deviation(model: Model, other: Model, quantity: str = "forces") -> Loss:
    """J = ½ Σ‖F^a − F^b‖² (``quantity="forces"``) or ½ (E^a − E^b)² (``"energy"``)."""
    if quantity not in ("forces", "energy"):
        raise ValueError(f"quantity must be 'forces' or 'energy', got {quantity!r}")

    def loss(s: Structure) -> jax.Array:
        if quantity == "energy":
            d = model.energy_of(model.params, s) - other.energy_of(other.params, s)
            return 0.5 * d * d
        dF = model.forces_of(model.params, s) - other.forces_of(other.params, s)
        return 0.5 * jnp.sum(dF * dF)

    return loss


def committee_variance(models: Sequence[Model]) -> Loss:
    """J = (1/N) Σ_i Σ_k Var_m F^m_ik over a committee of ≥ 2 models (eV²/Å²)."""
    models = tuple(models)
    if len(models) < 2:
        raise ValueError(f"a committee needs at least 2 models, got {len(models)}")

    def loss(s: Structure) -> jax.Array:
        F = jnp.stack([m.forces_of(m.params, s) for m in models])  # (M, n, 3)
        var = jnp.var(F, axis=0)
        n = jnp.maximum(jnp.sum(s.mask), 1).astype(F.dtype)
        return jnp.sum(var) / n

    return loss


def targeted_energy(model: Model, target_ev: float) -> Loss:
    """J = −(E − E*)² (eV²); ascent drives E toward ``target_ev``."""

    def loss(s: Structure) -> jax.Array:
        d = model.energy_of(model.params, s) - target_ev
        return -d * d

    return loss


_SINGLE = {"energy": energy, "force_norm": force_norm}


def get(name: str, model: Model) -> Loss:
    """A single-model loss by name: ``"energy"`` or ``"force_norm"``."""
    if name not in _SINGLE:
        raise ValueError(f"unknown loss {name!r}; single-model losses: {', '.join(sorted(_SINGLE))}")
    return _SINGLE[name](model)
