"""Structures of the benchmark: scaled, primitive and decorated cells, space groups, shared image counts.

Host-side (ASE and spglib) helpers the sections build their inputs with; :func:`structure` is the one
conversion to a :class:`~jaxcert.core.structure.Structure` (no minimum-distance check: the benchmark's
structures are scaled and decorated on purpose, and the relaxation guard judges distances afterwards).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import spglib
from ase.data import atomic_numbers
from ase.formula import Formula

from jaxcert.core.neighbors import image_counts
from jaxcert.core.structure import Structure
from jaxcert.core.structure import _min_distance as _pair_min_distance

__all__ = ["structure", "scaled", "spacegroup", "primitive", "ref_volume", "common_images", "decorate",
           "min_distance", "reduced"]


def _ase_bulk() -> Callable[..., Any]:
    """``ase.build.bulk``, imported on first use.

    Lazy on purpose: ``ase.build`` imports SciPy (about half a second), and every ``jaxcert`` command imports
    this package (the ``controls`` subcommand's defaults), so a module-level import would slow them all.
    """
    return importlib.import_module("ase.build").bulk


def structure(atoms: Any) -> Structure:
    """``atoms`` as a Structure, without the minimum-distance check."""
    return Structure.from_ase(atoms, min_distance=None)


def scaled(atoms: Any, factor: float) -> Any:
    """A copy of ``atoms`` with its volume scaled by ``factor`` at fixed fractional coordinates."""
    a = atoms.copy()
    a.set_cell(np.asarray(a.cell) * factor ** (1.0 / 3.0), scale_atoms=True)
    return a


def spacegroup(atoms: Any, symprec: float = 1e-3) -> int:
    """spglib's space-group number of ``atoms`` (0 when spglib finds none)."""
    ds = spglib.get_symmetry_dataset((np.asarray(atoms.cell), atoms.get_scaled_positions(), atoms.numbers),
                                     symprec=symprec)
    return 0 if ds is None else int(ds.number if hasattr(ds, "number") else ds["number"])


def primitive(symbol: str, lattice: str, v0: float) -> Any:
    """The one-atom primitive fcc or bcc cell of ``symbol`` with volume ``v0`` (Å³)."""
    a = (4.0 * v0) ** (1 / 3) if lattice == "fcc" else (2.0 * v0) ** (1 / 3)
    return _ase_bulk()(symbol, lattice, a=a)


def ref_volume(rs: dict | None, lattice: str) -> float:
    """Volume per atom (Å³) of ASE's reference state for a cubic lattice."""
    a = float(rs["a"])
    return a**3 / (4.0 if lattice == "fcc" else 2.0)


def common_images(model: Any, atoms_list: Sequence[Any], squeeze: float = 0.95) -> tuple[int, int, int] | None:
    """One static image count for every structure (its cell squeezed by ``squeeze``): one compiled program."""
    cuts = [model.cutoff_for(structure(a)) for a in atoms_list]
    if any(c is None for c in cuts):
        return None
    rc = max(cuts)
    cells = np.stack([np.asarray(a.cell) * squeeze for a in atoms_list])
    return image_counts(cells, (True, True, True), float(rc))


def decorate(p: Any, metals: Sequence[str]) -> Any:
    """The prototype with species k (by Z) replaced by ``metals[k]``, scaled to the Vegard volume of the metals."""
    a = p.atoms.copy()
    mapping = {atomic_numbers[e]: atomic_numbers[metals[k]] for k, e in enumerate(p.elements)}
    a.numbers = np.array([mapping[z] for z in a.numbers])
    bulk = _ase_bulk()
    vref = {z: bulk(m).get_volume() / len(bulk(m)) for z, m in ((atomic_numbers[m], m) for m in set(metals))}
    target = float(np.mean([vref[z] for z in a.numbers]))
    return scaled(a, target * len(a) / a.get_volume())


def min_distance(atoms: Any) -> float:
    """The shortest interatomic distance (Å) of a periodic structure (a lone atom: its shortest cell vector)."""
    if len(atoms) < 2:
        d = np.linalg.norm(np.asarray(atoms.cell), axis=1)
        return float(d.min())
    return _pair_min_distance(np.asarray(atoms.positions), np.asarray(atoms.cell), (True, True, True))[0]


def reduced(formula: str) -> tuple[tuple[str, int], ...]:
    """The reduced formula as sorted (element, count) pairs: the key matching a prototype to an MP compound."""
    return tuple(sorted(Formula(formula).reduce()[0].count().items()))
