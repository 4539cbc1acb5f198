import jax
import numpy as np
import pytest
from ase.calculators.lj import LennardJones
from ase.cluster import Icosahedron
from ase.optimize import BFGS, FIRE, LBFGS

import jaxcert
from jaxcert.relax import bfgs, fire, lbfgs


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
