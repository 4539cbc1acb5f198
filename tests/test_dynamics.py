"""Integrators and the shared trajectory (jaxcert.optim.dynamics): ASE agreement, reversibility, statistics, FixCom.

Also hosts the docs/probes.md §8 fixtures used by the stat-mech probe tests (cluster13,
AnchoredHarmonic, clean LJ, curl wrapper).
"""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from ase.cluster import Icosahedron

import jaxcert
from jaxcert.core.units import FS, KB_EV_PER_K
from jaxcert.models.defects import curl
from jaxcert.models.lj import lennard_jones
from jaxcert.optim import dynamics as dyn


# ----------------------------------------------------------------------------- fixtures (docs/probes.md §8)
def cluster13_atoms():
    """§8.3 cluster13: Icosahedron("Ar", 2) rescaled so the closest pair is 2^{1/6}, 8 Å vacuum, no rattle."""
    a = Icosahedron("Ar", noshells=2)
    d = a.get_all_distances()
    a.positions *= 2.12 / d[d > 0].min()
    a.center(vacuum=8.0)
    a.pbc = False
    d = a.get_all_distances()
    f = 2 ** (1 / 6) / d[d > 0].min()
    a.set_cell(a.cell * f, scale_atoms=True)
    return a


def cluster13(dtype=jnp.float64):
    return jaxcert.Structure.from_ase(cluster13_atoms(), dtype=dtype)


def clean_lj():
    """§8.1 clean_lj(rc=8): σ = ε = 1, non-smooth (shifted) cutoff."""
    return lennard_jones(sigma=1.0, epsilon=1.0, rc=8.0, smooth=False, name="clean_lj")


def anchored_harmonic(anchors, k=3.0):
    """§8.1 AnchoredHarmonic: E = ½k Σ|R − a|² (eV, k in eV/Å²), Hessian exactly k·I."""

    def energy(params, s):
        kk, a = params
        w = s.mask[:, None].astype(s.positions.dtype)
        return 0.5 * kk.astype(s.positions.dtype) * jnp.sum(w * (s.positions - a.astype(s.positions.dtype)) ** 2)

    return jaxcert.Model(energy, params=(jnp.asarray(k), jnp.asarray(anchors)), name=f"anchored_harmonic(k={k})")


def curl_model(model, strength):
    """§8.2 NonConservative: F += s ẑ × (R − R̄) (jaxcert.models.defects.curl)."""
    return curl(model, strength)


def with_strength(model, strength):
    """The curl model with another strength leaf (same static functions: no recompilation)."""
    return model.replace(params={**model.params, "strength": jnp.asarray(strength)})


def ase_lj():
    from ase.calculators.lj import LennardJones

    return LennardJones(sigma=1.0, epsilon=1.0, rc=8.0, smooth=False)


def rattled(seed=0, sigma=0.02):
    a = cluster13_atoms()
    a.positions += np.random.default_rng(seed).normal(0.0, sigma, (13, 3))
    return a


# ----------------------------------------------------------------------------- Maxwell–Boltzmann
def test_maxwell_boltzmann_zero_momentum_and_temperature():
    n = 2000
    s = jaxcert.Structure.create(np.random.default_rng(0).uniform(0, 60, (n, 3)), ["Ar"] * n, min_distance=None)
    v = jax.jit(dyn.maxwell_boltzmann)(jax.random.key(3), s, 30.0)
    p = s.masses[:, None] * v
    assert float(jnp.max(jnp.abs(jnp.sum(p, 0)))) < 1e-12
    T = 2 * dyn.kinetic_energy(s.masses, v) / ((3 * n - 3) * KB_EV_PER_K)
    assert abs(float(T) - 30.0) < 30.0 * 4 * np.sqrt(2 / (3 * n))  # 4σ of a chi² with 3n dof


def test_maxwell_boltzmann_padding_is_inert():
    s = jaxcert.stack([cluster13(), jaxcert.Structure.from_ase(cluster13_atoms()[:10])])
    v = jax.jit(jax.vmap(lambda k, t: dyn.maxwell_boltzmann(k, t, 30.0)))(jax.random.split(jax.random.key(0), 2), s)
    assert float(jnp.max(jnp.abs(v[1, 10:]))) == 0.0
    p = s.masses[1, :, None] * v[1]
    assert float(jnp.max(jnp.abs(jnp.sum(p, 0)))) < 1e-12


# ----------------------------------------------------------------------------- velocity Verlet
def test_velocity_verlet_matches_ase():
    from ase.md.verlet import VelocityVerlet

    at = rattled()
    s = jaxcert.Structure.from_ase(at)
    v = dyn.maxwell_boltzmann(jax.random.key(0), s, 30.0)
    at.calc = ase_lj()
    at.set_velocities(np.asarray(v))
    VelocityVerlet(at, timestep=1.0 * FS).run(40)
    r = dyn.velocity_verlet(clean_lj(), s, v, 1.0, 40)
    np.testing.assert_allclose(np.asarray(r.positions), at.positions, atol=1e-11)
    np.testing.assert_allclose(np.asarray(r.velocities), at.get_velocities(), atol=1e-11)
    assert abs(float(r.energies[-1]) - at.get_total_energy()) < 1e-10


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64], ids=["f32", "f64"])
def test_velocity_verlet_time_reversible_and_conserving(dtype):
    """Forward n, v ← −v, back n: the round trip returns to R(0) up to round-off; energy error is O(dt²)."""
    model = clean_lj()
    s = jaxcert.Structure.from_ase(rattled(), dtype=dtype)
    v0 = dyn.maxwell_boltzmann(jax.random.key(1), s, 30.0)

    @jax.jit
    def round_trip(dt_fs):
        fwd = dyn.velocity_verlet(model, s, v0, dt_fs, 100)
        back = dyn.velocity_verlet(model, s.replace(positions=fwd.positions), -fwd.velocities, dt_fs, 100)
        rms = jnp.sqrt(jnp.mean(jnp.sum((back.positions - s.positions) ** 2, -1)))
        moved = jnp.sqrt(jnp.mean(jnp.sum((fwd.positions - s.positions) ** 2, -1)))
        return rms, fwd.energies, moved

    rms, E, moved = round_trip(1.0)  # the forward run of the round trip (was a second, eager run)
    moved = float(moved)
    assert moved > 0.01  # the atoms did move (≈ 0.05 Å), so the round trip is not trivial
    assert float(rms) < (1e-13 if dtype == jnp.float64 else 3e-5)
    # the unrelaxed start breathes hard (E_pot − E_min ≈ 0.7 eV): the shadow-Hamiltonian error is ≈ 0.025 eV
    err1 = float(jnp.max(jnp.abs(E - E[0])))
    assert err1 < 1e-3 * abs(float(E[0]))
    _, E_half, _ = round_trip(0.5)
    err_half = float(jnp.max(jnp.abs(E_half - E_half[0])))
    assert 3.5 < err1 / err_half < 4.5  # second order: halving dt quarters the energy error (measured 3.97, 4.00)


# ----------------------------------------------------------------------------- Langevin vs ASE
class _FedRng:
    """Stands in for ASE Langevin's numpy generator and feeds it jaxcert's draws (ξ then η per step)."""

    def __init__(self, arrays):
        self.arrays = list(arrays)

    def standard_normal(self, size):
        out = self.arrays.pop(0)
        assert out.shape == tuple(size)
        return out


@pytest.mark.parametrize("com", ["fixcom", "langevin_fixcm", "none"])
def test_langevin_step_matches_ase(com):
    from ase.constraints import FixCom
    from ase.md.langevin import Langevin

    n_steps = 25
    at = rattled(1)
    s = jaxcert.Structure.from_ase(at)
    model = clean_lj()
    cfg = dyn.LangevinConfig(com=com)
    v0 = dyn.maxwell_boltzmann(jax.random.key(2), s, 30.0)
    keys = [jax.random.fold_in(jax.random.key(9), i) for i in range(n_steps)]
    noise = []
    for k in keys:
        xi, eta = jax.random.normal(k, (2, 13, 3), jnp.float64)
        noise += [np.asarray(xi), np.asarray(eta)]

    at.calc = ase_lj()
    if com == "fixcom":
        at.set_constraint(FixCom())
    at.set_velocities(np.asarray(v0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ASE deprecates fixcm=True
        Langevin(at, timestep=1.0 * FS, temperature_K=30.0, friction=0.05 / FS, fixcm=(com == "langevin_fixcm"),
                 rng=_FedRng(noise)).run(n_steps)

    force_fn = dyn._forces_fn(model, s)
    raw, _ = force_fn(s.positions, s.neighbor_state)
    F = dyn._fixcom_forces(s, raw) if com == "fixcom" else raw
    st = dyn._LState(s.positions, v0, F, raw)
    step = jax.jit(lambda st, k: dyn.langevin_step(s, force_fn, cfg, st, k))
    for k in keys:
        st = step(st, k)
    np.testing.assert_allclose(np.asarray(st.positions), at.positions, atol=1e-11)
    np.testing.assert_allclose(np.asarray(st.velocities), at.get_velocities(), atol=1e-11)


# ----------------------------------------------------------------------------- statistics and FixCom
@pytest.fixture(scope="module")
def harmonic_run():
    """Four independent Langevin runs on AnchoredHarmonic(k=3) started 0.2 Å off the anchors (net force ≠ 0)."""
    a = cluster13()
    shift = jnp.asarray([0.2, -0.1, 0.15])
    s = a.replace(positions=a.positions + shift)
    model = anchored_harmonic(a.positions, 3.0)
    cfg = dyn.LangevinConfig(relax=False)
    run = jax.jit(jax.vmap(lambda k: dyn.langevin_trajectory(model, s, k, cfg, 1100)))
    return s, a, shift, run(jax.random.split(jax.random.key(11), 4))


def test_langevin_harmonic_reaches_target_temperature(harmonic_run):
    s, a, shift, traj = harmonic_run
    n = 13
    T_kin = dyn.kinetic_temperature(s.masses, traj.velocities, 3 * n - 3)
    # 4 runs × 1100 steps, velocity correlation time 1/γ = 20 fs: ≈ 220 independent frames × 36 dof → σ ≈ 1.6 %
    assert abs(float(jnp.mean(T_kin)) - 30.0) < 0.06 * 30.0
    # configurational side: with the COM held at a + shift, ½k⟨|R − a − shift|²⟩ = (3N − 3)/2 · k_BT
    U = 0.5 * 3.0 * jnp.sum((traj.positions - a.positions - shift) ** 2, axis=(-2, -1))
    T_pot = 2 * jnp.mean(U) / ((3 * n - 3) * KB_EV_PER_K)
    assert abs(float(T_pot) - 30.0) < 0.08 * 30.0
    assert traj.positions.shape == (4, 1100, 13, 3)
    np.testing.assert_array_equal(np.asarray(traj.steps[0]), np.arange(401, 1501))


def test_fixcom_keeps_com_fixed(harmonic_run):
    s, _, _, traj = harmonic_run
    m = s.masses[:, None]
    com = jnp.sum(m * traj.positions, axis=-2) / jnp.sum(m)
    com0 = jnp.sum(m * s.positions, axis=0) / jnp.sum(m)
    assert float(jnp.max(jnp.abs(com - com0))) < 1e-11
    assert float(jnp.max(jnp.abs(jnp.sum(m * traj.velocities, axis=-2)))) < 1e-11
    # the raw model forces (stored unadjusted) pull the COM hard: the constraint is doing work
    net = jnp.linalg.norm(jnp.sum(traj.forces, axis=-2), axis=-1)
    assert float(jnp.min(net)) > 5.0


def test_extend_equals_one_long_run():
    a = cluster13()
    model = anchored_harmonic(a.positions, 3.0)
    cfg = dyn.LangevinConfig(relax=False, warmup_steps=7)
    key = jax.random.key(4)
    short = dyn.langevin_trajectory(model, a, key, cfg, 20)
    longer = dyn.langevin_trajectory(model, a, key, cfg, 30)
    ext = dyn.extend(model, short, 30)
    np.testing.assert_allclose(np.asarray(ext.positions), np.asarray(longer.positions), rtol=0, atol=1e-13)
    np.testing.assert_allclose(np.asarray(ext.velocities), np.asarray(longer.velocities), rtol=0, atol=1e-13)
    np.testing.assert_array_equal(np.asarray(ext.steps), np.arange(8, 38))
    assert int(ext.n_evals) == int(longer.n_evals) == 1 + 7 + 30
    assert dyn.extend(model, short, 10) is short
    with pytest.raises(ValueError, match="extend"):
        dyn.frames(short, 1, 25)
    with pytest.raises(ValueError, match="thermostat"):
        dyn.check_thermostat(short, dyn.LangevinConfig())


def test_frame_indices_follow_the_reference_counts():
    idx = dyn.frame_indices(400, 1100, 10)
    assert len(idx) == 110 and idx[0] + 401 == 410 and idx[-1] + 401 == 1500
    assert len(dyn.frame_indices(400, 1100, 4)) == 275
    assert len(dyn.frame_indices(400, 1200, 4)) == 300
    assert len(dyn.frame_indices(400, 1100, 1)) == 1100


def test_langevin_config_validates():
    with pytest.raises(ValueError, match="com"):
        dyn.LangevinConfig(com="bogus")
