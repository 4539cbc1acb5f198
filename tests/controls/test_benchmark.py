"""The offline mini-benchmark: ``jaxcert controls`` and :func:`jaxcert.controls.run_benchmark`.

docs/controls.md, "14. The offline mini-benchmark".  Fast: the CLI's help and argument errors, and one
``--quick`` run with EMT (no bridges) whose known answers must hold — the hull is invariant to a
self-consistent per-element shift and not to a compounds-only one, and the Rung-0 constants of raw MP vs
experiment track the published MP2020 corrections with the sign derived in the docs (raw − experiment ≈
−correction, so r(constants, −MP2020) > 0).  The elastic and prototype sections compile the heaviest programs;
their quick run is the ``slow`` test (``pytest -m slow``).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from jaxcert.cli import main
from jaxcert.controls import SECTIONS, BenchmarkConfig, run_benchmark


def _strict(path):
    """Load JSON refusing NaN/Infinity (the report must be strict JSON)."""

    def bad(c):
        raise ValueError(f"non-strict JSON constant {c}")

    with open(path) as fh:
        return json.load(fh, parse_constant=bad)


def test_help_exposes_the_benchmark(capsys):
    assert main(["controls", "--help"]) == 0
    out = capsys.readouterr().out
    for word in (*SECTIONS, "--quick", "--models", "--panel", "--json", "--html", "--resume", "jaxcert-bridges"):
        assert word in out


@pytest.mark.parametrize("args, named", [
    (["--sections", "eos,bogus"], "--sections"),
    (["--models", "emt,nonsense"], "--models"),
    (["--panel", "emt,emt"], "--panel"),
    (["--n-boot", "10"], "--n-boot"),
    (["--seed", "-3"], "--seed"),
    (["--fmax", "nan"], "--fmax"),
    (["--bridge-precision", "float16"], "--bridge-precision"),
    (["--resume"], "--resume"),
    (["--json", "/no/such/dir/c.json"], "--json"),
])
def test_bad_arguments_exit_2_naming_the_argument(args, named, capsys):
    assert main(["controls", "--quick", "--models", "emt", "--panel", "emt", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("jaxcert: error: ") and named in err, err


def test_config_errors_name_the_field():
    for kw, field in (({"sections": ("eos", "x")}, "sections"), ({"models": ("nope",)}, "models"),
                      ({"n_boot": 5}, "n_boot"), ({"fmax": -1.0}, "fmax"), ({"bridge_precision": "f16"},
                                                                              "bridge_precision")):
        with pytest.raises(ValueError, match=f"^{field}:"):
            BenchmarkConfig(**kw)


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    d = tmp_path_factory.mktemp("controls")
    j, h = d / "c.json", d / "c.html"
    rc = main(["controls", "--quick", "--models", "emt", "--panel", "emt", "--sections", "eos,rung0,consensus,hull",
               "--n-boot", "200", "--json", str(j), "--html", str(h), "--quiet"])
    assert rc == 0
    return j, h, _strict(j)


def test_quick_run_structure(quick):
    j, h, r = quick
    assert r["schema"] == "jaxcert-controls-benchmark/1" and r["complete"] is True
    assert set(r["sections"]) == {"eos", "rung0", "consensus", "hull"}
    for name, sec in r["sections"].items():
        assert sec["status"] == "ok", name
        assert any(w in sec["compares"] for w in ("against DFT", "against experiment", "DFT vs experiment",
                                                  "model vs model")), name
    emt = r["sections"]["eos"]["models"]["emt"]
    assert emt["status"] == "ok" and emt["per_element"]["symbols"] == ["Cu", "Ag", "Al"]
    assert all(d > 0 for d in emt["per_element"]["delta_meV"])
    assert emt["delta_mean_meV"] == pytest.approx(np.mean(emt["per_element"]["delta_meV"]), rel=1e-12)
    fl = r["sections"]["eos"]["floor"]
    assert fl["symbols"] == ["Cu", "Ag", "Al"] and fl["delta_mean_meV"] > 0  # all three have experimental EOS
    mf = emt["on_floor_elements"]["minus_floor"]
    assert mf["estimate"] == pytest.approx(emt["on_floor_elements"]["delta_model_vs_dft_mean_meV"]
                                           - emt["on_floor_elements"]["delta_floor_mean_meV"], rel=1e-9)
    for key in ("eos_delta_meV_per_atom", "rung0", "consensus", "hull_invariance_passed"):
        assert key in r["headline"]
    assert r["loadavg_start"] and r["loadavg"] and r["machine"]
    page = h.read_text()
    assert page.startswith("<!doctype html>") and "<svg" in page and "Compares:" in page


def test_quick_run_hull_invariance_known_answer(quick):
    hull = quick[2]["sections"]["hull"]
    assert hull["passed"] is True
    for k in ("invariance_fitted_constants", "invariance_random_constants"):
        inv = hull[k]
        assert inv["max_change_invariant"] < 1e-9          # the self-consistent shift: round-off
        assert inv["max_change_compounds_only"] > 1e-2     # the compounds-only shift moves E_hull


def test_quick_run_rung0_tracks_mp2020_with_the_derived_sign(quick):
    sec = quick[2]["sections"]["rung0"]
    assert sec["mp2020_refit"]["max_abs_deviation"] <= 5e-4 + 1e-9  # the anchor: the published constants
    fit = sec["fits"]["no_fit_cut"]
    assert fit["ref_corr_r"] > 0.6 and fit["ref_corr_n"] >= 10
    cols = [c for c, v in fit["expected_minus_mp2020"].items() if v is not None and fit["support"][c] >= 5]
    c = np.array([fit["constants"][k] for k in cols])
    published = -np.array([fit["expected_minus_mp2020"][k] for k in cols])
    assert np.corrcoef(c, published)[0, 1] < -0.6          # against the published values themselves: negative
    assert fit["constants"]["O"] > 0.3 and fit["constants"]["F"] > 0.2   # raw oxides/fluorides too shallow
    assert fit["gain"] > 0 and fit["minimality"]["passed"] is True
    assert sec["fits"]["paper"]["minimality"]["passed"] is True


def test_quick_run_consensus_positive_control_has_no_new_false_positives(quick):
    co = quick[2]["sections"]["consensus"]
    assert co["min_models"] == 1 and co["panel"] == ["emt"]
    for run in co["positive_control"]["runs"]:
        assert run["new_false_positives"] == 0   # the test is per structure: untouched rows keep their verdict


def test_resume_keeps_finished_sections_and_refuses_another_configuration(quick, tmp_path, capsys):
    j = tmp_path / "r.json"
    j.write_text(quick[0].read_text())
    assert main(["controls", "--quick", "--models", "emt", "--panel", "emt", "--sections", "rung0,hull",
                 "--n-boot", "200", "--json", str(j), "--resume"]) == 0
    assert "kept from" in capsys.readouterr().err
    again = _strict(j)
    assert again["sections"]["rung0"] == quick[2]["sections"]["rung0"]
    assert main(["controls", "--quick", "--models", "emt", "--panel", "emt", "--seed", "1", "--n-boot", "200",
                 "--json", str(j), "--resume"]) == 2
    assert "seed" in capsys.readouterr().err


def test_missing_bridges_are_recorded_and_the_analytic_parts_run(monkeypatch, tmp_path):
    monkeypatch.setitem(__import__("sys").modules, "jaxcert_bridges", None)  # import raises ImportError
    r = run_benchmark(BenchmarkConfig(models=("emt", "chgnet"), panel=("chgnet",), sections=("eos", "consensus"),
                                      quick=True, n_boot=200), out_json=str(tmp_path / "m.json"), log=lambda _m: None)
    info = r["models"]["chgnet@float32"]
    assert info["status"] == "error" and "pip install" in info["reason"] and "bridges" in info["reason"]
    assert r["sections"]["eos"]["models"]["chgnet@float32"]["status"] == "error"
    assert r["sections"]["eos"]["models"]["emt"]["status"] == "ok"
    assert r["sections"]["consensus"]["status"] == "skipped" and r["complete"] is True


@pytest.mark.slow
def test_quick_elastic_and_prototypes_with_emt(tmp_path):
    """EMT is smooth: the exact and finite-strain routes agree within the truncation estimate on every metal."""
    r = run_benchmark(BenchmarkConfig(models=("emt",), panel=("emt",), sections=("elastic", "prototypes"), quick=True,
                                      n_boot=200), out_json=str(tmp_path / "e.json"), log=lambda _m: None)
    el = r["sections"]["elastic"]["models"]["emt"]
    assert el["routes"]["n_agree"] == el["routes"]["n"] == 3
    assert el["compare_exact"]["K"]["n"] == 3 and el["max_abs_reference_stress_GPa"] < 0.5
    pr = r["sections"]["prototypes"]["models"]["emt"]
    assert len(pr["retention"]["fraction"]) == 3 and pr["n"] == 3
    assert all(0 <= f <= 1 for f in pr["retention"]["fraction"] if f is not None)
