"""jaxcert.adapters.calculator: the one ASE calculator for jaxcert models (energy, forces, stress)."""

import numpy as np
import pytest
from ase.build import bulk
from ase.calculators.calculator import PropertyNotImplementedError
from ase.calculators.fd import calculate_numerical_forces, calculate_numerical_stress

from jaxcert import models
from jaxcert.adapters.calculator import to_ase_calculator


@pytest.fixture(scope="module")
def atoms():
    a = bulk("Cu", "fcc", a=3.6, cubic=True)
    a.rattle(0.05, seed=0)
    a.set_cell(a.cell @ np.array([[1.0, 0.02, 0.0], [0.0, 0.99, 0.01], [0.0, 0.0, 1.01]]), scale_atoms=True)
    return a


def test_forces_and_stress_match_asess_finite_differences(atoms):
    """F = −∂E/∂R and σ = (1/V) ∂E/∂ε (ASE's sign): ASE's own central differences agree to O(h²)."""
    calc = to_ase_calculator(models.get("emt"))
    a = atoms.copy()
    a.calc = calc
    F = a.get_forces()
    s = a.get_stress()
    assert np.abs(calculate_numerical_forces(a, eps=1e-4) - F).max() < 1e-6
    assert np.abs(calculate_numerical_stress(a, eps=1e-5) - s).max() < 1e-7
    assert a.get_potential_energy() == pytest.approx(calc.results["free_energy"])


def test_a_broken_stress_is_caught(atoms):
    """The same check fails for a stress head that disagrees with the energy (deliberately scaled by 1.01)."""
    emt = models.get("emt")
    broken = emt.replace(stress_fn=lambda p, s: 1.01 * emt.stress_of(p, s))
    a = atoms.copy()
    a.calc = to_ase_calculator(broken)
    assert np.abs(calculate_numerical_stress(a, eps=1e-5) - a.get_stress()).max() > 1e-5


def test_stress_refused_without_periodicity(atoms):
    a = atoms.copy()
    a.pbc = False
    a.calc = to_ase_calculator(models.get("emt"))
    a.get_forces()
    with pytest.raises(PropertyNotImplementedError, match="periodic"):
        a.get_stress()


def test_energy_forces_and_stress_come_from_one_pass(atoms):
    """Asked for all three, the calculator traces the model's energy once (one program, one reverse pass over
    positions and strain) and gives the values the separate calls give."""
    import jax

    from jaxcert.core.structure import Structure

    emt = models.get("emt")
    traces = []

    def counted(params, s):
        traces.append(1)  # runs once per trace of a program that evaluates the energy
        return emt.energy_fn(params, s)

    model = emt.replace(energy_fn=counted, name="emt-counted")
    a = atoms.copy()
    a.calc = to_ase_calculator(model)
    a.calc.calculate(a, properties=["energy", "forces", "stress"])
    assert len(traces) == 1
    got = a.calc.results
    s = Structure.from_ase(a, dtype=jax.numpy.zeros(()).dtype, min_distance=None)
    np.testing.assert_allclose(got["forces"], np.asarray(emt.forces(s)), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got["stress"], np.asarray(emt.stress_voigt(s)), rtol=1e-12, atol=1e-14)
    assert got["energy"] == pytest.approx(float(emt.energy(s)), rel=1e-14)
