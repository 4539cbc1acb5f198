"""The equipartition probe with and without frame alignment on one model and element (issue 26; docs/board.md).

The published board projects unaligned frames (docs/probes.md §4.13): a cluster that turns under the
Langevin bath leaks its rotation into the normal coordinates and inflates the ratios R_α. This runs the
probe once per estimator in ``--align`` on the same trajectory (one seed, one element list: the runs are
identical up to the estimator), by default twice:
once with ``align="auto"`` (jaxcert's default: Kabsch alignment on a rotation-invariant model) and once
with ``align="none"`` (the published estimator), and saves both medians with their jackknife errors and
the largest rotation met.
Usage::

    python benchmarks/board_equipartition_align.py --model jax-sevennet:7net-l3i5@float32 --elements B
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from _record import finish  # noqa: E402

OUT = pathlib.Path(__file__).parent / "results" / "board" / "equipartition_align"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--elements", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--align", default="auto,none", help="the estimators to run, comma-separated")
    a = ap.parse_args()
    load0 = os.getloadavg()
    import jax

    jax.config.update("jax_enable_x64", True)
    import jaxcert
    from jaxcert.board import entry_name
    from jaxcert.cli._common import load_model
    from jaxcert.probes import PROBES

    model = load_model(a.model)
    elements = a.elements.split(",")
    res = {"model": a.model, "elements": elements, "seed": a.seed, "runs": {}}
    for align in a.align.split(","):
        cfg = dataclasses.replace(PROBES["equipartition"].config(), align=align)
        t = time.perf_counter()
        rep = jaxcert.certify(model, elements, probes=["equipartition"], seed=a.seed,
                              configs={"equipartition": cfg}, card=False)
        rows = {}
        for el, row in rep.probe("equipartition")["per_element"].items():
            det = row.get("details") or {}
            rows[el] = {"defect": row["defect"], "defect_stderr": det.get("defect_stderr"),
                        "R_median": det.get("R_median"), "aligned": det.get("aligned"),
                        "rotation_deg_max": det.get("rotation_deg_max"), "n_modes": det.get("n_modes"),
                        "n_negative_modes": det.get("n_negative_modes"),
                        "relax_converged": det.get("relax_converged")}
        res["runs"][align] = {"wall_s": time.perf_counter() - t, "per_element": rows}
        print(align, rows, flush=True)
    OUT.mkdir(parents=True, exist_ok=True)
    stem = f"{entry_name(a.model)}_{'-'.join(elements)}_seed{a.seed}_{'-'.join(res['runs'])}"
    finish(res, load0, str(OUT / f"{stem}.json"), "wall times only")


if __name__ == "__main__":
    main()
