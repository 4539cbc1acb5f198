"""Certification report: strict JSON (``jaxcert-report/1``), a terminal table, a self-contained HTML page.

JSON layout::

    {"schema": "jaxcert-report/1",
     "model": {...}, "elements": [...], "seed": 0, "dtype": "float64",
     "versions": {...}, "machine": {...}, "wall_time_s": ...,
     "probes": [{"name", "target", "defect", "score", "gate", "n_evals", "status", "wall_s",
                 "message", "details": {...},
                 "per_element": {"Si": {"defect", "score", "gate", "n_evals", "status", "details"}, ...}}],
     "aggregate": {"overall", "method", "gates_passed", "gates_total", "n_evals", "sub_scores",
                   "per_element_overall"},
     "card": {...},         # optional: the model card (jaxcert/probes/card.py, docs/board.md)
     "throughput": {...},   # optional: evaluations/s and MD atom·steps/s (jaxcert/probes/throughput.py)
     "compilation": {...}}  # optional: traces, compiles, cache loads and seconds (jaxcert/core/compilation.py)

A probe whose per-element details carry ``defect_stderr`` (the statistical probes) also gets a
top-level ``"defect_stderr"``: the standard error of the element-mean defect, √(Σ_e se_e²)/n over
the n elements that enter the mean (``null`` when one of them has none), and each per-element entry
its own ``"defect_stderr"``; the table and the HTML print "defect ± stderr".

Every non-finite float becomes ``null`` (``allow_nan=False``); arrays become lists.  The terminal
table and the HTML page explain each probe in one sentence (``jaxcert/report/explain.py``; the list is in
``docs/reports.md``).  Several reports side by side: ``jaxcert compare`` (``docs/compare.md``).
"""

from __future__ import annotations

import dataclasses
import json
import platform
import textwrap
from typing import Any

from jaxcert.report.explain import wrapped
from jaxcert.report.html import render_report
from jaxcert.report.schema import REPORT_SCHEMA
from jaxcert.report.summary import (
    NOT_RUN,
    UNSUPPORTED,
    combine_scores,
    combined_stderr,
    compilation_line,
    element_stderr,
    format_defect,
    to_jsonable,
)

__all__ = ["Report", "to_jsonable", "SCHEMA", "package_versions", "format_defect", "combined_stderr",
           "probe_stderr", "throughput_line"]

#: the line under the terminal table that says what its columns and symbols mean (docs/reports.md)
LEGEND = ("Target: the defect of an exact model (0: an identity that must hold exactly; 1: a ratio that is 1 in "
          "equilibrium) · Defect: the probe's distance from it (± standard error of a statistical estimate) · "
          "Score: 1 perfect … 0 broken · Evals: model evaluations this probe paid for (0: it reused the shared "
          "trajectory) · Gate: PASS/FAIL against the probe's threshold; blank: no gate, scored only · "
          "skip: does not apply (reason below)")

SCHEMA = REPORT_SCHEMA  # the reader checks files against the same name (jaxcert/report/schema.py)


def probe_stderr(outcome: Any) -> tuple[float | None, list[float | None]] | None:
    """(combined stderr, per-element stderrs) of a probe outcome; ``None`` when no element carries one."""
    per = [element_stderr(d) for d in outcome.details]
    if all(se is None for se in per):
        return None
    return combined_stderr(outcome.defect, per), per


def throughput_line(t: dict[str, Any]) -> str:
    """One line for the terminal: "throughput: 1.2e+03 evaluations/s (suite) · 4.5e+05 atom·steps/s (NVE, 125
    Si atoms) on cpu ..." (docs/board.md, "Throughput"); a part that was not measured is left out."""
    parts = []
    suite = t.get("suite") or {}
    if suite.get("evals_per_s") is not None:
        parts.append(f"{suite['evals_per_s']:.3g} model evaluations/s (suite)")
    md = t.get("md") or {}
    if md.get("atom_steps_per_s") is not None:
        parts.append(f"{md['atom_steps_per_s']:.3g} atom·steps/s (NVE velocity Verlet, {md.get('n_atoms')} "
                     f"{md.get('element')} atoms)")
    elif md.get("error"):
        parts.append(f"MD throughput not measured ({md['error'][:120]})")
    return "throughput: " + (" · ".join(parts) or "not measured") + f" on {t.get('device', 'unknown device')}"


def package_versions() -> dict[str, str]:
    import importlib.metadata as md

    out = {"python": platform.python_version()}
    for pkg in ("jaxcert", "jax", "jaxlib", "ase", "numpy"):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            out[pkg] = "not installed"
    return out


@dataclasses.dataclass
class Report:
    """Result of :func:`jaxcert.certify` (see the module docstring for the JSON form)."""

    model: dict[str, Any]
    elements: list[str]
    seed: int
    dtype: str
    agg: str
    outcomes: list[Any]
    wall_s: float
    versions: dict[str, str] = dataclasses.field(default_factory=package_versions)
    machine: dict[str, Any] = dataclasses.field(default_factory=dict)  # jaxcert.core.device.machine()
    #: what jaxcert knows of the model without guessing (``jaxcert.probes.card.model_card``; docs/board.md)
    card: dict[str, Any] | None = None
    #: evaluations per second of the suite and MD atom·steps per second (``jaxcert.probes.throughput``)
    throughput: dict[str, Any] | None = None
    #: what the run traced, lowered, compiled and loaded from caches (``jaxcert.core.compilation``)
    compilation: dict[str, Any] | None = None

    @classmethod
    def from_outcomes(cls, model, elements, seed, dtype, agg, outcomes, wall_s,
                      machine: dict[str, Any] | None = None, card: dict[str, Any] | None = None,
                      throughput: dict[str, Any] | None = None,
                      compilation: dict[str, Any] | None = None) -> Report:
        info = {"name": model.name, "cutoff": model.cutoff if not callable(model.cutoff) else "per composition",
                "conservative_forces": model.conservative_forces, "stress_head": model.stress_fn is not None}
        info.update(dict(model.info))
        return cls(model=info, elements=list(elements), seed=seed, dtype=dtype, agg=agg, outcomes=list(outcomes),
                   wall_s=wall_s, machine=dict(machine or {}), card=card, throughput=throughput,
                   compilation=compilation)

    # ---------------------------------------------------------------- numbers
    def probe(self, name: str) -> dict[str, Any]:
        """The JSON dict of one probe."""
        for p in self.to_dict()["probes"]:
            if p["name"] == name:
                return p
        raise KeyError(name)

    def aggregate(self) -> dict[str, Any]:
        sums = {o.name: o.summary() for o in self.outcomes}
        sub = {k: v["score"] for k, v in sums.items()}
        gates = {k: v["gate"] for k, v in sums.items() if v["gate"] is not None}
        per_el = {}
        for el in self.elements:  # by row label: a probe on named structures (lam) has no element rows
            per_el[el] = combine_scores([float(o.score[o.elements.index(el)]) for o in self.outcomes
                                         if el in o.elements], self.agg)
        return {
            "overall": combine_scores(list(sub.values()), self.agg),
            "method": self.agg,
            "gates_passed": int(sum(gates.values())),
            "gates_total": len(gates),
            "n_evals": int(sum(v["n_evals"] for v in sums.values())),
            "sub_scores": sub,
            "gates": gates,
            "per_element_overall": per_el,
            **self._host_totals(),
        }

    def _host_totals(self) -> dict[str, Any]:
        """Host-side model evaluations over all probes (bridged models only; see ``host_evaluations``)."""
        per = [o.host_evals for o in self.outcomes if getattr(o, "host_evals", None) is not None]
        if not per:
            return {}
        tot: dict[str, int] = {}
        for d in per:
            for k, v in d.items():
                tot[k] = tot.get(k, 0) + int(v)
        tot["model_evaluations"] = tot.get("energy", 0) + tot.get("gradient", 0) + tot.get("fd_gradient", 0)
        return {"host_evaluations": tot}

    def to_dict(self) -> dict[str, Any]:
        probes = []
        for o in self.outcomes:
            s = o.summary()
            se = probe_stderr(o)
            details = o.details_json()
            per = {
                el: {
                    "defect": o.defect[k], "score": o.score[k],
                    "gate": bool(o.gate[k]) if o.gated and o.status[k] not in NOT_RUN else None,
                    "n_evals": int(o.n_evals[k]), "status": o.status[k], "details": details[k],
                    **({"defect_stderr": se[1][k]} if se is not None else {}),
                }
                for k, el in enumerate(o.elements)
            }
            probes.append({
                "name": o.name, "target": o.target, "defect": s["defect"], "score": s["score"], "gate": s["gate"],
                **({"defect_stderr": se[0]} if se is not None else {}),
                "n_evals": s["n_evals"], "status": s["status"], "wall_s": o.wall_s, "message": o.message,
                **({"host_evaluations": o.host_evals} if getattr(o, "host_evals", None) is not None else {}),
                "details": {"per_element_score": {el: o.score[k] for k, el in enumerate(o.elements)},
                            "per_element_defect": {el: o.defect[k] for k, el in enumerate(o.elements)}},
                "per_element": per,
            })
        return to_jsonable({
            "schema": SCHEMA, "model": self.model, "elements": self.elements, "seed": self.seed,
            "dtype": self.dtype, "versions": self.versions, "machine": self.machine, "wall_time_s": self.wall_s,
            "probes": probes, "aggregate": self.aggregate(),
            **({"card": self.card} if self.card is not None else {}),
            **({"throughput": self.throughput} if self.throughput is not None else {}),
            **({"compilation": self.compilation} if self.compilation is not None else {}),
        })

    def to_json(self, path: str | None = None, indent: int = 2) -> str:
        text = json.dumps(self.to_dict(), indent=indent, allow_nan=False)
        if path is not None:
            with open(path, "w") as fh:
                fh.write(text + "\n")
        return text

    # ------------------------------------------------------------------ table
    def table(self, width: int = 110, explain: bool = False) -> str:
        """Terminal table: Probe | Target | Defect | Score | Evals | Gate (docs/probes.md §6.6), a legend line
        saying what the columns and symbols mean (docs/reports.md, "Reading the table"), the summary line, and
        with ``explain`` one sentence per probe saying what it tests and what a failure means
        (``jaxcert/report/explain.py``), wrapped at ``width``; without it, one line saying how to get them.

        The defect reads "defect ± stderr" for a probe that reports a standard error.  The summary counts the
        gates honestly: "gates 10/10 passed (10 of 14 probes are gated)" — the statistical probes have no gate
        and are scored only (docs/probes.md §3).
        """
        rows = [("Probe", "Target", "Defect", "Score", "Evals", "Gate")]
        for o in self.outcomes:
            s = o.summary()
            if s["status"] == "skipped":
                d, sc = "skip", "skip"
            elif s["status"] == "error":
                d, sc = "crash", f"{s['score']:.3f}"
            else:
                se = probe_stderr(o)
                d = format_defect(s["defect"], se[0] if se is not None else None)
                sc = f"{s['score']:.3f}"
            gate = "" if s["gate"] is None else ("PASS" if s["gate"] else "FAIL")
            rows.append((o.name, f"{o.target:g}", d, sc, str(s["n_evals"]), gate))
        widths = [max(len(r[c]) for r in rows) for c in range(6)]
        lines = []
        for k, r in enumerate(rows):
            cells = [r[0].ljust(widths[0])] + [r[c].rjust(widths[c]) for c in range(1, 6)]
            lines.append("| " + " | ".join(cells) + " |")
            if k == 0:
                lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
        a = self.aggregate()
        lines += textwrap.wrap(LEGEND, width=width)
        lines.append("")
        lines += textwrap.wrap(
            f"overall {a['overall']:.4f} ({a['method']}) · gates {a['gates_passed']}/{a['gates_total']} passed "
            f"({a['gates_total']} of {len(self.outcomes)} probes are gated) · "
            f"{a['n_evals']} model evaluations · {self.wall_s:.1f} s", width=width)
        if self.compilation:
            lines += textwrap.wrap(compilation_line(self.compilation), width=width)
        if "host_evaluations" in a:
            h = a["host_evaluations"]
            lines.append(f"host model: {h['model_evaluations']} geometry evaluations in {h.get('calls', 0)} calls, "
                         f"{h.get('hvp', 0)} H·v products ({h.get('double_backward', 0)} double backward, "
                         f"{h.get('fd_gradient', 0)} finite-difference gradients)")
        if self.throughput:
            lines.append(throughput_line(self.throughput))
        by_element = [o for o in self.outcomes if list(o.elements) == list(self.elements)]
        unsupported = [el for k, el in enumerate(self.elements)
                       if by_element and all(o.status[k] == UNSUPPORTED for o in by_element)]
        ran = [el for el in self.elements if el not in unsupported]
        if len(ran) > 1:
            lines.append(f"averaged over elements: {', '.join(ran)}")
        if unsupported:
            lines.append(f"not run (the model has no parameters for them; --skip-unsupported): "
                         f"{', '.join(unsupported)}")
        for o in self.outcomes:
            if o.message and o.summary()["status"] in ("error", "skipped"):
                lines.append(f"  {o.name}: {o.message}")
        for o in self.outcomes:  # what the model's own package said while this probe ran (bridged models)
            for k, el in enumerate(o.elements):
                for text in (o.details[k].get("model_notes", ()) if isinstance(o.details[k], dict) else ()):
                    lines.append(f"  {o.name} [{el}] model note: {text}")
        if not explain:
            lines.append("what each probe tests and what a failure means: --explain, the HTML report, or "
                         "docs/reports.md")
            return "\n".join(lines)
        why = wrapped([o.name for o in self.outcomes], width=width,
                      title="what each probe tests (identity; what a failure means):")
        if why:
            lines += [""] + why
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()

    # ------------------------------------------------------------------- html
    def to_html(self, path: str | None = None) -> str:
        page = render_report(self)
        if path is not None:
            with open(path, "w") as fh:
                fh.write(page)
        return page

