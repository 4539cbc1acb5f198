"""An intensive energy term where an extensive one belongs: :func:`nonextensive` (mean pooling,
docs/probes.md §8.2). Invariant under E(3) and permutations; breaks extensivity only.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxcert.core.model import Model
from jaxcert.core.structure import Structure
from jaxcert.models.defects._base import Length, atom_mask, fmt, pairs_within, poly_cutoff, wrap

__all__ = ["nonextensive"]


def nonextensive(model: Model, strength: float = 0.03, cutoff: float | None = None) -> Model:
    r"""Mean-pooled global term: the energy gains an *intensive* contribution.

    .. math::  E \mathrel{+}= c\,\langle\rho\rangle = \frac{c}{N}\sum_i \rho_i,\qquad
               \rho_i = \sum_j (1 - r_{ij}^2/r_c^2)^3,

    N the number of real atoms.  The readout bug of a network that mean-pools
    its features where it should sum them.  For a fixed N it is a smooth,
    E(3)- and permutation-invariant pair term of strength c/N, so every
    identity at fixed composition holds exactly; but an n-fold supercell has
    the same ⟨ρ⟩, so its extra energy per atom is n times smaller.  (A term
    like c(Σρ)²/N would not do: it scales as N and stays extensive.)  The
    1/N couples every atom to the size of the system, so the many-body
    expansion does not terminate: a pair at fixed distance contributes
    differently in a dimer and in a trimer.

    Args:
      strength: c in eV (leaf ``"strength"``); c > 0 adds a weak repulsion.
      cutoff: r_c in Å; ``None`` → 1.5·d_nn (leaf ``"cutoff"``).

    Breaks: extensivity (size consistency).  Must trip: representation (the
    supercell sub-test; energy per atom and forces), trimer (ΔE₃ tends to
    −(c/3)·ρ_CA ≠ 0 at large separation).  Must not trip: equivariance,
    parity, zero_modes, conservativeness, betti, lam, stress_consistency,
    cross_maxwell, reversibility, config_temperature, virial, equipartition,
    smoothness (a weak smooth pair term at the default strength).
    """
    rc = Length(cutoff, 1.5, "cutoff")

    def term(params: dict, s: Structure) -> jax.Array:
        dt = s.positions.dtype
        L = rc.of(params["cutoff"], s)
        p = pairs_within(s, L)
        _, w = poly_cutoff(p, L)
        n_real = jnp.sum(atom_mask(s))
        return params["strength"].astype(dt) * jnp.sum(w) / n_real

    knobs = {"strength": jnp.asarray(float(strength)), "cutoff": rc.leaf()}
    return wrap(model, f"nonextensive({fmt(strength)})", knobs, identity="extensivity (mean pooling)",
                 energy_term=term, cutoff=rc.cutoff())
