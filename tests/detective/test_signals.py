"""Signals and the evidence memory (docs/detective.md §3, §4.4): no model evaluations."""

import json
import math

import pytest

from jaxcert.detective import EvidenceMemory, classify, robust_z
from jaxcert.detective._signals import ARTEFACT, CONSTRAINT, DISAGREEMENT, NONE, SKIPPED, WEAK


def test_robust_z_median_mad_and_floor():
    z, med, scale = robust_z(10.0, [1.0, 2.0, 3.0], floor=0.1)
    assert med == 2.0 and scale == pytest.approx(1.4826)
    assert z == pytest.approx(8.0 / 1.4826)
    z, _, scale = robust_z(1.5, [1.0, 1.0, 1.0], floor=0.1)  # identical committee: the floor keeps z finite
    assert scale == 0.0 and z == pytest.approx(5.0)
    assert math.isnan(robust_z(1.0, [float("nan")], floor=0.1)[0])


def test_classify_labels():
    vals = {"t": 0.3, "a": 0.02, "b": 0.03, "c": 0.025}
    assert classify(vals, "t", 0.08, kind="disagreement", floor=0.01).label == DISAGREEMENT
    assert classify({**vals, "t": 0.05}, "t", 0.08, kind="disagreement", floor=0.01).label == NONE
    # crosses the threshold but the committee is as spread: weak
    assert classify({"t": 0.1, "a": 0.0, "b": 0.09, "c": 0.2}, "t", 0.08, kind="disagreement",
                    floor=0.01).label == WEAK
    # every model shows it and the target is no outlier: the protocol is suspect
    same = {"t": 0.3, "a": 0.29, "b": 0.31, "c": 0.3}
    assert classify(same, "t", 0.08, kind="disagreement", floor=0.01).label == ARTEFACT
    assert classify(same, "t", 0.08, kind="constraint", floor=0.01).label == ARTEFACT
    # an exact constraint is decisive on its own, whatever the committee spread
    assert classify({"t": 2.0, "a": 0.0, "b": 5.0}, "t", 1.0, kind="constraint", floor=1e-9).label == CONSTRAINT
    assert classify({"t": float("nan"), "a": 0.0}, "t", 1.0, kind="constraint", floor=1.0).label == SKIPPED
    with pytest.raises(ValueError, match="kind"):
        classify(vals, "t", 0.08, kind="vote", floor=0.01)


def test_memory_append_only_and_truncated_line(tmp_path):
    path = tmp_path / "evidence.jsonl"
    m = EvidenceMemory(path)
    m.append("screen", protocol="dimers", fingerprint="f", cells=[], evals=7, value=float("nan"))
    m.append("verdict", hypothesis_id="h", verdict="reject", reason="r")
    with open(path, "a") as fh:  # a run killed in the middle of a line
        fh.write('{"type": "probe", "hyp')
    again = EvidenceMemory(path)
    assert [r["type"] for r in again.records] == ["screen", "verdict"]
    assert again.n_evals() == 7 and again.settled() == {"h"}
    assert again.records[0]["value"] is None  # strict JSON: NaN is written as null
    again.append("stop", reason="exhausted")
    lines = path.read_text().splitlines()
    assert json.loads(lines[-1])["type"] == "stop"  # the cut line is left as it was, the record starts afresh
    assert len(EvidenceMemory(path).records) == 3
