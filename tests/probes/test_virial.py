"""virial (docs/probes.md §4.12): clean LJ pass with n_steps 1200 (§8.5), curl s = 0.4 fires (§8.4), K_int, sharing."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcert
from jaxcert.models.defects import with_knobs
from jaxcert.optim import dynamics as dyn
from jaxcert.probes import VirialConfig, internal_kinetic_energy, virial
from jaxcert.probes.base import PROBES, ProbeSkip
from tests.test_dynamics import clean_lj, cluster13, curl_model

run = jax.jit(virial, static_argnames=("config",))
LJ = clean_lj()
CFG = VirialConfig.reference(n_steps=1200)  # the reference's fixed length (ASE Langevin, 1 fs)


def test_clean_lj_passes():
    """§8.5: clean LJ on cluster13, n_steps = 1200: |ρ_vir − 1| < 0.3 and score > 0.6 (measured ρ ≈ 1.00–1.03)."""
    s = cluster13()
    r = run(LJ, jax.random.key(0), config=CFG, substrate=s)
    d = r.details
    assert abs(float(d["rho_vir"]) - 1.0) < 0.3 and float(r.score) > 0.6
    assert int(d["n_samples"]) == 300 and d["rho_series"].shape == (300,)
    assert int(d["dof"]) == 33 and abs(float(d["T_int_kin"]) - 30.0) < 6.0
    assert float(d["relax_fmax_reached"]) < 1e-3
    assert int(r.n_evals) == int(d["trajectory"]["md_evals"]) > 1600
    # the clean model sits within a few of its own standard errors of 1
    se = float(d["defect_stderr"])
    assert 0 < se < 0.1 and float(d["rho_vir_stderr"]) == se and int(d["n_blocks"]) == 10
    assert abs(float(d["rho_vir"]) - 1.0) < 4 * se
    assert abs(float(d["drift_z"])) < 3  # stationary: both halves of the frames agree (core.stats.half_drift)
    assert bool(d["relax_converged"])


def test_curl_fires():
    """§8.4: NonConservative s = 0.4, n_steps = 1200 → virial < 0.5 (measured ρ_vir ≈ −24 … −32).

    s = 0.4 spins the cluster up (not stationary, so its SE is large too); a 4× weaker curl (s = 0.1, same
    compiled program) is many of its own standard errors from 1 (measured 7–13 over 8 seeds), while the clean
    run above sits within a few.
    """
    s = cluster13()
    strong = curl_model(LJ, 0.4)
    r = run(strong, jax.random.key(0), config=CFG, substrate=s)
    assert float(r.score) < 0.5
    assert abs(float(r.details["rho_vir"]) - 1.0) > 3 * float(r.details["defect_stderr"])
    weak = run(with_knobs(strong, strength=0.1), jax.random.key(0), config=CFG, substrate=s).details
    assert abs(float(weak["rho_vir"]) - 1.0) > 5 * float(weak["defect_stderr"])


def test_shared_trajectory_is_extended_and_free():
    """A shared 1100-step trajectory is continued to 1200 (100 evaluations); same ρ as a standalone run."""
    s = cluster13()
    key = jax.random.key(0)

    @jax.jit
    def shared(model, key):
        traj = dyn.langevin_trajectory(model, s, key, CFG.thermostat, 1100)
        return (virial(model, key, CFG, s, trajectory=traj),
                virial(model, key, VirialConfig.reference(), s, trajectory=traj))

    r1200, r1100 = shared(LJ, key)
    alone = run(LJ, key, config=CFG, substrate=s)
    np.testing.assert_allclose(float(r1200.details["rho_vir"]), float(alone.details["rho_vir"]), rtol=1e-9)
    assert int(r1200.n_evals) == 100 and int(r1100.n_evals) == 0
    assert bool(r1200.details["trajectory"]["reused"]) and int(r1100.details["n_samples"]) == 275


def test_internal_kinetic_energy_removes_rigid_motion(dtype):
    s = cluster13(dtype)
    R = s.positions
    com = jnp.mean(R, 0)
    omega = jnp.asarray([0.3, -0.2, 0.5], dtype)
    rigid = jnp.asarray([0.1, 0.2, -0.3], dtype) + jnp.cross(omega, R - com)
    k_int = jax.jit(internal_kinetic_energy)
    assert float(k_int(s.masses, R, rigid, s.mask)) < (1e-12 if dtype == jnp.float64 else 1e-4)
    vib = jnp.asarray(np.random.default_rng(0).normal(0.0, 0.01, R.shape), dtype)
    K = float(jnp.sum(0.5 * s.masses[:, None] * vib * vib))
    K_int = float(k_int(s.masses, R, vib + rigid, s.mask))
    assert 0.5 * K < K_int < K  # 6 of 39 dof removed


def test_skips_below_three_atoms():
    s = jaxcert.Structure.create([[0.0, 0.0, 0.0], [1.2, 0.0, 0.0]], ["Ar", "Ar"])
    with pytest.raises(ProbeSkip, match="3 atoms"):
        virial(LJ, jax.random.key(0), substrate=s)


def test_registered():
    spec = PROBES["virial"]
    assert spec.fn is virial and spec.target == 1.0 and not spec.gated and spec.substrate == "cluster"
    c = VirialConfig()
    assert (c.n_steps, c.sample_every, c.scale, c.n_blocks) == (1100, 4, 1.0, 10)
