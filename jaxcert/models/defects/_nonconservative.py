"""Force heads that are not the gradient of any energy (docs/probes.md §8.2 NonConservative):
:func:`curl` (a fixed-axis rotational field) and :func:`nonintegrable` (equivariant pair forces
with per-atom weights whose Jacobian is not symmetric). Both break F = −∇E only.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from jaxcert.core.model import Model
from jaxcert.core.structure import Structure
from jaxcert.models.defects._base import Length, atom_mask, centroid, fmt, pairs_within, poly_cutoff, unit, wrap

__all__ = ["curl", "nonintegrable"]


def curl(model: Model, strength: float = 0.3, axis: Any = (0.0, 0.0, 1.0)) -> Model:
    r"""Non-conservative curl force head [docs/probes.md §8.2 NonConservative].

    .. math::  F_i \mathrel{+}= s\,\hat n \times (R_i - \bar R), \qquad \bar R = \tfrac1N \textstyle\sum_i R_i

    (unweighted mean over real atoms); energy and stress unchanged.  Its force
    Jacobian s[n̂]_× ⊗ (I − 𝟙𝟙ᵀ/N) is antisymmetric and trace-free: the field is
    not a gradient, and it exerts a net torque s·I_geom·n̂ on every configuration
    (I_geom = Σ|d|² − ddᵀ, d = R − R̄), so no force-free configuration exists.

    Args:
      strength: s in eV/Å² (leaf ``"strength"``).
      axis: n̂, any nonzero 3-vector, normalised (leaf ``"axis"``).

    Breaks: F = −∇E (Jacobian symmetry).  The fixed axis also makes the forces
    not rotation-equivariant, and R̄ makes them depend on the whole structure
    (not extensive, not invariant under rewrapping atoms into another cell).

    Must trip: lam, betti, trimer (transverse channel), cross_maxwell (Λ
    block), equivariance, representation (supercell and unimodular gauge:
    R − R̄ changes), zero_modes (no stationary point: the relaxation ends where
    ∇E ≠ 0, so H no longer annihilates rotations), config_temperature, virial,
    equipartition (the torque pumps rotational energy: no Boltzmann sampling).
    Must not trip: parity, stress_consistency (stress comes from the untouched
    energy), reversibility (smooth deterministic forces keep velocity Verlet
    reversible).  Neither: conservativeness (the collinear scan sees
    s n̂·((R_j − R̄) × û): 0.47 eV/Å on the production Si cluster at the default
    strength, but zero when the bond points through the centroid, as on the
    icosahedral fixture of docs/probes.md §8.4), smoothness (adds a constant to the
    scanned force, which may add a zero crossing).
    """
    a = jnp.asarray(axis, dtype=float)
    if a.shape != (3,) or not float(jnp.linalg.norm(a)) > 0:
        raise ValueError(f"axis must be a nonzero 3-vector, got {axis!r}")

    def term(params: dict, s: Structure) -> jax.Array:
        dt = s.positions.dtype
        n = unit(params["axis"], dt)
        d = s.positions - centroid(s)
        return params["strength"].astype(dt) * jnp.cross(n, d) * atom_mask(s)[:, None]

    knobs = {"strength": jnp.asarray(float(strength)), "axis": a}
    return wrap(model, f"curl({fmt(strength)})", knobs, identity="F = -grad E (curl force, fixed axis)",
                 force_term=term)


def nonintegrable(model: Model, strength: float = 1.0, cutoff: float | None = None) -> Model:
    r"""E(3)-equivariant, local, momentum-conserving direct force head that is not a gradient.

    .. math::  F_i \mathrel{+}= s \sum_j \tfrac12 (q_i + q_j)\, v(r_{ij})\, \hat r_{ij}, \qquad
               q_i = \Big|\sum_k v(r_{ik})\,\hat r_{ik}\Big|^2,\quad v(r) = (1 - r^2/r_c^2)^3,

    with r̂_ij pointing from i to j (s > 0 attracts) and q_i the squared polarity
    of atom i's environment.  The pair forces are central and antisymmetric, so
    Σ_i F_i = 0 and Σ_i R_i × F_i = 0 identically, and the head is equivariant
    under the full E(3), permutations and the lattice gauge, and extensive.
    The pair-force 1-form Σ g_ij dr_ij is not closed: ∂g_ij/∂R_k and ∂g_jk/∂R_i
    differ because the kernel v is not the derivative of the polarity kernel, so
    the Jacobian has an antisymmetric part.  The clean counterpart of
    :func:`curl`: it isolates the single identity F = −∇E.

    Symmetry caveat (group theory, checked numerically): for any equivariant,
    translation-invariant, momentum-conserving force field the Jacobian at the
    equilateral trimer is symmetric, because once translations are removed no
    irreducible representation of D₃h occurs twice among the remaining six
    modes.  The trimer probe's transverse channel is therefore blind to this
    whole class (it sees :func:`curl` only because its fixed axis breaks
    equivariance).

    Args:
      strength: s in eV/Å (leaf ``"strength"``).
      cutoff: r_c in Å; ``None`` → 2·d_nn (leaf ``"cutoff"``).

    Must trip: lam, betti, conservativeness (the scanned force gains
    F_nc,j·û, generically nonzero), cross_maxwell (Λ block).  The antisymmetric
    part is a modest fraction of the added force (λ ≈ 0.003–0.02 on 13-atom
    Si clusters at s = 1, 0.08 for Ar), so betti fires only for larger s on
    stiff elements.  Must not trip: equivariance, parity, representation,
    trimer (see the caveat; the energy is untouched), zero_modes (H_s still
    annihilates translations and rotations at a force-free point because
    momentum and angular momentum are conserved), stress_consistency,
    reversibility.  Neither: config_temperature, virial, equipartition (the
    stationary state is not Boltzmann but may be close), smoothness (a smooth
    force of any size is added to the scan).
    """
    rc = Length(cutoff, 2.0, "cutoff")

    def term(params: dict, s: Structure) -> jax.Array:
        dt = s.positions.dtype
        L = rc.of(params["cutoff"], s)
        p = pairs_within(s, L)
        _, v = poly_cutoff(p, L)
        rhat = p.dR / p.r[..., None]
        pol = jnp.sum(v[..., None] * rhat, axis=1)
        c = jnp.sum(pol * pol, axis=-1)
        g = 0.5 * (c[:, None] + c[p.j]) * v
        F = jnp.sum(g[..., None] * rhat, axis=1)
        return params["strength"].astype(dt) * F * atom_mask(s)[:, None]

    knobs = {"strength": jnp.asarray(float(strength)), "cutoff": rc.leaf()}
    return wrap(model, f"nonintegrable({fmt(strength)})", knobs,
                 identity="F = -grad E (equivariant non-integrable pair forces)",
                 force_term=term, cutoff=rc.cutoff())
