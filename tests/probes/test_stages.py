"""Probes as stages around shared kernels (docs/architecture.md "Kinds and stages").

* the suite's shared programs give the answers of each probe run alone (item 2 of the staging: the
  differences are round-off of reordered sums, bounded here);
* a user's model is traced a handful of times per certify run, not once per probe and derivative;
* the stage programs hold no model: one model's stages serve another model;
* a stage that reached for the model would be seen.
"""

import dataclasses

import jax.numpy as jnp
import numpy as np
import pytest

import jaxcert
from jaxcert.core import cache
from jaxcert.optim.dynamics import LangevinConfig
from jaxcert.probes import DEFAULT_ORDER, PROBES, kinds, suite

TH = LangevinConfig(warmup_steps=10, relax=False)


def _fast_configs():
    """Every default probe with small counts (same code paths, seconds instead of minutes)."""
    small = {"n_steps": 40, "sample_every": 2, "n_blocks": 4, "thermostat": TH, "sampling": None}
    out = {}
    for name in DEFAULT_ORDER:
        cfg = PROBES[name].config()
        fields = {f.name for f in dataclasses.fields(cfg)}
        change = {k: v for k, v in small.items() if k in fields}
        if name == "reversibility":
            change = {"n_steps": 20}
        if name == "zero_modes":
            change = {"relax_steps": 50}
        out[name] = dataclasses.replace(cfg, **change)
    return out


CONFIGS = _fast_configs()
#: probes whose geometry comes out of a loop (relaxation, dynamics): round-off differences are carried on
LOOPS = {"zero_modes", "reversibility", "config_temperature", "equipartition", "virial"}


@pytest.fixture(scope="module")
def lj():
    return jaxcert.models.get("lj")


@pytest.fixture(scope="module")
def report(lj):
    return jaxcert.certify(lj, ["Si", "C"], configs=CONFIGS, seed=0, dtype=jnp.float64, compile_workers=0)


@pytest.mark.parametrize("name", DEFAULT_ORDER)
def test_shared_programs_give_each_probe_alone(report, lj, name):
    """Suite (stage programs + kernels in chunks of 64) vs the probe called alone on one element.

    Bound: |Δd| ≤ r·|d| + 1e-10 (defects in the probe's units, scales 1e-3…1; representation sits at a
    round-off floor of 1e-11), r = 1e-9 for
    probes that evaluate fixed geometries, 1e-6 for those whose geometry comes out of a loop (a BFGS
    relaxation or a trajectory). The only differences are in the order of floating-point sums (XLA
    batches the kernel over a chunk of items or over the elements, the probe alone over its own
    items); a loop carries them on and amplifies them (measured: zero_modes on C, 4e-9 relative after
    the relaxation). Skips and statuses must agree exactly.
    """
    spec = PROBES[name]
    keys = suite.probe_keys(0, spec.stream or name, 2)
    row = report.probe(name)["per_element"]
    for k, el in enumerate(["Si"]):  # C runs in the same padded batch; one element alone keeps the test short
        try:
            alone = spec.fn(lj, keys[k], config=CONFIGS[name], substrate=el)
        except jaxcert.probes.ProbeSkip:
            assert row[el]["status"] == "skipped"
            continue
        d_suite, d_alone = row[el]["defect"], float(alone.defect)
        r = 1e-6 if name in LOOPS else 1e-9
        assert abs(d_suite - d_alone) <= r * abs(d_alone) + 1e-10, (name, el, d_suite, d_alone)
        assert abs(row[el]["score"] - float(alone.score)) <= r, (name, el)


def _counting_model(counter):
    """A user's model (not jaxcert's code): a smooth pair potential whose energy function counts its traces."""
    def energy_fn(params, s):
        counter[0] += 1  # Python runs only while JAX traces the function
        R = s.positions
        d = R[:, None, :] - R[None, :, :]
        if s.periodic:
            frac = d @ jnp.linalg.inv(s.cell)
            d = (frac - jnp.round(frac)) @ s.cell
        r2 = jnp.sum(d * d, -1) + jnp.eye(R.shape[0])
        pair = s.mask[:, None] & s.mask[None, :] & ~jnp.eye(R.shape[0], dtype=bool)
        e = params["a"] * jnp.exp(-r2 / 4.0) * (r2 < 25.0)
        return 0.5 * jnp.sum(jnp.where(pair, e, 0.0))

    return jaxcert.Model(energy_fn=energy_fn, params={"a": jnp.asarray(0.3)}, cutoff=5.0, name="counting")


def test_a_users_model_is_traced_once_per_kind_and_shape_class(monkeypatch):
    """The whole default suite traces the model's energy once per place a program holds it: per (kind,
    shape class, chunk size), not per probe and derivative. Measured on one element: 26 traces (the
    one-program-per-probe suite traced it 34 times): cluster evaluate 3 and tangent 2 (chunk sizes),
    relax 2 (first forces, loop body), verlet 2, langevin 3; trimer evaluate 1, tangent 1; bulk evaluate
    1, tangent 1; Pmm2 evaluate 4 and tangent 3 (two static image counts, chunk sizes); the 2×2×2
    supercell 1; the stress check 2."""
    monkeypatch.setattr(cache, "_STORE", None)  # with the store on, its key traces the model too (core/_model_key.py)
    counter = [0]
    model = _counting_model(counter)
    rep = jaxcert.certify(model, ["Si"], configs=CONFIGS, dtype=jnp.float64, compile_workers=0)
    assert {o.name for o in rep.outcomes} == set(DEFAULT_ORDER)
    kernels = [k for k in suite._COMPILED if isinstance(k, tuple) and len(k) > 1 and k[1] == "kernel"
               and suite._COMPILED[k][0] is model]
    assert counter[0] <= 26, counter[0]
    assert len(kernels) == 6, kernels  # evaluate, tangent (exact, per wrt), relax, verlet, langevin


def test_stage_programs_hold_no_model(lj):
    """A stage's program is keyed without the model: certifying a second model reuses every stage program."""
    other = jaxcert.models.get("morse")
    names = "betti,parity,zero_modes"
    jaxcert.certify(lj, ["Si"], probes=names, configs=CONFIGS, dtype=jnp.float64, compile_workers=0)
    before = {k for k in suite._COMPILED if k[0] == "stage"}
    jaxcert.certify(other, ["Si"], probes=names, configs=CONFIGS, dtype=jnp.float64, compile_workers=0)
    after = {k for k in suite._COMPILED if k[0] == "stage"}
    assert before and after == before


def test_a_stage_that_calls_the_model_is_refused():
    """The plan contract: stages see facts, never the model. A broken plan that closes over a model trips
    the suite's check that stage programs are model-free (the model's energy is traced inside a stage)."""
    counter = [0]
    model = _counting_model(counter)

    def plan(cfg, facts):
        def ask(key, s):
            e = model.energy_of(model.params, s)  # the forbidden reach
            return jaxcert.probes.stages.Ask((s, e), kinds.evaluate(s))

        def reduce(state, efs):
            from jaxcert.probes.base import finalize
            return finalize(efs.energy - state[1], 1.0, True, 1, {})

        return ask, reduce

    from jaxcert.probes.base import resolve_substrate
    good = jaxcert.probes.stages.run(model, plan, None, None, resolve_substrate(model, "Si", "cluster"))
    assert np.isfinite(float(good.defect))  # alone it runs (inline answers); the suite must refuse it
    spec = dataclasses.replace(PROBES["betti"], name="leaky", plan=plan, config=lambda: None)
    PROBES["leaky"] = spec
    try:
        rep = jaxcert.certify(model, ["Si"], probes="leaky", dtype=jnp.float64, compile_workers=0)
        o = rep.probe("leaky")
        assert o["status"] == "error" and "model" in rep.outcomes[0].message
    finally:
        del PROBES["leaky"]
