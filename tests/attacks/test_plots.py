"""Metric-vs-ε figures: the median/IQR/contour numbers on hand-made rows, and the files written (host only)."""

import json
import os

import numpy as np
import pytest

from jaxcert.attacks import plots


def _row(label, n, eps, structure, seed, v, ratio=None):
    attack = {"FGSM": "fgsm", "I-FGSM": "ifgsm", "PGD": "pgd"}[label]
    ratio = ratio if ratio is not None else (1.0 if attack == "fgsm" else (1 / n if attack == "ifgsm" else 0.1))
    return {"attack": attack, "attack_label": label, "n_steps": n, "alpha_ratio": ratio, "epsilon": eps,
            "structure": structure, "seed": seed, "post_relaxation": {"max_displacement": v},
            "immediate": {"max_displacement": 2 * v}, "steps_after": 10}


ROWS = (
    # PGD at ε = 0.1: values 1..8 over 4 structures × 2 seeds → median 4.5, Q25 2.75, Q75 6.25
    [_row("PGD", 10, 0.1, f"s{i % 4}", 42 + i // 4, float(i + 1)) for i in range(8)]
    # PGD at ε = 0.01: a single value, and a NaN that must be dropped
    + [_row("PGD", 10, 0.01, "s0", 42, 0.5), _row("PGD", 10, 0.01, "s1", 42, float("nan"))]
    # I-FGSM with two step counts: two lines
    + [_row("I-FGSM", 10, 0.1, "s0", 42, 3.0), _row("I-FGSM", 20, 0.1, "s0", 42, 5.0)]
    + [_row("FGSM", 1, 0.1, "s0", 42, 7.0), _row("FGSM", 1, 0.1, "s1", 42, 9.0)]
)


def test_attack_bands_known_answers():
    bands = {b["label"]: b for b in plots.attack_bands(ROWS, "post_relaxation.max_displacement")}
    assert set(bands) == {"FGSM", "I-FGSM n=10", "I-FGSM n=20", "PGD"}
    pgd = bands["PGD"]
    assert pgd["epsilon"] == [0.01, 0.1] and pgd["n"] == [1, 8]
    assert pgd["median"] == [0.5, 4.5] and pgd["q25"] == [0.5, 2.75] and pgd["q75"] == [0.5, 6.25]
    assert pgd["median"][1] == np.median(np.arange(1, 9))  # the same as numpy on the pooled values
    assert bands["FGSM"]["median"] == [8.0] and bands["FGSM"]["q25"] == [7.5]
    assert bands["I-FGSM n=20"]["median"] == [5.0] and bands["I-FGSM n=20"]["n_steps"] == 20
    assert plots.attack_bands(ROWS, "immediate.nothing") == []


def test_contour_band():
    frames = [{"rows": [{"max_displacement": float(x), "mean_displacement": 0.0, "mean_delta_force": 0.0}
                        for x in range(101)], "endpoint": {"rdf_l1": 1.0}, "relaxed": {"max_displacement": 0.2}},
              {"rows": [], "endpoint": {"rdf_l1": 3.0}, "relaxed": {"max_displacement": 0.4}}]
    b = plots.contour_band(frames, "immediate.max_displacement")  # from the 101 frames 0..100
    assert (b["low"], b["high"], b["n"], b["source"]) == (5.0, 95.0, 101, "frames")
    r = plots.contour_band(frames, "immediate.rdf_l1")  # per-run endpoints
    assert r["source"] == "endpoint" and r["low"] == pytest.approx(1.1) and r["high"] == pytest.approx(2.9)
    p = plots.contour_band(frames, "post_relaxation.max_displacement", percentiles=(0, 100))
    assert (p["low"], p["high"], p["source"]) == (0.2, 0.4, "relaxed")
    assert plots.contour_band(frames, "post_relaxation.jaccard_distance") is None


def test_write_plots(tmp_path):
    pytest.importorskip("matplotlib")
    contour = [{"rows": [{"max_displacement": 0.01 * k} for k in range(11)], "endpoint": {}, "relaxed": {}}]
    metrics = ("post_relaxation.max_displacement", "immediate.max_displacement", "steps_after", "immediate.rdf_l1")
    files = plots.write_plots(ROWS, str(tmp_path / "figs"), metrics=metrics, contour=contour)  # rdf_l1: no data
    names = sorted(os.path.basename(f) for f in files)
    assert names == ["bands.json", "immediate.max_displacement.png", "post_relaxation.max_displacement.png",
                     "steps_after.png"]
    for f in files:
        assert os.path.getsize(f) > 1000 or f.endswith(".json")
    with open(tmp_path / "figs" / "bands.json") as fh:
        doc = json.load(fh)
    got = {b["label"]: b for b in doc["post_relaxation.max_displacement"]["attacks"]}
    assert got["PGD"]["median"] == [0.5, 4.5]
    assert doc["post_relaxation.max_displacement"]["contour"] is None  # relaxed endpoints carry no such metric
    band = doc["immediate.max_displacement"]["contour"]  # frames 0, 0.01, …, 0.1 Å
    assert band["low"] == pytest.approx(0.005) and band["high"] == pytest.approx(0.095) and band["n"] == 11
    assert doc["steps_after"]["attacks"][0]["median"] == [10.0]
    with open(tmp_path / "figs" / "post_relaxation.max_displacement.png", "rb") as fh:
        assert fh.read(8) == b"\x89PNG\r\n\x1a\n"
