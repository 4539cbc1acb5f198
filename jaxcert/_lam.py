r"""Conservativeness benchmark λ (seed 002; Bigi, Langer & Ceriotti, arXiv:2412.11569): the convenience.

.. math::  \lambda = \frac{\lVert J_{\mathrm{anti}} \rVert_F}{\lVert J \rVert_F},\qquad
           J = \partial F / \partial R,\quad J_{\mathrm{anti}} = \tfrac12 (J - J^T),

on the force OUTPUT of the model (a direct force head is differentiated as it
is).  λ = 0 for forces that are the gradient of an energy and grows towards 1
as the force field acquires curl.

The computation is the suite's ``lam`` probe (:func:`jaxcert.probes.lam`, docs/probes.md §4.16),
run by :func:`jaxcert.probes.run_on_structures`: ``lam(model)`` runs it on the ten seed-002
structures (H2O, CH4, NH3, C2H4, C2H2, SO2, CH3OH, C6H6 from ASE's molecule set, cubic diamond,
periodic graphene; :func:`jaxcert.probes.substrates.lambda_structures`) and returns the per-structure
table as a :class:`LambdaResult`.  Exact mode takes the Jacobian by ``jacfwd`` (one compiled
program per shape group: the eight molecules are padded and vmapped together; padded rows/columns
are exactly zero and do not change either norm).  ``fd=True`` uses central differences of the
forces with a ±``step`` Å displacement (1e-3 Å, the peer benchmark's 2 × 3N force calls) for
comparison with peers.  A structure the model cannot evaluate is recorded as skipped with the
reason.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import numpy as np

from jaxcert.core import inputs
from jaxcert.core.derivatives import EXACT, FiniteDifference
from jaxcert.core.device import machine
from jaxcert.core.model import Model
from jaxcert.core.result import Result
from jaxcert.core.structure import Structure
from jaxcert.probes import LAMBDA_GATE, LamConfig, lambda_of_jacobian, run_on_structures, substrates
from jaxcert.report import package_versions, to_jsonable

__all__ = ["lambda_of_jacobian", "lam", "LambdaResult", "LAMBDA_GATE"]


@dataclasses.dataclass(frozen=True)
class LambdaResult(Result):
    """Per-structure λ (NaN where skipped), mean, max, method and evaluation counts: a frozen
    :class:`~jaxcert.core.result.Result` whose :meth:`to_dict` is the ``jaxcert-lambda/1`` report."""

    model: str
    method: str
    per_structure: dict[str, float]
    n_evals: dict[str, int]
    skipped: dict[str, str]
    wall_s: float
    gate: float = LAMBDA_GATE
    dtype: str | None = None

    @property
    def passed(self) -> bool:
        """The gate: max λ over the evaluated structures ≤ ``gate``.

        False when no structure could be evaluated (nothing was certified) or a λ is non-finite."""
        vals = [v for k, v in self.per_structure.items() if k not in self.skipped]
        return bool(vals) and all(np.isfinite(v) and v <= self.gate for v in vals)

    @property
    def mean(self) -> float:
        v = [x for x in self.per_structure.values() if np.isfinite(x)]
        return float(np.mean(v)) if v else float("nan")

    @property
    def max(self) -> float:
        v = [x for x in self.per_structure.values() if np.isfinite(x)]
        return float(np.max(v)) if v else float("nan")

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable({
            "schema": "jaxcert-lambda/1", "model": self.model, "method": self.method, "dtype": self.dtype,
            "versions": package_versions(),
            "lambda": self.per_structure, "mean": self.mean, "max": self.max, "n_evals": self.n_evals,
            "skipped": self.skipped, "gate_threshold": self.gate, "gate": self.passed,
            "wall_time_s": self.wall_s, "machine": machine(),
        })

    def table(self) -> str:
        lines = [f"λ = ‖J_anti‖/‖J‖ for {self.model} ({self.method})", ""]
        w = max(len(k) for k in self.per_structure) + 2
        for k, v in self.per_structure.items():
            val = f"skip: {self.skipped[k]}" if k in self.skipped else f"{v:.3e}"
            lines.append(f"  {k.ljust(w)}{val}")
        lines.append("")
        lines.append(f"  mean {self.mean:.3e}   max {self.max:.3e}   gate max λ <= {self.gate:g}: "
                     f"{'PASS' if self.passed else 'FAIL'}   ({self.wall_s:.1f} s)")
        return "\n".join(lines)


def lam(model: Model, structures: dict[str, Structure] | None = None, fd: bool = False, step: float = 1e-3,
        dtype: Any = None, gate: float = LAMBDA_GATE) -> LambdaResult:
    """λ on ``structures`` (default: the ten seed-002 structures); see the module docstring.

    ``gate``: the largest λ allowed (:data:`LAMBDA_GATE`); ``step``: the FD displacement in Å.
    """
    step = inputs.positive("step", step, "Å", maximum=0.1)
    gate = inputs.positive("gate", gate, maximum=1.0)

    t0 = time.perf_counter()
    if structures is None:
        structures = substrates.lambda_structures(dtype=dtype)
    engine = FiniteDifference(order=2, step_size=step) if fd else EXACT
    if not structures:
        return LambdaResult(model=model.name, method=f"fd ±{step} Å" if fd else "exact (jacfwd)", per_structure={},
                            n_evals={}, skipped={}, wall_s=time.perf_counter() - t0, gate=gate, dtype=None)
    out = run_on_structures(model, "lam", structures, config=LamConfig(gate=gate, derivatives=engine))
    skipped = {n: st.get("skipped", st.get("error", "")) for n, st, code in
               zip(out.elements, out.details, out.status, strict=True) if code in ("skipped", "error")}
    values = {n: float("nan") if n in skipped else float(d) for n, d in zip(out.elements, out.defect, strict=True)}
    evals = {n: 0 if n in skipped else int(k) for n, k in zip(out.elements, out.n_evals, strict=True)}
    return LambdaResult(model=model.name, method=f"fd ±{step} Å" if fd else "exact (jacfwd)",
                        per_structure=values, n_evals=evals, skipped=skipped,
                        wall_s=time.perf_counter() - t0, gate=gate,
                        dtype=str(next(iter(structures.values())).dtype) if structures else None)
