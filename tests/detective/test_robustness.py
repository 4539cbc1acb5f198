"""Findings that survive a second look (docs/detective.md §3.5, §4.4): nuisance variants, committee sanity and
the grid-independent wall observables.

* A desorption barrier that exists only while CO sees its own periodic images (2×2 cell, gone in 3×3) is labelled
  an artefact of the base geometry by the robustness probe and not escalated (the robust planted barrier is
  escalated as robust: tests/detective/test_surfaces_constraints.py).
* A committee member whose own wall collapses is no reference for the cells where it does: it is excluded with the
  reason, and the signals are computed without it.
* A pocket on the outer repulsive wall is flagged by the ``wall_dip`` observable and by nothing else.
* The collapse of a wall is read from a physical floor with the extremum refined: the same depth on a shifted and a
  finer grid.
"""

import json
import math

import numpy as np

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

DESORPTION = Desorption(SurfaceConfig(molecules=("CO",), dz_step=0.2))
OTHER = ("tail_fraction", "barrier", "secondary_well", "collapse", "force_energy_mismatch")


def _probe(out, name):
    return [r for r in EvidenceMemory(out / "evidence.jsonl").of_type("probe") if r["probe"] == name]


class _ThreeVariants(Desorption):
    """The lateral size, layers and long-bridge variants only (the sites and the relaxed slab run in
    test_surfaces_constraints.py's robust case): enough to tell an image artefact, in less time."""

    def variants(self):
        return [v for v in super().variants() if v.name in ("3×3 cell", "4 layers", "longbridge site")]


def test_an_image_artefact_is_labelled_and_not_escalated(tmp_path):
    emt = models.get("emt")
    committee = [emt, ex.emt_soft(), ex.emt_stiff()]
    few = _ThreeVariants(SurfaceConfig(molecules=("CO",), dz_step=0.2))
    art = investigate(Committee(ex.emt_coverage_barrier(), committee), [few], elements=["Cu", "Pt"],
                      out=tmp_path / "artefact", log=None, oracle_s=0)
    assert not art.escalated
    rob = _probe(tmp_path / "artefact", "robustness")
    assert rob and rob[0]["report"]["label"] == "artefact"
    cu = rob[0]["report"]["cells"]["Cu(111)/CO"]
    by_name = {r["variant"]: r for r in cu["variants"]}
    assert by_name["3×3 cell"]["holds"] is False  # the images are 7.7 Å apart there: no barrier
    assert by_name["3 layers" if "3 layers" in by_name else "4 layers"]["holds"] is True  # still 2×2
    assert by_name["longbridge site"]["applies"] is False  # fcc(111) has no long bridge
    verdicts = EvidenceMemory(tmp_path / "artefact" / "evidence.jsonl").of_type("verdict")
    assert verdicts and all(v["verdict"] == "reject" for v in verdicts)
    assert "artefact of the base geometry" in verdicts[0]["reason"]



def test_a_member_with_an_unphysical_wall_is_no_reference(lj_models):
    broken = planted.short_range_collapse(lj_models["stiff"], ["Mo", "W"])
    c = Committee(ex.lj_planted_barrier(), [lj_models["lj"], lj_models["soft"], broken])
    dimers = Dimers(DimerConfig(step=0.1))
    cells = {cell.key: cell for cell in dimers.run(c, [{"elements": ["Mo", "Mo"]}, {"elements": ["Cu", "Cu"]}])}
    mo = cells["Mo-Mo"]
    assert set(mo.excluded) == {broken.name} and "wall collapses" in mo.excluded[broken.name]
    assert mo.observables["barrier"].relative.n_committee == 2  # judged without it
    assert mo.suspicious_in("barrier")
    assert cells["Cu-Cu"].excluded == {}  # its Cu wall is intact: a reference there
    back = Cell.from_dict(json.loads(json.dumps(mo.to_dict())))
    assert back.excluded == mo.excluded


def test_outer_wall_dip_is_flagged_and_nothing_else(lj_models):
    target = ex.lj_planted_wall_dip()
    c = Committee(target, [lj_models["lj"], lj_models["soft"], lj_models["stiff"]])
    dimers = Dimers(DimerConfig(step=0.05))
    cells = {cell.key: cell for cell in dimers.run(c, [{"elements": ["W", "W"]}, {"elements": ["Mo", "W"]}])}
    ww = cells["W-W"]
    m = ww.metrics[target.name]
    assert ww.suspicious_in("wall_dip") and m["wall_dip"] > 0.5 and abs(m["r_wall_dip"] - 2.0) < 0.1
    assert m["r_crest"] < m["r_wall_dip"] < m["r_min"]
    assert not any(ww.suspicious_in(o) for o in OTHER)
    assert not cells["Mo-W"].suspicious  # the planted pair only
    assert all(ww.metrics[n]["wall_dip"] == 0.0 for n in c.names[1:])


def test_collapse_is_read_from_the_floor_the_same_on_any_grid(lj_models):
    target = ex.lj_planted_collapse()
    c = Committee(target, [lj_models["lj"]])
    depth = {}
    for name, cfg in (("base", DimerConfig(step=0.1)), ("shifted", DimerConfig(step=0.1, offset=0.5)),
                      ("finer", DimerConfig(step=0.06))):
        cell = Dimers(cfg).run(c, [{"elements": ["Mo", "Mo"]}])[0]
        m = cell.metrics[target.name]
        assert cell.suspicious_in("collapse") and m["r_crest"] > m["r_collapse"]
        depth[name] = (m["collapse"], m["wall_height"], m["r_crest"])
        assert math.isfinite(m["floor_energy"]) and m["r_floor"] <= 0.3 * 2 * 1.54 + 0.06
    crest = np.array([d[1] for d in depth.values()])
    # the crest is refined to a quarter step: its height agrees across grids far better than one coarse step moves it
    assert np.ptp(crest) / crest.mean() < 0.05, depth
