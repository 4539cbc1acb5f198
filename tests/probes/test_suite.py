"""The suite: batching over elements, determinism, failure isolation, aggregation, report schema."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcert
from jaxcert.probes import PROBES
from jaxcert.probes.suite import combine_scores, probe_key

CHEAP = "equivariance,conservativeness,stress_consistency,parity"


@pytest.fixture(scope="module")
def lj():
    return jaxcert.models.get("lj")


@pytest.fixture(scope="module")
def report(lj):
    return jaxcert.certify(lj, ["Si", "Cu"], probes=CHEAP, seed=0, dtype=jnp.float64)


def test_all_fourteen_probes_are_registered():
    """The 14 default probes on their four substrate kinds, plus λ (opt-in, on its own named structures)."""
    default = [n for n, p in PROBES.items() if p.default]
    assert len(default) == 14 and "lam" not in default
    assert {PROBES[n].substrate for n in default} == {"cluster", "trimer", "bulk", "p2mm"}
    assert set(PROBES) - set(default) == {"lam"} and PROBES["lam"].structures is not None


def test_clean_model_passes_every_gate(report):
    agg = report.aggregate()
    assert agg["gates_passed"] == agg["gates_total"] == 4
    assert agg["overall"] > 0.999
    for o in report.outcomes:
        assert o.status == ["ok", "ok"], (o.name, o.message)


def test_json_is_strict_and_has_the_schema(report, tmp_path):
    path = tmp_path / "r.json"
    report.to_json(str(path))
    d = json.loads(path.read_text())
    assert d["schema"] == "jaxcert-report/1"
    assert d["elements"] == ["Si", "Cu"] and d["seed"] == 0 and d["dtype"] == "float64"
    assert {"jax", "jaxcert", "ase"} <= set(d["versions"])
    for p in d["probes"]:
        assert {"name", "target", "defect", "score", "gate", "n_evals", "status", "details", "per_element"} <= set(p)
        assert set(p["per_element"]) == {"Si", "Cu"}
        assert {"defect", "score", "gate", "n_evals", "status"} <= set(p["per_element"]["Si"])
    assert {"overall", "method", "gates_passed", "gates_total"} <= set(d["aggregate"])
    assert "| equivariance" in report.table()


def test_same_seed_same_report_and_vmap_equals_loop(lj, report):
    again = jaxcert.certify(lj, ["Si", "Cu"], probes=CHEAP, seed=0, dtype=jnp.float64)
    for a, b in zip(report.outcomes, again.outcomes, strict=True):
        np.testing.assert_array_equal(a.defect, b.defect)
        np.testing.assert_array_equal(a.score, b.score)
    # the batched program equals running the probe on each element alone, with that element's key
    # (on a broken model, so that the compared defects are far above round-off)
    from jaxcert.models.defects import orientation
    from jaxcert.probes import substrates

    broken = orientation(lj, 0.2)
    rep = jaxcert.certify(broken, ["Si", "Cu"], probes="equivariance", seed=0, dtype=jnp.float64)
    spec = PROBES["equivariance"]
    keys = jax.random.split(probe_key(0, "equivariance"), 2)
    alone_fn = jax.jit(lambda key, s: spec.fn(broken, key, substrate=s))  # one element, no vmap, no padding
    for k, el in enumerate(["Si", "Cu"]):
        s = substrates.cluster(el, dtype=jnp.float64)
        alone = alone_fn(keys[k], s)
        assert float(alone.defect) > 1.0
        assert float(alone.defect) == pytest.approx(float(rep.outcomes[0].defect[k]), rel=1e-9)


def test_a_model_returning_nan_fails_and_the_suite_goes_on(lj):
    def energy(params, s):
        return lj.energy_of(params, s) * jnp.nan

    bad = lj.replace(energy_fn=energy, name="nan-model")
    rep = jaxcert.certify(bad, ["Si"], probes="equivariance,conservativeness", dtype=jnp.float64)
    for o in rep.outcomes:
        assert o.status == ["non-finite"]
        assert o.score[0] == 0.0
        assert not o.gate[0]
    d = json.loads(rep.to_json())  # NaN defects become null, the JSON stays strict
    assert d["probes"][0]["per_element"]["Si"]["defect"] is None


def test_a_crashing_probe_is_recorded_and_the_suite_goes_on(lj):
    def energy(params, s):
        if s.n_atoms == 3:  # fails on the trimer substrate only
            raise RuntimeError("cannot evaluate three atoms")
        return lj.energy_of(params, s)

    odd = lj.replace(energy_fn=energy, name="odd")
    rep = jaxcert.certify(odd, ["Si"], probes="trimer,equivariance", dtype=jnp.float64)
    by = {o.name: o for o in rep.outcomes}
    assert by["trimer"].status == ["error"] and by["trimer"].score[0] == 0.0
    assert "cannot evaluate three atoms" in by["trimer"].message
    assert by["equivariance"].status == ["ok"] and by["equivariance"].gate[0]


def test_aggregation_methods_and_bad_names():
    assert combine_scores([1.0, 0.25], "arithmetic") == pytest.approx(0.625)
    assert combine_scores([1.0, 0.25], "geometric") == pytest.approx(0.5)
    assert combine_scores([1.0, 0.25], "harmonic") == pytest.approx(0.4)
    assert combine_scores([1.0, float("nan")], "geometric") == 1.0  # skips are dropped
    assert np.isnan(combine_scores([], "geometric"))
    with pytest.raises(ValueError, match="unknown aggregation"):
        combine_scores([1.0], "median")
    with pytest.raises(KeyError, match="unknown probe"):
        jaxcert.certify(jaxcert.models.get("lj"), ["Si"], probes="nonsense")


def test_shared_trajectory_is_charged_to_its_first_consumer():
    """docs/probes.md §5: the probe that asks first pays relaxation + warm-up + MD; the next reads it for free."""
    from jaxcert.optim.dynamics import LangevinConfig
    from jaxcert.probes import ConfigTemperatureConfig, VirialConfig

    th = LangevinConfig(warmup_steps=10, relax=False)
    configs = {"config_temperature": ConfigTemperatureConfig(n_steps=40, sample_every=2, n_blocks=4, thermostat=th,
                                                             sampling=None),
               "virial": VirialConfig(n_steps=40, n_blocks=4, thermostat=th, sampling=None)}
    rep = jaxcert.certify(jaxcert.models.get("lj"), ["Si"], probes="config_temperature,virial", configs=configs,
                          dtype=jnp.float64)
    ct, vir = rep.probe("config_temperature"), rep.probe("virial")
    md = 1 + 10 + 40  # no relaxation: the first force call, warm-up, stored steps
    assert ct["per_element"]["Si"]["details"]["trajectory"]["md_evals"] == md
    assert ct["n_evals"] == md + 4 * (40 // 2)  # + one exact jvp per Hutchinson vector and frame
    assert vir["n_evals"] == 0


def test_compiling_ahead_changes_nothing(lj):
    """Programs compiled ahead in worker threads give the sequential run's report, bit for bit.

    The shared trajectory is predicted from config_temperature's settings and then lengthened by virial,
    so virial's predicted program does not match and compiles on demand: both paths are covered.
    """
    from jaxcert.optim.dynamics import LangevinConfig
    from jaxcert.probes import ConfigTemperatureConfig, VirialConfig

    th = LangevinConfig(warmup_steps=10, relax=False)
    configs = {"config_temperature": ConfigTemperatureConfig(n_steps=40, sample_every=2, n_blocks=4, thermostat=th,
                                                             sampling=None),
               "virial": VirialConfig(n_steps=60, n_blocks=4, thermostat=th, sampling=None)}
    probes = "equivariance,conservativeness,config_temperature,virial"
    runs = [jaxcert.certify(lj, ["Si", "Cu"], probes=probes, configs=configs, seed=3, dtype=jnp.float64,
                            compile_workers=w) for w in (0, 2)]
    for a, b in zip(*(r.outcomes for r in runs), strict=True):
        assert a.name == b.name and a.status == b.status
        np.testing.assert_array_equal(a.defect, b.defect)
        np.testing.assert_array_equal(a.n_evals, b.n_evals)
    assert runs[1].probe("virial")["n_evals"] > 0  # the longer trajectory was made for virial, and charged to it


def test_compile_workers_is_validated(lj):
    with pytest.raises(jaxcert.core.inputs.InputError, match="compile_workers"):
        jaxcert.certify(lj, ["Si"], probes="equivariance", compile_workers=-1)
