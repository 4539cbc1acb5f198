"""A warm ``jaxcert certify`` of a checkpoint network: how long the second process takes, and what it traces.

Runs ``jaxcert certify`` twice as fresh processes on one empty ``$JAXCERT_CACHE_DIR``: **cold** fills the
executable store, **warm** is the next run of the same command, the one a user repeats.  For each it records
the wall time of the whole process (imports and loading the checkpoint included), the report's
``"compilation"`` object (traces, lowerings, XLA compilations and their seconds, programs loaded from the
store) and the load average before and after.

``--src DIR`` runs the jaxcert source in ``DIR`` instead of this checkout (e.g. an export of an earlier commit,
``git archive <commit> jaxcert | tar -x -C DIR``), so a before/after pair is measured with one script; each
run is stored under ``--label`` in the output JSON, next to the labels already there.

Usage: ``python benchmarks/store_identity.py --label after [--src DIR] [--model SPEC] [--elements Si]
[--out benchmarks/results/store_identity.json]``; the default model is nequix-mp-1-pft in float32 from
``../shared/weights/nequix``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
WEIGHTS = ROOT.parent / "shared" / "weights" / "nequix" / "nequix-mp-1-pft.nqx"


def one_run(src: Path, cache: str, model: str, elements: str, dtype: str, report: str) -> dict[str, Any]:
    """One ``jaxcert certify`` process; wall time, exit code, the report's compilation object."""
    env = {**os.environ, "JAXCERT_CACHE_DIR": cache, "PYTHONPATH": str(src),
           "JAX_PLATFORMS": os.environ.get("JAX_PLATFORMS", "cpu")}
    cmd = [sys.executable, "-c", "import sys; from jaxcert.cli import main; sys.exit(main())", "certify",
           "--model", model, "--dtype", dtype, "--elements", elements, "--json", report, "--quiet"]
    load0 = os.getloadavg()
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    out: dict[str, Any] = {"wall_s": round(wall, 1), "exit_code": p.returncode, "loadavg_start": load0,
                           "loadavg_end": os.getloadavg()}
    try:
        rep = json.loads(Path(report).read_text())
        out["compilation"] = rep.get("compilation")
        out["overall"] = (rep.get("aggregate") or {}).get("overall")
    except (OSError, ValueError):
        out["error"] = (p.stderr.strip().splitlines() or ["no report"])[-1][:300]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--label", required=True, help="the name this measurement is stored under (before, after)")
    ap.add_argument("--src", default=str(ROOT), help="folder holding the jaxcert package to run")
    ap.add_argument("--model", default=f"nequix:{WEIGHTS}@float32")
    ap.add_argument("--elements", default="Si")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--note", default="", help="what this source is (a commit, a change)")
    ap.add_argument("--out", default=str(HERE / "results" / "store_identity.json"))
    a = ap.parse_args(argv)
    sys.path[:0] = [str(HERE), str(ROOT)]
    from _record import finish

    load0 = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="jaxcert-identity-") as tmp:
        cache = os.path.join(tmp, "cache")
        runs = {mode: one_run(Path(a.src), cache, a.model, a.elements, a.dtype, os.path.join(tmp, f"{mode}.json"))
                for mode in ("cold", "warm")}
    for mode, r in runs.items():
        c = r.get("compilation") or {}
        print(f"{a.label:8s} {mode}: {r['wall_s']:7.1f} s, exit {r['exit_code']}, traces {c.get('traces')} "
              f"({c.get('trace_s')} s), compiles {c.get('compiles')} ({c.get('compile_s')} s), "
              f"store loads {c.get('store_loads')}" + (f"  ERROR {r['error']}" if "error" in r else ""), flush=True)
    path = Path(a.out)
    try:
        result = json.loads(path.read_text())
    except (OSError, ValueError):
        result = {}
    result["benchmark"] = "store_identity"
    result["command"] = (f"jaxcert certify --model {a.model} --dtype {a.dtype} --elements {a.elements}, "
                         "twice as fresh processes on one empty JAXCERT_CACHE_DIR")
    result.setdefault("runs", {})[a.label] = {"src": a.src, "note": a.note, **runs}
    finish(result, load0, str(path), "wall times are inflated; counts of traces and store loads are not")
    return 0


if __name__ == "__main__":
    sys.exit(main())
