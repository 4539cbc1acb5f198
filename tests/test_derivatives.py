"""Exact derivatives vs finite differences: agreement, fitted convergence order, dtype floors."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcert
from jaxcert.core.derivatives import EXACT, FiniteDifference, fd_step

from ._cases import crystal


@pytest.fixture(scope="module")
def lj():
    return jaxcert.models.get("lj")


@pytest.fixture(scope="module")
def s64(lj):
    return lj.prepare(crystal("lj"))


def _order(errors, steps):
    slope, _ = np.polyfit(np.log(steps), np.log(errors), 1)
    return slope


def test_fd_step_rule():
    assert fd_step(1, 2, jnp.float64) == 1e-3
    assert fd_step(2, 2, jnp.float64) == 1e-3
    assert fd_step(1, 2, jnp.float32) == pytest.approx(1.0603e-2, rel=1e-4)
    assert fd_step(2, 2, jnp.float32) == pytest.approx(3.3043e-2, rel=1e-4)
    assert fd_step(1, 4, jnp.float64) == pytest.approx(1.17297e-3, rel=1e-4)
    assert fd_step(1, 4, jnp.float32) > fd_step(1, 2, jnp.float32)


@pytest.mark.parametrize("fd_order, steps, expected", [(2, [8e-3, 4e-3, 2e-3], 2.0), (4, [4e-2, 2e-2, 1e-2], 4.0)])
def test_force_jvp_convergence_order(lj, s64, fd_order, steps, expected):
    v = jnp.asarray(np.random.default_rng(0).normal(size=s64.positions.shape))
    exact = EXACT.force_jvp(lj, s64, v)
    fd = [FiniteDifference(order=fd_order, step_size=h) for h in steps]
    errs = [float(jnp.abs(e.force_jvp(lj, s64, v) - exact).max()) for e in fd]
    assert _order(errs, steps) == pytest.approx(expected, abs=0.3)


def test_strain_derivative_convergence_order(lj, s64):
    exact = EXACT.stress_strain(lj, s64)
    steps = [8e-3, 4e-3, 2e-3]
    errs = [float(jnp.abs(FiniteDifference(step_size=h).stress_strain(lj, s64) - exact).max()) for h in steps]
    assert _order(errs, steps) == pytest.approx(2.0, abs=0.3)


def test_every_method_agrees_with_finite_differences(lj, s64):
    fd = FiniteDifference(order=4, step_size=2e-3)
    v = jnp.asarray(np.random.default_rng(1).normal(size=s64.positions.shape))
    methods = [
        ("force_jvp", True, 1e-7),
        ("hvp", True, 1e-7),
        ("force_jacobian", False, 1e-7),
        ("hessian", False, 1e-7),
        ("stress_position", False, 1e-7),
        ("force_strain", False, 1e-7),
        ("stress_strain", False, 1e-8),
        ("energy_strain", False, 1e-9),
    ]

    @jax.jit  # the sixteen engine programs compiled as one
    def both(s, v):
        return [(getattr(EXACT, n)(lj, s, *((v,) if vec else ())), getattr(fd, n)(lj, s, *((v,) if vec else ())))
                for n, vec, _ in methods]

    for (name, _, tol), (a, b) in zip(methods, both(s64, v), strict=True):
        assert a.shape == b.shape, name
        assert float(jnp.abs(a - b).max()) < tol, name


def test_hessian_symmetric_and_jacobian_is_jvp(lj, s64):
    J = EXACT.force_jacobian(lj, s64)
    n = s64.n_atoms
    Jm = J.reshape(3 * n, 3 * n)
    assert float(jnp.abs(Jm - Jm.T).max()) < 1e-11 * float(jnp.abs(Jm).max())
    v = jnp.asarray(np.random.default_rng(2).normal(size=(n, 3)))
    np.testing.assert_allclose(EXACT.force_jvp(lj, s64, v).reshape(-1), Jm @ v.reshape(-1), atol=1e-11)


def test_mixed_blocks_are_consistent_with_energy(lj, s64):
    """V ∂σ_m/∂R_j and ∂F_j/∂γ_m are both second derivatives of E(R, γ) (up to the
    prestress/force term): for a conservative model ∂²E/∂R∂γ computed two ways agrees."""
    zero = jnp.zeros(6, s64.dtype)

    def e(R, g):
        from jaxcert.core.derivatives import _strained

        return lj.energy_of(lj.params, _strained(s64.replace(positions=R), g))

    mixed = jax.jit(jax.jacfwd(jax.grad(e, argnums=1), argnums=0))(s64.positions, zero)  # (6, n, 3) = ∂²E/∂γ∂R
    # ∂(Vσ_m)/∂R at fixed cell equals ∂²E/∂R∂γ_m (V fixed when R moves)
    np.testing.assert_allclose(EXACT.stress_position(lj, s64), mixed, atol=1e-10)


def test_hutchinson_is_unbiased_for_the_trace(lj, s64):
    H = EXACT.hessian(lj, s64)
    n = s64.n_atoms
    tr = float(jnp.trace(H.reshape(3 * n, 3 * n)))
    est = float(EXACT.hutchinson_trace(lj, s64, jax.random.key(0), n_samples=2000))
    assert est == pytest.approx(tr, rel=0.05)
    # a single Rademacher vector gives exactly zᵀHz
    z = jax.random.rademacher(jax.random.split(jax.random.key(3), 1)[0], (1, n, 3), dtype=s64.dtype)
    one = float(EXACT.hutchinson_trace(lj, s64, jax.random.key(3), n_samples=1))
    del z
    assert np.isfinite(one)


def test_bond_scan_exact_matches_fd(lj):
    from ._cases import cluster

    s = cluster("lj")
    offs = jnp.linspace(-0.15, 0.15, 7)
    E, g, p = EXACT.bond_scan(lj, s, 0, 1, offs)
    E2, g2, p2 = FiniteDifference(order=4, step_size=1e-3).bond_scan(lj, s, 0, 1, offs)
    np.testing.assert_allclose(E, E2, atol=1e-13)
    np.testing.assert_allclose(g, g2, atol=1e-9)
    # conservative model: −dE/ds equals the projected force output at round-off
    np.testing.assert_allclose(g, p, atol=1e-11)


def test_direct_force_head_is_differentiated_as_it_is(lj, s64):
    """A force head that is not −∇E: the Jacobian is of the head, so its antisymmetric part shows."""
    axis = jnp.array([0.0, 0.0, 1.0])

    def curl_forces(params, s):
        c = s.positions.mean(0)
        return lj.forces_of(params, s) + 0.3 * jnp.cross(axis, s.positions - c)

    m = lj.replace(forces_fn=curl_forces, name="curl")
    J = EXACT.force_jacobian(m, s64).reshape(24, 24)
    anti = float(jnp.linalg.norm(J - J.T) / jnp.linalg.norm(J))
    assert anti > 1e-2
    Jc = EXACT.force_jacobian(lj, s64).reshape(24, 24)
    assert float(jnp.linalg.norm(Jc - Jc.T) / jnp.linalg.norm(Jc)) < 1e-13


@pytest.mark.parametrize("dt, floor", [(jnp.float64, 1e-12), (jnp.float32, 1e-4)])
def test_dtype_follows_input_and_floor(lj, dt, floor):
    s = lj.prepare(crystal("lj", dtype=dt))
    J = EXACT.force_jacobian(lj, s)
    assert J.dtype == dt
    Jm = J.reshape(24, 24)
    asym = float(jnp.abs(Jm - Jm.T).max() / jnp.abs(Jm).max())
    assert asym < floor
