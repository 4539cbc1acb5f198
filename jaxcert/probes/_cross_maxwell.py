r"""cross_maxwell: Maxwell relations of the mixed position–strain block Λ and the strain block B (docs/probes.md §4.9).

Quantities (the model's *outputs* are differentiated, docs/probes.md §1.4: the stress
output w.r.t. positions and strain, the force output w.r.t. strain).  With the
engineering Voigt strain γ of §1.2 (𝔽 = I + ε(γ), h' = h𝔽ᵀ, r' = 𝔽r) and
E_m = ∂ε/∂γ_m (symmetric; E_m = e_m e_mᵀ for m < 3, the halved off-diagonal pair
for shears):

* lhs_{jm} = V ∂σ_m/∂R_j at fixed cell (``derivatives.stress_position``),
* rhs_{jm} = ∂F_j/∂γ_m, atoms strained affinely (``derivatives.force_strain``),
* B_{mn} = ∂σ_m/∂γ_n (``derivatives.stress_strain``),

by exact autodiff (default engine) or the reference's central differences
(``derivatives=FiniteDifference()``, δ = 1e-3 Å and 1e-3 strain in float64).  The
probe is a staged plan (:mod:`jaxcert.probes.stages`): the blocks are ``tangent``
requests (:mod:`jaxcert.probes.kinds`) of the outputs, 3N along the unit position
directions (σ tangents) and six along the deformations E_m (F and σ tangents; a
step δ in γ_m is a step δ along E_m), plus three along the rotation generators
Ω_k for the torque τ below (energy tangents).

Exact identities at an arbitrary geometry (the prestress terms)
----------------------------------------------------------------
Let Ẽ(R, γ) = E(𝔽R, h𝔽ᵀ) and G(R, h) = E.  The stress output is
Vσ_m(R, h) = ∂Ẽ/∂γ_m|_{γ=0} for every R, so lhs_{jm} = ∂²Ẽ/∂R_j∂γ_m.  On the other
side ∂Ẽ/∂R_j = 𝔽ᵀ ∇_jG(𝔽R, h𝔽ᵀ) = −𝔽ᵀF_j(γ), hence ∂²Ẽ/∂γ_m∂R_j = −E_mF_j − ∂F_j/∂γ_m.
Equality of mixed partials of Ẽ gives

.. math::  \mathrm{lhs}_{jm} + \mathrm{rhs}_{jm} = -(E_m F)_j ,

so the reference's identity lhs + rhs = 0 holds only at zero force (it relaxes
with fmax = 1e-2 to get close).  ``rhs + (E_mF)_j`` = d(𝔽ᵀF_j)/dγ_m is the strain
derivative of the pulled-back force, and the corrected identity
lhs + rhs + (E_mF)_j = 0 holds exactly, at any geometry, for every model whose
force and stress outputs are the gradients of one energy.

For B, write W(γ) = Ẽ(R, γ).  A further increment dγ_n at strain γ is the
current-frame deformation E_n𝔽⁻¹ (not symmetric), so for a rotation-invariant
energy ∂W/∂γ_n = V(γ) σ(γ):(E_n𝔽⁻¹).  Differentiating at γ = 0 with
∂V/∂γ_m = V t_m, t = (1, 1, 1, 0, 0, 0) = tr E_m, and ∂𝔽⁻¹/∂γ_m = −E_m:

.. math::  \frac{1}{V}\frac{\partial^2 W}{\partial\gamma_m\partial\gamma_n}
           = B_{nm} + t_m\sigma_n - \sigma:(E_nE_m).

σ:(E_nE_m) = tr(σE_nE_m) is symmetric in (m, n) (σ, E symmetric), so this
strain-composition term drops out of the symmetry test, and for a
rotation-invariant energy the symmetric object is

.. math::  C_{mn} = B_{mn} + \sigma_m t_n = \frac{1}{V}\frac{\partial (V\sigma_m)}{\partial\gamma_n},

the d(1/V)/dε prestress term of §4.9.  Without rotation invariance (e.g. an
external orienting field) the increment E_n𝔽⁻¹ also has a skew part, which the
(symmetric) stress output cannot carry: ∂W/∂γ_n = Vσ:sym(E_n𝔽⁻¹) +
τ:skew(E_n𝔽⁻¹), with τ = skew(∂E((I + A)R, h(I + A)ᵀ)/∂A|₀) the energy's torque
(zero for an invariant energy and, for a position-only field, at F = 0).  Its
derivative adds −τ:skew(E_nE_m)/V, and the object that is symmetric for *every*
model whose force and stress outputs are the derivatives of its energy is

.. math::  C_{mn} = B_{mn} + \sigma_m t_n - \tfrac{1}{V}\,\tau : (E_m E_n).

τ is the only energy-derived term of the probe (one gradient w.r.t. a 3×3
deformation, or 6 energy differences with the FD engine); it is round-off for
rotation-invariant models.  All corrections are verified numerically in the
tests (clean LJ, and LJ plus an orienting field, at a non-equilibrium,
prestressed Pmm2 geometry sit at round-off without relaxation).

Defects (defaults: the corrected identities, no relaxation)
-----------------------------------------------------------
* Λ: n_pairs = 6 random (j, m), j a Cartesian DOF of a real atom, m a Voigt index
  (``jax.random``, j then m as the reference's stream; statistical, not bitwise,
  agreement).  r_p = |lhs + rhs'| / max(|lhs|, |rhs'|, f), f = 1e-3,
  rhs' = rhs + (E_mF)_j (``prestress_correction=True``) or rhs (the reference);
  d_Λ = mean r_p.  ``d_Lambda_full`` reports the same mean over every (j, m) (the
  engines return the full blocks anyway).
* B: d_B = ‖C − Cᵀ‖_F / (‖C‖_F + 1e-12), C = B + σ⊗t − τ:(E_mE_n)/V (corrected) or
  C = B (the reference), plain Frobenius norm over the 6×6 matrix.

raw defect ½(d_Λ + d_B), score exp(−½(d_Λ + d_B)/0.05) (the geometric mean of
the two block scores), gate d_Λ < 0.25 and d_B < 0.25.

Relaxation (§4.9, §11.9, §11.13).  The reference relaxes positions **and cell**
(ASE BFGS on a FrechetCellFilter, fmax 1e-2 eV/Å, 200 steps) so that its
uncorrected identities hold approximately.  With the exact prestress terms no
relaxation is needed; it would also move the substrate away from the Pmm2
geometry the other periodic probes use (the reference LJ relaxes Ar's Pmm2 cell
from 6.4×6.6×11.0 Å to a denser 3.5×6.8×6.8 Å structure).  ``relax_cell=True`` runs a JAX
position-and-cell relaxation before measuring: ASE's BFGS (:func:`jaxcert.optim.relax.bfgs`)
on a unit-cell-filter parametrisation (atoms x = R𝔽⁻ᵀ, cell variables N(𝔽ᵀ − I),
generalised forces F𝔽 and −V𝔽⁻¹σ/N from the force and stress outputs, zero
pressure, convergence on all N + 3 rows as ASE).  ASE's FrechetCellFilter
parametrises the cell through the matrix logarithm instead, which changes the
path, not the minimum.  The relaxed cell may shrink, so the static periodic image
count is raised by ``relax_extra_images`` (3) per periodic axis; a cell whose lattice-plane spacings
shrink beyond what that count covers makes the result NaN (status non-finite,
score 0), never silently wrong.  The reference's behaviour is
``CrossMaxwellConfig(relax_cell=True, prestress_correction=False)``.

Substrate: Pmm2 (the code's choice; the paper does not say, §11.9).  Skipped
without pbc or stress.  Cost (model-evaluation equivalents): 1 + 3N + 6 + 6 jvp
columns exact; 1 + 2(3N + 6 + 6) with order-2 finite differences (the engines
compute whole blocks; the reference's 4 calls per pair + 12 would be 37 for 6
pairs); plus 1 (exact) or 6 (FD) for the torque τ and the relaxation's steps + 1.
The relaxation is the module's own kind ``relax_cell`` (:func:`relax_positions_and_cell`,
registered with :func:`jaxcert.probes.kinds.register`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxcert.core import batching
from jaxcert.core.derivatives import EXACT, _central, voigt_strain
from jaxcert.core.model import Model, strain, voigt
from jaxcert.core.neighbors import det3, inv3
from jaxcert.core.structure import Structure
from jaxcert.optim.relax import RelaxResult, bfgs
from jaxcert.probes import kinds, stages
from jaxcert.probes.base import ProbeResult, ProbeSpec, finalize, register, require_stress, resolve_substrate

__all__ = ["CrossMaxwellConfig", "cross_maxwell", "relax_positions_and_cell", "strain_basis", "TRACE_VOIGT"]

#: t_m = tr(∂ε/∂γ_m): 1 for the normal strains, 0 for the shears.
TRACE_VOIGT = (1.0, 1.0, 1.0, 0.0, 0.0, 0.0)


@dataclasses.dataclass(frozen=True)
class CrossMaxwellConfig:
    """Defaults of pescert (docs/probes.md §4.9) with the exact prestress terms.

    Attributes:
      n_pairs: random (j, m) pairs of the Λ block (6).
      floor: f in the relative residual's denominator (1e-3 eV/Å).
      scale: λ of the score map on ½(d_Λ + d_B) (0.05).
      gate: gate on each of d_Λ and d_B (0.25).
      prestress_correction: add the exact (E_mF)_j and σ⊗t terms (default True); False is the
        reference's uncorrected identities, exact only at F = 0 and σ = 0.
      relax_cell: relax positions and cell first (default False; True, with
        ``prestress_correction=False``, is the reference's behaviour).
      relax_fmax: eV/Å (1e-2, the reference's).
      relax_steps: BFGS steps (200).
      relax_extra_images: periodic images added per axis for the relaxation (3: the reference LJ turns
        the Ar Pmm2 cell 6.4×6.6×11 Å into 3.5×6.8×6.8 Å); a cell that shrinks beyond what they cover
        gives NaN (raise it for substrates far from the model's equilibrium).
      derivatives: ``EXACT`` (default) or ``FiniteDifference()`` (the reference's recipe).
    """

    n_pairs: int = 6
    floor: float = 1e-3
    scale: float = 0.05
    gate: float = 0.25
    prestress_correction: bool = True
    relax_cell: bool = False
    relax_fmax: float = 1e-2
    relax_steps: int = 200
    relax_extra_images: int = 3
    derivatives: Any = EXACT


def strain_basis(dtype: Any = jnp.float64) -> jax.Array:
    """E_m = ∂ε/∂γ_m for m = 0..5, shape (6, 3, 3) (engineering shears: halves off the diagonal)."""
    return jax.vmap(voigt_strain)(jnp.eye(6, dtype=dtype))


def _rotation_generators(dtype: Any) -> jax.Array:
    """Ω_k (k = yz, xz, xy), antisymmetric, (3, 3, 3)."""
    O = np.zeros((3, 3, 3))
    for k, (a, b) in enumerate(((1, 2), (0, 2), (0, 1))):
        O[k, a, b], O[k, b, a] = 1.0, -1.0
    return jnp.asarray(O, dtype)


def energy_torque(engine: Any, model: Model, s: Structure) -> jax.Array:
    """τ = skew(∂E((I + A)R, h(I + A)ᵀ)/∂A at A = 0) in eV, (3, 3) antisymmetric.

    Exact engine: one reverse-mode gradient.  Finite differences (any engine with an ``order``):
    central differences of E along the three rotation generators Ω_k with the engine's step and stencil
    (``derivatives._central``, the stencil of every finite-difference engine),
    τ = Σ_k ½ (dE/dt along Ω_k) Ω_k.
    """
    dt = s.positions.dtype
    energy = lambda A: model.energy_of(model.params, strain(s, A))  # noqa: E731
    if getattr(engine, "order", None) is None:
        G = jax.grad(energy)(jnp.zeros((3, 3), dt))
        return 0.5 * (G - G.T)
    h = engine.h(s)
    O = _rotation_generators(dt)
    zero = jnp.zeros((3, 3), dt)
    d = batching.vmap(lambda W: _central(energy, zero, W, h, engine.order), model.max_batch)(O)
    return 0.5 * jnp.einsum("k,kab->ab", d, O)


def _plane_spacings(cell: jax.Array) -> jax.Array:
    """Lattice-plane spacings w_a = V/|b × c| (traced), Å."""
    cross = jnp.stack([jnp.cross(cell[1], cell[2]), jnp.cross(cell[2], cell[0]), jnp.cross(cell[0], cell[1])])
    return jnp.abs(det3(cell)) / jnp.linalg.norm(cross, axis=1)


def relax_positions_and_cell(
    model: Model, s: Structure, fmax: float = 1e-2, max_steps: int = 200, extra_images: int = 3
) -> tuple[Structure, RelaxResult]:
    """Relax positions and cell at zero pressure (BFGS on a unit-cell filter); see the module docstring.

    Returns the relaxed structure (static image count raised by ``extra_images`` per periodic axis;
    NaN positions if the cell shrank beyond what that count covers) and the
    :class:`~jaxcert.optim.relax.RelaxResult` of the
    filter (fmax over atoms and the three cell rows).
    """
    s = model.prepare(s)
    n = s.n_atoms
    dt = s.positions.dtype
    c = jnp.sum(s.mask.astype(dt))  # ASE cell_factor = number of atoms
    h0 = s.cell
    w0 = _plane_spacings(h0)
    if s.images is not None:
        # K images cover x = r_c/w < K + ½; K + e then cover the cell as long as every periodic
        # plane spacing stays above (K + ½)/(K + e + ½) of its initial value
        K = jnp.asarray(s.images, dt)
        min_ratio = jnp.where(jnp.asarray(s.pbc), (K + 0.5) / (K + extra_images + 0.5), 0.0)
        s = s.replace(images=tuple(k + extra_images if p else k for k, p in zip(s.images, s.pbc, strict=True)))
    else:
        min_ratio = jnp.zeros(3, dt)

    def unpack(X):
        D = jnp.eye(3, dtype=dt) + X[n:] / c  # D = 𝔽ᵀ: R = x D, h = h0 D
        cell = h0 @ D
        covered = jnp.all(_plane_spacings(cell) >= min_ratio * w0)
        R = jnp.where(s.mask[:, None], X[:n] @ D, s.positions)
        return s.replace(positions=jnp.where(covered, R, jnp.nan), cell=cell), D

    def generalised_forces(params, fs):
        st, D = unpack(fs.positions)
        F = model.forces_of(params, st)
        sigma = model.stress_of(params, st)
        V = jnp.abs(det3(st.cell))
        return jnp.concatenate([F @ D.T, -V * (inv3(D).T @ sigma) / c])

    ones = jnp.ones(3, bool)
    fake = Structure(
        positions=jnp.concatenate([s.positions, jnp.zeros((3, 3), dt)]),
        numbers=jnp.concatenate([s.numbers, s.numbers[:3] if n >= 3 else jnp.ones(3, s.numbers.dtype)]),
        cell=h0,
        masses=jnp.concatenate([s.masses, jnp.ones(3, dt)]),
        mask=jnp.concatenate([s.mask, ones]),
        pbc=(False, False, False),
    )
    filt = Model(energy_fn=lambda p, st: jnp.zeros((), dt), forces_fn=generalised_forces, params=model.params,
                 name=f"{model.name}+cell_filter")
    res = bfgs(filt, fake, fmax=fmax, max_steps=max_steps)
    relaxed, _ = unpack(res.structure.positions)
    return relaxed, res


def cross_maxwell(
    model: Model,
    key: jax.Array,
    config: CrossMaxwellConfig = CrossMaxwellConfig(),
    substrate: Structure | str | None = None,
) -> ProbeResult:
    """Maxwell relations of the position–strain and strain–strain blocks; see the module docstring.

    Args:
      model: the potential (needs a stress).
      key: PRNG key for the (j, m) pairs.
      config: :class:`CrossMaxwellConfig`.
      substrate: a periodic Structure (Pmm2), an element symbol, or None ("Ar").

    Returns:
      :class:`ProbeResult` with ½(d_Λ + d_B), score, gate and details n_pairs, delta, floor, lambda,
      relaxed, relax_fmax, relax_steps, d_Lambda, d_B, d_Lambda_full, d_Lambda_uncorrected,
      d_B_uncorrected, strain_block_B (raw B, eV/Å³), strain_block_C (the symmetric object tested),
      stress_voigt, max_force, pairs (n_pairs, 4) rows (j, m, lhs, rhs) with the raw rhs = ∂F_j/∂γ_m
      (eV/Å), prestress_force_term (E_mF)_j per pair, pair_residuals r_p.
    """
    s = resolve_substrate(model, substrate, "p2mm")
    require_stress(model, s)
    return stages.run(model, plan, config, key, s)


def _relax_cell(model: Model, s: Structure, fmax: jax.Array, max_steps: jax.Array, *, extra_images: int):
    """The ``relax_cell`` kind (per item): :func:`relax_positions_and_cell`; the relaxed structure's static
    ``images`` are the input's raised by ``extra_images`` per periodic axis (predictable from the request)."""
    return relax_positions_and_cell(model, s, fmax, max_steps, extra_images)


kinds.register("relax_cell", _relax_cell)


def relax_cell_request(s: Structure, fmax: Any, max_steps: Any, extra_images: int) -> kinds.Request:
    """A ``relax_cell`` request (any leading batch axes on ``s``): answered by ``(relaxed, RelaxResult)``."""
    nb = s.positions.ndim - 2
    shape = s.positions.shape[:nb]
    dt = s.positions.dtype
    return kinds.Request("relax_cell", (s, jnp.broadcast_to(jnp.asarray(fmax, dt), shape),
                                        jnp.broadcast_to(jnp.asarray(max_steps, jnp.int32), shape)),
                         (("extra_images", int(extra_images)),), nb)


def _check(model: Model, s: Structure, config: CrossMaxwellConfig) -> None:
    """The static skips (no pbc, no stress; :func:`~jaxcert.probes.base.require_stress`)."""
    del config
    require_stress(model, s)


def plan(cfg: CrossMaxwellConfig, facts: stages.Facts):
    """Stages (docs/architecture.md "Kinds and stages"): optionally relax positions and cell (the module's
    ``relax_cell`` kind); ask for the outputs (F, σ), the 3N position tangents (σ tangents: V ∂σ/∂R), the six
    deformation tangents along E_m (F and σ tangents: ∂F/∂γ, B) and, with the prestress correction, the three
    along the rotation generators Ω_k (energy tangents: the torque τ); then reduce."""
    del facts
    engine = cfg.derivatives

    def measure(key, s, relax_info):
        dt = s.positions.dtype
        n = s.n_atoms

        def at(k):
            return kinds.items(s, jnp.broadcast_to(s.positions, (k, *s.positions.shape)))

        requests = {
            "out": kinds.evaluate(s),
            "position": kinds.tangent(at(3 * n), jnp.eye(3 * n, dtype=dt).reshape(3 * n, n, 3), engine),
            "strain": kinds.tangent(at(6), strain_basis(dt), engine, wrt="deformation"),
        }
        if cfg.prestress_correction:
            requests["torque"] = kinds.tangent(at(3), _rotation_generators(dt), engine, wrt="deformation")
        return stages.Ask((key, s, relax_info), requests)

    def reduce(state, ans):
        key, s, relax_info = state
        dt = s.positions.dtype
        n = s.n_atoms
        F = ans["out"].forces
        sigma = voigt(ans["out"].stress)
        lhs_all = (jnp.abs(det3(s.cell)) * voigt(ans["position"].stress).T).reshape(6, n, 3).astype(dt)  # V dσ_m/dR_j
        rhs_all = ans["strain"].forces.astype(dt)  # (6, n, 3) = dF_j/dγ_m
        B = voigt(ans["strain"].stress).T.astype(dt)  # (6, 6), B[m, n] = dσ_m/dγ_n
        Em = strain_basis(dt)
        force_term = jnp.einsum("mab,jb->mja", Em, F)  # (E_m F_j)_a
        t = jnp.asarray(TRACE_VOIGT, dt)
        V = s.volume
        if cfg.prestress_correction:
            tau = (0.5 * jnp.einsum("k,kab->ab", ans["torque"].energy, _rotation_generators(dt))).astype(dt)
        else:
            tau = jnp.zeros((3, 3), dt)
        C_corr = B + sigma[:, None] * t[None, :] - jnp.einsum("ab,mac,ncb->mn", tau, Em, Em) / V

        def residual(lhs, rhs):
            den = jnp.maximum(jnp.maximum(jnp.abs(lhs), jnp.abs(rhs)), cfg.floor)
            return jnp.abs(lhs + rhs) / den

        def asym(C):
            return jnp.linalg.norm(C - C.T) / (jnp.linalg.norm(C) + 1e-12)

        rhs_eff_all = rhs_all + force_term if cfg.prestress_correction else rhs_all
        C = C_corr if cfg.prestress_correction else B

        # random pairs: j uniform over the Cartesian DOFs of the real atoms, then m uniform over 6
        k_j, k_m = jax.random.split(key)
        n_real = jnp.sum(s.mask.astype(jnp.int32))
        real_index = jnp.argsort(~s.mask, stable=True)  # real atoms first, in order
        j = jax.random.randint(k_j, (cfg.n_pairs,), 0, 3 * n_real)
        m = jax.random.randint(k_m, (cfg.n_pairs,), 0, 6)
        atom, comp = real_index[j // 3], j % 3
        lhs = lhs_all[m, atom, comp]
        rhs = rhs_all[m, atom, comp]
        corr = force_term[m, atom, comp]
        r_p = residual(lhs, rhs_eff_all[m, atom, comp])
        d_lambda = jnp.mean(r_p)
        d_b = asym(C)

        real = jnp.broadcast_to(s.mask[None, :, None], lhs_all.shape).astype(dt)
        full = residual(lhs_all, rhs_eff_all)
        d_lambda_full = jnp.sum(real * full) / jnp.sum(real)
        d_lambda_raw = jnp.mean(residual(lhs, rhs))

        defect = 0.5 * (d_lambda + d_b)
        score = jnp.exp(-jnp.abs(defect) / cfg.scale)
        gate = (d_lambda < cfg.gate) & (d_b < cfg.gate)
        relax_fmax, relax_steps, n_evals = relax_info
        details = {
            "n_pairs": jnp.asarray(cfg.n_pairs),
            "delta": jnp.asarray(engine.step(s), dt),
            "floor": jnp.asarray(cfg.floor, dt),
            "lambda": jnp.asarray(cfg.scale, dt),
            "relaxed": jnp.asarray(cfg.relax_cell),
            "relax_fmax": relax_fmax,
            "relax_steps": relax_steps,
            "d_Lambda": d_lambda,
            "d_B": d_b,
            "d_Lambda_full": d_lambda_full,
            "d_Lambda_uncorrected": d_lambda_raw,
            "d_B_uncorrected": asym(B),
            "strain_block_B": B,
            "strain_block_C": C,
            "stress_voigt": sigma,
            "energy_torque": jnp.stack([tau[1, 2], tau[0, 2], tau[0, 1]]),
            "max_force": jnp.sqrt(jnp.max(jnp.sum(F * F, -1))),
            "pairs": jnp.stack([j.astype(dt), m.astype(dt), lhs, rhs], axis=1),
            "prestress_force_term": corr,
            "pair_residuals": r_p,
        }
        torque_cost = engine.cost(3, exact_cost=1) if cfg.prestress_correction else 0
        n_evals = n_evals + 1 + engine.cost(3 * n + 12) + torque_cost
        return finalize(defect, score, gate, n_evals, details)

    if not cfg.relax_cell:
        def ask(key, s):
            dt = s.positions.dtype
            return measure(key, s, (jnp.asarray(jnp.nan, dt), jnp.asarray(0, jnp.int32), jnp.asarray(0, jnp.int32)))

        return ask, reduce

    def ask_relax(key, s):
        return stages.Ask(key, relax_cell_request(s, cfg.relax_fmax, cfg.relax_steps, cfg.relax_extra_images))

    def relaxed(key, ans):
        s, res = ans
        steps = res.steps.astype(jnp.int32)
        return measure(key, s, (res.fmax, steps, steps + 1))

    return ask_relax, relaxed, reduce


register(ProbeSpec(
    name="cross_maxwell", fn=cross_maxwell, config=CrossMaxwellConfig, substrate="p2mm",
    target=0.0, gated=True, needs_stress=True, needs_pbc=True, plan=plan, check=_check,
))
