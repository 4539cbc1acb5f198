"""FGSM / I-FGSM / PGD update rules on Stillinger-Weber Si (docs/attacks.md §1)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from ase.build import bulk

import jaxcert
from jaxcert.attacks import attacks as A
from jaxcert.attacks import losses

EPS = (1e-4, 2e-4, 0.05)


def _grad(model, s):
    f = jax.jit(jax.grad(lambda R: model.energy_of(model.params, s.replace(positions=R))))
    return np.asarray(f(s.positions))


def test_fgsm_moves_each_coordinate_by_exactly_eps_and_raises_energy(sw_si):
    model, s = sw_si
    loss = losses.energy(model)

    @jax.jit
    @jax.vmap
    def go(eps):
        st = A.run(A.fgsm(loss, eps), s)
        return st.structure.positions, loss(st.structure), st.step

    R, E, steps = go(jnp.asarray(EPS))
    E0 = float(jax.jit(loss)(s))
    g = _grad(model, s)
    real = np.asarray(s.mask)
    assert (np.abs(g[real]) > 1e-6).all() and (g[~real] == 0).all()
    for k, eps in enumerate(EPS):
        dR = np.asarray(R[k]) - np.asarray(s.positions)
        np.testing.assert_allclose(dR[real], eps * np.sign(g[real]), rtol=1e-9, atol=0)  # ±ε, uphill direction
        assert (dR[~real] == 0).all()  # padding never moves
        assert int(steps[k]) == 1
        assert float(E[k]) > E0
    # first order: ΔE = ε ‖g‖₁ + O(ε²)
    ratio = [(float(E[k]) - E0) / (eps * np.abs(g).sum()) for k, eps in enumerate(EPS[:2])]
    assert ratio[0] == pytest.approx(1.0, abs=0.02) and abs(ratio[1] - 1) > abs(ratio[0] - 1)


def test_descend_movable_relative_and_grad_floor(sw_si):
    model, s = sw_si
    loss = losses.energy(model)
    movable = np.arange(10) < 4
    L = float(A.min_lattice_length(s.cell))

    @jax.jit
    def go():
        down = A.run(A.fgsm(loss, 0.01, descend=True), s).structure.positions
        part = A.run(A.fgsm(loss, 0.01, movable=movable), s).structure.positions
        rel = A.run(A.fgsm(loss, 0.01 / L, relative=True), s).structure.positions
        floor = A.run(A.fgsm(loss, 0.01, grad_floor=1e9), s).structure.positions
        return down, part, rel, floor

    down, part, rel, floor = (np.asarray(x) for x in go())
    R0 = np.asarray(s.positions)
    g = _grad(model, s)
    np.testing.assert_allclose(down - R0, -0.01 * np.sign(g), rtol=1e-9, atol=0)
    np.testing.assert_allclose((part - R0)[:4], 0.01 * np.sign(g[:4]), rtol=1e-9, atol=0)
    assert (part[4:] == R0[4:]).all()
    np.testing.assert_allclose(rel - R0, 0.01 * np.sign(g), rtol=1e-9, atol=1e-15)
    assert (floor == R0).all()


def test_ifgsm_and_pgd_stay_in_the_box(sw_si):
    model, s = sw_si
    loss = losses.energy(model)
    eps = 0.05
    keys = jax.vmap(jax.random.PRNGKey)(jnp.arange(3))

    @jax.jit
    def go(keys):
        it = A.run(A.ifgsm(loss, eps, n_steps=10), s)
        pg = jax.vmap(lambda k: A.run(A.pgd(loss, eps, n_steps=10), s, k))(keys)
        start = jax.vmap(lambda k: A.pgd(loss, eps).init(s, k).structure.positions)(keys)
        return it, pg, start, loss(it.structure), jax.vmap(loss)(pg.structure), loss(s)

    it, pg, start, E_it, E_pg, E0 = go(keys)
    R0 = np.asarray(s.positions)
    real = np.asarray(s.mask)
    E0 = float(E0)
    for R in [np.asarray(it.structure.positions), *np.asarray(pg.structure.positions), *np.asarray(start)]:
        d = R - R0
        assert np.abs(d).max() <= eps * (1 + 1e-12)
        assert (d[~real] == 0).all()
    # I-FGSM: each coordinate moves by (ε/n) Σ s_t, a multiple of ε/10
    d = (np.asarray(it.structure.positions) - R0)[real] / (eps / 10)
    np.testing.assert_allclose(d, np.round(d), atol=1e-6)
    assert int(it.step) == 10 and (np.asarray(pg.step) == 10).all()
    assert float(pg.alpha[0]) == pytest.approx(0.1 * eps)
    # PGD: random start fills the box (uniform), differs by seed; ascent raises the energy
    st = np.asarray(start)[:, real] - R0[real]
    assert np.abs(st).max() > 0.9 * eps and abs(st.mean()) < 0.2 * eps
    assert not np.allclose(st[0], st[1])
    assert float(E_it) > E0 and (np.asarray(E_pg) > E0).all()
    # the gradient of a rattled structure is nowhere noise
    assert float(it.small_grad_fraction) == 0.0


def test_losses_on_known_cases(sw_si):
    model, s = sw_si
    double = jaxcert.Model(lambda p, x: 2.0 * model.energy_of(model.params, x), name="2sw", cutoff=model.cutoff)
    F = np.asarray(jax.jit(lambda x: model.forces_of(model.params, x))(s))
    n = int(np.asarray(s.mask).sum())
    fn = losses.force_norm(model)

    @jax.jit
    def go():
        vals = (fn(s), losses.deviation(model, double)(s), losses.deviation(model, double, "energy")(s),
                losses.committee_variance([model, double])(s), losses.committee_variance([model, model])(s),
                losses.targeted_energy(model, 0.0)(s), model.energy_of(model.params, s))
        st = A.run(A.ifgsm(fn, 0.02, n_steps=5), s)
        return vals, fn(st.structure)

    (fnorm, dev_f, dev_e, var2, var_same, targ, E), fn_adv = go()
    half_f2 = 0.5 * (F**2).sum()
    assert float(fnorm) == pytest.approx(half_f2, rel=1e-12)
    assert float(dev_f) == pytest.approx(half_f2, rel=1e-12)  # F(2E) - F(E) = F
    assert float(dev_e) == pytest.approx(0.5 * float(E) ** 2, rel=1e-12)
    assert float(var2) == pytest.approx((F**2).sum() / 4 / n, rel=1e-12)  # Var{F, 2F} = F²/4
    assert float(var_same) == 0.0
    assert float(targ) == pytest.approx(-float(E) ** 2, rel=1e-12)
    assert float(fn_adv) > float(fnorm)  # ascending ½‖F‖² raises the force norm
    with pytest.raises(ValueError, match="at least 2"):
        losses.committee_variance([model])


def test_stationary_start_and_the_random_sign_start():
    """Ideal diamond Si: g(R₀) = 0 by symmetry, so small_grad_fraction = 1 and plain FGSM has no direction; R+FGSM
    (docs/attacks.md §6) first steps ±ε/2 at random, then ε/2 along sign g, so every coordinate moves by 0 or ±ε,
    the pattern set by the key.  (float32, where round-off leaves |g| ~ 1e-5 eV/Å, is covered by the CLI
    determinism test in test_cli.py.)"""
    dtype = jnp.float64
    model = jaxcert.models.get("sw")
    s = model.prepare(jaxcert.Structure.from_ase(bulk("Si", cubic=True), dtype=dtype))
    loss = losses.energy(model)
    eps = 0.05
    keys = jax.vmap(jax.random.PRNGKey)(jnp.arange(3))

    @jax.jit
    def go(keys):
        plain = A.run(A.fgsm(loss, eps), s)
        rs = jax.vmap(lambda k: A.run(A.fgsm(loss, eps, random_start=True), s, k))(keys)
        it = A.run(A.ifgsm(loss, eps, n_steps=4, random_start=True), s, keys[0])
        return plain, rs, it

    plain, rs, it = go(keys)
    R0 = np.asarray(s.positions, np.float64)
    tol = A.grad_tolerance(dtype)
    assert float(plain.small_grad_fraction) == 1.0 and float(plain.grad_max) < tol == A.SMALL_GRAD
    assert A.grad_tolerance(jnp.float32) == A.SMALL_GRAD_F32
    assert (np.asarray(plain.structure.positions) == np.asarray(s.positions)).all()  # sign(0) = 0: nothing moves
    d = (np.asarray(rs.structure.positions, np.float64) - R0) / eps
    np.testing.assert_allclose(d, np.round(d), atol=1e-9)  # every coordinate moved by -ε, 0 or +ε
    assert set(np.round(d).ravel().tolist()) == {-1.0, 0.0, 1.0}
    assert not np.array_equal(d[0], d[1]) and not np.array_equal(d[1], d[2])  # the key sets the pattern
    assert (np.asarray(rs.step) == 1).all() and float(rs.alpha[0]) == pytest.approx(eps / 2, rel=1e-6)
    again = jax.jit(lambda k: A.run(A.fgsm(loss, eps, random_start=True), s, k).structure.positions)(keys[1])
    np.testing.assert_array_equal(np.asarray(again), np.asarray(rs.structure.positions[1]))  # reproducible
    di = (np.asarray(it.structure.positions, np.float64) - R0) / (eps / 8)  # ±4·(ε/8), then 4 steps of ε/8
    np.testing.assert_allclose(di, np.round(di), atol=1e-9)
    assert np.abs(di).max() <= 8 + 1e-9 and np.abs(di).max() > 0


@pytest.mark.parametrize("name, n, random_start", [("fgsm", 1, False), ("fgsm", 1, True), ("ifgsm", 4, False),
                                                   ("ifgsm", 4, True), ("pgd", 4, None)])
def test_constructors_and_pipeline_spec_share_one_rule(sw_si, name, n, random_start):
    """fgsm/ifgsm/pgd and the pipeline's AttackSpec read one SignRule: same α, projection and start, same steps."""
    from jaxcert.attacks.pipeline import AttackSpec, _spec_arrays

    model, s = sw_si
    loss = losses.energy(model)
    eps, key = 0.02, jax.random.PRNGKey(7)
    spec = AttackSpec(name, n, random_start=random_start)
    make = {"fgsm": lambda: A.fgsm(loss, eps, random_start=bool(random_start)),
            "ifgsm": lambda: A.ifgsm(loss, eps, n, random_start=bool(random_start)),
            "pgd": lambda: A.pgd(loss, eps, n)}[name]
    direct = A.run(make(), s, key)
    steps, ratio, rs, proj, sign = (x[0] for x in _spec_arrays([spec]))
    assert spec.rule == A.sign_rule_of(name, n, random_start=bool(random_start))
    piped = A.run(A.sign_attack(loss, eps, eps * ratio, int(steps), random_start=bool(rs), sign_start=float(sign),
                                project=bool(proj)), s, key)
    assert float(direct.alpha) == float(piped.alpha) and bool(direct.project) == bool(piped.project)
    np.testing.assert_array_equal(np.asarray(direct.structure.positions), np.asarray(piped.structure.positions))
