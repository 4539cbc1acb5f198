"""The escalation report directory (docs/detective.md §5).

``report.md`` and a self-contained ``report.html`` with the seven sections (finding, type, application failure,
figure, reproduction, DFT verification card, confounds closed), ``figure.svg``, ``reproduce.py``,
``escalation.json`` (for machines), ``dft/`` (the card's inputs) and ``evidence.jsonl`` (the memory).  Without
an escalation the directory still gets ``escalation.json`` (``"escalated": false``) and a ``report.md`` that
lists what was rejected and why, and which cells were labelled protocol artefacts.
"""

from __future__ import annotations

import html
import json
import math
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from jaxcert.core.files import atomic_write
from jaxcert.core.result import to_jsonable
from jaxcert.detective._dft_card import decision_table, write_card
from jaxcert.detective._observables import Observable
from jaxcert.detective._oracle import LABEL as ORACLE_LABEL
from jaxcert.detective._oracle import available as oracle_available
from jaxcert.detective._oracle import energies as oracle_energies
from jaxcert.detective._protocols import Cell, Dimers, Protocol, dimer_grid, dimer_metrics, dimer_structure
from jaxcert.detective._registry import protocol_config

__all__ = ["write_report", "headline", "REPRODUCE"]

#: Regions of the in-scope set re-run by reproduce.py and put on the DFT card (the strongest first).
MAX_REGIONS = 6


def _fmt(x: float, spec: str = ".4g") -> str:
    return "n/a" if x is None or not math.isfinite(float(x)) else format(float(x), spec)


def headline(cell: Cell, names: Sequence[str], unit: str = "", observable: Observable | None = None) -> str:
    """One line per cell, printed identically by the report and by ``reproduce.py``.

    With ``observable`` the line gives that observable's values and both its signals, relative (robust z
    against the committee) and absolute (its physical limit), kept apart (docs/detective.md §3).
    """
    t = names[0]
    if observable is None or observable.name not in cell.observables:
        com = ", ".join(f"{n} {_fmt(cell.values.get(n, float('nan')))}" for n in names[1:])
        u = f" {unit}" if unit and unit != "1" else ""  # "1": dimensionless
        return (f"{cell.key}: target {t} {_fmt(cell.values.get(t, float('nan')))}{u}; committee {com}; robust z "
                f"{_fmt(cell.signal.z, '.1f')}; {cell.signal.label}")
    vals = cell.values_of(observable.name, observable.metric)
    o = cell.observables[observable.name]
    u = f" {observable.unit}" if observable.unit and observable.unit != "1" else ""
    com = ", ".join(f"{n} {_fmt(vals.get(n, float('nan')))}" for n in names[1:])
    ab = (f"absolute {o.absolute.label} (limit {observable.limit:g}{u})" if o.absolute is not None else
          "absolute: no limit")
    exc = ("; not a reference here: " + ", ".join(sorted(cell.excluded))) if cell.excluded else ""
    return (f"{cell.key} [{observable.name}]: target {t} {_fmt(vals.get(t, float('nan')))}{u}; committee {com}; "
            f"relative {o.relative.label} (robust z {_fmt(o.relative.z, '.1f')}); {ab}; {o.combined.label}{exc}")


REPRODUCE = '''#!/usr/bin/env python3
"""Minimal reproduction of the escalated finding (jaxcert detective, docs/detective.md §5.5).

Rebuilds the target and committee from their specs, re-runs the protocol on the escalated regions with the
scope-probe settings and prints the headline numbers of report.md.  Runs in minutes on a CPU:

    python3 reproduce.py
"""
import json
import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402

jax.config.update("jax_enable_x64", {x64})

from jaxcert.detective import Committee, headline, make_protocol  # noqa: E402
from jaxcert.specs import load_model  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> int:
    with open(os.path.join(HERE, "escalation.json")) as fh:
        esc = json.load(fh)
    try:
        models = [load_model(spec) for spec in esc["specs"]]
    except Exception as err:  # a model given as a Python object has no spec: edit esc["specs"]
        print(f"cannot rebuild the models from {{esc['specs']}}: {{err}}", file=sys.stderr)
        return 2
    committee = Committee(models[0], models[1:], specs=esc["specs"])
    protocol = make_protocol(esc["protocol"], esc["protocol_config"])
    cells = protocol.run(committee, esc["reproduce"]["regions"], variant=esc["reproduce"]["variant"])
    # members the robustness probe excluded (image interactions larger than the signal), as in the report
    exclude = esc["reproduce"].get("exclude") or {{}}
    cells = [protocol.rejudge(c, committee.target_name, exclude[c.key]) if exclude.get(c.key) else c
             for c in cells]
    name = esc.get("observable_name")
    obs = protocol.observable_named(name) if name else None
    print(f"{{esc['protocol']}}: {{obs.description if obs else protocol.observable}}")
    for cell in cells:
        print(headline(cell, committee.names, protocol.unit, obs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
'''


def _strength(c: Cell, obs: Observable | None, t: str) -> float:
    """Ordering of cells for the report: the target's value in units of the criterion for an observable (so an
    absolute violation with an infinite z does not hide a larger one), else the robust z."""
    if obs is not None:
        from jaxcert.detective._observables import severity_of

        return severity_of(obs, c.metrics.get(t, {}).get(obs.metric, float("nan")))
    return c.signal.z if math.isfinite(c.signal.z) else c.values.get(t, -1e9)


#: the figure's energy window: up to this multiple of the deepest well depth (at least 1 eV) above zero
_WINDOW = 3.0


def _window(series: list[tuple[str, Any, Any]]) -> list[tuple[str, Any, Any]]:
    """The (label, x, y) series without the points of the short-range wall that would squash the well and the
    tail into a flat line (y above max(1 eV, _WINDOW × the deepest well))."""
    ys = [np.asarray(y, float) for _, _, y in series]
    finite = [y[np.isfinite(y)] for y in ys]
    depth = max((float(-y.min()) for y in finite if y.size), default=0.0)
    cap = max(1.0, _WINDOW * max(depth, 0.0))
    out = []
    for (label, x, _), y in zip(series, ys, strict=True):
        keep = np.isfinite(y) & (y <= cap)
        out.append((label, np.asarray(x, float)[keep], y[keep]))
    return out


def _figure(p: Protocol, cells: Sequence[Cell], names: Sequence[str], scope: Mapping[str, Any],
            obs: Observable | None = None) -> str:
    from jaxcert.report import html as _html

    t = names[0]
    name = obs.name if obs is not None else None
    inside = [c for c in cells if p.in_scope(c.region, scope) and c.suspicious_in(name)] or list(cells)
    if not inside:
        return "<p><em>no data for a figure</em></p>"
    best = max(inside, key=lambda c: _strength(c, obs, t))
    if best.data.get("x"):
        series = [("target" if n == t else n, best.data["x"], best.data["y"].get(n, []))
                  for n in names if best.data["y"].get(n)]
        series = _window(series)
        title = f"{best.key}: {obs.description if obs is not None else p.observable}"
        svg = _html.line_plot(series, title[:90], best.data["xlabel"], best.data["ylabel"], width=640, height=360)
        return svg + f"<p><small>target = {html.escape(t)}; energies above {_WINDOW:g} × the deepest well (at least " \
                     "1 eV) are cut so the well and the tail stay readable under the short-range wall.</small></p>"
    if p.name == "adsorption":
        metals = sorted({c.region["metal"] for c in cells})
        ads = sorted({c.region["adsorbate"] for c in cells})
        vals = np.full((len(metals), len(ads)), np.nan)
        for c in cells:
            vals[metals.index(c.region["metal"]), ads.index(c.region["adsorbate"])] = c.values.get(t, np.nan)
        rows = []
        for i, m in enumerate(metals):
            tds = "".join(f'<td style="background:{"#f4a6a6" if v > 0 else "#cfe8cf"}">{_fmt(v, "+.2f")}</td>'
                          for v in vals[i])
            rows.append(f"<tr><th>{html.escape(m)}</th>{tds}</tr>")
        head = "".join(f"<th>{html.escape(a)}</th>" for a in ads)
        return (f'<table class="fig"><caption>E_rel of the target {html.escape(t)} (eV); red = above the separated '
                f"fragments</caption><tr><th></th>{head}</tr>{''.join(rows)}</table>")
    xs = list(range(len(inside)))
    series = [(n, xs, [c.values.get(n, np.nan) for c in inside]) for n in names]
    return _html.line_plot(series, f"{p.name}: value per cell ({', '.join(c.key for c in inside)[:60]})",
                           "cell index", "value", markers=True)


def _xtb(p: Protocol, regions: Sequence[Mapping[str, Any]], committee: Any, budget_s: float = 60.0,
         obs: Observable | None = None) -> list[str]:
    """GFN2-xTB tail fractions on a 0.25 Å grid for at most three pairs within ``budget_s`` seconds (indicative)."""
    import time

    if budget_s <= 0:
        return ["GFN2-xTB: not run (oracle switched off for this run)."]
    if not isinstance(p, Dimers):
        return ["GFN2-xTB: not applicable to this protocol (periodic configurations)."]
    if not oracle_available():
        return ["GFN2-xTB: skipped (tblite is not installed)."]
    lines = []
    t0 = time.perf_counter()
    for reg in list(regions)[:3]:
        a, b = reg["elements"]
        if time.perf_counter() - t0 > budget_s:
            lines.append(f"{a}-{b}: GFN2-xTB skipped (the oracle's time budget of {budget_s:.0f} s is spent).")
            continue
        R, r_tail, _ = dimer_grid(a, b, p.config, committee.cutoff(dimer_structure(a, b, 3.0, committee.dtype)),
                                  step=0.25)
        E = oracle_energies([dimer_structure(a, b, float(r), np.float64).to_ase() for r in R], deadline=t0 + budget_s)
        ok = np.isfinite(E) if E is not None else np.zeros(len(R), bool)
        if E is None or not ok[-1] or ok.sum() < 6:
            lines.append(f"{a}-{b}: GFN2-xTB gave no usable curve (SCF failures at {int((~ok).sum())} of {len(R)} "
                         "points).")
            continue
        m = dimer_metrics(R[ok], E[ok], None, r_tail, p.config.tail_window, p.config.wall_height)
        more = (f"; {obs.name} {m[obs.metric]:.3g} {obs.unit}" if obs is not None and obs.name != "tail_fraction"
                and math.isfinite(m.get(obs.metric, float("nan"))) else "")
        lines.append(f"{a}-{b}: GFN2-xTB tail fraction {m['tail_fraction']:.3f} at {r_tail:.2f} Å (well depth "
                     f"{m['well_depth']:.2f} eV at {m['r_min']:.2f} Å{more}; {int((~ok).sum())} SCF failures "
                     f"dropped) — {ORACLE_LABEL}.")
    return lines


def write_report(out: str, committee: Any, result: Any, esc: Mapping[str, Any] | None,
                 screens: Mapping[str, Sequence[Cell]], protos: Mapping[str, Protocol], elements: Sequence[str],
                 memory: Any, oracle_s: float = 60.0) -> dict[str, Any]:
    """Write the report directory; return the ``escalation.json`` document."""
    names = committee.names
    rejected = [{"hypothesis_id": v["hypothesis_id"], "reason": v["reason"]} for v in result.verdicts
                if v["verdict"] == "reject"]
    artefacts = [{"protocol": a["protocol"], "cell": a["cell"], "reason": a["reason"]} for a in result.artefacts]
    base = {"escalated": bool(result.escalated), "target": names[0], "committee": list(names[1:]),
            "specs": list(committee.specs), "elements": list(elements), "protocols": list(protos),
            "stop_reason": result.stop_reason, "n_evals": int(result.n_evals), "wall_s": float(result.wall_s),
            "rejected": rejected, "protocol_artefacts": artefacts}
    if esc is None:
        doc = {**base, "hypothesis": None, "type": None, "protocol": None, "scope": None, "severity": None,
               "signals": []}
        lines = [f"# jaxcert investigate: no escalation ({result.stop_reason})", "",
                 f"Target **{names[0]}**, committee {', '.join(names[1:])}; protocols {', '.join(protos)}; elements "
                 f"{', '.join(elements)}; {result.n_evals} model evaluations.", ""]
        lines += ["## Rejected hypotheses", ""] + ([f"- `{r['hypothesis_id']}`: {r['reason']}" for r in rejected]
                                                  or ["- none"])
        lines += ["", "## Labelled protocol artefacts (every model fails them; not escalated)", ""]
        lines += [f"- {a['protocol']} {a['cell']}: {a['reason']}" for a in artefacts] or ["- none"]
        _write(out, "report.md", "\n".join(lines) + "\n")
        _write(out, "report.html", _html_page("jaxcert investigate", lines))
        _write(out, "escalation.json", json.dumps(to_jsonable(doc), indent=2))
        return doc

    h, p, decl = esc["hypothesis"], esc["protocol"], esc["declaration"]
    rob = dict(esc["probes"].get("robustness") or {})
    scope_cells: list[Cell] = list(esc["scope_cells"])
    t = names[0]
    obs = p.observable_named(h.observable) if h.observable is not None else None
    oname = h.observable
    inside = [c for c in scope_cells if p.in_scope(c.region, h.scope)]
    flagged = sorted([c for c in inside if c.suspicious_in(oname)], key=lambda c: -_strength(c, obs, t))
    top = flagged[:MAX_REGIONS] or inside[:MAX_REGIONS]
    seeds = [c for c in esc["screen"] if c.key in set(h.seed_cells)]
    heads = [headline(c, names, p.unit, obs) for c in top]
    sev = max((c.values_of(oname, obs.metric if obs else None).get(t, float("nan")) for c in top),
              default=float("nan"))
    scope = dict(h.scope)
    scope.setdefault("elements", [])

    def _signals(c: Cell) -> dict[str, Any]:
        row = {"cell": c.key, **c.signal_of(oname).to_dict()}
        if obs is not None and oname in c.observables:  # the two kinds apart (docs/detective.md §3)
            o = c.observables[oname]
            row["relative"] = o.relative.to_dict()
            row["absolute"] = o.absolute.to_dict() if o.absolute is not None else None
        return row

    doc = {**base, "hypothesis": {"id": h.id, "statement": h.statement, "origin": h.origin,
                                  "evidence": h.evidence},
           "type": h.signal_type, "protocol": p.name, "protocol_config": protocol_config(p),
           "observable": obs.description if obs is not None else p.observable,
           "observable_name": oname, "unit": obs.unit if obs is not None else p.unit,
           "criterion": obs.describe() if obs is not None else None, "scope": scope, "severity": sev,
           "signals": [_signals(c) for c in top],
           "other_observables": _others(p, esc["screen"], t, oname),
           "verdict": esc["verdict"], "declaration": {k: decl[k] for k in ("expected_failures", "expected_clean",
                                                                             "criteria", "refuted_if")},
           "reproduce": {"regions": [c.region for c in top], "variant": "fine",
                         "exclude": {c.key: (rob.get("excluded") or {}).get(c.key) for c in top
                                     if (rob.get("excluded") or {}).get(c.key)}}, "headline": heads}
    doc["robustness"] = rob or None
    doc["excluded_members"] = {c.key: c.excluded for c in top if c.excluded}
    doc["not_varied"] = p.not_varied()
    doc["per_model"] = {c.key: _per_model(p, c, names, obs) for c in top}

    # (4) figure, (6) DFT card, oracle
    svg = _figure(p, scope_cells, names, h.scope, obs)
    _write(out, "figure.svg", svg if svg.startswith("<svg") else '<svg xmlns="http://www.w3.org/2000/svg"/>')
    configs = []
    for c in top:
        configs += p.configurations(c.region, committee, c)
    card = write_card(os.path.join(out, "dft"), configs)
    ref = top[0] if top else None
    rsig = ref.signal_of(oname) if ref else None
    table = decision_table(h.signal_type, decl, rsig.target if rsig else float("nan"),
                           rsig.committee_median if rsig else float("nan"),
                           rsig.committee_scale if rsig else float("nan"),
                           obs.description if obs is not None else p.observable, obs.unit if obs is not None
                           else p.unit)
    xtb = _xtb(p, [c.region for c in top], committee, budget_s=oracle_s, obs=obs)
    doc["dft_card"] = {"configurations": card, "total_core_hours": float(sum(r["core_hours"] for r in card)),
                       "decision_table": [{"reference": a, "verdict": b} for a, b in table],
                       "pseudopotentials": "placeholders: supply PAW_PBE POTCARs (VASP) and <El>.pbe.UPF (QE)"}
    doc["oracle"] = xtb
    mech, imp = esc["probes"]["mechanism"], esc["probes"]["impact"]
    confounds = list(mech.get("confounds", []))
    n_all = [c.signal_of(oname).n_committee_anomalous for c in top]
    confounds.insert(0, f"a protocol artefact: excluded (committee models crossing the threshold on the escalated "
                        f"cells: {', '.join(map(str, n_all))} of {len(names) - 1})")
    v = esc["verdict"]["numbers"]
    confounds.append(f"a scope larger than claimed: excluded ({v['out_of_scope_hits']}/{v['out_of_scope_scored']} "
                     "out-of-scope cells show it)")
    confounds = confounds[:5]
    doc["confounds_closed"] = confounds
    doc["mechanism"], doc["impact"] = mech["summary"], {"summary": imp["summary"], "boundary": imp["boundary"]}

    seed_txt = [headline(c, names, p.unit, obs) for c in seeds[:6]]
    type_txt = {"exact-constraint violation": "an exact-constraint violation: verification decides the verdict by "
                "re-running the check; DFT supplies reference values only",
                "physical-criterion violation": "the target breaks the observable's absolute physical criterion "
                "whatever the committee says; a reference could still show a small effect, so the DFT reference "
                "decides the size"}.get(h.signal_type, "a committee disagreement: the committee only allocated "
                                                     "suspicion; the DFT reference decides")
    sections = [
        ("1. Finding", [f"{h.statement[0].upper()}{h.statement[1:]}. In the scope probe "
                        f"{v['in_scope_hits']}/{v['in_scope_scored']} in-scope cells show the signal and "
                        f"{v['out_of_scope_hits']}/{v['out_of_scope_scored']} out-of-scope cells do.",
                        "Evidence it started from (the screen):"] + [f"    {s}" for s in seed_txt]
         + _claims(p, top, names, obs, rob, doc)),
        ("2. Type", [f"{h.signal_type.capitalize()} — {type_txt}."]),
        ("3. Application failure", [imp["summary"], imp["boundary"], "Mechanism probe: " + mech["summary"]]),
        ("4. Figure", ["figure.svg (embedded in report.html)."]),
        ("5. Reproduction", ["`python3 reproduce.py` (re-runs the escalated cells with the scope-probe settings; "
                             "minutes on a CPU) prints:"] + [f"    {s}" for s in heads]),
        ("6. DFT verification card", [f"{len(card)} configurations, about {doc['dft_card']['total_core_hours']:.1f} "
                                      "core-hours in total (rough estimate: 0.01 core-h × N_atoms² × N_k). Inputs "
                                      "in dft/vasp/<label>/ (POSCAR via ase.io.write format='vasp', INCAR, KPOINTS; "
                                      "POTCAR not shipped) and dft/qe/<label>.pwi (ase.io.write format="
                                      "'espresso-in'); the pseudopotential files are placeholders that you supply.",
                                      ""] + [f"    {r['label']}: {r['formula']}, {r['atoms']} atoms, k {r['kpoints']},"
                                             f" ~{r['core_hours']:.2g} core-h" for r in card]
         + ["", "Decision table (derived from the pre-registration):"]
         + [f"    - reference: {a} → {b}" for a, b in table]
         + ["", "Independent cheap oracle (indicative, not DFT; never used to decide):"] + [f"    {x}" for x in xtb]),
        ("7. Confounds closed", [f"- {c}" for c in confounds]),
    ]
    md = [f"# Escalation: {h.id}", "", f"Target **{t}**; committee {', '.join(names[1:])}; protocol {p.name} "
          f"({doc['observable']}); {result.n_evals} model evaluations, {result.wall_s:.0f} s.", ""]
    if obs is not None:
        kind = "exact constraint" if obs.exact else "physical criterion"
        lim = f"absolute limit {obs.limit:g} {obs.unit} ({kind})." if obs.limit is not None else "no absolute limit."
        md += [f"Observable `{obs.name}` ({obs.unit}): relative threshold {obs.threshold:g}, z floor {obs.floor:g}, "
               f"{lim} Seed paper: {obs.paper}", ""]
        if doc["other_observables"]:
            md += ["Other observables flagged in the screen (each judged on its own): " + "; ".join(
                f"{k}: {', '.join(v)}" for k, v in doc["other_observables"].items()) + ".", ""]
    for title, body in sections:
        md += [f"## {title}", ""] + [b.replace("    ", "    ", 1) for b in body]
        if title.startswith("4."):
            md += ["", "![figure](figure.svg)"]
        md.append("")
    md += ["## Pre-registration (written before the probes ran)", "",
           f"- expected failures: {', '.join(decl['expected_failures'])}",
           f"- expected clean: {', '.join(decl['expected_clean']) or 'none'}"]
    md += [f"- refuted if {r}" for r in decl["refuted_if"]]
    md += ["", "## Rejected before this one", ""] + ([f"- `{r['hypothesis_id']}`: {r['reason']}" for r in rejected]
                                                    or ["- none"])
    md += ["", "## Protocol artefacts (labelled, not escalated)", ""] + (
        [f"- {a['protocol']} {a['cell']}: {a['reason']}" for a in artefacts] or ["- none"])
    _write(out, "report.md", "\n".join(md) + "\n")
    _write(out, "report.html", _html_page(f"Escalation: {h.id}", md, svg))
    _write(out, "escalation.json", json.dumps(to_jsonable(doc), indent=2))
    _write(out, "reproduce.py", REPRODUCE.format(x64=str(str(committee.dtype) == "float64")))
    return doc


#: per-model metrics printed beside the observable, per protocol (docs/detective.md §5.1).
_BESIDE = {"desorption": (("rise", "eV"), ("binding", "eV"), ("dz_min", "Å"), ("contact_energy", "eV")),
           "dimers": (("well_depth", "eV"), ("r_min", "Å"), ("wall_height", "eV"), ("r_crest", "Å"),
                      ("floor_energy", "eV"))}


def _per_model(p: Protocol, c: Cell, names: Sequence[str], obs: Observable | None) -> dict[str, dict[str, Any]]:
    """model -> the observable's value beside the curve's other numbers (binding, well, ...), and whether the model
    served as a reference in this cell."""
    keys = [(obs.metric, obs.unit)] if obs is not None else []
    keys += [k for k in _BESIDE.get(p.name, ()) if k[0] not in {x[0] for x in keys}]
    return {n: {**{k: c.metrics.get(n, {}).get(k, float("nan")) for k, _ in keys},
                "reference": n != names[0] and n not in c.excluded, "excluded": c.excluded.get(n)} for n in names}


def _claims(p: Protocol, top: Sequence[Cell], names: Sequence[str], obs: Observable | None,
            rob: Mapping[str, Any], doc: Mapping[str, Any]) -> list[str]:
    """The finding's claims as strong as its evidence (docs/detective.md §5.1): every model's numbers beside the
    observable, the members that served as no reference and why, the nuisance variants with the finding per
    variant and its robustness label, and what no variant changed."""
    keys = [(obs.metric, obs.unit)] if obs is not None else []
    keys += [k for k in _BESIDE.get(p.name, ()) if k[0] not in {x[0] for x in keys}]
    out = ["", "Every model on the strongest cells (the observable first, then the curve's other numbers):"]
    for c in top[:3]:
        out.append(f"    {c.key}:")
        for n in names:
            m = c.metrics.get(n, {})
            row = ", ".join(f"{k} {_fmt(m.get(k, float('nan')))}{'' if u == '1' else ' ' + u}" for k, u in keys)
            tag = "target" if n == names[0] else ("not a reference: " + c.excluded[n] if n in c.excluded
                                                 else "reference")
            out.append(f"      {n}: {row} ({tag})")
    if rob.get("variants"):
        out += ["", f"Robustness across the pre-registered nuisance variants: **{rob['label']}**. Varied: "
                + "; ".join(f"{v['variable']} ({v['name']}{', convergence' if v['convergence'] else ''})"
                            for v in rob["variants"]) + "."]
        for key, cr in (rob.get("cells") or {}).items():
            out.append(f"    {key}: {cr['label']}")
            for r in cr["variants"]:
                if not r["applies"]:
                    out.append(f"      {r['variant']}: does not apply")
                    continue
                vals = ", ".join(f"{n} {_fmt(r['values'].get(n, float('nan')))}" for n in names)
                out.append(f"      {r['variant']}: {'holds' if r['holds'] else 'does not hold'} ({r['label']}); {vals}")
            if cr["not_clean"]:
                def _where(xs: Sequence[Mapping[str, Any]]) -> str:
                    return ", ".join(f"{x['variant']} {_fmt(x['value'])}" + (" excluded" if x["excluded"] else "")
                                     for x in xs)

                out.append("      committee members not clean in every variant: " + "; ".join(
                    f"{m} ({_where(xs)})" for m, xs in cr["not_clean"].items()))
            out.append("      " + (f"clean in every variant: {', '.join(cr['clean_committee'])}" if
                                   cr["clean_committee"] else "no committee member is clean in every variant: the "
                                   "relative criterion cannot decide here; only the absolute one can"))
    else:
        out += ["", "Robustness: not probed (the protocol declares no nuisance variant, or the search ran without "
                "the robustness probe); the finding was not varied and carries no robustness label."]
    out += ["", "Not varied: " + "; ".join(doc["not_varied"]) + "."]
    return out


def _others(p: Protocol, screen: Sequence[Cell], t: str, oname: str | None) -> dict[str, list[str]]:
    """observable -> screen cells it flags, for every observable of ``p`` other than ``oname``."""
    out: dict[str, list[str]] = {}
    for o in p.observables:
        if o.name == oname:
            continue
        keys = [c.key for c in screen if c.suspicious_in(o.name)]
        if keys:
            out[o.name] = keys
    return out


_CSS = ("body{font-family:system-ui,sans-serif;max-width:64em;margin:1.5em auto;padding:0 1.5em;line-height:1.45}"
        "h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ddd}"
        "pre{background:#f6f6f6;padding:.5em .8em;white-space:pre-wrap;overflow-x:auto}"
        "code{background:#f2f2f2;padding:0 .2em}ul{padding-left:1.4em}"
        "svg{max-width:100%;height:auto}table.fig td{padding:2px 6px}.fig{overflow-x:auto}")


def _inline(text: str) -> str:
    """Escaped text with Markdown's `code` and **bold** as HTML."""
    out = html.escape(text)
    out = re.sub(r"`([^`]+)`", r"<code>\1</code>", out)
    return re.sub(r"\*\*([^*]+)\*\*", r"<b>\1</b>", out)


def markdown_html(lines: Sequence[str], figure: str = "") -> str:
    """The report's Markdown (headings, paragraphs, ``- `` lists, four-space preformatted blocks, the figure line)
    as HTML, so ``report.html`` is the same document as ``report.md``, laid out as a page."""
    parts: list[str] = []
    para: list[str] = []
    pre: list[str] = []
    items: list[str] = []

    def flush() -> None:
        if para:
            parts.append("<p>" + " ".join(_inline(x) for x in para) + "</p>")
            para.clear()
        if pre:
            parts.append("<pre>" + html.escape("\n".join(pre)) + "</pre>")
            pre.clear()
        if items:
            parts.append("<ul>" + "".join(f"<li>{_inline(x)}</li>" for x in items) + "</ul>")
            items.clear()

    for line in lines:
        if line.startswith("    ") and line.strip():
            if para or items:
                flush()
            pre.append(line[4:])
            continue
        if pre:
            flush()
        m = re.match(r"(#{1,3}) (.*)", line)
        if m:
            flush()
            n = len(m.group(1))
            parts.append(f"<h{n}>{_inline(m.group(2))}</h{n}>")
        elif line.startswith("!["):
            flush()
            parts.append(f'<div class="fig">{figure}</div>')
        elif line.startswith("- "):
            if para:
                flush()
            items.append(line[2:])
        elif not line.strip():
            flush()
        else:
            if items:
                flush()
            para.append(line)
    flush()
    return "".join(parts)


def _html_page(title: str, md: Sequence[str], svg: str = "") -> str:
    return (f"<!doctype html><html><head><meta charset='utf-8'><meta name='viewport' "
            f"content='width=device-width, initial-scale=1'><title>{html.escape(title)}</title>"
            f"<style>{_CSS}</style></head><body>{markdown_html(md, svg)}</body></html>")


def _write(folder: str, name: str, text: str) -> None:
    """Atomically (:func:`jaxcert.core.files.atomic_write`: an exclusive, unpredictable temporary, fsync, rename);
    a target that is a symbolic link or not a regular file is refused, nothing written through it."""
    atomic_write(os.path.join(folder, name), text)
