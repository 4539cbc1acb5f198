"""Native SevenNet (jaxcert.models.sevennet) in the core, torch-free process: loading, symmetry, batching, overflow.

Agreement with sevenn's own calculator needs torch and runs in the bridge process
(tests/bridges/test_sevennet_native.py).  Here the converted weights come from the cache (converted on
first use in a subprocess, so this process never imports torch); the tests skip when e3nn-jax is
missing or the weights can be neither found nor converted.
"""

from __future__ import annotations

import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcert
from jaxcert.models import sevennet as SN
from tests.models import _sevennet_cases as cases


def test_importing_never_loads_torch_or_e3nn_jax():
    code = ("import sys, jaxcert, jaxcert.models, jaxcert.models.sevennet; "
            "bad = [m for m in ('torch', 'e3nn_jax', 'sevenn') if m in sys.modules]; assert not bad, bad")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_missing_converter_names_what_to_install(tmp_path, monkeypatch):
    pytest.importorskip("e3nn_jax", reason="e3nn-jax is not installed")
    monkeypatch.setenv("JAXCERT_CACHE", str(tmp_path))
    real = SN.importlib.util.find_spec
    monkeypatch.setattr(SN.importlib.util, "find_spec", lambda m: None if m in ("sevenn", "torch") else real(m))
    with pytest.raises(SN.SevenNetUnavailable, match=r"pip install .*sevennet"):
        jaxcert.models.get("jax-sevennet", checkpoint="7net-0")


@pytest.fixture(scope="module")
def model():
    pytest.importorskip("e3nn_jax", reason="the native SevenNet needs e3nn-jax (pip install 'jaxcert[e3nn]')")
    try:
        return jaxcert.models.get("jax-sevennet", checkpoint="7net-0")
    except SN.SevenNetUnavailable as err:
        pytest.skip(f"SevenNet weights unavailable: {err}")


_ef = jax.jit(lambda m, s: m.energy_and_forces_of(m.params, s))


def _cluster():
    return cases.clusters(seed=11, count=1)[0]


def test_invariances_float64(model):
    """E is invariant and F equivariant under rotation, translation and permutation (float64 round-off)."""
    a = _cluster()
    s = model.prepare(jaxcert.Structure.from_ase(a, dtype=np.float64))
    E, F = _ef(model, s)
    Q = np.linalg.qr(np.random.default_rng(0).normal(size=(3, 3)))[0]
    perm = np.random.default_rng(1).permutation(len(a))
    moved = a.copy()
    moved.positions = a.positions @ Q.T + np.array([0.3, -1.2, 2.0])
    moved = moved[perm]
    E2, F2 = _ef(model, model.prepare(jaxcert.Structure.from_ase(moved, dtype=np.float64)))
    assert abs(float(E2 - E)) < 1e-10 * len(a)
    np.testing.assert_allclose(np.asarray(F2), (np.asarray(F) @ Q.T)[perm], atol=1e-9)
    assert np.abs(np.asarray(F)).max() > 0.1  # a real, non-trivial force field


def _rotation_residual(m):
    """max |F(QR) − Q F(R)| (eV/Å) over one random rotation of the cluster, float64."""
    a = _cluster()
    Q = np.linalg.qr(np.random.default_rng(0).normal(size=(3, 3)))[0]
    moved = a.copy()
    moved.positions = a.positions @ Q.T
    _, F = _ef(m, m.prepare(jaxcert.Structure.from_ase(a, dtype=np.float64)))
    _, F2 = _ef(m, m.prepare(jaxcert.Structure.from_ase(moved, dtype=np.float64)))
    return float(np.abs(np.asarray(F2) - np.asarray(F) @ Q.T).max())


def test_float64_equivariance_residual_is_the_shipped_float32_w3j(model):
    """In float64 the shipped model keeps a rotation residual far above float64 round-off: its W3j constants
    are float32 (docs/sevennet.md).  The same model with float64 constants (``w3j="float64"``, what
    benchmarks/board_precision.py --exact-w3j measures) sits at round-off, and says in its info that it is
    not the shipped model.  The shipped model built before it is not changed by it."""
    weights = dict(model.info)["weights"]
    shipped = _rotation_residual(model)
    exact_model = SN.sevennet("7net-0", path=weights, w3j="float64")
    exact = _rotation_residual(exact_model)
    assert shipped > 1e-11 and exact < 1e-12 and shipped > 100 * exact, (shipped, exact)
    assert "w3j" not in dict(model.info) and dict(exact_model.info)["w3j"].startswith("float64")
    assert _rotation_residual(SN.sevennet("7net-0", path=weights)) == shipped  # nothing global changed


def test_w3j_spec_option_and_bad_value(model):
    """The spec option ``w3j-float64`` builds the float64-W3j model; a bad ``w3j`` is a ValueError naming it."""
    m = SN.from_spec("7net-0", ["w3j-float64"])
    assert dict(m.info)["w3j"].startswith("float64") and m.name.endswith("+w3j-float64")
    with pytest.raises(ValueError, match="w3j"):
        SN.sevennet("7net-0", w3j="float16")
    with pytest.raises(ValueError, match="unknown option 'w3j64'.*w3j-float64"):
        SN.from_spec("7net-0", ["w3j64"])

def test_padding_and_vmap_equal_single_calls(model):
    """Two 13-atom clusters padded to 16 and vmapped equal the single calls; padding atoms get zero force."""
    a, b = cases.clusters(seed=11, count=2)
    sa, sb = (jaxcert.Structure.from_ase(x, dtype=np.float64) for x in (a, b))
    S = model.prepare(jaxcert.stack([sa, sb], n_atoms=16))
    E, F = jax.jit(jax.vmap(lambda s: model.energy_and_forces_of(model.params, s)))(S)
    for k, (x, s) in enumerate(((a, sa), (b, sb))):
        e1, f1 = _ef(model, model.prepare(s))  # the 13-atom program of test_invariances_float64
        assert abs(float(E[k] - e1)) < 1e-10 * len(x)
        np.testing.assert_allclose(np.asarray(F[k][: len(x)]), np.asarray(f1), atol=1e-9)
        assert np.all(np.asarray(F[k][len(x):]) == 0.0)


def test_neighbour_overflow_is_nan_not_truncated(model):
    small = SN.sevennet("7net-0", path=dict(model.info)["weights"], capacity=4)
    s = jaxcert.Structure.from_ase(_cluster(), dtype=np.float32)
    assert np.isnan(float(small.energy(s)))
    assert np.isfinite(float(model.energy(s)))


def test_float32_and_float64_agree_to_float32_roundoff(model):
    a = _cluster()
    e32 = float(model.energy(jaxcert.Structure.from_ase(a, dtype=jnp.float32)))
    e64, _ = _ef(model, model.prepare(jaxcert.Structure.from_ase(a, dtype=np.float64)))
    assert abs(e32 - float(e64)) < 5e-6 * len(a)


# ------------------------------------------------------------------------------------------- CLI spec
def test_spec_parsing_rejects_bad_specs_before_loading():
    """``jax-sevennet:CHECKPOINT[:MODAL][@float32|@float64]``: bad checkpoints, fields and options are named."""
    for spec, msg in (("jax-sevennet:7net-9", "unknown SevenNet checkpoint '7net-9'"),
                      ("jax-sevennet:7net-0@float16", "unknown option 'float16'"),
                      ("jax-sevennet:7net-0@float32,float64", "conflicting options"),
                      ("jax-sevennet:7net-mf-0:PBE:x", "too many ':' fields"),
                      ("jax-sevennet:7net-0@", "options after '@': got ''")):
        with pytest.raises(ValueError, match=msg):
            jaxcert.models.from_spec(spec)
    with pytest.raises(KeyError, match="jax-sevennet"):
        jaxcert.models.from_spec("jax-sevenet:7net-0")


def test_cli_spec_exits_2_naming_the_argument(capsys):
    from jaxcert.cli import main

    assert main(["certify", "--model", "jax-sevennet:7net-0@float16", "--elements", "Si", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "--model 'jax-sevennet:7net-0@float16'" in err and "float16" in err
    assert main(["models"]) == 0
    assert "jax-sevennet:CHECKPOINT[:MODAL][@float32|@float64]" in capsys.readouterr().out


def test_precision_option_evaluates_in_that_precision(model):
    """``@float32`` on float64 structures gives the float32 network's energy (not the float64 one)."""
    m32 = jaxcert.models.from_spec("jax-sevennet:7net-0@float32")
    a = _cluster()
    e_opt = float(m32.energy(jaxcert.Structure.from_ase(a, dtype=np.float64)))
    e32 = float(model.energy(jaxcert.Structure.from_ase(a, dtype=np.float32)))
    e64 = float(_ef(model, model.prepare(jaxcert.Structure.from_ase(a, dtype=np.float64)))[0])
    assert abs(e_opt - e32) <= 1e-6 * abs(e32)
    assert abs(e_opt - e64) > 0.0 and abs(e_opt - e64) < 5e-6 * len(a)
    assert dict(jaxcert.models.from_spec("jax-sevennet:7net-0@float64").info)["precision"] == "float64"  # x64 on


def test_cli_certifies_the_native_model(model, tmp_path):
    """One small probe through ``--model jax-sevennet:7net-0``: the native model runs, no host callback."""
    import json

    from jaxcert.cli import main

    j = tmp_path / "r.json"
    assert main(["certify", "--model", "jax-sevennet:7net-0", "--elements", "Si", "--probes", "equivariance",
                 "--dtype", "float32", "--json", str(j), "--quiet", "--no-fail-on-gate"]) == 0
    d = json.loads(j.read_text())
    assert d["model"]["name"] == "jax-sevennet-7net-0"
    (p,) = d["probes"]
    assert p["status"] == "ok" and np.isfinite(p["defect"]) and not p.get("host_evaluations")
