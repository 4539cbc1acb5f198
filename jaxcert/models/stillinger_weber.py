r"""Stillinger–Weber potential for silicon.

.. math::
   E = \varepsilon\Big[\sum_{i<j} f_2(r_{ij}/\sigma)
       + \sum_i \sum_{j<k} \lambda\, e^{\gamma/(r_{ij}/\sigma - a) + \gamma/(r_{ik}/\sigma - a)}
         (\cos\theta_{jik} - \cos\theta_0)^2\Big],

   f_2(r) = A\,(B r^{-p} - r^{-q})\, e^{1/(r - a)} \quad (r < a), \qquad f_2 = 0 \quad (r \ge a),

with θ_jik the angle at atom i between the bonds to j and k, and every factor
``exp(·/(r/σ − a))`` set to zero at and beyond r = aσ.  The cutoff is C^∞: all
derivatives vanish at r_c = aσ = 3.77118 Å.  Values beyond the cutoff are
computed with a double ``where`` (the exponent is evaluated at a safe dummy
distance there), so gradients stay finite at and after the cutoff.

Parameters (Stillinger & Weber, Phys. Rev. B 31, 5262 (1985)): ε = 2.1683 eV,
σ = 2.0951 Å, a = 1.80, λ = 21.0, γ = 1.20, A = 7.049556277, B = 0.6022245584,
p = 4, q = 0, cos θ₀ = −1/3.  Element: Si only.  Diamond Si at a₀ = 5.431 Å has
every bond at the pair minimum and every angle tetrahedral: E = −2ε = −4.3366 eV/atom.

The three-body sum needs no triplet table: with unit bond vectors û_j and radial
weights g_j = exp(γ/(r_ij/σ − a)) around atom i,

.. math::
   \sum_{j \ne k} g_j g_k (\hat u_j\!\cdot\!\hat u_k - c_0)^2
   = \lVert \textstyle\sum_j g_j \hat u_j \hat u_j^{\mathsf T}\rVert_F^2
     - 2c_0 \lVert \textstyle\sum_j g_j \hat u_j\rVert^2
     + c_0^2 \big(\textstyle\sum_j g_j\big)^2 - (1 - c_0)^2 \textstyle\sum_j g_j^2,

an exact identity (the last term removes j = k), so the cost is that of a pair
sum and no neighbour capacity can overflow.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from jaxcert.core.model import Model
from jaxcert.core.neighbors import pairs
from jaxcert.core.structure import Structure
from jaxcert.models._common import pair_sum

__all__ = ["stillinger_weber", "SW_SI_1985"]

#: Stillinger & Weber, PRB 31, 5262 (1985), silicon.
SW_SI_1985: dict[str, float] = {
    "epsilon": 2.1683,  # eV
    "sigma": 2.0951,  # Å
    "a": 1.80,
    "lam": 21.0,
    "gamma": 1.20,
    "A": 7.049556277,
    "B": 0.6022245584,
    "p": 4.0,
    "q": 0.0,
    "cos0": -1.0 / 3.0,
}


def _sw_energy(params: dict[str, jax.Array], s: Structure, rc: float) -> jax.Array:
    dt = s.positions.dtype
    prm = {k: jnp.asarray(v, dt) for k, v in params.items()}
    sig, a = prm["sigma"], prm["a"]
    p = pairs(s, rc)
    x = p.r / sig - a  # reduced distance to the cutoff, < 0 inside
    inside = p.mask & (x < 0.0)
    x_safe = jnp.where(inside, x, -1.0)  # double where: finite exponent and gradient outside
    rr = jnp.where(inside, p.r / sig, 1.0)
    f2 = prm["A"] * (prm["B"] * rr ** (-prm["p"]) - rr ** (-prm["q"])) * jnp.exp(1.0 / x_safe)
    e2 = pair_sum(jnp.where(inside, f2, 0.0), p)

    g = jnp.where(inside, jnp.exp(prm["gamma"] / x_safe), 0.0)  # (n, m) radial weights
    u = [x / p.r for x in p.d]  # unit bond vectors (r = 1 on masked slots), per component
    gu = [g * ua for ua in u]
    m0 = jnp.sum(g, axis=-1)
    m1 = [jnp.sum(x, axis=-1) for x in gu]
    m2 = {(a, b): jnp.sum(gu[a] * u[b], axis=-1) for a in range(3) for b in range(a, 3)}  # symmetric
    m2_sq = sum((1.0 if a == b else 2.0) * v * v for (a, b), v in m2.items())
    c0 = prm["cos0"]
    t = m2_sq - 2.0 * c0 * sum(x * x for x in m1) + c0**2 * m0**2 - (1.0 - c0) ** 2 * jnp.sum(g * g, axis=-1)
    e3 = 0.5 * prm["lam"] * jnp.sum(jnp.where(s.mask, t, 0.0))
    return prm["epsilon"] * (e2 + e3)


def stillinger_weber(parameters: dict[str, float] | None = None, name: str = "sw", **overrides: Any) -> Model:
    """Stillinger–Weber Si model (eV, Å); ``overrides`` replace entries of :data:`SW_SI_1985`.

    E.g. ``stillinger_weber(lam=31.5, epsilon=1.64833)`` gives the Vink et al. a-Si variant.
    The cutoff a·σ (Å) is fixed at construction from the parameters given.
    """
    prm = dict(SW_SI_1985 if parameters is None else parameters)
    unknown = set(overrides) - set(SW_SI_1985)
    if unknown:
        raise KeyError(f"unknown Stillinger-Weber parameter(s) {sorted(unknown)}; known: {sorted(SW_SI_1985)}")
    prm.update({k: float(v) for k, v in overrides.items()})
    rc = float(prm["a"] * prm["sigma"])

    def energy(params: dict[str, jax.Array], s: Structure) -> jax.Array:
        return _sw_energy(params, s, rc)

    return Model(
        energy_fn=energy,
        params={k: jnp.asarray(float(v)) for k, v in prm.items()},
        name=name,
        cutoff=rc,
        elements=(14,),
        info=(
            ("source", "F. H. Stillinger and T. A. Weber, Phys. Rev. B 31, 5262 (1985)"),
            ("units", "eV, Å"),
            ("cutoff", f"a*sigma = {rc:.5f} Å, C-infinity"),
        ),
    )
