"""Every metric on hand-made cases with known answers (host only: no compilation)."""

import itertools

import numpy as np
import pytest
from ase import Atoms
from ase.build import bulk
from ase.geometry.rdf import get_rdf

from jaxcert.attacks import metrics


def _si(seed=0, rattle=0.05):
    a = bulk("Si", cubic=True)
    a.rattle(rattle, seed=seed)
    return a


def test_structure_against_itself_is_zero():
    a = _si()
    F = np.random.default_rng(0).normal(size=(len(a), 3))
    out = metrics.compare(a, a.copy(), F, F, -10.0, -10.0)
    for k in ("median_displacement", "max_displacement", "linf_displacement", "max_delta_force", "delta_energy",
              "edge_change_count", "jaccard_distance", "coordination_change_max", "rdf_l1", "space_group_change",
              "unique_site_change"):
        assert out[k] == 0.0, k
    assert out["force_angle_median"] == pytest.approx(0.0, abs=1e-5)
    assert out["symmetry_op_retention"] == 1.0 and out["symmetry_op_retention_doc"] == 1.0
    assert out["symprecs_used"] == 3


def test_lattice_translation_is_not_a_displacement():
    a = _si()
    b = a.copy()
    pos = b.get_positions()
    pos[0] += a.cell[0] - a.cell[2]
    pos[3] += 2 * a.cell[1]
    b.set_positions(pos)
    d = metrics.displacement(a, b)
    assert d["max_displacement"] == pytest.approx(0.0, abs=1e-12)
    assert d["linf_displacement"] == pytest.approx(0.0, abs=1e-12)
    assert d["max_displacement_raw"] == pytest.approx(2 * np.linalg.norm(a.cell[1]))  # the reference's raw value
    t = metrics.topology(a, b)
    assert t["edge_change_count"] == 0 and t["jaccard_distance"] == 0.0
    assert metrics.rdf_l1(a, b)["rdf_l1"] == pytest.approx(0.0, abs=1e-12)
    assert metrics.symmetry(a, b)["space_group_change"] == 0.0


def test_min_image_exact_in_a_skewed_cell():
    cell = np.array([[4.0, 0, 0], [3.1, 2.0, 0], [1.4, 1.1, 2.5]])
    rng = np.random.default_rng(1)
    dR = rng.uniform(-9, 9, size=(200, 3))
    got = metrics.min_image(dR, cell, (True, True, True))
    shifts = np.array(list(itertools.product(range(-8, 9), repeat=3)), float) @ cell
    cand = dR[:, None, :] + shifts[None]
    brute = np.min(np.linalg.norm(cand, axis=-1), axis=1)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), brute, rtol=1e-12)


def test_broken_bond():
    # Cu chain: r_cov(Cu) = 1.32 Å, bonded below 2.64 Å.  Pull atom 2 away: bond 1-2 breaks.
    a = Atoms("Cu3", positions=[[5, 5, 5], [7.4, 5, 5], [9.8, 5, 5]], cell=[15, 12, 12], pbc=True)
    b = a.copy()
    b.positions[2, 0] = 11.0
    t = metrics.topology(a, b)
    assert (t["edges_before"], t["edges_after"], t["edges_added"], t["edges_removed"]) == (2, 1, 0, 1)
    assert t["edge_change_count"] == 1
    assert t["jaccard_distance"] == pytest.approx(0.5)
    assert t["coordination_change_mean"] == pytest.approx(2 / 3) and t["coordination_change_max"] == 1
    d = metrics.displacement(a, b)
    assert d["max_displacement"] == pytest.approx(1.2) and d["median_displacement"] == 0.0
    assert d["linf_displacement"] == pytest.approx(1.2)
    assert metrics.rdf_l1(a, b)["rdf_l1"] > 0


def test_symmetry_lowering_distortion():
    a = bulk("Cu", "fcc", a=3.6, cubic=True)  # Fm-3m (225): 48 rotations x 4 centrings = 192 ops in this cell
    b = a.copy()
    b.positions[0, 2] += 0.05  # beyond every symprec
    sa = metrics.symmetry_data(a, 1e-3)
    assert sa["number"] == 225 and sa["n_ops"] == 192
    s = metrics.symmetry(a, b)
    assert s["space_group_change"] == 1.0
    assert s["symmetry_op_retention"] < 1.0
    assert s["symmetry_op_retention_doc"] <= s["symmetry_op_retention"] + 1e-12
    assert s["unique_site_change"] > 0  # the moved atom becomes its own orbit
    # below the loosest symprec only: a 0.004 Å shift changes the group at 1e-3 and 1e-4, not at 1e-2
    c = a.copy()
    c.positions[0, 2] += 0.004
    assert metrics.symmetry(a, c)["space_group_change"] == pytest.approx(2 / 3)


def test_count_ratio_is_only_an_upper_bound():
    # P4mm with the 4-fold axis along z (ref) vs along x (stage): same group, same op count, different op sets.
    cell = np.eye(3) * 4.0
    a = Atoms("CsCl", scaled_positions=[[0, 0, 0], [0.5, 0.5, 0.6]], cell=cell, pbc=True)
    b = Atoms("CsCl", scaled_positions=[[0, 0, 0], [0.6, 0.5, 0.5]], cell=cell, pbc=True)
    s = metrics.symmetry(a, b)
    assert s["space_group_change"] == 0.0
    assert s["symmetry_op_retention"] == 1.0
    # C4v(z) ∩ C4v(x) = {E, m_y}: 2 of 8 operations survive
    assert s["symmetry_op_retention_doc"] == pytest.approx(0.25)


def test_rdf_matches_ase_on_the_repeated_analysis_cell():
    a = _si(seed=3, rattle=0.1)
    r_max, n_bins = 6.0, 60
    h = a.cell.volume / np.linalg.norm(np.cross(a.cell[[1, 2, 0]], a.cell[[2, 0, 1]]), axis=1)
    m = [max(1, int(np.ceil((2 * r_max + 1e-8) / x))) for x in h]
    g_ase, r_ase = get_rdf(a.repeat(m), r_max, n_bins)
    r, g = metrics.rdf(a, r_max, n_bins)
    np.testing.assert_allclose(r, r_ase)
    np.testing.assert_allclose(g, g_ase, rtol=1e-10, atol=1e-12)


def test_force_metrics():
    F_ref = np.array([[1.0, 0, 0], [0, 0, 0], [0.001, 0, 0]])
    F_st = np.array([[0, 1.0, 0], [1.0, 0, 0], [-0.001, 0, 0]])
    fa = metrics.force_angle(F_ref, F_st, fmax=0.01)
    assert fa["force_angle_median"] == pytest.approx(135.0)  # atoms 0 (90°) and 2 (180°); atom 1 dropped
    assert fa["force_angle_atoms_used"] == 2
    assert fa["force_angle_median_robust"] == pytest.approx(90.0)  # atom 2 is below fmax: noise
    assert fa["force_angle_atoms_used_robust"] == 1
    df = metrics.delta_force(F_ref, F_st)
    assert df["max_delta_force"] == pytest.approx(np.sqrt(2))
    assert df["median_delta_force"] == pytest.approx(1.0)
    e = metrics.energy(-10.0, -9.5, 4)
    assert e["delta_energy"] == 0.5 and e["delta_energy_per_atom"] == 0.125


def test_silicon_has_no_covalent_edges_at_multiplier_one():
    # a documented quirk of the reference's cutoffs: 2 r_cov(Si) = 2.22 Å < the 2.35 Å diamond bond
    assert metrics.edges(bulk("Si", cubic=True)) == set()
