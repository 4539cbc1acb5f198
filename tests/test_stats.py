"""jaxcert.core.stats: block standard errors and the block jackknife against known answers (docs/statistics.md)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcert.core import stats

PHI = 0.8  # AR(1) coefficient: statistical inefficiency g = (1 + φ)/(1 − φ) = 9
T = 8000
N_SERIES = 48


def _ar1(key, phi, n, dtype=jnp.float64):
    """Stationary AR(1) with unit innovations: x_t = φ x_{t−1} + ε_t, Var x = 1/(1 − φ²)."""
    e = jax.random.normal(key, (n,), dtype)
    x0 = e[0] / jnp.sqrt(1.0 - phi**2)
    _, x = jax.lax.scan(lambda c, ei: (phi * c + ei, phi * c + ei), x0, e[1:])
    return jnp.concatenate([x0[None], x])


def _ar1_se_of_mean(phi, n):
    """Exact SE of the mean of n samples of the stationary AR(1): Var = σ²/n [1 + 2 Σ_k (1 − k/n) φ^k]."""
    k = np.arange(1, n)
    var = (1.0 / (1.0 - phi**2)) / n * (1.0 + 2.0 * np.sum((1.0 - k / n) * phi**k))
    return float(np.sqrt(var))


@pytest.fixture(scope="module")
def series():
    keys = jax.random.split(jax.random.key(0), N_SERIES)
    return jax.jit(jax.vmap(lambda k: _ar1(k, PHI, T)))(keys)


def test_block_se_matches_the_analytic_ar1_se_and_exceeds_the_naive_one(series):
    exact = _ar1_se_of_mean(PHI, T)
    B = 20  # blocks of 400 samples, ≫ g = 9
    se, naive = (np.asarray(v) for v in jax.jit(jax.vmap(lambda x: (stats.mean_stderr(x, B),
                                                                   stats.naive_stderr(x))))(series))
    # each block SE is uncertain by ≈ 1/√(2(B − 1)) relative; the mean over the series by that over √N
    rel_unc = 1.0 / np.sqrt(2 * (B - 1))
    assert abs(se.mean() / exact - 1.0) < 3 * rel_unc / np.sqrt(N_SERIES) + 0.03
    assert np.all(np.abs(se / exact - 1.0) < 4 * rel_unc)
    # the i.i.d. formula is short by √g = 3 (every series; on average g itself)
    assert np.all(naive < se)
    np.testing.assert_allclose(np.mean((se / naive) ** 2), (1 + PHI) / (1 - PHI), rtol=0.15)
    # and the analytic SE is the real spread of the sample mean over independent series
    spread = float(np.std(np.asarray(series).mean(axis=1), ddof=1))
    assert abs(spread / exact - 1.0) < 3 / np.sqrt(2 * (N_SERIES - 1))


def test_blocking_rises_from_the_naive_se_to_a_plateau(series):
    x = series[0]
    levels, naive = jax.jit(lambda x: (stats.blocking(x), stats.naive_stderr(x)))(x)
    levels = np.asarray(levels)
    assert levels.shape == (int(np.log2(T)),)
    np.testing.assert_allclose(levels[0], float(naive), rtol=1e-12)
    exact = _ar1_se_of_mean(PHI, T)
    assert levels[0] < 0.5 * exact  # correlated: the level-0 estimate is far too small
    # blocks of 2^6 = 64 … 2^9 = 512 samples sit on the plateau (their own scatter grows as blocks get few)
    for k in range(6, 10):
        n_k = T // 2**k
        assert abs(levels[k] / exact - 1.0) < 4 / np.sqrt(2 * (n_k - 1))


def test_jackknife_of_the_mean_is_the_block_formula():
    x = jax.random.normal(jax.random.key(3), (1000, 2))
    B = 8
    means = np.asarray(x).reshape(B, 125, 2).mean(axis=1)
    want = np.sqrt(np.sum((means - means.mean(0)) ** 2, axis=0) / (B * (B - 1)))

    @jax.jit
    def run(x):
        return stats.mean_stderr(x, B), stats.block_means(x, B), stats.block_jackknife(lambda m: m, x, B)

    se, (bm, w), jk = run(x)
    np.testing.assert_allclose(np.asarray(se), want, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(bm), means, rtol=1e-12)
    assert np.all(np.asarray(w) == 125)
    np.testing.assert_allclose(np.asarray(jk.estimate), np.asarray(x).mean(0), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(jk.bias), 0.0, atol=1e-14)  # a linear statistic has no bias
    assert int(jk.n_blocks) == B and jk.replicates.shape == (B, 2)


def test_ratio_of_means_jackknife_and_delta_agree_with_the_spread_over_series(series):
    """r = ⟨a⟩/⟨b⟩ with correlated a, b: both SEs match the observed scatter of r over independent series."""
    keys = jax.random.split(jax.random.key(1), N_SERIES)
    other = jax.vmap(lambda k: _ar1(k, 0.5, T))(keys)
    a = 10.0 + series
    b = 20.0 + 0.5 * series + other

    def both(a, b):
        r, se_jk = stats.ratio_stderr(a, b, 20)
        r_d, se_d = stats.ratio_stderr(a, b, 20, method="delta")
        return r, se_jk, r_d, se_d

    r, se_jk, r_d, se_d = (np.asarray(v) for v in jax.jit(jax.vmap(both))(a, b))
    np.testing.assert_allclose(r, np.asarray(a.mean(1) / b.mean(1)), rtol=1e-12)
    np.testing.assert_allclose(r_d, r, rtol=1e-12)
    np.testing.assert_allclose(se_jk, se_d, rtol=0.02)  # equal to first order
    spread = np.std(r, ddof=1)
    assert abs(np.sqrt(np.mean(se_jk**2)) / spread - 1.0) < 3 / np.sqrt(2 * (N_SERIES - 1)) + 0.03
    with pytest.raises(ValueError, match="method"):
        stats.ratio_stderr(a[0], b[0], 20, method="bootstrap")


def test_mask_ignores_samples_and_their_nans():
    x = jax.random.normal(jax.random.key(2), (400,))
    mask = jnp.arange(400) < 200
    poisoned = jnp.where(mask, x, jnp.nan)

    @jax.jit
    def run(x, poisoned):
        jk = stats.block_jackknife(lambda m: m[0] / m[1], (poisoned, 2.0 + poisoned), 10, mask)
        return (stats.mean_stderr(poisoned, 10, mask), stats.mean_stderr(x[:200], 5), jk.n_blocks, jk.stderr,
                stats.naive_stderr(poisoned, mask), stats.naive_stderr(x[:200]))

    se_masked, se_half, n_blocks, jk_se, naive_masked, naive_half = run(x, poisoned)
    # with T divisible by B, the first half of the samples is exactly the first B/2 blocks
    np.testing.assert_allclose(float(se_masked), float(se_half), rtol=1e-12)
    assert int(n_blocks) == 5 and np.isfinite(float(jk_se))
    np.testing.assert_allclose(float(naive_masked), float(naive_half), rtol=1e-12)


def test_jit_vmap_dtype_and_argument_checks():
    x32 = jax.random.normal(jax.random.key(4), (3, 200), jnp.float32)
    f = jax.jit(jax.vmap(lambda x: stats.ratio_stderr(2.0 + x, 3.0 + x, 10)))
    r, se = f(x32)
    assert r.dtype == jnp.float32 and se.dtype == jnp.float32
    one = jax.jit(lambda x: stats.ratio_stderr(2.0 + x, 3.0 + x, 10)[1])
    np.testing.assert_allclose(np.asarray(se), [float(one(x)) for x in x32], rtol=1e-4)  # float32 round-off
    with pytest.raises(ValueError, match="n_blocks"):
        stats.mean_stderr(x32[0], 1)
    with pytest.raises(ValueError, match="samples"):
        stats.mean_stderr(x32[0, :5], 10)
    with pytest.raises(ValueError, match="same number"):
        stats.block_jackknife(lambda m: m[0], (x32[0], x32[0, :100]), 10)


def test_half_drift_is_order_one_on_stationary_series_and_large_on_a_drifting_one(series):
    """half_drift: over 48 stationary AR(1) series (g = 9, 8000 samples) z has spread ≈ 1 and |z| > 3 is rare;
    the same series with the second half shifted by 8 combined standard errors gives z ≈ 8."""
    z = np.asarray(jax.vmap(lambda x: stats.half_drift(lambda m: m, x, 10).z)(series))
    assert 0.6 < np.std(z) < 1.6 and np.mean(np.abs(z) > 3) <= 2 / N_SERIES
    se_half = _ar1_se_of_mean(PHI, T // 2)
    # a step: the second half's mean exceeds the first's by 8 combined standard errors
    trend = jnp.where(jnp.arange(T) >= T // 2, 8 * np.sqrt(2.0) * se_half, 0.0)
    zt = np.asarray(jax.vmap(lambda x: stats.half_drift(lambda m: m, x + trend, 10).z)(series))
    assert 6 < np.median(zt) < 10 and np.all(zt > 2)
    # a ratio of means, as the virial uses: a numerator drifting against its denominator is seen
    den = 2.0 + 0.1 * series[0]
    num = den * (1.0 + 0.1 * series[1])
    flat, drifting = (stats.half_drift(lambda m: m[0] / m[1], (n, den), 10).z for n in (num, num + trend * den))
    assert abs(float(flat)) < 3 and float(drifting) > 4
