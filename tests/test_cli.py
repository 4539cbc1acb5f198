import json
import sys

from jaxcert.cli import main

MODEL_SRC = '''
import jax.numpy as jnp
import jaxcert

def make():
    def energy(params, s):
        p = jaxcert.core.neighbors.pairs(s, 6.0)
        phi = params * (p.r - 2.3) ** 2 * jnp.where(p.r < 6.0, (6.0 - p.r) ** 3, 0.0)
        return 0.5 * jnp.sum(jnp.where(p.mask, phi, 0.0))
    return jaxcert.Model(energy, params=jnp.asarray(0.05), name="user-harmonic", cutoff=6.0)
'''


def test_models_and_substrates(tmp_path, capsys):
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    for name in ("lj", "emt", "morse"):
        assert name in out
    assert main(["substrates", "--element", "Si", "--out", str(tmp_path)]) == 0
    assert len(list(tmp_path.glob("*.extxyz"))) == 4


def test_certify_writes_json_and_html(tmp_path, capsys):
    j, h = tmp_path / "r.json", tmp_path / "r.html"
    rc = main(["certify", "--model", "lj", "--elements", "Si", "--probes", "equivariance,conservativeness",
               "--json", str(j), "--html", str(h), "--quiet"])
    assert rc == 0
    d = json.loads(j.read_text())
    assert [p["name"] for p in d["probes"]] == ["equivariance", "conservativeness"]
    assert d["aggregate"]["gates_passed"] == 2
    assert "<svg" in h.read_text() and "equivariance" in capsys.readouterr().out


def test_user_model_from_module(tmp_path, monkeypatch):
    (tmp_path / "usermodel.py").write_text(MODEL_SRC)
    monkeypatch.syspath_prepend(str(tmp_path))
    j = tmp_path / "u.json"
    assert main(["certify", "--model", "usermodel:make", "--elements", "Si", "--probes", "equivariance",
                 "--json", str(j), "--quiet"]) == 0
    assert json.loads(j.read_text())["model"]["name"] == "user-harmonic"


def test_clear_errors(monkeypatch, capsys):
    assert main(["certify", "--model", "nosuch", "--elements", "Si"]) == 2
    assert "unknown model 'nosuch'" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "jaxcert_bridges", None)  # as if jaxcert-bridges were not installed
    assert main(["certify", "--model", "chgnet", "--elements", "Si"]) == 2
    assert "needs the bridges" in capsys.readouterr().err
    assert main(["certify", "--model", "lj", "--elements", "Si", "--probes", "bogus", "--quiet"]) == 2


def test_lambda_command_with_a_defect(tmp_path, capsys):
    """λ's gate: the curl defect fails it (exit 1, or 0 with --no-fail-on-gate); the clean model passes."""
    j = tmp_path / "l.json"
    assert main(["lambda", "--model", "lj", "--defect", "curl=0.5", "--json", str(j)]) == 1
    d = json.loads(j.read_text())
    assert d["schema"] == "jaxcert-lambda/1" and d["mean"] > 1e-3 and d["gate"] is False
    assert "λ gate failed" in capsys.readouterr().err
    assert main(["lambda", "--model", "lj", "--defect", "curl=0.5", "--no-fail-on-gate"]) == 0
    assert main(["lambda", "--model", "lj", "--json", str(j)]) == 0
    d = json.loads(j.read_text())
    assert d["gate"] is True and d["max"] <= d["gate_threshold"]
