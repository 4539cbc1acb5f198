"""representation probe (docs/probes.md §4.3): clean floors, §8.4 sensitivity per sub-test, geometry, batching."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcert import Structure, stack, unstack
from jaxcert.core.derivatives import FiniteDifference
from jaxcert.core.neighbors import image_counts
from jaxcert.models.lj import lennard_jones
from jaxcert.probes import RepresentationConfig, representation, supercell, unimodular
from jaxcert.probes.base import ProbeSkip

CLEAN = lennard_jones(sigma=1.0, epsilon=1.0, rc=8.0, smooth=False, name="clean_lj")  # docs/probes.md §8.1
RUN = jax.jit(representation, static_argnames="config")
KEY = jax.random.key(0)
SUBTESTS = ("unimodular", "supercell", "translation", "permutation")


def p2mm_ar(dtype=jnp.float64) -> Structure:
    """docs/probes.md §8.3: the Pmm2 crystal rescaled so that its minimum distance is 2.12 Å."""
    from jaxcert.probes import substrates

    at = substrates.pmm2_atoms("Ar")
    d = at.get_all_distances(mic=True)[np.triu_indices(4, 1)].min()
    at.set_cell(np.array(at.cell) * 2.12 / d, scale_atoms=True)
    return Structure.from_ase(at, dtype=dtype)


def _defects():
    return pytest.importorskip("jaxcert.models.defects")


def _contributions(r, i=None):
    c = r.details["comparisons"]
    return {k: float(c[k]["contribution"] if i is None else c[k]["contribution"][i]) for k in SUBTESTS}


def test_clean_floor(dtype):
    r = RUN(CLEAN, KEY, substrate=CLEAN.prepare(p2mm_ar(dtype)))
    assert r.n_evals == 20 and r.status == 0 and bool(r.gate)
    # measured d_rep: 2.9e-13 (float64), 1.7e-4 (float32); §8.5: score > 0.99
    assert float(r.defect) < (1e-10 if dtype == jnp.float64 else 1e-2) and float(r.score) > 0.99
    c = r.details["comparisons"]
    assert set(c) == set(SUBTESTS) and c["supercell"]["d_force_rms"].dtype == dtype
    assert int(r.details["n_atoms"]) == 4 and int(r.details["n_translations"]) == 16


def _set_strengths(model, strengths):
    """Set the ``strength`` leaf of each nested defect wrapper (outermost first)."""
    params = jax.tree_util.tree_map(lambda x: x, model.params)
    p = params
    for v in strengths:
        p["strength"] = jnp.asarray(v)
        p = p["inner"]
    return model.replace(params=params)


@functools.lru_cache(maxsize=1)
def composite():
    """curl(eggbox(nonextensive(clean_lj))): one compiled program serves every knob setting."""
    D = _defects()
    return D.curl(D.eggbox(D.nonextensive(CLEAN, 0.01), 0.01), 0.4)  # knobs (curl, eggbox, nonextensive)


def test_defects_fire_in_the_right_subtests():
    m = composite()
    s = m.prepare(p2mm_ar())
    zero = RUN(_set_strengths(m, (0.0, 0.0, 0.0)), KEY, substrate=s)
    assert float(zero.defect) < 1e-10 and float(zero.score) > 0.99
    # §8.4: NonConservative s = 0.4 → < 0.5 (the global centroid force is not extensive and moves with the
    # rewrapping of the gauge change; it is translation invariant): measured 988
    curl = RUN(_set_strengths(m, (0.4, 0.0, 0.0)), KEY, substrate=s)
    c = _contributions(curl)
    assert float(curl.score) < 0.5 and not bool(curl.gate)
    assert c["supercell"] > 1 and c["unimodular"] > 1 and c["translation"] < 1e-8 and c["permutation"] < 1e-8
    # egg-box (grid fixed to the cell, so the gauge change is invisible): translation and supercell, measured 6.5
    egg = RUN(_set_strengths(m, (0.0, 0.01, 0.0)), KEY, substrate=s)
    c = _contributions(egg)
    assert float(egg.score) < 0.5 and c["translation"] > 1 and c["supercell"] > 1 and c["unimodular"] < 1e-6
    # mean pooling: the supercell only, measured 9.0
    nonext = RUN(_set_strengths(m, (0.0, 0.0, 0.01)), KEY, substrate=s)
    c = _contributions(nonext)
    assert float(nonext.score) < 0.5 and c["supercell"] > 1
    assert max(c["translation"], c["unimodular"], c["permutation"]) < 1e-8


def test_geometry_of_supercell_and_gauge():
    s = CLEAN.prepare(p2mm_ar())
    at = s.to_ase()
    sc = supercell(s)
    rep = at.repeat((2, 2, 2))
    np.testing.assert_allclose(sc.positions, rep.get_positions(), atol=1e-12)  # ASE repeat order
    np.testing.assert_allclose(sc.cell, np.asarray(rep.cell), atol=1e-12)
    assert sc.n_atoms == 32 and bool(jnp.all(sc.mask))
    g = unimodular(s)
    np.testing.assert_allclose(g.cell[0], s.cell[0] + s.cell[1], atol=1e-12)
    frac_new = np.asarray(g.positions) @ np.linalg.inv(np.asarray(g.cell))
    assert np.all((frac_new >= -1e-7) & (frac_new < 1 - 1e-7))  # ASE's wrap convention
    shift = (np.asarray(g.positions) - np.asarray(s.positions)) @ np.linalg.inv(np.asarray(s.cell))
    np.testing.assert_allclose(shift, np.round(shift), atol=1e-12)  # atom i ↔ atom i: lattice vectors only
    # the static image counts derived inside the probe cover the cutoff of the new cells
    for new in (sc, g):
        assert all(a <= b for a, b in zip(image_counts(new.cell, new.pbc, 8.0), new.images, strict=True))


def test_skip_non_periodic():
    from jaxcert.probes import substrates

    with pytest.raises(ProbeSkip, match="substrate is not periodic"):
        representation(CLEAN, KEY, substrate=substrates.cluster("Ar"))


def test_vmap_over_elements_equals_loop():
    from jaxcert.probes import substrates

    # the elements' Pmm2 substrates with the §8.3 fixture first: the batch keeps its image count, so the
    # loop below reuses the program compiled for the sensitivity test
    m = _set_strengths(composite(), (0.0, 0.0, 0.01))  # mean pooling: supercell residuals to compare
    fixture = m.prepare(p2mm_ar())
    batch = m.prepare(stack([fixture, substrates.pmm2("Ar"), substrates.pmm2("Cu")]))
    assert batch.images == fixture.images
    keys = jax.random.split(KEY, 3)
    cfg = RepresentationConfig()
    out = jax.jit(jax.vmap(lambda k, s: representation(m, k, cfg, s)))(keys, batch)
    for i, s in enumerate(unstack(batch)):
        r = RUN(m, keys[i], substrate=s)
        np.testing.assert_allclose(out.defect[i], r.defect, rtol=1e-8)
        np.testing.assert_allclose(_contributions(out, i)["supercell"], _contributions(r)["supercell"], rtol=1e-8)
    assert np.all(np.asarray(out.defect) > 0.5)


def test_engine_is_unused():
    s = CLEAN.prepare(p2mm_ar())
    a = jax.make_jaxpr(lambda k, s: representation(CLEAN, k, RepresentationConfig(), s))(KEY, s)
    b = jax.make_jaxpr(lambda k, s: representation(
        CLEAN, k, RepresentationConfig(derivatives=FiniteDifference()), s))(KEY, s)
    assert str(a) == str(b)
