"""Where a cold ``certify`` spends its time, per probe: tracing, lowering, XLA compilation, the rest.

Runs the suite once in this fresh process with the compilation cache off and
compile-ahead off (``compile_workers=0``), so every program is traced, lowered and
compiled inside its own probe's turn, and JAX's monitoring events
(``/jax/core/compile/jaxpr_trace_duration``, ``jaxpr_to_mlir_module_duration``,
``backend_compile_duration``) are attributed to the probe that was running.
"rest" is the probe's wall time minus those three: execution, substrate building,
host-side summaries.  Also records the import time and the HLO text size of each
probe's program.

Writes ``benchmarks/results/cold_start.json`` (``--out``) with the machine
description and the load average before and after.
Usage: ``python benchmarks/cold_start.py [--case lj10|emt_cu] [--out PATH]``.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import time

T_IMPORT = time.perf_counter()
os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402

import jaxcert  # noqa: E402

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402

from jaxcert import models  # noqa: E402
from jaxcert.core.device import machine  # noqa: E402

IMPORT_S = time.perf_counter() - T_IMPORT
EVENTS = {
    "/jax/core/compile/jaxpr_trace_duration": "trace_s",
    "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower_s",
    "/jax/core/compile/backend_compile_duration": "compile_s",
}
CASES = {"lj10": ("lj", "Li,Be,B,C,Na,Mg,Al,Si,P,S"), "emt_cu": ("emt", "Cu")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", choices=sorted(CASES), default="lj10")
    ap.add_argument("--out", default=str(pathlib.Path(__file__).parent / "results" / "cold_start.json"))
    args = ap.parse_args()
    model_name, elements = CASES[args.case]
    current = {"probe": "setup"}
    per: dict[str, dict[str, float]] = {}

    def listener(event: str, duration: float, **_kw) -> None:
        if event in EVENTS:
            row = per.setdefault(current["probe"], {"trace_s": 0.0, "lower_s": 0.0, "compile_s": 0.0, "programs": 0})
            row[EVENTS[event]] += duration
            row["programs"] += event.endswith("backend_compile_duration")

    jax.monitoring.register_event_duration_secs_listener(listener)

    def progress(name: str, idx: int, total: int, last: float) -> None:
        current["probe"] = name

    load0 = os.getloadavg()
    t0 = time.perf_counter()
    model = models.get(model_name)
    rep = jaxcert.certify(model, elements, seed=0, dtype=jnp.float64, progress=progress, compile_workers=0)
    wall = time.perf_counter() - t0
    rows = []
    for o in rep.outcomes:
        r = per.get(o.name, {"trace_s": 0.0, "lower_s": 0.0, "compile_s": 0.0, "programs": 0})
        jit_s = r["trace_s"] + r["lower_s"] + r["compile_s"]
        rows.append({"probe": o.name, "wall_s": o.wall_s, **r, "rest_s": o.wall_s - jit_s})
    tot = {k: sum(r[k] for r in rows) for k in ("wall_s", "trace_s", "lower_s", "compile_s", "rest_s", "programs")}
    print(f"{'probe':20s} {'wall':>7s} {'trace':>7s} {'lower':>7s} {'compile':>8s} {'rest':>7s} {'progs':>5s}")
    for r in rows + [{"probe": "TOTAL", **tot}]:
        print(f"{r['probe']:20s} {r['wall_s']:7.2f} {r['trace_s']:7.2f} {r['lower_s']:7.2f} {r['compile_s']:8.2f} "
              f"{r['rest_s']:7.2f} {int(r['programs']):5d}")
    print(f"imports {IMPORT_S:.2f} s, certify {wall:.2f} s, outside probes {wall - tot['wall_s']:.2f} s; "
          f"load {load0} -> {os.getloadavg()}")
    out = {"case": args.case, "model": model_name, "elements": elements, "import_s": IMPORT_S, "certify_s": wall,
           "probes": rows, "total": tot, "setup": per.get("setup"), "load_before": load0,
           "load_after": os.getloadavg(), "machine": machine(), "xla_flags": os.environ.get("XLA_FLAGS", "")}
    pathlib.Path(args.out).write_text(json.dumps(out, indent=1, default=float))
    print("wrote", args.out)


if __name__ == "__main__":
    main()
