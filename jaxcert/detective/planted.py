r"""Planted failures with a known answer, and committee variants (docs/detective.md §7).

* :func:`pair_bump` — adds a Gaussian pair term for chosen element pairs only,

  .. math::  E \mathrel{+}= A \sum_{i<j,\ \{Z_i, Z_j\} \in P} \exp\!\big(-(r_{ij} - r_0)^2 / 2w^2\big)\,
             \big(1 - x^2\big)^3, \qquad x = (r_{ij} - r_0)/4w,\ |x| < 1,

  exact forces by autodiff (the wrapper has no force head).  A < 0 is a spurious attraction, A > 0 a spurious
  barrier.
* :func:`pair_attraction` — the dimer failure of the paper's Appendix C: a mid-range attraction for dimers of
  the chosen elements (every pair with both atoms in the set).
* :func:`desorption_barrier` — a bump in the adsorbate–metal distance past the bond: a barrier on the rigid
  desorption path of that pair only.
* :func:`variant` — E'(s) = a·E(s / k): a committee member that differs from the target in energy and length
  scales but shares its physics (the stand-in for "separately trained" analytic models in tests and examples).

One planted failure per dimer observable (docs/detective.md §2.1, §7), each on chosen element pairs only:

* :func:`pair_barrier` — a Gaussian bump that lifts the curve above its own dissociation asymptote (``barrier``);
* :func:`pair_secondary_well` — a narrow dip past the well that stays below the asymptote (``secondary_well``);
* :func:`short_range_collapse` — E += −A Σ (r_c/r − 1)² (r_c/r)¹⁴ for r < r_c: a hole inside the repulsive wall
  (``collapse``); nothing changes beyond r_c;
* :func:`force_mismatch` — an unchanged energy with a direct force head −∇(E + bump): forces that are not the
  energy's gradient (``force_energy_mismatch``).

* :func:`wall_dip` — a narrow dip on the repulsive branch between the wall's crest and the well (``wall_dip``).

For the robustness probe (§4.6): :func:`coverage_barrier` — a barrier on the adsorbate–metal distance switched on
by the adsorbate's own periodic images closer than ``r_image``: it exists in a small surface cell and vanishes in a
larger one (an image artefact).

And for the desorption protocol's dissociation limit (§2.2): :func:`mixed_reference` — a constant shift of every
structure that contains both element sets, however far apart (the seed paper's mixed PBE/PBE+U reference in
miniature): the desorbed state is not the sum of its fragments (``asymptote``); forces and shapes unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from ase.data import atomic_numbers

from jaxcert.core.model import Model
from jaxcert.core.neighbors import pairs
from jaxcert.core.structure import Structure
from jaxcert.models._common import N_Z, pair_sum

__all__ = ["pair_bump", "pair_attraction", "desorption_barrier", "variant", "pair_barrier", "pair_secondary_well",
           "short_range_collapse", "force_mismatch", "mixed_reference", "wall_dip", "coverage_barrier"]


def _combine(a: Any, b: float) -> Any:
    if a is None:
        return b
    if callable(a):
        return lambda numbers: max(float(a(numbers)), b)
    return max(float(a), b)


def pair_bump(model: Model, element_pairs: Sequence[tuple[str, str]], amplitude: float, r0: float, width: float,
              tag: str = "bump") -> Model:
    """``model`` plus a Gaussian pair term on ``element_pairs`` only (see the module docstring).

    Args:
      element_pairs: unordered (A, B) symbol pairs that get the term.
      amplitude: A in eV per pair (< 0 attracts).
      r0, width: centre and width of the Gaussian in Å.
    """
    table = np.zeros((N_Z, N_Z))
    for a, b in element_pairs:
        za, zb = atomic_numbers[a], atomic_numbers[b]
        table[za, zb] = table[zb, za] = 1.0
    rc = float(r0 + 4.0 * width)
    inner = model

    def energy(params: dict, s: Structure) -> jax.Array:
        E = inner.energy_fn(params["inner"], s)
        dt = s.positions.dtype
        p = pairs(s, rc)
        w = params["table"].astype(dt)[s.numbers[:, None], s.numbers[p.j]]
        x = (p.r - params["r0"]) / (4.0 * params["width"])
        fc = jnp.where(jnp.abs(x) < 1.0, (1.0 - x * x) ** 3, 0.0)
        g = jnp.exp(-((p.r - params["r0"]) ** 2) / (2.0 * params["width"] ** 2))
        return E + pair_sum(params["amplitude"].astype(dt) * w * g * fc, p)

    label = ",".join(f"{a}-{b}" for a, b in element_pairs)
    return Model(energy_fn=energy, params={"inner": inner.params, "table": jnp.asarray(table),
                                           "amplitude": jnp.asarray(float(amplitude)), "r0": jnp.asarray(float(r0)),
                                           "width": jnp.asarray(float(width))},
                 name=f"{inner.name}+{tag}({label})", cutoff=_combine(inner.cutoff, rc), elements=inner.elements,
                 info=(*inner.info, ("planted", f"{tag} A={amplitude:g} eV r0={r0:g} w={width:g} on {label}")),
                 stress_available=inner.stress_available)


def pair_attraction(model: Model, elements: Sequence[str], depth: float = 0.08, r0: float = 4.6,
                    width: float = 0.5) -> Model:
    """A spurious mid-range attraction (−``depth`` eV per pair at ``r0`` Å) for every pair with both atoms in
    ``elements`` (homonuclear and heteronuclear among them); nothing else changes."""
    els = list(elements)
    prs = [(a, b) for i, a in enumerate(els) for b in els[i:]]
    return pair_bump(model, prs, -abs(depth), r0, width, tag="attraction")


def desorption_barrier(model: Model, adsorbate_element: str, metal: str, height: float = 0.05, r0: float = 3.6,
                       width: float = 0.35) -> Model:
    """A spurious barrier: +``height`` eV per (adsorbate element, metal) pair at ``r0`` Å (past the bond)."""
    return pair_bump(model, [(adsorbate_element, metal)], abs(height), r0, width, tag="barrier")


def variant(model: Model, energy_scale: float = 1.0, length_scale: float = 1.0, name: str | None = None) -> Model:
    """E'(s) = a·E(s/k): positions and cell divided by k = ``length_scale``, energy times a = ``energy_scale``."""
    a, k = float(energy_scale), float(length_scale)
    inner = model

    def energy(params: Any, s: Structure) -> jax.Array:
        return a * inner.energy_fn(params, s.replace(positions=s.positions / k, cell=s.cell / k))

    cut = inner.cutoff
    if cut is not None:
        cut = (lambda numbers, c=cut: k * float(c(numbers))) if callable(cut) else k * float(cut)
    return Model(energy_fn=energy, params=inner.params, name=name or f"{inner.name}×{a:g}@{k:g}", cutoff=cut,
                 elements=inner.elements, info=inner.info, stress_available=inner.stress_available)


def _pair_table(element_pairs: Sequence[tuple[str, str]]) -> np.ndarray:
    table = np.zeros((N_Z, N_Z))
    for a, b in element_pairs:
        za, zb = atomic_numbers[a], atomic_numbers[b]
        table[za, zb] = table[zb, za] = 1.0
    return table


def _pairs_within(elements: Sequence[str]) -> list[tuple[str, str]]:
    els = list(elements)
    return [(a, b) for i, a in enumerate(els) for b in els[i:]]


def pair_barrier(model: Model, elements: Sequence[str], height: float = 0.3, r0: float = 4.0,
                 width: float = 0.3) -> Model:
    """A spurious barrier: +``height`` eV per pair at ``r0`` Å for every pair with both atoms in ``elements``
    (issue 28 planted 0.2 eV on Mo–Mo, Mo–W, W–W at 4 Å; 0.3 eV lifts all three reference-LJ curves above their
    own asymptote)."""
    return pair_bump(model, _pairs_within(elements), abs(height), r0, width, tag="barrier")


def pair_secondary_well(model: Model, elements: Sequence[str], depth: float = 0.06, r0: float = 5.2,
                        width: float = 0.15) -> Model:
    """A narrow dip of −``depth`` eV at ``r0`` Å, past the well: the attractive branch turns down into a secondary
    well that stays below the asymptote (no barrier above it); pairs with both atoms in ``elements``."""
    return pair_bump(model, _pairs_within(elements), -abs(depth), r0, width, tag="secondary-well")


def short_range_collapse(model: Model, elements: Sequence[str], r_c: float = 2.0, strength: float = 1000.0
                         ) -> Model:
    r"""A hole inside the repulsive wall: E += −A Σ_{r<r_c} (r_c/r − 1)² (r_c/r)¹⁴ over pairs with both atoms in
    ``elements`` (A = ``strength`` eV).  C¹ at r_c and zero beyond it, so the well, the tail and the forces there
    are untouched; inside, the r⁻¹⁶ term beats a r⁻¹² wall and the energy falls as the atoms approach."""
    table = _pair_table(_pairs_within(elements))
    inner = model
    rc = float(r_c)

    def energy(params: dict, s: Structure) -> jax.Array:
        E = inner.energy_fn(params["inner"], s)
        dt = s.positions.dtype
        p = pairs(s, rc)
        w = params["table"].astype(dt)[s.numbers[:, None], s.numbers[p.j]]
        x = params["r_c"] / jnp.maximum(p.r, 1e-3)
        g = jnp.where(x > 1.0, (x - 1.0) ** 2 * x ** 14, 0.0)
        return E - pair_sum(params["strength"].astype(dt) * w * g, p)

    label = ",".join(f"{a}-{b}" for a, b in _pairs_within(elements))
    return Model(energy_fn=energy, params={"inner": inner.params, "table": jnp.asarray(table),
                                           "r_c": jnp.asarray(rc), "strength": jnp.asarray(float(strength))},
                 name=f"{inner.name}+collapse({label})", cutoff=_combine(inner.cutoff, rc), elements=inner.elements,
                 info=(*inner.info, ("planted", f"collapse A={strength:g} eV r_c={rc:g} on {label}")),
                 stress_available=inner.stress_available)


def force_mismatch(model: Model, elements: Sequence[str], amplitude: float = 0.1, r0: float = 3.8,
                   width: float = 0.3, element_pairs: Sequence[tuple[str, str]] | None = None) -> Model:
    """The energy of ``model`` unchanged, with a direct force head −∇(E + bump): the bump (``amplitude`` eV at
    ``r0`` Å, :func:`pair_bump`) is in the forces and not in the energy, so F ≠ −∇E on pairs with both atoms in
    ``elements`` (or on ``element_pairs`` when given).  Single-point energies are exactly those of ``model``."""
    prs = list(element_pairs) if element_pairs is not None else _pairs_within(elements)
    bumped = pair_bump(model, prs, amplitude, r0, width, tag="force-only")

    def forces(params: dict, s: Structure) -> jax.Array:
        g = jax.grad(lambda R: bumped.energy_fn(params, s.replace(positions=R)))(s.positions)
        return -g

    def energy(params: dict, s: Structure) -> jax.Array:
        return model.energy_fn(params["inner"], s)

    label = ",".join(f"{a}-{b}" for a, b in prs)
    return Model(energy_fn=energy, forces_fn=forces, params=bumped.params,
                 name=f"{model.name}+force-mismatch({label})", cutoff=bumped.cutoff, elements=model.elements,
                 info=(*model.info, ("planted", f"force-only bump A={amplitude:g} eV r0={r0:g} w={width:g} on "
                                                f"{label}")), stress_available=model.stress_available)


def mixed_reference(model: Model, group_a: Sequence[str], group_b: Sequence[str], shift: float = 0.3) -> Model:
    """E += ``shift`` eV for every structure that contains an atom of ``group_a`` and one of ``group_b``, however
    far apart: a composition-dependent energy reference (the seed paper's mixed PBE/PBE+U data in miniature).
    Forces and every curve's shape are unchanged; the separated fragments lose size consistency."""
    za = np.zeros(N_Z)
    zb = np.zeros(N_Z)
    for el in group_a:
        za[atomic_numbers[el]] = 1.0
    for el in group_b:
        zb[atomic_numbers[el]] = 1.0
    inner = model

    def energy(params: dict, s: Structure) -> jax.Array:
        E = inner.energy_fn(params["inner"], s)
        m = s.mask.astype(E.dtype)
        has_a = jnp.max(params["a"].astype(E.dtype)[s.numbers] * m)
        has_b = jnp.max(params["b"].astype(E.dtype)[s.numbers] * m)
        return E + params["shift"].astype(E.dtype) * has_a * has_b

    label = f"{'/'.join(group_a)}+{'/'.join(group_b)}"
    return Model(energy_fn=energy, params={"inner": inner.params, "a": jnp.asarray(za), "b": jnp.asarray(zb),
                                           "shift": jnp.asarray(float(shift))},
                 name=f"{inner.name}+mixed-reference({label})", cutoff=inner.cutoff, elements=inner.elements,
                 info=(*inner.info, ("planted", f"reference shift {shift:g} eV when {label} meet")),
                 stress_available=inner.stress_available)


def wall_dip(model: Model, elements: Sequence[str], depth: float = 15.0, r0: float = 2.0, width: float = 0.05
             ) -> Model:
    """A narrow dip of −``depth`` eV at ``r0`` Å on the repulsive wall (between the crest and the well): the wall
    falls, rises again and falls to the well (a non-monotonic repulsive branch), for pairs with both atoms in
    ``elements``; nothing changes farther than ``r0`` + 4 ``width``.  The dip's steepest slope, depth/(width·√e),
    must beat the wall's: the reference LJ's W–W wall falls about 120 eV/Å at 2 Å (25 eV up), so the defaults
    (15 eV, 0.05 Å) make a 1.4 eV pocket there that stays far above the well."""
    return pair_bump(model, _pairs_within(elements), -abs(depth), r0, width, tag="wall-dip")


def coverage_barrier(model: Model, adsorbate_element: str, metal: str, height: float = 0.02, r0: float = 3.6,
                     width: float = 0.35, r_image: float = 6.0) -> Model:
    r"""A desorption barrier that exists only while the adsorbate sees its own periodic images:
    E += A · [Σ_{(X, M) pairs} g(r)] · [Σ_{(X, X) pairs} s(r)], g the Gaussian bump of :func:`pair_bump` at ``r0``
    on the (adsorbate element X, metal M) distance, s = 1 below ``r_image`` − 1 Å, (1 − x²)³ switched off at
    ``r_image`` (x the position in the last Å).  In a 2×2 Cu(111) cell (CO–CO images 5.1 Å apart) the barrier is
    there (+0.22 eV above EMT's asymptote at the default 0.02 eV); in 3×3 (7.7 Å) and for the lone molecule it is
    not: an image artefact of the small cell.  A = ``height`` eV per bump and image pair."""
    xm = _pair_table([(adsorbate_element, metal)])
    xx = _pair_table([(adsorbate_element, adsorbate_element)])
    rc = float(max(r0 + 4.0 * width, r_image))
    inner = model

    def energy(params: dict, s: Structure) -> jax.Array:
        E = inner.energy_fn(params["inner"], s)
        dt = s.positions.dtype
        p = pairs(s, rc)
        zi, zj = s.numbers[:, None], s.numbers[p.j]
        x = (p.r - params["r0"]) / (4.0 * params["width"])
        fc = jnp.where(jnp.abs(x) < 1.0, (1.0 - x * x) ** 3, 0.0)
        g = jnp.exp(-((p.r - params["r0"]) ** 2) / (2.0 * params["width"] ** 2)) * fc
        y = jnp.clip(p.r - (params["r_image"] - 1.0), 0.0, 1.0)
        sw = jnp.where(p.r < params["r_image"], (1.0 - y * y) ** 3, 0.0)
        bump = pair_sum(params["xm"].astype(dt)[zi, zj] * g, p)
        images = pair_sum(params["xx"].astype(dt)[zi, zj] * sw, p)
        return E + params["height"].astype(dt) * bump * images

    label = f"{adsorbate_element}-{metal}"
    return Model(energy_fn=energy, params={"inner": inner.params, "xm": jnp.asarray(xm), "xx": jnp.asarray(xx),
                                           "height": jnp.asarray(float(height)), "r0": jnp.asarray(float(r0)),
                                           "width": jnp.asarray(float(width)),
                                           "r_image": jnp.asarray(float(r_image))},
                 name=f"{inner.name}+coverage-barrier({label})", cutoff=_combine(inner.cutoff, rc),
                 elements=inner.elements,
                 info=(*inner.info, ("planted", f"barrier A={height:g} eV r0={r0:g} on {label} while "
                                                f"{adsorbate_element} images are within {r_image:g} Å")),
                 stress_available=inner.stress_available)
