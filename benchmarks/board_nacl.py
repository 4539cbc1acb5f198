"""Measure every committed board report's speed on the published board's NaCl cell, without recomputing a probe.

The committed board's reports (benchmarks/results/board/) were computed before the NaCl measurement existed
(:func:`jaxcert.probes.throughput.nacl_rate`): their speed column was empty.  Rerunning the board would measure
it, but it also recomputes every probe whose configuration changed since the report was written (many hours
of CPU for the networks).  This script measures only the NaCl rate, each model in a fresh process of its own
(so the peak memory recorded is the measurement's alone), and writes it into the report's ``throughput.nacl``
marked as measured separately, with the UTC time, the jaxcert commit, the hardware, the load average before
and after and the process's peak resident memory.  The probes, their defects and the report's other fields
are left as they were.  A report written before reports carried their finish time is given the dates of the
commits that changed it before this measurement (``computed_between_utc``, :func:`stamp_history`).  The board
pages are then rebuilt from the reports
(:func:`board_regenerate.regenerate`, nothing recomputed).

A report that already carries a NaCl measurement is skipped unless ``--force``; the script can be stopped and
run again (each report is rewritten atomically as soon as its model is measured).

    python benchmarks/board_nacl.py [--folder benchmarks/results/board] [--only NAME,...] [--force]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _one(spec: str, defects: list[str], max_batch: str | None, dtype: str) -> None:
    """Child process: measure one model and print the measurement as one JSON line."""
    import jax

    if dtype == "float64":
        jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    from jaxcert.core.device import device_name, hardware, peak_memory
    from jaxcert.probes.throughput import nacl_rate
    from jaxcert.specs import load_model

    t0 = time.perf_counter()
    model = load_model(spec, defects, max_batch)
    load_s = time.perf_counter() - t0
    out = nacl_rate(model, jnp.float64 if dtype == "float64" else jnp.float32)
    out["model_load_s"] = load_s
    out["device"] = device_name()
    out["hardware"] = hardware()
    out["peak_rss_bytes"] = peak_memory()["host_rss_bytes"]  # this process: the measurement alone
    print("NACL " + json.dumps(out), flush=True)


def _commit() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def measure(folder: str, toml_path: str, only: set[str] | None, force: bool) -> list[dict]:
    """Measure the reports of ``folder`` named in ``toml_path`` (module docstring); returns one status per model."""
    from jaxcert.board import read_models_toml
    from jaxcert.checkpoint import write_json

    settings = json.load(open(os.path.join(folder, "board.json"), encoding="utf-8"))["settings"]
    done = []
    for e in read_models_toml(toml_path):
        path = os.path.join(folder, f"{e.name}.json")
        if (only and e.name not in only) or not os.path.exists(path):
            continue
        doc = json.load(open(path, encoding="utf-8"))
        t = doc.get("throughput") if isinstance(doc.get("throughput"), dict) else {}
        if isinstance(t.get("nacl"), dict) and not force:
            done.append({"name": e.name, "status": "kept"})
            continue
        dtype = e.dtype or settings["dtype"]
        load0 = os.getloadavg()
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--one", e.spec, "--dtype", dtype,
                               "--defects", json.dumps(list(e.defects)), "--max-batch", str(e.max_batch or "")],
                              cwd=ROOT, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("NACL ")]
        if proc.returncode or not lines:
            nacl = {"error": f"the measuring process exited {proc.returncode}: {proc.stderr.strip()[-400:]}"}
        else:
            nacl = json.loads(lines[-1][len("NACL "):])
        hw = nacl.pop("hardware", None)
        dev = nacl.pop("device", None)
        nacl.update({
            "measured_separately": True,
            "measured_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "jaxcert_commit": _commit(),
            "hardware": hw, "device": dev,
            "load_1min_before_after": [load0[0], os.getloadavg()[0]],
            "process_wall_s": wall,
        })
        t = dict(t)
        t["nacl"] = nacl
        doc["throughput"] = t
        write_json(doc, path)
        rate = nacl.get("atom_steps_per_s")
        print(f"{e.name}: " + (f"{rate:.1f} ± {nacl.get('atom_steps_per_s_stdev') or 0:.1f} atom·steps/s, "
                               f"{nacl['peak_rss_bytes'] / 1e9:.2f} GB, {wall:.0f} s" if rate is not None
                               else f"not measured: {nacl.get('error')}"), flush=True)
        done.append({"name": e.name, "status": "measured" if rate is not None else "error"})
    return done


def stamp_history(folder: str, toml_path: str) -> list[str]:
    """Give each report of ``folder`` that carries no finish time (``finished_utc``, written by reports since
    it existed) ``computed_between_utc``: the dates of the first and last commits that changed it before its
    NaCl rate was measured separately, i.e. when its probes were computed and committed.  Returns the stems
    stamped."""
    from jaxcert.board import read_models_toml
    from jaxcert.checkpoint import write_json

    out = []
    for e in read_models_toml(toml_path):
        path = os.path.join(folder, f"{e.name}.json")
        if not os.path.exists(path):
            continue
        doc = json.load(open(path, encoding="utf-8"))
        if doc.get("finished_utc") or doc.get("computed_between_utc"):
            continue
        nacl = (doc.get("throughput") or {}).get("nacl") or {}
        before = nacl.get("measured_utc") if nacl.get("measured_separately") else None
        cmd = ["git", "log", "--format=%cI", *([f"--before={before}"] if before else []), "--", path]
        try:
            dates = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
        except (OSError, subprocess.CalledProcessError):
            continue
        if not dates:
            continue
        first, last = min(d[:10] for d in dates), max(d[:10] for d in dates)
        doc["computed_between_utc"] = first if first == last else f"{first} to {last}"
        write_json(doc, path)
        out.append(e.name)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--folder", default=os.path.join(HERE, "results", "board"))
    ap.add_argument("--models", default=os.path.join(HERE, "board_models.toml"))
    ap.add_argument("--only", default="", help="comma-separated report stems (default: every model of --models)")
    ap.add_argument("--force", action="store_true", help="measure again where a NaCl measurement is there")
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--dtype", default="float64", help=argparse.SUPPRESS)
    ap.add_argument("--defects", default="[]", help=argparse.SUPPRESS)
    ap.add_argument("--max-batch", default="", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one is not None:
        _one(a.one, json.loads(a.defects), a.max_batch or None, a.dtype)
        return
    only = {s.strip() for s in a.only.split(",") if s.strip()} or None
    measure(a.folder, a.models, only, a.force)
    stamped = stamp_history(a.folder, a.models)
    if stamped:
        print(f"dated from the repository's history: {', '.join(stamped)}")
    sys.path.insert(0, HERE)
    from board_regenerate import regenerate

    regenerate(a.folder)
    print("board pages rebuilt from the reports")


if __name__ == "__main__":
    main()
