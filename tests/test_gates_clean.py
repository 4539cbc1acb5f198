"""Every clean analytic model passes every gate of the exact profile in float32 and float64 (docs/probes.md §3.1):
the gate profile that catches a factor-2 force head and a hard cutoff (tests/test_gates.py) fails no correct model.

Stillinger–Weber, Tersoff and EAM run here, one element each, in float32 (Stillinger–Weber in float64 too), the
gated probes only (the statistical probes have no gate in any profile). LJ and EMT are judged from their committed
board reports (every probe, ten and two elements, both precisions; made by the code of that commit, judged by
today's gates), and LJ's clean static probes run live under the exact gates in the defect matrix
(tests/probes/test_defect_matrix.py)."""

from __future__ import annotations

import json
import os

import pytest

import jaxcert
from jaxcert.probes import PROBES
from jaxcert.report import gates
from jaxcert.specs import load_model

GATED = [n for n in ("conservativeness", "equivariance", "smoothness", "stress_consistency", "parity",
                     "representation", "cross_maxwell", "betti", "zero_modes", "trimer", "reversibility")
         if gates.gated(n, "exact")]
CLEAN = [("sw", "Si"), ("tersoff", "C"), ("eam", "Ni")]
BOARD = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks", "results", "board")


def test_the_gated_probes_are_every_probe_with_an_exact_gate():
    assert set(GATED) == {n for n in PROBES if PROBES[n].default and gates.gated(n, "exact")}


#: float32, where round-off is largest, for all three; float64 for the three-body Stillinger–Weber (the committed LJ
#: and EMT reports cover float64 for pair and embedded-atom models)
CASES = [(*c, "float32") for c in CLEAN] + [("sw", "Si", "float64")]


@pytest.mark.parametrize(("model", "element", "dtype"), CASES)
def test_a_clean_analytic_model_passes_every_exact_gate(model, element, dtype):
    report = jaxcert.certify(load_model(model), [element], probes=GATED, dtype=dtype)
    assert report.failures() == []
    agg = report.aggregate()
    assert agg["gate_profile"] == "exact" and agg["gates_passed"] == agg["gates_total"] == len(GATED)


@pytest.mark.parametrize("name", ["lj.json", "lj-float32.json", "emt.json", "emt-float32.json"])
def test_the_committed_lj_and_emt_reports_pass_every_exact_gate(name):
    doc = json.load(open(os.path.join(BOARD, name), encoding="utf-8"))
    precision = gates.model_precision(doc["model"], doc.get("card"), doc["dtype"])
    assert precision == ("float32" if "float32" in name else "float64")
    judged = 0
    for p in doc["probes"]:
        for el, e in p["per_element"].items():
            v = gates.judge(p["name"], e["defect"], e["details"], e["status"], "exact", precision)
            assert v.passed is not False, (p["name"], el, v)
            judged += v.passed is True
    assert judged >= (11 * 2 if name.startswith("emt") else 11 * 10)
