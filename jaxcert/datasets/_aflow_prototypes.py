"""pymatgen's copy of the AFLOW prototype library (``docs/datasets.md``, "aflow-prototypes").

Read from ``pymatgen/analysis/prototypes/aflow_prototypes.json.gz``: 288 ordered crystal structures, each a
pymatgen ``StructureNL`` parsed (2018) from the AFLOW Library of Crystallographic Prototypes (Mehl et al.,
Comput. Mater. Sci. 136, S1 (2017)) with its tags (AFLOW label, Pearson symbol, Strukturbericht
designation, mineral name). The structures are the library's example decorations with their
experimental lattice parameters and Wyckoff coordinates (no DFT).

"All-metal" is not a property of the library: :meth:`AflowPrototypes.all_metal` applies a non-metal set,
by default the seed paper's non-metal exclusion set (Supplementary Note 5; :data:`SEED_NONMETALS`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

from jaxcert.datasets._files import package_file, read_json

__all__ = ["Prototype", "AflowPrototypes", "load_aflow_prototypes", "SEED_NONMETALS"]

#: The seed paper's non-metal exclusion set (its Supplementary Note 5, "the metallic cut").
SEED_NONMETALS: frozenset[str] = frozenset(
    "H He B C N O F Ne Si P S Cl Ar Ge As Se Br Kr Te I Xe Po At Rn".split()
)


@dataclasses.dataclass(frozen=True)
class Prototype:
    """One prototype structure.

    Attributes:
      label: AFLOW prototype label (e.g. ``"A_cF4_225_a"``; not unique in this file: 9 labels occur twice
        with different decorations).
      pearson, strukturbericht, mineral: the library's tags ("" when absent).
      atoms: the structure (``ase.Atoms``, periodic; positions from the fractional coordinates).
      elements: its chemical elements, sorted by Z.
      formula: the Hill-ordered reduced formula of ``atoms`` (ASE's ``"hill"`` mode on the reduced cell).
    """

    label: str
    pearson: str
    strukturbericht: str
    mineral: str
    atoms: Any
    elements: tuple[str, ...]
    formula: str


@dataclasses.dataclass(frozen=True)
class AflowPrototypes:
    """A collection of :class:`Prototype` (iterable, indexable, filterable)."""

    prototypes: tuple[Prototype, ...]

    def __len__(self) -> int:
        return len(self.prototypes)

    def __iter__(self) -> Iterator[Prototype]:
        return iter(self.prototypes)

    def __getitem__(self, i: int) -> Prototype:
        return self.prototypes[i]

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(p.label for p in self.prototypes)

    def filter(self, keep: Callable[[Prototype], bool]) -> AflowPrototypes:
        """The prototypes for which ``keep(prototype)`` is true."""
        return AflowPrototypes(tuple(p for p in self.prototypes if keep(p)))

    def all_metal(self, nonmetals: Iterable[str] = SEED_NONMETALS) -> AflowPrototypes:
        """The prototypes containing no element of ``nonmetals`` (default: :data:`SEED_NONMETALS`).

        With the default set 83 of the 288 remain; with pymatgen's ``Element.is_metal`` as the test
        (which also drops Sb) 79 remain.
        """
        bad = frozenset(nonmetals)
        unknown = sorted(bad - _SYMBOLS)
        if unknown:
            raise ValueError(f"nonmetals: unknown element symbols {unknown}")
        return self.filter(lambda p: not bad.intersection(p.elements))


def _symbols() -> frozenset[str]:
    from ase.data import chemical_symbols

    return frozenset(chemical_symbols[1:])


_SYMBOLS = _symbols()


def load_aflow_prototypes() -> AflowPrototypes:
    """Load the 288 prototypes shipped with pymatgen (module docstring).

    Raises:
      DatasetUnavailable: pymatgen is not installed (``pip install pymatgen``).
    """
    import ase
    from ase.data import atomic_numbers

    path = package_file("pymatgen", "analysis/prototypes/aflow_prototypes.json.gz", pip="pymatgen")
    out = []
    for rec in read_json(path):
        snl, tags = rec["snl"], rec.get("tags") or {}
        cell = np.asarray(snl["lattice"]["matrix"], np.float64)
        symbols, frac = [], []
        for site in snl["sites"]:
            species = site["species"]
            if len(species) != 1 or float(species[0].get("occu", 1.0)) != 1.0:
                raise ValueError(f"prototype {tags.get('aflow')!r}: a disordered site ({species})")
            symbols.append(str(species[0]["element"]))
            frac.append(site["abc"])
        atoms = ase.Atoms(symbols=symbols, scaled_positions=np.asarray(frac, np.float64), cell=cell, pbc=True)
        elements = tuple(sorted(set(symbols), key=atomic_numbers.__getitem__))
        out.append(Prototype(
            label=str(tags.get("aflow", "")),
            pearson=str(tags.get("pearson") or ""),
            strukturbericht=str(tags.get("strukturbericht") or ""),
            mineral=str(tags.get("mineral") or ""),
            atoms=atoms,
            elements=elements,
            formula=atoms.get_chemical_formula(mode="hill", empirical=True),
        ))
    return AflowPrototypes(tuple(out))
