"""reversibility (docs/probes.md §4.10): clean pass (§8.5), curl blind spot (§8.4), noise fires, jit(vmap) = loop."""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcert
from jaxcert.probes import ReversibilityConfig, reversibility
from jaxcert.probes.base import PROBES
from tests.test_dynamics import clean_lj, cluster13, curl_model

LJ = clean_lj()
#: one compiled program per (model, dtype), shared by the tests (model is a pytree argument, config static)
run = jax.jit(reversibility, static_argnames=("config",))

#: round-trip floors measured on clean LJ / cluster13: ≈ 4e-15 Å (f64), ≈ 2e-6 Å (f32)
FLOOR = {jnp.float32: 2e-5, jnp.float64: 1e-12}


@pytest.mark.parametrize("seed", [0, 7])
def test_clean_lj_passes(dtype, seed):
    s = cluster13(dtype)
    r = run(LJ, jax.random.key(seed), substrate=s)
    assert float(r.score) > 0.99 and bool(r.gate)
    assert float(r.defect) < FLOOR[dtype]
    assert int(r.n_evals) == 201 and int(r.status) == 0
    d = r.details
    assert d["energies"].shape == (201,) and d["energies"].dtype == dtype
    assert float(d["energy_first"]) == float(d["energies"][0])
    assert float(d["energy_max_forward"]) >= float(d["energy_first"])
    # cluster13 is not the LJ minimum: it breathes, and velocity Verlet's energy error stays ≈ 1e-3 eV per atom
    assert abs(float(d["energy_drift_per_step"])) < 1e-4
    assert r.defect.dtype == dtype


def test_curl_is_a_blind_spot():
    """A smooth non-conservative force keeps velocity Verlet reversible (docs/probes.md §8.4: must stay > 0.85)."""
    s = cluster13()
    r = run(curl_model(LJ, 0.4), jax.random.key(0), substrate=s)
    assert float(r.score) > 0.85 and bool(r.gate)


def test_history_like_noise_fires():
    defects = pytest.importorskip("jaxcert.models.defects")
    s = cluster13()
    r = run(defects.noise(LJ, 0.1), jax.random.key(0), substrate=s)
    assert float(r.score) < 0.5  # d_rt ≈ 2.8e-3 Å: fires on the score, still under the 5e-3 Å gate


def test_jit_vmap_over_substrates_equals_loop():
    model = jaxcert.models.get("lj")
    from jaxcert.probes import substrates

    elements = ["Ar", "Kr"]
    structures = [substrates.cluster(el) for el in elements]
    keys = jax.random.split(jax.random.key(3), 2)
    cfg = ReversibilityConfig(n_steps=60)
    rb = jax.jit(jax.vmap(partial(reversibility, model, config=cfg)))(keys, substrate=jaxcert.stack(structures))
    for i, s in enumerate(structures):
        ri = run(model, keys[i], config=cfg, substrate=s)
        np.testing.assert_allclose(np.asarray(rb.details["energies"][i]), np.asarray(ri.details["energies"]),
                                   rtol=1e-12)
        assert abs(float(rb.defect[i]) - float(ri.defect)) < 1e-13
        assert float(ri.defect) < 1e-12 and bool(ri.gate)
        assert int(rb.n_evals[i]) == int(ri.n_evals) == 121


def test_registered():
    spec = PROBES["reversibility"]
    assert spec.fn is reversibility and spec.substrate == "cluster" and spec.gated and spec.target == 0.0
    c = ReversibilityConfig()
    assert (c.n_steps, c.timestep_fs, c.temperature_k, c.scale, c.gate) == (100, 1.0, 30.0, 1e-3, 5e-3)
