"""Planted desorption failure and an exact-constraint violation (issue 13 validation; docs/detective.md §7).

* EMT with a spurious bump on the C–Cu distance: the rigid CO desorption scan from Cu(111) rises above the
  model's own asymptote, the committee's does not; the search escalates a desorption hypothesis whose scope is
  exactly Cu(111)/CO (Pt(111)/CO stays clean); unwrapped EMT escalates nothing.
* An egg-box term (translation invariance broken): the constraints protocol escalates an exact-constraint
  violation of ``translation`` without needing committee agreement.
"""

import json

import numpy as np

from jaxcert import models
from jaxcert.detective import Committee, Constraints, Desorption, SurfaceConfig, desorption_metrics, investigate
from jaxcert.detective import examples as ex
from jaxcert.models import defects

DESORPTION = Desorption(SurfaceConfig(molecules=("CO",), dz_step=0.2))


def test_desorption_metrics_known_curve():
    dz = np.append(np.linspace(0, 4, 41), 8.0)
    well = -0.5 * np.exp(-((dz[:-1] - 0.5) ** 2) / 0.1)
    bump = 0.2 * np.exp(-((dz[:-1] - 1.8) ** 2) / 0.05)
    m = desorption_metrics(dz, np.append(well + bump, 0.0))
    assert abs(m["rise"] - 0.2) < 0.01 and abs(m["dz_rise"] - 1.3) < 0.11 and m["binding"] > 0.45
    assert desorption_metrics(dz, np.append(well, 0.0))["rise"] < 1e-6  # monotone rise to the asymptote


def test_planted_desorption_barrier(tmp_path):
    emt = models.get("emt")
    committee = [emt, ex.emt_soft(), ex.emt_stiff()]
    res = investigate(Committee(ex.emt_planted_desorption(), committee), [DESORPTION], elements=["Cu", "Pt"],
                      out=tmp_path / "planted", log=None, oracle_s=0)
    assert res.escalated and res.hypothesis.protocol == "desorption" and res.hypothesis.observable == "rise"
    assert res.hypothesis.scope["pairs"] == [["Cu", "CO"]]
    esc = json.loads((tmp_path / "planted" / "escalation.json").read_text())
    assert esc["scope"]["pairs"] == [["Cu", "CO"]] and esc["severity"] > 0.05
    assert "e^(−ΔE/kT)" in (tmp_path / "planted" / "report.md").read_text()
    # robust: it holds in every pre-registered nuisance variant (docs/detective.md §4.4)
    assert esc["robustness"]["label"] == "robust" and "robust across the nuisance variants" in esc["verdict"]["reason"]
    rows = esc["robustness"]["cells"]["Cu(111)/CO"]["variants"]
    assert all(r["holds"] for r in rows if r["applies"]) and sum(r["applies"] for r in rows) >= 4
    md = (tmp_path / "planted" / "report.md").read_text()
    assert "Robustness across the pre-registered nuisance variants: **robust**" in md
    assert "Not varied: rigid scan" in md and "binding" in md  # every model's binding beside the barrier
    clean = investigate(Committee(emt, committee[1:]), [DESORPTION], elements=["Cu", "Pt"], out=tmp_path / "clean",
                        log=None, oracle_s=0)
    assert not clean.escalated


def test_constraint_violation_is_decisive(lj_models, tmp_path):
    checks = Constraints(["translation", "dissociation_limit", "repulsive_wall"])
    com = [lj_models["lj"], lj_models["soft"], lj_models["stiff"]]
    res = investigate(Committee(defects.eggbox(lj_models["lj"], 0.05), com), [checks], elements=["Si", "Cu"],
                      out=tmp_path / "egg", log=None, oracle_s=0)
    assert res.escalated and res.hypothesis.signal_type == "exact-constraint violation"
    assert res.hypothesis.scope == {"constraints": ["translation"], "elements": ["Si", "Cu"]}
    esc = json.loads((tmp_path / "egg" / "escalation.json").read_text())
    assert esc["type"] == "exact-constraint violation" and esc["scope"]["elements"] == ["Si", "Cu"]
    clean = investigate(Committee(lj_models["lj"], com[1:]), [checks], elements=["Si", "Cu"],
                        out=tmp_path / "clean", log=None, oracle_s=0)
    assert not clean.escalated
