import jax
import numpy as np
import pytest
from ase.calculators.lj import LennardJones
from ase.cluster import Icosahedron
from ase.optimize import BFGS, FIRE, LBFGS

import jaxcert
from jaxcert.optim.relax import bfgs, fire, lbfgs


@pytest.fixture(scope="module")
def setup():
    at = Icosahedron("Ar", noshells=2)
    at.rattle(0.1, seed=0)
    at.center(8.0)
    m = jaxcert.models.get("lj")
    sig, eps = jaxcert.models.lj.reference_parameters("Ar")
    calc = LennardJones(sigma=sig, epsilon=eps, rc=3 * sig, ro=0.66 * 3 * sig, smooth=True)
    return at, m, calc


@pytest.mark.parametrize("name, ours, theirs", [("bfgs", bfgs, BFGS), ("fire", fire, FIRE),
                                                 ("lbfgs", lbfgs, LBFGS)])
def test_matches_ase_optimizer_step_for_step(setup, name, ours, theirs):
    at, m, calc = setup
    s = jaxcert.Structure.from_ase(at)
    r = ours(m, s, fmax=1e-3, max_steps=300)
    ref = at.copy()
    ref.calc = calc
    opt = theirs(ref, logfile=None)
    opt.run(fmax=1e-3, steps=300)
    assert bool(r.converged) and float(r.fmax) < 1e-3
    assert int(r.steps) == opt.nsteps
    np.testing.assert_allclose(r.structure.positions, ref.get_positions(), atol=1e-6)


def test_non_convergence_is_reported_honestly(setup):
    at, m, _ = setup
    s = jaxcert.Structure.from_ase(at)
    r = fire(m, s, fmax=1e-6, max_steps=5)
    assert not bool(r.converged) and int(r.steps) == 5 and float(r.fmax) > 1e-6


def test_vmapped_relaxation_reports_per_structure(setup):
    at, m, _ = setup
    a = jaxcert.Structure.from_ase(at)
    b = jaxcert.Structure.from_ase(at[:7])
    batch = m.prepare(jaxcert.stack([a, b]))
    r = jax.jit(jax.vmap(lambda s: bfgs(m, s)))(batch)
    for k, s in enumerate([a, b]):
        one = bfgs(m, s)
        assert int(r.steps[k]) == int(one.steps)
        assert bool(r.converged[k])
    assert np.all(np.asarray(r.structure.positions[1, 7:]) == np.asarray(batch.positions[1, 7:]))  # padding fixed


def _si_cell(seed, rattle=0.05):
    from ase.build import bulk
    at = bulk("Si", "diamond", a=5.431, cubic=True).repeat(2)
    at.set_cell(at.cell.array @ np.array([[1.0, 0.04, 0.0], [0.0, 1.0, 0.03], [0.0, 0.0, 1.0]]), scale_atoms=True)
    at.positions += np.random.default_rng(seed).normal(0.0, rattle, at.positions.shape)
    return jaxcert.Structure.from_ase(at)


def test_lbfgs_bfgs_and_fire_reach_the_same_minimum():
    """64-atom SW Si (skewed, rattled), float64: the three optimisers end at one minimum (to 1e-6 Å)."""
    m = jaxcert.models.get("sw")
    s = _si_cell(11)
    runs = {name: opt(m, s, fmax=1e-7, max_steps=3000) for name, opt in
            (("lbfgs", lbfgs), ("bfgs", bfgs), ("fire", fire))}
    for name, r in runs.items():
        assert bool(r.converged), (name, float(r.fmax), int(r.steps))
    ref = np.asarray(runs["bfgs"].structure.positions)
    assert np.abs(ref - np.asarray(s.positions)).max() > 1e-2  # it moved
    for name in ("lbfgs", "fire"):
        np.testing.assert_allclose(np.asarray(runs[name].structure.positions), ref, rtol=0, atol=1e-6, err_msg=name)


def test_vmapped_lbfgs_reports_a_member_that_did_not_converge(setup):
    """Under vmap each member keeps its own step count; the one stopped by the step cap says so."""
    at, m, _ = setup
    a = jaxcert.Structure.from_ase(at)
    b = a.replace(positions=a.positions + 0.15 * np.random.default_rng(2).normal(size=a.positions.shape))
    ka, kb = (int(lbfgs(m, x, fmax=1e-4, max_steps=300).steps) for x in (a, b))
    assert ka != kb
    cap = (ka + kb) // 2
    r = jax.jit(jax.vmap(lambda s: lbfgs(m, s, fmax=1e-4, max_steps=cap)))(m.prepare(jaxcert.stack([a, b])))
    fast = 0 if ka < kb else 1
    assert bool(r.converged[fast]) and int(r.steps[fast]) == min(ka, kb) and float(r.fmax[fast]) < 1e-4
    assert not bool(r.converged[1 - fast]) and int(r.steps[1 - fast]) == cap and float(r.fmax[1 - fast]) >= 1e-4


def test_bfgs_hands_over_to_lbfgs_above_the_size_limit(setup, monkeypatch):
    at, m, _ = setup
    s = jaxcert.Structure.from_ase(at)
    monkeypatch.setattr(jaxcert.optim.relax, "BFGS_MAX_ATOMS", s.n_atoms - 1)
    r, ref = bfgs(m, s, fmax=1e-3), lbfgs(m, s, fmax=1e-3)
    assert int(r.steps) == int(ref.steps)
    np.testing.assert_array_equal(np.asarray(r.structure.positions), np.asarray(ref.structure.positions))


def test_fire_steps_a_pytree_as_the_stacked_array():
    """The one FIRE step (``fire_optimizer``) on a two-leaf pytree (positions, cell rows: what relax_cell moves)
    takes the steps it takes on the stacked (N + 3, 3) array (what fire moves), to round-off."""
    from jaxcert.optim.relax import fire_optimizer

    rng = np.random.default_rng(3)
    K = rng.normal(size=(18, 18))
    K = K @ K.T / 18 + np.eye(18)  # a positive-definite quadratic: forces -K x turn, so FIRE mixes and resets
    opt = fire_optimizer()
    y = rng.normal(size=(6, 3))
    tree = (y[:4], y[4:])
    sy, st = opt.init(y), opt.init(tree)
    for k in range(25):
        fy = -(K @ y.reshape(-1)).reshape(6, 3)
        ft = -(K @ np.concatenate([tree[0], tree[1]]).reshape(-1)).reshape(6, 3)
        y, sy = opt.step(y, fy, sy, k == 0)
        tree, st = opt.step(tree, (ft[:4], ft[4:]), st, k == 0)
        np.testing.assert_allclose(np.concatenate([tree[0], tree[1]]), y, rtol=0, atol=1e-13)
        np.testing.assert_allclose(float(st.dt), float(sy.dt), rtol=1e-14)
        assert int(st.n_pos) == int(sy.n_pos)


def test_cell_fire_with_the_cell_fixed_is_positions_fire():
    """relax_cell with every cell component masked runs the same FIRE as fire: same steps, same minimum."""
    from ase.build import bulk

    from jaxcert.optim.relax import relax_cell

    at = bulk("Cu", "fcc", a=3.6, cubic=True)
    at.rattle(0.05, seed=4)
    m = jaxcert.models.get("emt")
    s = jaxcert.Structure.from_ase(at)
    a = fire(m, s, fmax=1e-4, max_steps=200)
    b = relax_cell(m, s, fmax=1e-4, max_steps=200, mask=np.zeros(6, bool))
    assert bool(a.converged) and bool(b.converged)
    assert int(a.steps) == int(b.steps) > 5
    np.testing.assert_allclose(np.asarray(b.structure.cell), np.asarray(s.cell), rtol=0, atol=0)
    np.testing.assert_allclose(np.asarray(b.structure.positions), np.asarray(a.structure.positions), atol=1e-10)


def test_relax_batch_is_each_relaxation_and_holds_fixed_atoms(setup):
    """The one batched driver: a free member relaxes as alone, ``movable`` 0 holds an atom; status codes."""
    from jaxcert.core.result import Status
    from jaxcert.optim.relax import relax_batch

    at, m, _ = setup
    a = jaxcert.Structure.from_ase(at)
    b = a.replace(positions=a.positions + 0.05 * np.random.default_rng(5).normal(size=a.positions.shape))
    batch = m.prepare(jaxcert.stack([a, b]))
    movable = np.ones((2, a.n_atoms))
    movable[1, 0] = 0
    r = jax.jit(lambda x, mov: relax_batch(m, x, fmax=1e-3, max_steps=300, movable=mov))(batch, movable)
    one = fire(m, a, fmax=1e-3, max_steps=300)
    assert int(r.steps[0]) == int(one.steps)
    np.testing.assert_allclose(np.asarray(r.structure.positions[0]), np.asarray(one.structure.positions), atol=1e-10)
    np.testing.assert_array_equal(np.asarray(r.structure.positions[1, 0]), np.asarray(batch.positions[1, 0]))
    assert np.abs(np.asarray(r.structure.positions[1, 1:] - batch.positions[1, 1:])).max() > 1e-3
    assert [Status.of(c) for c in np.asarray(r.status)] == [Status.OK, Status.OK]
    short = fire(m, a, fmax=1e-6, max_steps=3)
    assert Status.of(short.status) is Status.NOT_CONVERGED
