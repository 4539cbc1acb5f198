"""CHGNet 0.3.0 (weights in the wheel) through the torch bridge."""

import warnings

import numpy as np
import pytest

pytest.importorskip("chgnet")
jb = pytest.importorskip("jaxcert_bridges")

import jaxcert  # noqa: E402
from tests.bridges import _universal as U  # noqa: E402


@pytest.fixture(scope="module")
def model():
    return jb.chgnet("0.3.0")


@pytest.fixture(scope="module")
def calc():
    from chgnet.model import CHGNetCalculator

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return CHGNetCalculator(use_device="cpu")


def test_matches_chgnet_calculator(model, calc):
    # the stock calculator runs float32 (and needs a cell for the cluster: it gets a 20 Å box)
    U.check_matches_calculator(model, _Boxed(calc), atol_f32=5e-5, atol_f64=5e-5)


class _Boxed:
    """Give non-periodic input a 20 Å box, as docs/install.md says the stock calculator needs."""

    def __init__(self, calc):
        self.calc = calc

    def __getattr__(self, k):
        return getattr(self.calc, k)

    def get_property(self, name, atoms=None, allow_calculation=True):
        if atoms is not None and not any(atoms.pbc):
            atoms = atoms.copy()
            atoms.center(vacuum=10.0)
        return self.calc.get_property(name, atoms, allow_calculation)

    def get_potential_energy(self, atoms=None, force_consistent=False):
        return self.get_property("energy", atoms)

    def get_forces(self, atoms=None):
        return self.get_property("forces", atoms)

    def get_stress(self, atoms=None):
        return self.get_property("stress", atoms)


def test_exact_second_derivatives(model):
    U.check_exact_second_derivatives(model)


def test_float32_and_float64_floors(model):
    res = U.rotation_residuals(model)
    assert res["float64"] < 1e-10 and res["float32"] < 1e-4
    assert res["float32"] > 10 * res["float64"]  # float32 really ran in float32


def test_isolated_atom_is_a_recorded_skip(model):
    """CHGNet's converter refuses isolated atoms: the trimer probe (needs monomers) is skipped, with why."""
    rep = jaxcert.certify(model, "Si", probes="trimer")
    p = rep.probe("trimer")
    assert p["status"] == "skipped" and "isolated atom" in str(p), p


def test_batched_call_equals_single(model):
    structs = [jaxcert.Structure.from_ase(U.si_cell(seed=k)) for k in range(2)]
    import jax

    batch = model.prepare(jaxcert.stack(structs))
    E = jax.vmap(lambda s: model.energy_of(None, s))(batch)
    np.testing.assert_allclose(E, [float(model.energy(s)) for s in structs], atol=1e-9)
