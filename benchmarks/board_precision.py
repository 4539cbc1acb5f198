"""Chosen probes of one network computed in float32 and in float64, exactly, on the same structures (issue 26;
docs/board.md).

A defect that an autograd model should not have (cross_maxwell, stress_consistency, conservativeness) but
shows in float32 is either round-off or the model's: in float64 round-off falls by about eight orders of
magnitude and a defect of the model stays.  ``--model`` is the spec without a precision suffix; the float32
run appends ``@float32``.  Both runs use float64 structures and seed 0, as the board does.  Usage::

    python benchmarks/board_precision.py --model jax-sevennet:7net-l3i5 --probes cross_maxwell --elements Na,Al,B

``--exact-w3j`` (SevenNet only) adds a third run: float64 with the W3j constants that the shipped model holds
in float32 (docs/sevennet.md) computed in float64 (the spec option ``w3j-float64``).  What float64
leaves of a symmetry defect is then split between those constants and the model::

    python benchmarks/board_precision.py --model jax-sevennet:7net-0 --probes equivariance --elements Li,C,S --exact-w3j
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from _record import finish  # noqa: E402

OUT = pathlib.Path(__file__).parent / "results" / "board" / "precision"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="a model spec without @float32")
    ap.add_argument("--probes", required=True)
    ap.add_argument("--elements", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--exact-w3j", action="store_true", help="SevenNet: a third run, float64 with float64 W3j")
    a = ap.parse_args()
    load0 = os.getloadavg()
    import jax

    jax.config.update("jax_enable_x64", True)
    import jaxcert
    from jaxcert.board import entry_name
    from jaxcert.cli._common import load_model

    elements, probes = a.elements.split(","), a.probes.split(",")
    res = {"model": a.model, "elements": elements, "probes": probes, "seed": a.seed, "runs": {}}
    runs = [("float32", f"{a.model}@float32", False), ("float64", a.model, False)]
    if a.exact_w3j:
        if not a.model.startswith("jax-sevennet:"):
            ap.error("--exact-w3j: only for jax-sevennet models")
        runs.append(("float64, float64 W3j", f"{a.model}@w3j-float64", True))
    for label, spec, _ in runs:
        model = load_model(spec)
        t = time.perf_counter()
        rep = jaxcert.certify(model, elements, probes=probes, seed=a.seed, card=False)
        res["runs"][label] = {"spec": spec, "wall_s": time.perf_counter() - t, "probes": {
            p: {el: row["defect"] for el, row in rep.probe(p)["per_element"].items()} for p in probes}}
        print(label, res["runs"][label]["probes"], flush=True)
    OUT.mkdir(parents=True, exist_ok=True)
    stem = f"{entry_name(a.model)}_{'-'.join(probes)}_{'-'.join(elements)}{'_w3j' if a.exact_w3j else ''}"
    finish(res, load0, str(OUT / f"{stem}.json"),
           "wall times only")


if __name__ == "__main__":
    main()
