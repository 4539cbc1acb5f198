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

import numpy as np

from jaxcert.report import gates as gate_profiles
from jaxcert.report.explain import wrapped
from jaxcert.report.html import render_report
from jaxcert.report.schema import REPORT_SCHEMA
from jaxcert.report.summary import (
    UNSUPPORTED,
    combine_scores,
    combined_stderr,
    compilation_line,
    element_stderr,
    format_defect,
    mean_noise_floor,
    noise_floor,
    printable,
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

#: eV/Å³: a probe substrate whose stress on the model exceeds this in any component is far from the model's
#: equilibrium (about 80 GPa, beyond the bulk modulus of most elements: a strain outside the linear regime), and
#: the report says that the element's results there come from such a state (docs/reports.md).
STRESSED_SUBSTRATE = 0.5
#: details keys that hold the model's stress on a probe's substrate (Voigt, eV/Å³)
_STRESS_KEYS = ("stress_pred_voigt", "stress_voigt")
SCHEMA = REPORT_SCHEMA  # the reader checks files against the same name (jaxcert/report/schema.py)


def probe_stderr(outcome: Any) -> tuple[float | None, list[float | None]] | None:
    """(combined stderr, per-element stderrs) of a probe outcome; ``None`` when no element carries one."""
    per = [element_stderr(d) for d in outcome.details]
    if all(se is None for se in per):
        return None
    return combined_stderr(outcome.defect, per), per


def _mean_floor(outcome: Any, se: tuple[float | None, list[float | None]] | None) -> float | None:
    """The noise floor of a statistical probe's element-mean defect (:func:`mean_noise_floor`), else ``None``."""
    return None if se is None else mean_noise_floor(outcome.defect, se[1])


def throughput_line(t: dict[str, Any]) -> str:
    """One line for the terminal: "throughput: 1.2e+03 model evaluations/s (suite) · 1.1e+05 ± 7.5e+03 atom·steps/s
    (NVE on the published board's NaCl cell, 100 atoms) · peak memory 0.49 GB on cpu ..." (docs/board.md,
    "Throughput"); a part that was not measured is left out, one that failed says why."""
    parts = []
    suite = t.get("suite") or {}
    if suite.get("evals_per_s") is not None:
        parts.append(f"{suite['evals_per_s']:.3g} model evaluations/s (suite)")
    nacl = t.get("nacl") or {}
    if nacl.get("atom_steps_per_s") is not None:
        sd = nacl.get("atom_steps_per_s_stdev")
        parts.append(f"{nacl['atom_steps_per_s']:.3g}" + (f" ± {sd:.2g}" if sd is not None else "") +
                     f" atom·steps/s (NVE on the published board's NaCl cell, {nacl.get('n_atoms')} atoms)")
    elif nacl.get("error"):
        parts.append(f"NaCl throughput not measured ({nacl['error'][:120]})")
    md = t.get("md") or {}
    if md.get("atom_steps_per_s") is not None:
        parts.append(f"{md['atom_steps_per_s']:.3g} atom·steps/s (NVE velocity Verlet, {md.get('n_atoms')} "
                     f"{md.get('element')} atoms)")
    elif md.get("error"):
        parts.append(f"MD throughput not measured ({md['error'][:120]})")
    mem = (t.get("peak_memory") or {}).get("host_rss_bytes")
    if isinstance(mem, int) and not isinstance(mem, bool):
        parts.append(f"peak memory {mem / 1e9:.2f} GB")
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
    #: the gate profile of the verdicts (:mod:`jaxcert.report.gates`): ``"exact"`` (default) or ``"reference"``
    profile: str = gate_profiles.DEFAULT_PROFILE

    @classmethod
    def from_outcomes(cls, model, elements, seed, dtype, agg, outcomes, wall_s,
                      machine: dict[str, Any] | None = None, card: dict[str, Any] | None = None,
                      throughput: dict[str, Any] | None = None,
                      compilation: dict[str, Any] | None = None,
                      profile: str = gate_profiles.DEFAULT_PROFILE) -> Report:
        info = {"name": model.name, "cutoff": model.cutoff if not callable(model.cutoff) else "per composition",
                "conservative_forces": model.conservative_forces, "stress_head": model.stress_fn is not None}
        info.update(dict(model.info))
        return cls(model=info, elements=list(elements), seed=seed, dtype=dtype, agg=agg, outcomes=list(outcomes),
                   wall_s=wall_s, machine=dict(machine or {}), card=card, throughput=throughput,
                   compilation=compilation, profile=gate_profiles.check_profile(profile, "profile"))

    # ---------------------------------------------------------------- verdicts
    @property
    def precision(self) -> str:
        """The model's compute precision, which sets the exact profile's floor (:func:`gates.model_precision`)."""
        return gate_profiles.model_precision(self.model, self.card, self.dtype)

    def with_profile(self, profile: str) -> Report:
        """The same results judged under another gate profile (nothing is recomputed)."""
        return dataclasses.replace(self, profile=gate_profiles.check_profile(profile, "profile"))

    def verdicts(self, profile: str | None = None) -> dict[str, list[gate_profiles.Verdict]]:
        """Probe → one :class:`~jaxcert.report.gates.Verdict` per element (or structure), recomputed from the
        stored defects and details under ``profile`` (default: the report's)."""
        profile = self.profile if profile is None else gate_profiles.check_profile(profile, "profile")
        prec = self.precision
        out = {}
        for o in self.outcomes:
            details = o.details_json()
            p_o = gate_profiles.precision_of_probe(prec, getattr(o, "host_evals", None))
            out[o.name] = [gate_profiles.judge(o.name, o.defect[k], details[k], o.status[k], profile, p_o,
                                               message=o.message) for k in range(len(o.elements))]
        return out

    def probe_gates(self, profile: str | None = None) -> dict[str, bool | None]:
        """Probe → its gate under ``profile``: every element that ran passed (``None``: not gated, or nothing ran)."""
        out = {}
        for name, vs in self.verdicts(profile).items():
            judged = [v.passed for v in vs if v.passed is not None]
            out[name] = all(judged) if judged else None
        return out

    def failures(self, profile: str | None = None) -> list[str]:
        """One line per (probe, element) whose gate failed or that crashed: "probe [El]: reason"."""
        return [f"{name} [{el}]: {v.reason}" for o in self.outcomes
                for name, vs in [(o.name, self.verdicts(profile)[o.name])]
                for el, v in zip(o.elements, vs, strict=True) if v.passed is False]

    def skips(self) -> list[str]:
        """One line per probe that did not run on some element: "probe [El, ...]: reason"."""
        lines = []
        for o in self.outcomes:
            by_reason: dict[str, list[str]] = {}
            for el, v in zip(o.elements, self.verdicts()[o.name], strict=True):
                if v.passed is None and v.reason:
                    by_reason.setdefault(v.reason, []).append(el)
            lines += [f"{o.name} [{', '.join(els)}]: {why}" for why, els in by_reason.items()]
        return lines

    # ---------------------------------------------------------------- numbers
    def probe(self, name: str) -> dict[str, Any]:
        """The JSON dict of one probe."""
        for p in self.to_dict()["probes"]:
            if p["name"] == name:
                return p
        raise KeyError(name)

    def stressed_substrates(self) -> dict[str, dict[str, float]]:
        """element -> {probe: largest |σ| component (eV/Å³)} for every probe whose substrate the model puts under
        more than :data:`STRESSED_SUBSTRATE`: per-element results that come from a state far from the model's
        equilibrium (the reference crystals of B, P and S carry 1.7–4.5 eV/Å³ on nequix-mp-1)."""
        out: dict[str, dict[str, float]] = {}
        for o in self.outcomes:
            for k, el in enumerate(o.elements):
                d = o.details[k] if k < len(o.details) and isinstance(o.details[k], dict) else {}
                for key in _STRESS_KEYS:
                    if d.get(key) is None:
                        continue
                    m = float(np.max(np.abs(np.asarray(d[key], np.float64))))
                    if np.isfinite(m) and m > STRESSED_SUBSTRATE:
                        out.setdefault(el, {})[o.name] = m
        return out

    def aggregate(self) -> dict[str, Any]:
        sums = {o.name: o.summary() for o in self.outcomes}
        sub = {k: v["score"] for k, v in sums.items()}
        by_profile = {p: self.probe_gates(p) for p in gate_profiles.PROFILES}
        gates = {k: v for k, v in by_profile[self.profile].items() if v is not None}
        skipped = [o.name for o in self.outcomes if sums[o.name]["status"] == "skipped"]
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
            "gate_profile": self.profile,
            "gates_by_profile": {p: {"passed": int(sum(bool(v) for v in g.values() if v is not None)),
                                     "total": sum(v is not None for v in g.values())} for p, g in by_profile.items()},
            "skipped_probes": skipped,
            "per_element_overall": per_el,
            "stressed_substrates": self.stressed_substrates(),
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
        verdicts = {p: self.verdicts(p) for p in gate_profiles.PROFILES}
        probe_gates = {p: self.probe_gates(p) for p in gate_profiles.PROFILES}
        for o in self.outcomes:
            s = o.summary()
            se = probe_stderr(o)
            details = o.details_json()
            mine = verdicts[self.profile][o.name]
            per = {
                el: {
                    "defect": o.defect[k], "score": o.score[k], "gate": mine[k].passed,
                    "gates": {p: verdicts[p][o.name][k].passed for p in gate_profiles.PROFILES},
                    "gate_threshold": mine[k].threshold or None, "reason": mine[k].reason,
                    "n_evals": int(o.n_evals[k]), "status": o.status[k], "details": details[k],
                    **({"defect_stderr": se[1][k]} if se is not None else {}),
                    **({"noise_floor": noise_floor(se[1][k])} if se is not None else {}),
                }
                for k, el in enumerate(o.elements)
            }
            floor = _mean_floor(o, se)
            probes.append({
                "name": o.name, "target": o.target, "defect": s["defect"], "score": s["score"],
                "gate": probe_gates[self.profile][o.name],
                "gates": {p: probe_gates[p][o.name] for p in gate_profiles.PROFILES},
                "reasons": [f"{el}: {v.reason}" for el, v in zip(o.elements, mine, strict=True) if v.reason],
                **({"noise_floor": floor} if floor is not None else {}),
                **({"defect_stderr": se[0]} if se is not None else {}),
                "n_evals": s["n_evals"], "status": s["status"], "wall_s": o.wall_s, "message": o.message,
                **({"host_evaluations": o.host_evals} if getattr(o, "host_evals", None) is not None else {}),
                "details": {"per_element_score": {el: o.score[k] for k, el in enumerate(o.elements)},
                            "per_element_defect": {el: o.defect[k] for k, el in enumerate(o.elements)}},
                "per_element": per,
            })
        return to_jsonable({
            "schema": SCHEMA, "model": self.model, "elements": self.elements, "seed": self.seed,
            "dtype": self.dtype, "precision": self.precision, "gate_profile": self.profile,
            "versions": self.versions, "machine": self.machine, "wall_time_s": self.wall_s,
            "probes": probes, "aggregate": self.aggregate(),
            **({"card": self.card} if self.card is not None else {}),
            **({"throughput": self.throughput} if self.throughput is not None else {}),
            **({"compilation": self.compilation} if self.compilation is not None else {}),
        })

    def to_json(self, path: str | None = None, indent: int = 2) -> str:
        text = json.dumps(self.to_dict(), indent=indent, allow_nan=False)
        if path is not None:  # atomically, never through a link (jaxcert.core.files)
            from jaxcert.core.files import atomic_write

            atomic_write(path, text + "\n")
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
        probe_gates = self.probe_gates()
        warning = self.model.get("warning") if isinstance(self.model, dict) else None
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
            g = probe_gates[o.name]
            gate = "" if g is None else ("PASS" if g else "FAIL")
            rows.append((printable(o.name, keep=""), f"{o.target:g}", d, sc, str(s["n_evals"]), gate))
        widths = [max(len(r[c]) for r in rows) for c in range(6)]
        # text from the model or its report (warning, failure reasons, model notes) is printed with its control
        # characters as visible escapes (jaxcert.report.summary.printable; docs/compare.md, "Hostile reports")
        lines = textwrap.wrap(printable(f"model warning: {warning}", keep=""), width=width) if warning else []
        for k, r in enumerate(rows):
            cells = [r[0].ljust(widths[0])] + [r[c].rjust(widths[c]) for c in range(1, 6)]
            lines.append("| " + " | ".join(cells) + " |")
            if k == 0:
                lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
        a = self.aggregate()
        lines += textwrap.wrap(LEGEND, width=width)
        lines.append("")
        lines += textwrap.wrap(
            f"overall {a['overall']:.4f} ({a['method']}) · {self.gates_line(a)} · "
            f"{a['n_evals']} model evaluations · {self.wall_s:.1f} s", width=width)
        for mark, found in (("FAIL", self.failures()), ("skip", self.skips())):
            for line in found:
                lines += textwrap.wrap(printable(f"{mark} {line}", keep=""), width=width, initial_indent="  ",
                                       subsequent_indent="      ")
        lines += self._floor_lines(width)
        stressed = a["stressed_substrates"]
        if stressed:
            lines += textwrap.wrap(
                f"far from the model's equilibrium (|σ| > {STRESSED_SUBSTRATE:g} eV/Å³ on a probe's substrate; these "
                "per-element results come from a strongly stressed state): " + "; ".join(
                    f"{el} ({', '.join(f'{p} {v:.2g} eV/Å³ = {v * 160.2177:.0f} GPa' for p, v in ps.items())})"
                    for el, ps in stressed.items()), width=width, initial_indent="  ", subsequent_indent="    ")
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
        for o in self.outcomes:  # what the model's own package said while this probe ran (bridged models)
            for k, el in enumerate(o.elements):
                for text in (o.details[k].get("model_notes", ()) if isinstance(o.details[k], dict) else ()):
                    lines.append("  " + printable(f"{o.name} [{el}] model note: {text}", keep=""))
        if not explain:
            lines.append("what each probe tests and what a failure means: --explain, the HTML report, or "
                         "docs/reports.md")
            return printable("\n".join(lines))
        why = wrapped([o.name for o in self.outcomes], width=width,
                      title="what each probe tests (identity; what a failure means):")
        if why:
            lines += [""] + why
        return printable("\n".join(lines))

    def gates_line(self, a: dict[str, Any] | None = None) -> str:
        """"gates 9/10 passed (exact profile, float32 floor; reference 10/10) · 1 probe skipped (parity)"."""
        a = self.aggregate() if a is None else a
        other = [p for p in gate_profiles.PROFILES if p != self.profile]
        others = "; ".join(f"{p} {a['gates_by_profile'][p]['passed']}/{a['gates_by_profile'][p]['total']}"
                           for p in other)
        text = (f"gates {a['gates_passed']}/{a['gates_total']} passed ({self.profile} profile"
                + (f", {self.precision} floor" if self.profile == "exact" else "") + f"; {others}; "
                f"{a['gates_total']} of {len(self.outcomes)} probes gated)")
        if a["skipped_probes"]:
            n = len(a["skipped_probes"])
            text += f" · {n} probe{'s' if n > 1 else ''} skipped ({', '.join(a['skipped_probes'])})"
        return text

    def _floor_lines(self, width: int) -> list[str]:
        """One line on the statistical probes' noise floors: what an exact model shows at this trajectory length."""
        parts = []
        for o in self.outcomes:
            se = probe_stderr(o)
            floor = _mean_floor(o, se)
            d = o.summary()["defect"]
            if floor is None or not floor > 0 or d is None or not np.isfinite(d):
                continue
            parts.append(f"{o.name} {d:.2g} vs {floor:.2g} ({d / floor:.1f}×)")
        if not parts:
            return []
        return textwrap.wrap("statistical probes (no gate; an exact model's defect sits near its noise floor "
                             "√(2/π)·se, a broken model's well above it): " + ", ".join(parts), width=width,
                             initial_indent="  ", subsequent_indent="    ")

    def __str__(self) -> str:
        return self.table()

    # ------------------------------------------------------------------- html
    def to_html(self, path: str | None = None) -> str:
        page = render_report(self)
        if path is not None:  # atomically, never through a link (jaxcert.core.files)
            from jaxcert.core.files import atomic_write

            atomic_write(path, page)
        return page

