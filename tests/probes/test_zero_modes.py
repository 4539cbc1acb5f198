"""zero_modes (docs/probes.md §4.4): clean pass (§8.5), orientation fires with the analytic residual (§8.4)."""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcert
from jaxcert.core.derivatives import FiniteDifference
from jaxcert.probes import ZeroModesConfig, rigid_basis, spectrum_analysis, zero_modes
from jaxcert.probes.base import PROBES
from tests.probes.test_conservativeness import D0_KINK, defect
from tests.test_dynamics import clean_lj, cluster13

LJ = clean_lj()
#: orientation(kinked(LJ)): one model, one compiled program, for both §8.4 rows (knobs are param leaves)
BROKEN = defect("orientation", defect("kinked", LJ, 0.0, d0=D0_KINK), 0.0)


def broken(kink=0.0, orientation=0.0):
    p = BROKEN.params
    inner = {**p["inner"], "strength": jnp.asarray(kink)}
    return BROKEN.replace(params={**p, "strength": jnp.asarray(orientation), "inner": inner})

#: translation residuals ‖H T‖/‖H‖ measured on clean LJ / cluster13: ≈ 2e-17 (f64), ≈ 2e-8 (f32)
FLOOR = {jnp.float32: 1e-6, jnp.float64: 1e-14}


def test_registered():
    spec = PROBES["zero_modes"]
    assert spec.fn is zero_modes and spec.substrate == "cluster" and spec.gated


def test_clean_lj_passes(dtype):
    r = zero_modes(LJ, None, substrate=cluster13(dtype))
    d = r.details
    # §8.5: n_negative = 0, count error = 0, n_near_zero = 6, score > 0.99, gate True
    assert int(d["n_negative_modes"]) == 0 and int(d["mode_count_error"]) == 0 and int(d["n_near_zero"]) == 6
    assert float(r.score) > 0.99 and bool(r.gate) and int(r.status) == 0
    assert int(d["expected_modes"]) == 6 and not bool(d["periodic"])
    # the relaxation is reported honestly and converged
    assert bool(d["relax_converged"]) and float(d["relax_fmax_reached"]) < 1e-3 and 0 < int(d["relax_steps"]) < 200
    # translations: round-off; rotations: bounded by the residual torque of the fmax = 1e-3 relaxation
    res = {k: float(v) for k, v in d["per_mode_residual"].items()}
    assert max(res["Tx"], res["Ty"], res["Tz"]) < FLOOR[dtype]
    assert max(res["Rx"], res["Ry"], res["Rz"]) < 1e-5
    np.testing.assert_allclose(float(r.defect), max(res.values()), rtol=1e-12)
    lam = np.asarray(d["eigenvalues"])
    assert lam.shape == (39,) and (np.diff(lam) >= 0).all() and d["eigenvalues"].dtype == dtype
    np.testing.assert_array_equal(np.asarray(d["lowest_eigenvalues"]), lam[:9])
    assert np.abs(lam[:6]).max() < 1e-4 * lam.max() and lam[6] > 1e-2 * lam.max()  # a clear gap
    assert float(d["eigenvalue_gap"]) > 0.5
    assert int(r.n_evals) == int(d["relax_steps"]) + 1 + 39


def test_orientation_fires_with_the_analytic_residual():
    """SymmetryBreaking c = 1 → zero_modes < 0.95 (§8.4): ‖H T_a‖ = 2c|n̂_a| = 2c/√3 for unit translations."""
    c = 1.0
    r = zero_modes(broken(orientation=c), None, substrate=cluster13())
    d = r.details
    assert float(r.score) < 0.95 and not bool(r.gate)
    h_norm = float(d["raw_asr_magnitude"]) / float(r.defect)
    for a in ("Tx", "Ty", "Tz"):
        np.testing.assert_allclose(float(d["per_mode_residual"][a]) * h_norm, 2 * c / np.sqrt(3), rtol=1e-9)


def test_kink_stays_clean():
    """Kinked A = 0.6 (§8.4): invariant and conservative, zero_modes > 0.85."""
    r = zero_modes(broken(kink=0.6), None, substrate=cluster13())
    assert float(r.score) > 0.85 and bool(r.gate) and int(r.details["n_near_zero"]) == 6


def test_fd_engine_agrees_at_the_same_geometry():
    s = cluster13()
    ex = zero_modes(LJ, None, substrate=s)
    relaxed = s.replace(positions=ex.details["relaxed_positions"])
    fd = zero_modes(LJ, None, ZeroModesConfig(do_relax=False, derivatives=FiniteDifference()), substrate=relaxed)
    assert int(fd.details["relax_steps"]) == 0 and bool(fd.details["relax_converged"])
    assert float(fd.details["eps"]) == 1e-3 and float(ex.details["eps"]) == 0.0
    assert int(fd.n_evals) == 1 + 6 * 13
    lam_ex, lam_fd = np.asarray(ex.details["eigenvalues"]), np.asarray(fd.details["eigenvalues"])
    np.testing.assert_allclose(lam_fd, lam_ex, rtol=1e-4, atol=1e-6 * lam_ex.max())  # O(ε²) truncation, ε = 1e-3 Å
    assert bool(fd.gate) and int(fd.details["n_near_zero"]) == 6
    # central differences of a pair potential keep the acoustic sum rule exactly: both at round-off
    for r in (ex, fd):
        assert max(float(r.details["per_mode_residual"][a]) for a in ("Tx", "Ty", "Tz")) < 1e-14


def test_rigid_basis_counts():
    line = jaxcert.Structure.create([[0, 0, 0], [1.1, 1.1, 0.0], [2.2, 2.2, 0]], ["Ar"] * 3)
    Q, valid, expected = jax.jit(rigid_basis)(line)
    assert int(expected) == 5 and int(jnp.sum(valid)) == 5  # the rotation about the (skew) axis is dependent
    q = np.asarray(Q)[:, np.asarray(valid)]
    np.testing.assert_allclose(q.T @ q, np.eye(5), atol=1e-12)
    tri = cluster13()
    Q, valid, expected = jax.jit(rigid_basis)(tri)
    assert int(expected) == 6 and bool(jnp.all(valid))
    bulk = jaxcert.Structure.create([[0, 0, 0], [1.8, 1.8, 0]], ["Cu"] * 2, cell=np.eye(3) * 3.6, pbc=True)
    Q, valid, expected = rigid_basis(bulk)
    assert Q.shape == (6, 3) and int(expected) == 3


def test_spectrum_ignores_padding():
    rng = np.random.default_rng(0)
    A = rng.normal(size=(9, 9))
    H = A @ A.T
    H[:, :3] = H[:3, :] = 0.0  # a 3-fold null space (+ no negative modes)
    Hp = np.zeros((15, 15))
    Hp[:9, :9] = H
    mask = np.array([True] * 9 + [False] * 6)
    f = jax.jit(spectrum_analysis, static_argnames=("tol_rel",))
    full = f(jnp.asarray(H), jnp.ones(9, bool), jnp.asarray(3), tol_rel=1e-2)
    pad = f(jnp.asarray(Hp), jnp.asarray(mask), jnp.asarray(3), tol_rel=1e-2)
    assert int(pad["n_near_zero"]) == int(full["n_near_zero"]) == 3 and int(pad["mode_count_error"]) == 0
    np.testing.assert_allclose(np.asarray(pad["eigenvalues"])[:9], np.asarray(full["eigenvalues"]), atol=1e-10)
    assert np.isnan(np.asarray(pad["eigenvalues"])[9:]).all()


def test_jit_vmap_over_elements_equals_loop():
    sub = pytest.importorskip("jaxcert.probes.substrates")
    model = jaxcert.models.get("lj")
    batch, symbols = sub.stacked("cluster", ["Cu", "Si"])
    keys = jax.random.split(jax.random.key(0), len(symbols))
    out = jax.jit(jax.vmap(partial(zero_modes, model)))(keys, substrate=batch)
    for k, el in enumerate(symbols):
        one = zero_modes(model, keys[k], substrate=sub.cluster(el))
        assert bool(one.gate) and float(one.score) > 0.99 and bool(one.details["relax_converged"])
        assert int(out.details["relax_steps"][k]) == int(one.details["relax_steps"])
        np.testing.assert_allclose(out.details["eigenvalues"][k], one.details["eigenvalues"],
                                   atol=1e-8 * float(jnp.max(one.details["eigenvalues"])))
        np.testing.assert_allclose(out.score[k], one.score, rtol=1e-6)
        assert int(out.details["n_near_zero"][k]) == 6


def test_argon_matches_ase_bfgs_and_its_saddle():
    """Reference-faithful on the production Ar cluster with the reference LJ (ε = 9.3 meV).

    ASE BFGS (fmax 1e-3 eV/Å, the reference setting) stops after 25 steps near the
    cuboctahedral saddle, where one soft mode is still negative (−9.46e-3 eV/Å²): the
    reference reports n₋ = 1 for its own clean control, and so do we.  Relaxing to
    ``relax_fmax=1e-4`` reaches the minimum (documented in the module).
    """
    sub = pytest.importorskip("jaxcert.probes.substrates")
    from ase.calculators.lj import LennardJones
    from ase.optimize import BFGS

    from jaxcert.models.lj import reference_parameters

    sig, eps = reference_parameters("Ar")
    atoms = sub.cluster_atoms("Ar")
    atoms.calc = LennardJones(sigma=sig, epsilon=eps, rc=3 * sig, smooth=True)
    opt = BFGS(atoms, logfile=None)
    opt.run(fmax=1e-3, steps=200)
    r = zero_modes(jaxcert.models.get("lj"), None, substrate=sub.cluster("Ar"))
    d = r.details
    assert int(d["relax_steps"]) == opt.nsteps == 25
    np.testing.assert_allclose(np.asarray(d["relaxed_positions"]), atoms.get_positions(), atol=1e-8)
    assert int(d["n_negative_modes"]) == 1 and not bool(r.gate)
    np.testing.assert_allclose(float(d["eigenvalues"][0]), -9.4574e-3, rtol=1e-3)
