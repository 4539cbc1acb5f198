r"""Effective medium theory (EMT): a pure-JAX port of ASE's ``EMT`` calculator.

The functional form, parameters and cutoff follow ``ase.calculators.emt``
(Jacobsen, Stoltze & Nørskov, Surf. Sci. 366, 394 (1996); ASAP's ``emt.pdf``).
For atom i of species a, with neighbours j of species b within ``rc_list``,

.. math::
   w(r) = \frac{1}{1 + e^{a_c (r - r_c)}}, \qquad \chi_{ab} = n_{0,b} / n_{0,a},

   \sigma_{1,i} = \sum_j \chi_{ab}\, e^{-\eta_{2,b}(r_{ij} - \beta s_{0,b})}\, w(r_{ij}),
   \qquad s_i = -\frac{\ln(\sigma_{1,i} / 12\gamma_{1,a})}{\beta\,\eta_{2,a}},

   E_i = E_{0,a}(1 + \lambda_a s_i)e^{-\lambda_a s_i} + 6 V_{0,a} e^{-\kappa_a s_i}
         + \tfrac12 \sum_j \Big[ -\tfrac{V_{0,a}}{2\gamma_{2,a}}\,\chi_{ab}\,
           e^{-\kappa_b (r_{ij}/\beta - s_{0,b})} - \tfrac{V_{0,b}}{2\gamma_{2,b}}\,\chi_{ab}^{-1}\,
           e^{-\kappa_a (r_{ij}/\beta - s_{0,a})} \Big] w(r_{ij}) \;-\; E_{0,a},

and :math:`E = \sum_i E_i` (eV).  The first two terms are the cohesive function
:math:`E_c(s_i)` plus the reference-crystal pair term (the fcc embedding at the
neutral-sphere radius ``s``), the sum is the atomic-sphere correction, and
:math:`-E_0` is ASAP's convention (the isolated atom has E = −E₀ > 0; an atom with
no neighbour inside ``rc_list`` contributes exactly that, as in ASE).

The reference-shell normalisation: with :math:`\beta = 1.809` (ASE keeps the
historical rounding of :math:`(16\pi/3)^{1/3}/\sqrt2`) and the fcc shells
:math:`r_k = \beta s_0 \sqrt{k}` with 12, 6, 24 sites (k = 1, 2, 3),

.. math::
   \gamma_1 = \sum_k \tfrac{n_k}{12} w(r_k)\, e^{-\eta_2 (r_k - \beta s_0)}, \qquad
   \gamma_2 = \sum_k \tfrac{n_k}{12} w(r_k)\, e^{-\tfrac{\kappa}{\beta} (r_k - \beta s_0)}.

Cutoff (ASE ``_calc_cutoff``): with :math:`r_{1nn} = \beta \max s_0`,
:math:`r_c = r_{1nn}(\sqrt3 + 2)/2` (midway between the 3rd and 4th fcc shells),
:math:`a_c = \ln(10^4 - 1)/(2 r_{1nn} - r_c)` (w = 10⁻⁴ at the 4th shell) and a
hard neighbour cut at ``rc_list = r_c + 0.5`` Å.  By default (ASE's
``asap_cutoff=False``) the maximum runs over the whole parameter table (Ag's
s₀ = 3.01 bohr), so r_c ≈ 5.38 Å and rc_list ≈ 5.88 Å for every composition; with
``asap_cutoff=True`` it runs over the species present and ``rc_list = 1.045 r_c``.
The hard cut makes E discontinuous at rc_list (w(rc_list) ≈ 6·10⁻⁶), exactly as in
ASE; forces and stress are the exact derivatives away from that surface.

Parameters (ASE's table, in eV and bohr; converted with Bohr = 0.5291772105638411 Å,
ASE's CODATA-2014 default): Al, Cu, Ag, Au, Ni, Pd, Pt, and ASE's "just for fun"
H, C, N, O (not physical).  ``params`` is a dict of per-Z tables (index = atomic
number) in eV and Å, so one compiled function serves every composition under
``jit``/``vmap``, and the model is differentiable in its parameters (the cutoff
r_c, a_c stays fixed at build time unless ``asap_cutoff=True``).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from jaxcert.core.model import Model
from jaxcert.core.neighbors import pairs
from jaxcert.models._common import N_Z, presence

__all__ = ["emt", "atomic_energies", "PARAMETERS", "BETA", "BOHR_A", "SUPPORTED"]

#: Bohr radius in Å (CODATA 2014, ``ase.units.Bohr``).
BOHR_A = 0.5291772105638411
#: (16π/3)^{1/3}/√2 with ASE's historical rounding.
BETA = 1.809
#: w at the 4th fcc shell, which sets the Fermi-function slope.
_EPS_4NN = 1e-4

#: ASE's EMT table: symbol -> (E0 eV, s0 bohr, V0 eV, eta2 1/bohr, kappa 1/bohr, lambda 1/bohr, n0 1/bohr³).
PARAMETERS: dict[str, tuple[float, float, float, float, float, float, float]] = {
    "Al": (-3.28, 3.00, 1.493, 1.240, 2.000, 1.169, 0.00700),
    "Cu": (-3.51, 2.67, 2.476, 1.652, 2.740, 1.906, 0.00910),
    "Ag": (-2.96, 3.01, 2.132, 1.652, 2.790, 1.892, 0.00547),
    "Au": (-3.80, 3.00, 2.321, 1.674, 2.873, 2.182, 0.00703),
    "Ni": (-4.44, 2.60, 3.673, 1.669, 2.757, 1.948, 0.01030),
    "Pd": (-3.90, 2.87, 2.773, 1.818, 3.107, 2.155, 0.00688),
    "Pt": (-5.85, 2.90, 4.067, 1.812, 3.145, 2.192, 0.00802),
    "H": (-3.21, 1.31, 0.132, 2.652, 2.790, 3.892, 0.00547),
    "C": (-3.50, 1.81, 0.332, 1.652, 2.790, 1.892, 0.01322),
    "N": (-5.10, 1.88, 0.132, 1.652, 2.790, 1.892, 0.01222),
    "O": (-4.60, 1.95, 0.332, 1.652, 2.790, 1.892, 0.00850),
}

_Z = {"H": 1, "C": 6, "N": 7, "O": 8, "Al": 13, "Ni": 28, "Cu": 29, "Pd": 46, "Ag": 47, "Pt": 78, "Au": 79}
#: Atomic numbers with EMT parameters.
SUPPORTED: tuple[int, ...] = tuple(sorted(_Z[el] for el in PARAMETERS))

_KEYS = ("E0", "s0", "V0", "eta2", "kappa", "lambda", "n0")


def _tables() -> dict[str, np.ndarray]:
    """Per-Z tables in eV and Å (unsupported Z hold harmless fillers: 1.0, E0 = 0)."""
    tab = {k: np.ones(N_Z) for k in _KEYS}
    tab["E0"][:] = 0.0
    for el, (e0, s0, v0, eta2, kappa, lam, n0) in PARAMETERS.items():
        z = _Z[el]
        tab["E0"][z] = e0
        tab["s0"][z] = s0 * BOHR_A
        tab["V0"][z] = v0
        tab["eta2"][z] = eta2 / BOHR_A
        tab["kappa"][z] = kappa / BOHR_A
        tab["lambda"][z] = lam / BOHR_A
        tab["n0"][z] = n0 / BOHR_A**3
    return tab


def _cutoff_from_maxs0(maxs0, asap_cutoff: bool):
    """(r_c, a_c, rc_list) in Å, 1/Å, Å from the largest s0 (Å); works on floats and arrays."""
    r1nn = BETA * maxs0
    rc = r1nn * 0.5 * (math.sqrt(3.0) + 2.0)
    acut = math.log(1.0 / _EPS_4NN - 1.0) / (r1nn * 2.0 - rc)
    rc_list = rc * 1.045 if asap_cutoff else rc + 0.5
    return rc, acut, rc_list


def _gammas(s0, eta2, kappa, rc, acut):
    """Reference-shell normalisations γ₁, γ₂ (per table entry) over the 12, 6, 24 fcc shells."""
    n = jnp.asarray([12.0, 6.0, 24.0], s0.dtype)
    r = BETA * s0[..., None] * jnp.sqrt(jnp.asarray([1.0, 2.0, 3.0], s0.dtype))
    w = 1.0 / (1.0 + jnp.exp(acut * (r - rc)))
    x = n * w / 12.0
    r1 = BETA * s0[..., None]
    gamma1 = jnp.sum(x * jnp.exp(-eta2[..., None] * (r - r1)), axis=-1)
    gamma2 = jnp.sum(x * jnp.exp(-kappa[..., None] / BETA * (r - r1)), axis=-1)
    return gamma1, gamma2


def atomic_energies(params: dict[str, jax.Array], s, asap_cutoff: bool = False) -> jax.Array:
    """Per-atom EMT energies E_i (n,) in eV (zero on padding atoms); ``s`` must be prepared."""
    dt = s.positions.dtype
    tab = {k: jnp.asarray(v).astype(dt) for k, v in params.items()}
    if asap_cutoff:
        pres = presence(s.numbers, s.mask, dt)
        maxs0 = jnp.max(jnp.where(pres > 0, tab["s0"], 0.0))
    else:
        maxs0 = float(np.max(_tables()["s0"][list(SUPPORTED)]))
    rc, acut, rc_list = _cutoff_from_maxs0(maxs0, asap_cutoff)
    gamma1, gamma2 = _gammas(tab["s0"], tab["eta2"], tab["kappa"], rc, acut)

    p = pairs(s, rc_list)
    inside = p.mask & (p.r < rc_list)
    r = jnp.where(inside, p.r, rc)  # keep exp() finite (and its gradient) outside
    zi = s.numbers[:, None]
    zj = s.numbers[p.j]
    take = lambda k, z: tab[k][z]  # noqa: E731
    w = jnp.where(inside, 1.0 / (1.0 + jnp.exp(acut * (r - rc))), 0.0)
    chi = take("n0", zj) / take("n0", zi)

    # density: sigma1 and the neutral-sphere radius s_i
    dsig1 = jnp.exp(-take("eta2", zj) * (r - BETA * take("s0", zj))) * chi * w
    sigma1 = jnp.sum(dsig1, axis=-1)
    z = s.numbers
    has_nb = jnp.any(inside, axis=-1)
    sig_safe = jnp.where(has_nb, sigma1, 12.0 * gamma1[z])
    ds = -jnp.log(sig_safe / (12.0 * gamma1[z])) / (BETA * tab["eta2"][z])
    lds = tab["lambda"][z] * ds
    e_coh = tab["E0"][z] * (1.0 + lds) * jnp.exp(-lds) + 6.0 * tab["V0"][z] * jnp.exp(-tab["kappa"][z] * ds)

    # atomic-sphere correction: pair term, both directions
    nh = -0.5 * tab["V0"] / gamma2
    dsig2s = jnp.exp(-take("kappa", zj) * (r / BETA - take("s0", zj))) * chi * w
    dsig2o = jnp.exp(-take("kappa", zi) * (r / BETA - take("s0", zi))) / chi * w
    e_as = 0.5 * jnp.sum(nh[zi] * dsig2s + nh[zj] * dsig2o, axis=-1)

    e = jnp.where(has_nb, e_coh + e_as, 0.0) - tab["E0"][z]
    return jnp.where(s.mask, e, 0.0)


def emt(asap_cutoff: bool = False, name: str = "emt") -> Model:
    """ASE's EMT as a :class:`~jaxcert.Model` (eV, Å); elements Al Cu Ag Au Ni Pd Pt H C N O.

    Args:
      asap_cutoff: ASE's option: take the cutoff from the species present (and
        ``rc_list = 1.045 r_c``) instead of from the whole table.
      name: label used in reports.
    """
    tab = _tables()
    s0_np = tab["s0"]

    def energy(params, s):
        return jnp.sum(atomic_energies(params, s, asap_cutoff))

    if asap_cutoff:

        def cutoff(numbers: np.ndarray) -> float:
            z = np.unique(np.asarray(numbers))
            z = z[np.isin(z, SUPPORTED)]
            maxs0 = float(np.max(s0_np[z])) if z.size else float(np.max(s0_np[list(SUPPORTED)]))
            return float(_cutoff_from_maxs0(maxs0, True)[2])

    else:
        cutoff = float(_cutoff_from_maxs0(float(np.max(s0_np[list(SUPPORTED)])), False)[2])

    return Model(
        energy_fn=energy,
        params={k: jnp.asarray(v) for k, v in tab.items()},
        name=name,
        cutoff=cutoff,
        elements=SUPPORTED,
        info=(
            ("source", "ase.calculators.emt.EMT; Jacobsen, Stoltze & Norskov, Surf. Sci. 366, 394 (1996)"),
            ("units", "eV, Å"),
            ("asap_cutoff", str(bool(asap_cutoff))),
        ),
    )
