"""The Δ-project elemental crystals with WIEN2k and experimental EOS parameters (``docs/datasets.md``, "dcdft").

Read from ``ase/collections/dcdft.json`` (ASE's ``ase.collections.dcdft``; built by
``ase/collections/create.py`` from the DeltaCodesDFT files ``WIEN2k.txt``, ``history/exp.txt`` and
``primCIFs/``: https://github.com/molmod/DeltaCodesDFT). 71 elemental crystals (H to Ba, and Lu to Rn
without At), each with the all-electron WIEN2k PBE Birch–Murnaghan parameters of
the Δ benchmark (Lejaeghere et al., Science 351, aad3000 (2016)), and for 58 of them the experimental
values tabulated by the same project (Lejaeghere et al., Crit. Rev. Solid State Mater. Sci. 39, 1 (2014)).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from jaxcert.datasets._files import package_file

__all__ = ["DcdftElement", "DcdftSet", "load_dcdft"]


@dataclasses.dataclass(frozen=True)
class DcdftElement:
    """One crystal of the set.

    Attributes:
      symbol: chemical symbol.
      atoms: the collection's crystal (``ase.Atoms``; the Δ protocol's cell, primitive for most, conventional
        for some, e.g. 4-atom fcc Cu; initial magnetic moments set for Fe, Co, Ni (ferromagnetic) and O, Cr,
        Mn (antiferromagnetic)). Its volume is the
        CIF's, near but not equal to ``v0``: scale it (:meth:`DcdftSet.at_v0`) before an EOS scan.
      v0: WIEN2k equilibrium volume, Å³/atom.  b0: WIEN2k bulk modulus, GPa.  b1: WIEN2k B′ (dimensionless).
      exp_v0, exp_b0, exp_b1: the experimental values (same units), NaN where the set has none.
    """

    symbol: str
    atoms: Any
    v0: float
    b0: float
    b1: float
    exp_v0: float
    exp_b0: float
    exp_b1: float

    @property
    def has_exp(self) -> bool:
        """True when experimental V0, B0 and B′ are all present."""
        return bool(np.isfinite(self.exp_v0) and np.isfinite(self.exp_b0) and np.isfinite(self.exp_b1))


@dataclasses.dataclass(frozen=True)
class DcdftSet:
    """The 71 crystals as aligned, read-only arrays (one row per element, in the collection's order, by Z).

    Attributes:
      symbols: chemical symbols.
      atoms: the crystals (``ase.Atoms``; copies are handed out by :meth:`__getitem__` and :meth:`at_v0`).
      v0, b0, b1: WIEN2k PBE Birch–Murnaghan parameters (Å³/atom, GPa, dimensionless).
      exp_v0, exp_b0, exp_b1: experimental parameters (same units; NaN where absent).
      has_exp: True where all three experimental values are present (58 elements).
      cif_volume: the collection structure's own volume per atom, Å³/atom.
    """

    symbols: tuple[str, ...]
    atoms: tuple[Any, ...]
    v0: np.ndarray
    b0: np.ndarray
    b1: np.ndarray
    exp_v0: np.ndarray
    exp_b0: np.ndarray
    exp_b1: np.ndarray
    has_exp: np.ndarray
    cif_volume: np.ndarray

    def __len__(self) -> int:
        return len(self.symbols)

    def index(self, symbol: str) -> int:
        """Row of ``symbol``."""
        try:
            return self.symbols.index(symbol)
        except ValueError:
            raise KeyError(f"{symbol!r} is not in the dcdft set") from None

    def __getitem__(self, symbol: str) -> DcdftElement:
        i = self.index(symbol)
        return DcdftElement(
            symbol, self.atoms[i].copy(), float(self.v0[i]), float(self.b0[i]), float(self.b1[i]),
            float(self.exp_v0[i]), float(self.exp_b0[i]), float(self.exp_b1[i]),
        )

    def at_v0(self, symbol: str, v0: float | None = None) -> Any:
        """A copy of the crystal scaled isotropically (fixed fractional coordinates) to ``v0`` Å³/atom.

        ``v0`` defaults to the WIEN2k equilibrium volume, the centre of the Δ protocol's ±6 % volume set.
        """
        i = self.index(symbol)
        target = float(self.v0[i] if v0 is None else v0)
        if not np.isfinite(target) or target <= 0:
            raise ValueError(f"v0 must be a positive volume per atom in Å³, got {v0!r}")
        atoms = self.atoms[i].copy()
        scale = (target / (atoms.get_volume() / len(atoms))) ** (1.0 / 3.0)
        atoms.set_cell(np.asarray(atoms.get_cell()) * scale, scale_atoms=True)
        return atoms


def _ro(x: Any, dtype: Any = np.float64) -> np.ndarray:
    a = np.array(x, dtype=dtype)
    a.setflags(write=False)
    return a


def load_dcdft() -> DcdftSet:
    """Load ASE's ``dcdft`` collection (see the module docstring; units Å³/atom, GPa).

    Raises:
      DatasetUnavailable: ASE is missing or does not ship ``collections/dcdft.json`` (``pip install ase``).
    """
    path = package_file("ase", "collections/dcdft.json", pip="ase")
    from ase.db.row import AtomsRow
    from ase.io.jsonio import read_json as read_ase_json

    raw = read_ase_json(path)  # ASE's database JSON, read with ASE's own decoder
    symbols, atoms, cols = [], [], {k: [] for k in ("v0", "b0", "b1", "exp_v0", "exp_b0", "exp_b1")}
    for key in raw["ids"]:
        row = raw[key]
        kvp = row["key_value_pairs"]
        symbols.append(str(kvp["name"]))
        atoms.append(AtomsRow(row).toatoms())
        cols["v0"].append(kvp["wien2k_volume"])
        cols["b0"].append(kvp["wien2k_B"])
        cols["b1"].append(kvp["wien2k_Bp"])
        cols["exp_v0"].append(kvp.get("exp_volume", np.nan))
        cols["exp_b0"].append(kvp.get("exp_B", np.nan))
        cols["exp_b1"].append(kvp.get("exp_Bp", np.nan))
    arr = {k: _ro(v) for k, v in cols.items()}
    has_exp = _ro(np.isfinite(arr["exp_v0"]) & np.isfinite(arr["exp_b0"]) & np.isfinite(arr["exp_b1"]), bool)
    vol = _ro([a.get_volume() / len(a) for a in atoms])
    return DcdftSet(tuple(symbols), tuple(atoms), has_exp=has_exp, cif_volume=vol, **arr)

