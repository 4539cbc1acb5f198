"""certify / lambda at the boundary: bad input exits 2 with one line naming the argument (before any JAX
work), unsupported elements are refused or recorded as skips (never a crash row), gates set the exit code."""

import json

import pytest

import jaxcert
from jaxcert.cli import main

BAD = [
    (["--elements", "Xx"], "--elements: unknown element symbol(s) 'Xx'"),
    (["--elements", "si"], "did you mean 'Si'"),
    (["--elements", "Si,Si"], "--elements: Si given more than once"),
    (["--elements", ","], "--elements: got"),
    (["--seed", "-1"], "--seed: got '-1'"),
    (["--seed", "nan"], "--seed: got 'nan'"),
    (["--seed", "1.5"], "--seed: got '1.5'"),
    (["--dtype", "float16"], "--dtype: got 'float16'"),
    (["--probes", "bogus"], "--probes: unknown probe(s) ['bogus']"),
    (["--defect", "curl=nan"], "--defect: got 'nan'"),
    (["--defect", "nosuch=1"], "unknown defect 'nosuch'"),
    (["--resume"], "--resume: needs --json FILE"),
    (["--json", "/nonexistent-dir/r.json"], "--json: no such directory"),
]


@pytest.mark.parametrize("extra,message", BAD, ids=[" ".join(b[0]) for b in BAD])
def test_certify_bad_input_exits_2_with_one_line(extra, message, capsys):
    argv = ["certify", "--model", "lj", "--elements", "Si", "--quiet", *extra]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("jaxcert: error: ") and message in err[0], err


@pytest.mark.parametrize("extra,message", [(["--step", "nan"], "--step: got 'nan'"),
                                           (["--step", "0"], "--step: got '0'"),
                                           (["--gate", "-1"], "--gate: got '-1'"),
                                           (["--dtype", "f64"], "--dtype")])
def test_lambda_bad_input_exits_2(extra, message, capsys):
    assert main(["lambda", "--model", "lj", *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


def test_unsupported_element_refused_with_the_supported_set(capsys):
    assert main(["certify", "--model", "emt", "--elements", "Cu,Si", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "model 'emt' has no parameters for Si" in err and "it supports H, C, N, O, Al, Ni, Cu" in err
    with pytest.raises(jaxcert.core.inputs.InputError, match="no parameters for Si"):
        jaxcert.certify(jaxcert.models.get("emt"), "Cu,Si", probes="parity")


def test_skip_unsupported_records_a_skip_per_element(tmp_path, capsys):
    j = tmp_path / "r.json"
    assert main(["certify", "--model", "emt", "--elements", "Cu,Si", "--probes", "parity", "--skip-unsupported",
                 "--json", str(j), "--quiet"]) == 0
    d = json.loads(j.read_text())
    si, cu = d["probes"][0]["per_element"]["Si"], d["probes"][0]["per_element"]["Cu"]
    assert si["status"] == "unsupported" and si["score"] is None and "no parameters" in si["details"]["skipped"]
    assert cu["status"] == "ok" and cu["score"] > 0.99
    assert d["probes"][0]["status"] == "ok" and d["aggregate"]["gates"] == {"parity": True}
    assert "crash" not in capsys.readouterr().out
    assert d["complete"] is True
    only_si = ["certify", "--model", "emt", "--elements", "Si", "--skip-unsupported", "--quiet"]
    assert main(only_si) == 2 and "supports none of Si" in capsys.readouterr().err


def test_gate_failure_exits_1_unless_asked_not_to(capsys):
    broken = ["certify", "--model", "lj", "--defect", "parity_stress", "--elements", "Si", "--probes", "parity",
              "--quiet"]
    assert main(broken) == 1
    captured = capsys.readouterr()
    assert "FAIL" in captured.out and "gates failed: parity (exit 1)" in captured.err
    assert main([*broken, "--no-fail-on-gate"]) == 0
    assert main(["certify", "--model", "lj", "--elements", "Si", "--probes", "parity", "--quiet"]) == 0


def test_stress_probes_on_a_non_periodic_structure_skip_with_the_reason():
    """A cluster given to the stress probes: a recorded skip with why, not a crash or a NaN score."""
    from jaxcert.probes import stress_consistency
    from jaxcert.probes.base import ProbeSkip

    cluster = jaxcert.probes.substrates.make_substrate("Si", "cluster")
    s = cluster if isinstance(cluster, jaxcert.Structure) else jaxcert.Structure.from_ase(cluster)
    with pytest.raises(ProbeSkip, match="periodic"):
        stress_consistency(jaxcert.models.get("lj"), None, substrate=s)


def test_one_atom_periodic_cell_skips_bond_probes():
    """A one-atom cell has no bond and no relative motion: the bond-scan and MD probes skip with the reason
    instead of returning NaN (a skip is decided before any tracing, so this costs no compilation)."""
    import jax
    from ase.build import bulk

    from jaxcert.probes import config_temperature, conservativeness, equipartition, smoothness
    from jaxcert.probes.base import ProbeSkip

    one = jaxcert.Structure.from_ase(bulk("Cu"))
    for probe in (conservativeness, smoothness, config_temperature, equipartition):
        with pytest.raises(ProbeSkip, match="needs at least 2 atoms"):
            probe(jaxcert.models.get("emt"), jax.random.key(0), substrate=one)
