r"""The physical floor of a short-range wall: the universal screened-nuclear (ZBL) repulsion.

J. F. Ziegler, J. P. Biersack and U. Littmark, *The Stopping and Range of Ions in Solids* (Pergamon, 1985):

.. math::  E_\mathrm{ZBL}(r) = \frac{Z_1 Z_2 e^2}{4\pi\varepsilon_0 r}\,\phi(r/a),\qquad
           a = \frac{0.8854\,a_0}{Z_1^{0.23} + Z_2^{0.23}},

.. math::  \phi(x) = 0.1818\,e^{-3.2x} + 0.5099\,e^{-0.9423x} + 0.2802\,e^{-0.4029x} + 0.02817\,e^{-0.2016x},

with e²/4πε₀ = 14.399645 eV·Å and a₀ = 0.529177 Å: the repulsion of two nuclei screened by free-atom
electron densities, fitted to ion-scattering data at keV energies.  At the tens to hundreds of eV of a chemical
wall its error can approach a factor of two, and chemical bonding lowers a real curve E(r) − E(∞) by at most the
pair's binding energy, which no diatomic exceeds by more than :data:`MAX_BINDING` eV (CO, the strongest, binds
by 11.1 eV).  :func:`wall_floor` is therefore the bound jaxcert asks a wall to respect, chosen to hold for any
physical pair: E(r) − E(∞) ≥ ½·E_ZBL(r) − 12 eV wherever that is positive (for C–O: 102 eV at 0.43 Å, 42 eV at
0.57 Å; for Pt–Pt: 144 eV at 1.09 Å).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

__all__ = ["zbl", "wall_floor", "MAX_BINDING", "ZBL_SHARE", "COULOMB", "BOHR"]

#: e²/(4πε₀) in eV·Å.
COULOMB = 14.399645
#: Bohr radius in Å.
BOHR = 0.529177
#: eV: no diatomic molecule binds more strongly (CO, 11.1 eV), rounded up.
MAX_BINDING = 12.0
_C = (0.1818, 0.5099, 0.2802, 0.02817)
_D = (3.2, 0.9423, 0.4029, 0.2016)


def zbl(z1: int, z2: int, r: jnp.ndarray | np.ndarray | float) -> jnp.ndarray:
    """The ZBL universal screened-nuclear repulsion (eV) of nuclei ``z1``, ``z2`` at distance ``r`` (Å)."""
    a = 0.8854 * BOHR / (float(z1) ** 0.23 + float(z2) ** 0.23)
    x = jnp.asarray(r) / a
    phi = sum(c * jnp.exp(-d * x) for c, d in zip(_C, _D, strict=True))
    return COULOMB * float(z1) * float(z2) / jnp.asarray(r) * phi


#: The share of the ZBL repulsion the floor keeps (its error at chemical-wall energies can approach 2×).
ZBL_SHARE = 0.5


def wall_floor(z1: int, z2: int, r: jnp.ndarray | np.ndarray | float, binding: float = MAX_BINDING,
               share: float = ZBL_SHARE) -> jnp.ndarray:
    """``share``·E_ZBL(r) − ``binding`` (eV), floored at 0: the lowest a physical dimer curve E(r) − E(∞) can lie
    at short range (0 where the bound says nothing)."""
    return jnp.maximum(share * zbl(z1, z2, r) - binding, 0.0)
