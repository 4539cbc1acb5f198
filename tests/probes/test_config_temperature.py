"""config_temperature (docs/probes.md §4.11): AnchoredHarmonic clean pass (§8.5), curl fires (§8.4), sharing."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcert.optim import dynamics as dyn
from jaxcert.probes import ConfigTemperatureConfig, config_temperature, kinetic_dof
from jaxcert.probes.base import PROBES
from tests.test_dynamics import anchored_harmonic, clean_lj, cluster13, curl_model

run = jax.jit(config_temperature, static_argnames=("config",))
REF = ConfigTemperatureConfig.reference()  # the reference's fixed length (ASE Langevin, 1 fs, 1100 steps)


@functools.cache
def _anchored(dtype):
    """(cluster13, AnchoredHarmonic k = 3 on it), one model object per dtype so ``run`` compiles once."""
    s = cluster13(dtype)
    return s, anchored_harmonic(s.positions, 3.0)


def test_anchored_harmonic_passes(dtype):
    """§8.5: AnchoredHarmonic(k = 3) on cluster13, seed 1: |ratio − 1| < 0.25 and score > 0.6.

    Under FixCom the COM mode (Hessian k, 3 of the 3N trace) is frozen, so the expected ratio is
    (3N − 3)/3N = 0.923 with T_kin over 3N − 3 (measured 0.909 in float64 and 0.890 in float32).
    """
    s, model = _anchored(dtype)
    r = run(model, jax.random.key(1), config=REF, substrate=s)
    d = r.details
    assert abs(float(d["ratio"]) - 1.0) < 0.25 and float(r.score) > 0.6
    assert bool(r.gate) and int(r.status) == 0 and r.score.dtype == dtype
    # Tr H = 3N k exactly for every Rademacher vector: the Hutchinson estimate has no variance here
    np.testing.assert_allclose(float(d["mean_TrH"]), 3 * 13 * 3.0, rtol=1e-5)
    assert abs(float(d["T_kin"]) - 30.0) < 4.5
    assert int(d["n_samples"]) == 110 and d["ratio_series"].shape == (110,)
    assert np.all(np.isfinite(np.asarray(d["ratio_series"])))
    assert np.all(np.asarray(d["ratio_series"]) > 0)
    assert int(d["n_dof"]) == 36 and not bool(d["trajectory"]["reused"])
    # the known answer 36/39 lies within a few of the probe's own standard errors; SE = SE of the defect
    se = float(d["defect_stderr"])
    assert 0 < se < 0.2 and int(d["n_blocks"]) == 10 and float(d["ratio_stderr"]) == se
    assert abs(float(d["ratio"]) - 36 / 39) < 4 * se
    assert float(d["T_kin_stderr"]) > 0 and float(d["T_config_stderr"]) > 0
    # relaxation (already at the anchors: 1 call) + 1 + 400 warm-up + 1100 stored + 110 × 4 jvps
    assert int(r.n_evals) == 1 + 1 + 400 + 1100 + 440


def test_curl_fires():
    """§8.4: NonConservative s = 1.0 → config_temperature < 0.5 (the torque spins the cluster up: T_kin ≈ 320 K)."""
    s = cluster13()
    r = run(curl_model(clean_lj(), 1.0), jax.random.key(0), substrate=s)
    assert float(r.score) < 0.5
    assert float(r.details["T_kin"]) > 100.0
    assert abs(float(r.details["ratio"]) - 1.0) > 10 * float(r.details["defect_stderr"])


def test_stderr_matches_the_spread_over_seeds():
    """16 independent default runs of the AnchoredHarmonic (exact answer ρ = 36/39): the jackknife SE is the
    seed-to-seed scatter of ρ, and ρ sits within its SE of the answer (rms z ≈ 1, not ≫ 1 nor ≪ 1)."""
    s, model = _anchored(jnp.float64)  # the program compiled for test_anchored_harmonic_passes
    rs = [run(model, jax.random.key(200 + i), config=REF, substrate=s).details for i in range(16)]
    rho = np.array([float(d["ratio"]) for d in rs])
    se = np.array([float(d["defect_stderr"]) for d in rs])
    z = (rho - 36 / 39) / se
    # with 16 seeds the scatter itself is known to ±18 % (measured 0.6–1.1 over five sets of 16 seeds); the
    # bounds leave room for that and the ~10 % block bias, and still catch an SE off by a factor of 2 or √B
    assert 0.5 < np.std(rho, ddof=1) / np.sqrt(np.mean(se**2)) < 2.0
    assert 0.5 < np.sqrt(np.mean(z**2)) < 2.0
    assert abs(np.mean(rho) - 36 / 39) < 3 * np.sqrt(np.mean(se**2)) / 4


def test_shared_trajectory_equals_standalone():
    """A suite passes one trajectory (same key) to the three probes: identical result, MD not charged."""
    s = cluster13()
    model = anchored_harmonic(s.positions, 3.0)
    key = jax.random.key(1)
    cfg = ConfigTemperatureConfig.reference(n_steps=300)
    alone = run(model, key, config=cfg, substrate=s)

    @jax.jit
    def shared(model, key):
        traj = dyn.langevin_trajectory(model, s, key, cfg.thermostat, 300)
        return config_temperature(model, key, cfg, s, trajectory=traj)

    r = shared(model, key)
    np.testing.assert_allclose(float(r.details["ratio"]), float(alone.details["ratio"]), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(r.details["ratio_series"]), np.asarray(alone.details["ratio_series"]),
                               rtol=1e-12)
    assert bool(r.details["trajectory"]["reused"])
    assert int(r.n_evals) == 30 * 4 and int(alone.n_evals) == 1 + 1 + 400 + 300 + 30 * 4


def test_kinetic_dof_conventions():
    fix = dyn.LangevinConfig()
    assert int(kinetic_dof(13, fix)) == 36  # FixCom removes 3 (pescert newest)
    assert int(kinetic_dof(13, fix, "3N")) == 39  # the paper
    assert int(kinetic_dof(13, dyn.LangevinConfig(com="none"))) == 39
    with pytest.raises(ValueError, match="kinetic_dof"):
        kinetic_dof(13, fix, "3N-6")


def test_registered():
    spec = PROBES["config_temperature"]
    assert spec.fn is config_temperature and spec.target == 1.0 and not spec.gated and spec.substrate == "cluster"
    c = ConfigTemperatureConfig()
    assert (c.n_steps, c.sample_every, c.n_hutchinson, c.scale, c.n_blocks) == (1100, 10, 4, 1.0, 10)
    t = ConfigTemperatureConfig.reference().thermostat
    assert (t.temperature_k, t.timestep_fs, t.friction_per_fs, t.warmup_steps, t.relax_fmax) == (30.0, 1.0, 0.05,
                                                                                                 400, 1e-3)
    assert jnp.zeros(()).dtype == jnp.float64  # conftest enables x64
