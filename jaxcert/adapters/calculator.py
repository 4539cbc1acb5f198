"""One ASE calculator for any jaxcert :class:`~jaxcert.Model` (docs/architecture.md).

Used by the contour baseline (:mod:`jaxcert.attacks.contour`), re-exported by the bridges
(``jaxcert_bridges.to_ase_calculator``), and available to any ASE workflow: energy and free energy
(eV), forces (eV/Å) and, on fully periodic cells when the model defines one, stress (eV/Å³, ASE's sign and
Voigt order xx, yy, zz, yz, xz, xy), all from one jitted call: for a model without heads one reverse pass
gives the forces and the stress together (:meth:`jaxcert.Model.energy_forces_stress`).
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np
from ase.calculators.calculator import Calculator, PropertyNotImplementedError, all_changes

from jaxcert.core.model import Model, voigt
from jaxcert.core.neighbors import ONE_SHOT_SKIN
from jaxcert.core.structure import Structure

__all__ = ["ModelCalculator", "to_ase_calculator"]


class ModelCalculator(Calculator):
    """ASE calculator for a jaxcert Model: energy, free_energy, forces and (periodic cells) stress.

    Args:
      model: any :class:`jaxcert.Model` (analytic, defect-wrapped or bridged).
      dtype: the JAX float dtype of the evaluation (default: float64 when x64 is enabled, else float32).
    """

    implemented_properties = ["energy", "free_energy", "forces", "stress"]

    def __init__(self, model: Model, dtype: Any = None, **kw: Any):
        super().__init__(**kw)
        self.model = model
        self.dtype = dtype if dtype is not None else jnp.zeros(()).dtype

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
        super().calculate(atoms, properties, system_changes)
        # ASE hands over a new geometry at every call: a network's edge list is built for this one geometry
        s = self.model.prepare(Structure.from_ase(self.atoms, dtype=self.dtype, min_distance=None),
                               skin=ONE_SHOT_SKIN)
        if "stress" in properties:
            if not all(self.atoms.pbc):
                raise PropertyNotImplementedError("stress needs a fully periodic cell")
            if not self.model.stress_available:
                raise PropertyNotImplementedError(f"model {self.model.name!r} defines no stress")
            E, F, sigma = self.model.energy_forces_stress(s)  # one call, one reverse pass
        else:
            E, F = self.model.energy_and_forces(s)
        self.results = {"energy": float(E), "free_energy": float(E), "forces": np.asarray(F, np.float64)}
        if "stress" in properties:
            self.results["stress"] = np.asarray(voigt(sigma), np.float64)


def to_ase_calculator(model: Model, dtype: Any = None) -> ModelCalculator:
    """Any jaxcert Model as an ASE calculator (see :class:`ModelCalculator`)."""
    return ModelCalculator(model, dtype=dtype)
