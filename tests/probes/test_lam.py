"""The ``lam`` probe (docs/probes.md §4.16): λ = ‖J_anti‖/‖J‖ as a probe of the suite.

It runs on the ten seed-002 structures (one report row each), is not part of the default run, gives
the numbers :func:`jaxcert.lam` gives, and the curl defect fails it. float64 (conftest enables x64).
"""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcert
from jaxcert import probes
from jaxcert.cli import main
from jaxcert.models.defects import curl
from jaxcert.probes import PROBES, resolve_probes, substrates

NAMES = list(substrates.LAMBDA_MOLECULES) + ["diamond", "graphene"]


@pytest.fixture(scope="module")
def lj():
    return jaxcert.models.get("lj")


@pytest.fixture(scope="module")
def curled(lj):
    return curl(lj, 0.1)


def _outcome(model):
    rep = jaxcert.certify(model, ["Si"], probes="lam", dtype=jnp.float64)
    (o,) = rep.outcomes
    return o


def test_registered_but_not_in_the_default_run():
    assert "lam" in PROBES and PROBES["lam"].fn is probes.lam and not PROBES["lam"].default
    assert "lam" not in resolve_probes("all") and len(resolve_probes("all")) == 14
    assert resolve_probes("lam") == ["lam"]


@pytest.mark.parametrize("which", ["clean", "curl"])
def test_probe_in_the_suite_and_jaxcert_lam_give_identical_numbers(lj, curled, which):
    model = lj if which == "clean" else curled
    o, ref = _outcome(model), jaxcert.lam(model, dtype=jnp.float64)
    assert o.elements == NAMES == list(ref.per_structure)
    assert o.status == ["ok"] * 10 and not ref.skipped
    assert [float(d) for d in o.defect] == [ref.per_structure[k] for k in NAMES]  # bit for bit
    assert [int(n) for n in o.n_evals] == [ref.n_evals[k] for k in NAMES]
    assert all(bool(g) == (ref.per_structure[k] <= ref.gate) for g, k in zip(o.gate, NAMES, strict=True))
    assert o.summary()["gate"] is ref.passed


def test_curl_fails_the_probe_and_the_clean_model_passes(lj, curled):
    clean, bad = _outcome(lj), _outcome(curled)
    assert clean.summary()["gate"] is True and np.max(clean.defect) <= 1e-10
    assert np.min(clean.score) > 0.999
    assert bad.summary()["gate"] is False and not bad.gate.any()
    assert np.min(bad.defect) > 1e3 * max(np.max(clean.defect), 1e-16)
    assert np.max(bad.score) < 0.5 and bad.summary()["status"] == "ok"


def test_conservative_model_at_round_off_and_curl_separates(lj, curled):
    """jaxcert.lam: clean at round-off, the curl defect 1e3 above it and growing with its strength.

    (Moved from tests/test_lam.py to share the compiled programs of ``lj`` and ``curled``.)"""
    clean = jaxcert.lam(lj, dtype=jnp.float64)
    assert len(clean.per_structure) == 10 and not clean.skipped
    assert clean.max <= 1e-10
    weak, strong = jaxcert.lam(curled, dtype=jnp.float64), jaxcert.lam(curl(lj, 1.0), dtype=jnp.float64)
    assert weak.mean > 1e3 * clean.max
    assert strong.mean > weak.mean
    assert all(strong.per_structure[k] > weak.per_structure[k] for k in strong.per_structure)


def test_one_structure_alone_agrees_with_its_batched_row(curled):
    """The probe called on one structure (no padding, no vmap) gives the batched row's λ."""
    o = _outcome(curled)
    sets = substrates.lambda_structures(dtype=jnp.float64)
    for name in ("H2O", "diamond"):
        res = jax.jit(lambda s: probes.lam(curled, None, substrate=s))(curled.prepare(sets[name]))
        assert float(res.defect) == pytest.approx(float(o.defect[NAMES.index(name)]), rel=1e-12)
        assert int(res.n_evals) == 3 * len(sets[name].numbers)
    with pytest.raises(ValueError, match="not a λ structure"):
        probes.lam(curled, None, substrate="Si")


def test_cli_runs_it_by_name_with_one_row_per_structure(tmp_path, capsys):
    """``--probes lam``: a failed gate exits 1; the JSON, the HTML and ``--resume`` read its structure rows."""
    j, h = tmp_path / "lam.json", tmp_path / "lam.html"
    argv = ["certify", "--model", "lj", "--defect", "curl=0.5", "--elements", "Si", "--probes", "lam",
            "--json", str(j), "--quiet"]
    assert main([*argv, "--html", str(h)]) == 1
    d = json.loads(j.read_text())
    (p,) = d["probes"]
    assert p["name"] == "lam" and list(p["per_element"]) == NAMES and p["gate"] is False
    assert all(e["status"] == "ok" and e["defect"] > 1e-3 for e in p["per_element"].values())
    assert "gates failed: lam" in capsys.readouterr().err and "<svg" in h.read_text()
    assert main([*argv, "--resume"]) == 1  # nothing left to run: the finished row set is kept
    assert "1 of 1 probes finished (lam)" in capsys.readouterr().err
    assert json.loads(j.read_text())["probes"][0]["per_element"] == p["per_element"]
