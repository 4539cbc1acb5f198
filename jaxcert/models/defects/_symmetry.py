"""Energy terms that break one symmetry of the energy (docs/probes.md §8.2 SymmetryBreaking):
:func:`orientation` (rotations), :func:`chirality` (improper rotations only) and :func:`eggbox`
(continuous translations). Each is an energy term, so forces and stress stay its exact derivatives.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxcert.core.geometry import det3, inv3
from jaxcert.core.model import Model
from jaxcert.core.structure import Structure
from jaxcert.models.defects._base import Length, atom_mask, fmt, pairs_within, poly_cutoff, unit, wrap

__all__ = ["orientation", "chirality", "eggbox"]


def orientation(model: Model, strength: float = 0.2, axis: Any = (1.0, 1.0, 1.0)) -> Model:
    r"""One-body orientation/position term [docs/probes.md §8.2 SymmetryBreaking].

    .. math::  E \mathrel{+}= c \sum_i (R_i\cdot\hat n)^2, \qquad F_i \mathrel{-}= 2c\,(R_i\cdot\hat n)\,\hat n

    An external harmonic field about the plane R·n̂ = 0 through the origin:
    conservative and smooth, but it depends on absolute position and orientation.

    Args:
      strength: c in eV/Å² (leaf ``"strength"``).
      axis: n̂, normalised (leaf ``"axis"``).

    Breaks: invariance of E under the Euclidean group (translations, rotations).
    Must trip: equivariance, zero_modes (translations along n̂ and rotations gain
    curvature 2c), trimer (the one-body term survives in ΔE₃ as
    −Σ c(R·n̂)² + 3c(R_centre·n̂)², growing as B recedes), representation
    (translation, supercell and rewrapping move atoms in the field), parity (the
    probe inverts through the cell centre, not the origin).  Must not trip:
    conservativeness, betti, lam, stress_consistency, cross_maxwell (all
    derivatives come from one energy), reversibility.  Neither: smoothness (the
    field tilts the scanned force by a position-dependent constant, which can
    add or remove a zero crossing), config_temperature, virial, equipartition
    (the field confines the centre of mass and the rotations, which the MD
    protocol assumes free).
    """
    a = jnp.asarray(axis, dtype=float)
    if a.shape != (3,) or not float(jnp.linalg.norm(a)) > 0:
        raise ValueError(f"axis must be a nonzero 3-vector, got {axis!r}")

    def term(params: dict, s: Structure) -> jax.Array:
        dt = s.positions.dtype
        n = unit(params["axis"], dt)
        proj = s.positions @ n
        return params["strength"].astype(dt) * jnp.sum(atom_mask(s) * proj * proj)

    knobs = {"strength": jnp.asarray(float(strength)), "axis": a}
    return wrap(model, f"orientation({fmt(strength)})", knobs,
                 identity="Euclidean invariance (external orienting field)", energy_term=term)


#: radial contrast of the two tensors of :func:`chirality` (f₂ = f_c e^{−κx}, f₃ = f_c e^{κx}).
_CHI_KAPPA = 4.0


def chirality(model: Model, strength: float = 10.0, cutoff: float | None = None) -> Model:
    r"""A pseudoscalar (parity-odd) energy: invariant under proper rotations, odd under inversion.

    .. math::  E \mathrel{+}= A \sum_i \mathbf v_i\cdot \mathrm{ax}\big([\mathsf T_i, \mathsf U_i]\big),\quad
       \mathbf v_i = \sum_j f_c\,\hat r_{ij},\
       \mathsf T_i = \sum_j f_c e^{-\kappa x_{ij}}\,\hat r_{ij}\hat r_{ij}^{\mathsf T},\
       \mathsf U_i = \sum_j f_c e^{\kappa x_{ij}}\,\hat r_{ij}\hat r_{ij}^{\mathsf T},

    with x = r/r_c, f_c = (1 − x²)³ (C² at r_c), κ = 4, and ax(C)_a = ε_abc C_bc
    the axial vector of the antisymmetric commutator.  [T, U] = Σ_{j<k}
    2 f_c,j f_c,k sinh(κ(x_k − x_j)) [P_j, P_k] (P = r̂r̂ᵀ) weighs pairs of
    neighbours at different distances.  Under an orthogonal Q, v → Qv,
    T → QTQᵀ and ax([T,U]) → det(Q)·Q·ax([T,U]), so each atomic term is
    multiplied by det Q: invariant under proper rotations, translations,
    permutations and lattice gauge, odd under inversion and mirrors.  Smooth,
    local, extensive, conservative (forces and stress are its exact derivatives).
    A triple product of three neighbour *vectors* would not do: at a site of
    symmetry mm2 all polar vectors are parallel to the two-fold axis and such a
    determinant and its first derivatives vanish, whereas v·ax([T, U]) is linear
    in the shear that the mirrors forbid.  Any three points are coplanar, so the
    term vanishes identically for one, two or three atoms.

    On the Pmm2 substrate (docs/probes.md §2.5) every site has symmetry mm2: the term
    and its forces vanish, the C₂z-odd shears σ_xz, σ_yz and the diagonal
    stresses are unchanged, and only σ_xy (even under C₂z, odd under the
    mirrors) moves: a model that is SE(3)- but not E(3)-invariant.

    Args:
      strength: A in eV (leaf ``"strength"``).
      cutoff: r_c in Å; ``None`` → 2·d_nn (leaf ``"cutoff"``).

    Breaks: invariance under improper operations (parity).  Must trip: parity
    (d_P ≈ 0.03 for Si at the default A = 10 eV, gate 5e-3).  Must not trip:
    every other probe except smoothness (equivariance uses proper rotations
    only; trimer: three atoms are achiral, ΔE₃ ≡ 0; the cluster's dynamics and
    Hessian are those of a smooth invariant conservative model; λ, betti and
    conservativeness hold exactly).  Neither: smoothness (on a generic cluster
    the term is first order and its forces are ~0.1 eV/Å at the default, which
    dominates the bond scan of weakly bound elements such as Ar).
    """
    rc = Length(cutoff, 2.0, "cutoff")

    def term(params: dict, s: Structure) -> jax.Array:
        dt = s.positions.dtype
        L = rc.of(params["cutoff"], s)
        p = pairs_within(s, L)
        x, fc = poly_cutoff(p, L)
        rhat = p.dR / p.r[..., None]
        outer = rhat[..., :, None] * rhat[..., None, :]
        f2, f3 = fc * jnp.exp(-_CHI_KAPPA * x), fc * jnp.exp(_CHI_KAPPA * x)
        v = jnp.sum(fc[..., None] * rhat, axis=1)
        T = jnp.sum(f2[..., None, None] * outer, axis=1)
        U = jnp.sum(f3[..., None, None] * outer, axis=1)
        C = T @ U - U @ T
        ax = jnp.stack([C[:, 1, 2] - C[:, 2, 1], C[:, 2, 0] - C[:, 0, 2], C[:, 0, 1] - C[:, 1, 0]], axis=-1)
        chi = jnp.sum(v * ax, axis=-1)
        return params["strength"].astype(dt) * jnp.sum(atom_mask(s) * chi)

    knobs = {"strength": jnp.asarray(float(strength)), "cutoff": rc.leaf()}
    return wrap(model, f"chirality({fmt(strength)})", knobs, identity="invariance under improper rotations",
                 energy_term=term, cutoff=rc.cutoff())


#: integer reciprocal-lattice coordinates m ≠ 0 with |m_a| ≤ 4 (static).
_EGG_K = 4
_EGG_M = np.array([m for m in np.ndindex(*(2 * _EGG_K + 1,) * 3)], dtype=np.float64) - _EGG_K
_EGG_M = _EGG_M[np.any(_EGG_M != 0, axis=1)]
#: width of the reciprocal-lattice weights in units of 2π/V^{1/3}.
_EGG_Q0 = 0.5


def eggbox(model: Model, strength: float = 0.05, period: float | None = None, grid: int = 1) -> Model:
    r"""Egg-box term: a smooth potential periodic with a lattice fixed in space.

    .. math::  E \mathrel{+}= A \sum_i \sum_{G \in \Lambda^*,\, G \ne 0} \hat w_G \cos(G\cdot R_i),\qquad
       \hat w_G = \frac{e^{-q_G^2/2q_0^2}}{\sum_{G'} e^{-q_{G'}^2/2q_0^2}},\quad
       q_G = \frac{|G|\,(V/g^3)^{1/3}}{2\pi},\ q_0 = \tfrac12,

    summed over the reciprocal lattice Λ* of the grid h/g (g = ``grid``, |m_a| ≤ 4
    in the integer basis).  For a periodic structure h is the cell, so the term
    is lattice-periodic (rewrapping an atom leaves it unchanged) and depends on
    the lattice only through the set of G vectors and the volume: it is the same
    for every unimodular choice of basis (up to the truncation, ~1e-12 relative
    for a cubic cell) and rotates with the cell.  For a non-periodic structure (a vacuum box is
    bookkeeping of arbitrary size) the grid is cubic with lattice constant
    ``period``.  Per-atom amplitude ≤ A (reached at lattice points); even under
    R → −R, so parity-image stresses are unchanged.  The analogue of the egg-box
    effect of real-space grids in electronic-structure codes.

    Args:
      strength: A in eV per atom (leaf ``"strength"``).
      period: lattice constant of the cubic grid for non-periodic structures, Å;
        ``None`` → 1.0·d_nn (leaf ``"period"``).
      grid: static subdivision g of the cell for periodic structures.

    Breaks: translation invariance (the energy depends on where the atoms sit
    relative to a grid).  At the default A = 0.05 eV the translational residual
    ‖H T‖/‖H‖ of the Si cluster is 1.4e-3 (zero_modes gate 1e-3, scale 5e-3;
    0.05 for Ar).  A cell-defined periodic field cannot also be
    invariant under the change to a supercell (whose reciprocal lattice is
    finer), so the supercell comparison moves too.  Must trip: representation
    (translation and supercell sub-tests), equivariance (the cluster turns
    within a fixed grid), zero_modes (translations gain curvature), trimer (the
    one-body term survives in ΔE₃ and oscillates as B recedes).  Must not trip:
    parity, conservativeness, betti, lam, stress_consistency, cross_maxwell,
    reversibility.  Neither: smoothness (a smooth tilt of the scan whose effect
    on zero crossings depends on the element), config_temperature, virial,
    equipartition (the grid confines the centre of mass, which the MD protocol
    assumes free).
    """
    per = Length(period, 1.0, "period")
    grid = int(grid)
    if grid < 1:
        raise ValueError(f"grid must be a positive integer, got {grid}")

    def term(params: dict, s: Structure) -> jax.Array:
        dt = s.positions.dtype
        if s.periodic:
            h = s.cell / grid
        else:
            h = per.of(params["period"], s) * jnp.eye(3, dtype=dt)
        hinv = inv3(h)
        m = jnp.asarray(_EGG_M, dt)
        G = 2.0 * jnp.pi * m @ hinv.T  # rows: G_m = 2π h^{-1} m
        q = jnp.linalg.norm(G, axis=1) * jnp.abs(det3(h)) ** (1.0 / 3.0) / (2.0 * jnp.pi)
        w = jnp.exp(-0.5 * (q / _EGG_Q0) ** 2)
        w = w / jnp.sum(w)
        phase = s.positions @ G.T  # (n, nG)
        per_atom = jnp.cos(phase) @ w
        return params["strength"].astype(dt) * jnp.sum(atom_mask(s) * per_atom)

    knobs = {"strength": jnp.asarray(float(strength)), "period": per.leaf()}
    return wrap(model, f"eggbox({fmt(strength)})", knobs, identity="translation invariance (egg-box grid)",
                 energy_term=term, cutoff=None)
