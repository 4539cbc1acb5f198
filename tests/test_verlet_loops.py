"""Loops that carry the Verlet list (MD) and the host's answer to a neighbour-list overflow (issue 11).

Identities (docs/architecture.md §2.3): carrying the list through MD steps changes only when lists are built, so
a trajectory equals the dense path's to round-off, and a carried list is rebuilt only when stale (its build
counter grows, but not at every step).  A capacity too small for the pairs is a status inside ``jit`` (the
list's ``ok`` flag, besides NaN) and, for a host caller, is answered by a larger list and a rerun that gives
the ample-capacity answer.
"""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import pytest
from ase.build import bulk

import jaxcert
from jaxcert.attacks import AttackSpec, PipelineConfig, run_grid
from jaxcert.core import neighbors as nb
from jaxcert.optim import dynamics as dyn

SKEW = np.array([[1.0, 0.04, 0.02], [0.0, 1.0, 0.03], [0.0, 0.0, 1.0]])


def _si(rep, seed=0):
    at = bulk("Si", "diamond", a=5.431, cubic=True).repeat(rep)
    at.set_cell(at.cell.array @ SKEW, scale_atoms=True)
    at.positions += np.random.default_rng(seed).normal(0.0, 0.05, at.positions.shape)
    return jaxcert.Structure.from_ase(at)


@pytest.fixture(scope="module")
def sw():
    return jaxcert.models.get("sw")


@pytest.fixture(scope="module")
def pair(sw):
    """The 64-atom cell on the dense path and on a cell list (the smallest cell a list serves)."""
    s = _si((2, 2, 2), seed=4)
    dense = sw.prepare(s.replace(neighbor_list=nb.DENSE))
    listed = nb.with_cell_list(dense.replace(neighbor_list=None), sw.cutoff)
    return dense, listed


def _broken(listed):
    """The list with half the neighbour slots it needs (every build overflows) and cell slots that the host's
    regrowth (``nb.grow``: GROWTH × each capacity, at least what ``with_cell_list`` sizes) turns back into
    ``listed``'s own: the rerun and the ample-capacity reference are one compiled program."""
    spec = listed.neighbor_list
    small = dataclasses.replace(spec, capacity=spec.capacity // 2, cell_capacity=int(spec.cell_capacity / nb.GROWTH))
    return listed.replace(neighbor_list=small, neighbor_state=None)


def test_md_on_the_list_follows_the_dense_path(sw, pair):
    dense, listed = pair
    v = dyn.maxwell_boltzmann(jax.random.PRNGKey(0), dense, 1500.0)
    rd = dyn.velocity_verlet(sw, dense, v, 1.0, 20)
    rl = dyn.velocity_verlet(sw, listed, v, 1.0, 20)
    assert rd.neighbor_state is None and bool(rl.neighbor_state.ok)
    np.testing.assert_allclose(np.asarray(rl.trajectory), np.asarray(rd.trajectory), rtol=0, atol=1e-10)
    np.testing.assert_allclose(np.asarray(rl.energies), np.asarray(rd.energies), rtol=0, atol=1e-10)
    cfg = dyn.LangevinConfig(temperature_k=1500.0, warmup_steps=4, relax=False)
    td = dyn.langevin_trajectory(sw, dense, jax.random.PRNGKey(1), cfg, n_steps=8)
    tl = dyn.langevin_trajectory(sw, listed, jax.random.PRNGKey(1), cfg, n_steps=8)
    np.testing.assert_allclose(np.asarray(tl.positions), np.asarray(td.positions), rtol=0, atol=1e-10)
    np.testing.assert_allclose(np.asarray(tl.forces), np.asarray(td.forces), rtol=0, atol=1e-10)


def test_a_large_cell_carries_its_list_through_md(sw):
    """256 atoms (Model.prepare picks the cell list), hot: the list is rebuilt a few times inside the scan and
    carried out of it (a list refreshed per force call from the input's would still count 1 build), and the
    trajectory equals the dense path's."""
    s = _si((4, 4, 2), seed=6)
    listed = sw.prepare(s)
    assert s.n_atoms >= nb.SPARSE_MIN_ATOMS and isinstance(listed.neighbor_list, nb.CellListSpec)
    dense = sw.prepare(s.replace(neighbor_list=nb.DENSE))
    v = dyn.maxwell_boltzmann(jax.random.PRNGKey(2), dense, 2000.0)
    n_steps = 24
    rl = dyn.velocity_verlet(sw, listed, v, 2.0, n_steps)
    rd = dyn.velocity_verlet(sw, dense, v, 2.0, n_steps)
    builds = int(rl.neighbor_state.builds)
    assert bool(rl.neighbor_state.ok) and 2 <= builds <= n_steps // 3, builds
    moved = np.abs(np.asarray(rl.neighbor_state.positions) - np.asarray(listed.neighbor_state.positions)).max()
    assert moved > listed.neighbor_list.skin / 2  # the carried list was built later in the run
    np.testing.assert_allclose(np.asarray(rl.positions), np.asarray(rd.positions), rtol=0, atol=1e-9)


def test_an_overflow_inside_jit_is_a_flag(sw, pair):
    _, listed = pair
    r = jax.jit(lambda s: jaxcert.optim.relax.fire(sw, s, fmax=1e-2))(_broken(listed))
    assert not bool(r.converged) and not bool(r.structure.neighbor_state.ok) and np.isnan(float(r.fmax))


def test_the_host_drivers_answer_an_overflow(sw, pair):
    """Relaxation and MD, each given a list too small: a warning, a larger list, and the answer
    of the run with ample capacity."""
    _, listed = pair
    broken = _broken(listed)
    with pytest.warns(nb.NeighborListOverflow, match="overflowed"):
        r = jaxcert.optim.relax.fire(sw, broken, fmax=1e-2)
    ref = jaxcert.optim.relax.fire(sw, listed, fmax=1e-2)
    assert bool(r.converged) and int(r.steps) == int(ref.steps)
    assert r.structure.neighbor_list.capacity > broken.neighbor_list.capacity
    np.testing.assert_allclose(np.asarray(r.structure.positions), np.asarray(ref.structure.positions), atol=1e-12)

    v = dyn.maxwell_boltzmann(jax.random.PRNGKey(0), listed, 1500.0)
    with pytest.warns(nb.NeighborListOverflow):
        md = dyn.velocity_verlet(sw, broken, v, 1.0, 10)
    md_ref = dyn.velocity_verlet(sw, listed, v, 1.0, 10)
    assert np.isfinite(np.asarray(md.energies)).all()
    np.testing.assert_allclose(np.asarray(md.trajectory), np.asarray(md_ref.trajectory), rtol=0, atol=1e-12)



@pytest.mark.slow
def test_the_attack_grid_answers_an_overflow(sw, pair):
    """run_grid on a stacked batch whose list is too small: rerun with a larger list, counted in the result.

    In the slow tier (``-m slow``): tracing and compiling the whole relax → attack → relax grid twice (the small
    list and the regrown one) takes 35-57 s on a 2-core CPU, and the answer to an overflow is the one
    ``rerun_on_overflow`` that the relaxation and MD drivers above exercise in the default run."""
    dense, _ = pair
    batch = nb.with_cell_list(sw.prepare(jaxcert.stack([dense]).replace(neighbor_list=nb.DENSE))
                              .replace(neighbor_list=None), sw.cutoff)
    broken = _broken(batch)
    spec, cfg = AttackSpec("pgd", 3), PipelineConfig(fmax=5e-2, max_steps=100)
    with pytest.warns(nb.NeighborListOverflow):
        g = run_grid(sw, broken, [0.05], attacks=[spec], config=cfg)
    g_ref = run_grid(sw, batch, [0.05], attacks=[spec], config=cfg)
    assert g.neighbor_regrowths >= 1 and g_ref.neighbor_regrowths == 0
    assert g.runs.final.structure.neighbor_list == batch.neighbor_list  # regrown to the ample list
    assert bool(np.asarray(g.runs.converged).all()) and bool(np.asarray(g.ref_converged).all())
    np.testing.assert_allclose(np.asarray(g.runs.final.structure.positions),
                               np.asarray(g_ref.runs.final.structure.positions), rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.asarray(g.runs.adversarial.energy), np.asarray(g_ref.runs.adversarial.energy),
                               rtol=0, atol=1e-10)
