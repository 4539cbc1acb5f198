"""equipartition (docs/probes.md §4.13): clean LJ pass with seed 2 (§8.5), curl s = 1.0 fires (§8.4), modes, sharing."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcert.core.derivatives import FiniteDifference
from jaxcert.optim import dynamics as dyn
from jaxcert.probes import EquipartitionConfig, align_frames, equipartition
from jaxcert.probes.base import PROBES
from tests.test_dynamics import anchored_harmonic, clean_lj, cluster13, curl_model

run = jax.jit(equipartition, static_argnames=("config",))
LJ = clean_lj()


def test_clean_lj_passes(dtype):
    """§8.5: clean LJ on cluster13, seed 2: |R_median − 1| < 0.35 and score > 0.5, and within a few of its own SE."""
    s = cluster13(dtype)
    r = run(LJ, jax.random.key(2), config=EquipartitionConfig.reference(), substrate=s)
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
    # frames were rotated onto R^eq (the LJ cluster is rotation-invariant) and R^eq is a minimum
    assert bool(d["aligned"]) and int(d["n_negative_modes"]) == 0 and float(d["rotation_deg_max"]) > 0
    se = float(d["defect_stderr"])
    assert 0 < se < 0.2 and float(d["R_median_stderr"]) == se and int(d["n_blocks"]) == 10
    assert abs(float(d["R_median"]) - 1.0) < 4 * se


def test_curl_fires():
    """§8.4: NonConservative s = 1.0 → equipartition < 0.5.

    The torque spins the cluster up (frames turn by up to 180°; unaligned, that rotation alone gave
    R_median ≈ 2000); aligned, the heated internal modes still put R_median many standard errors above 1.
    """
    s = cluster13()
    r = run(curl_model(LJ, 1.0), jax.random.key(0), substrate=s)
    assert float(r.score) < 0.5
    d = r.details
    assert bool(d["aligned"]) and float(d["rotation_deg_max"]) > 90.0
    assert float(d["R_median"]) - 1.0 > 5 * float(d["defect_stderr"])


def test_harmonic_modes_exact_and_fd_engine_agrees():
    """AnchoredHarmonic: D = (k/m) I exactly; the FD engine gives the same modes (forces are linear), 6N calls."""
    s = cluster13()
    model = anchored_harmonic(s.positions, 3.0)
    key = jax.random.key(5)
    cfg = EquipartitionConfig.reference(n_steps=200)
    fd_cfg = EquipartitionConfig.reference(n_steps=200, derivatives=FiniteDifference())

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
    # anchored: rotations are real vibrations (curvature k), so align="auto" leaves the frames alone
    assert not bool(ex.details["aligned"]) and not bool(fd.details["aligned"])
    assert float(ex.details["eps"]) == 0.0 and float(fd.details["eps"]) == 1e-3 and int(ex.details["precision"]) == 64


def test_align_frames_undoes_rigid_motions(dtype):
    """Kabsch: rotated + translated copies of a structure map back onto it, with the applied angle."""
    s = cluster13(dtype)
    ref = s.positions
    rng = np.random.default_rng(0)
    axes = rng.normal(size=(4, 3))
    axes /= np.linalg.norm(axes, axis=1, keepdims=True)
    angles = np.array([0.0, 0.3, 1.5, 3.0])
    rots = []
    for a, th in zip(axes, angles, strict=True):
        A = np.array([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]])
        rots.append(np.eye(3) + np.sin(th) * A + (1 - np.cos(th)) * A @ A)
    rots = np.array(rots)
    frames = np.einsum("tij,nj->tni", rots, np.asarray(ref)) + rng.normal(size=(4, 1, 3))
    mirror = np.asarray(ref) * np.array([-1.0, 1.0, 1.0])  # a mirror image is not a rotation
    w = np.asarray(s.masses) * np.linspace(1.0, 2.0, 13)  # unequal weights: centres are weighted
    al, ang = jax.jit(align_frames)(jnp.asarray(np.concatenate([frames, mirror[None]]), dtype), ref,
                                    jnp.asarray(w, dtype))
    tol = 1e-8 if dtype == jnp.float64 else 1e-4
    np.testing.assert_allclose(np.asarray(al[:4]), np.broadcast_to(np.asarray(ref), (4, 13, 3)), atol=tol * 10)
    np.testing.assert_allclose(np.asarray(ang[:4]), np.degrees(angles), atol=1e-4 if dtype == jnp.float64 else 0.1)
    assert float(jnp.max(jnp.abs(al[4] - ref))) > 0.1


def test_registered():
    spec = PROBES["equipartition"]
    assert spec.fn is equipartition and spec.target == 1.0 and not spec.gated and spec.substrate == "cluster"
    c = EquipartitionConfig()
    assert (c.n_steps, c.sample_every, c.tol_rel, c.scale, c.align, c.n_blocks) == (1100, 1, 1e-3, 1.0, "auto", 10)
    assert EquipartitionConfig(align="none").align == "none"
    with pytest.raises(ValueError, match="align"):
        EquipartitionConfig(align="yes")
    assert jnp.zeros(()).dtype == jnp.float64
