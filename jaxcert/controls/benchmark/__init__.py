"""The offline mini-benchmark of the benchmark controls on reference data shipped in installed packages.

docs/controls.md, "14. The offline mini-benchmark".  Six sections, each a module with the same shape (``NAME``
and ``run(ctx) -> SectionResult``), each saying what it compares:

1. :mod:`~jaxcert.controls.benchmark.eos` — equations of state of the dcdft set vs WIEN2k PBE (against DFT),
   with WIEN2k vs experiment as the reference-vs-reference floor.
2. :mod:`~jaxcert.controls.benchmark.elastic` — K and G of the cubic metals by the exact and finite-strain
   routes (which must agree) vs experiment.
3. :mod:`~jaxcert.controls.benchmark.prototypes` — space-group retention vs symprec and volume drift when
   relaxing the all-metal AFLOW prototypes (model vs its start).
4. :mod:`~jaxcert.controls.benchmark.rung0` — Rung-0 and the floor of raw MP vs experiment (no model), with
   MP2020's published corrections as the known answer.
5. :mod:`~jaxcert.controls.benchmark.consensus` — the consensus test with shipped checkpoints as the panel
   against raw MP total energies, with labelled synthetic corruptions as the positive control.
6. :mod:`~jaxcert.controls.benchmark.hull` — the hull's invariance to a self-consistent per-element shift.

:func:`run_benchmark` (:mod:`~jaxcert.controls.benchmark.driver`) runs them with one
:class:`~jaxcert.controls.benchmark.context.Context` and returns (and writes, after every section and every
model) one strict-JSON dict; :func:`benchmark_html` renders it; :func:`headline_text` prints the headline.
Bridged (torch) models are optional: without ``jaxcert_bridges`` they are recorded with status ``error`` and
what to install, and the rest runs.
"""

from jaxcert.controls.benchmark.config import (
    COMPARISONS,
    DEFAULT_MODELS,
    DEFAULT_PANEL,
    SCHEMA,
    SECTIONS,
    BenchmarkConfig,
)
from jaxcert.controls.benchmark.driver import RUNNERS, benchmark_html, run_benchmark
from jaxcert.controls.benchmark.headline import headline_text
from jaxcert.controls.benchmark.results import ModelLoad, ModelRun, SectionResult

__all__ = [
    "SCHEMA", "SECTIONS", "COMPARISONS", "DEFAULT_MODELS", "DEFAULT_PANEL", "BenchmarkConfig", "run_benchmark",
    "benchmark_html", "headline_text", "RUNNERS", "ModelLoad", "ModelRun", "SectionResult",
]
