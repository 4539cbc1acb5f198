"""Full-suite wall time: exact vs finite-difference path, cold (compile included) and warm.

Runs ``jaxcert.certify`` on
  * the reference LJ on Li, Be, B, C, Na, Mg, Al, Si, P, S (seed 0, float64), and
  * EMT on Cu,
each twice in one process (cold: compile included; warm: the same programs
again), once with exact derivatives (default) and once with every probe's
``derivatives`` engine set to ``FiniteDifference()`` (the reference's recipe,
same probe code).  Prints per-probe times, the ratios FD/exact and cold/warm,
jaxcert's ``n_evals`` next to the reference implementation's call counts
(docs/probes.md §4.15), and the reference implementation's wall times (its newest
version, pescert, measured side by side on this machine class on a quiet machine:
176.5 s for LJ on the ten elements, 11.5 s for EMT on Cu; it is not an installable
package, so those figures are quoted, not re-run).

Also times whole ``jaxcert certify`` processes (imports included), which is what a
new user and CI see: with the caches off, then with a fresh cache directory (the first
process fills it, the second loads the compiled programs: each probe program from
jaxcert's executable store without tracing, the rest from JAX's persistent cache;
:mod:`jaxcert.core.cache`). The load average is recorded around every process.

Writes ``benchmarks/results/certify.json`` with the machine description.
Usage: ``python benchmarks/certify.py [--skip-fd] [--cases lj10,emt_cu]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import time

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402

import jaxcert  # noqa: E402
from jaxcert.core.derivatives import FiniteDifference  # noqa: E402
from jaxcert.core.device import machine  # noqa: E402
from jaxcert.probes import PROBES  # noqa: E402

#: pescert's (newest version) wall times, measured side by side on this machine class on a quiet machine
#: (issue 10 of the project tracker); quoted, since the reference is not an installable package.
REFERENCE_WALL_S = {"lj10": 176.5, "emt_cu": 11.5}
#: pescert's default call counts per element (docs/probes.md §4.15; relaxations vary and are excluded).
REFERENCE_CALLS = {
    "equivariance": 9, "parity": 2, "representation": 20, "zero_modes": 78, "trimer": 115,
    "conservativeness": 31, "betti": 48, "stress_consistency": 13, "cross_maxwell": 37, "reversibility": 201,
    "config_temperature": 1501 + 880, "virial": 0, "equipartition": 78, "smoothness": 81,
}
CASES = {
    "lj10": ("lj", ["Li", "Be", "B", "C", "Na", "Mg", "Al", "Si", "P", "S"]),
    "emt_cu": ("emt", ["Cu"]),
}


def fd_configs() -> dict:
    out = {}
    for name, spec in PROBES.items():
        cfg = spec.config()
        if any(f.name == "derivatives" for f in dataclasses.fields(cfg)):
            out[name] = dataclasses.replace(cfg, derivatives=FiniteDifference())
    return out


def run(model, elements, configs=None) -> dict:
    t = time.perf_counter()
    rep = jaxcert.certify(model, elements, seed=0, dtype=jnp.float64, configs=configs)
    wall = time.perf_counter() - t
    agg = rep.aggregate()
    return {
        "wall_s": wall,
        "overall": agg["overall"],
        "gates": f"{agg['gates_passed']}/{agg['gates_total']}",
        "n_evals": agg["n_evals"],
        "probes": {o.name: {"wall_s": o.wall_s, "score": o.summary()["score"], "defect": o.summary()["defect"],
                            "gate": o.summary()["gate"], "n_evals": o.summary()["n_evals"],
                            "status": o.summary()["status"]} for o in rep.outcomes},
    }


def cli_runs(mname: str, els: list[str]) -> dict:
    """Whole ``jaxcert certify`` processes (imports included): an empty persistent cache, then a warm one."""
    import os
    import subprocess
    import sys
    import tempfile

    cache = tempfile.mkdtemp(prefix="jaxcert-bench-xla-")
    cmd = [sys.executable, "-m", "jaxcert.cli", "certify", "--model", mname, "--elements", ",".join(els), "--quiet",
           "--no-fail-on-gate"]
    out = {}
    for label, cache_dir in (("cli_no_cache_s", "off"), ("cli_empty_cache_s", cache), ("cli_cached_s", cache)):
        load_before = os.getloadavg()
        t = time.perf_counter()
        subprocess.run(cmd, env=dict(os.environ, JAXCERT_CACHE_DIR=cache_dir), check=True, capture_output=True)
        out[label] = time.perf_counter() - t
        out[label.replace("_s", "_load_1min")] = [load_before[0], os.getloadavg()[0]]
    # what the warm process could load without tracing (jaxcert.core.cache's executable store, one entry per program)
    out["cli_store_entries"] = len(list(pathlib.Path(cache, "exec").rglob("*.entry")))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--skip-fd", action="store_true")
    ap.add_argument("--out", default=str(pathlib.Path(__file__).parent / "results" / "certify.json"))
    a = ap.parse_args()
    results = {}
    for case in a.cases.split(","):
        mname, els = CASES[case]
        model = jaxcert.models.get(mname)
        r = {"model": mname, "elements": els}
        r.update(cli_runs(mname, els))
        r["exact_cold"] = run(model, els)
        r["exact_warm"] = run(model, els)
        if not a.skip_fd:
            fdc = fd_configs()
            r["fd_cold"] = run(model, els, fdc)
            r["fd_warm"] = run(model, els, fdc)
        ref = REFERENCE_WALL_S[case]
        r["reference_wall_s"] = ref
        r["speedup_vs_reference_cold"] = ref / r["exact_cold"]["wall_s"]
        r["speedup_vs_reference_warm"] = ref / r["exact_warm"]["wall_s"]
        r["speedup_vs_reference_cli_no_cache"] = ref / r["cli_no_cache_s"]
        r["speedup_vs_reference_cli_empty_cache"] = ref / r["cli_empty_cache_s"]
        r["speedup_vs_reference_cli_cached"] = ref / r["cli_cached_s"]
        if not a.skip_fd:
            r["fd_over_exact_cold"] = r["fd_cold"]["wall_s"] / r["exact_cold"]["wall_s"]
            r["fd_over_exact_warm"] = r["fd_warm"]["wall_s"] / r["exact_warm"]["wall_s"]
        r["reference_calls_per_element"] = REFERENCE_CALLS
        results[case] = r
        print(f"\n== {case}: {mname} on {','.join(els)}")
        print(f"exact: cold {r['exact_cold']['wall_s']:.1f} s, warm {r['exact_warm']['wall_s']:.1f} s, "
              f"overall {r['exact_cold']['overall']:.4f}, gates {r['exact_cold']['gates']}")
        if not a.skip_fd:
            print(f"fd   : cold {r['fd_cold']['wall_s']:.1f} s, warm {r['fd_warm']['wall_s']:.1f} s, "
                  f"overall {r['fd_cold']['overall']:.4f}, gates {r['fd_cold']['gates']}  "
                  f"(fd/exact cold {r['fd_over_exact_cold']:.2f}x, warm {r['fd_over_exact_warm']:.2f}x)")
        print(f"CLI process: cache off {r['cli_no_cache_s']:.1f} s ({r['speedup_vs_reference_cli_no_cache']:.1f}x), "
              f"filling an empty cache {r['cli_empty_cache_s']:.1f} s "
              f"({r['speedup_vs_reference_cli_empty_cache']:.1f}x), warm cache {r['cli_cached_s']:.1f} s "
              f"({r['speedup_vs_reference_cli_cached']:.1f}x)")
        print(f"reference (pescert, quoted): {ref:.1f} s -> in-process speed-up "
              f"cold {r['speedup_vs_reference_cold']:.1f}x, warm {r['speedup_vs_reference_warm']:.1f}x")
        print(f"{'probe':20s} {'cold s':>8s} {'warm s':>8s} {'score':>7s} {'n_evals/el':>10s} {'ref calls/el':>12s}")
        for p, v in r["exact_cold"]["probes"].items():
            w = r["exact_warm"]["probes"][p]["wall_s"]
            print(f"{p:20s} {v['wall_s']:8.2f} {w:8.2f} {v['score']:7.3f} {v['n_evals'] / len(els):10.0f} "
                  f"{REFERENCE_CALLS.get(p, 0):12d}")
    payload = {"benchmark": "certify", "machine": machine(), "results": results,
               "note": "cold includes compilation; the reference wall times (pescert, newest version, 176.5 s and "
                       "11.5 s on a quiet machine of this class) are quoted, not re-run here"}
    pathlib.Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    pathlib.Path(a.out).write_text(json.dumps(jaxcert.report.certification.to_jsonable(payload), indent=2))
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
