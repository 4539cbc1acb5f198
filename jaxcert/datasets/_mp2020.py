"""The MP2020 energy-correction constants (``docs/datasets.md``, "mp2020-corrections").

Read from ``pymatgen/analysis/compatibility/MP2020Compatibility.yaml`` (Wang et al., Sci. Rep. 11, 15496
(2021)). The file's comment says "eV/atom"; the constants are in **eV per atom of the corrected species**:
``MP2020Compatibility`` adds ``value × n_species`` to a compound's total energy, so the shift of its energy
per atom is ``value × x_species`` (x the atomic fraction) — the form of a per-element constant in a
composition-linear fit. Two kinds:

* composition (anion) corrections, per anion atom: ``oxide``, ``peroxide``, ``superoxide``, ``ozonide``
  (each per O atom, by MP's oxide type), S (sulfides), F, Cl, Br, I, N, Se, Si, Sb, Te, H (each applied
  only where the element is an anion);
* GGA/GGA+U mixing corrections, per transition-metal atom (V, Cr, Mn, Fe, Co, Ni, W, Mo), applied to
  GGA+U oxides (``"O"``) and fluorides (``"F"``) only.

A correction is added to the raw energy to reach experiment, so a fit of raw − experiment per element
finds ≈ −value (e.g. ≈ +0.687 eV per O atom for oxides).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from jaxcert.datasets import DatasetUnavailable
from jaxcert.datasets._files import package_file

__all__ = ["MP2020Corrections", "load_mp2020_corrections", "ANION_ELEMENT"]

#: The element each composition-correction species acts on.
ANION_ELEMENT: dict[str, str] = {"oxide": "O", "peroxide": "O", "superoxide": "O", "ozonide": "O"}


@dataclasses.dataclass(frozen=True)
class MP2020Corrections:
    """MP2020 constants, eV per atom of the corrected species, with their fitted 1σ uncertainties.

    Attributes:
      composition: species → correction (``oxide``, ``peroxide``, …, ``S``, ``F``, …), eV per anion atom.
      composition_uncertainty: species → 1σ, same units.
      u_mixing: anion ("O" or "F") → {metal → correction}, eV per metal atom (GGA+U entries only).
      u_mixing_uncertainty: the same layout, 1σ.
      name: the scheme's name in the file ("MP2020").
    """

    composition: dict[str, float]
    composition_uncertainty: dict[str, float]
    u_mixing: dict[str, dict[str, float]]
    u_mixing_uncertainty: dict[str, dict[str, float]]
    name: str

    def element_of(self, species: str) -> str:
        """The element a composition species corrects (``"oxide"`` → ``"O"``; ``"S"`` → ``"S"``)."""
        if species not in self.composition:
            raise KeyError(f"no MP2020 composition correction {species!r}; known: {', '.join(self.composition)}")
        return ANION_ELEMENT.get(species, species)

    def anion_constants(self, oxide_type: str = "oxide") -> dict[str, float]:
        """Element → composition correction, with O taken from ``oxide_type`` (eV per anion atom)."""
        if oxide_type not in ANION_ELEMENT:
            raise ValueError(f"oxide_type must be one of {', '.join(ANION_ELEMENT)}, got {oxide_type!r}")
        out = {k: v for k, v in self.composition.items() if k not in ANION_ELEMENT}
        out["O"] = self.composition[oxide_type]
        return out


def _load_yaml(path: Any) -> Any:
    text = path.read_text(encoding="utf-8")
    try:
        import yaml

        return yaml.safe_load(text)
    except ImportError:
        pass
    try:
        from ruamel.yaml import YAML

        return YAML(typ="safe").load(text)
    except ImportError:
        raise DatasetUnavailable("reading MP2020Compatibility.yaml needs a YAML parser: pip install pyyaml") from None


def _floats(d: dict[str, Any]) -> dict[str, float]:
    return {str(k): float(v) for k, v in d.items()}


def load_mp2020_corrections() -> MP2020Corrections:
    """Load the MP2020 constants shipped with pymatgen (module docstring for units and meaning).

    Raises:
      DatasetUnavailable: pymatgen is not installed (``pip install pymatgen``).
    """
    path = package_file("pymatgen", "analysis/compatibility/MP2020Compatibility.yaml", pip="pymatgen")
    raw = _load_yaml(path)
    corr, unc = raw["Corrections"], raw["Uncertainties"]
    return MP2020Corrections(
        composition=_floats(corr["CompositionCorrections"]),
        composition_uncertainty=_floats(unc["CompositionCorrections"]),
        u_mixing={str(a): _floats(v) for a, v in corr["GGAUMixingCorrections"].items()},
        u_mixing_uncertainty={str(a): _floats(v) for a, v in unc["GGAUMixingCorrections"].items()},
        name=str(raw.get("Name", "")),
    )
