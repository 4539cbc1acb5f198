r"""Defect wrappers: models that break exactly one physical identity, by a tunable amount.

Each factory ``f(model, strength=..., ...) -> Model`` wraps a clean model and
adds one defect.  Conventions shared by all of them:

* **Knobs are parameter leaves.**  The wrapped model's ``params`` is a dict
  ``{"inner": <clean params>, "strength": <array>, ...}`` (further continuous
  knobs such as an axis or a length are leaves too), so a knob can be swept
  under ``jit`` or ``vmap`` without recompiling: see :func:`with_knobs`.
* **strength 0 is the clean model**, to the last bit for energies and forces
  (the defect enters as ``strength · term`` with a finite term).  For
  :func:`bad_stress` the knob is ``factor`` and ``factor = 1`` is clean.
* **Heads are kept consistent.**  An energy defect adds its exact gradient to an
  inner direct force head and its exact strain derivative to an inner stress
  head; without inner heads the wrapper has none either (forces = −∇E,
  stress = (1/V) ∂E/∂ε).  So a conservative defect never makes a model
  non-conservative by accident.
* **Lengths.**  A length knob given as ``None`` is *element-adaptive*: a multiple
  of the nearest-neighbour distance d_nn of the reference crystal
  (:func:`jaxcert.elements.d_nn`, averaged over the species present, as the
  reference Lennard-Jones does for σ), so one default serves every element.  A
  float is taken in Å.  The wrapper's ``cutoff`` is the larger of the inner
  model's and the defect's, so :meth:`Model.prepare` counts enough images.
* **Names** read ``"<inner>+<defect>(<knob>)"``, e.g. ``"lj+curl(0.3)"``.

:data:`expected_probes` maps each defect to ``(must_trip, must_not_trip)``
probe names (docs/probes.md §4, plus ``"lambda"``, the ‖J_anti‖/‖J‖ benchmark of
seed 002).  Their meaning:

* **must_trip**: the identity the probe certifies is violated at first order in
  the knob on the probe's default substrate, so the probe's defect rises from
  the clean floor in proportion to the strength.  The defaults are sized so that
  the probe fires on the reference LJ of Si (docs/probes.md §7; weakly bound
  elements such as Ar fire more), except betti for curl and nonintegrable,
  whose small antisymmetric Jacobian entries need a larger strength.  A probe
  that samples a few Jacobian or strain entries (betti, cross_maxwell) sees the
  defect with high probability, not certainty.
* **must_not_trip**: the identity holds exactly for every strength (or, for the
  statistical probes config_temperature, virial and equipartition, holds in the
  long-trajectory limit with the same assumptions as for the clean model), so
  the probe stays at the clean model's value up to round-off or sampling noise.
* a probe in **neither** list depends on geometry, element, engine (exact
  autodiff vs finite differences) or relaxer; each docstring says why.

The defects (docs/probes.md §8.2 names in brackets):

=================  =======================================================  ====================
name               term                                                     broken identity
=================  =======================================================  ====================
curl               F_i += s n̂ × (R_i − R̄)  [NonConservative]               F = −∇E (fixed axis)
nonintegrable      F_i += s Σ_j ½(q_i + q_j) v(r_ij) r̂_ij                   F = −∇E only
orientation        E += c Σ_i (R_i·n̂)²  [SymmetryBreaking]                  E(3) invariance
chirality          E += A Σ_i v_i · ax([T_i, U_i])                         improper rotations
eggbox             E += A Σ_i Σ_G ŵ_G cos(G·R_i)                           translation
nonextensive       E += c ⟨ρ⟩  (mean-pooled density)                        extensivity
bad_stress         σ ← factor·σ  [BadStress]                                σ = (1/V)∂E/∂ε
parity_stress      σ_xy += a Σ_i sin(2π z_i^frac)  [ParityBreakingStress]   stress parity
ripple             E += A Σ_pairs sin(2π r/λ) f_c(r)                        bond-scan regularity
kinked             E += A Σ_pairs (|r − d₀| − smooth) f_c(r)  [Kinked]       C¹ continuity
noise              F_i += s ξ_i(bits of R)                                  deterministic smooth F
=================  =======================================================  ====================
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxcert.elements import d_nn
from jaxcert.geometry import det3, inv3
from jaxcert.model import Model, strain
from jaxcert.models._common import N_Z, pair_sum, presence
from jaxcert.models.morse import quintic_cutoff
from jaxcert.neighbors import Pairs, pairs
from jaxcert.structure import Structure

__all__ = [
    "curl", "nonintegrable", "orientation", "chirality", "eggbox", "nonextensive", "bad_stress",
    "parity_stress", "ripple", "kinked", "noise", "with_knobs", "DEFECTS", "PROBE_NAMES", "expected_probes",
]

#: Probe names of docs/probes.md §4 plus the λ = ‖J_anti‖/‖J‖ conservativeness benchmark.
PROBE_NAMES: tuple[str, ...] = (
    "equivariance", "parity", "representation", "zero_modes", "trimer", "conservativeness", "betti",
    "stress_consistency", "cross_maxwell", "reversibility", "config_temperature", "virial", "equipartition",
    "smoothness", "lambda",
)

# --------------------------------------------------------------------------- helpers


@functools.lru_cache(maxsize=1)
def _dnn_table() -> np.ndarray:
    """(N_Z,) reference nearest-neighbour distance d_nn(Z) in Å (shared cache with the reference LJ)."""
    table = np.ones(N_Z)
    for z in range(1, N_Z):
        table[z] = d_nn(z)
    return table


class _Length:
    """A length knob: ``value`` Å, or ``value``·d_nn(species) when ``relative`` (static flag)."""

    def __init__(self, value: float | None, default_rel: float, name: str):
        self.relative = value is None
        self.value = float(default_rel if value is None else value)
        self.name = name
        if self.value <= 0:
            raise ValueError(f"{name} must be positive, got {self.value}")

    def leaf(self) -> jax.Array:
        return jnp.asarray(self.value)

    def of(self, leaf: jax.Array, s: Structure) -> jax.Array:
        """The length in Å for structure ``s`` (traceable)."""
        dt = s.positions.dtype
        if not self.relative:
            return leaf.astype(dt)
        pres = presence(s.numbers, s.mask, dt)
        dnn = jnp.sum(pres * jnp.asarray(_dnn_table(), dt)) / jnp.sum(pres)
        return leaf.astype(dt) * dnn

    def numeric(self, numbers: np.ndarray) -> float:
        """The length in Å for concrete atomic numbers (sizes periodic images)."""
        if not self.relative:
            return self.value
        z = np.unique(np.asarray(numbers))
        return self.value * float(np.mean(_dnn_table()[z]))

    def cutoff(self, factor: float = 1.0) -> float | Callable[[np.ndarray], float]:
        """``factor`` × the length, as a Model cutoff (a callable of the numbers when relative)."""
        if not self.relative:
            return factor * self.value
        return lambda numbers: factor * self.numeric(numbers)


def _combine_cutoff(a: Any, b: Any) -> Any:
    """The larger of two Model cutoffs (floats, callables of the numbers, or None)."""
    if a is None:
        return b
    if b is None:
        return a
    if not callable(a) and not callable(b):
        return max(float(a), float(b))

    def cutoff(numbers: np.ndarray) -> float:
        return max(float(c(numbers)) if callable(c) else float(c) for c in (a, b))

    return cutoff


def _pairs(s: Structure, rc: jax.Array) -> Pairs:
    # the cutoff only sizes images and checks their coverage: a constant is enough
    return pairs(s, jax.lax.stop_gradient(rc))


def _poly_cutoff(p: Pairs, rc: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(x = r/r_c, (1 − x²)³ inside the cutoff else 0): a C² radial window on real pairs."""
    x = p.r / rc
    inside = p.mask & (x < 1.0)
    return x, jnp.where(inside, (1.0 - x * x) ** 3, 0.0)


def _mask(s: Structure) -> jax.Array:
    return s.mask.astype(s.positions.dtype)


def _unit(axis: jax.Array, dt: Any) -> jax.Array:
    axis = axis.astype(dt)
    return axis / jnp.linalg.norm(axis)


def _centroid(s: Structure) -> jax.Array:
    m = _mask(s)
    return jnp.sum(s.positions * m[:, None], axis=0) / jnp.sum(m)


def _energy_stress(fn: Callable[[Any, Structure], jax.Array], params: Any, s: Structure) -> jax.Array:
    """(1/V) ∂fn/∂ε at ε = 0 (symmetric strain), eV/Å³."""
    zero = jnp.zeros((3, 3), s.positions.dtype)
    g = jax.grad(lambda e: fn(params, strain(s, 0.5 * (e + e.T))))(zero)
    return g / jnp.abs(det3(s.cell))


def _fmt(x: float) -> str:
    return f"{float(x):g}"


def _wrap(
    model: Model,
    tag: str,
    knobs: dict[str, jax.Array],
    *,
    identity: str,
    energy_term: Callable[[dict, Structure], jax.Array] | None = None,
    force_term: Callable[[dict, Structure], jax.Array] | None = None,
    stress_map: Callable[[dict, Structure, jax.Array], jax.Array] | None = None,
    cutoff: Any = None,
) -> Model:
    """Build the defect model from the pieces (all callables take the full params dict)."""
    inner = model

    def energy(params: dict, s: Structure) -> jax.Array:
        E = inner.energy_fn(params["inner"], s)
        if energy_term is not None:
            E = E + energy_term(params, s)
        return E

    forces_fn = None
    if inner.forces_fn is not None or force_term is not None:

        def forces_fn(params: dict, s: Structure) -> jax.Array:
            if inner.forces_fn is None and energy_term is not None:
                F = -jax.grad(lambda R: energy(params, s.replace(positions=R)))(s.positions)
            else:
                F = inner.forces_of(params["inner"], s)
                if energy_term is not None:
                    F = F - jax.grad(lambda R: energy_term(params, s.replace(positions=R)))(s.positions)
            if force_term is not None:
                F = F + force_term(params, s)
            return F

    stress_fn = None
    if inner.stress_fn is not None or stress_map is not None:

        def stress_fn(params: dict, s: Structure) -> jax.Array:
            if inner.stress_fn is None and energy_term is not None:
                sigma = _energy_stress(energy, params, s)
            else:
                sigma = inner.stress_of(params["inner"], s)
                if energy_term is not None:
                    sigma = sigma + _energy_stress(energy_term, params, s)
            if stress_map is not None:
                sigma = stress_map(params, s, sigma)
            return sigma

    return Model(
        energy_fn=energy,
        forces_fn=forces_fn,
        stress_fn=stress_fn,
        params={"inner": inner.params, **knobs},
        name=f"{inner.name}+{tag}",
        cutoff=_combine_cutoff(inner.cutoff, cutoff),
        elements=inner.elements,
        info=(*inner.info, ("defect", tag), ("breaks", identity)),
    )


def with_knobs(model: Model, **knobs: Any) -> Model:
    """The defect model with some knob leaves replaced (e.g. ``with_knobs(m, strength=0.0)``).

    Works inside ``jit``/``vmap`` (values may be traced); the static ``name`` keeps
    the construction-time value.  Unknown knob names raise ``KeyError``.
    """
    params = dict(model.params)
    for k, v in knobs.items():
        if k not in params or k == "inner":
            raise KeyError(f"{model.name!r} has no knob {k!r}; knobs: {sorted(set(params) - {'inner'})}")
        params[k] = jnp.asarray(v)
    return model.replace(params=params)


# --------------------------------------------------------------------------- force heads


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

    Must trip: lambda, betti, trimer (transverse channel), cross_maxwell (Λ
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
        n = _unit(params["axis"], dt)
        d = s.positions - _centroid(s)
        return params["strength"].astype(dt) * jnp.cross(n, d) * _mask(s)[:, None]

    knobs = {"strength": jnp.asarray(float(strength)), "axis": a}
    return _wrap(model, f"curl({_fmt(strength)})", knobs, identity="F = -grad E (curl force, fixed axis)",
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

    Must trip: lambda, betti, conservativeness (the scanned force gains
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
    rc = _Length(cutoff, 2.0, "cutoff")

    def term(params: dict, s: Structure) -> jax.Array:
        dt = s.positions.dtype
        L = rc.of(params["cutoff"], s)
        p = _pairs(s, L)
        _, v = _poly_cutoff(p, L)
        rhat = p.dR / p.r[..., None]
        pol = jnp.sum(v[..., None] * rhat, axis=1)
        c = jnp.sum(pol * pol, axis=-1)
        g = 0.5 * (c[:, None] + c[p.j]) * v
        F = jnp.sum(g[..., None] * rhat, axis=1)
        return params["strength"].astype(dt) * F * _mask(s)[:, None]

    knobs = {"strength": jnp.asarray(float(strength)), "cutoff": rc.leaf()}
    return _wrap(model, f"nonintegrable({_fmt(strength)})", knobs,
                 identity="F = -grad E (equivariant non-integrable pair forces)",
                 force_term=term, cutoff=rc.cutoff())


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
    betti, trimer (transverse), lambda and cross_maxwell (blind with exact
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
        return params["strength"].astype(dt) * xi * _mask(s)[:, None]

    knobs = {"strength": jnp.asarray(float(strength))}
    return _wrap(model, f"noise({_fmt(strength)})", knobs,
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


# --------------------------------------------------------------------------- energy terms


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
    conservativeness, betti, lambda, stress_consistency, cross_maxwell (all
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
        n = _unit(params["axis"], dt)
        proj = s.positions @ n
        return params["strength"].astype(dt) * jnp.sum(_mask(s) * proj * proj)

    knobs = {"strength": jnp.asarray(float(strength)), "axis": a}
    return _wrap(model, f"orientation({_fmt(strength)})", knobs,
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
    rc = _Length(cutoff, 2.0, "cutoff")

    def term(params: dict, s: Structure) -> jax.Array:
        dt = s.positions.dtype
        L = rc.of(params["cutoff"], s)
        p = _pairs(s, L)
        x, fc = _poly_cutoff(p, L)
        rhat = p.dR / p.r[..., None]
        outer = rhat[..., :, None] * rhat[..., None, :]
        f2, f3 = fc * jnp.exp(-_CHI_KAPPA * x), fc * jnp.exp(_CHI_KAPPA * x)
        v = jnp.sum(fc[..., None] * rhat, axis=1)
        T = jnp.sum(f2[..., None, None] * outer, axis=1)
        U = jnp.sum(f3[..., None, None] * outer, axis=1)
        C = T @ U - U @ T
        ax = jnp.stack([C[:, 1, 2] - C[:, 2, 1], C[:, 2, 0] - C[:, 0, 2], C[:, 0, 1] - C[:, 1, 0]], axis=-1)
        chi = jnp.sum(v * ax, axis=-1)
        return params["strength"].astype(dt) * jnp.sum(_mask(s) * chi)

    knobs = {"strength": jnp.asarray(float(strength)), "cutoff": rc.leaf()}
    return _wrap(model, f"chirality({_fmt(strength)})", knobs, identity="invariance under improper rotations",
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
    parity, conservativeness, betti, lambda, stress_consistency, cross_maxwell,
    reversibility.  Neither: smoothness (a smooth tilt of the scan whose effect
    on zero crossings depends on the element), config_temperature, virial,
    equipartition (the grid confines the centre of mass, which the MD protocol
    assumes free).
    """
    per = _Length(period, 1.0, "period")
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
        return params["strength"].astype(dt) * jnp.sum(_mask(s) * per_atom)

    knobs = {"strength": jnp.asarray(float(strength)), "period": per.leaf()}
    return _wrap(model, f"eggbox({_fmt(strength)})", knobs, identity="translation invariance (egg-box grid)",
                 energy_term=term, cutoff=None)


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
    parity, zero_modes, conservativeness, betti, lambda, stress_consistency,
    cross_maxwell, reversibility, config_temperature, virial, equipartition,
    smoothness (a weak smooth pair term at the default strength).
    """
    rc = _Length(cutoff, 1.5, "cutoff")

    def term(params: dict, s: Structure) -> jax.Array:
        dt = s.positions.dtype
        L = rc.of(params["cutoff"], s)
        p = _pairs(s, L)
        _, w = _poly_cutoff(p, L)
        n_real = jnp.sum(_mask(s))
        return params["strength"].astype(dt) * jnp.sum(w) / n_real

    knobs = {"strength": jnp.asarray(float(strength)), "cutoff": rc.leaf()}
    return _wrap(model, f"nonextensive({_fmt(strength)})", knobs, identity="extensivity (mean pooling)",
                 energy_term=term, cutoff=rc.cutoff())


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
    (pairwise: ΔE₃ ≡ 0), conservativeness, betti, lambda, stress_consistency,
    cross_maxwell, zero_modes (exact at any local minimum of E).  Neither:
    reversibility (a rugged surface amplifies round-off faster), config_temperature,
    virial, equipartition (trapping in ripple wells and strong anharmonicity make
    the finite-trajectory estimates depend on A against k_BT).
    """
    rc = _Length(cutoff, 1.5, "cutoff")
    if not float(wavelength) > 0:
        raise ValueError(f"wavelength must be positive, got {wavelength}")

    def term(params: dict, s: Structure) -> jax.Array:
        dt = s.positions.dtype
        L = rc.of(params["cutoff"], s)
        p = _pairs(s, L)
        lam = params["wavelength"].astype(dt)
        phi = jnp.sin(2.0 * jnp.pi * p.r / lam) * quintic_cutoff(p.r, 0.8 * L, L)
        return params["strength"].astype(dt) * pair_sum(phi, p)

    knobs = {"strength": jnp.asarray(float(amplitude)), "wavelength": jnp.asarray(float(wavelength)),
             "cutoff": rc.leaf()}
    return _wrap(model, f"ripple({_fmt(amplitude)},{_fmt(wavelength)})", knobs,
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
    conservativeness, betti and lambda (exact derivatives are consistent
    everywhere off the kink), stress_consistency.  Neither: zero_modes and
    cross_maxwell (a relaxation may stop on the kink, where the Hessian is
    undefined), reversibility (claimed in docs/probes.md §8.4, not asserted),
    config_temperature (pointwise Hessians miss the 2Aδ(r − d₀) curvature, which
    matters only if pairs visit d₀), virial, equipartition.
    """
    d0_len = _Length(d0, 1.05, "d0")
    if not float(width) > 0:
        raise ValueError(f"width must be positive, got {width}")

    def term(params: dict, s: Structure) -> jax.Array:
        dt = s.positions.dtype
        d = d0_len.of(params["d0"], s)
        delta = params["width"].astype(dt)
        p = _pairs(s, 1.5 * d)
        x = p.r - d
        phi = (jnp.abs(x) - jnp.sqrt(x * x + delta * delta)) * quintic_cutoff(p.r, 1.3 * d, 1.5 * d)
        return params["strength"].astype(dt) * pair_sum(phi, p)

    knobs = {"strength": jnp.asarray(float(strength)), "d0": d0_len.leaf(), "width": jnp.asarray(float(width))}
    return _wrap(model, f"kinked({_fmt(strength)})", knobs, identity="C1 continuity (force step at d0)",
                 energy_term=term, cutoff=d0_len.cutoff(1.5))


# --------------------------------------------------------------------------- stress heads


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
    return _wrap(model, f"bad_stress({_fmt(factor)})", knobs, identity="stress = (1/V) dE/d(strain)",
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
    zero_modes, trimer, conservativeness, betti, lambda, reversibility,
    config_temperature, virial, equipartition, smoothness).  Neither:
    stress_consistency (the term vanishes when Σ sin(2π f₃) = 0, e.g. a one-atom
    bulk cell at the origin, and is seen otherwise).
    """

    def smap(params: dict, s: Structure, sigma: jax.Array) -> jax.Array:
        dt = sigma.dtype
        f = s.positions @ inv3(s.cell)
        extra = params["strength"].astype(dt) * jnp.sum(_mask(s) * jnp.sin(2.0 * jnp.pi * f[:, 2]))
        e = jnp.zeros((3, 3), dt).at[0, 1].set(1.0).at[1, 0].set(1.0)
        return sigma + extra * e

    knobs = {"strength": jnp.asarray(float(strength))}
    return _wrap(model, f"parity_stress({_fmt(strength)})", knobs, identity="parity of the stress head",
                 stress_map=smap)


# --------------------------------------------------------------------------- tables

DEFECTS: dict[str, Callable[..., Model]] = {
    "curl": curl,
    "nonintegrable": nonintegrable,
    "orientation": orientation,
    "chirality": chirality,
    "eggbox": eggbox,
    "nonextensive": nonextensive,
    "bad_stress": bad_stress,
    "parity_stress": parity_stress,
    "ripple": ripple,
    "kinked": kinked,
    "noise": noise,
}


def _not(*trip_and_neither: str) -> tuple[str, ...]:
    """Every probe except the given ones (in PROBE_NAMES order)."""
    return tuple(p for p in PROBE_NAMES if p not in trip_and_neither)


_STAT = ("config_temperature", "virial", "equipartition")

#: defect name → (probes that must trip, probes that must not trip); see the module docstring.
expected_probes: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "curl": (
        ("equivariance", "representation", "zero_modes", "trimer", "betti", "cross_maxwell", *_STAT, "lambda"),
        ("parity", "stress_consistency", "reversibility"),
    ),
    # zero_modes is in neither list: with forces that are not a gradient the relaxation cannot reach
    # F = 0, and the rotational null vectors of the Hessian exist only at F = 0 (measured: score 0.37 on Si).
    "nonintegrable": (
        ("conservativeness", "betti", "cross_maxwell", "lambda"),
        ("equivariance", "parity", "representation", "trimer", "stress_consistency", "reversibility"),
    ),
    "orientation": (
        ("equivariance", "parity", "representation", "zero_modes", "trimer"),
        ("conservativeness", "betti", "stress_consistency", "cross_maxwell", "reversibility", "lambda"),
    ),
    "chirality": (("parity",), _not("parity", "smoothness")),
    "eggbox": (
        ("equivariance", "representation", "zero_modes", "trimer"),
        ("parity", "conservativeness", "betti", "stress_consistency", "cross_maxwell", "reversibility", "lambda"),
    ),
    "nonextensive": (("representation", "trimer"), _not("representation", "trimer")),
    "bad_stress": (("stress_consistency", "cross_maxwell"), _not("stress_consistency", "cross_maxwell")),
    "parity_stress": (("parity", "cross_maxwell"), _not("parity", "cross_maxwell", "stress_consistency")),
    "ripple": (("smoothness",), _not("smoothness", "reversibility", *_STAT)),
    "kinked": (
        ("smoothness",),
        _not("smoothness", "zero_modes", "cross_maxwell", "reversibility", *_STAT),
    ),
    "noise": (
        ("equivariance", "representation", "conservativeness", "reversibility", "smoothness"),
        ("parity", "stress_consistency"),
    ),
}
