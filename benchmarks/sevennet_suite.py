"""The native SevenNet-0 suite on Li…S against the torch bridge's report, probe by probe (issue 12 item 4).

Runs ``jaxcert certify --model jax-sevennet:7net-0 --elements Li,…,S --dtype DTYPE`` in a child process
(wall time, the child's CPU time and peak memory, the load average before and after), or reads a report
such a run already wrote (``--native-report``), and compares it with the bridge's committed report
(``benchmarks/results/sevennet_7net-0_certify_float32.json``: the same model through
``jaxcert_bridges``, the torch package behind a host callback).  Per probe: the defect of each element in
both, their largest absolute and relative difference, the gates, the wall time and the model evaluations.

Usage::

    python benchmarks/sevennet_suite.py [--dtype float32] [--native-report FILE] [--cache DIR|off]

Writes ``benchmarks/results/jax_sevennet_7net-0_vs_bridge_DTYPE.json`` (machine and load via
``benchmarks/_record.py``).  Reading: docs/sevennet.md "Full suite".
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import resource
import subprocess
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _record import finish  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
ELEMENTS = "Li,Be,B,C,Na,Mg,Al,Si,P,S"


def run_native(dtype: str, out: pathlib.Path, cache: str | None) -> dict:
    """The CLI in a child process; wall, CPU and peak memory of the child."""
    env = dict(os.environ)
    if cache is not None:
        env["JAXCERT_CACHE_DIR"] = cache
    cmd = [sys.executable, "-m", "jaxcert.cli", "certify", "--model", "jax-sevennet:7net-0", "--elements",
           ELEMENTS, "--dtype", dtype, "--json", str(out), "--no-fail-on-gate", "--quiet"]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"the native suite failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return {"command": " ".join(cmd[1:]), "wall_s": wall, "cpu_s": ru.ru_utime + ru.ru_stime,
            "max_rss_gb": ru.ru_maxrss / 1e6}


def by_name(report: dict) -> dict[str, dict]:
    return {p["name"]: p for p in report["probes"]}


def compare(native: dict, bridge: dict) -> list[dict]:
    rows = []
    nat, bri = by_name(native), by_name(bridge)
    for name in [p["name"] for p in bridge["probes"]]:
        if name not in nat:
            rows.append({"probe": name, "native": "not run"})
            continue
        a, b = nat[name], bri[name]
        els = [e for e in a["per_element"] if e in b["per_element"]]
        da = {e: a["per_element"][e]["defect"] for e in els}
        db = {e: b["per_element"][e]["defect"] for e in els}
        finite = [e for e in els if da[e] is not None and db[e] is not None]
        diff = {e: abs(da[e] - db[e]) for e in finite}
        rel = {e: diff[e] / max(abs(da[e]), abs(db[e])) if diff[e] else 0.0 for e in finite}
        worst = max(finite, key=lambda e: diff[e]) if finite else None
        rows.append({
            "probe": name,
            "native_defect": a["defect"], "bridge_defect": b["defect"],
            "native_per_element": da, "bridge_per_element": db,
            "max_abs_diff": diff[worst] if worst else None, "max_abs_diff_element": worst,
            "max_rel_diff": max(rel.values()) if rel else None,  # |a - b| / max(|a|, |b|)
            "gates_equal": [a["per_element"][e]["gate"] for e in els] == [b["per_element"][e]["gate"] for e in els],
            "native_gates": [a["per_element"][e]["gate"] for e in els],
            "bridge_gates": [b["per_element"][e]["gate"] for e in els],
            "native_status": a["status"], "bridge_status": b["status"],
            "native_wall_s": a["wall_s"], "bridge_wall_s": b["wall_s"],
            "native_n_evals": a["n_evals"], "bridge_n_evals": b["n_evals"],
        })
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dtype", default="float32", choices=("float32", "float64"))
    ap.add_argument("--native-report", help="compare this existing report instead of running the suite")
    ap.add_argument("--bridge-report", default=str(RESULTS / "sevennet_7net-0_certify_float32.json"))
    ap.add_argument("--warm-report", help="a second report of the same run with the persistent cache filled "
                    "(its wall times are recorded beside the cold ones)")
    ap.add_argument("--cache", help="JAXCERT_CACHE_DIR for the child (a fresh directory: cold; 'off': none)")
    a = ap.parse_args()
    load_start = os.getloadavg()
    out = RESULTS / f"jax_sevennet_7net-0_certify_{a.dtype}.json"
    if a.native_report:
        native_path, measured = pathlib.Path(a.native_report), None
    else:
        native_path, measured = out, run_native(a.dtype, out, a.cache)
    native = json.loads(native_path.read_text())
    bridge = json.loads(pathlib.Path(a.bridge_report).read_text())
    rows = compare(native, bridge)
    result = {
        "what": "native SevenNet-0 (jaxcert.models.sevennet, e3nn-jax) suite on Li..S vs the torch bridge's report",
        "dtype": a.dtype, "native_report": native_path.name,
        "bridge_report": str(pathlib.Path(a.bridge_report).name),
        "native_wall_s": native["wall_time_s"], "bridge_wall_s": bridge["wall_time_s"],
        "speedup_bridge_over_native": bridge["wall_time_s"] / native["wall_time_s"],
        "native_load": native["machine"].get("load_average_1_5_15min"),
        "bridge_load": bridge["machine"].get("load_average_1_5_15min"),
        "native_overall": native["aggregate"]["overall"], "bridge_overall": bridge["aggregate"]["overall"],
        "native_gates": [native["aggregate"]["gates_passed"], native["aggregate"]["gates_total"]],
        "bridge_gates": [bridge["aggregate"]["gates_passed"], bridge["aggregate"]["gates_total"]],
        "measured_here": measured, "probes": rows,
        "warm": None,
        "note": "The bridge report was measured in an earlier session (its load is recorded in it); the ratio "
                "compares two runs, not one.",
    }
    if a.warm_report:
        warm = json.loads(pathlib.Path(a.warm_report).read_text())
        result["warm"] = {"report": pathlib.Path(a.warm_report).name, "wall_s": warm["wall_time_s"],
                          "load": warm["machine"].get("load_average_1_5_15min"),
                          "per_probe_wall_s": {p["name"]: p["wall_s"] for p in warm["probes"]},
                          "speedup_bridge_over_warm": bridge["wall_time_s"] / warm["wall_time_s"],
                          "defects_identical_to_cold": all(
                              p["defect"] == q["defect"]
                              for p, q in zip(warm["probes"], native["probes"], strict=True))}
    print(f"{'probe':20s} {'native':>11s} {'bridge':>11s} {'max|diff|':>10s} {'rel':>8s} {'wall n/b s':>14s}")
    for r in rows:
        if "native_defect" not in r:
            print(f"{r['probe']:20s} not run")
            continue
        rel = r["max_rel_diff"]
        print(f"{r['probe']:20s} {r['native_defect']:11.4g} {r['bridge_defect']:11.4g} "
              f"{(r['max_abs_diff'] or 0):10.3g} {(rel if rel is not None else float('nan')):8.2g} "
              f"{r['native_wall_s']:6.0f}/{r['bridge_wall_s']:6.0f}")
    print(f"suite wall: native {native['wall_time_s']:.0f} s, bridge {bridge['wall_time_s']:.0f} s "
          f"({result['speedup_bridge_over_native']:.2f}x)")
    if result["warm"]:
        w = result["warm"]
        print(f"warm (cache filled): {w['wall_s']:.0f} s ({w['speedup_bridge_over_warm']:.2f}x); defects identical "
              f"to the cold run: {w['defects_identical_to_cold']}")
    finish(result, load_start, str(RESULTS / f"jax_sevennet_7net-0_vs_bridge_{a.dtype}.json"),
           "the native wall times are inflated")


if __name__ == "__main__":
    main()
