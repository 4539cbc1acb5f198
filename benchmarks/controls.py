"""The offline mini-benchmark of the benchmark controls (issue 14; docs/controls.md, section 14).

A thin script around :func:`jaxcert.controls.run_benchmark` (the same run as ``jaxcert controls``) that also
records the machine and its load average (``benchmarks/_record.py``) and writes the committed results:

* ``eos``: equations of state of the dcdft set vs WIEN2k (against DFT), Δ, V0/B0 errors, bootstrap over
  elements; WIEN2k vs experiment on the same elements is the reference-vs-reference floor;
* ``elastic``: K and G of cubic metals, exact relaxed-ion and finite-strain routes, vs experiment, stratified
  magnetic 3d vs the rest;
* ``prototypes``: symmetry retention vs symprec (0.01, 0.05, 0.1 Å) and volume drift of the all-metal AFLOW
  prototypes (model vs its start);
* ``rung0``: Rung-0 and the floor on raw MP vs experiment (no model), the constants against MP2020's;
* ``consensus``: the shipped checkpoints as the panel vs raw MP energies, synthetic corruptions as the control;
* ``hull``: E_hull invariance to a self-consistent per-element shift.

The report is rewritten after every section and model (``--resume`` continues a cut run).

Usage: ``python benchmarks/controls.py [--quick] [--models emt,eam,sw,chgnet,sevennet:7net-0]
[--out-json benchmarks/results/controls.json] [--out-html benchmarks/results/controls.html]``.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys

from _record import finish  # benchmarks/_record.py: run as a script from benchmarks/

from jaxcert.controls import (
    DEFAULT_MODELS,
    DEFAULT_PANEL,
    SECTIONS,
    BenchmarkConfig,
    benchmark_html,
    headline_text,
    run_benchmark,
)

RESULTS = pathlib.Path(__file__).resolve().parent / "results"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="a small run (tests)")
    p.add_argument("--models", default=",".join(DEFAULT_MODELS), help="models of eos, elastic, prototypes")
    p.add_argument("--panel", default=",".join(DEFAULT_PANEL), help="the consensus panel")
    p.add_argument("--sections", default=",".join(SECTIONS), help="sections to run")
    p.add_argument("--out-json", default=str(RESULTS / "controls.json"))
    p.add_argument("--out-html", default=str(RESULTS / "controls.html"))
    p.add_argument("--resume", action="store_true", help="continue the run in --out-json")
    p.add_argument("--n-boot", type=int, default=2000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-steps", type=int, default=500)
    p.add_argument("--prototype-max-atoms", type=int, default=8)
    p.add_argument("--bridged-prototypes", type=int, default=12)
    p.add_argument("--bridged-max-steps", type=int, default=100)
    p.add_argument("--bridge-precision", default="float32")
    a = p.parse_args(argv)
    try:
        cfg = BenchmarkConfig(models=a.models, panel=a.panel, sections=a.sections, quick=a.quick, seed=a.seed,
                              n_boot=a.n_boot, max_steps=a.max_steps, prototype_max_atoms=a.prototype_max_atoms,
                              bridged_prototypes=a.bridged_prototypes,
                              bridged_max_steps=a.bridged_max_steps, bridge_precision=a.bridge_precision)
    except ValueError as err:
        p.error(str(err))
    load_start = os.getloadavg()
    result = run_benchmark(cfg, out_json=a.out_json, out_html=a.out_html, resume=a.resume)
    finish(result, load_start, a.out_json,
           "wall times are inflated (the 15-minute budget was measured under this load); no number but the "
           "timings depends on it")
    with open(a.out_html, "w", encoding="utf-8") as fh:  # again, with the load note
        fh.write(benchmark_html(result))
    print(headline_text(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
