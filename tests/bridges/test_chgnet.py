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


def test_isolated_atoms_are_evaluated_with_the_package_warning_recorded(model):
    """As CHGNet's ASE calculator: the trimer probe runs, CHGNet's isolated-atom warning is a per-element note."""
    from jaxcert.probes import TrimerConfig

    cfg = TrimerConfig(n_offsets=4, n_pairs=2)  # small: the scan still reaches 12 Å (B isolated)
    p = jaxcert.certify(model, "Si", probes="trimer", configs={"trimer": cfg}).probe("trimer")
    notes = p["per_element"]["Si"]["details"]["model_notes"]
    assert p["status"] == "ok" and np.isfinite(p["defect"]), p
    assert any("isolated atom(s) with atom_graph_cutoff=6" in n for n in notes), notes


def test_a_geometry_the_package_refuses_is_a_recorded_skip():
    """With the converter's own default (refuse isolated atoms) the trimer probe is skipped with CHGNet's reason."""
    strict = jb.chgnet("0.3.0", isolated_atoms="error")
    p = jaxcert.certify(strict, "Si", probes="trimer").probe("trimer")
    assert p["status"] == "skipped" and "isolated atom" in p["message"], p


def test_batched_call_equals_single(model):
    structs = [jaxcert.Structure.from_ase(U.si_cell(seed=k)) for k in range(2)]
    import jax

    batch = model.prepare(jaxcert.stack(structs))
    E = jax.vmap(lambda s: model.energy_of(None, s))(batch)
    np.testing.assert_allclose(E, [float(model.energy(s)) for s in structs], atol=1e-9)


def test_graph_reuse_with_a_skin_is_exact():
    """A reused (skin) graph gives the fresh-graph energy and gradients to round-off (float64); past skin/2: rebuilt."""
    from jaxcert_bridges.chgnet_potential import CHGNetPotential

    pot = CHGNetPotential("0.3.0", skin=0.5)
    sc = U.check_graph_reuse(pot, CHGNetPotential("0.3.0", skin=0.0))
    # the three-body filter was exercised: the cluster's template has rows beyond 3 Å, dropped at use
    template = pot._template(sc)[0]
    assert 0 < len(pot._skin_graph(sc)[0].bond_graph) < len(template.bond_graph)
