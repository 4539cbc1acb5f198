"""betti (docs/probes.md §4.7): clean floor (§8.5), curl fires with the analytic asymmetry (§8.4), FD agreement."""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcert
from jaxcert.core.derivatives import FiniteDifference
from jaxcert.probes import BettiConfig, betti, draw_pairs
from jaxcert.probes.base import PROBES
from tests.probes.test_conservativeness import defect
from tests.test_dynamics import clean_lj, cluster13

LJ = clean_lj()

#: exact floors measured on clean LJ / cluster13 (keys 0..3): ≤ 1.4e-15 eV/Å² (f64), ≤ 1e-6 eV/Å² (f32)
FLOOR = {jnp.float32: 1e-5, jnp.float64: 1e-13}


def test_registered():
    spec = PROBES["betti"]
    assert spec.fn is betti and spec.substrate == "cluster" and spec.gated


@pytest.mark.parametrize("seed", [0, 7])
def test_clean_lj_at_round_off(dtype, seed):
    r = betti(LJ, jax.random.key(seed), substrate=cluster13(dtype))
    d = r.details
    assert float(r.score) > 0.99 and bool(r.gate) and int(r.status) == 0  # §8.5
    assert float(r.defect) < FLOOR[dtype] and r.defect.dtype == dtype
    assert int(d["n_pairs"]) == 12 and d["pairs"].shape == (12, 4) and float(d["delta"]) == 0.0
    assert int(r.n_evals) == 24  # two exact jvps per pair (the reference: 4 calls)
    assert float(jnp.max(jnp.abs(d["pairs"][:, 2]))) > 0.1  # the sampled H entries are not trivially zero


def test_pairs_are_distinct_real_dofs():
    mask = jnp.array([True] * 5 + [False] * 3)
    a, b = draw_pairs(jax.random.key(3), mask, 4000)
    a, b = np.asarray(a), np.asarray(b)
    assert (a != b).all() and a.max() < 15 and b.max() < 15 and a.min() >= 0 and b.min() >= 0
    counts = np.bincount(a, minlength=15)
    assert counts.min() > 4000 / 15 * 0.7  # uniform over the 15 real DOFs


def test_curl_fires_with_the_analytic_asymmetry():
    """NonConservative s = 1: betti < 0.95 (§8.4); each pair's |H_βα − H_αβ| is 2s|[ẑ]×_ab||δ_ij − 1/N|."""
    s_curl = 1.0
    r = betti(defect("curl", LJ, s_curl), jax.random.key(0), substrate=cluster13())
    assert float(r.score) < 0.95
    pairs = np.asarray(r.details["pairs"])
    alpha, beta = pairs[:, 0].astype(int), pairs[:, 1].astype(int)
    zx = np.array([[0, -1, 0], [1, 0, 0], [0, 0, 0]])
    i, a, j, b = alpha // 3, alpha % 3, beta // 3, beta % 3
    want = 2 * s_curl * np.abs(zx[a, b]) * np.abs((i == j) - 1 / 13)
    np.testing.assert_allclose(np.abs(pairs[:, 2] - pairs[:, 3]), want, atol=1e-12)
    assert want.max() > 0  # key 0 samples at least one x–y pair (a z-axis curl is invisible to the others)


def test_fd_engine_agrees_with_exact():
    s = cluster13()
    ex = betti(LJ, jax.random.key(0), substrate=s)
    fd = betti(LJ, jax.random.key(0), BettiConfig(derivatives=FiniteDifference()), substrate=s)
    np.testing.assert_array_equal(ex.details["pairs"][:, :2], fd.details["pairs"][:, :2])  # same draws
    h_ex, h_fd = np.asarray(ex.details["pairs"][:, 2:]), np.asarray(fd.details["pairs"][:, 2:])
    np.testing.assert_allclose(h_fd, h_ex, atol=1e-4 * np.abs(h_ex).max())  # O(δ²) truncation, δ = 1e-3 Å
    assert float(fd.details["delta"]) == 1e-3 and int(fd.n_evals) == 48
    assert float(fd.defect) < 1e-3 and float(fd.score) > 0.95  # the FD floor the exact engine removes
    assert float(ex.defect) < 1e-13


def test_budget_shrinks_pairs():
    r = betti(LJ, jax.random.key(0), BettiConfig(max_evals=24, derivatives=FiniteDifference()), substrate=cluster13())
    assert int(r.details["n_pairs"]) == 6 and int(r.n_evals) <= 24 and bool(r.details["budget_limited"])


def test_jit_vmap_over_elements_equals_loop():
    sub = pytest.importorskip("jaxcert.probes.substrates")
    model = jaxcert.models.get("lj")
    batch, symbols = sub.stacked("cluster", ["Ar", "Cu", "Si"])
    keys = jax.random.split(jax.random.key(0), len(symbols))
    out = jax.jit(jax.vmap(partial(betti, model)))(keys, substrate=batch)
    for k, el in enumerate(symbols):
        one = betti(model, keys[k], substrate=sub.cluster(el))
        assert bool(one.gate) and float(one.score) > 0.99
        np.testing.assert_array_equal(out.details["pairs"][k][:, :2], one.details["pairs"][:, :2])
        np.testing.assert_allclose(out.details["pairs"][k], one.details["pairs"], rtol=1e-9, atol=1e-14)
        np.testing.assert_allclose(out.defect[k], one.defect, atol=1e-14)
