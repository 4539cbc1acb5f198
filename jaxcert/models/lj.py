r"""The per-element reference Lennard-Jones potential (docs/probes.md §7).

ASE's ``LennardJones`` in smooth mode with parameters that depend only on the
composition:

* σ(el) = d_nn(el)/2^{1/6} (the pair minimum sits on the reference-crystal
  nearest-neighbour distance, covalent-diameter fallback; :mod:`jaxcert.core.elements`),
* ε(el) = E_coh(el)/8.610 eV (fcc lattice sum),
* r_c = 3σ, r_o = 0.66 r_c,
* mixed compositions: one effective pair, σ the arithmetic and ε the geometric
  mean over the distinct species present (an approximation, as in the reference).

.. math::  E = \sum_{i<j} 4\varepsilon[(\sigma/r)^{12} - (\sigma/r)^6]\, S(r^2),\quad
   S(x) = \frac{(X_c - x)^2 (X_c + 2x - 3X_o)}{(X_c - X_o)^3} \text{ on } [X_o, X_c),

with S = 1 below r_o and 0 beyond r_c (C¹ in r), no energy shift.  Elements: all
Z = 1..118.  Source: ASE ``ase.calculators.lj`` and the pescert reference suite.

``smooth=False`` gives ASE's non-smooth mode (u shifted by u(r_c), force jump at
r_c), and ``sigma``/``epsilon``/``rc`` override the per-element rule (e.g. the
σ = ε = 1, r_c = 8 ``clean_lj`` of docs/probes.md §8.1).
"""

from __future__ import annotations

import functools

import jax.numpy as jnp
import numpy as np

from jaxcert.core.elements import cohesive_energy, d_nn, number
from jaxcert.core.model import Model
from jaxcert.core.neighbors import pairs
from jaxcert.models._common import N_Z, pair_sum, presence

LJ_FCC_LATTICE_SUM = 8.610
RC_OVER_SIGMA = 3.0
RO_OVER_RC = 0.66


@functools.lru_cache(maxsize=1)
def _tables() -> tuple[np.ndarray, np.ndarray]:
    sig = np.ones(N_Z)
    eps = np.ones(N_Z)
    for z in range(1, N_Z):
        sig[z] = d_nn(z) / 2 ** (1 / 6)
        eps[z] = cohesive_energy(z) / LJ_FCC_LATTICE_SUM
    return sig, eps


def reference_parameters(el) -> tuple[float, float]:
    """(σ Å, ε eV) of the reference LJ for one element."""
    sig, eps = _tables()
    z = number(el)
    return float(sig[z]), float(eps[z])


def smooth_switch(x, xo, xc):
    """ASE LennardJones switch S(x) in squared distance x (1 below xo, 0 beyond xc)."""
    inner = (xc - x) ** 2 * (xc + 2 * x - 3 * xo) / (xc - xo) ** 3
    return jnp.where(x < xo, 1.0, jnp.where(x < xc, inner, 0.0))


def lennard_jones(
    sigma: float | None = None,
    epsilon: float | None = None,
    rc: float | None = None,
    ro: float | None = None,
    smooth: bool = True,
    name: str = "lj",
) -> Model:
    """Reference LJ (per-element rule) or a fixed-parameter LJ if sigma/epsilon are given."""
    fixed = sigma is not None or epsilon is not None
    if fixed:
        sig_t = np.full(N_Z, 1.0 if sigma is None else float(sigma))
        eps_t = np.full(N_Z, 1.0 if epsilon is None else float(epsilon))
    else:
        sig_t, eps_t = _tables()
    rc_fixed = None if rc is None else float(rc)
    ro_fixed = None if ro is None else float(ro)

    def energy(params, s):
        sig_tab, eps_tab = params
        dt = s.positions.dtype
        pres = presence(s.numbers, s.mask, dt)
        npres = jnp.sum(pres)
        sigma_ = jnp.sum(pres * sig_tab.astype(dt)) / npres
        eps_ = jnp.exp(jnp.sum(pres * jnp.log(eps_tab.astype(dt))) / npres)
        rc_ = RC_OVER_SIGMA * sigma_ if rc_fixed is None else jnp.asarray(rc_fixed, dt)
        ro_ = RO_OVER_RC * rc_ if ro_fixed is None else jnp.asarray(ro_fixed, dt)
        p = pairs(s, rc_)
        x = p.r**2
        sr6 = (sigma_**2 / x) ** 3
        u = 4 * eps_ * (sr6 * sr6 - sr6)
        inside = x < rc_**2
        if smooth:
            phi = u * smooth_switch(x, ro_**2, rc_**2)
        else:
            src6 = (sigma_ / rc_) ** 6
            phi = jnp.where(inside, u - 4 * eps_ * (src6 * src6 - src6), 0.0)
        return pair_sum(jnp.where(inside, phi, 0.0), p)

    def cutoff_of(numbers: np.ndarray) -> float:
        if rc_fixed is not None:
            return rc_fixed
        z = np.unique(np.asarray(numbers))
        return RC_OVER_SIGMA * float(np.mean(sig_t[z]))

    return Model(
        energy_fn=energy,
        params=(jnp.asarray(sig_t), jnp.asarray(eps_t)),
        name=name,
        cutoff=cutoff_of,
        info=(("source", "ASE LennardJones (smooth); docs/probes.md §7 per-element rule"), ("units", "eV, Å")),
    )
