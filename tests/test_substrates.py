"""Substrate builders (docs/probes.md §2) and the seed-002 λ structures (jaxcert.probes.substrates)."""

from __future__ import annotations

import ase.io
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from ase import Atoms
from ase.build import molecule

import jaxcert
from jaxcert import models
from jaxcert.core.elements import d_nn, reference_crystal
from jaxcert.probes import substrates as S

ELEMENTS_11 = ["Li", "Be", "B", "C", "Na", "Mg", "Al", "Si", "P", "S", "Cu"]

# docs/probes.md §2.2: emulated Ar cluster (numpy imitation of the ASE operations), box and coordinates in Å.
AR_BOX = (21.4710844834, 21.4260961832, 21.3778572259)
AR_CLUSTER = np.array(
    [
        [10.8172424407, 10.7227261441, 10.7233261866],
        [13.4710844834, 13.4260961832, 10.6255253934],
        [10.7765442443, 13.3251504233, 13.2992283448],
        [13.3795697485, 10.7099204623, 13.3771029627],
        [10.7670917097, 13.3388020346, 8.0665824490],
        [8.1157235398, 13.4074222374, 10.6641313742],
        [13.3746932085, 8.0300134968, 10.5467397966],
        [13.3917207532, 10.7459400937, 8.0072810364],
        [10.8425275546, 8.0000000000, 13.3066772132],
        [8.0896806309, 10.7793572444, 13.3778572259],
        [8.1067871947, 10.7216264097, 8.0000000000],
        [8.0000000000, 8.0553226763, 10.6822067358],
        [10.7905543574, 8.1328372762, 8.0250229465],
    ]
)


def _distances(atoms: Atoms) -> np.ndarray:
    d = atoms.get_all_distances()
    np.fill_diagonal(d, np.inf)
    return d


# ------------------------------------------------------------------------------------------- d_nn (§2.1)
@pytest.mark.parametrize(
    "el,closed_form",
    [
        ("Ar", 5.26 / np.sqrt(2)),  # fcc a/√2
        ("Cu", 3.61 / np.sqrt(2)),  # fcc a/√2
        ("Na", 4.23 * np.sqrt(3) / 2),  # bcc a√3/2
        ("Si", 5.43 * np.sqrt(3) / 4),  # diamond a√3/4
        ("Mg", min(3.21, np.sqrt(3.21**2 / 3 + (1.624 * 3.21) ** 2 / 4))),  # hcp
    ],
)
def test_d_nn_closed_forms(el, closed_form):
    assert d_nn(el) == pytest.approx(closed_form, rel=1e-12)
    # the trimer edge is this distance (§2.3)
    t = S.trimer_atoms(el)
    assert t.get_distance(0, 2) == pytest.approx(d_nn(el), rel=1e-12)


# ------------------------------------------------------------------------------------------- cluster (§2.2)
@pytest.mark.parametrize("el,coordination", [("Na", 8), ("Al", 12), ("Mg", 12), ("C", 4), ("Si", 4), ("S", 4)])
def test_cluster_first_shell_coordination(el, coordination):
    atoms = S.cluster_atoms(el)
    d = _distances(atoms)
    assert len(atoms) == 13 and not atoms.pbc.any()
    assert int((d[0] < d.min() * 1.15).sum()) == coordination
    # spacing is the reference crystal's, up to the rattle
    assert d.min() == pytest.approx(d_nn(el), abs=4 * S.RATTLE_STDEV)


def test_cluster_ar_matches_the_emulated_table():
    atoms = S.cluster_atoms("Ar")
    assert np.diag(atoms.cell) == pytest.approx(AR_BOX, abs=1e-9)
    assert np.count_nonzero(atoms.cell - np.diag(np.diag(atoms.cell))) == 0
    # same atoms in the same order (the ASE result agrees with the emulation index by index)
    np.testing.assert_allclose(atoms.get_positions(), AR_CLUSTER, atol=1e-9)
    # box: minimum coordinate 8 Å on every axis, extent + 16 Å
    pos = atoms.get_positions()
    np.testing.assert_allclose(pos.min(0), 8.0, atol=1e-12)
    np.testing.assert_allclose(pos.max(0) - pos.min(0) + 16.0, np.diag(atoms.cell), atol=1e-12)


def test_cluster_rattle_is_the_fixed_legacy_draw():
    """Unrattled cut + RandomState(0) normal(0.05): first row (0.0882026, 0.0200079, 0.0489369)."""
    noise = np.random.RandomState(0).normal(scale=0.05, size=(13, 3))
    assert noise[0] == pytest.approx([0.0882026, 0.0200079, 0.0489369], abs=1e-7)
    atoms = S.cluster_atoms("Al")
    # subtracting the noise restores the crystal cut: first shell at exactly d_nn from atom 0
    pos = atoms.get_positions() - noise
    r0 = np.linalg.norm(pos[1:] - pos[0], axis=1)
    np.testing.assert_allclose(np.sort(r0), d_nn("Al"), rtol=1e-12)


def test_cluster_is_deterministic_and_scales():
    a, b = S.cluster_atoms("Li"), S.cluster_atoms("Li")
    np.testing.assert_array_equal(a.get_positions(), b.get_positions())
    half = S.cluster_atoms("Li", scale=0.5)
    assert _distances(half).min() == pytest.approx(0.5 * d_nn("Li"), abs=4 * S.RATTLE_STDEV)
    assert _distances(half).min() < 0.6 * _distances(a).min()


def test_cluster_fallback_is_diamond_at_the_covalent_diameter():
    assert reference_crystal("S") is None
    d = _distances(S.cluster_atoms("S"))
    assert d.min() == pytest.approx(2.10, abs=4 * S.RATTLE_STDEV)


# ------------------------------------------------------------------------------------------- closest pair (§2.6)
CLOSEST = [("Ar", (6, 12), 3.61212), ("Si", (1, 5), 2.26383), ("Cu", (1, 3), 2.40762), ("Na", (6, 9), 3.49646)]


@pytest.mark.parametrize("el,pair,dist", CLOSEST)
def test_closest_pairs_match_spec(el, pair, dist):
    atoms = S.cluster_atoms(el)
    assert S.closest_pair(atoms) == pair
    assert atoms.get_distance(*pair) == pytest.approx(dist, abs=5e-6)
    assert S.closest_pair(S.cluster(el)) == pair


def test_closest_pair_rule_and_padding():
    # (0, 2) and (1, 3) tie at 1 Å: the first in lexicographic order wins (strictly smaller only)
    atoms = Atoms("Ar4", positions=[[0, 0, 0], [5, 0, 0], [1, 0, 0], [6, 0, 0]])
    assert S.closest_pair(atoms) == (0, 2)
    # plain distance, not minimum image: (0, 1) is 0.5 Å apart through the boundary only
    periodic = Atoms("Ar3", positions=[[0.25, 0, 0], [9.75, 0, 0], [3.0, 0, 0]], cell=[10, 10, 10], pbc=True)
    assert S.closest_pair(periodic) == (0, 2)
    # padding atoms are skipped, indices are the Structure's own slots
    s = S.cluster("Ar")
    padded = jaxcert.unstack(jaxcert.stack([s], n_atoms=16))[0]
    assert S.closest_pair(padded) == (6, 12)
    with pytest.raises(ValueError, match="at least 2 atoms"):
        S.closest_pair(Atoms("Ar", positions=[[0, 0, 0]]))


def test_bonds_array():
    b = S.bonds(["Ar", "Si", "Cu", "Na"])
    assert b.shape == (4, 2) and b.dtype == np.int32
    np.testing.assert_array_equal(b, [[6, 12], [1, 5], [1, 3], [6, 9]])


# ------------------------------------------------------------------------------------------- trimer (§2.3)
def test_trimer_ar_box_and_positions():
    t = S.trimer_atoms("Ar")
    d, h = d_nn("Ar"), np.sqrt(3) / 2 * d_nn("Ar")
    assert d == pytest.approx(3.7193817, abs=1e-7) and h == pytest.approx(3.2210790, abs=1e-7)
    np.testing.assert_allclose(np.diag(t.cell), [19.7193817, 19.2210790, 16.0], atol=1e-7)
    np.testing.assert_allclose(t.get_positions(), [[8, 8, 8], [8 + d / 2, 8 + h, 8], [8 + d, 8, 8]], atol=1e-12)
    assert t.info["mirror_swap"] == (0, 2) and not t.pbc.any()
    # the x-mirror through B exchanges A and C
    mirrored = t.get_positions().copy()
    mirrored[:, 0] = 2 * mirrored[1, 0] - mirrored[:, 0]
    np.testing.assert_allclose(mirrored[[2, 1, 0]], t.get_positions(), atol=1e-12)
    with pytest.raises(ValueError, match="same species"):
        S.trimer_atoms(("Ar", "Ar", "Ar"))


# ------------------------------------------------------------------------------------------- bulk (§2.4)
def test_bulk_reference_and_fallback():
    ar = S.bulk_atoms("Ar")
    assert len(ar) == 1 and ar.pbc.all()
    assert ar.get_volume() == pytest.approx(36.3829, abs=1e-4)
    assert ar.get_volume() == pytest.approx(5.26**3 / 4, rel=1e-12)
    si = S.bulk_atoms("Si")
    assert len(si) == 2 and si.get_volume() == pytest.approx(5.43**3 / 4, rel=1e-12)
    # no reference crystal: fcc with a = √2 · 2 r_cov (1 atom, NN = covalent diameter)
    s_ = S.bulk_atoms("S")
    assert len(s_) == 1 and s_.get_volume() == pytest.approx((np.sqrt(2) * 2.10) ** 3 / 4, rel=1e-12)
    assert len(S.bulk_atoms("Si", repeat=2)) == 16
    assert S.bulk("Cu").volume == pytest.approx(3.61**3 / 4, rel=1e-12)


# ------------------------------------------------------------------------------------------- p2mm (§2.5)
def test_pmm2_template_nn():
    t = Atoms("Ar4", positions=S._P2MM_POSITIONS, cell=S._P2MM_CELL, pbc=True)
    d = t.get_all_distances(mic=True)[np.triu_indices(4, 1)]
    assert d.min() == pytest.approx(S.P2MM_TEMPLATE_NN, abs=1e-14)
    assert t.get_distance(1, 3, mic=True) == pytest.approx(S.P2MM_TEMPLATE_NN, abs=1e-14)
    # §2.5 fractional coordinates (8 digits)
    frac = t.get_scaled_positions()
    expected = [[0, 0, 0.10962718], [0.5, 0.5, 0.57321656], [0.5, 0, 0.76149240], [0.5, 0.5, 0.23583381]]
    np.testing.assert_allclose(frac, expected, atol=5e-9)


@pytest.mark.parametrize(
    "el,s,cell",
    [
        ("Ar", 1.48795776, (6.44122192, 6.64765774, 11.02422003)),
        ("Si", 0.94063324, (4.07190823, 4.20240951, 6.96911437)),
    ],
)
def test_pmm2_cell(el, s, cell):
    atoms = S.pmm2_atoms(el)
    assert d_nn(el) / S.P2MM_TEMPLATE_NN == pytest.approx(s, abs=1e-8)
    np.testing.assert_allclose(atoms.cell.lengths(), cell, atol=1e-8)
    assert np.count_nonzero(atoms.cell - np.diag(np.diag(atoms.cell))) == 0
    assert atoms.pbc.all() and len(atoms) == 4
    d = atoms.get_all_distances(mic=True)[np.triu_indices(4, 1)]
    assert d.min() == pytest.approx(d_nn(el), rel=1e-12)
    # mm2: the mirrors x -> -x and y -> -y map the crystal onto itself (atom by atom)
    frac = atoms.get_scaled_positions()
    for axis in (0, 1):
        m = frac.copy()
        m[:, axis] = -m[:, axis]
        diff = (m - frac + 0.5) % 1.0 - 0.5
        np.testing.assert_allclose(diff, 0.0, atol=1e-12)
    np.testing.assert_array_equal(S.p2mm_atoms(el).positions, atoms.positions)


# ------------------------------------------------------------------------------------------- make_substrate (§2.6)
def test_make_substrate_dispatch(tmp_path, monkeypatch):
    water = molecule("H2O")
    assert S.make_substrate(water, "cluster") is water
    assert S.make_substrate([water], "bulk") is water
    assert S.make_substrate("Si", "cluster").get_chemical_formula() == "Si13"
    assert len(S.make_substrate("Si", "trimer")) == 3
    assert len(S.make_substrate("Si", "bulk")) == 2
    for kind in ("p2mm", "pmm2"):
        np.testing.assert_array_equal(S.make_substrate("Si", kind).positions, S.pmm2_atoms("Si").positions)
    for kind in ("cluster", "trimer", "bulk", "p2mm"):
        np.testing.assert_array_equal(S.make_substrate(["Si"], kind).positions, S.make_substrate("Si", kind).positions)
    assert S.make_substrate(14, "cluster").get_chemical_formula() == "Si13"
    # a file is read; a bare symbol means the element even next to a file of that name
    path = tmp_path / "ch4.xyz"
    molecule("CH4").write(str(path))
    assert S.make_substrate(str(path), "cluster").get_chemical_formula() == "CH4"
    assert S.make_substrate(path, "bulk").get_chemical_formula() == "CH4"
    monkeypatch.chdir(tmp_path)
    molecule("H2O").write("Ar", format="xyz")
    assert S.make_substrate("Ar", "cluster").get_chemical_formula() == "Ar13"
    s = S.make_structure("Ar", "trimer", dtype=jnp.float32)
    assert isinstance(s, jaxcert.Structure) and s.dtype == jnp.float32 and S.make_structure(s, "bulk") is s


def test_make_substrate_errors(tmp_path):
    missing = tmp_path / "missing.xyz"
    with pytest.raises(ValueError, match="neither an element symbol nor a structure file") as err:
        S.make_substrate(str(missing), "cluster")
    assert "missing.xyz" in str(err.value)
    with pytest.raises(ValueError, match="neither an element symbol"):
        S.make_substrate("si", "cluster")  # case matters: not a symbol, not a file
    with pytest.raises(ValueError, match="unknown substrate kind"):
        S.make_substrate("Si", "slab")
    with pytest.raises(ValueError, match="exactly one"):
        S.make_substrate(["Si", "O"], "cluster")
    broken = tmp_path / "broken.xyz"
    broken.write_text("not an xyz file\n")
    with pytest.raises(Exception, match="xyz"):  # ASE's own parse error
        S.make_substrate(str(broken), "cluster")


# ------------------------------------------------------------------------------------------- Structures, batching
def test_structure_versions(dtype):
    for build, build_atoms in [(S.cluster, S.cluster_atoms), (S.trimer, S.trimer_atoms),
                               (S.bulk, S.bulk_atoms), (S.pmm2, S.pmm2_atoms)]:
        s, a = build("Si", dtype=dtype), build_atoms("Si")
        assert s.dtype == dtype and s.pbc == tuple(bool(p) for p in a.pbc)
        np.testing.assert_allclose(np.asarray(s.positions), a.positions, atol=1e-5 * 20)
        np.testing.assert_allclose(np.asarray(s.cell), np.asarray(a.cell), atol=1e-5 * 20)
        assert np.asarray(s.numbers).tolist() == [14] * len(a)


@pytest.mark.parametrize("kind,n", [("cluster", 13), ("trimer", 3), ("pmm2", 4), ("bulk", 2)])
def test_stacked_shapes(kind, n):
    batch, els = S.stacked(kind, ELEMENTS_11)
    assert els == ELEMENTS_11
    assert batch.positions.shape == (11, n, 3) and batch.cell.shape == (11, 3, 3)
    assert batch.numbers.shape == batch.mask.shape == batch.masses.shape == (11, n)
    n_real = np.asarray(batch.mask).sum(1)
    expected = [len(S._ATOMS_BUILDERS[S._canonical_kind(kind)](el)) for el in ELEMENTS_11]
    np.testing.assert_array_equal(n_real, expected)
    if kind == "bulk":
        assert sorted(set(n_real.tolist())) == [1, 2]  # B, P, S fall back to 1-atom fcc; hcp/diamond have 2


def _ase_lj_energy(atoms: Atoms) -> float:
    """ASE's own LennardJones with the §7.1 per-element parameters (smooth, r_c = 3σ, r_o = 0.66 r_c)."""
    from ase.calculators.lj import LennardJones

    from jaxcert.models.lj import reference_parameters

    sigma, eps = reference_parameters(atoms.get_chemical_symbols()[0])
    atoms = atoms.copy()
    atoms.calc = LennardJones(sigma=sigma, epsilon=eps, rc=3 * sigma, ro=0.66 * 3 * sigma, smooth=True)
    return atoms.get_potential_energy()


@pytest.mark.parametrize("kind", ["bulk", "cluster"])
def test_stacked_batch_vmaps(kind):
    """One compiled, vmapped reference-LJ energy over 11 elements (padding inert) equals ASE per element."""
    lj = models.get("lj")
    batch, els = S.stacked(kind, ELEMENTS_11)
    batch = lj.prepare(batch)
    energies = jax.jit(jax.vmap(lj.energy_of, in_axes=(None, 0)))(lj.params, batch)
    build = S._ATOMS_BUILDERS[kind]
    np.testing.assert_allclose(np.asarray(energies), [_ase_lj_energy(build(el)) for el in els], rtol=1e-9)


def test_reference_lj_force_on_bulk_and_trimer():
    """σ = d_nn/2^{1/6} (§7.1): the pair minimum sits on the substrate NN.

    On the primitive bulk cells the force vanishes by site symmetry for *any* σ, so the
    bulk check cannot see a σ mismatch; the equilateral trimer (all three pairs at d_nn,
    inside r_o so the switch is 1) has zero force only if σ matches d_nn.
    """
    lj = models.get("lj")
    wrong = models.get("lj", sigma=3.0, epsilon=0.01)
    vforces = jax.jit(jax.vmap(lj.forces_of, in_axes=(None, 0)))
    bulk_b = lj.prepare(S.stacked("bulk", ELEMENTS_11 + ["Ar"])[0])
    trim_b = S.stacked("trimer", ELEMENTS_11 + ["Ar"])[0]
    assert float(jnp.abs(vforces(lj.params, bulk_b)).max()) < 1e-12
    assert float(jnp.abs(vforces(lj.params, trim_b)).max()) < 1e-12
    # control: σ = 3 Å for every element, same compiled programs, other parameter tables.  (On the bulk the
    # image range was sized for the reference cutoffs; the truncated image set is still symmetric.)
    assert float(jnp.abs(vforces(wrong.params, bulk_b)).max()) < 1e-12  # blind by symmetry
    assert float(jnp.linalg.norm(vforces(wrong.params, trim_b), axis=-1).min()) > 1e-3  # sees it, every element


# ------------------------------------------------------------------------------------------- λ structures (seed 002)
def test_lambda_structures(dtype):
    structs = S.lambda_structures(dtype=dtype)
    sizes = {"H2O": 3, "CH4": 5, "NH3": 4, "C2H4": 6, "C2H2": 4, "SO2": 3, "CH3OH": 6, "C6H6": 12,
             "diamond": 8, "graphene": 2}
    assert list(structs) == list(sizes)
    for name, s in structs.items():
        assert isinstance(s, jaxcert.Structure) and s.dtype == dtype
        assert s.n_atoms == sizes[name]
        assert float(s.volume) > 1.0  # non-singular cell everywhere
    for name in S.LAMBDA_MOLECULES:
        assert structs[name].pbc == (False, False, False)
        pos = np.asarray(structs[name].positions)
        np.testing.assert_allclose(pos.min(0), 8.0, atol=1e-4)
    assert structs["diamond"].pbc == (True, True, True)
    assert float(structs["diamond"].volume) == pytest.approx(3.57**3, rel=1e-5)
    g = structs["graphene"]
    assert g.pbc == (True, True, False)
    assert float(g.cell[2, 2]) == pytest.approx(16.0)
    # every λ structure round-trips through validation (min distance, finite, cell rank)
    for a in S.lambda_atoms().values():
        jaxcert.Structure.from_ase(a)
    d = S.lambda_atoms()["graphene"].get_all_distances(mic=True)
    assert d[0, 1] == pytest.approx(2.46 / np.sqrt(3), rel=1e-12)


# ------------------------------------------------------------------------------------------- inspection files
def test_write_substrates(tmp_path):
    paths = S.write_substrates("Si", tmp_path / "out")
    assert [p.name for p in paths] == ["Si_cluster.extxyz", "Si_trimer.extxyz", "Si_bulk.extxyz", "Si_p2mm.extxyz"]
    for p, kind in zip(paths, S.KINDS, strict=True):
        back = ase.io.read(p)
        ref = S.make_substrate("Si", kind)
        np.testing.assert_allclose(back.positions, ref.positions, atol=1e-8)
        np.testing.assert_allclose(np.asarray(back.cell), np.asarray(ref.cell), atol=1e-8)
        assert back.pbc.tolist() == ref.pbc.tolist() and back.info["substrate"] == kind
