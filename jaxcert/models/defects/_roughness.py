"""Defects of the regularity of the surface (docs/probes.md §8.2): :func:`ripple` (a high-frequency
ripple on every pair), :func:`kinked` (a force step, C¹ broken), :func:`step` (an energy step, C⁰
broken, what a hard cutoff does) and :func:`noise` (forces that are not a smooth function of the positions).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxcert.core.model import Model
from jaxcert.core.structure import Structure
from jaxcert.models._common import pair_sum
from jaxcert.models.defects._base import Length, atom_mask, fmt, pairs_within, wrap
from jaxcert.models.morse import quintic_cutoff

__all__ = ["ripple", "kinked", "step", "noise"]


def ripple(model: Model, amplitude: float = 0.01, wavelength: float = 0.1, cutoff: float | None = None) -> Model:
    r"""High-frequency ripple on every pair within the cutoff.

    .. math::  E \mathrel{+}= A \sum_{i<j} \sin(2\pi r_{ij}/\lambda)\, f_c(r_{ij}),

    f_c the C² quintic switch from 0.8 r_c to r_c.  Conservative, E(3)- and
    permutation-invariant, pairwise, extensive and C^∞ below 0.8 r_c, but the
    force oscillates with amplitude 2πA/λ (6.3 eV/Å at the defaults) on the
    length λ: a rugged surface with many spurious minima along any bond.

    Args:
      amplitude: A in eV (leaf ``"strength"``).
      wavelength: λ in Å (leaf ``"wavelength"``); keep it above the scan's grid
        spacing (~0.01 Å) so the ripple is resolved.
      cutoff: r_c in Å; ``None`` → 1.5·d_nn (leaf ``"cutoff"``).

    Breaks: regularity of the bond scan (a single smooth well).  Must trip:
    smoothness.  Must not trip: equivariance, parity, representation, trimer
    (pairwise: ΔE₃ ≡ 0), conservativeness, betti, lam, stress_consistency,
    cross_maxwell, zero_modes (exact at any local minimum of E).  Neither:
    reversibility (a rugged surface amplifies round-off faster), config_temperature,
    virial, equipartition (trapping in ripple wells and strong anharmonicity make
    the finite-trajectory estimates depend on A against k_BT).
    """
    rc = Length(cutoff, 1.5, "cutoff")
    if not float(wavelength) > 0:
        raise ValueError(f"wavelength must be positive, got {wavelength}")

    def term(params: dict, s: Structure) -> jax.Array:
        dt = s.positions.dtype
        L = rc.of(params["cutoff"], s)
        p = pairs_within(s, L)
        lam = params["wavelength"].astype(dt)
        phi = jnp.sin(2.0 * jnp.pi * p.r / lam) * quintic_cutoff(p.r, 0.8 * L, L)
        return params["strength"].astype(dt) * pair_sum(phi, p)

    knobs = {"strength": jnp.asarray(float(amplitude)), "wavelength": jnp.asarray(float(wavelength)),
             "cutoff": rc.leaf()}
    return wrap(model, f"ripple({fmt(amplitude)},{fmt(wavelength)})", knobs,
                 identity="smoothness of the bond scan (high-frequency ripple)", energy_term=term, cutoff=rc.cutoff())


def kinked(model: Model, strength: float = 1.0, d0: float | None = None, width: float = 0.1) -> Model:
    r"""Pair kink: the force has a step of 2A at r = d₀ [docs/probes.md §8.2 Kinked].

    .. math::  E \mathrel{+}= A \sum_{i<j} \Big(|r_{ij} - d_0| - \sqrt{(r_{ij} - d_0)^2 + \delta^2}\Big)\, f_c(r_{ij}),
               \qquad F \text{ jumps by } 2A \text{ along the bond at } r = d_0.

    The non-smooth part is exactly docs/probes.md's A Σ|r − d₀|; the smooth
    counter-term −A√((r − d₀)² + δ²) cancels its linear growth away from d₀,
    so the defect is a V-shaped notch of depth Aδ and width ~δ (δ = ``width``)
    instead of a long-range linear pull on every pair that would swamp the
    clean model (≈ 25 eV on a 13-atom Si cluster at A = 0.5).  f_c, the C²
    quintic switch from 1.3 d₀ to 1.5 d₀, makes the sum converge in a crystal
    (the notch has decayed to < 1 % there).  Conservative (autodiff
    differentiates |·| as sign), E(3)- and permutation-invariant, pairwise,
    extensive; continuous energy, discontinuous force.

    Args:
      strength: A in eV/Å (leaf ``"strength"``).
      d0: kink position in Å; ``None`` → 1.05·d_nn, inside the smoothness scan
        [0.8 b, b + 0.5 Å] of a nearest-neighbour bond b (leaf ``"d0"``).
      width: δ in Å (leaf ``"width"``).

    Breaks: C¹ continuity of the energy (a force step).  Must trip: smoothness.
    Must not trip: equivariance, parity, representation, trimer (pairwise),
    conservativeness, betti and lam (exact derivatives are consistent
    everywhere off the kink), stress_consistency.  Neither: zero_modes and
    cross_maxwell (a relaxation may stop on the kink, where the Hessian is
    undefined), reversibility (claimed in docs/probes.md §8.4, not asserted),
    config_temperature (pointwise Hessians miss the 2Aδ(r − d₀) curvature, which
    matters only if pairs visit d₀), virial, equipartition.
    """
    d0_len = Length(d0, 1.05, "d0")
    if not float(width) > 0:
        raise ValueError(f"width must be positive, got {width}")

    def term(params: dict, s: Structure) -> jax.Array:
        dt = s.positions.dtype
        d = d0_len.of(params["d0"], s)
        delta = params["width"].astype(dt)
        p = pairs_within(s, 1.5 * d)
        x = p.r - d
        phi = (jnp.abs(x) - jnp.sqrt(x * x + delta * delta)) * quintic_cutoff(p.r, 1.3 * d, 1.5 * d)
        return params["strength"].astype(dt) * pair_sum(phi, p)

    knobs = {"strength": jnp.asarray(float(strength)), "d0": d0_len.leaf(), "width": jnp.asarray(float(width))}
    return wrap(model, f"kinked({fmt(strength)})", knobs, identity="C1 continuity (force step at d0)",
                 energy_term=term, cutoff=d0_len.cutoff(1.5))


def step(model: Model, strength: float = 0.05, r_step: float | None = None) -> Model:
    r"""Pair energy step: every pair closer than r_s costs A more, with no switching (C⁰ broken).

    .. math::  E \mathrel{+}= A \sum_{i<j} H(r_s - r_{ij}),
               \qquad E \text{ jumps by } -A \text{ when a pair stretches through } r = r_s.

    This is what a hard cutoff does to a pair potential φ (there A = φ(r_c) at r_s = r_c, docs/probes.md
    §4.17), isolated from everything else: autodiff differentiates the step as zero, so forces, stress,
    Hessians and every trajectory are the clean model's, and only energies of geometries on opposite
    sides of r_s see it.  Conservative in the sense of every derivative identity, E(3)- and
    permutation-invariant, pairwise, extensive; discontinuous energy.  In NVE molecular dynamics the
    total energy changes by ±A whenever a pair crosses r_s (Allen & Tildesley, *Computer Simulation of
    Liquids*, on truncated potentials).

    Args:
      strength: A in eV (leaf ``"strength"``), e.g. ``--defect step=0.01``.
      r_step: r_s in Å; ``None`` → 1.1·d_nn, inside the smoothness scan [0.8 b, b + 0.5 Å] of a
        nearest-neighbour bond b and away from the shells of the reference crystals (leaf ``"r_step"``).

    Breaks: C⁰ continuity of the energy along a bond (the regularity gate of docs/probes.md §4.17).
    Must trip: smoothness (the downward step of E as the scanned bond stretches through r_s is a
    spurious minimum when A exceeds the energy's rise over one grid step: 9.5 meV on the reference LJ of
    Si, hence the default 0.05 eV; at A = 0.01 the minimum is 0.5 meV deep there, and not there at all on
    Stillinger–Weber Si, whose rise is 21 meV, while the regularity gate of §4.17 reads 0.01 eV on both).
    Must not trip: every other probe (each one differentiates the energy, or compares energies of
    geometries with the same pair distances, or runs a trajectory on the unchanged forces).
    """
    rs = Length(r_step, 1.1, "r_step")

    def term(params: dict, s: Structure) -> jax.Array:
        dt = s.positions.dtype
        L = rs.of(params["r_step"], s)
        p = pairs_within(s, L)
        phi = jnp.where(p.r < jax.lax.stop_gradient(L), 1.0, 0.0).astype(dt)
        return params["strength"].astype(dt) * pair_sum(phi, p)

    knobs = {"strength": jnp.asarray(float(strength)), "r_step": rs.leaf()}
    return wrap(model, f"step({fmt(strength)})", knobs, identity="C0 continuity (energy step at r_step)",
                 energy_term=term, cutoff=rs.cutoff())


def noise(model: Model, strength: float = 0.1, seed: int = 0) -> Model:
    r"""Deterministic pseudo-random force noise keyed on the exact bits of the positions.

    .. math::  F_i \mathrel{+}= s\,\xi_i, \qquad \xi = \mathcal N(0, I_{3N})
               \text{ drawn with key } \mathrm{fold\_in}(\mathrm{key}(\mathrm{seed}),\ \mathrm{hash}(\mathrm{bits}(R)))

    The float bits of every coordinate are hashed (murmur3 finaliser) into a
    ``jax.random`` key.  Repeated calls on the same positions agree bit for bit,
    any move of any atom by one ulp redraws every ξ, and the field is not a
    gradient.  A model with genuine hidden state (an MD-history cache, a
    non-deterministic GPU reduction) cannot be written as a pure JAX function;
    this deterministic but everywhere-discontinuous head is the nearest honest
    equivalent: what a trajectory sees of such a model is a force that does not
    reproduce when a configuration is revisited up to round-off.  Energy and
    stress are unchanged.  The noise is piecewise constant on the lattice of
    floats, so its autodiff derivative is zero: exact Jacobians (jvp) see the
    clean model, finite differences see jumps of size ~s/h.

    Args:
      strength: s, standard deviation per component in eV/Å (leaf ``"strength"``).
      seed: static base seed.

    Breaks: forces that are a deterministic smooth function of the positions.
    Must trip: conservativeness (F_j·û ≠ −dE/ds by ~0.8 s on average),
    equivariance (F(QR) ≠ QF(R)), representation (permutation, translation and
    supercell redraw the noise), reversibility (the return path differs from the
    outward one in the last bits, so it receives other kicks), smoothness (the
    scanned force jumps at every grid point: jolt and tortuosity).  Must not trip:
    parity, stress_consistency (stress from the untouched energy).  Neither:
    betti, trimer (transverse), lam and cross_maxwell (blind with exact
    Jacobians, tripped with finite differences; cross_maxwell also relaxes),
    zero_modes (the relaxation cannot converge below s), config_temperature,
    virial, equipartition (the noise heats the system by an amount that depends
    on s against the thermal forces).
    """
    seed = int(seed)

    def term(params: dict, s: Structure) -> jax.Array:
        dt = s.positions.dtype
        key = jax.random.fold_in(jax.random.PRNGKey(seed), _bits_hash(s.positions))
        xi = jax.random.normal(key, s.positions.shape, dtype=dt)
        return params["strength"].astype(dt) * xi * atom_mask(s)[:, None]

    knobs = {"strength": jnp.asarray(float(strength))}
    return wrap(model, f"noise({fmt(strength)})", knobs,
                 identity="deterministic smooth forces (hidden-state proxy)", force_term=term)


def _fmix32(h: jax.Array) -> jax.Array:
    """murmur3 32-bit finaliser (uint32 arithmetic wraps)."""
    h = h ^ (h >> 16)
    h = h * jnp.uint32(0x85EBCA6B)
    h = h ^ (h >> 13)
    h = h * jnp.uint32(0xC2B2AE35)
    return h ^ (h >> 16)


def _bits_hash(x: jax.Array) -> jax.Array:
    """uint32 hash of the exact bit pattern of ``x`` (no gradient flows)."""
    x = jax.lax.stop_gradient(x)
    if x.dtype.itemsize == 8:
        words = jax.lax.bitcast_convert_type(x, jnp.uint32)
    elif x.dtype.itemsize == 4:
        words = jax.lax.bitcast_convert_type(x, jnp.uint32)
    else:
        words = jax.lax.bitcast_convert_type(x, jnp.uint16).astype(jnp.uint32)
    words = words.reshape(-1)
    idx = jnp.arange(words.shape[0], dtype=jnp.uint32)
    mixed = _fmix32(words ^ _fmix32(idx * jnp.uint32(0x9E3779B9) + jnp.uint32(1)))
    h = jax.lax.reduce(mixed, jnp.uint32(0), jax.lax.bitwise_xor, (0,))
    return _fmix32(h ^ jnp.sum(mixed, dtype=jnp.uint32))
