"""Shared checks for the universal potentials (CHGNet, SevenNet) behind the torch bridge."""

import numpy as np
from ase.build import bulk, molecule

import jaxcert
from jaxcert.core.derivatives import EXACT, FiniteDifference


def si_cell(seed=0):
    a = bulk("Si", "diamond", a=5.43)
    a.rattle(0.05, seed=seed)
    return a


def cluster():
    a = molecule("CH4")
    a.rattle(0.02, seed=1)
    return a


def check_matches_calculator(model, calc, atol_f32, atol_f64):
    """E, F (and σ for the cell) equal the package's own ASE calculator, in float32 and float64."""
    for a in (si_cell(), cluster()):
        ref = a.copy()
        ref.calc = calc
        E, F = ref.get_potential_energy(), ref.get_forces()
        for dt, tol in ((np.float32, atol_f32), (np.float64, atol_f64)):
            s = jaxcert.Structure.from_ase(a, dtype=dt)
            assert abs(float(model.energy(s)) - E) < tol * len(a), (dt, float(model.energy(s)), E)
            np.testing.assert_allclose(np.asarray(model.forces(s), float), F, atol=tol)
            if all(a.pbc):
                np.testing.assert_allclose(np.asarray(model.stress_voigt(s), float), ref.get_stress(), atol=tol)


def check_exact_second_derivatives(model):
    """Double-backward J·v is the h → 0 limit of central differences (error ∝ h², float64)."""
    s = jaxcert.Structure.from_ase(si_cell(), dtype=np.float64)
    v = np.random.default_rng(0).normal(size=s.positions.shape)
    exact = np.asarray(EXACT.force_jvp(model, s, v))
    hs = np.array([4e-3, 2e-3, 1e-3])
    errs = [np.abs(np.asarray(FiniteDifference(order=2, step_size=h).force_jvp(model, s, v)) - exact).max() for h in hs]
    slope = np.polyfit(np.log(hs), np.log(errs), 1)[0]
    assert abs(slope - 2.0) < 0.3, errs
    n = s.n_atoms
    J = np.asarray(EXACT.force_jacobian(model, s)).reshape(3 * n, 3 * n)
    assert np.abs(J - J.T).max() < 1e-10 * np.abs(J).max()  # a conservative model: symmetric to round-off


def rotation_residuals(model):
    """Relative force residual under a random rotation of the cluster, float32 and float64."""
    a = cluster()
    Q = np.linalg.qr(np.random.default_rng(3).normal(size=(3, 3)))[0]
    Q *= np.sign(np.linalg.det(Q))
    rot = a.copy()
    rot.positions = a.positions @ Q.T
    out = {}
    for dt in (np.float32, np.float64):
        F = np.asarray(model.forces(jaxcert.Structure.from_ase(a, dtype=dt)), float)
        Fr = np.asarray(model.forces(jaxcert.Structure.from_ase(rot, dtype=dt)), float)
        out[np.dtype(dt).name] = float(np.abs(Fr - F @ Q.T).max() / np.abs(F).max())
    return out


def check_graph_reuse(skin_potential, fresh_potential, cluster_symbol="Si"):
    """A reused (skin) graph gives the fresh-graph energy and gradients to round-off (float64); past skin/2 it
    rebuilds. Bulk Si and a rattled cluster (pair distances spread across the cutoffs); returns the cluster."""
    from jaxcert_bridges.backend import System
    from jaxcert_bridges.torch_bridge import TorchBackend

    skin, fresh = TorchBackend(skin_potential), TorchBackend(fresh_potential)
    stats = skin_potential.graph_stats
    rng = np.random.default_rng(4)
    cluster = jaxcert.probes.substrates.cluster_atoms(cluster_symbol)
    cluster.rattle(0.2, seed=2)
    for atoms in (si_cell(), cluster):
        s0 = System(atoms.positions, np.array(atoms.cell), atoms.numbers, tuple(bool(p) for p in atoms.pbc))
        skin.gradients([s0], np.float64)  # builds the graph with cutoffs + skin
        reused = stats["reused"]
        for step, expect_reuse in ((0.12, True), (0.4, False)):  # max displacement ≤ or > skin/2 = 0.25 Å
            d = rng.normal(size=s0.positions.shape)
            d *= step / np.linalg.norm(d, axis=1).max()
            s = System(s0.positions + d, s0.cell, s0.numbers, s0.pbc)
            E, gR, gh = skin.gradients([s], np.float64)
            E0, gR0, gh0 = fresh.gradients([s], np.float64)
            assert (stats["reused"] > reused) == expect_reuse, stats
            reused = stats["reused"]
            np.testing.assert_allclose(E, E0, rtol=1e-13)
            np.testing.assert_allclose(gR[0], gR0[0], atol=1e-11)
            np.testing.assert_allclose(gh[0], gh0[0], atol=1e-11)
    return System(cluster.positions, np.array(cluster.cell), cluster.numbers, (False,) * 3)
