r"""representation: gauge, extensivity, egg-box and permutation invariance (docs/probes.md §4.3).

Four re-descriptions of the same periodic crystal must give the same energy per
atom and the same forces on corresponding atoms.  With n real atoms, e₀ = E₀/n
and F₀ at the reference description:

(i) **unimodular gauge** — cell M h₀ with M = [[1,1,0],[0,1,0],[0,0,1]]
    (a₁' = a₁ + a₂, the same lattice), atoms not scaled but wrapped into the new
    cell (periodic axes only).  Wrapping moves atoms by lattice vectors, so atom i
    stays the image of atom i: the reference's nearest-fractional-coordinate
    matching is the identity here, by construction.
(ii) **supercell** — 2×2×2 tiling in ASE ``repeat`` order (outer loop m₀, inner
    m₂; offset (m₀, m₁, m₂)·h₀), 8n atoms; atom k·n + i is an image of atom i.
    ΔE = |E_r/8/n − e₀|.
(iii) **translation (egg-box)** — u ~ normal(3) normalised is a *fractional*
    direction, t = u h₀ the Cartesian shift (not a lattice vector, so the sweep
    spans one period only loosely, §11.6); at s_k ∈ linspace(0, 1, n_tr), both
    ends included, evaluate R + s_k t (not wrapped).  ΔE = max_k E_k/n − min_k
    E_k/n, ΔF = max_k RMS(F_k − F₀).
(iv) **permutation** (only if the structure has ≥ 2 atom slots) — π a random
    permutation, the structure atoms[π] evaluated and unpermuted, F_u[π] = F_π.

Per comparison c, ΔE_c (eV/atom) and ΔF_c = RMS over all components
√(Σ_i ‖ΔF_i‖²/(3n)) (eV/Å); the defect is

.. math::  d_{rep} = \sum_c \left(\Delta E_c / 10^{-3} + \Delta F_c / 10^{-3}\right),

score exp(−d_rep), gate d_rep < 1.  The force output is compared (direct heads
are tested as they are).  Substrate (§11.6): the paper says "the same periodic
substrate as the stress probe" but the reference uses p2mm, the parity
substrate; we follow the reference (4 atoms, so the supercell is cheap).

JAX specifics.  The probe is pure and vmappable over (key, substrate): the
supercell (8n atoms) and the unimodular cell are built inside the probe from the
traced substrate with static shapes.  Their static periodic image counts are
derived from the substrate's K_a (which cover x_a = r_c/w_a, w_a the lattice-plane
spacing): the new cell's spacing obeys 1/w₁' ≤ 1/w₀ + 1/w₁, so x₁' ≤ x₀ + x₁ and
K₁' = K₀ + K₁ + 1 images suffice for the unimodular cell; the doubled cell has
x' = x/2 and needs ⌈K/2 + ¼⌉.  Both bounds hold for the image rules K = ⌊x + ½⌋
and K = ⌈x + ½⌉ of :func:`jaxcert.core.neighbors.image_counts` (and keep its margin);
an insufficient count would make the result NaN, never silently wrong.  Random draws come from ``key``
(``jax.random``: u, then π, as the reference's single stream; statistical, not
bitwise, agreement).  Cost 1 + 1 + 1 + n_tr + 1 = 20 model evaluations.  No
derivative of a model output is taken (the ``derivatives`` field is unused).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxcert.core.derivatives import EXACT
from jaxcert.core.model import Model
from jaxcert.core.neighbors import inv3
from jaxcert.core.structure import Structure
from jaxcert.probes import kinds, stages
from jaxcert.probes.base import ProbeResult, ProbeSkip, ProbeSpec, finalize, register, resolve_substrate

__all__ = ["RepresentationConfig", "representation", "unimodular", "supercell"]

#: The unimodular gauge of the reference: a₁' = a₁ + a₂.
UNIMODULAR = np.array([[1.0, 1.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])


@dataclasses.dataclass(frozen=True)
class RepresentationConfig:
    """Defaults of pescert (docs/probes.md §4.3).

    Attributes:
      n_translations: egg-box sweep points n_tr (16, both end points included).
      energy_scale: eV/atom normaliser (1e-3).
      force_scale: eV/Å normaliser (1e-3).
      gate: gate threshold on d_rep (1.0).
      derivatives: unused here (no derivative of a model output is taken).
    """

    n_translations: int = 16
    energy_scale: float = 1e-3
    force_scale: float = 1e-3
    gate: float = 1.0
    derivatives: Any = EXACT


def _wrap(s: Structure, cell: jax.Array, eps: float = 1e-7) -> jax.Array:
    """Positions wrapped into ``cell`` along the periodic axes (padding atoms untouched).

    As ``ase.geometry.wrap_positions``: fractional coordinates shifted by ``eps`` before the
    modulo, so an atom on a cell face (up to round-off) lands at 0, not at 1.
    """
    frac = s.positions @ inv3(cell)
    frac = jnp.where(jnp.asarray(s.pbc), jnp.mod(frac + eps, 1.0) - eps, frac)
    return jnp.where(s.mask[:, None], frac @ cell, s.positions)


def unimodular(s: Structure) -> Structure:
    """The same crystal in the cell M h₀ (a₁' = a₁ + a₂), atoms wrapped; atom i ↔ atom i."""
    cell = jnp.asarray(UNIMODULAR, s.dtype) @ s.cell
    images = s.images
    if images is not None and s.pbc[1]:
        # 1/w₁' ≤ 1/w₀ + 1/w₁ (module docstring)
        images = (images[0], images[0] + images[1] + 1, images[2])
    return s.replace(positions=_wrap(s, cell), cell=cell, images=images)


def supercell(s: Structure, reps: tuple[int, int, int] = (2, 2, 2)) -> Structure:
    """Tile ``s`` ``reps`` times in ASE ``repeat`` order; atom k·n + i is an image of atom i.

    Static shapes: (Π reps · n) atoms.  Padding atoms are tiled as padding.
    """
    offsets = np.array([(a, b, c) for a in range(reps[0]) for b in range(reps[1]) for c in range(reps[2])], float)
    shift = jnp.asarray(offsets, s.dtype) @ s.cell  # (k, 3)
    R = (s.positions[None, :, :] + shift[:, None, :]).reshape(-1, 3)
    k = len(offsets)
    images = s.images
    if images is not None:
        # x' = x/r; K = ⌊x + ½⌋ gives x < K + ½, K = ⌈x + ½⌉ gives x ≤ K − ½: ⌈(K − ½)/r + ½⌉ covers both
        images = tuple(0 if K == 0 else int(math.ceil((K - 0.5) / r + 0.5)) for K, r in zip(images, reps, strict=True))
    return s.replace(
        positions=R,
        numbers=jnp.tile(s.numbers, k),
        masses=jnp.tile(s.masses, k),
        mask=jnp.tile(s.mask, k),
        cell=jnp.asarray(np.diag(reps).astype(float), s.dtype) @ s.cell,
        images=images,
    )


def representation(
    model: Model,
    key: jax.Array,
    config: RepresentationConfig = RepresentationConfig(),
    substrate: Structure | str | None = None,
) -> ProbeResult:
    """Gauge / supercell / egg-box / permutation invariance; see the module docstring.

    Args:
      model: the potential.
      key: PRNG key (translation direction, then permutation).
      config: :class:`RepresentationConfig`.
      substrate: a periodic Structure (Pmm2), an element symbol, or None ("Ar").

    Returns:
      :class:`ProbeResult` with d_rep, score exp(−d_rep), gate d_rep < 1, n_evals = 4 + n_tr and
      details n_atoms, supercell, n_translations, energy_scale_eV, force_scale_eV_per_A,
      translation_direction_frac, and comparisons {unimodular, supercell, translation, permutation},
      each {d_energy_per_atom (eV), d_force_rms (eV/Å), contribution}.
    """
    s = resolve_substrate(model, substrate, "p2mm")
    _require_periodic(s)
    return stages.run(model, plan, config, key, s)


def _require_periodic(s: Structure) -> None:
    """The static skip (before anything runs): the four re-descriptions need a periodic crystal."""
    if not s.periodic:
        raise ProbeSkip("substrate is not periodic")


def _rms(dF: jax.Array, weight: jax.Array) -> jax.Array:
    return jnp.sqrt(jnp.sum(weight[:, None] * dF**2) / (3 * jnp.sum(weight)))


def plan(cfg: RepresentationConfig, facts: stages.Facts):
    """Stages (docs/architecture.md "Kinds and stages"): build the four re-descriptions and ask for the outputs
    (``evaluate`` requests: the reference, the unimodular cell, the supercell, the n_tr translations in one
    batch, the permutation); then compare."""
    del facts

    def ask(key, s):
        dt = s.positions.dtype
        requests = {"reference": kinds.evaluate(s), "unimodular": kinds.evaluate(unimodular(s)),
                    "supercell": kinds.evaluate(supercell(s))}
        # (iii) egg-box: R + s_k u h0 for s_k in linspace(0, 1, n_tr), not wrapped
        k_dir, k_perm = jax.random.split(key)
        u = jax.random.normal(k_dir, (3,), dt)
        u = u / jnp.linalg.norm(u)
        t = u @ s.cell
        steps = jnp.linspace(0.0, 1.0, cfg.n_translations, dtype=dt)
        R = jnp.where(s.mask[:, None], s.positions[None] + steps[:, None, None] * t, s.positions[None])
        requests["translation"] = kinds.evaluate(kinds.items(s, R))
        # (iv) permutation: atoms[pi]
        pi = None
        if s.n_atoms >= 2:
            pi = jax.random.permutation(k_perm, s.n_atoms)
            sp = s.replace(positions=s.positions[pi], numbers=s.numbers[pi], masses=s.masses[pi], mask=s.mask[pi])
            requests["permutation"] = kinds.evaluate(sp)
        return stages.Ask((s, u, pi), requests)

    def compare(state, out):
        s, u, pi = state
        dt = s.positions.dtype
        w = s.mask.astype(dt)
        n = jnp.sum(w)
        E0, F0 = out["reference"].energy, out["reference"].forces
        e0 = E0 / n
        comps = {}

        # (i) unimodular gauge: atom i is matched to atom i (wrapping moves by lattice vectors)
        Eu, Fu = out["unimodular"].energy, out["unimodular"].forces
        comps["unimodular"] = (jnp.abs(Eu / n - e0), _rms(Fu - F0, w))

        # (ii) 2x2x2 supercell, ASE repeat order: atom k*n + i is an image of atom i
        Er, Fr = out["supercell"].energy, out["supercell"].forces
        k = Fr.shape[0] // s.n_atoms
        comps["supercell"] = (jnp.abs(Er / k / n - e0), _rms(Fr - jnp.tile(F0, (k, 1)), jnp.tile(w, k)))

        # (iii) egg-box
        e_tr = out["translation"].energy / n
        f_tr = jax.vmap(lambda F: _rms(F - F0, w))(out["translation"].forces)
        comps["translation"] = (jnp.max(e_tr) - jnp.min(e_tr), jnp.max(f_tr))

        # (iv) permutation: unpermuted by F_u[pi] = F_pi
        n_evals = 3 + cfg.n_translations
        if pi is not None:
            Ep, Fp = out["permutation"].energy, out["permutation"].forces
            F_un = jnp.zeros_like(Fp).at[pi].set(Fp)
            comps["permutation"] = (jnp.abs(Ep / n - e0), _rms(F_un - F0, w))
            n_evals += 1

        comparisons = {}
        defect = jnp.zeros((), dt)
        for name, (dE, dF) in comps.items():
            contribution = dE / cfg.energy_scale + dF / cfg.force_scale
            defect = defect + contribution
            comparisons[name] = {"d_energy_per_atom": dE, "d_force_rms": dF, "contribution": contribution}
        score = jnp.exp(-jnp.abs(defect))
        details = {
            "n_atoms": n.astype(jnp.int32),
            "supercell": jnp.asarray([2, 2, 2]),
            "n_translations": jnp.asarray(cfg.n_translations),
            "energy_scale_eV": jnp.asarray(cfg.energy_scale, dt),
            "force_scale_eV_per_A": jnp.asarray(cfg.force_scale, dt),
            "translation_direction_frac": u,
            "comparisons": comparisons,
        }
        return finalize(defect, score, defect < cfg.gate, n_evals, details)

    return ask, compare


register(ProbeSpec(
    name="representation", fn=representation, config=RepresentationConfig, substrate="p2mm",
    target=0.0, gated=True, needs_stress=False, needs_pbc=True, plan=plan,
    check=lambda model, s, cfg: _require_periodic(s),
))
