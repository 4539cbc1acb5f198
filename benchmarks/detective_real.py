"""The real run of the failure-mode search on the offline bridged models (issue 13; docs/detective.md).

CHGNet 0.3.0, SevenNet-0, SevenNet-MF-0 (PBE modality) and SevenNet-l3i5: each is the target in turn with the
other three as its committee, over the dimers of ``--elements`` and a small adsorption grid (``--adsorbates``
on the metals among the elements).  Each search is one ``jaxcert investigate`` process writing its report
directory and evidence memory under ``benchmarks/results/detective_real/<target>/``; a rerun resumes from the
memory.  The summary (found, rejected, artefacts, evaluations, wall time per target) goes to
``benchmarks/results/detective_real.json`` with the machine description (``benchmarks/_record.py``).

Needs jaxcert-bridges (torch); run with ``JAXCERT_BRIDGE_PROCESS=1``.  Usage:
``python benchmarks/detective_real.py [--elements Sb,Mo,W,Cu,Ni,O] [--targets all|SPEC,...]``.

Any other set of models: ``--models`` (the pool; each target's committee is the rest of it), ``--protocols``,
``--molecules``, ``--dtype`` and ``--name`` (the summary ``benchmarks/results/NAME.json``, the report
directories under ``benchmarks/results/NAME/``).  The search of issue 28 (native nequix-mp-1 against
SevenNet-0 natively, nequix-oam-1 and CHGNet, over dimers and CO desorption)::

  python benchmarks/detective_real.py --name detective_nequix --dtype float32 \
      --models nequix:W/nequix-mp-1.nqx@float32,jax-sevennet:7net-0@float32,nequix:W/nequix-oam-1.nqx@float32,chgnet \
      --targets nequix:W/nequix-mp-1.nqx@float32 --protocols dimers,desorption --elements Cu,Mo,W,Pt,C,O

(``W`` the folder of the nequix checkpoints, ``../shared/weights/nequix``).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from _record import finish  # noqa: E402

MODELS = ("chgnet", "sevennet:7net-0", "sevennet:7net-mf-0:PBE", "sevennet:7net-l3i5")
ROOT = pathlib.Path(__file__).parent / "results"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--elements", default="Sb,Mo,W,Cu,Ni,O")
    ap.add_argument("--adsorbates", default="O")
    ap.add_argument("--targets", default="all")
    ap.add_argument("--models", default=",".join(MODELS), help="the pool; a target's committee is the rest")
    ap.add_argument("--protocols", default="dimers,adsorption")
    ap.add_argument("--molecules", default="CO", help="molecules of the desorption scans")
    ap.add_argument("--dtype", default="float64")
    ap.add_argument("--name", default="detective_real", help="results/NAME.json and results/NAME/")
    args = ap.parse_args()
    load0 = os.getloadavg()
    pool = tuple(args.models.split(","))
    targets = pool if args.targets == "all" else tuple(args.targets.split(","))
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "JAXCERT_BRIDGE_PROCESS": "1"}
    summary: dict = {"elements": args.elements, "models": list(pool), "protocols": args.protocols,
                     "molecules": args.molecules, "dtype": args.dtype, "runs": {}}
    for target in targets:
        committee = [m for m in pool if m != target]
        name = "_".join(os.path.basename(p) for p in target.split(":"))
        out = ROOT / args.name / f"{name}_target"
        protocols = args.protocols
        cmd = [sys.executable, "-m", "jaxcert.cli", "investigate", "--target", target, "--committee",
               ",".join(committee), "--protocols", protocols, "--elements", args.elements, "--adsorbates",
               args.adsorbates, "--molecules", args.molecules, "--dtype", args.dtype, "--out", str(out)]
        out.parent.mkdir(parents=True, exist_ok=True)
        if (out / "evidence.jsonl").exists():
            cmd.append("--resume")
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        esc = json.loads((out / "escalation.json").read_text()) if (out / "escalation.json").exists() else {}
        summary["runs"][target] = {
            "committee": committee, "protocols": protocols, "returncode": proc.returncode, "wall_s": wall,
            "escalated": esc.get("escalated"), "hypothesis": esc.get("hypothesis"), "scope": esc.get("scope"),
            "type": esc.get("type"), "headline": esc.get("headline"), "rejected": esc.get("rejected"),
            "protocol_artefacts": esc.get("protocol_artefacts"), "n_evals": esc.get("n_evals"),
            "robustness": (esc.get("robustness") or {}).get("label"),
            "robustness_summary": (esc.get("robustness") or {}).get("summary"),
            "excluded_members": esc.get("excluded_members"), "per_model": esc.get("per_model"),
            "log_tail": proc.stdout.splitlines()[-12:], "stderr_tail": proc.stderr.splitlines()[-6:],
            "report_dir": str(out.relative_to(ROOT.parent.parent))}
        print(f"{target}: rc {proc.returncode}, {wall:.0f} s, escalated {esc.get('escalated')}", flush=True)
    finish(summary, load0, str(ROOT / f"{args.name}.json"), "the wall times are inflated")


if __name__ == "__main__":
    main()
