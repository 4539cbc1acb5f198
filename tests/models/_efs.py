"""Shared helpers for the many-body model tests: energy, forces and stress in one compiled call."""

import jax
import jax.numpy as jnp
from ase import Atoms

import jaxcert


def _structure(atoms: Atoms, dtype=jnp.float64) -> jaxcert.Structure:
    return jaxcert.Structure.from_ase(atoms, dtype=dtype)


@jax.jit
def _jit_efs(model, s):
    """E, F = −∂E/∂R and σ = (1/V) ∂E/∂ε (symmetric strain) from one backward pass."""

    def energy(R, eps):
        strained = jaxcert.strain(s.replace(positions=R), 0.5 * (eps + eps.T))
        return model.energy_of(model.params, strained if s.periodic else s.replace(positions=R))

    zero = jnp.zeros((3, 3), s.positions.dtype)
    e, (g, dE) = jax.value_and_grad(energy, argnums=(0, 1))(s.positions, zero)
    return e, -g * s.mask[:, None], (dE / s.volume if s.periodic else None)


def _efs(model, s):
    """(E, F, σ or None) in one compiled call per shape (prepare outside jit, as the bound methods do)."""
    return _jit_efs(model, model.prepare(s))


def _energy(model, s, R) -> float:
    """E at positions R (same shape as s: reuses the compiled call)."""
    return float(_efs(model, s.replace(positions=jnp.asarray(R, s.dtype)))[0])


def _strained_energy(model, s, eps) -> float:
    return float(_efs(model, jaxcert.strain(s, jnp.asarray(eps, s.dtype)))[0])
