"""Experimental elastic moduli of the elements and ASE's reference states (``docs/datasets.md``).

"experimental-moduli": bulk modulus K ("Bulk modulus"), shear modulus G ("Rigidity modulus"), Young's
modulus and Poisson's ratio from ``pymatgen/core/periodic_table.json.gz`` — room-temperature handbook
values for the polycrystalline element, without per-value sources or uncertainties. Values are numbers
with a unit table (``"_unit"``) in current pymatgen and strings with units ("170 GPa") in older
versions; both are read by :func:`jaxcert.datasets._units.parse_pressure`.

"ase-reference-states": ``ase.data.reference_states``, the experimental crystal structure (symmetry and
lattice constants) ASE's ``ase.build.bulk`` builds for each element.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from jaxcert.datasets._files import package_file, read_json
from jaxcert.datasets._units import parse_pressure

__all__ = ["ExperimentalModuli", "load_experimental_moduli", "MAGNETIC_3D", "ReferenceState",
           "load_reference_states"]

#: The seed paper's "magnetic 3d elements" (V, Cr, Mn, Fe, Co, Ni; its bad-references section).
MAGNETIC_3D: frozenset[str] = frozenset({"V", "Cr", "Mn", "Fe", "Co", "Ni"})

_KEYS = {"bulk": "Bulk modulus", "shear": ("Rigidity modulus", "Shear modulus"), "young": "Youngs modulus"}


@dataclasses.dataclass(frozen=True)
class ExperimentalModuli:
    """Per-element experimental moduli (read-only arrays, one row per element that has K or G, by Z).

    Attributes:
      symbols, numbers: elements and atomic numbers.
      K: bulk modulus, GPa (NaN where absent).  G: shear (rigidity) modulus, GPa (NaN where absent).
      E: Young's modulus, GPa (NaN where absent).  nu: Poisson's ratio (NaN where absent).
      magnetic_3d: True for V, Cr, Mn, Fe, Co, Ni (:data:`MAGNETIC_3D`).
      reference_symmetry: ASE's reference-state crystal ("fcc", "bcc", "hcp", "diamond", …; "" if none).
      notes: element → qualifier found in the table (e.g. "liquid"), only where one was found.
    """

    symbols: tuple[str, ...]
    numbers: np.ndarray
    K: np.ndarray
    G: np.ndarray
    E: np.ndarray
    nu: np.ndarray
    magnetic_3d: np.ndarray
    reference_symmetry: tuple[str, ...]
    notes: dict[str, str]

    def __len__(self) -> int:
        return len(self.symbols)

    def isotropic_young_ratio(self) -> np.ndarray:
        """9KG/(3K+G) divided by the tabulated E: 1 for a consistent isotropic triple, NaN where one is absent.

        A consistency check of the table: for an isotropic solid E = 9KG/(3K+G), so a ratio far from 1
        marks a suspect entry (e.g. Mo, whose tabulated G = 20 GPa is about six times too small).
        """
        with np.errstate(invalid="ignore", divide="ignore"):
            return 9.0 * self.K * self.G / (3.0 * self.K + self.G) / self.E

    def cubic(self) -> np.ndarray:
        """Mask of elements whose ASE reference state is a cubic metal lattice (fcc, bcc)."""
        return np.array([s in ("fcc", "bcc") for s in self.reference_symmetry], bool)


def _ro(x: Any, dtype: Any = np.float64) -> np.ndarray:
    a = np.array(x, dtype=dtype)
    a.setflags(write=False)
    return a


def load_experimental_moduli() -> ExperimentalModuli:
    """Load K, G, E and ν per element from pymatgen's periodic table (GPa; module docstring).

    Raises:
      DatasetUnavailable: pymatgen is not installed (``pip install pymatgen``).
      ValueError: a table entry cannot be read as a pressure (names the element and field).
    """
    from ase.data import atomic_numbers, reference_states

    path = package_file("pymatgen", "core/periodic_table.json.gz", pip="pymatgen")
    table = read_json(path)
    units = table.get("_unit", {}) or {}
    rows = []
    notes: dict[str, str] = {}
    for sym, rec in table.items():
        if sym not in atomic_numbers or not isinstance(rec, dict):
            continue  # "_unit", and isotopes such as "D" and "T" (not in ASE's symbol table as elements)
        if rec.get("Atomic no") is not None and int(rec["Atomic no"]) != atomic_numbers[sym]:
            continue
        vals = {}
        for key, names in _KEYS.items():
            names = (names,) if isinstance(names, str) else names
            name = next((n for n in names if rec.get(n) is not None), names[0])
            q = parse_pressure(rec.get(name), units.get(name), what=f"{sym}: {name}")
            vals[key] = q.value
            if q.note:
                notes[sym] = ", ".join(x for x in (notes.get(sym, ""), f"{name}: {q.note}") if x)
        if math.isnan(vals["bulk"]) and math.isnan(vals["shear"]):
            continue
        nu = rec.get("Poissons ratio")
        nu = float(nu) if isinstance(nu, (int, float)) else math.nan
        rows.append((atomic_numbers[sym], sym, vals["bulk"], vals["shear"], vals["young"], nu))
    rows.sort()
    syms = tuple(r[1] for r in rows)
    refsym = []
    for z, *_ in rows:
        st = reference_states[z] if z < len(reference_states) else None
        refsym.append(str(st.get("symmetry", "")) if st else "")
    return ExperimentalModuli(
        symbols=syms,
        numbers=_ro([r[0] for r in rows], np.int64),
        K=_ro([r[2] for r in rows]),
        G=_ro([r[3] for r in rows]),
        E=_ro([r[4] for r in rows]),
        nu=_ro([r[5] for r in rows]),
        magnetic_3d=_ro([s in MAGNETIC_3D for s in syms], bool),
        reference_symmetry=tuple(refsym),
        notes=notes,
    )


@dataclasses.dataclass(frozen=True)
class ReferenceState:
    """ASE's reference state of one element (``ase.data.reference_states[Z]``).

    Attributes:
      symbol, number: the element.  symmetry: "fcc", "bcc", "hcp", "diamond", "diatom", …
      a: lattice constant, Å (NaN for "diatom"/"atom").  c_over_a: c/a where given (NaN otherwise).
      d: bond length for "diatom", Å (NaN otherwise).  magmom: ASE's magnetic moment per atom (0 if none).
    """

    symbol: str
    number: int
    symmetry: str
    a: float
    c_over_a: float
    d: float
    magmom: float

    def build(self) -> Any:
        """``ase.build.bulk(symbol)`` for a crystalline state (ValueError for "diatom"/"atom")."""
        if self.symmetry in ("diatom", "atom"):
            raise ValueError(f"{self.symbol}: the reference state is a {self.symmetry}, not a crystal")
        from ase.build import bulk

        return bulk(self.symbol)


def load_reference_states() -> tuple[ReferenceState, ...]:
    """ASE's reference states for every element that has one (by Z; lattice constants in Å)."""
    from ase.data import chemical_symbols, reference_states

    out = []
    for z, st in enumerate(reference_states):
        if not st or z == 0:
            continue
        out.append(ReferenceState(
            symbol=chemical_symbols[z], number=z, symmetry=str(st.get("symmetry", "")),
            a=float(st.get("a", math.nan)), c_over_a=float(st.get("c/a", math.nan)),
            d=float(st.get("d", math.nan)), magmom=float(st.get("magmom_per_atom", 0.0)),
        ))
    return tuple(out)
