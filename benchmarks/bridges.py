"""Full 14-probe suite on a bridged torch model: the exact, batched path vs the finite-difference path.

Runs ``jaxcert.certify`` on CHGNet 0.3.0 (weights in the wheel) for Si, seed 0,
float64, twice in one process:

* **exact**: every J·v / H·v by torch double backward, all geometries of a
  vmapped program in one torch call (the bridge's default);
* **fd**: the same probe code with every probe's ``derivatives`` engine set to
  ``FiniteDifference()`` (central differences of exact forces, the reference
  implementation's recipe): 2 force evaluations per J·v.

Each path runs on a freshly loaded model (its own compiled programs: both
timings include JAX compilation).  Prints and saves wall time, host evaluation
counts (geometries, torch calls, H·v products, double backwards, FD gradients),
the ratio exact/fd, and every probe's defect and gate on both paths, so a
disagreement can be attributed (FD truncation vs the model).

Usage: ``python benchmarks/bridges.py [--model chgnet] [--elements Si]``.
Writes ``benchmarks/results/bridges.json`` with the machine description.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import time

import jax

jax.config.update("jax_enable_x64", True)

import jaxcert_bridges as jb  # noqa: E402
from certify import fd_configs  # noqa: E402  (benchmarks/certify.py: every probe's engine set to FD)

import jaxcert  # noqa: E402
from jaxcert.core.device import machine  # noqa: E402
from jaxcert.report import to_jsonable  # noqa: E402


def one(spec: str, elements: str, configs=None) -> dict:
    model = jb.load(spec)
    t0 = time.perf_counter()
    report = jaxcert.certify(model, elements, seed=0, configs=configs)
    wall = time.perf_counter() - t0
    backend = jb.backend_of(model)
    doc = report.to_dict()
    return {
        "wall_s": wall,
        "host_counts": dict(backend.counts),
        "model_evaluations": backend.evaluations(),
        "n_evals_reported": doc["aggregate"]["n_evals"],
        "overall": doc["aggregate"]["overall"],
        "gates": f"{doc['aggregate']['gates_passed']}/{doc['aggregate']['gates_total']}",
        "probes": {p["name"]: {"defect": p["defect"], "score": p["score"], "gate": p["gate"], "status": p["status"],
                               "wall_s": p["wall_s"], "host_evaluations": p.get("host_evaluations")}
                   for p in doc["probes"]},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="chgnet")
    ap.add_argument("--elements", default="Si")
    ap.add_argument("--out", default=str(pathlib.Path(__file__).parent / "results" / "bridges.json"))
    a = ap.parse_args()
    exact = one(a.model, a.elements)
    fd = one(a.model, a.elements, configs=fd_configs())
    ratio = exact["wall_s"] / fd["wall_s"]
    doc = {"schema": "jaxcert-bench-bridges/1", "model": a.model, "elements": a.elements, "seed": 0,
           "dtype": "float64", "exact": exact, "fd": fd, "exact_over_fd_wall": ratio, "machine": machine()}
    pathlib.Path(a.out).write_text(json.dumps(to_jsonable(doc), indent=2, allow_nan=False))

    def fmt(x):
        return f"{x:.3e}" if isinstance(x, float) else str(x)

    print(f"{'probe':<20} {'exact defect':>13} {'fd defect':>13} {'gate ex/fd':>11} {'t exact':>8} {'t fd':>8}")
    for name, pe in exact["probes"].items():
        pf = fd["probes"][name]
        print(f"{name:<20} {fmt(pe['defect']):>13} {fmt(pf['defect']):>13} {str(pe['gate']):>5}/{str(pf['gate']):<5} "
              f"{pe['wall_s']:>8.1f} {pf['wall_s']:>8.1f}")
    print(f"\nwall: exact {exact['wall_s']:.1f} s, fd {fd['wall_s']:.1f} s, exact/fd = {ratio:.2f}")
    print(f"model evaluations: exact {exact['model_evaluations']}, fd {fd['model_evaluations']}; "
          f"torch calls: exact {exact['host_counts'].get('calls')}, fd {fd['host_counts'].get('calls')}")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
