"""smoothness (docs/probes.md §4.14): clean pass (§8.5), kink and ripple fire, smooth defects stay clean (§8.4)."""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcert
from jaxcert.probes import SmoothnessConfig, smoothness, smoothness_terms
from jaxcert.probes.base import PROBES
from tests.probes.test_conservativeness import D0_KINK, defect
from tests.test_dynamics import clean_lj, cluster13

LJ = clean_lj()


def reference_terms(E, p):
    """Loop-by-loop transcription of the §4.14 recipe (numpy, float64), the pescert way."""
    E, p = np.asarray(E, np.float64), np.asarray(p, np.float64)
    dlt = np.diff(p)
    f_span = p.max() - p.min() + 1e-12
    if len(dlt) >= 3:
        g = [dlt[k] - 0.5 * (dlt[k - 1] + dlt[k + 1]) for k in range(1, len(dlt) - 1)]
        rho = max(abs(x) for x in g) / (np.median(np.abs(dlt)) + 1e-9)
    else:
        rho = 0.0
    signs = [np.sign(x) for x in p if abs(x) >= 1e-6 * (np.abs(p).max() + 1e-12)]
    flips = sum(1 for a, b in zip(signs[:-1], signs[1:], strict=True) if a != b)
    n_min = sum(1 for k in range(1, len(E) - 1) if E[k] < E[k - 1] and E[k] < E[k + 1])
    tort = max(0.0, np.abs(dlt).sum() / f_span - 1.0)
    jolt = max(0.0, rho - 4.0)
    return {
        "defect": 0.25 * jolt + max(0, flips - 1) + max(0, n_min - 1) + tort,
        "force_jolt_ratio": rho, "force_flips": flips, "n_minima": n_min, "tortuosity": tort,
    }


def test_registered():
    spec = PROBES["smoothness"]
    assert spec.fn is smoothness and spec.substrate == "cluster" and not spec.gated


@pytest.mark.parametrize("seed", range(6))
def test_terms_match_the_reference_recipe(seed):
    rng = np.random.default_rng(seed)
    m = 41
    E = np.cumsum(rng.normal(size=m))
    p = rng.normal(size=m).cumsum() * rng.choice([0.0, 1.0], size=m, p=[0.2, 0.8])  # exact zeros are dropped
    p[seed % m] = 1e-9  # below the sign threshold
    got = jax.jit(smoothness_terms)(jnp.asarray(E), jnp.asarray(p))
    want = reference_terms(E, p)
    for k, v in want.items():
        np.testing.assert_allclose(float(got[k]), v, rtol=1e-12, atol=1e-12, err_msg=k)


def test_clean_lj_passes(dtype):
    r = smoothness(LJ, None, substrate=cluster13(dtype))
    d = r.details
    assert float(r.score) > 0.9 and int(r.status) == 0  # §8.5
    assert int(d["force_flips_excess"]) == 0 and int(d["spurious_minima"]) == 0
    assert int(d["force_flips"]) == 1 and int(d["n_minima"]) == 1  # one well, one zero crossing of the force
    # the only (small) penalty: the stretch reaches past the LJ inflection (1.244 σ), so F is not monotone
    assert 0.0 < float(d["tortuosity"]) < 0.05 and float(d["force_jolt_excess"]) == 0.0
    assert d["s_grid"].shape == d["energies"].shape == d["projected_force"].shape == (81,)
    assert d["energies"].dtype == dtype and r.defect.dtype == dtype
    b = float(d["bond_len"])
    np.testing.assert_allclose(b, 2 ** (1 / 6), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(d["s_grid"])[[0, -1]], [-0.2 * b, 0.5], rtol=1e-6)
    assert int(r.n_evals) == 81
    np.testing.assert_allclose(float(r.score), 0.968432, rtol=1e-4)  # float32 and float64 agree


def test_kink_fires_for_the_right_reason():
    """§8.4: Kinked A = 0.6, d₀ = 2^{1/6} + 0.28 → smoothness < 0.5, through the force step (jolt)."""
    r = smoothness(defect("kinked", LJ, 0.6, d0=D0_KINK), None, substrate=cluster13())
    assert float(r.score) < 0.5
    assert float(r.details["force_jolt_ratio"]) > 4.0 and float(r.details["force_jolt_excess"]) > 1.0


def test_ripple_fires():
    pytest.importorskip("jaxcert.models.defects")
    r = smoothness(defect("ripple", LJ, 0.05), None, substrate=cluster13())
    assert float(r.score) < 0.5
    assert int(r.details["spurious_minima"]) > 0 and int(r.details["force_flips_excess"]) > 0


@pytest.mark.parametrize("name, strength", [("curl", 0.4), ("orientation", 1.0)])
def test_smooth_defects_stay_clean(name, strength):
    """§8.4: curl s = 0.4 and SymmetryBreaking c = 1 keep the scan smooth (> 0.85)."""
    r = smoothness(defect(name, LJ, strength), None, substrate=cluster13())
    assert float(r.score) > 0.85


def test_budget_and_explicit_bond():
    r = smoothness(LJ, None, SmoothnessConfig(max_evals=24, bond=(0, 5)), substrate=cluster13())
    assert int(r.details["n_points"]) == 23 and bool(r.details["budget_limited"]) and int(r.n_evals) == 23
    assert tuple(np.asarray(r.details["bond"])) == (0, 5)


def test_jit_vmap_over_elements_equals_loop():
    sub = pytest.importorskip("jaxcert.probes.substrates")
    model = jaxcert.models.get("lj")
    batch, symbols = sub.stacked("cluster", ["Ar", "Cu", "Si"])
    keys = jax.random.split(jax.random.key(0), len(symbols))
    out = jax.jit(jax.vmap(partial(smoothness, model)))(keys, substrate=batch)
    for k, el in enumerate(symbols):
        one = smoothness(model, keys[k], substrate=sub.cluster(el))
        assert float(one.score) > 0.9
        np.testing.assert_allclose(out.score[k], one.score, rtol=1e-10)
        np.testing.assert_allclose(out.details["energies"][k], one.details["energies"], rtol=1e-10)
        np.testing.assert_allclose(out.details["projected_force"][k], one.details["projected_force"],
                                   rtol=1e-9, atol=1e-12)
