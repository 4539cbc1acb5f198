"""ASE bridge: any ASE calculator as a jaxcert Model (FD second derivatives), and any Model as a calculator."""

import numpy as np
import pytest
from ase.build import bulk
from ase.calculators.emt import EMT
from ase.calculators.lj import LennardJones
from ase.cluster import Icosahedron

import jaxcert
from jaxcert.core.derivatives import EXACT

jb = pytest.importorskip("jaxcert_bridges")


@pytest.fixture(scope="module")
def cu():
    a = bulk("Cu", "fcc", a=3.61, cubic=True)
    a.rattle(0.03, seed=2)
    return jaxcert.Structure.from_ase(a)


@pytest.fixture(scope="module")
def pair():
    return jb.from_ase_calculator(EMT(), name="ase-emt"), jaxcert.models.get("emt")


def test_energy_forces_stress_match_native_emt(cu, pair):
    bridged, native = pair
    assert abs(float(bridged.energy(cu) - native.energy(cu))) < 1e-10
    np.testing.assert_allclose(bridged.forces(cu), native.forces(cu), atol=1e-10)
    # stress goes through the cell gradient identity g_h^T = (V sigma + F^T R) h^-1 and back
    np.testing.assert_allclose(bridged.stress(cu), native.stress(cu), atol=1e-10)


def test_cell_gradient_identity_reproduces_the_virial(cu):
    from jaxcert_bridges.backend import System, cell_gradient

    a = cu.to_ase()
    a.calc = EMT()
    F, sig = a.get_forces(), a.get_stress(voigt=False)
    s = System(a.positions, np.array(a.cell), a.numbers, (True,) * 3)
    gh = cell_gradient(s.positions, s.cell, F, sig, s.pbc)
    np.testing.assert_allclose((-F.T @ a.positions + gh.T @ s.cell) / a.get_volume(), sig, atol=1e-12)


def test_second_derivatives_are_finite_difference_accurate(cu, pair):
    bridged, native = pair
    v = np.random.default_rng(0).normal(size=cu.positions.shape)
    exact = np.asarray(EXACT.force_jvp(native, cu, v))
    err = np.abs(np.asarray(EXACT.force_jvp(bridged, cu, v)) - exact).max()
    assert 1e-12 < err < 1e-4 * np.abs(exact).max()  # FD, not exact: nonzero but O(h^2) small
    C = np.asarray(EXACT.stress_strain(native, cu))
    assert np.abs(np.asarray(EXACT.stress_strain(bridged, cu)) - C).max() < 1e-4 * np.abs(C).max()
    # the backend counted the host evaluations: 2 per tangent for the central differences
    counts = jb.backend_of(bridged).counts
    assert counts["hvp"] > 0 and counts["fd_gradient"] == 2 * counts["hvp"]


def test_probes_agree_with_native_emt_within_fd_accuracy(pair):
    bridged, native = pair
    probes = "equivariance,parity,stress_consistency,betti"
    rb = jaxcert.certify(bridged, "Cu", probes=probes)
    rn = jaxcert.certify(native, "Cu", probes=probes)
    for pb, pn in zip(rb.to_dict()["probes"], rn.to_dict()["probes"], strict=True):
        assert pb["name"] == pn["name"] and pb["status"] == pn["status"] == "ok", (pb, pn)
        assert pb["gate"] == pn["gate"], pb["name"]
        # defects are relative identities: the native one is at round-off, the bridged one at FD error
        assert abs(pb["defect"] - pn["defect"]) < 1e-4, (pb["name"], pb["defect"], pn["defect"])


def test_jaxcert_model_as_ase_calculator():
    native = jaxcert.models.get("emt")
    a = bulk("Cu", "fcc", a=3.61, cubic=True)
    a.rattle(0.02, seed=1)
    ref = a.copy()
    ref.calc = EMT()
    a.calc = jb.to_ase_calculator(native)
    assert abs(a.get_potential_energy() - ref.get_potential_energy()) < 1e-10
    np.testing.assert_allclose(a.get_forces(), ref.get_forces(), atol=1e-10)
    np.testing.assert_allclose(a.get_stress(), ref.get_stress(), atol=1e-10)
    cluster = Icosahedron("Cu", 2, latticeconstant=3.61)
    cluster.calc = jb.to_ase_calculator(native)
    from ase.calculators.calculator import PropertyNotImplementedError

    with pytest.raises(PropertyNotImplementedError):
        cluster.get_stress()


def test_unsupported_element_and_missing_stress_are_clear(cu):
    model = jb.from_ase_calculator(EMT(), elements=[29])
    si = jaxcert.Structure.from_ase(bulk("Si", "diamond", a=5.43))
    with pytest.raises(jaxcert.UnsupportedElement, match="Si"):
        model.energy(si)
    lj = LennardJones(sigma=2.3, epsilon=0.2, rc=5.0)
    lj.implemented_properties = ["energy", "forces"]  # a calculator without stress
    nostress = jb.from_ase_calculator(lj)
    with pytest.raises(jaxcert.StressUnavailable, match="no stress"):
        nostress.stress(cu)
    report = jaxcert.certify(nostress, "Cu", probes="stress_consistency")
    assert report.probe("stress_consistency")["status"] == "skipped"
