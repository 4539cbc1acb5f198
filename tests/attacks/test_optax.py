"""The attack step as an optax chain (docs/attacks.md §1.10): FGSM / I-FGSM / PGD unchanged against an independent
re-implementation of the pre-optax update rule, an Adam-driven attack in the box, and the box test catching a
broken projection."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from ase.build import bulk

import jaxcert
from jaxcert.attacks import attacks as A
from jaxcert.attacks import losses

EPS = 0.05


@pytest.fixture(scope="module")
def lj_ar():
    model = jaxcert.models.get("lj")
    a = bulk("Ar", "fcc", a=5.26, cubic=True)
    a.rattle(0.05, seed=3)
    return model, model.prepare(jaxcert.Structure.from_ase(a, dtype=jnp.float64))


def _reference(loss, s, eps, alpha, n, *, key=None, uniform=False, sign_start=0.0, project=True, movable=None,
               sgn=1.0):
    """The pre-optax rule, written out: start R⁽⁰⁾ = R₀ + clip(U), then R ← Π_ε(R + α sign g) n times, g := 0 on
    padding / fixed atoms, Π_ε(X) = R₀ + clip(X − R₀, −ε, ε).  The n steps are a ``fori_loop`` (one traced step
    instead of n unrolled gradients in the compiled program)."""
    R0 = s.positions
    dt = R0.dtype
    mov = s.mask if movable is None else s.mask & jnp.asarray(movable, bool)
    key = jax.random.PRNGKey(0) if key is None else key
    if uniform:
        U = jax.random.uniform(key, R0.shape, jnp.float32, minval=-1.0, maxval=1.0).astype(dt) * eps
    elif sign_start > 0:
        U = jax.random.rademacher(key, R0.shape, jnp.float32).astype(dt) * (sign_start * eps)
    else:
        U = jnp.zeros_like(R0)
    R = R0 + jnp.clip(jnp.where(mov[:, None], U, 0.0), -eps, eps)

    def step(_, R):
        g = jax.grad(lambda X: sgn * loss(s.replace(positions=X)))(R)
        R = R + alpha * jnp.sign(jnp.where(mov[:, None], g, 0.0))
        if project:
            R = R0 + jnp.clip(R - R0, -eps, eps)
        return R

    return jax.lax.fori_loop(0, n, step, R)


def assert_in_box(R, R0, eps, real):
    """Every coordinate within ε of R₀ (one rounding of slack), padding atoms exactly in place."""
    d = np.asarray(R) - np.asarray(R0)
    assert np.abs(d).max() <= eps * (1 + 1e-12), f"left the box: max |R - R0| = {np.abs(d).max()} > {eps}"
    assert (d[~np.asarray(real)] == 0).all(), "a padding atom moved"


def test_sign_attacks_equal_the_pre_optax_rule(sw_si, lj_ar):
    """(a) FGSM, R+FGSM, I-FGSM, PGD (also with a fixed-atom mask, descent and a step of its own) equal the written-out
    rule to 1e-12 Å in float64 (in practice bit for bit); SW Si with padding, and LJ Ar."""
    mov = np.arange(10) < 5

    def cases(model, s, extra):
        loss = losses.energy(model)
        k = jax.random.PRNGKey
        out = [
            (A.fgsm(loss, EPS), None, dict(alpha=EPS, n=1, project=False)),
            (A.fgsm(loss, EPS, random_start=True), k(7), dict(alpha=EPS * 0.5, n=1, sign_start=0.5)),
            (A.ifgsm(loss, EPS, n_steps=5), None, dict(alpha=EPS / 5, n=5)),
            (A.pgd(loss, EPS, n_steps=5), k(1), dict(alpha=0.1 * EPS, n=5, uniform=True)),
        ]
        if extra:
            out += [
                (A.pgd(loss, EPS, n_steps=4, alpha=0.03, movable=mov, descend=True), k(2),
                 dict(alpha=0.03, n=4, uniform=True, movable=mov, sgn=-1.0)),
            ]
        return loss, out

    for (model, s), extra in ((sw_si, True), (lj_ar, False)):
        loss, atk = cases(model, s, extra)

        @jax.jit
        def go(s, loss=loss, atk=atk):
            new = [A.run(a, s, key).structure.positions for a, key, _ in atk]
            ref = [_reference(loss, s, EPS, key=key, **kw) for _, key, kw in atk]
            return new, ref

        new, ref = go(s)
        for (_, _, kw), x, y in zip(atk, new, ref, strict=True):
            x, y = np.asarray(x), np.asarray(y)
            assert not np.array_equal(x, np.asarray(s.positions)), kw  # the case moves something
            np.testing.assert_allclose(x, y, rtol=0, atol=1e-12, err_msg=str(kw))


def test_the_transformations_one_by_one():
    """sign(0) = 0, ascent under optax's descent convention, masking, the floor and Π_ε on hand-made numbers."""
    R0 = jnp.zeros((3, 3))
    R = jnp.array([[0.04, -0.04, 0.0], [0.0, 0.01, -0.05], [0.3, 0.3, 0.3]])
    g = jnp.array([[2.0, -3.0, 0.0], [1e-9, -0.0, -5.0], [1.0, 1.0, 1.0]])
    mov = jnp.array([True, True, False])
    tx = A.attack_transform(A.sign_rule(0.02), origin=R0, epsilon=0.05, movable=mov)
    u, _ = tx.update(g, tx.init(R), R)
    Rn = np.asarray(optax.apply_updates(R, u))
    # uphill +α sign g, clipped at ±ε; zero components (also -0.0) stay; the fixed atom (outside the box) stays put
    np.testing.assert_allclose(Rn, [[0.05, -0.05, 0.0], [0.02, 0.01, -0.05], [0.3, 0.3, 0.3]], rtol=0, atol=1e-15)
    floor = A.attack_transform(A.sign_rule(0.02), origin=R0, epsilon=0.05, movable=mov, grad_floor=1e-6,
                               project=False)
    u, _ = floor.update(g, floor.init(R), R)
    assert float(u[1, 0]) == 0.0 and float(u[1, 2]) == -0.02  # |g| = 1e-9 < floor: no direction
    raw = optax.chain(optax.scale_by_sign(), optax.scale_by_learning_rate(0.02))  # no ascent: optax descends
    assert float(raw.update(g, raw.init(R))[0][0, 0]) == -0.02
    with pytest.raises(ValueError, match="params"):
        A.project_linf(R0, 0.05).update(g, ())


def test_adam_attack_stays_in_the_box_and_raises_the_energy(sw_si):
    """(b) ``optax.adam`` as the rule: every run (vmapped over ε and seeds, uniform start or none) ends inside B_ε,
    reaches its faces (so the projection acted), keeps padding in place and raises the energy."""
    model, s = sw_si
    loss = losses.energy(model)
    eps = jnp.array([0.02, 0.05])
    keys = jax.vmap(jax.random.PRNGKey)(jnp.arange(2))

    @jax.jit
    def go(eps, keys):
        def one(e, k):
            st = A.run(A.optax_attack(loss, optax.adam(1e-2), e, n_steps=12), s)
            rs = A.run(A.optax_attack(loss, optax.adam(1e-2), e, n_steps=12, random_start=True), s, k)
            return st, rs, loss(st.structure), loss(rs.structure)

        return jax.vmap(jax.vmap(one, (None, 0)), (0, None))(eps, keys), loss(s)

    (st, rs, E, E_rs), E0 = go(eps, keys)
    R0, real = np.asarray(s.positions), np.asarray(s.mask)
    for i, e in enumerate(np.asarray(eps)):
        for k in range(2):
            for run in (st, rs):
                R = np.asarray(run.structure.positions[i, k])
                assert_in_box(R, R0, e, real)
                assert np.isclose(np.abs(R - R0)[real], e, rtol=1e-9).any()  # on a face: Π_ε did work
            assert float(E[i, k]) > float(E0) and float(E_rs[i, k]) > float(E0)
    assert (np.asarray(st.step) == 12).all() and float(st.alpha[0, 0]) == 0.0
    # the optimizer's own state travels in the attack state: Adam counted its 12 updates
    counts = [x for x in jax.tree.leaves(st.opt_state) if jnp.issubdtype(x.dtype, jnp.integer)]
    assert counts and all((np.asarray(c) == 12).all() for c in counts)


def _step_clip(origin, epsilon, enabled=True):
    """A classic wrong projection: clips each *step* to ±ε instead of the displacement from R₀."""
    del origin

    def update_fn(updates, state, params=None):
        return jnp.where(enabled, jnp.clip(updates, -epsilon, epsilon), updates), state

    return optax.GradientTransformation(optax.init_empty_state, update_fn)


@pytest.mark.parametrize("broken", ["no_projection", "step_clip"])
def test_a_broken_projection_is_caught_by_the_box_test(sw_si, monkeypatch, broken):
    """(c) The same attacks with Π_ε removed from the chain, or replaced by per-step clipping, leave B_ε, and
    :func:`assert_in_box` says so."""
    model, s = sw_si
    loss = losses.energy(model)
    fake = (lambda origin, epsilon, enabled=True: optax.identity()) if broken == "no_projection" else _step_clip
    monkeypatch.setattr(A, "project_linf", fake)

    @jax.jit
    def go(key):
        pgd = A.run(A.pgd(loss, EPS, n_steps=10), s, key)
        adam = A.run(A.optax_attack(loss, optax.adam(1e-2), EPS, n_steps=12), s)
        return pgd.structure.positions, adam.structure.positions

    for R in go(jax.random.PRNGKey(0)):
        with pytest.raises(AssertionError, match="left the box"):
            assert_in_box(R, s.positions, EPS, s.mask)
