"""Model evaluations and wall time to escalation of the failure-mode search, batched vs one configuration at a time.

Case: the planted Sb/Mo mid-range dimer attraction on the reference LJ (``jaxcert.detective.examples``), a
committee of three LJ variants, the dimers protocol over ``--elements`` (docs/detective.md §7).  The same
search runs twice in this process, each in a fresh report directory: ``batched`` (the default, one
``jit(vmap)`` program per model and chunk of 64) and ``sequential`` (``Committee(batched=False)``: one jitted
call per configuration).  Both must escalate the same hypothesis with the same evaluation count; the JSON
records both wall times, the time to escalation of each, and the split of the batched run into screen, probes
and report (from the evidence memory's timestamps).  Each mode runs once cold (compilation included; the
compile cache is off) and once warm on the same models (``--repeat``: programs already compiled).

Writes ``benchmarks/results/detective.json`` (``--out``) with the machine description and the load average
(``benchmarks/_record.py``).  Usage: ``python benchmarks/detective.py [--elements Sb,Mo,Si,Cu] [--out PATH]``.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import tempfile
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ["JAXCERT_CACHE_DIR"] = "off"
import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from _record import finish  # noqa: E402

from jaxcert import models  # noqa: E402
from jaxcert.detective import Committee, investigate  # noqa: E402
from jaxcert.detective import examples as ex  # noqa: E402


def _run(batched: bool, elements: list[str], mods: dict) -> dict:
    out = tempfile.mkdtemp(prefix=f"detective_{'batched' if batched else 'sequential'}_")
    c = Committee(mods["target"], mods["committee"], batched=batched)
    t0 = time.perf_counter()
    res = investigate(c, ["dimers"], elements=elements, out=out, log=None, oracle_s=0)
    wall = time.perf_counter() - t0
    recs = [json.loads(line) for line in open(os.path.join(out, "evidence.jsonl"))]
    t_run = recs[0]["t"]
    t_verdict = next((r["t"] for r in recs if r["type"] == "verdict" and r["verdict"] == "escalate"), None)
    t_screen = next(r["t"] for r in recs if r["type"] == "screen")
    return {"escalated": res.escalated, "hypothesis": res.hypothesis.id if res.hypothesis else None,
            "scope": res.hypothesis.scope if res.hypothesis else None, "n_evals": res.n_evals,
            "wall_s": wall, "to_escalation_s": (t_verdict - t_run) if t_verdict else None,
            "screen_s": t_screen - t_run, "probes_s": (t_verdict - t_screen) if t_verdict else None,
            "report_s": wall - ((t_verdict - t_run) if t_verdict else wall)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--elements", default="Sb,Mo,Si,Cu")
    ap.add_argument("--out", default=str(pathlib.Path(__file__).parent / "results" / "detective.json"))
    args = ap.parse_args()
    load0 = os.getloadavg()
    elements = [e.strip() for e in args.elements.split(",") if e.strip()]
    result: dict = {"case": "planted Sb/Mo dimer attraction on the reference LJ; committee lj, lj-soft, lj-stiff",
                    "elements": elements, "protocol": "dimers", "runs": {}}
    for mode in ("batched", "sequential"):
        mods = {"target": ex.lj_planted_dimers(), "committee": [models.get("lj"), ex.lj_soft(), ex.lj_stiff()]}
        cold = _run(mode == "batched", elements, mods)
        warm = _run(mode == "batched", elements, mods)
        result["runs"][mode] = {"cold": cold, "warm": warm}
        print(f"{mode}: cold {cold['wall_s']:.1f} s, warm {warm['wall_s']:.1f} s, {cold['n_evals']} evaluations, "
              f"escalated {cold['hypothesis']}", flush=True)
    b, s = result["runs"]["batched"], result["runs"]["sequential"]
    assert b["cold"]["hypothesis"] == s["cold"]["hypothesis"] and b["cold"]["n_evals"] == s["cold"]["n_evals"]
    result["speedup_warm"] = s["warm"]["wall_s"] / b["warm"]["wall_s"]
    result["speedup_cold"] = s["cold"]["wall_s"] / b["cold"]["wall_s"]
    finish(result, load0, args.out, "the wall times are inflated and the speed-up ratio is noisy")


if __name__ == "__main__":
    main()
