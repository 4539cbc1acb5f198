"""Certification report: strict JSON (``jaxcert-report/1``), a terminal table, a self-contained HTML page.

JSON layout::

    {"schema": "jaxcert-report/1",
     "model": {...}, "elements": [...], "seed": 0, "dtype": "float64",
     "versions": {...}, "machine": {...}, "wall_time_s": ...,
     "probes": [{"name", "target", "defect", "score", "gate", "n_evals", "status", "wall_s",
                 "message", "details": {...},
                 "per_element": {"Si": {"defect", "score", "gate", "n_evals", "status", "details"}, ...}}],
     "aggregate": {"overall", "method", "gates_passed", "gates_total", "n_evals", "sub_scores",
                   "per_element_overall"}}

Every non-finite float becomes ``null`` (``allow_nan=False``); arrays become lists.
"""

from __future__ import annotations

import dataclasses
import html
import json
import math
import platform
from typing import Any

import numpy as np

__all__ = ["Report", "to_jsonable", "SCHEMA"]

SCHEMA = "jaxcert-report/1"


def to_jsonable(x: Any) -> Any:
    """Recursively convert to strict-JSON types (non-finite → None)."""
    if isinstance(x, dict):
        return {str(k): to_jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [to_jsonable(v) for v in x]
    if hasattr(x, "dtype") and hasattr(x, "shape") and not isinstance(x, np.ndarray):
        try:  # jax arrays, including typed PRNG keys
            x = np.asarray(x)
        except TypeError:
            return str(x)
    if isinstance(x, np.ndarray):
        if x.dtype.kind in "OUS" or x.dtype.kind == "V":
            return [to_jsonable(v) for v in x.tolist()]
        return to_jsonable(x.tolist())
    if isinstance(x, (np.bool_, bool)):
        return bool(x)
    if isinstance(x, (np.integer, int)):
        return int(x)
    if isinstance(x, (np.floating, float)):
        f = float(x)
        return f if math.isfinite(f) else None
    if x is None or isinstance(x, str):
        return x
    return str(x)


def _versions() -> dict[str, str]:
    import importlib.metadata as md

    out = {"python": platform.python_version()}
    for pkg in ("jaxcert", "jax", "jaxlib", "ase", "numpy"):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            out[pkg] = "not installed"
    return out


def machine() -> dict[str, Any]:
    """Machine description for reports and benchmark JSON."""
    import os

    import jax

    info = {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "jax_backend": jax.default_backend(),
        "jax_devices": [str(d) for d in jax.devices()],
    }
    try:
        info["load_average_1_5_15min"] = list(os.getloadavg())
    except OSError:
        pass
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    info["cpu_model"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return info


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
    versions: dict[str, str] = dataclasses.field(default_factory=_versions)

    @classmethod
    def from_outcomes(cls, model, elements, seed, dtype, agg, outcomes, wall_s) -> Report:
        info = {"name": model.name, "cutoff": model.cutoff if not callable(model.cutoff) else "per composition",
                "conservative_forces": model.conservative_forces, "stress_head": model.stress_fn is not None}
        info.update(dict(model.info))
        return cls(model=info, elements=list(elements), seed=seed, dtype=dtype, agg=agg, outcomes=list(outcomes),
                   wall_s=wall_s)

    # ---------------------------------------------------------------- numbers
    def probe(self, name: str) -> dict[str, Any]:
        """The JSON dict of one probe."""
        for p in self.to_dict()["probes"]:
            if p["name"] == name:
                return p
        raise KeyError(name)

    def aggregate(self) -> dict[str, Any]:
        from jaxcert.probes.suite import combine_scores

        sums = {o.name: o.summary() for o in self.outcomes}
        sub = {k: v["score"] for k, v in sums.items()}
        gates = {k: v["gate"] for k, v in sums.items() if v["gate"] is not None}
        per_el = {}
        for k, el in enumerate(self.elements):
            per_el[el] = combine_scores([float(o.score[k]) for o in self.outcomes], self.agg)
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
            per = {
                el: {
                    "defect": o.defect[k], "score": o.score[k],
                    "gate": bool(o.gate[k]) if o.gated and o.status[k] != "skipped" else None,
                    "n_evals": int(o.n_evals[k]), "status": o.status[k], "details": o.details[k],
                }
                for k, el in enumerate(o.elements)
            }
            probes.append({
                "name": o.name, "target": o.target, "defect": s["defect"], "score": s["score"], "gate": s["gate"],
                "n_evals": s["n_evals"], "status": s["status"], "wall_s": o.wall_s, "message": o.message,
                **({"host_evaluations": o.host_evals} if getattr(o, "host_evals", None) is not None else {}),
                "details": {"per_element_score": {el: o.score[k] for k, el in enumerate(o.elements)},
                            "per_element_defect": {el: o.defect[k] for k, el in enumerate(o.elements)}},
                "per_element": per,
            })
        return to_jsonable({
            "schema": SCHEMA, "model": self.model, "elements": self.elements, "seed": self.seed,
            "dtype": self.dtype, "versions": self.versions, "machine": machine(), "wall_time_s": self.wall_s,
            "probes": probes, "aggregate": self.aggregate(),
        })

    def to_json(self, path: str | None = None, indent: int = 2) -> str:
        text = json.dumps(self.to_dict(), indent=indent, allow_nan=False)
        if path is not None:
            with open(path, "w") as fh:
                fh.write(text + "\n")
        return text

    # ------------------------------------------------------------------ table
    def table(self) -> str:
        """Terminal table: Probe | Target | Defect | Score | Evals | Gate (PROBES.md §6.6)."""
        rows = [("Probe", "Target", "Defect", "Score", "Evals", "Gate")]
        for o in self.outcomes:
            s = o.summary()
            if s["status"] == "skipped":
                d, sc = "skip", "skip"
            elif s["status"] == "error":
                d, sc = "crash", f"{s['score']:.3f}"
            else:
                d = "nan" if not np.isfinite(s["defect"]) else f"{s['defect']:.3e}"
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
        lines.append("")
        lines.append(
            f"overall {a['overall']:.4f} ({a['method']}) · gates {a['gates_passed']}/{a['gates_total']} · "
            f"{a['n_evals']} model evaluations · {self.wall_s:.1f} s"
        )
        if "host_evaluations" in a:
            h = a["host_evaluations"]
            lines.append(f"host model: {h['model_evaluations']} geometry evaluations in {h.get('calls', 0)} calls, "
                         f"{h.get('hvp', 0)} H·v products ({h.get('double_backward', 0)} double backward, "
                         f"{h.get('fd_gradient', 0)} finite-difference gradients)")
        if len(self.elements) > 1:
            lines.append(f"averaged over elements: {', '.join(self.elements)}")
        for o in self.outcomes:
            if o.message and o.summary()["status"] in ("error", "skipped"):
                lines.append(f"  {o.name}: {o.message}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()

    # ------------------------------------------------------------------- html
    def to_html(self, path: str | None = None) -> str:
        from jaxcert._html import render_report

        page = render_report(self)
        if path is not None:
            with open(path, "w") as fh:
                fh.write(page)
        return page


def escape(x: Any) -> str:
    return html.escape(str(x))
