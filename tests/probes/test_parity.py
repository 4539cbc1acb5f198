"""parity probe (docs/probes.md §4.2): clean floors, §8.4 sensitivity, skips, batching, the inversion image."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcert import Model, Structure, stack, unstack
from jaxcert.core.derivatives import FiniteDifference
from jaxcert.models import get
from jaxcert.models.lj import lennard_jones
from jaxcert.probes import ParityConfig, inversion_image, parity
from jaxcert.probes.base import ProbeSkip

CLEAN = lennard_jones(sigma=1.0, epsilon=1.0, rc=8.0, smooth=False, name="clean_lj")  # docs/probes.md §8.1
RUN = jax.jit(parity, static_argnames="config")
KEY = jax.random.key(0)


def p2mm_ar(dtype=jnp.float64) -> Structure:
    """docs/probes.md §8.3: the Pmm2 crystal rescaled so that its minimum distance is 2.12 Å."""
    from jaxcert.probes import substrates

    at = substrates.pmm2_atoms("Ar")
    d = at.get_all_distances(mic=True)[np.triu_indices(4, 1)].min()
    at.set_cell(np.array(at.cell) * 2.12 / d, scale_atoms=True)
    return CLEAN.prepare(Structure.from_ase(at, dtype=dtype))


def _defects():
    return pytest.importorskip("jaxcert.models.defects")


def test_clean_floor(dtype):
    r = RUN(CLEAN, KEY, substrate=p2mm_ar(dtype))
    d = r.details
    assert r.n_evals == 2 and r.status == 0 and bool(r.gate)
    # measured d_P: 4.4e-16 (float64), 7.5e-8 (float32); §8.5: score > 0.99, improper_channel_xy < 1e-6
    floor = 1e-13 if dtype == jnp.float64 else 1e-6
    assert float(r.defect) < floor and float(r.score) > 0.99
    assert float(d["improper_channel_xy"]) < 1e-6 and float(d["proper_control_shear"]) < floor
    scale = float(jnp.linalg.norm(d["stress_pred_voigt"]))
    np.testing.assert_allclose(d["stress_pred_voigt"], d["stress_image_voigt"], rtol=0, atol=10 * floor * scale)
    assert d["stress_sym_voigt"].shape == (6,) and d["d_parity"].dtype == dtype


def test_parity_stress_fires_in_the_improper_channel():
    D = _defects()
    m = D.parity_stress(CLEAN, 0.02)
    s = p2mm_ar()
    zero = RUN(D.with_knobs(m, strength=0.0), KEY, substrate=s)
    r = RUN(m, KEY, substrate=s)
    assert float(zero.defect) < 1e-13
    # §8.4: parity < 0.5 and improper_channel_xy > 10 × proper_control_shear
    assert float(r.score) < 0.5 and not bool(r.gate)
    assert float(r.details["improper_channel_xy"]) > 10 * float(r.details["proper_control_shear"])
    assert float(r.details["improper_channel_xy"]) > 0.1 and float(r.details["proper_control_shear"]) < 1e-12


def test_chirality_fires_in_the_improper_channel():
    D = _defects()
    r = RUN(D.chirality(CLEAN, 0.5), KEY, substrate=p2mm_ar())
    # an SE(3)- but not E(3)-invariant energy: only σ_xy changes sign with parity (measured d_P = 2.3e-3)
    assert float(r.score) < 0.5
    assert float(r.details["improper_channel_xy"]) > 1e-4 and float(r.details["proper_control_shear"]) < 1e-12


def test_force_and_stress_scale_defects_stay_clean():
    D = _defects()
    # curl (forces only) and a uniformly scaled stress head (fσ of the image equals fσ) keep the parity rule
    r = RUN(D.bad_stress(D.curl(CLEAN, 1.0), 1.4), KEY, substrate=p2mm_ar())
    assert float(r.defect) < 1e-13 and float(r.score) > 0.99 and bool(r.gate)


def test_skips():
    from jaxcert.probes import substrates

    with pytest.raises(ProbeSkip, match="substrate is not periodic; stress is undefined"):
        parity(CLEAN, KEY, substrate=substrates.cluster("Ar"))

    declared = Model(CLEAN.energy_fn, params=CLEAN.params, cutoff=8.0, stress_available=False)
    with pytest.raises(ProbeSkip, match="model does not expose a stress"):
        parity(declared, KEY, substrate=p2mm_ar())

    def no_stress(params, s):
        raise NotImplementedError("this model has no stress head")

    m = Model(CLEAN.energy_fn, stress_fn=no_stress, params=CLEAN.params, cutoff=8.0)
    # a stress that raises is the probe's error (the suite records it), never "no stress"
    with pytest.raises(NotImplementedError, match="this model has no stress head"):
        parity(m, KEY, substrate=p2mm_ar())


def test_vmap_over_elements_equals_loop():
    D = _defects()
    m = D.parity_stress(get("lj"), 1e-4)  # a parity-odd part well above round-off, for every element
    from jaxcert.probes import substrates

    batch = m.prepare(stack([substrates.pmm2(el) for el in ("Ar", "Cu", "Si")]))
    keys = jax.random.split(KEY, 3)
    cfg = ParityConfig()
    out = jax.jit(jax.vmap(lambda k, s: parity(m, k, cfg, s)))(keys, batch)
    assert np.all(out.details["improper_channel_xy"] > 1e-6)
    for i, s in enumerate(unstack(batch)):
        r = RUN(m, keys[i], substrate=s)
        np.testing.assert_allclose(out.defect[i], r.defect, rtol=1e-9)
        np.testing.assert_allclose(out.details["stress_image_voigt"][i], r.details["stress_image_voigt"],
                                   rtol=1e-9, atol=1e-15)


def test_inversion_image_geometry():
    s = p2mm_ar()
    img = inversion_image(s)
    frac = np.asarray(img.positions @ jnp.linalg.inv(img.cell))
    assert np.all((frac >= 0) & (frac < 1))
    # image of the image = the original up to lattice vectors
    back = np.asarray(inversion_image(img).positions - s.positions) @ np.linalg.inv(np.asarray(s.cell))
    np.testing.assert_allclose(back, np.round(back), atol=1e-12)
    # every image atom sits at -R modulo the lattice
    diff = (np.asarray(img.positions) + np.asarray(s.positions)) @ np.linalg.inv(np.asarray(s.cell))
    np.testing.assert_allclose(diff, np.round(diff), atol=1e-12)
    np.testing.assert_array_equal(img.cell, s.cell)


def test_engine_is_unused():
    s = p2mm_ar()
    a = jax.make_jaxpr(lambda k, s: parity(CLEAN, k, ParityConfig(), s))(KEY, s)
    b = jax.make_jaxpr(lambda k, s: parity(CLEAN, k, ParityConfig(derivatives=FiniteDifference()), s))(KEY, s)
    assert str(a) == str(b)
