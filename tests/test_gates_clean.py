"""Every clean analytic model passes every gate of the exact profile in float32 and float64 (docs/probes.md §3.1):
the gate profile that catches a factor-2 force head and a hard cutoff (tests/test_gates.py) fails no correct model.

One element per model, the gated probes only (the statistical probes have no gate in any profile)."""

from __future__ import annotations

import pytest

import jaxcert
from jaxcert.probes import PROBES
from jaxcert.report import gates
from jaxcert.specs import load_model

GATED = [n for n in ("conservativeness", "equivariance", "smoothness", "stress_consistency", "parity",
                     "representation", "cross_maxwell", "betti", "zero_modes", "trimer", "reversibility")
         if gates.gated(n, "exact")]
CLEAN = [("lj", "Si"), ("emt", "Cu"), ("sw", "Si"), ("tersoff", "C"), ("eam", "Ni")]


def test_the_gated_probes_are_every_probe_with_an_exact_gate():
    assert set(GATED) == {n for n in PROBES if PROBES[n].default and gates.gated(n, "exact")}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize(("model", "element"), CLEAN)
def test_a_clean_analytic_model_passes_every_exact_gate(model, element, dtype):
    report = jaxcert.certify(load_model(model), [element], probes=GATED, dtype=dtype)
    assert report.failures() == []
    agg = report.aggregate()
    assert agg["gate_profile"] == "exact" and agg["gates_passed"] == agg["gates_total"] == len(GATED)
