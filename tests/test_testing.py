"""``jaxcert.testing.assert_certified`` (docs/board.md, "In your own tests and CI"): passes on a clean model, and on a
defect model fails with the documented message (probe, element, defect, threshold, one-sentence meaning)."""

from __future__ import annotations

import pytest

from jaxcert.core.inputs import InputError
from jaxcert.models import defects
from jaxcert.report.explain import explain
from jaxcert.specs import load_model
from jaxcert.testing import assert_certified, gate_thresholds


def test_a_clean_model_passes():
    report = assert_certified("lj", ["Si"], probes=["conservativeness", "equivariance"])
    assert report.aggregate()["gates"] == {"conservativeness": True, "equivariance": True}


def test_a_curl_defect_fails_with_the_documented_message():
    model = defects.curl(load_model("lj"), 1.0)
    with pytest.raises(AssertionError) as info:
        assert_certified(model, "Si,C", gates=["conservativeness"])
    msg = str(info.value)
    assert msg.startswith(f"jaxcert: model {model.name!r} failed 2 gates (seed 0, float64, exact gates):\n")
    for el in ("Si", "C"):
        assert f"  conservativeness on {el}: defect " in msg
    assert "(target 0), threshold < " in msg and "(exact profile, float64), score " in msg
    assert "reason: along the bond scan the force and −dE/ds differ by" in msg
    assert " ".join(explain("conservativeness").split()[:12]) in " ".join(msg.split())  # the meaning, wrapped
    assert "equivariance" not in msg  # only the gates asked for were run and checked


def test_threshold_overrides_and_bad_gates():
    with pytest.raises(AssertionError, match="threshold gate_threshold = 1e-30"):
        assert_certified("lj", "Si", gates={"conservativeness": {"gate_threshold": 1e-30}})
    with pytest.raises(InputError, match="unknown threshold 'gate'"):
        assert_certified("lj", "Si", gates={"conservativeness": {"gate": 1.0}})
    with pytest.raises(InputError, match="has no gate"):
        assert_certified("lj", "Si", gates=["equipartition"])
    with pytest.raises(InputError, match="not among the probes run"):
        assert_certified("lj", "Si", probes=["equivariance"], gates=["conservativeness"])
    from jaxcert.probes import PROBES

    assert gate_thresholds(PROBES["equivariance"].config()) == {"gate_energy": 5e-3, "gate_force": 5e-3}
