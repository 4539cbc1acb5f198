"""A model that crashes is a failed probe, never a skip (docs/probes.md §6.2, docs/cli.md "Exit codes").

A model whose energy raises, calls ``sys.exit``, or returns a wrong shape or dtype fails every probe that
evaluates it (status "error", score 0, gate False, the one-line reason recorded), and ``jaxcert certify`` exits
1, not 2 ("every probe was skipped"). Only a model that *declares* it lacks a quantity (``stress_available``
False) or a substrate where it is undefined is a skip. ``assert_certified`` refuses its own bad arguments with
a ``TypeError`` or ``ValueError`` naming the argument, and ``jaxcert board`` refuses an element some model does
not support before anything runs, unless ``--skip-unsupported`` (then every model is averaged over the same
elements).
"""

from __future__ import annotations

import json
import sys

import jax.numpy as jnp
import pytest

import jaxcert
from jaxcert.cli import main
from jaxcert.core.inputs import InputError
from jaxcert.probes.suite import failure_reason
from jaxcert.specs import load_model
from jaxcert.testing import assert_certified

LJ = load_model("lj")


def _raises(params, s):
    raise RuntimeError("boom\nsecond line of the message")


def _vector_energy(params, s):  # a per-atom energy returned instead of the total
    return LJ.energy_fn(params, s) * jnp.ones(s.positions.shape[0], s.positions.dtype)


def _nan_on_silicon(params, s):  # NaN times the energy: every derivative is NaN too
    si = jnp.any((s.numbers == 14) & s.mask)
    return LJ.energy_fn(params, s) * jnp.where(si, jnp.nan, 1.0)


def _exits(params, s):
    sys.exit(3)


def _interrupted(params, s):
    raise KeyboardInterrupt


#: models the CLI loads as ``tests.test_crash_verdicts:NAME`` (module:attr)
boom = LJ.replace(energy_fn=_raises, name="boom")
vector = LJ.replace(energy_fn=_vector_energy, name="vector")
nan_on_silicon = LJ.replace(energy_fn=_nan_on_silicon, name="nan-on-si")


def _one(report, name):
    [o] = [o for o in report.outcomes if o.name == name]
    return o


def _failed(o, reason):
    assert o.status == ["error"] * len(o.elements), (o.name, o.status, o.message)
    assert list(o.score) == [0.0] * len(o.elements) and not any(o.gate)
    assert reason in o.message and all(reason in d["error"] for d in o.details)


def test_a_raising_energy_fails_every_probe_with_its_reason_never_skips():
    report = jaxcert.certify(boom, ["Ar"], probes=["parity", "conservativeness"])
    for name in ("parity", "conservativeness"):  # parity asks for the stress: once a skip "no stress"
        o = _one(report, name)
        _failed(o, "RuntimeError: boom")
        assert "second line" not in o.message  # one line
    assert report.aggregate()["gates"] == {"parity": False, "conservativeness": False}


def test_the_cli_exits_1_when_probes_crash_gated_or_not(capsys):
    for probes in ("parity,conservativeness", "smoothness"):  # smoothness has no gate: a crash still fails
        argv = ["certify", "--model", "tests.test_crash_verdicts:boom", "--elements", "Ar", "--probes", probes,
                "--quiet"]
        assert main(argv) == 1, probes
        err = capsys.readouterr().err
        assert "probes crashed on the model" in err and "every probe was skipped" not in err
        assert main([*argv, "--no-fail-on-gate"]) == 1  # a crash is not a gate the user may waive
        capsys.readouterr()


def test_wrong_shapes_are_model_output_errors():
    o = _one(jaxcert.certify(vector, ["Ar"], probes=["conservativeness"]), "conservativeness")
    _failed(o, "ModelOutputError: model 'vector' energy returned shape (")
    assert "expected a scalar" in o.message
    flat = LJ.replace(forces_fn=lambda p, s: jnp.zeros((s.positions.shape[0], 2), s.positions.dtype), name="flat")
    o = _one(jaxcert.certify(flat, ["Ar"], probes=["conservativeness"]), "conservativeness")
    _failed(o, "model 'flat' forces_fn returned shape (")
    voigt = LJ.replace(stress_fn=lambda p, s: jnp.zeros(6, s.positions.dtype), name="voigt6")
    o = _one(jaxcert.certify(voigt, ["Ar"], probes=["stress_consistency"]), "stress_consistency")
    _failed(o, "model 'voigt6' stress_fn returned shape (6,), expected (3, 3)")
    integer = LJ.replace(energy_fn=lambda p, s: jnp.sum(s.numbers), name="integer")
    with pytest.raises(jaxcert.ModelOutputError, match="model 'integer' energy returned dtype int"):
        integer.energy(jaxcert.Structure.from_ase(__import__("ase").Atoms("Ar2", positions=[[0, 0, 0], [0, 0, 3]])))
    assert issubclass(jaxcert.ModelOutputError, ValueError)


def test_nan_on_one_element_fails_that_element_only():
    model = LJ.replace(energy_fn=_nan_on_silicon, name="nan-si")
    report = jaxcert.certify(model, ["Si", "Ar"], probes=["conservativeness", "stress_consistency"])
    for o in report.outcomes:
        assert o.status == ["non-finite", "ok"], (o.name, o.status)
        assert o.score[0] == 0.0 and not o.gate[0] and o.gate[1] and o.score[1] > 0.9


def test_sys_exit_in_the_model_is_a_failed_probe_and_the_run_goes_on():
    exits = LJ.replace(stress_fn=_exits, name="exits")  # only the stress calls sys.exit
    report = jaxcert.certify(exits, ["Ar"], probes=["parity", "conservativeness", "lam"])
    _failed(_one(report, "parity"), "model called sys.exit(3)")
    assert _one(report, "conservativeness").status == ["ok"]  # the next probe ran
    lam = _one(report, "lam")  # named structures (run_on_structures): the crystals ask for the stress and fail,
    status = dict(zip(lam.elements, lam.status, strict=True))  # each alone; the molecules go on
    assert status.pop("diamond") == status.pop("graphene") == "error" and set(status.values()) == {"ok"}
    assert [d["error"] for d in lam.details if "error" in d] == ["model called sys.exit(3)"] * 2
    with pytest.raises(KeyboardInterrupt):  # Ctrl-C still stops the run
        jaxcert.certify(LJ.replace(energy_fn=_interrupted, name="ctrl-c"), ["Ar"], probes=["conservativeness"])


def test_a_model_that_declares_no_stress_is_still_a_skip():
    report = jaxcert.certify(LJ.replace(stress_available=False, name="no-stress"), ["Ar"],
                             probes=["parity", "stress_consistency"])
    for o in report.outcomes:
        assert o.status == ["skipped"] and o.message == "model does not expose a stress"


def test_the_reason_is_one_line_and_names_a_host_callbacks_own_exception():
    wrapped = RuntimeError("INTERNAL: CpuCallback error calling callback: Traceback (most recent call last):\n"
                           '  File "m.py", line 3, in host\nValueError: torch says no')
    assert failure_reason(wrapped) == "RuntimeError: INTERNAL: CpuCallback error calling callback: ValueError: " \
                                      "torch says no"
    assert len(failure_reason(ValueError("x" * 1000))) == 300
    assert failure_reason(SystemExit("bye")) == "model called sys.exit('bye')"
    assert failure_reason(KeyError()) == "KeyError"


BAD_ARGUMENTS = [
    (dict(model=5), TypeError, "assert_certified: model must be a jaxcert.Model or a model spec str"),
    (dict(model=" "), ValueError, "assert_certified: model: got ' '"),
    (dict(elements=5), TypeError, "assert_certified: elements must be element symbols"),
    (dict(elements=["Si", 14]), TypeError, "assert_certified: elements must be element symbols"),
    (dict(elements="Xx"), ValueError, "assert_certified: elements: unknown element symbol"),
    (dict(probes=3), TypeError, "assert_certified: probes must be"),
    (dict(probes="bogus"), ValueError, "assert_certified: probes: unknown probe"),
    (dict(gates="conservativeness"), TypeError, r"assert_certified: gates must be .* \(write \['conservativeness'\]\)"),
    (dict(gates={"conservativeness": 0.1}), TypeError, "assert_certified: gates must map a probe name"),
    (dict(gates={"conservativeness": {"gate_threshold": "0.1"}}), TypeError, r"gates\['conservativeness'\] must map"),
    (dict(gates={"conservativeness": {"gate_threshold": float("nan")}}), ValueError,
     r"assert_certified: gates\['conservativeness'\]\['gate_threshold'\]: got nan"),
    (dict(seed=1.5), TypeError, "assert_certified: seed must be an int"),
    (dict(seed=True), TypeError, "assert_certified: seed must be an int"),
    (dict(seed=-1), ValueError, "assert_certified: seed: got"),
    (dict(dtype="float16"), ValueError, "assert_certified: dtype: got float16"),
    (dict(dtype=object()), TypeError, "assert_certified: dtype must be"),
    (dict(skip_unsupported="yes"), TypeError, "assert_certified: skip_unsupported must be a bool"),
]


@pytest.mark.parametrize("change,error,message", BAD_ARGUMENTS,
                         ids=[f"{k}-{list(b[0])[0]}" for k, b in enumerate(BAD_ARGUMENTS)])
def test_assert_certified_refuses_its_own_bad_arguments_naming_them(change, error, message):
    args = {"model": "lj", "elements": "Si", "probes": ["equivariance"], **change}
    with pytest.raises(error, match=message):
        assert_certified(**args)
    if error is ValueError:  # the library's input errors are ValueErrors
        assert issubclass(InputError, ValueError)


def test_assert_certified_fails_a_crashing_model():
    with pytest.raises(AssertionError, match="parity"):
        assert_certified(boom, "Ar", probes=["parity"])


def test_the_board_refuses_an_element_a_model_lacks_before_any_work(tmp_path, capsys):
    out = tmp_path / "b"
    argv = ["board", "--models", "lj,emt", "--elements", "Si,Cu", "--probes", "equivariance", "--no-throughput",
            "--quiet", "--out", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "--elements: model 'emt' does not support Si (supports: " in err and "drop Si or the model" in err
    assert not list(out.glob("*.json"))  # nothing was certified

    assert main([*argv, "--skip-unsupported"]) == 0  # opted in: every model averaged over the same elements
    board = json.loads((out / "board.json").read_text())
    assert board["averaged_elements"] == ["Cu"] and board["elements"] == ["Cu"]
    assert any("emt: Si" in n for n in board["notes"])
    assert [d["elements"] for d in board["dropped"]] == [["Si"]]  # lj's Si is left out of its average
    emt = json.loads((out / "emt.json").read_text())
    assert emt["probes"][0]["per_element"]["Si"]["status"] == "unsupported"
    assert "every model is averaged over Cu" in (out / "index.html").read_text()
