"""Stress-head defects (docs/probes.md §8.2 BadStress, ParityBreakingStress): :func:`bad_stress`
(σ scaled by a constant) and :func:`parity_stress` (a parity-odd shear term). Energy and forces are
the clean model's.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxcert.core.geometry import inv3
from jaxcert.core.model import Model
from jaxcert.core.structure import Structure
from jaxcert.models.defects._base import atom_mask, fmt, wrap

__all__ = ["bad_stress", "parity_stress"]


def bad_stress(model: Model, factor: float = 1.4) -> Model:
    r"""Stress head scaled by a constant [docs/probes.md §8.2 BadStress].

    .. math::  \sigma \leftarrow f\,\sigma = (1 + \text{strength})\,\sigma

    Energy and forces untouched.  The knob leaf is ``"strength"`` = f − 1 (so
    strength 0, f = 1, is clean); ``factor`` is dimensionless.

    Breaks: σ = (1/V) ∂E/∂ε.  Must trip: stress_consistency (relative residual
    |f − 1|/f), cross_maxwell (Λ block: V∂σ/∂R is scaled, −∂F/∂γ is not; the
    relaxed cell is the clean one since fσ = 0 ⇔ σ = 0).  Must not trip: every
    other probe (parity: fσ of the image equals fσ; nothing else reads the
    stress).
    """

    def smap(params: dict, s: Structure, sigma: jax.Array) -> jax.Array:
        return (1.0 + params["strength"].astype(sigma.dtype)) * sigma

    knobs = {"strength": jnp.asarray(float(factor) - 1.0)}
    return wrap(model, f"bad_stress({fmt(factor)})", knobs, identity="stress = (1/V) dE/d(strain)",
                 stress_map=smap)


def parity_stress(model: Model, strength: float = 0.02) -> Model:
    r"""Parity-odd shear stress [docs/probes.md §8.2 ParityBreakingStress].

    .. math::  \sigma_{xy} = \sigma_{yx} \mathrel{+}= a \sum_i \sin(2\pi f_{i3}),\qquad f = R\,h^{-1},

    odd under the fractional inversion f → (1 − f) mod 1 of the parity probe.
    Energy, forces and the other stress components untouched.

    Args:
      strength: a in eV/Å³ (leaf ``"strength"``).

    Breaks: the improper-symmetry rule σ(−R) = σ(R) of the stress head (and its
    consistency with the energy).  Must trip: parity (only the improper channel
    σ_xy; σ_xz and σ_yz stay clean), cross_maxwell (Λ block, xy column).  Must
    not trip: every energy/force probe (equivariance, representation,
    zero_modes, trimer, conservativeness, betti, lam, reversibility,
    config_temperature, virial, equipartition, smoothness).  Neither:
    stress_consistency (the term vanishes when Σ sin(2π f₃) = 0, e.g. a one-atom
    bulk cell at the origin, and is seen otherwise).
    """

    def smap(params: dict, s: Structure, sigma: jax.Array) -> jax.Array:
        dt = sigma.dtype
        f = s.positions @ inv3(s.cell)
        extra = params["strength"].astype(dt) * jnp.sum(atom_mask(s) * jnp.sin(2.0 * jnp.pi * f[:, 2]))
        e = jnp.zeros((3, 3), dt).at[0, 1].set(1.0).at[1, 0].set(1.0)
        return sigma + extra * e

    knobs = {"strength": jnp.asarray(float(strength))}
    return wrap(model, f"parity_stress({fmt(strength)})", knobs, identity="parity of the stress head",
                 stress_map=smap)
