"""stress_consistency probe (docs/probes.md §4.8): clean floors, §8.4 sensitivity, FD engine, skips, batching."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcert import Model, Structure, stack, unstack
from jaxcert.core.derivatives import FiniteDifference
from jaxcert.models import get
from jaxcert.models.lj import lennard_jones
from jaxcert.probes import StressConsistencyConfig, stress_consistency, tensor_norm
from jaxcert.probes.base import ProbeSkip

CLEAN = lennard_jones(sigma=1.0, epsilon=1.0, rc=8.0, smooth=False, name="clean_lj")  # docs/probes.md §8.1
RUN = jax.jit(stress_consistency, static_argnames="config")
KEY = jax.random.key(0)
FD = StressConsistencyConfig(derivatives=FiniteDifference())


def bulk_ar(dtype=jnp.float64) -> Structure:
    """docs/probes.md §8.3: 2×2×2 cubic fcc (32 atoms), nearest neighbour at 2^(1/6)."""
    from ase.lattice.cubic import FaceCenteredCubic

    at = FaceCenteredCubic("Ar", size=(2, 2, 2), latticeconstant=np.sqrt(2) * 2 ** (1 / 6))
    return CLEAN.prepare(Structure.from_ase(at, dtype=dtype))


def _defects():
    return pytest.importorskip("jaxcert.models.defects")


def test_clean_floor(dtype):
    r = RUN(CLEAN, KEY, substrate=bulk_ar(dtype))
    # without a stress head σ^pred and (1/V)∂E/∂γ are the same autodiff of the same energy: measured 0.0
    # in both precisions (§8.5 asks score > 0.99, gate True)
    assert float(r.defect) <= (1e-14 if dtype == jnp.float64 else 1e-6)
    assert float(r.score) > 0.99 and bool(r.gate) and r.n_evals == 2
    assert r.details["stress_pred_voigt"].dtype == dtype and float(r.details["delta"]) == 0.0
    assert float(tensor_norm(r.details["stress_fd_voigt"])) > 1.0  # a strongly prestressed cell


def _set_strengths(model, strengths):
    """Set the ``strength`` leaf of each nested defect wrapper (outermost first)."""
    params = jax.tree_util.tree_map(lambda x: x, model.params)
    p = params
    for v in strengths:
        p["strength"] = jnp.asarray(v)
        p = p["inner"]
    return model.replace(params=params)


def test_bad_stress_fires_and_curl_stays_clean():
    D = _defects()
    m = D.bad_stress(D.curl(CLEAN, 0.4), 1.4)  # knobs: (bad_stress factor − 1, curl strength)
    s = bulk_ar()
    heads = RUN(_set_strengths(m, (0.0, 0.0)), KEY, substrate=s)
    bad = RUN(_set_strengths(m, (0.4, 0.0)), KEY, substrate=s)
    curl = RUN(_set_strengths(m, (0.0, 0.4)), KEY, substrate=s)
    # clean through the stress-head path: measured 1.6e-17
    assert float(heads.defect) < 1e-14
    # §8.4: BadStress ×1.4 → < 0.5 (d = |f − 1| exactly); NonConservative s = 0.4 must stay > 0.85
    np.testing.assert_allclose(bad.defect, 0.4, rtol=1e-12)
    assert float(bad.score) < 0.5 and not bool(bad.gate)
    np.testing.assert_allclose(bad.details["stress_pred_voigt"], 1.4 * heads.details["stress_pred_voigt"], rtol=1e-12)
    assert float(curl.defect) < 1e-14 and float(curl.score) > 0.85 and bool(curl.gate)


def test_finite_difference_engine_agrees():
    ref = get("lj")  # smooth (C¹) cutoff: the FD error is the O(δ²) truncation only
    from jaxcert.probes import substrates

    s = ref.prepare(substrates.bulk("Cu"))
    exact = RUN(ref, KEY, substrate=s)
    fd = RUN(ref, KEY, config=FD, substrate=s)
    assert fd.n_evals == 13 and exact.n_evals == 2 and float(fd.details["delta"]) == 1e-3
    # measured: relative O(δ²) truncation error 2.3e-5 on Cu (fcc, a = 3.61 Å; LJ's steep strain
    # third derivative), shears 1.9e-14 eV/Å³ of FD round-off
    np.testing.assert_allclose(fd.details["stress_fd_voigt"], exact.details["stress_fd_voigt"], rtol=1e-4, atol=1e-12)
    assert 1e-7 < float(fd.defect) < 1e-4 and float(exact.defect) < 1e-14
    # on the §8.3 fixture the non-smooth clean LJ puts pair distances within δ·r of r_c = 8: measured 2.0e-5
    fd = RUN(CLEAN, KEY, config=FD, substrate=bulk_ar())
    assert float(fd.defect) < 5e-4 and float(fd.score) > 0.99


def test_skips():
    from jaxcert.probes import substrates

    with pytest.raises(ProbeSkip, match="substrate is not periodic; stress is undefined"):
        stress_consistency(CLEAN, KEY, substrate=substrates.cluster("Ar"))

    declared = Model(CLEAN.energy_fn, params=CLEAN.params, cutoff=8.0, stress_available=False)
    with pytest.raises(ProbeSkip, match="model does not expose a stress"):
        stress_consistency(declared, KEY, substrate=bulk_ar())

    def no_stress(params, s):
        raise NotImplementedError("no stress head")

    m = Model(CLEAN.energy_fn, stress_fn=no_stress, params=CLEAN.params, cutoff=8.0)
    # a stress that raises is the probe's error (the suite records it), never "no stress"
    with pytest.raises(NotImplementedError, match="no stress head"):
        stress_consistency(m, KEY, substrate=bulk_ar())


def test_vmap_over_elements_with_padding_equals_loop():
    D = _defects()
    m = D.bad_stress(get("lj"), 1.4)
    from jaxcert.probes import substrates

    batch = m.prepare(stack([substrates.bulk(el) for el in ("Ar", "Si")]))  # 1- and 2-atom cells
    assert not bool(batch.mask[0, 1])
    keys = jax.random.split(KEY, 2)
    cfg = StressConsistencyConfig()
    out = jax.jit(jax.vmap(lambda k, s: stress_consistency(m, k, cfg, s)))(keys, batch)
    np.testing.assert_allclose(out.defect, 0.4, rtol=1e-9)
    for i, s in enumerate(unstack(batch)):
        r = RUN(m, keys[i], substrate=s)
        np.testing.assert_allclose(out.details["stress_fd_voigt"][i], r.details["stress_fd_voigt"], rtol=1e-9,
                                   atol=1e-15)
        np.testing.assert_allclose(out.defect[i], r.defect, rtol=1e-9)
