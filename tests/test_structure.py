import jax
import jax.numpy as jnp
import numpy as np
import pytest
from ase.build import bulk, molecule

import jaxcert
from jaxcert import Structure, StructureError


def test_ase_round_trip():
    at = bulk("Cu", "fcc", a=3.6, cubic=True)
    at.rattle(0.02, seed=1)
    s = Structure.from_ase(at)
    back = s.to_ase()
    np.testing.assert_allclose(back.get_positions(), at.get_positions())
    np.testing.assert_allclose(back.get_cell()[:], at.get_cell()[:])
    np.testing.assert_allclose(back.get_masses(), at.get_masses())
    assert tuple(back.pbc) == tuple(at.pbc)
    assert s.positions.shape == (4, 3) and s.numbers.dtype == jnp.int32


def test_read(tmp_path):
    at = molecule("H2O")
    path = tmp_path / "w.xyz"
    at.write(path)
    s = Structure.read(path)
    assert s.n_atoms == 3 and s.pbc == (False, False, False)
    with pytest.raises(StructureError, match="no such structure file"):
        Structure.read(tmp_path / "missing.xyz")


def test_dtype_follows_input():
    s32 = Structure.create(np.zeros((1, 3), np.float32), [1])
    s64 = Structure.create(np.zeros((1, 3), np.float64), [1])
    assert s32.dtype == jnp.float32 and s64.dtype == jnp.float64


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(positions=[[0, 0, 0], [np.nan, 0, 0]], numbers=[1, 1]), "non-finite"),
        (dict(positions=[[0, 0, 0], [np.inf, 0, 0]], numbers=[1, 1]), "non-finite"),
        (dict(positions=[[0, 0, 0], [0.1, 0, 0]], numbers=[1, 1]), "overlapping atoms 0 and 1"),
        (dict(positions=[[0, 0, 0], [2, 0, 0]], numbers=[1, 200]), r"unknown atomic number\(s\) \[200\]"),
        (dict(positions=[[0, 0, 0], [2, 0, 0]], numbers=[0, 1]), r"unknown atomic number\(s\) \[0\]"),
        (dict(positions=[[0, 0, 0]], numbers=["Xx"]), "unknown chemical symbol"),
        (dict(positions=np.zeros((0, 3)), numbers=[]), "empty structure"),
        (dict(positions=[[0, 0, 0]], numbers=[6], cell=np.diag([3.0, 3.0, 0.0]), pbc=True), "singular cell"),
        (dict(positions=[[0, 0, 0]], numbers=[6], pbc=True), "singular cell"),
        (dict(positions=[[0, 0, 0]], numbers=[6], mask=[False]), "every atom is masked"),
    ],
)
def test_validation_messages(kwargs, message):
    with pytest.raises(StructureError, match=message):
        Structure.create(**kwargs)


def test_overlap_through_periodic_image():
    # atoms 0.2 Å apart across the periodic boundary
    with pytest.raises(StructureError, match="overlapping"):
        Structure.create([[0.1, 0, 0], [4.9, 0, 0]], [29, 29], cell=np.eye(3) * 5.0, pbc=True)
    # the same coordinates without pbc are fine
    Structure.create([[0.1, 0, 0], [4.9, 0, 0]], [29, 29], cell=np.eye(3) * 5.0, pbc=False)
    # a configurable threshold
    Structure.create([[0, 0, 0], [0.2, 0, 0]], [1, 1], min_distance=0.1)


def test_stack_pads_and_is_a_pytree():
    a = Structure.from_ase(molecule("H2O"))
    b = Structure.from_ase(molecule("CH4"))
    batch = jaxcert.stack([a, b])
    assert batch.positions.shape == (2, 5, 3)
    np.testing.assert_array_equal(np.asarray(batch.mask).sum(1), [3, 5])
    leaves = jax.tree_util.tree_leaves(batch)
    assert len(leaves) == 5  # pbc/images are static
    back = jaxcert.unstack(batch)[0].to_ase()
    assert back.get_chemical_formula() == "H2O"
    with pytest.raises(StructureError, match="different pbc"):
        jaxcert.stack([a, Structure.from_ase(bulk("Cu"))])


def test_overlap_check_of_a_large_structure_uses_the_linear_search():
    """Above DENSE_CHECK_MAX_ATOMS the overlap check is matscipy's cell list: same pair and distance as dense."""
    from jaxcert.core.structure import DENSE_CHECK_MAX_ATOMS, _min_distance

    at = bulk("Cu", "fcc", a=3.61, cubic=True) * (5, 5, 5)  # 500 atoms
    assert len(at) > DENSE_CHECK_MAX_ATOMS
    at.rattle(0.05, seed=3)
    Structure.from_ase(at)  # clean: no pair below 0.3 Å
    # an atom's minimum image across the boundary, 0.2 Å from another atom
    at.positions[7] = at.positions[3] + np.array([0.2, 0.0, 0.0]) + at.cell[0]
    dense = _min_distance(at.positions, np.asarray(at.cell), (True, True, True))
    linear = _min_distance(at.positions, np.asarray(at.cell), (True, True, True), 0.3)
    assert abs(dense[0] - linear[0]) < 1e-12 and set(dense[1]) == set(linear[1]) == {3, 7}
    with pytest.raises(StructureError, match="overlapping atoms 3 and 7"):
        Structure.from_ase(at)
    at.pbc = False  # free space: atom 7 is now a whole lattice vector (18 Å) from atom 3
    Structure.from_ase(at)
