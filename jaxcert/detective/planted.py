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

__all__ = ["pair_bump", "pair_attraction", "desorption_barrier", "variant"]


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
