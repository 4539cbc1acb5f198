"""Per-element reference data (docs/probes.md §2.1 and §7.1).

* :func:`reference_crystal` — ``ase.build.bulk(el)`` (ASE reference state,
  primitive cell, tabulated lattice constant) or ``None`` if ASE cannot build it.
* :func:`d_nn` — nearest-neighbour distance of the reference crystal (smallest
  nonzero minimum-image distance in ``crystal.repeat(3)``), else the covalent
  diameter 2·r_cov (Cordero 2008; non-finite/non-positive radius → 0.75 Å).
* :data:`E_COH` — cohesive energies in eV/atom (rounded Kittel values) used by
  the reference Lennard-Jones; any other element uses 3.0 eV.
"""

from __future__ import annotations

import functools

import numpy as np

from jaxcert.core.cache import stored

__all__ = ["symbol", "number", "reference_crystal", "d_nn", "E_COH", "cohesive_energy", "MAX_Z"]

MAX_Z = 118

#: Cohesive energies (eV/atom), docs/probes.md §7.1.
E_COH = {
    "Li": 1.63, "Be": 3.32, "B": 5.81, "C": 7.37, "N": 4.92, "O": 2.60, "F": 0.84, "Ne": 0.020,
    "Na": 1.113, "Mg": 1.51, "Al": 3.39, "Si": 4.63, "P": 3.43, "S": 2.85, "Cl": 1.40, "Ar": 0.080,
    "K": 0.934, "Ca": 1.84, "Ti": 4.85, "Fe": 4.28, "Ni": 4.44, "Cu": 3.49, "Zn": 1.35, "Ge": 3.85,
    "Ag": 2.95, "Au": 3.81, "Pt": 5.84, "W": 8.90,
}
E_COH_DEFAULT = 3.0


def symbol(z_or_symbol: int | str) -> str:
    """Chemical symbol for an atomic number or symbol; raises ValueError if unknown."""
    from ase.data import atomic_numbers, chemical_symbols

    if isinstance(z_or_symbol, str):
        if z_or_symbol not in atomic_numbers or z_or_symbol == "X":
            raise ValueError(f"unknown element symbol {z_or_symbol!r}")
        return z_or_symbol
    z = int(z_or_symbol)
    if not 1 <= z <= MAX_Z:
        raise ValueError(f"unknown atomic number {z}: valid elements have Z in 1..{MAX_Z}")
    return chemical_symbols[z]


def number(el: int | str) -> int:
    """Atomic number of a symbol (or number)."""
    from ase.data import atomic_numbers

    return atomic_numbers[symbol(el)]


def cohesive_energy(el: int | str) -> float:
    """E_coh in eV/atom (docs/probes.md §7.1 table, 3.0 eV otherwise)."""
    return E_COH.get(symbol(el), E_COH_DEFAULT)


def reference_crystal(el: int | str):
    """``ase.build.bulk(el)`` or ``None`` when ASE raises (no buildable reference state)."""
    from ase.build import bulk

    try:
        return bulk(symbol(el))
    except Exception:  # noqa: BLE001 - ASE raises several types for missing data
        return None


def covalent_diameter(el: int | str, scale: float = 1.0) -> float:
    """2·r_cov(el)·scale in Å (Cordero 2008 via ASE; bad radius → 0.75 Å)."""
    from ase.data import covalent_radii

    r = float(covalent_radii[number(el)])
    if not np.isfinite(r) or r <= 0:
        r = 0.75
    return 2.0 * r * scale


@functools.cache
@stored  # a warm process reads it instead of importing ase.build (jaxcert.core.cache.stored)
def _d_nn_unscaled(el: str) -> float:
    crystal = reference_crystal(el)
    if crystal is None:
        return covalent_diameter(el)
    big = crystal.repeat(3)
    d = big.get_all_distances(mic=True)
    d = d[d > 1e-8]
    return float(d.min())


def d_nn(el: int | str, scale: float = 1.0) -> float:
    """Nearest-neighbour distance (Å) of the reference crystal, covalent-diameter fallback."""
    return _d_nn_unscaled(symbol(el)) * scale
