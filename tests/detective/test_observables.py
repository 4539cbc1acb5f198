"""Several observables per protocol, each with its own two signals (issue 28; docs/detective.md §2.0, §3, §7).

* the curve helpers on known curves, and the relative / absolute signals kept apart;
* one planted failure per new dimer observable on Mo and W (a barrier above the asymptote, a secondary well, a
  collapse of the short-range wall, forces that are not −dE/dR) escalates a hypothesis about *that* observable
  with scope exactly {Mo, W}, and no other observable flags a cell (the barrier's fall back to the asymptote
  dips below it: its secondary well is real and allowed to co-fire);
* issue 28's own case (a 0.2 eV bump at 4 Å on Mo–Mo, Mo–W, W–W against clean LJ models) now escalates;
* the clean committee raises nothing on any observable, whichever of them is the target;
* the desorption protocol's new observables (the dissociation limit of the desorbed state, forces along the
  path) each escalate their planted failure with scope exactly Cu(111)/CO.
"""

import json

import numpy as np
import pytest

from jaxcert import models
from jaxcert.detective import (
    Cell,
    Committee,
    Desorption,
    DimerConfig,
    Dimers,
    EvidenceMemory,
    SurfaceConfig,
    investigate,
    planted,
)
from jaxcert.detective import examples as ex
from jaxcert.detective._observables import (
    Observable,
    barrier_above_asymptote,
    branches,
    collapse,
    force_energy_mismatch,
    judge,
    secondary_well,
)
from jaxcert.detective._signals import ARTEFACT, DISAGREEMENT, NONE, PHYSICAL, WEAK

ELEMENTS = ["Mo", "W", "Cu"]
DIMERS = Dimers(DimerConfig(step=0.1))  # coarse: the test scans 6 pairs in seconds
OBSERVABLES = [o.name for o in DIMERS.observables]


def _screen(out) -> list[Cell]:
    rec = EvidenceMemory(out / "evidence.jsonl").of_type("screen")[0]
    return [Cell.from_dict(c) for c in rec["cells"]]


def test_curve_helpers_known_curves():
    r = np.linspace(1.0, 8.0, 141)
    morse = 1.0 * ((1 - np.exp(-1.5 * (r - 2.5))) ** 2 - 1)  # D = 1 eV at 2.5 Å, asymptote 0
    k_top, k_min = branches(morse)
    assert k_top == 0 and abs(r[k_min] - 2.5) < 0.03
    assert barrier_above_asymptote(morse, k_min)[0] == 0.0 and secondary_well(morse, k_min)[0] == 0.0
    assert collapse(morse, k_top)[0] == 0.0
    bump = morse + 0.4 * np.exp(-((r - 4.0) ** 2) / (2 * 0.2**2))  # rises above the asymptote at 4 Å
    h, k = barrier_above_asymptote(bump, branches(bump)[1])
    assert 0.15 < h < 0.25 and abs(r[k] - 4.0) < 0.1  # 0.4 eV bump on the Morse at 4 Å (−0.199 eV)
    dip = morse - 0.05 * np.exp(-((r - 5.0) ** 2) / (2 * 0.1**2))  # a secondary well below the asymptote
    assert barrier_above_asymptote(dip, branches(dip)[1])[0] == 0.0
    assert 0.01 < secondary_well(dip, branches(dip)[1])[0] < 0.05  # the rising Morse fills part of the dip
    hole = morse.copy()
    hole[r < 1.3] = hole[r < 1.3] - 200.0 * (1.3 - r[r < 1.3])  # the wall turns over at short range
    depth, _ = collapse(hole, branches(hole)[0])
    assert depth > 10.0
    x = np.exp(-1.5 * (r - 2.5))
    f = -2.0 * (1 - x) * 1.5 * x  # exact −dE/dR of the Morse
    assert force_energy_mismatch(r, morse, f, 0)[0] < 1e-3  # conservative: the quadrature floor (under 1 eV)
    assert force_energy_mismatch(r, morse, f + 0.2 * (np.abs(r - 4.0) < 0.5), 0)[0] > 0.1


def test_relative_and_absolute_signals_are_kept_apart():
    obs = Observable("barrier", "barrier", "eV", "rise above the asymptote", threshold=0.02, floor=0.01, limit=0.05)
    s = judge(obs, {"t": 0.2, "a": 0.0, "b": 0.0, "c": 0.0}, "t")
    assert (s.relative.label, s.absolute.label, s.combined.label) == (DISAGREEMENT, PHYSICAL, PHYSICAL)
    s = judge(obs, {"t": 0.04, "a": 0.0, "b": 0.0, "c": 0.0}, "t")  # below the limit, still an outlier
    assert (s.relative.label, s.absolute.label, s.combined.label) == (DISAGREEMENT, NONE, DISAGREEMENT)
    s = judge(obs, {"t": 0.2, "a": 0.0, "b": 0.3, "c": 0.15}, "t")  # a spread committee masks nothing absolute
    assert (s.relative.label, s.absolute.label, s.combined.label) == (WEAK, PHYSICAL, PHYSICAL)
    s = judge(obs, {"t": 0.2, "a": 0.19, "b": 0.21, "c": 0.2}, "t")  # every model: an artefact of this observable
    assert s.combined.label == ARTEFACT and "this observable only" in s.combined.reason
    exact = Observable("collapse", "collapse", "eV", "", 0.01, 0.01, 0.01, exact=True)
    assert judge(exact, {"t": 5.0, "a": 0.0}, "t").combined.label == "constraint"
    assert judge(obs, {"t": 0.2, "a": 0.0}, "t").to_dict()["absolute"]["label"] == PHYSICAL  # strict-JSON Result


@pytest.mark.parametrize("factory, observable", [
    (ex.lj_planted_barrier, "barrier"),
    (ex.lj_planted_secondary_well, "secondary_well"),
    (ex.lj_planted_collapse, "collapse"),
    (ex.lj_planted_force_mismatch, "force_energy_mismatch"),
])
def test_planted_shape_escalates_on_its_observable(factory, observable, lj_models, tmp_path):
    com = [lj_models["lj"], lj_models["soft"], lj_models["stiff"]]
    res = investigate(Committee(factory(), com), [DIMERS], elements=ELEMENTS, out=tmp_path, log=None, oracle_s=0)
    assert res.escalated and res.hypothesis.observable == observable
    assert res.hypothesis.scope["elements"] == ["Mo", "W"]  # exactly the planted elements
    assert res.hypothesis.id.startswith(f"dimers:{observable}:")
    esc = json.loads((tmp_path / "escalation.json").read_text())
    assert esc["observable_name"] == observable and sorted(esc["scope"]["pairs"]) == ["Mo-Mo", "Mo-W", "W-W"]
    assert all(s["relative"] and "absolute" in s for s in esc["signals"])
    assert esc["criterion"]["name"] == observable and esc["type"] != "committee disagreement" or \
        observable == "secondary_well"
    allowed = {observable, "secondary_well"} if observable == "barrier" else {observable}
    for cell in _screen(tmp_path):
        for other in set(OBSERVABLES) - allowed:
            assert not cell.suspicious_in(other), (cell.key, other, cell.signal_of(other).reason)
        if "Cu" in cell.key:
            assert not cell.suspicious, cell.key  # out of scope: clean on every observable
    md = (tmp_path / "report.md").read_text()
    assert f"Observable `{observable}`" in md and "Seed paper:" in md


def test_issue28_bump_is_no_longer_missed(lj_models, tmp_path):
    """The 0.2 eV bump at 4 Å that `investigate` used to label '0 suspicious, 20 protocol artefacts'."""
    com = [lj_models["lj"], lj_models["soft"], lj_models["stiff"]]
    res = investigate(Committee(ex.lj_issue28_barrier(), com), [DIMERS], elements=["Cu", "Mo", "Ni", "W"],
                      out=tmp_path, log=None, oracle_s=0)
    assert res.escalated and res.hypothesis.observable == "barrier"
    assert res.hypothesis.scope["elements"] == ["Mo", "W"]
    assert res.hypothesis.evidence["unit"] == "eV" and res.hypothesis.evidence["max_target_value"] > 0.05
    assert res.hypothesis.signal_type == "physical-criterion violation"


def test_clean_committee_raises_nothing_on_any_observable(lj_models):
    deep = planted.variant(lj_models["lj"], 1.05, 1.0, name="lj-deep")
    clean = [lj_models["lj"], lj_models["soft"], lj_models["stiff"]]
    for k, target in enumerate(clean):
        c = Committee(target, [m for j, m in enumerate(clean) if j != k] + [deep])
        cells = DIMERS.run(c, DIMERS.regions(ELEMENTS, c))
        flagged = [(cell.key, o) for cell in cells for o in OBSERVABLES if cell.suspicious_in(o)]
        assert not flagged, (target.name, flagged)


DESORPTION = Desorption(SurfaceConfig(molecules=("CO",), dz_step=0.2))


@pytest.mark.parametrize("factory, observable, sig_type", [
    (ex.emt_planted_asymptote, "asymptote", "exact-constraint violation"),
    (ex.emt_planted_force_mismatch, "force_energy_mismatch", "exact-constraint violation"),
])
def test_planted_desorption_observables(factory, observable, sig_type, tmp_path):
    emt = models.get("emt")
    res = investigate(Committee(factory(), [emt, ex.emt_soft(), ex.emt_stiff()]), [DESORPTION],
                      elements=["Cu", "Pt"], out=tmp_path, log=None, oracle_s=0, robust=False)  # robustness:
    # tests/detective/test_robustness.py and test_surfaces_constraints.py
    assert res.escalated and res.hypothesis.observable == observable
    assert res.hypothesis.scope["pairs"] == [["Cu", "CO"]] and res.hypothesis.signal_type == sig_type
    for cell in _screen(tmp_path):
        for other in {o.name for o in DESORPTION.observables} - {observable}:
            assert not cell.suspicious_in(other), (cell.key, other)
