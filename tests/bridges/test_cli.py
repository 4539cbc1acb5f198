"""`jaxcert certify|lambda|attack --model <bridged>` through the CLI."""

import json

import pytest

pytest.importorskip("jaxcert_bridges")

from jaxcert.cli import load_model, main  # noqa: E402


def test_ase_calculator_from_the_shell(tmp_path):
    out = tmp_path / "r.json"
    assert main(["certify", "--model", "ase:ase.calculators.emt:EMT", "--elements", "Cu", "--probes",
                 "equivariance,stress_consistency", "--json", str(out), "--quiet"]) == 0
    rep = json.loads(out.read_text())
    assert rep["model"]["name"] == "ase:ase.calculators.emt:EMT"
    assert [p["status"] for p in rep["probes"]] == ["ok", "ok"]
    assert rep["model"]["hvp"] == "finite differences"


def test_lambda_on_a_bridged_model(tmp_path):
    """ASE's EMT has no sulfur: SO2 is recorded as skipped, the other nine get an FD-accurate λ."""
    out = tmp_path / "l.json"
    assert main(["lambda", "--model", "ase:ase.calculators.emt:EMT", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert "SO2" in doc["skipped"] and "could not evaluate" in doc["skipped"]["SO2"]
    lam = {k: v for k, v in doc["lambda"].items() if v is not None}
    assert len(lam) == 9 and max(lam.values()) < 1e-4  # symmetric up to finite-difference error


@pytest.mark.parametrize("spec, name", [("chgnet", "chgnet-0.3.0"), ("chgnet@float64,fd", "chgnet-0.3.0"),
                                        ("torch-sevennet:7net-mf-0:PBE", "sevennet-7net-mf-0-PBE")])
def test_specs_resolve(spec, name):
    pytest.importorskip("chgnet")
    pytest.importorskip("sevenn")
    m = load_model(spec)
    assert m.name == name
    info = dict(m.info)
    if "@" in spec:
        assert info["hvp_path"] == "fd" and info["hvp"] == "finite differences"


def test_bad_spec_is_clear():
    with pytest.raises(ValueError, match="unknown option"):
        load_model("chgnet@float16")
    with pytest.raises(ValueError, match="--model 'mace:/no/such/file.model': .*nothing is downloaded"):
        load_model("mace:/no/such/file.model")  # an InputError: the CLI prints one line and exits 2


def test_attack_on_an_ase_calculator(tmp_path):
    """relax -> R+FGSM -> relax through the ASE bridge (fcc Cu is stationary by symmetry, so plain FGSM is refused:
    its signs would be the calculator's round-off): the random sign step and the gradient step reach eps."""
    out = tmp_path / "a.json"
    assert main(["attack", "--model", "ase:ase.calculators.emt:EMT", "--structure", "Cu", "--attack", "fgsm",
                 "--eps", "0.02", "--seed", "1", "--json", str(out)]) == 2
    assert main(["attack", "--model", "ase:ase.calculators.emt:EMT", "--structure", "Cu", "--attack", "fgsm",
                 "--random-start", "--eps", "0.02", "--seed", "1", "--json", str(out)]) == 0
    run = json.loads(out.read_text())["runs"][0]
    assert run["converged_before"] and run["converged_after"]
    assert abs(run["immediate"]["linf_displacement"] - 0.02) < 1e-9


@pytest.mark.parametrize("spec, message", [("chgnet@float16", "unknown option 'float16'"),
                                           ("chgnet@fast,float64", "unknown option 'fast'"),
                                           ("mace:/no/such/file.model", "nothing is downloaded"),
                                           ("ase:no_such_module:Calc", "No module named 'no_such_module'")])
def test_bad_bridged_spec_exits_2_with_one_line(spec, message, capsys):
    assert main(["certify", "--model", spec, "--elements", "Si", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"jaxcert: error: --model {spec!r}") and message in err[0]


def test_element_the_bridged_model_does_not_know(tmp_path, capsys):
    """CHGNet has no parameters for Og: refused with its supported set, or recorded as a skip on request."""
    pytest.importorskip("chgnet")
    assert main(["certify", "--model", "chgnet", "--elements", "Si,Og", "--quiet"]) == 2
    assert "has no parameters for Og; it supports H, He" in capsys.readouterr().err
    out = tmp_path / "r.json"
    assert main(["certify", "--model", "chgnet", "--elements", "Si,Og", "--probes", "parity", "--skip-unsupported",
                 "--json", str(out), "--quiet"]) == 0
    per = json.loads(out.read_text())["probes"][0]["per_element"]
    assert per["Og"]["status"] == "unsupported" and per["Si"]["status"] == "ok"
