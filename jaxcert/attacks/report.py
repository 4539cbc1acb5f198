"""``AttackReport``: the host-side summary of one relax → attack → relax grid (docs/attacks.md §2, §3).

Data flow: :func:`~jaxcert.attacks.run_grid` returns a :class:`~jaxcert.attacks.GridResult`
(pytrees of arrays); :meth:`AttackReport.from_grid` turns every run into one metric row
(:func:`jaxcert.attacks.metrics.run_metrics`) and keeps the metadata; :meth:`AttackReport.to_json`
and :meth:`AttackReport.table` are what ``jaxcert attack --json`` writes and prints.  The JSON schema
is ``jaxcert-attack/1`` (docs/attacks.md §8).
"""

from __future__ import annotations

import dataclasses
import json
import math
import textwrap
from typing import Any

import numpy as np

from jaxcert.attacks import metrics
from jaxcert.attacks.pipeline import GridResult
from jaxcert.core.device import machine
from jaxcert.core.files import atomic_write
from jaxcert.core.result import Result, to_jsonable

__all__ = ["AttackReport", "TABLE_METRICS", "METRIC_UNITS", "SWEEP_TABLE", "sweep_table", "sweep_warnings",
           "sweep_document",
           "write_sweep_json"]

#: The metrics :meth:`AttackReport.table` prints per run, immediate and after the second relaxation.
TABLE_METRICS = (
    "median_displacement", "max_displacement", "linf_displacement", "max_delta_force", "force_angle_median",
    "delta_energy", "bonds_broken", "bonds_formed", "bond_jaccard_distance", "rdf_l1", "space_group_change",
)
#: the unit each printed metric is in ("" for counts and fractions)
METRIC_UNITS = {
    "median_displacement": "Å", "max_displacement": "Å", "linf_displacement": "Å", "max_delta_force": "eV/Å",
    "force_angle_median": "degrees", "delta_energy": "eV", "bonds_broken": "bonds", "bonds_formed": "bonds",
    "bond_jaccard_distance": "fraction", "rdf_l1": "Å", "space_group_change": "fraction of symprecs",
    "symmetry_op_retention_doc": "fraction",
}


@dataclasses.dataclass(frozen=True)
class AttackReport(Result):
    """Metric rows of every (structure, attack, ε, seed) run of a grid, with the run's metadata.

    A :class:`~jaxcert.core.result.Result`: ``to_dict`` gives the fields as strict JSON types; :meth:`to_json`
    is the ``jaxcert-attack/1`` document written by ``jaxcert attack --json``.

    Attributes:
      model: the model's name.
      rows: one dict per run (:func:`jaxcert.attacks.metrics.run_metrics`), in grid order.
      config: the :class:`~jaxcert.attacks.PipelineConfig` fields and any extra settings.
      structure: free-form description of the input (CLI: spec, source, formula, repeats, cell lengths).
      dtype: "float64" or "float32".
      wall_s: wall time of the grid (compile included), s.
      first_relaxation: steps and convergence of each reference relaxation.
      neighbor_regrowths: times a neighbour list overflowed and the grid was rerun with a larger one (JSON key
        ``neighbor_regrowths``; docs/architecture.md §2.3).
    """

    model: str
    rows: list[dict[str, Any]]
    config: dict[str, Any]
    structure: dict[str, Any] = dataclasses.field(default_factory=dict)
    dtype: str = "float64"
    wall_s: float = float("nan")
    first_relaxation: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    neighbor_regrowths: int = 0

    @classmethod
    def from_grid(cls, grid: GridResult, model_name: str, *, structure: dict[str, Any] | None = None,
                  extra_config: dict[str, Any] | None = None, wall_s: float = float("nan")) -> AttackReport:
        """Summarise every run of ``grid`` on the host (metrics of docs/attacks.md §3)."""
        n_s = int(np.asarray(grid.ref_steps).shape[0])
        shape = (n_s, len(grid.attacks), len(grid.epsilons), len(grid.seeds))
        rows = [metrics.run_metrics(grid, *idx) for idx in np.ndindex(*shape)]
        first = [{"steps": int(np.asarray(grid.ref_steps)[i]), "converged": bool(np.asarray(grid.ref_converged)[i]),
                  "fmax": float(np.asarray(grid.ref_fmax)[i])} for i in range(n_s)]
        dtype = rows[0]["dtype"] if rows else "float64"
        return cls(model=model_name, rows=rows, config=vars(grid.config) | dict(extra_config or {}),
                   structure=dict(structure or {}), dtype=dtype, wall_s=wall_s, first_relaxation=first,
                   neighbor_regrowths=int(grid.neighbor_regrowths))

    @property
    def warnings(self) -> list[str]:
        """Every run's warnings, each once, in order of first appearance."""
        return list(dict.fromkeys(w for r in self.rows for w in r["warnings"]))

    def to_json(self) -> dict[str, Any]:
        """The ``jaxcert-attack/1`` document (strict JSON after :func:`jaxcert.core.result.to_jsonable`)."""
        return to_jsonable({
            "schema": "jaxcert-attack/1", "model": self.model, "structure": self.structure.get("spec"),
            "formula": self.structure.get("formula"), "structure_info": self.structure, "dtype": self.dtype,
            "config": self.config, "warnings": self.warnings, "wall_s": self.wall_s, "machine": machine(),
            "first_relaxation": self.first_relaxation, "neighbor_regrowths": self.neighbor_regrowths,
            "runs": self.rows,
        })

    def write_json(self, path: str) -> None:
        """Write :meth:`to_json` to ``path`` atomically (:func:`jaxcert.core.files.atomic_write`: an exclusive
        temporary, fsync, rename; a link is refused)."""
        atomic_write(path, json.dumps(self.to_json(), indent=2, allow_nan=False))

    def table(self) -> str:
        """Plain-text summary: per run, the settings, the second relaxation and the metric table."""
        lines = []
        for r in self.rows:
            start = {"uniform": ", uniform random start",
                     "sign": f", random sign start ±{r['random_start_fraction']:g} eps"}.get(r["random_start"], "")
            pct = r.get("epsilon_percent_min")
            rel = (f"{pct:.3g}% of min lattice" if pct is not None and math.isfinite(pct) else
                   "no periodic axis, no % of lattice")
            lines.append(f"\n{r['attack_label']} eps={r['epsilon']:g} ({r['epsilon_A']:.4g} A, "
                         f"{rel}) seed={r['seed']}{start}: second relaxation "
                         f"{r['steps_after']} steps, converged={r['converged_after']}, "
                         f"small_grad_fraction={r['small_grad_fraction']:.3g}")
            lines.append(f"  {'metric':<30}{'unit':<22}{'immediate':>14}{'post-relax':>14}")
            shown: dict[str, dict[str, Any]] = {}  # metric -> {stage: value}, for the NaN footnotes
            for k in TABLE_METRICS:
                v1, v2 = r["immediate"].get(k, float("nan")), r["post_relaxation"].get(k, float("nan"))
                shown[k] = {"immediate": v1, "post_relaxation": v2}
                lines.append(f"  {k:<30}{METRIC_UNITS.get(k, ''):<22}{v1:>14.6g}{v2:>14.6g}")
            per1 = r["immediate"].get("symmetry_op_retention_by_symprec") or {}
            per2 = r["post_relaxation"].get("symmetry_op_retention_by_symprec") or {}
            for sp in per1:  # the retention at each symprec, never a median that hides which one
                v1, v2 = (float("nan") if x is None else x for x in (per1.get(sp), per2.get(sp)))
                name = f"symmetry_op_retention@{sp}"
                shown[name] = {"immediate": v1, "post_relaxation": v2}
                lines.append(f"  {name:<30}{'fraction (symprec Å)':<22}{v1:>14.6g}{v2:>14.6g}")
            lines.extend(_nan_footnotes(r, shown))
            lines.extend(f"  warning: {w}" for w in r["warnings"])
        return "\n".join(lines)


_STAGE_NAMES = {"immediate": "immediate", "post_relaxation": "post-relax"}


def _nan_footnotes(row: dict[str, Any], shown: dict[str, dict[str, Any]]) -> list[str]:
    """One line per printed metric that is NaN at some stage, with the reason
    (:func:`jaxcert.attacks.metrics.nan_reason`): ``  force_angle_median nan (immediate, post-relax): ...``."""
    out = []
    for k, by_stage in shown.items():
        why: dict[str, list[str]] = {}
        for st, v in by_stage.items():
            if v is None or (isinstance(v, float) and math.isnan(v)):
                why.setdefault(metrics.nan_reason(k, row[st], row), []).append(_STAGE_NAMES[st])
        out.extend(f"  {k} nan ({', '.join(where)}): {reason}" for reason, where in why.items())
    return out


#: The columns :func:`sweep_table` prints per run: (header, dotted path into the row, unit).
SWEEP_TABLE = (
    ("max_disp", "post_relaxation.max_displacement", "Å"),
    ("max_dF", "immediate.max_delta_force", "eV/Å"),
    ("dE/atom", "post_relaxation.delta_energy_per_atom", "eV/atom"),
    ("bonds_broken", "post_relaxation.bonds_broken", "bonds"),
    ("sg_change", "post_relaxation.space_group_change", "fraction of symprecs"),
)


def sweep_table(rows: list[dict[str, Any]], limit: int | None = 200) -> str:
    """The results of a sweep as text: one line per (structure, attack, ε, seed) run with the second relaxation and
    the key metrics of :data:`SWEEP_TABLE`, a legend, and one line per column holding NaN with the reasons
    (:func:`jaxcert.attacks.metrics.nan_reason`).  At most ``limit`` runs are printed (a note gives the rest)."""
    if not rows:
        return "no runs stored for this grid yet"
    shown = rows if limit is None else rows[:limit]
    heads = ["structure", "attack", "eps", "eps_A", "seed", "steps", "converged", *(h for h, _, _ in SWEEP_TABLE)]
    body = []
    for r in shown:
        body.append([str(r.get("structure")), str(r.get("attack_label", r.get("attack"))), f"{r.get('epsilon'):g}",
                     f"{metrics.value(r, 'epsilon_A'):.4g}", str(r.get("seed")), str(r.get("steps_after")),
                     str(r.get("converged_after")), *(f"{metrics.value(r, path):.4g}" for _, path, _ in SWEEP_TABLE)])
    width = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(heads)]
    lines = ["  ".join(h.ljust(w) if i < 2 else h.rjust(w) for i, (h, w) in enumerate(zip(heads, width, strict=True)))]
    lines += ["  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(b, width, strict=True)))
              for b in body]
    if len(shown) < len(rows):
        lines.append(f"... {len(rows) - len(shown)} more runs (all of them: --export FILE.csv, --json FILE, or "
                     "jaxcert plot-sweep)")
    legend = ("eps: as given (Å, or a fraction of the lattice with --relative); eps_A: in Å; steps, converged: the "
              "second relaxation; " + "; ".join(f"{h}: {path} ({unit})" for h, path, unit in SWEEP_TABLE))
    lines.extend(textwrap.wrap(legend, 120))
    for h, path, _ in SWEEP_TABLE:
        stage, _, metric = path.partition(".")
        why: dict[str, int] = {}
        for r in rows:
            if math.isnan(metrics.value(r, path)):
                reason = metrics.nan_reason(metric, r.get(stage) or {}, r)
                why[reason] = why.get(reason, 0) + 1
        lines.extend(f"{h} nan in {n} of {len(rows)} runs: {reason}" for reason, n in why.items())
    return "\n".join(lines)


def sweep_warnings(rows: list[dict[str, Any]]) -> list[str]:
    """One warning per kind over a sweep's stored rows: runs that started at a stationary point without a random
    start (FGSM/I-FGSM moved nothing there or followed round-off), ε above half the smallest lattice vector,
    non-finite energies or positions."""
    out: list[str] = []
    n = len(rows)
    still = [r for r in rows if r.get("stationary_start") and r.get("random_start") == "none"]
    big = [r for r in rows if r.get("epsilon_exceeds_half_cell")]
    bad = [r for r in rows if r.get("nonfinite")]
    if still:
        labels = sorted({r["structure"] for r in still})
        out.append(f"{len(still)} of {n} runs started at a stationary point (the attack gradient at the reference "
                   f"is below its tolerance, e.g. {', '.join(labels[:3])}), and FGSM/I-FGSM without a random start "
                   "moved nothing there or followed round-off; rerun with --random-start")
    if big:
        labels = sorted({r["structure"] for r in big})
        out.append(f"{len(big)} of {n} runs have eps above half the smallest lattice vector (e.g. "
                   f"{', '.join(labels[:3])}): atoms can be moved across the cell and into each other's periodic "
                   "images (rows flagged epsilon_exceeds_half_cell)")
    if bad:
        out.append(f"{len(bad)} of {n} runs have non-finite energies or positions (rows flagged nonfinite)")
    return out


def sweep_document(counts: dict[str, Any], config: Any, atoms: dict[str, Any], rows: list[dict[str, Any]]
                   ) -> dict[str, Any]:
    """The ``jaxcert-sweep/1`` document: run counts, the pipeline settings, the structures (label → how each was
    built) and every stored row (strict JSON after :func:`~jaxcert.report.to_jsonable`)."""
    built = {lab: {"source": x.info.get("jaxcert_source"), "formula": x.get_chemical_formula(), "n_atoms": len(x),
                   "repeats": list(x.info.get("supercell", (1, 1, 1)))} for lab, x in atoms.items()}
    return to_jsonable({"schema": "jaxcert-sweep/1", "counts": counts, "config": vars(config),
                        "structures": list(atoms), "structure_info": built, "runs": rows})


def write_sweep_json(path: str, counts: dict[str, Any], config: Any, atoms: dict[str, Any],
                     rows: list[dict[str, Any]]) -> None:
    """Write :func:`sweep_document` to ``path`` atomically (:func:`jaxcert.core.files.atomic_write`; a link is
    refused)."""
    atomic_write(path, json.dumps(sweep_document(counts, config, atoms, rows), indent=2, allow_nan=False))
