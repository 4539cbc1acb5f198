r"""ASE calculators in and out: any ``ase.calculators.Calculator`` as a jaxcert Model, and back.

:func:`from_ase_calculator` evaluates energy, forces and (for periodic input)
stress through the calculator; the cell gradient follows from the stress by
:func:`~jaxcert_bridges.backend.cell_gradient`, and H·t is a central difference
of gradients with the dtype-aware step (docs/probes.md §1.5): second derivatives are
finite-difference accurate, O(δ²), not exact.

:func:`to_ase_calculator` turns any :class:`jaxcert.Model` (native or bridged)
into an ASE calculator with energy, free_energy, forces and stress; it is the core
package's :mod:`jaxcert.adapters.calculator`, re-exported here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from jaxcert.adapters.calculator import ModelCalculator, to_ase_calculator
from jaxcert.core.model import Model
from jaxcert_bridges._jax import model_from_backend
from jaxcert_bridges.backend import Backend, System, cell_gradient

__all__ = ["ASECalculatorBackend", "from_ase_calculator", "to_ase_calculator", "ModelCalculator"]


class ASECalculatorBackend(Backend):
    """Backend over an ASE calculator (host, sequential, finite-difference H·t).

    Args:
      calc: the calculator (reused for every geometry).
      name: label.
      cutoff: interaction range in Å if known (sizes periodic images on the JAX side; optional).
      elements: supported atomic numbers if known.
      fd_step: step in Å for H·t; default the dtype-aware rule.
    """

    exact_hvp = False

    def __init__(self, calc: Any, name: str | None = None, cutoff: float | None = None,
                 elements: Sequence[int] | None = None, fd_step: float | None = None):
        super().__init__()
        self.calc = calc
        self.name = name or type(calc).__name__
        self.cutoff = cutoff
        self.elements = tuple(int(z) for z in elements) if elements is not None else None
        self.fd_step = fd_step
        self.has_stress = "stress" in getattr(calc, "implemented_properties", ("stress",))

    def _atoms(self, s: System):
        self.check_elements(s.numbers)
        atoms = s.to_ase()
        atoms.calc = self.calc
        return atoms

    def energies(self, systems: Sequence[System], dtype: Any) -> np.ndarray:
        return np.array([self._atoms(s).get_potential_energy() for s in systems], np.float64)

    def gradients(self, systems: Sequence[System], dtype: Any):
        E, gR, gh = [], [], []
        for s in systems:
            atoms = self._atoms(s)
            E.append(atoms.get_potential_energy())
            F = np.asarray(atoms.get_forces(), np.float64)
            gR.append(-F)
            if all(s.pbc) and self.has_stress:
                sigma = np.asarray(atoms.get_stress(voigt=False), np.float64)
                gh.append(cell_gradient(s.positions, s.cell, F, sigma, s.pbc))
            else:
                gh.append(np.zeros((3, 3)))
        return np.asarray(E, np.float64), gR, gh


def from_ase_calculator(calc: Any, precision: str | None = None, name: str | None = None,
                        cutoff: float | None = None, elements: Sequence[int] | None = None,
                        fd_step: float | None = None) -> Model:
    r"""Any ASE calculator as a :class:`jaxcert.Model`.

    Energy (eV), forces = −∂E/∂R (the calculator's forces, eV/Å) and stress
    (eV/Å³, from the calculator's stress through the cell gradient) go through
    ``jax.pure_callback``; J·v = −H·v by central differences of forces with step
    δ (default: dtype-aware, 1e-3 Å in float64 and float32, docs/probes.md §1.5).
    ``backend.counts`` (``model_backend(model)``) tallies the evaluations.

    Args:
      calc: an ASE calculator.
      precision: ignored for ASE calculators (they compute in their own
        precision; results are cast to the JAX dtype); accepted for symmetry
        with :func:`jaxcert_bridges.from_torch`.
      name, cutoff, elements: report label; interaction range (Å) and supported
        atomic numbers when known.
      fd_step: FD step in Å for H·v (default dtype-aware).
    """
    del precision
    backend = ASECalculatorBackend(calc, name=name, cutoff=cutoff, elements=elements, fd_step=fd_step)
    return model_from_backend(backend, info={"calculator": type(calc).__name__})


# ----------------------------------------------------------------------------- out
# jaxcert models as ASE calculators: the core package's one calculator (jaxcert.adapters.calculator), re-exported.
