import itertools

import jax
import numpy as np
import pytest
from ase.build import bulk
from ase.neighborlist import neighbor_list

from jaxcert import Structure
from jaxcert.core.neighbors import image_counts, neighbor_table, pairs, with_images


def _ase_distances(at, rc):
    d = neighbor_list("d", at, rc)
    return np.sort(d)


@pytest.mark.parametrize(
    "atoms, rc",
    [
        (bulk("Cu", "fcc", a=3.6), 7.5),  # primitive skewed cell, cutoff > 2x the cell
        (bulk("Si", "diamond", a=5.43), 6.3),
        (bulk("Mg", "hcp", a=3.2, c=5.2), 6.0),
        (bulk("Cu", "fcc", a=3.6, cubic=True) * (1, 1, 2), 4.0),
    ],
)
def test_all_pairs_within_cutoff_match_ase(atoms, rc):
    atoms = atoms.copy()
    atoms.rattle(0.05, seed=3)
    s = with_images(Structure.from_ase(atoms), rc)
    p = pairs(s, rc)
    r = np.asarray(p.r)[np.asarray(p.mask)]
    mine = np.sort(r[r < rc])
    np.testing.assert_allclose(mine, _ase_distances(atoms, rc), atol=1e-12)


def test_mixed_pbc_slab():
    at = bulk("Cu", "fcc", a=3.6, cubic=True).repeat((2, 2, 1))
    at.center(vacuum=5.0, axis=2)
    at.pbc = (True, True, False)
    at.rattle(0.05, seed=1)
    s = Structure.from_ase(at)
    assert image_counts(s.cell, s.pbc, 5.0)[2] == 0
    p = pairs(with_images(s, 5.0), 5.0)
    r = np.asarray(p.r)[np.asarray(p.mask)]
    np.testing.assert_allclose(np.sort(r[r < 5.0]), _ase_distances(at, 5.0), atol=1e-12)


def test_atoms_outside_the_cell_are_wrapped_exactly():
    at = bulk("Cu", "fcc", a=3.6)
    at.rattle(0.05, seed=2)
    shifted = at.copy()
    shifted.positions[0] += 3 * at.cell[0] - 2 * at.cell[2]
    for a in (at, shifted):
        s = with_images(Structure.from_ase(a), 6.0)
        r = np.asarray(pairs(s, 6.0).r)[np.asarray(pairs(s, 6.0).mask)]
        r = np.sort(r[r < 6.0])
        if a is at:
            ref = r
    np.testing.assert_allclose(r, ref, atol=1e-10)


def test_insufficient_images_give_nan_not_wrong_numbers():
    s = Structure.from_ase(bulk("Cu", "fcc", a=3.6))
    s = s.replace(images=(1, 1, 1))
    # concrete cell: the count is raised automatically
    assert np.isfinite(np.asarray(pairs(s, 9.0).dR)).all()
    # traced cell (inside jit) with a static count too small for the cutoff: NaN, never silently wrong
    p = jax.jit(lambda s: pairs(s, 9.0))(s)
    assert np.isnan(np.asarray(p.dR)).all()
    # ... and fine when the count suffices
    p = jax.jit(lambda s: pairs(s, 9.0))(with_images(s, 9.0))
    assert np.isfinite(np.asarray(p.dR)).all()


def test_neighbor_table_overflow_is_nan():
    s = with_images(Structure.from_ase(bulk("Cu", "fcc", a=3.6)), 3.0)
    ok = neighbor_table(s, 3.0, capacity=12)  # fcc: 12 neighbours within 3 Å
    assert np.isfinite(np.asarray(ok.dR)).all()
    assert int(np.sum(np.asarray(ok.r)[np.asarray(ok.mask)] < 3.0)) == 12
    bad = neighbor_table(s, 3.0, capacity=8)
    assert np.isnan(np.asarray(bad.dR)).all()


def test_image_counts_skewed_cell():
    # a strongly sheared cell: plane spacing, not vector length, sets the count
    cell = np.array([[4.0, 0, 0], [3.9, 1.0, 0], [0, 0, 4.0]])
    k = image_counts(cell, (True, True, True), 3.0, margin=0.0)
    w = abs(np.linalg.det(cell)) / np.linalg.norm(np.cross(cell[0], cell[2]))
    assert k[1] == int(np.floor(3.0 / w + 0.5))
    # brute force: every lattice translation shorter than 3 Å lies inside the counted range
    for n in itertools.product(range(-6, 7), repeat=3):
        if 0 < np.linalg.norm(np.array(n) @ cell) < 3.0:
            assert all(abs(n[a]) <= k[a] for a in range(3))


def test_traced_cutoff_with_prepared_structure():
    """A cutoff computed inside jit (e.g. from traced parameters) uses the static image count."""
    import jaxcert

    lj = jaxcert.models.get("lj")
    s = lj.prepare(Structure.from_ase(bulk("Si", "diamond", a=5.43)))
    e = jax.jit(lambda R: lj.energy_of(lj.params, s.replace(positions=R)))(s.positions)
    assert float(e) == pytest.approx(float(lj.energy(s)), abs=1e-12)


def test_model_outputs_are_nan_when_the_static_images_do_not_cover_the_cell():
    """Whatever the model does with out-of-range pairs (LJ zeroes them with a where), an
    insufficient image count inside jit gives NaN, never a silently wrong number."""
    import jaxcert

    lj = jaxcert.models.get("lj")
    s = lj.prepare(Structure.from_ase(bulk("Si", "diamond", a=5.43)))
    small = s.replace(cell=0.6 * s.cell, positions=0.6 * s.positions)  # needs more images than prepared
    e = jax.jit(lambda s: lj.energy_of(lj.params, s))
    assert np.isfinite(float(e(s)))
    assert np.isnan(float(e(small)))
    assert np.isnan(np.asarray(jax.jit(lambda s: lj.forces_of(lj.params, s))(small))).all()
    # prepared for the small cell it is finite again
    assert np.isfinite(float(lj.energy(lj.prepare(small.replace(images=None, image_cutoff=None)))))
