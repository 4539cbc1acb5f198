"""equipartition (PROBES.md §4.13): clean LJ pass with seed 2 (§8.5), curl s = 1.0 fires (§8.4), modes, sharing."""

import jax
import jax.numpy as jnp
import numpy as np

from jaxcert import dynamics as dyn
from jaxcert.derivatives import FiniteDifference
from jaxcert.probes.base import PROBES
from jaxcert.probes.equipartition import EquipartitionConfig, equipartition
from tests.test_dynamics import anchored_harmonic, clean_lj, cluster13, curl_model

run = jax.jit(equipartition, static_argnames=("config",))
LJ = clean_lj()


def test_clean_lj_passes(dtype):
    """§8.5: clean LJ on cluster13, seed 2: |R_median − 1| < 0.35 and score > 0.5 (measured 1.08 f64, 1.02–1.11 f32)."""
    s = cluster13(dtype)
    r = run(LJ, jax.random.key(2), substrate=s)
    d = r.details
    assert abs(float(d["R_median"]) - 1.0) < 0.35 and float(r.score) > 0.5
    assert r.score.dtype == dtype and int(r.status) == 0
    # 3N − 6 = 33 vibrational modes survive tol_rel = 1e-3; the six rigid-body modes are NaN
    assert int(d["n_modes"]) == 33
    R = np.asarray(d["R_alpha"])
    assert np.isnan(R).sum() == 6 and np.all(np.asarray(d["omega2"])[~np.isnan(R)] > 0)
    p = np.asarray(d["R_percentiles_5_25_50_75_95"])
    assert np.all(np.diff(p) >= 0) and abs(p[2] - float(d["R_median"])) < 1e-6
    assert int(d["n_samples"]) == 1100
    assert int(r.n_evals) == int(d["trajectory"]["md_evals"]) + 39


def test_curl_fires():
    """§8.4: NonConservative s = 1.0 → equipartition < 0.5 (the spun-up cluster: R_median ≈ 2000)."""
    s = cluster13()
    r = run(curl_model(LJ, 1.0), jax.random.key(0), substrate=s)
    assert float(r.score) < 0.5


def test_harmonic_modes_exact_and_fd_engine_agrees():
    """AnchoredHarmonic: D = (k/m) I exactly; the FD engine gives the same modes (forces are linear), 6N calls."""
    s = cluster13()
    model = anchored_harmonic(s.positions, 3.0)
    key = jax.random.key(5)
    cfg = EquipartitionConfig(n_steps=200)
    fd_cfg = EquipartitionConfig(n_steps=200, derivatives=FiniteDifference())

    @jax.jit
    def both(model, key):
        traj = dyn.langevin_trajectory(model, s, key, cfg.thermostat, 200)
        return (equipartition(model, key, cfg, s, trajectory=traj),
                equipartition(model, key, fd_cfg, s, trajectory=traj))

    ex, fd = both(model, key)
    m = float(s.masses[0])
    np.testing.assert_allclose(np.asarray(ex.details["omega2"]), 3.0 / m, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(fd.details["omega2"]), 3.0 / m, rtol=1e-9)
    assert int(ex.details["n_modes"]) == 39
    np.testing.assert_allclose(float(fd.details["R_median"]), float(ex.details["R_median"]), rtol=1e-6)
    assert int(ex.n_evals) == 39 and int(fd.n_evals) == 78 and bool(ex.details["trajectory"]["reused"])
    assert float(ex.details["eps"]) == 0.0 and float(fd.details["eps"]) == 1e-3 and int(ex.details["precision"]) == 64


def test_registered():
    spec = PROBES["equipartition"]
    assert spec.fn is equipartition and spec.target == 1.0 and not spec.gated and spec.substrate == "cluster"
    c = EquipartitionConfig()
    assert (c.n_steps, c.sample_every, c.tol_rel, c.scale) == (1100, 1, 1e-3, 1.0)
    assert jnp.zeros(()).dtype == jnp.float64
