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


# ------------------------------------------------------------ brute-force references for the C-backed metrics
def _brute_retention(ref, stage, symprec, reach=1):
    """|S_ref ∩ S_stage| / |S_ref| by the documented per-operation test: a reference operation (W, w) is kept when
    every stage atom has a same-species partner within τ = symprec Å over explicit periodic images (lattice shifts
    −reach…reach per axis on top of the nearest fractional image)."""
    import spglib

    ds = spglib.get_symmetry_dataset((ref.cell[:], ref.get_scaled_positions(), ref.numbers), symprec=symprec,
                                     angle_tolerance=-1)
    f, Z, cell = stage.get_scaled_positions(), stage.numbers, stage.cell[:]
    images = np.array(list(itertools.product(range(-reach, reach + 1), repeat=3)), float)
    kept = 0
    for W, w in zip(ds.rotations, ds.translations, strict=True):  # one operation at a time
        g = f @ W.T + w
        dfrac = g[:, None, :] - f[None, :, :]
        dfrac -= np.floor(dfrac + 0.5)
        d = np.linalg.norm((dfrac[:, :, None, :] + images) @ cell, axis=-1).min(axis=2)  # (i, j) over images
        d[Z[:, None] != Z[None, :]] = np.inf
        kept += bool(np.all(d.min(axis=1) <= symprec))
    return kept / len(ds.rotations)


def _moved(a, shifts):
    b = a.copy()
    b.positions += np.asarray(shifts, float)
    return b


def _retention_cases():
    cu = bulk("Cu", "fcc", a=3.6, cubic=True)
    si = bulk("Si", "diamond", a=5.431, cubic=True)
    mg = bulk("Mg", "hcp", a=3.21, c=5.21)  # hexagonal axes: rotations are not signed permutations
    cscl = Atoms("CsCl", scaled_positions=[[0, 0, 0], [0.5, 0.5, 0.5]], cell=np.eye(3) * 4.1, pbc=True)
    one = np.zeros((8, 3))
    one[0] = [0.0, 0.0, 0.08]
    pair = np.zeros((8, 3))
    pair[[0, 1]] = [[0.06, 0.06, 0.06], [-0.06, -0.06, -0.06]]  # along the 0-1 bond: keeps the bond's axis
    return [
        (cu, _moved(cu, [[0, 0, 0.05], [0, 0, 0], [0, 0, 0], [0, 0, 0]])),  # one atom along z: C4v at that site
        (si, _moved(si, one)),
        (si, _moved(si, pair)),
        (si, _moved(si, np.tile([0.03, 0.03, 0.03], (8, 1)))),  # a rigid shift: ops with (I − W)δ ≠ 0 are lost
        (mg, _moved(mg, [[0, 0, 0.06], [0, 0, 0]])),
        (cscl, _moved(cscl, [[0, 0, 0], [0.0, 0.0, 0.09]])),
        (si, si.copy()),
    ]


@pytest.mark.parametrize("case", range(7))
def test_set_retention_equals_brute_force_per_operation(case):
    ref, stage = _retention_cases()[case]
    got = metrics.symmetry(ref, stage)
    brute = float(np.median([_brute_retention(ref, stage, p) for p in metrics.SYMPRECS]))
    assert got["symmetry_op_retention_doc"] == pytest.approx(brute, abs=1e-12)
    assert got["symmetry_op_retention_doc"] <= got["symmetry_op_retention"] + 1e-12


def test_symmetry_breaking_displacement_lowers_retention():
    a = bulk("Si", "diamond", a=5.431, cubic=True).repeat((2, 1, 1))  # 16 atoms, Fd-3m in a tetragonal cell:
    assert metrics.symmetry_data(a, 1e-3)["n_ops"] == 128  # the 16 rotations it keeps x 8 lattice translations
    same = metrics.symmetry(a, a.copy())
    assert same["symmetry_op_retention_doc"] == 1.0
    b = a.copy()
    b.positions[5] += [0.04, -0.07, 0.02]  # breaks every operation that moves atom 5 (and every pure translation)
    s = metrics.symmetry(a, b)
    assert s["symmetry_op_retention_doc"] < 1.0
    assert s["symmetry_op_retention_doc"] == pytest.approx(float(np.median(
        [_brute_retention(a, b, p) for p in metrics.SYMPRECS])), abs=1e-12)
    assert s["space_group_change"] == 1.0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_p1_screen_matches_spglib(seed):
    """A structure the screen proves P1 gets spglib's P1 dataset; a symmetric one still goes to spglib."""
    import spglib

    rng = np.random.default_rng(seed)
    a = bulk("Si", "diamond", a=5.431, cubic=True).repeat((2, 1, 1))
    a.numbers[rng.choice(len(a), 4, replace=False)] = 6  # two species
    a.rattle([0.05, 0.002, 0.0003][seed], seed=seed)  # far, near and within the symprecs
    for p in metrics.SYMPRECS:
        ds = spglib.get_symmetry_dataset((a.cell[:], a.get_scaled_positions(), a.numbers), symprec=p,
                                         angle_tolerance=-1)
        if metrics._screen_p1(a, p):
            assert ds.number == 1 and len(ds.rotations) == 1
        for pbc in (True, (True, False, True)):  # spglib takes every axis as periodic, whatever atoms.pbc says
            a.pbc = pbc
            mine = metrics.symmetry_data(a, p)
            assert (mine["number"], mine["n_ops"], mine["n_unique"]) == (
                ds.number, len(ds.rotations), len(np.unique(ds.equivalent_atoms)))
    if seed == 0:  # rattled far beyond every symprec: proven P1 without spglib
        assert all(metrics._screen_p1(a, p) for p in metrics.SYMPRECS)
    assert not metrics._screen_p1(bulk("Si", "diamond", a=5.431, cubic=True), 1e-3)


def _skewed_pair(seed=0):
    rng = np.random.default_rng(seed)
    cell = np.array([[5.237, 0.0, 0.0], [2.913, 4.618, 0.0], [1.741, 1.327, 4.452]])
    a = Atoms("Cu6O6", scaled_positions=rng.random((12, 3)), cell=cell, pbc=True)
    b = a.copy()
    b.positions += rng.normal(scale=0.25, size=(12, 3))
    return a, b


def _brute_edges(atoms):
    from ase.data import covalent_radii

    r = covalent_radii[atoms.numbers]
    pos, cell = atoms.positions, atoms.cell[:]
    shifts = np.array(list(itertools.product(range(-3, 4), repeat=3)), float) @ cell
    E = set()
    for i in range(len(atoms)):
        for j in range(len(atoms)):
            if i != j and np.min(np.linalg.norm(pos[j] + shifts - pos[i], axis=1)) < r[i] + r[j]:
                E.add((min(i, j), max(i, j)))
    return E


def _brute_rdf(atoms, r_max=6.0, n_bins=60):
    pos, cell = atoms.positions, atoms.cell[:]
    shifts = np.array(list(itertools.product(range(-4, 5), repeat=3)), float) @ cell
    dr = r_max / n_bins
    counts = np.zeros(n_bins + 1)
    for i in range(len(atoms)):
        for j in range(len(atoms)):
            d = np.linalg.norm(pos[j] + shifts - pos[i], axis=1)
            d = d[(d > 0) & (d < r_max)]
            np.add.at(counts, np.ceil(d / dr).astype(int), 1)
    r = (np.arange(1, n_bins + 1) - 0.5) * dr
    rho = len(atoms) / atoms.get_volume()
    return counts[1:] / (len(atoms) * rho * 4 * np.pi * dr * (r * r + dr * dr / 12))


def test_graph_metrics_equal_brute_force_in_a_skewed_cell():
    a, b = _skewed_pair()
    h = a.get_volume() / np.linalg.norm(np.cross(a.cell[[1, 2, 0]], a.cell[[2, 0, 1]]), axis=1)
    assert h.min() > 6.0 / 4 and h.min() > 2 * 1.32 / 3  # the brute-force image ranges cover both cutoffs
    Ea, Eb = _brute_edges(a), _brute_edges(b)
    assert Ea and Eb and Ea != Eb
    assert metrics.edges(a) == Ea and metrics.edges(b) == Eb
    z = {x: np.bincount([k for e in E for k in e], minlength=12) for x, E in (("a", Ea), ("b", Eb))}
    dz = np.abs(z["b"] - z["a"])
    t = metrics.topology(a, b)
    assert (t["edges_before"], t["edges_after"]) == (len(Ea), len(Eb))
    assert (t["edges_added"], t["edges_removed"]) == (len(Eb - Ea), len(Ea - Eb))
    assert t["edge_change_count"] == len(Ea ^ Eb)
    assert t["jaccard_distance"] == pytest.approx(1 - len(Ea & Eb) / len(Ea | Eb), abs=1e-15)
    assert t["coordination_change_mean"] == pytest.approx(dz.mean(), abs=1e-15)
    assert t["coordination_change_max"] == dz.max()
    ga, gb = _brute_rdf(a), _brute_rdf(b)
    np.testing.assert_allclose(metrics.rdf(a)[1], ga, rtol=1e-12)
    assert metrics.rdf_l1(a, b)["rdf_l1"] == pytest.approx(np.sum(np.abs(gb - ga)) * 0.1, rel=1e-12)


def test_memo_follows_content():
    """Per-structure results are memoised by content: an in-place change of positions is a new structure."""
    a, b = _skewed_pair(1)
    before = metrics.topology(a, b)
    b.positions[:] = a.positions
    assert metrics.topology(a, b)["edge_change_count"] == 0 and before["edge_change_count"] > 0
    metrics.clear_cache()
    assert metrics.topology(a, b)["edge_change_count"] == 0


# ------------------------------------------------------------ a skewed cell, atoms across its faces, a broken case
def _skewed_si():
    """Diamond Si in a 10-atom supercell of the primitive cell (P = [[2,1,0],[0,1,1],[1,0,2]]; cell angles 29-40°,
    plane spacings 3.1-6.1 Å): the supercell keeps 8 of the 48 rotations, as general integer matrices."""
    from ase.build import make_supercell

    return make_supercell(bulk("Si", "diamond", a=5.431), np.array([[2, 1, 0], [0, 1, 1], [1, 0, 2]]))


def _across(atoms, seed=0):
    """The same periodic structure with every atom moved by a random lattice vector in {-1, 0, 1}³ (most atoms end
    up outside the cell, on either side of its faces)."""
    b = atoms.copy()
    b.positions += np.random.default_rng(seed).integers(-1, 2, size=(len(b), 3)) @ b.cell[:]
    return b


def _skewed_stages():
    ref = _skewed_si()
    bond = ref.copy()  # atoms 0 and 1 (a bond along [111]) pushed together to 2.19 Å < 2 r_cov: an edge
    u = (bond.positions[1] - bond.positions[0]) / np.linalg.norm(bond.positions[1] - bond.positions[0])
    bond.positions[[0, 1]] += [0.08 * u, -0.08 * u]
    shift = ref.copy()  # a rigid 2 mÅ shift along -a: the atom at the origin crosses the cell face
    shift.positions -= 0.002 * ref.cell[0] / np.linalg.norm(ref.cell[0])
    return ref, {"bond": bond, "bond_across": _across(bond), "shift": shift, "shift_across": _across(shift, 1)}


def _naive_retention(ref, stage, symprec):
    """A deliberately broken set comparison: translations compared without reducing their difference modulo
    lattice vectors (no minimum image)."""
    da, db = metrics.symmetry_data(ref, symprec), metrics.symmetry_data(stage, symprec)
    same_w = np.all(da["rotations"][:, None] == db["rotations"][None], axis=(2, 3))
    dw = np.linalg.norm((da["translations"][:, None] - db["translations"][None]) @ ref.cell[:], axis=-1)
    return float((same_w & (dw <= symprec)).any(axis=1).mean())


@pytest.mark.parametrize("case", ["bond", "bond_across", "shift", "shift_across"])
def test_metrics_equal_brute_force_in_a_skewed_cell_across_its_faces(case):
    """Set-based retention at each symprec against the per-operation oracle (lattice shifts up to ±2: the nearest
    fractional image is not always the nearest in a cell this skewed), the graph and RDF against explicit images,
    and a structure with its atoms moved across the faces scoring exactly as the one inside the cell."""
    ref, stages = _skewed_stages()
    st = stages[case]
    assert metrics.symmetry_data(ref, 1e-3)["n_ops"] == 40 and metrics.symmetry_data(ref, 1e-3)["number"] == 227
    got = [metrics.symmetry(ref, st, (p,))["symmetry_op_retention_doc"] for p in metrics.SYMPRECS]
    assert got == pytest.approx([_brute_retention(ref, st, p, reach=2) for p in metrics.SYMPRECS], abs=1e-12)
    if case.startswith("bond"):  # the broken case: the identity and the inversion through the bond centre survive
        assert got == pytest.approx([2 / 40] * 3, abs=1e-12)
        assert metrics.edges(st) == _brute_edges(st) == {(0, 1)}
    else:  # within 1e-2 of the reference: every operation kept there, only those fixing the origin below it
        assert got[0] == 1.0 and got[1] < 1.0
        # the broken comparison loses operations whose translations wrap across the face; the oracle catches it
        assert _naive_retention(ref, st, 1e-2) < _brute_retention(ref, st, 1e-2, reach=2)
    np.testing.assert_allclose(metrics.rdf(st)[1], _brute_rdf(st), rtol=1e-12, atol=1e-12)
    if case.endswith("across"):
        inside = stages[case.removesuffix("_across")]
        row, twin = metrics.compare(ref, st), metrics.compare(ref, inside)
        for k, v in twin.items():
            if not k.endswith("_raw"):
                assert row[k] == pytest.approx(v, abs=1e-12), k


def test_graph_metrics_across_the_faces_of_a_triclinic_cell():
    """Atoms moved by lattice vectors out of a triclinic cell: the same edges, coordination and g(r) as the structure
    inside it, which the explicit-image references give."""
    a, b = _skewed_pair(2)
    out = _across(b, 2)
    assert (np.abs(np.floor(out.get_scaled_positions(wrap=False))) > 0).any(axis=1).mean() > 0.5
    Eb = _brute_edges(b)
    assert metrics.edges(out) == Eb and Eb != _brute_edges(a)
    assert metrics.topology(a, out) == metrics.topology(a, b)
    np.testing.assert_allclose(metrics.rdf(out)[1], _brute_rdf(b), rtol=1e-12)
    assert metrics.rdf_l1(a, out)["rdf_l1"] == pytest.approx(metrics.rdf_l1(a, b)["rdf_l1"], rel=1e-12)


@pytest.mark.parametrize("tol", [1e-3, 5e-2])
def test_operation_sets_by_sorted_keys_equal_all_pairs(tol):
    """The sorted-key search of ``_ops_retained`` (used above 2^18 operation pairs) against every pair at once, on the
    1536 rotations of a 64-atom Si cell: a third of the translations replaced by arbitrary ones (so that some sit
    at bin edges and near 0 ≡ 1), the stage's list shuffled, moved by lattice vectors, jittered by 0.3-4 tol in
    Cartesian (about half stay within tol), and some of its rotations replaced.  At tol = 0.05 Å the bins are few
    and wide, so that many translations lie within tol of a bin edge or of the key's wrap point."""
    a = bulk("Si", "diamond", a=5.431, cubic=True).repeat(2)
    ds = metrics.symmetry_data(a, 1e-3)
    cell = a.cell[:]
    rng = np.random.default_rng(0)
    R, t = ds["rotations"], ds["translations"].copy()
    t[::3] = rng.random((len(t[::3]), 3))
    p = rng.permutation(len(R))
    Rb = R[p].copy()
    Rb[::11] = Rb[::11][:, [1, 0, 2]]  # rows swapped: another rotation (or the same one, for some)
    jitter = rng.normal(size=(len(p), 3)) * rng.choice([0.3, 0.9, 1.5, 4.0], size=(len(p), 1)) * tol / np.sqrt(3)
    tb = t[p] + rng.integers(-1, 2, size=(len(p), 3)) + jitter @ np.linalg.inv(cell)
    got = metrics._ops_retained({"rotations": R, "translations": t}, {"rotations": Rb, "translations": tb}, cell, tol)
    df = t[:, None] - tb[None]
    same = np.all(R[:, None] == Rb[None], axis=(2, 3)) & (np.linalg.norm((df - np.round(df)) @ cell, axis=-1) <= tol)
    want = int(same.any(axis=1).sum())
    assert len(R) * len(Rb) > 1 << 18 and 0.2 * len(R) < want < 0.9 * len(R)
    assert got == want


# ------------------------------------------------------------------ first-shell bonds (docs/attacks.md §3)
def _mos2():
    from ase.build import mx2

    return mx2("MoS2", kind="2H", a=3.16, thickness=3.19, vacuum=5.0)


@pytest.mark.parametrize(("name", "build", "coordination"), [
    ("diamond Si", lambda: bulk("Si", "diamond", a=5.431, cubic=True), {14: 4}),
    ("fcc Cu", lambda: bulk("Cu", "fcc", a=3.61, cubic=True), {29: 12}),
    ("rocksalt NaCl", lambda: bulk("NaCl", "rocksalt", a=5.64, cubic=True), {11: 6, 17: 6}),
    ("bcc Fe", lambda: bulk("Fe", "bcc", a=2.87, cubic=True), {26: 8}),
    ("2H-MoS2", _mos2, {42: 6, 16: 3}),
])
def test_first_shell_bonds_find_the_bonds_of_common_crystals(name, build, coordination):
    a = build()
    b = metrics.bonds(a, a)
    z = a.get_atomic_numbers()
    # each bond counted once with its periodic image: twice the count is the sum of coordinations
    assert 2 * b["bonds_before"] == sum(coordination[int(x)] for x in z), name
    assert b["bonds_broken"] == b["bonds_formed"] == 0 and b["bond_jaccard_distance"] == 0.0


def test_the_covalent_radius_graph_misses_diamond_bonds_the_shell_graph_does_not():
    si = bulk("Si", "diamond", a=5.431, cubic=True).repeat(2)
    assert metrics.topology(si, si)["edges_before"] == 0  # 2.35 Å > 2 × 1.11 Å: the reference's graph is empty
    pulled = si.copy()
    pos = pulled.get_positions()
    pos[0] += [-1.0, -1.0, -1.0]  # away from its [111] neighbour: that bond stretches from 2.35 to 4.08 Å
    pulled.set_positions(pos)
    b = metrics.bonds(si, pulled)
    assert b["bonds_before"] == 128 and b["bonds_broken"] >= 1  # 64 atoms × 4 / 2
    assert 0 < b["bond_jaccard_distance"] < 0.1


def test_symmetry_retention_is_reported_per_symprec():
    si = bulk("Si", "diamond", a=5.431, cubic=True)
    moved = si.copy()
    pos = moved.get_positions()
    pos[0] += [0.003, 0.0, 0.0]  # breaks the symmetry at symprec 1e-3 and 1e-4 only
    moved.set_positions(pos)
    per = metrics.symmetry(si, moved)["symmetry_op_retention_by_symprec"]
    assert set(per) == {"0.01", "0.001", "0.0001"}
    assert per["0.01"] == 1.0 and per["0.0001"] < 1.0
