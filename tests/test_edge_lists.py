"""Flat edge lists for graph networks (docs/architecture.md §2.4): built from the structure, padded to a bucket,
reused inside a Verlet skin, moved to a larger bucket on overflow.

Identities: the host's list (matscipy) and the list rebuilt inside a compiled program hold the same edges (i, j,
image); a graph network's energy, forces and stress on the edge list equal those on rows of neighbour slots to
float64 round-off; a run whose bucket overflows is answered on the host by a larger bucket with the ample-bucket
answer; an MD trajectory that reuses its list inside the skin equals one that rebuilds it at every step.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from ase.build import bulk, fcc111, molecule

import jaxcert
from jaxcert.core import neighbors as nb
from jaxcert.optim import dynamics as dyn

pytestmark = pytest.mark.filterwarnings("ignore::jaxcert.core.neighbors.NeighborListOverflow")

RC = 4.0


def _apply(params, g):
    """A many-body graph network in miniature: pair terms plus an embedding of a smooth neighbour density,
    aggregated by segment sums over the receivers (per-node energies)."""
    n = g.node_mask.shape[0]
    r = jnp.sqrt(jnp.sum(g.edge_vectors ** 2, axis=-1))
    fc = jnp.where(g.edge_mask & (r < RC), 0.5 * (jnp.cos(jnp.pi * r / RC) + 1.0), 0.0)
    pair = params["a"] * jnp.exp(-r) * fc
    rho = jax.ops.segment_sum(fc * jnp.exp(-0.5 * r) * (1.0 + 0.1 * g.edge_vectors[:, 2] / r), g.receivers, n)
    return 0.5 * jax.ops.segment_sum(pair, g.receivers, n) - params["b"] * jnp.sqrt(rho + 1.0)


PARAMS = {"a": jnp.asarray(3.0), "b": jnp.asarray(1.5)}


def _model(**kw):
    return jaxcert.Model.from_graph_module(_apply, PARAMS, cutoff=RC, **kw)


def _cases():
    rng = np.random.default_rng(0)
    si = bulk("Si", "diamond", a=5.43)  # 2 atoms: many images
    sk = bulk("Si", "diamond", a=5.43, cubic=True)
    sk.set_cell(sk.cell.array @ np.array([[1.0, 0.1, 0.05], [0.0, 1.0, 0.08], [0.0, 0.0, 1.0]]), scale_atoms=True)
    slab = fcc111("Cu", (2, 2, 3), vacuum=5.0)
    cluster = molecule("C6H6")
    big = bulk("Cu", "fcc", a=3.61, cubic=True).repeat((5, 5, 5))  # 500 atoms: a rebuild takes a cell list
    cu1 = bulk("Cu", "fcc", a=3.61)  # one atom: every edge joins it to its own images
    out = {"Cu1 primitive": cu1, "Si2 primitive": si, "skewed Si8": sk, "Cu slab": slab, "C6H6": cluster, "Cu500": big}
    for a in out.values():
        a.positions += rng.normal(0.0, 0.04, a.positions.shape)
    return {k: jaxcert.Structure.from_ase(a) for k, a in out.items()}


CASES = _cases()


def _edge_set(rcv, snd, shifts, n):
    keep = np.asarray(rcv) < n
    return sorted(zip(np.asarray(rcv)[keep].tolist(), np.asarray(snd)[keep].tolist(),
                      map(tuple, np.rint(np.asarray(shifts)[keep]).astype(int).tolist()), strict=True))


@pytest.mark.parametrize("name", list(CASES))
def test_host_list_equals_the_list_rebuilt_in_a_program(name):
    s = nb.with_edge_list(CASES[name], RC)
    spec = s.neighbor_list
    assert isinstance(spec, nb.EdgeListSpec) and (spec.cells is not None) == (name == "Cu500")
    rebuilt = jax.jit(nb.build_edges)(s)
    assert bool(rebuilt.ok)
    host = s.neighbor_state
    n = s.n_atoms
    assert _edge_set(rebuilt.receivers, rebuilt.senders, rebuilt.shifts, n) == \
        _edge_set(host.receivers, host.senders, host.shifts, n)
    count = int(np.sum(np.asarray(host.receivers) < n))
    assert count > 0 and count <= spec.capacity <= nb.edge_bucket(count)  # padded to the bucket, no more
    # every listed edge is within the search radius, and nothing within it is missing (brute force for small cells)
    if n <= 24:
        R, h = np.asarray(s.positions), np.asarray(s.cell)
        brute = []
        K = s.images if s.periodic else (0, 0, 0)
        for i in range(n):
            for j in range(n):
                for S in np.ndindex(*(2 * k + 1 for k in K)):
                    S = np.asarray(S) - np.asarray(K)
                    if i == j and not S.any():
                        continue
                    if np.linalg.norm(R[j] - R[i] + S @ h) < spec.cutoff:
                        brute.append((i, j, tuple(S.tolist())))
        assert sorted(brute) == _edge_set(host.receivers, host.senders, host.shifts, n)


def test_bucket_ladder_is_grow_only_and_stable():
    assert nb.edge_bucket(0) == nb.EDGE_MIN_BUCKET
    for c in (10, 352, 1000, 2868, 50000):
        b = nb.edge_bucket(c)
        need = max(c * 1.02 + 8, nb.EDGE_MIN_BUCKET)
        assert need <= b <= need * 2 ** (1 / nb.EDGE_BUCKETS_PER_OCTAVE) + 8  # padding below one rung (≈ 9 %)
        assert nb.edge_bucket(c, b) == b and nb.edge_bucket(0, b) == b  # a bucket asked for again is itself
    s = CASES["skewed Si8"]
    first = nb.with_edge_list(s, RC).neighbor_list.capacity
    again = nb.with_edge_list(s.replace(positions=s.positions * 1.0), RC).neighbor_list.capacity
    assert again == first


@pytest.mark.parametrize("name", list(CASES))
def test_edge_list_equals_rows_of_slots(name):
    """E, F, σ of the same network on the flat edge list and on rows of every candidate slot (float64)."""
    edges, rows = _model(), _model(capacity=10**6)
    assert edges.edges and not rows.edges
    s = CASES[name]
    if s.periodic:
        got, ref = edges.energy_forces_stress(s), rows.energy_forces_stress(s)
    else:
        got, ref = edges.energy_and_forces(s), rows.energy_and_forces(s)
    assert np.isfinite(float(got[0])) and abs(float(got[0])) > 1e-3
    for a, b in zip(got, ref, strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-11, atol=1e-11)
    assert isinstance(edges.prepare(s).neighbor_list, nb.EdgeListSpec)


def test_a_stale_list_is_rebuilt_inside_the_program_and_gives_the_same_answer():
    """Positions moved beyond the skin after the list was built: the energy rebuilds it (same answer as a fresh
    host list), also for a rotated copy (an isometry: same edges, the energy unchanged)."""
    m = _model()
    s = m.prepare(CASES["skewed Si8"])
    moved = s.replace(positions=s.positions + 0.3 * jnp.asarray(np.random.default_rng(1).normal(size=(8, 3))))
    E_stale = float(jax.jit(m.energy_of)(m.params, moved))
    E_fresh = float(m.energy(moved.replace(neighbor_list=None, neighbor_state=None)))
    assert abs(E_stale - E_fresh) < 1e-10
    th = 0.7
    Q = jnp.asarray([[np.cos(th), -np.sin(th), 0.0], [np.sin(th), np.cos(th), 0.0], [0.0, 0.0, 1.0]])
    rot = s.replace(positions=s.positions @ Q.T, cell=s.cell @ Q.T)
    assert abs(float(jax.jit(m.energy_of)(m.params, rot)) - float(m.energy(s))) < 1e-10


def test_overflow_moves_to_the_next_bucket_with_unchanged_energies_and_forces():
    """A list built at a dilated geometry and used at the compressed one overflows its bucket inside the
    program (NaN and ok False, never a truncated sum); the host answers with a larger bucket and the rerun
    equals the answer of a list built for the compressed geometry."""
    m = _model()
    s = CASES["skewed Si8"]
    wide = s.replace(positions=s.positions * 1.25, cell=s.cell * 1.25)
    listed = nb.with_edge_list(wide, RC)
    n_wide = int(np.sum(np.asarray(listed.neighbor_state.receivers) < s.n_atoms))
    spec = dataclasses.replace(listed.neighbor_list, capacity=nb.edge_bucket(n_wide))  # the dilated cell's bucket
    listed = listed.replace(neighbor_list=spec, neighbor_state=None)
    small = listed.replace(positions=s.positions, cell=s.cell)  # built in the program: too many edges
    ef = jax.jit(lambda t: (m.energy_and_forces_of(m.params, t), nb.update(t).neighbor_state.ok))
    (E_bad, _), ok = ef(small)
    assert not bool(ok) and np.isnan(float(E_bad))
    with pytest.warns(nb.NeighborListOverflow, match="edge slots"):
        (E, F), grown, reruns = nb.rerun_on_overflow(ef, small, "test")
    assert reruns >= 1 and grown.neighbor_list.capacity > spec.capacity
    E_ref, F_ref = m.energy_and_forces(s)
    assert abs(float(E) - float(E_ref)) < 1e-10
    np.testing.assert_allclose(np.asarray(F), np.asarray(F_ref), atol=1e-10)


def test_md_reusing_the_list_inside_the_skin_equals_rebuilding_every_step():
    m = _model()
    s = CASES["skewed Si8"]
    v = dyn.maxwell_boltzmann(jax.random.PRNGKey(0), s, 2000.0)
    reuse = dyn.velocity_verlet(m, nb.with_edge_list(s, RC, skin=0.5), v, 1.0, 40)
    every = dyn.velocity_verlet(m, nb.with_edge_list(s, RC, skin=0.0), v, 1.0, 40)
    assert int(every.neighbor_state.builds) >= 40  # skin 0: stale at every step
    assert 1 <= int(reuse.neighbor_state.builds) < 20  # rebuilt only when an atom moved more than half the skin
    assert bool(reuse.neighbor_state.ok) and bool(every.neighbor_state.ok)
    np.testing.assert_allclose(np.asarray(reuse.trajectory), np.asarray(every.trajectory), atol=1e-10)
    np.testing.assert_allclose(np.asarray(reuse.energies), np.asarray(every.energies), atol=1e-10)


def test_analytic_models_take_rows_from_a_structure_prepared_for_a_network():
    """A structure prepared by a graph network and then given to a row model (a committee, compare) is
    evaluated on rows: the same energy as the plain structure."""
    sw = jaxcert.models.get("sw")
    s = CASES["skewed Si8"]
    listed = _model().prepare(s)
    assert isinstance(listed.neighbor_list, nb.EdgeListSpec)
    assert abs(float(sw.energy(listed)) - float(sw.energy(s))) < 1e-10
    spec = dataclasses.replace(listed.neighbor_list)
    assert not isinstance(sw.prepare(listed.replace(neighbor_list=spec)).neighbor_list, nb.EdgeListSpec)


def test_edge_slots_reports_the_padding():
    m = _model()
    real, slots = nb.edge_slots(m, CASES["skewed Si8"])
    assert 0 < real <= slots <= nb.edge_bucket(int(real * ((RC + nb.EDGE_SKIN) / RC) ** 3) + 64)
    real_rows, slots_rows = nb.edge_slots(_model(capacity=10**6), CASES["skewed Si8"])
    assert real_rows == real and slots_rows > 5 * slots  # rows enumerate every image of every atom


def test_probes_that_rebuild_the_structure_run_on_the_edge_list():
    """representation builds a supercell (8× the atoms), a unimodular cell, translations and a permutation
    inside its program from the prepared substrate: the edge list follows (a bucket scaled by the atom count, a
    rebuild where stale) and the probe gives what it gives on rows of slots."""
    rep_e = jaxcert.certify(_model(), ["Si"], probes=["representation", "stress_consistency"], seed=0)
    rep_r = jaxcert.certify(_model(capacity=10**6), ["Si"], probes=["representation", "stress_consistency"], seed=0)
    for a, b in zip(rep_e.outcomes, rep_r.outcomes, strict=True):
        assert a.status == ["ok"] and b.status == ["ok"], (a.name, a.message)
        assert np.isfinite(a.defect).all()
        np.testing.assert_allclose(a.defect, b.defect, rtol=1e-6, atol=1e-9, err_msg=a.name)


def test_a_wrapped_atom_makes_the_list_stale():
    """An edge list stores image vectors: moving an atom by a lattice vector (wrapping it) keeps the physics but
    changes its edges' image vectors, so the list must count as stale (rebuilt), and the energy is unchanged."""
    m = _model()
    s = m.prepare(CASES["skewed Si8"])
    wrapped = s.replace(positions=s.positions.at[0].add(s.cell[0]))
    assert not bool(nb.is_fresh(wrapped, wrapped.neighbor_state))
    assert abs(float(jax.jit(m.energy_of)(m.params, wrapped)) - float(m.energy(s))) < 1e-10
    assert not nb._fresh_on_host(wrapped)


def test_a_one_shot_list_pays_for_no_skin_and_gives_the_same_answer():
    """The ASE calculator builds its list for the one geometry it evaluates (ONE_SHOT_SKIN): no more slots than
    the default skin's, the same energy, forces and stress."""
    from ase.build import bulk as ase_bulk

    from jaxcert.adapters.calculator import ModelCalculator

    model = _model()
    atoms = ase_bulk("Li", "bcc", a=3.51, cubic=True).repeat((3, 3, 3))  # a shell at 4.96 Å, inside r_c + skin
    atoms.rattle(0.05, seed=1)
    atoms.set_cell(atoms.cell.array * 0.83, scale_atoms=True)  # that shell at 4.1 Å: just above RC = 4 Å
    s = jaxcert.Structure.from_ase(atoms)
    loop, once = model.prepare(s), model.prepare(s, skin=nb.ONE_SHOT_SKIN)
    assert once.neighbor_list.skin == nb.ONE_SHOT_SKIN and loop.neighbor_list.skin == nb.EDGE_SKIN
    assert once.neighbor_list.capacity < loop.neighbor_list.capacity
    E0, F0, S0 = model.energy_forces_stress(loop)
    E1, F1, S1 = model.energy_forces_stress(once)
    np.testing.assert_allclose(E1, E0, rtol=1e-12)
    np.testing.assert_allclose(F1, F0, atol=1e-12)
    np.testing.assert_allclose(S1, S0, atol=1e-12)
    skins = []
    prepare = jaxcert.Model.prepare

    def spy(self, s, skin=None):  # the answers are equal with either skin, so the skin itself is checked
        skins.append(skin)
        return prepare(self, s, skin)

    atoms.calc = ModelCalculator(model)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(jaxcert.Model, "prepare", spy)
        np.testing.assert_allclose(atoms.get_potential_energy(), float(E0), rtol=1e-12)
        np.testing.assert_allclose(atoms.get_stress(voigt=False), np.asarray(S0), atol=1e-12)
    # the calculator prepares with the one-shot skin; the evaluation's own prepare (None) keeps that fresh list
    assert nb.ONE_SHOT_SKIN in skins and set(skins) <= {nb.ONE_SHOT_SKIN, None}, skins


@pytest.mark.parametrize("skin", [-0.1, float("nan"), float("inf"), "wide"])
def test_a_skin_that_is_not_a_length_is_refused_by_name(skin):
    with pytest.raises(jaxcert.core.inputs.InputError, match="skin"):
        _model().prepare(CASES["skewed Si8"], skin=skin)
    assert _model().prepare(CASES["skewed Si8"], skin=0.0).neighbor_list.skin == 0.0  # no skin is a length
