"""Planted dimer failure with a known answer (issue 13 validation; docs/detective.md §7).

A spurious mid-range attraction for Sb and Mo dimers only: the search with a committee that lacks it escalates a
dimer hypothesis whose scope is exactly {Mo, Sb}; the same search on the unwrapped model escalates nothing; the
same attraction in every model is labelled a protocol artefact, not escalated.
"""

import json
import os
import re

import ase.io
import pytest

from jaxcert.detective import Committee, DimerConfig, Dimers, EvidenceMemory, investigate, planted
from jaxcert.detective._signals import ARTEFACT

ELEMENTS = ["Sb", "Mo", "Si"]
DIMERS = Dimers(DimerConfig(step=0.1))  # a coarser grid than the default 0.05 Å keeps the test fast


@pytest.fixture(scope="module")
def planted_run(lj_models, tmp_path_factory):
    out = tmp_path_factory.mktemp("planted")
    c = Committee(lj_models["planted"], [lj_models["lj"], lj_models["soft"], lj_models["stiff"]])
    return investigate(c, [DIMERS], elements=ELEMENTS, out=out, log=None, oracle_s=0), out


def test_planted_attraction_escalates_with_exact_scope(planted_run):
    res, out = planted_run
    assert res.escalated and res.stop_reason == "escalated"
    assert res.hypothesis.protocol == "dimers"
    assert res.hypothesis.scope["elements"] == ["Mo", "Sb"]  # exactly the planted elements
    assert res.hypothesis.observable == "tail_fraction"  # the mid-range attraction, not another observable
    esc = json.loads((out / "escalation.json").read_text())
    assert esc["escalated"] is True and esc["protocol"] == "dimers" and esc["type"] == "committee disagreement"
    assert sorted(esc["scope"]["elements"]) == ["Mo", "Sb"]
    for key in ("hypothesis", "target", "committee", "severity", "signals"):
        assert key in esc
    assert esc["severity"] > 0.08 and all(s["label"] == "disagreement" for s in esc["signals"])


def test_report_has_seven_sections_and_dft_card(planted_run):
    _, out = planted_run
    md = (out / "report.md").read_text()
    html = (out / "report.html").read_text()
    for k, title in enumerate(["Finding", "Type", "Application failure", "Figure", "Reproduction",
                               "DFT verification card", "Confounds closed"], start=1):
        assert f"## {k}. {title}" in md
        assert f"{k}. {title}" in html
    assert "<svg" in html and "http" not in html.replace("http://www.w3.org/2000/svg", "")  # self-contained
    assert "Where it does not matter" in md and "Decision table" in md
    confounds = md.split("## 7. Confounds closed")[1].split("##")[0]
    assert 1 <= confounds.count("\n- ") <= 5
    esc = json.loads((out / "escalation.json").read_text())
    card = esc["dft_card"]["configurations"]
    assert card and all(r["core_hours"] > 0 for r in card)
    poscar = out / "dft" / card[0]["files"][0]
    atoms = ase.io.read(poscar, format="vasp")
    assert len(atoms) == card[0]["atoms"]
    pwi = (out / "dft" / card[0]["files"][-1]).read_text()
    assert "ATOMIC_SPECIES" in pwi and ".pbe.UPF" in pwi
    assert "GFN2-xTB: not run" in md  # switched off here; test_cli runs it


def test_memory_records_preregistration_before_probes(planted_run):
    _, out = planted_run
    recs = EvidenceMemory(out / "evidence.jsonl").records
    types = [r["type"] for r in recs]
    i_decl = types.index("declaration")
    assert types.index("screen") < i_decl < types.index("probe") < types.index("verdict")
    decl = recs[i_decl]
    assert sorted(decl["expected_failures"]) == ["Mo-Mo", "Mo-Sb", "Sb-Sb"]
    assert set(decl["expected_clean"]) == {"Si-Sb", "Si-Mo"}


def test_resume_recomputes_nothing(planted_run, lj_models):
    res, out = planted_run
    n_lines = len((out / "evidence.jsonl").read_text().splitlines())
    c = Committee(lj_models["planted"], [lj_models["lj"], lj_models["soft"], lj_models["stiff"]])
    again = investigate(c, [DIMERS], elements=ELEMENTS, out=out, log=None, oracle_s=0)
    assert again.escalated and again.hypothesis.id == res.hypothesis.id
    recs = EvidenceMemory(out / "evidence.jsonl").records[n_lines:]
    assert [r["type"] for r in recs] == ["run", "stop"]  # no screen, probe or verdict recomputed
    assert again.n_evals == res.n_evals


def test_clean_model_escalates_nothing(lj_models, tmp_path):
    c = Committee(lj_models["lj"], [lj_models["soft"], lj_models["stiff"],
                                    planted.variant(lj_models["lj"], 1.05, 1.0, name="lj-deep")])
    res = investigate(c, [DIMERS], elements=ELEMENTS, out=tmp_path, log=None, oracle_s=0)
    assert not res.escalated and res.stop_reason == "exhausted"
    esc = json.loads((tmp_path / "escalation.json").read_text())
    assert esc["escalated"] is False


def test_all_models_wrong_the_same_way_is_an_artefact(lj_models, tmp_path):
    same = [planted.pair_attraction(m, ["Sb", "Mo"]) for m in (lj_models["lj"], lj_models["soft"],
                                                                lj_models["stiff"])]
    c = Committee(lj_models["planted"], same)
    res = investigate(c, [DIMERS], elements=ELEMENTS, out=tmp_path, log=None, oracle_s=0)
    assert not res.escalated
    labelled = {a["cell"] for a in res.artefacts}
    assert {"Sb-Sb", "Mo-Mo"} <= labelled
    assert os.path.exists(tmp_path / "report.md")
    assert "protocol artefact" in (tmp_path / "report.md").read_text().lower()
    assert all(a["reason"] and a["protocol"] == "dimers" for a in res.artefacts)
    assert ARTEFACT == "protocol_artefact"


class _Nothing:
    """A proposer that proposes nothing: the loop must stop as exhausted, whatever the screen showed."""

    def propose(self, screens, protocols, target, memory):
        assert "dimers" in screens and memory.of_type("screen")
        return []


def test_custom_proposer_is_used(lj_models, tmp_path):
    c = Committee(lj_models["planted"], [lj_models["lj"], lj_models["soft"], lj_models["stiff"]])
    res = investigate(c, [DIMERS], elements=ELEMENTS, out=tmp_path, log=None, proposer=_Nothing(), oracle_s=0)
    assert not res.escalated and res.stop_reason == "exhausted"
    assert EvidenceMemory(tmp_path / "evidence.jsonl").of_type("run")[0]["proposer"] == "_Nothing"


def test_sequential_equals_batched(lj_models):
    from jaxcert.detective._protocols import dimer_structure

    structs = [dimer_structure("Sb", "Mo", r, "float64") for r in (2.5, 3.0, 4.5, 7.0)]
    b = Committee(lj_models["planted"], [lj_models["lj"]])
    s = Committee(lj_models["planted"], [lj_models["lj"]], batched=False)
    Eb, Fb = b.energies_forces(structs)
    Es, Fs = s.energies_forces(structs)
    assert abs(Eb - Es).max() < 1e-10 and b.n_evals == s.n_evals == 8
    assert max(abs(Fb[0][k] - Fs[0][k]).max() for k in range(4)) < 1e-10


def test_the_html_report_is_a_page_not_preformatted_text(planted_run):
    """report.html is report.md laid out as a page: headings, lists, the embedded figure; preformatted blocks only
    where the Markdown has them (the reproduction's printout, the DFT card listing)."""
    from tests import _browser

    _, out = planted_run
    page = (out / "report.html").read_text()
    assert "<h1>Escalation:" in page and "<h2>1. Finding</h2>" in page and "<h2>7. Confounds closed</h2>" in page
    assert "<ul><li>" in page and "<svg" in page and not page.split("<body>")[1].startswith("<pre>")
    if _browser.chromium() is None:
        pytest.skip(_browser.SKIP_REASON)
    r = _browser.run_in_browser(page, "")  # the prelude measures whether the page fits the window
    assert r["fits"], r


def test_the_mechanism_probe_reads_forces_consistent_with_the_energy(planted_run):
    """The planted model's forces are exact derivatives of its energy: the mechanism probe must say so.  Its
    check stays below the wall height; over the steep short-range wall the scan's central differences reach
    hundreds of eV/Å and used to be reported as a force-energy disagreement."""
    _, out = planted_run
    md = (out / "report.md").read_text()
    m = re.search(r"⟨\|F·r̂ \+ dE/dR\|⟩ <= ([0-9.eE+-]+) eV/Å", md)
    assert m is not None and float(m.group(1)) < 0.01, md[md.find("Mechanism probe"):][:300]
    assert "Forces and energy disagree" not in md
