"""Reports that explain themselves (jaxcert/report/explain.py), defect ± stderr, round plot ticks
(jaxcert/report/html.py)."""

import copy
import functools
import html
import math
import re
from pathlib import Path

import numpy as np
import pytest

import jaxcert
from jaxcert.probes import PROBES
from jaxcert.report import explain, format_defect
from jaxcert.report.html import line_plot, linear_ticks, log_ticks, nice_step, tick_label

CHEAP = "equivariance,stress_consistency"
DOCS = Path(__file__).resolve().parents[1] / "docs"


REPORTS = ("clean", "curl", "si_al", "c_si", "one_probe")


@functools.cache
def _lj():
    return jaxcert.models.get("lj")  # one model object, so that runs on it share compiled programs


@functools.cache
def cheap_report(name: str):
    """A real small report, built once per process (tests/test_compare.py uses them too).

    clean: the reference LJ on Si, C; curl: LJ plus a curl force (fails equivariance); si_al: LJ on another
    element set; c_si: the clean run with the elements listed in the other order; one_probe: the clean run
    with fewer probes.  c_si and one_probe reuse the clean run's compiled programs.
    """
    from jaxcert.models import defects

    lj = _lj()
    if name == "curl":
        return jaxcert.certify(defects.curl(lj, 0.3), ["Si", "C"], probes=CHEAP)
    elements = {"clean": ["Si", "C"], "si_al": ["Si", "Al"], "c_si": ["C", "Si"], "one_probe": ["Si", "C"]}[name]
    return jaxcert.certify(lj, elements, probes="stress_consistency" if name == "one_probe" else CHEAP)


def cheap_reports() -> dict:
    """Every report of :func:`cheap_report` by name."""
    return {name: cheap_report(name) for name in REPORTS}


@pytest.fixture(scope="module")
def report():
    return cheap_report("curl")


def _flat(text: str) -> str:
    return " ".join(text.split())


# ------------------------------------------------------------------ explanations
def test_every_probe_has_one_sentence():
    assert set(PROBES) == set(explain.EXPLANATIONS)  # lam (the λ probe) included
    for name, text in explain.EXPLANATIONS.items():
        assert "; a failure means " in text, name
        assert text.endswith(".") and text.count(". ") == 0, f"{name}: one sentence"
    shorts = [explain.short_name(n) for n in explain.EXPLANATIONS]
    assert len(set(shorts)) == len(shorts) and max(map(len, shorts)) <= 8
    assert explain.explain("no_such_probe") is None and explain.short_name("no_such_probe") == "no_such_probe"


def test_table_has_a_legend_counts_gates_honestly_and_explains_only_on_request(report):
    text = report.table(width=100)
    assert "Target:" in text and "Gate: PASS/FAIL" in text and "--explain" in text
    assert "what each probe tests (identity" not in text  # the sentences only on request
    agg = report.aggregate()
    ref = agg["gates_by_profile"]["reference"]
    assert (f"gates {agg['gates_passed']}/{agg['gates_total']} passed (exact profile, {report.precision} floor; "
            f"reference {ref['passed']}/{ref['total']}; {agg['gates_total']} of {len(report.outcomes)} probes "
            "gated)") in " ".join(text.splitlines())
    assert max(len(line) for line in text.splitlines() if not line.startswith("|")) <= 100


def test_table_explains_each_probe_row(report):
    text = report.table(width=100, explain=True)
    table, _, below = text.partition("what each probe tests")
    for o in report.outcomes:
        assert re.search(rf"^\| {o.name}\s+\|", table, re.M), o.name
        assert _flat(explain.explain(o.name)) in _flat(below), o.name
        assert re.search(rf"^  {o.name}\s+\S", below, re.M), "the sentence starts on the probe's own line"
    assert max(len(line) for line in below.splitlines()) <= 100


def test_html_explains_each_probe_row(report):
    page = report.to_html()
    for o in report.outcomes:
        row = re.search(rf"<tr id='probe-{o.name}'>(.*?)</tr>", page, re.S)
        assert row is not None, o.name
        why = re.search(r"<td class=why>(.*?)</td>", row.group(1), re.S)
        assert why is not None and html.unescape(why.group(1)) == explain.explain(o.name)


def test_reading_a_report_doc_is_generated_from_the_module():
    doc = (DOCS / "reports.md").read_text(encoding="utf-8")
    assert explain.markdown() in doc, "regenerate the section with: python3 -m jaxcert.report.explain"


# ------------------------------------------------------------------ defect ± stderr
def test_defect_stderr_is_combined_over_elements_and_printed(report):
    rep = copy.deepcopy(report)
    target = rep.outcomes[1]  # stress_consistency: both elements have a finite defect
    se = [0.01, 0.03]
    for k, v in enumerate(se):
        target.details[k]["defect_stderr"] = np.float64(v)
    before = {p["name"]: set(p) for p in report.to_dict()["probes"]}
    d = {p["name"]: p for p in rep.to_dict()["probes"]}
    p = d[target.name]
    assert p["defect_stderr"] == pytest.approx(math.sqrt(sum(v * v for v in se)) / len(se))
    assert [p["per_element"][el]["defect_stderr"] for el in target.elements] == se
    # an addition; no existing key changes; the noise floor an exact model shows comes with the stderr
    assert set(p) == before[target.name] | {"defect_stderr", "noise_floor"}
    assert p["noise_floor"] == pytest.approx(math.sqrt(2 / math.pi) * np.mean(se))
    assert set(d[rep.outcomes[0].name]) == before[rep.outcomes[0].name]  # no stderr, no key
    shown = format_defect(p["defect"], p["defect_stderr"])
    assert " ± " in shown
    row = next(line for line in rep.table().splitlines() if line.startswith(f"| {target.name}"))
    assert shown in row
    assert html.escape(shown) in rep.to_html()
    # an element without a standard error makes the combined one unknown (null), never a silent partial value
    del target.details[1]["defect_stderr"]
    assert {p["name"]: p for p in rep.to_dict()["probes"]}[target.name]["defect_stderr"] is None


# ------------------------------------------------------------------ ticks
def _is_125(step: float) -> bool:
    m = step / 10.0 ** math.floor(math.log10(step) + 1e-12)
    return any(abs(m - c) < 1e-9 for c in (1, 2, 5, 10))


@pytest.mark.parametrize("seed", range(3))
def test_linear_ticks_are_round_and_cover_the_data(seed):
    rng = np.random.default_rng(seed)
    for _ in range(200):
        scale = 10.0 ** rng.uniform(-9, 9)
        lo = rng.uniform(-1, 1) * scale
        hi = lo + rng.uniform(0.01, 3) * scale
        a, b, ticks = linear_ticks(lo, hi)
        assert a <= lo and b >= hi and ticks[0] == a and ticks[-1] == b
        assert 2 <= len(ticks) <= 8
        steps = np.diff(ticks)
        step = float(np.median(steps))
        assert _is_125(step), (lo, hi, ticks)
        np.testing.assert_allclose(steps, step, rtol=1e-9)
        np.testing.assert_allclose(np.array(ticks) / step, np.round(np.array(ticks) / step), atol=1e-6)
        for t in ticks:  # the label reads back as the tick itself: no 0.0137-like leftovers
            assert float(tick_label(t, step)) == pytest.approx(t, rel=1e-9, abs=step * 1e-9)


def test_a_range_like_0_0013_to_0_0137_gets_round_ticks():
    a, b, ticks = linear_ticks(0.0013, 0.0137)
    labels = [tick_label(t, ticks[1] - ticks[0]) for t in ticks]
    assert nice_step(b - a)[0] in (1, 2, 5)
    assert "0.0137" not in labels and "0.0013" not in labels
    assert all(re.fullmatch(r"-?\d+(\.\d+)?", s) for s in labels)


@pytest.mark.parametrize("lo, hi", [(-17.3, -2.1), (-3.2, 0.4), (0.1, 0.5), (-1.1, -0.9), (2.01, 2.02), (-30, 5)])
def test_log_ticks_are_round(lo, hi):
    a, b, vals = log_ticks(lo, hi)
    assert a <= lo + 1e-12 and b >= hi - 1e-12 and len(vals) >= 2
    assert math.log10(vals[0]) == pytest.approx(a) and math.log10(vals[-1]) == pytest.approx(b)
    exps = [math.log10(v) for v in vals]
    if hi - lo >= 1:  # powers of ten, every 1, 2, 5, 10, ... decades
        assert all(e == round(e) for e in exps)
        assert _is_125(exps[1] - exps[0]) and len(set(np.round(np.diff(exps), 9))) == 1
    else:  # 1, 2, 5 x 10^k, or evenly spaced multiples of such a step on a narrow range
        ok_125 = all(_is_125(v) for v in vals)
        steps = np.diff(vals)
        ok_lin = _is_125(float(steps[0])) and np.allclose(steps, steps[0], rtol=1e-9)
        assert ok_125 or ok_lin, vals
    for v in vals:
        assert float(tick_label(v)) == pytest.approx(v, rel=1e-12)


def test_plot_axes_carry_round_ticks():
    x = np.linspace(0.0013, 0.0137, 30)
    svg = line_plot([("a", x, 3.3e-5 + 0.7e-5 * np.sin(x * 500))], "t", "x", "y")
    svg_log = line_plot([("b", np.arange(9), np.logspace(-13.7, 2.3, 9))], "t", "i", "|λ|", logy=True,
                        markers=True)
    for doc, axis in ((svg, "xtick"), (svg, "ytick"), (svg_log, "xtick")):
        vals = [float(v) for v in re.findall(rf'class="{axis}"[^>]*>([^<]+)<', doc)]
        assert len(vals) >= 2
        step = vals[1] - vals[0]
        assert _is_125(abs(step)), (axis, vals)
        np.testing.assert_allclose(np.array(vals) / step, np.round(np.array(vals) / step), atol=1e-6)
    logs = [float(v) for v in re.findall(r'class="ytick"[^>]*>([^<]+)<', svg_log)]
    assert all(math.log10(v) == round(math.log10(v)) for v in logs) and len(logs) >= 3


# ------------------------------------------------------------------ colours, reference lines, flat panels
def test_score_colours_are_monotone_and_resolve_scores_near_one():
    from jaxcert.report.html import RAMP, score_colour, score_position

    scores = np.concatenate([[0.0], np.logspace(-6, -0.01, 40), 1 - np.logspace(-0.5, -6, 60), [1.0]])
    pos = [score_position(v) for v in np.sort(scores)]
    assert all(b >= a for a, b in zip(pos, pos[1:], strict=False)) and pos[0] == 0.0 and pos[-1] == 1.0
    # the newcomer's case: 0.85 ... 1.00 was one green; now each step is its own colour, 0.99 at the pale middle
    near = [0.85, 0.93, 0.99, 0.999, 0.9999, 1.0]
    assert len({score_colour(v) for v in near}) == len(near)
    assert score_position(0.99) == pytest.approx(0.5, abs=1e-3)
    assert score_colour(1.0) == RAMP[-1] and score_colour(0) == RAMP[0]
    assert score_colour(None) == score_colour(float("nan")) == "#ccc"


def test_score_legend_states_the_scale_and_the_span_of_the_data():
    from jaxcert.report.html import score_legend

    text = score_legend(np.array([[0.512, 0.9993], [np.nan, 0.93]]))
    assert "data-lo='0.512'" in text and "data-hi='0.9993'" in text
    assert "span 0.512 – 0.999 (1 − score down to 7.0e-04)" in text and "log scale of −ln(score)" in text
    assert "≥0.99999" in text and "≤4.5e-5" in text and "this page: 0.512 – 0.999" in text
    assert "no scores" in score_legend([None]).lower()


def test_reference_lines_are_drawn_inside_the_y_range():
    svg = line_plot([("a", np.arange(5), [1.2, 1.3, 1.25, 1.4, 1.35])], "t", "x", "T_conf/T_kin",
                    ref_lines=[(1.0, "target 1")])
    line = re.search(r'<line class="ref" x1="[\d.]+" x2="[\d.]+" y1="([\d.]+)" y2="([\d.]+)"', svg)
    assert line and line.group(1) == line.group(2) and "target 1" in svg
    ticks = [float(v) for v in re.findall(r'class="ytick"[^>]*>([^<]+)<', svg)]
    assert min(ticks) <= 1.0  # the axis widened to show the target
    assert 'class="ref"' not in line_plot([("a", [0, 1], [1e-3, 1e-1])], "t", "x", "y", logy=True,
                                          ref_lines=[(0.0, "zero")])  # no zero on a log axis


def test_a_panel_without_information_is_a_note():
    from jaxcert.report.html import flat_note

    x = np.arange(6.0)
    assert flat_note([("Si", x, np.zeros(6)), ("C", x, np.zeros(6))]) is not None
    assert flat_note([("Si", x, np.full(6, 2.5))]) == "every value is 2.5 (spread 0.0e+00)"
    noise = [("Si", x, 1e-16 * np.array([2, -1, -1, 0, 1, 0]))]
    assert flat_note(noise, 1.6e-8, about=0.0, unit="eV") == "every value lies within 2.0e-16 eV of 0 eV"
    assert flat_note(noise, 0.0, about=0.0) is None  # without a floor, round-off at 1e-16 is data
    assert flat_note([("Si", x, np.exp(-x))], 1e-3, about=0.0) is None


def test_report_page_notes_a_flat_three_body_panel_and_marks_the_temperature_target(report):
    """A pair energy's ΔE₃ (round-off) is a note with the reason; a T_conf/T_kin series gets its line at 1."""
    from jaxcert.report.html import render_report

    rep = copy.deepcopy(report)
    o = rep.outcomes[0]
    tri, tconf = copy.deepcopy(o), copy.deepcopy(o)
    tri.name, tconf.name = "trimer", "config_temperature"
    sep = np.linspace(0, 12, 16)
    tri.details = [{"three_body_vanishing": {"separations": sep, "delta_e3": 1e-16 * np.sin(sep + k),
                                             "noise_floor": 1.6e-8}} for k in range(len(o.elements))]
    tconf.details = [{"ratio_series": 1 + 0.1 * np.cos(np.arange(50.0) + k)} for k in range(len(o.elements))]
    rep.outcomes += [tri, tconf]
    page = render_report(rep)
    assert "Three-body decay ΔE₃</b>: not plotted: every value lies within" in page
    assert "below the probe's noise floor (1.6e-08 eV)" in html.unescape(page) and "no three-body energy" in page
    plots = page[page.index("<div class=plots>"):page.index("<h2>Environment")]
    assert "Three-body decay" not in plots.split("<p class=plotnote>")[0]
    tplot = plots[plots.index("Configurational / kinetic temperature"):]
    assert tplot.count('class="ref"') == 1 and "target 1" in tplot
    # a real three-body decay is plotted, with its zero line
    for k, d in enumerate(tri.details):
        d["three_body_vanishing"]["delta_e3"] = -0.3 * np.exp(-sep / 2) * (1 + 0.1 * k)
    page = render_report(rep)
    assert "not plotted" not in page and "ΔE₃ = 0" in page


def test_a_substrate_far_from_the_models_equilibrium_is_noted():
    """A per-element result that comes from a strongly stressed substrate says so (table and JSON): the reference
    LJ scaled ×20 in energy puts diamond Si under about 1 eV/Å³; on fcc Ar it stays near equilibrium, no note."""
    from jaxcert.detective import planted
    from jaxcert.report.certification import STRESSED_SUBSTRATE

    hard = planted.variant(_lj(), energy_scale=20.0, name="lj×20")
    r = jaxcert.certify(hard, ["Ar", "Si"], probes="stress_consistency")
    stressed = r.aggregate()["stressed_substrates"]
    assert list(stressed) == ["Si"] and stressed["Si"]["stress_consistency"] > STRESSED_SUBSTRATE
    assert "far from the model's equilibrium" in r.table() and "Si (stress_consistency" in r.table()
    assert r.to_dict()["aggregate"]["stressed_substrates"] == stressed
    assert cheap_report("clean").aggregate()["stressed_substrates"] == {}  # the plain LJ on Si, C: none
    assert "far from the model's equilibrium" not in cheap_report("clean").table()
