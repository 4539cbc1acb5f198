"""Certify LJ, SevenNet-0 and nequix-mp-1 on Li…S on whatever device JAX sees, cold and warm (issue 24 item 6).

One command::

    python benchmarks/gpu.py [--models lj,7net-0,nequix-mp-1] [--elements Li,Be,B,C,Na,Mg,Al,Si,P,S]
                             [--probes NAMES] [--budget-s 450] [--timeout-s 300] [--out FILE]

For each model, in fresh subprocesses and one after another (they share the device):

1. *load*: build the model once (``jaxcert.cli._common.load_model``), converting SevenNet's weights from the
   sevenn wheel if they are not converted yet (that needs ``jaxcert_bridges``, sevenn and torch; without them
   the row says so), and report the devices JAX sees.  Not part of the timings.
2. *cold*: ``jaxcert certify --model SPEC --elements … --dtype DTYPE --json …`` with ``JAXCERT_CACHE_DIR`` a
   fresh, empty folder (no persistent XLA cache, no executable store).
3. *warm*: the same command again on the same cache folder.

Each row records the wall seconds of the cold and warm processes (imports included), model evaluations per
second (the report's ``aggregate.n_evals`` over that wall time), the devices JAX saw, the dtype, the overall
score, the gates and each probe's wall time, score and evaluations.  A model that cannot be loaded (missing
weights or package), a process that fails, or one that runs out of time is a row with ``status`` and
``reason``; the run goes on with the next model.  ``benchmarks/results/gpu.json`` (machine, load average and
GPU description via ``benchmarks/_record.py``) is reserved for a run on a GPU; a CPU smoke run writes
elsewhere (``--out benchmarks/results/gpu_cpu_smoke.json``).

**Time budget (8 minutes).**  The whole run is held under ``--budget-s`` (default 450 s, plus a few seconds
to start and write: under 8 minutes).  The budget is shared out as the run goes: each model gets the time left
times its weight over the weights of the models still to run (LJ 1, SevenNet-0 2, nequix 2), so what an early
model leaves unused goes to the later ones; within that share the load step may take 60 s at most and the cold
process at most 70 %, and the warm process gets whatever is left (each also capped at ``--timeout-s``).  A
process that reaches its limit is killed (its process group) and its row says ``timeout``; a model whose cold
run did not finish gets no warm run.  The weights and the 70 % are estimates, not measurements: no GPU was
available when this was written.  On this project's 2-core CPU machine the Li…S suite takes 64 s cold / 9 s
warm for LJ (``benchmarks/results/certify.json``) and 1,196 s cold / 717 s warm for the native SevenNet-0 in
float32 (docs/sevennet.md), 717 s of which is evaluation (config_temperature's 1,100-step trajectory: 497 s);
nequix-mp-1 evaluated a 64-atom cell 8–20× slower than the native SevenNet there (neighbour capacity 96 and
256, a loaded machine; ``benchmarks/results/nequix_speed.json``) and has not been run on the full suite on
CPU.  On one H200 the evaluations should shrink by one to two orders of magnitude, which leaves XLA:GPU
compilation (14 programs per model, compiled on the host's 16 cores) as the likely cost of the cold runs, and
launch latency of the sequential MD steps as that of the warm ones.  If the split turns out wrong on a GPU,
adjust ``WEIGHTS`` and ``COLD_SHARE`` from the first ``gpu.json``, or give more time with ``--budget-s``.

float32 dots on recent NVIDIA GPUs run in TensorFloat-32 by default (10-bit mantissa); the children run with
``JAX_DEFAULT_MATMUL_PRECISION=highest`` (full float32, as on CPU) unless ``--matmul-precision default``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _record import finish  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
ELEMENTS = "Li,Be,B,C,Na,Mg,Al,Si,P,S"
DEFAULT_BUDGET_S = 450.0
DEFAULT_TIMEOUT_S = 300.0
LOAD_LIMIT_S = 60.0
#: Fraction of a model's share the cold process may use (the rest is kept for the warm one); an estimate.
COLD_SHARE = 0.7
#: Relative cost of each model's cold + warm runs, for sharing out the budget (estimates; a spec not listed: 2).
WEIGHTS = {"lj": 1.0, "7net-0": 2.0, "nequix-mp-1": 2.0}
#: Below this many seconds a process is not started (the row says the budget ran out).
MIN_LIMIT_S = 5.0


def _nequix_weights() -> pathlib.Path:
    """nequix-mp-1.nqx: ``$JAXCERT_NEQUIX_WEIGHTS``, else ``shared/weights/nequix`` inside or beside the checkout."""
    if env := os.environ.get("JAXCERT_NEQUIX_WEIGHTS"):
        return pathlib.Path(env)
    inside = ROOT / "shared" / "weights" / "nequix" / "nequix-mp-1.nqx"
    return inside if inside.exists() else ROOT.parent / "shared" / "weights" / "nequix" / "nequix-mp-1.nqx"


@dataclasses.dataclass(frozen=True)
class Case:
    """One model of the run: a short name, the ``--model`` spec and the ``--dtype`` of its substrates."""

    name: str
    spec: str
    dtype: str

    @property
    def weight(self) -> float:
        return WEIGHTS.get(self.name, 2.0)


def builtin_cases() -> dict[str, Case]:
    return {
        "lj": Case("lj", "lj", "float64"),
        "7net-0": Case("7net-0", "jax-sevennet:7net-0@float32", "float32"),
        "nequix-mp-1": Case("nequix-mp-1", f"nequix:{_nequix_weights()}@float32", "float32"),
    }


def resolve_models(arg: str) -> list[Case]:
    """``--models``: built-in names (lj, 7net-0, nequix-mp-1) or any ``--model`` spec (dtype from ``@float32``)."""
    known = builtin_cases()
    out = []
    for item in (x.strip() for x in arg.split(",")):
        if not item:
            continue
        if item in known:
            out.append(known[item])
        else:
            dtype = "float32" if "float32" in item.partition("@")[2].split(",") else "float64"
            out.append(Case(item, item, dtype))
    return out


# ----------------------------------------------------------------------------------------------- children
def run_child(cmd: list[str], env: dict[str, str], limit_s: float) -> dict[str, Any]:
    """Run ``cmd`` in its own process group, killed with the group after ``limit_s`` seconds.

    Returns ``status`` ("ok", "failed" or "timeout"), ``returncode``, ``wall_s``, ``limit_s``, the tail of
    ``stdout``/``stderr``, and ``reason`` unless it succeeded.
    """
    t0 = time.perf_counter()
    try:
        proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
    except OSError as err:
        return {"status": "failed", "returncode": None, "wall_s": 0.0, "limit_s": limit_s, "stdout": "",
                "stderr": "", "reason": f"could not start {cmd[0]}: {err}"}
    try:
        out, err = proc.communicate(timeout=limit_s)
        timed_out = False
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, err = proc.communicate()
        timed_out = True
    wall = time.perf_counter() - t0
    res = {"returncode": proc.returncode, "wall_s": wall, "limit_s": limit_s, "stdout": out[-2000:],
           "stderr": err[-3000:]}
    if timed_out:
        res.update(status="timeout", reason=f"killed after {limit_s:.0f} s (its time limit in the budget)")
    elif proc.returncode != 0:
        res.update(status="failed", reason=_reason(proc.returncode, err))
    else:
        res["status"] = "ok"
    return res


def _reason(code: int, stderr: str) -> str:
    """The child's last meaningful stderr lines, with its exit status."""
    lines = [ln.strip() for ln in stderr.strip().splitlines() if ln.strip()]
    errors = [ln for ln in lines if "error" in ln.lower()]
    tail = errors[-1] if errors else (lines[-1] if lines else "no output")
    return f"exit {code}: {tail[:1500]}"


_LOAD = """
import json, sys, time
t0 = time.perf_counter()
from jaxcert.cli._common import load_model, set_dtype
set_dtype(sys.argv[2])
import jax
model = load_model(sys.argv[1])
devs = jax.devices()
print("GPUBENCH " + json.dumps({"model": model.name, "load_s": time.perf_counter() - t0,
      "jax_backend": jax.default_backend(), "jax_devices": [str(d) for d in devs],
      "device_kind": getattr(devs[0], "device_kind", ""), "jax": jax.__version__,
      "matmul_precision": str(jax.config.jax_default_matmul_precision)}))
"""


def load_step(case: Case, env: dict[str, str], limit_s: float) -> dict[str, Any]:
    """Build the model in a fresh process (converting weights if needed) and report what JAX sees."""
    res = run_child([sys.executable, "-c", _LOAD, case.spec, case.dtype], env, limit_s)
    if res["status"] == "ok":
        line = next((ln for ln in res["stdout"].splitlines() if ln.startswith("GPUBENCH ")), None)
        if line is None:
            res.update(status="failed", reason="the load step printed no result")
        else:
            res["info"] = json.loads(line[len("GPUBENCH "):])
    return res


def certify_step(case: Case, elements: str, probes: str | None, cache: pathlib.Path, report: pathlib.Path,
                 env: dict[str, str], limit_s: float) -> dict[str, Any]:
    """One ``jaxcert certify`` process on ``cache``; the report's summary added when it finished."""
    cmd = [sys.executable, "-m", "jaxcert.cli", "certify", "--model", case.spec, "--elements", elements,
           "--dtype", case.dtype, "--json", str(report), "--no-fail-on-gate", "--quiet"]
    if probes:
        cmd += ["--probes", probes]
    res = run_child(cmd, {**env, "JAXCERT_CACHE_DIR": str(cache)}, limit_s)
    res["command"] = " ".join(["jaxcert", *cmd[3:]])
    if res["status"] == "ok":
        try:
            res.update(summarize(json.loads(report.read_text()), res["wall_s"]))
        except (OSError, ValueError, KeyError) as err:
            res.update(status="failed", reason=f"the report {report} could not be read: {err}")
    return res


def summarize(report: dict[str, Any], wall_s: float) -> dict[str, Any]:
    """What the benchmark keeps of a report: score, gates, evaluations per second, devices, per-probe times."""
    agg = report["aggregate"]
    n_evals = int(agg["n_evals"])
    suite_s = report.get("wall_time_s")  # certify() itself: no imports, no model load
    return {
        "overall": agg["overall"], "gates_passed": agg["gates_passed"], "gates_total": agg["gates_total"],
        "n_evals": n_evals, "evals_per_s": n_evals / wall_s if wall_s > 0 else None,
        "report_wall_s": suite_s, "evals_per_s_in_suite": n_evals / suite_s if suite_s else None,
        "complete": report.get("complete"),
        "dtype": report.get("dtype"), "jax_backend": report["machine"].get("jax_backend"),
        "jax_devices": report["machine"].get("jax_devices"),
        "probes": {p["name"]: {"wall_s": p.get("wall_s"), "n_evals": p.get("n_evals"), "score": p.get("score"),
                               "gate": p.get("gate")} for p in report["probes"]},
    }


# ------------------------------------------------------------------------------------------------ the plan
def model_deadline(now: float, deadline: float, weight: float, weights_left: float) -> float:
    """When this model's share of the time left ends (its weight over those of the models still to run)."""
    return now + max(0.0, deadline - now) * weight / weights_left


def _limit(end: float, timeout_s: float, cap: float | None = None) -> float | None:
    """The time limit of the next process: what is left of the share, capped; None below MIN_LIMIT_S."""
    left = min(max(0.0, end - time.monotonic()), cap if cap is not None else float("inf"))
    return None if left < MIN_LIMIT_S else min(left, timeout_s)


def model_row(case: Case, elements: str, probes: str | None, env: dict[str, str], end: float, timeout_s: float,
              workdir: pathlib.Path, reports: pathlib.Path | None = None) -> dict[str, Any]:
    """The row of one model: load, cold, warm; a failure at any stage ends the row with its reason."""
    row: dict[str, Any] = {"model": case.name, "spec": case.spec, "dtype": case.dtype, "status": "ok"}

    def stop(stage: str, res: dict[str, Any]) -> dict[str, Any]:
        row.update(status=res["status"] if res["status"] != "ok" else "failed", failed_stage=stage,
                   reason=res.get("reason", ""))
        return row

    limit = _limit(end, timeout_s, LOAD_LIMIT_S)
    if limit is None:
        return stop("load", {"status": "skipped", "reason": "no time left in the budget"})
    load = load_step(case, env, limit)
    row["load"] = {k: load[k] for k in ("status", "wall_s", "limit_s") if k in load} | load.get("info", {})
    if load["status"] != "ok":
        return stop("load", load)
    cache = pathlib.Path(tempfile.mkdtemp(prefix="cache-", dir=workdir))  # empty: the cold run fills it
    for stage, cap in (("cold", COLD_SHARE * max(0.0, end - time.monotonic())), ("warm", None)):
        limit = _limit(end, timeout_s, cap)
        if limit is None:
            return stop(stage, {"status": "skipped", "reason": f"no time left in the budget for the {stage} run"})
        report = (reports or cache.parent) / f"{_safe(case.name)}_{stage}.json"
        res = certify_step(case, elements, probes, cache, report, env, limit)
        row[stage] = {k: v for k, v in res.items() if k not in ("stdout", "stderr")}
        if res["status"] != "ok":
            if res["status"] == "failed":
                row[stage]["stderr_tail"] = res["stderr"][-1500:]
            return stop(stage, res)
    row["cold_s"], row["warm_s"] = row["cold"]["wall_s"], row["warm"]["wall_s"]
    row["overall"] = row["warm"]["overall"]
    row["same_overall_cold_warm"] = row["cold"]["overall"] == row["warm"]["overall"]
    return row


def _safe(name: str) -> str:
    return re.sub(r"[^\w.-]", "_", name)


def child_env(matmul_precision: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    if matmul_precision != "default":
        env["JAX_DEFAULT_MATMUL_PRECISION"] = matmul_precision
    return env


def gpu_description() -> list[str] | None:
    """``nvidia-smi``'s name, memory and driver of each GPU, or None without it."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        r = subprocess.run([smi, "--query-gpu=name,memory.total,driver_version,utilization.gpu",
                            "--format=csv,noheader"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return [ln.strip() for ln in r.stdout.splitlines() if ln.strip()] or None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="lj,7net-0,nequix-mp-1",
                   help="comma-separated: lj, 7net-0, nequix-mp-1, or any --model spec (default: the three)")
    p.add_argument("--elements", default=ELEMENTS, help=f"comma-separated symbols (default {ELEMENTS})")
    p.add_argument("--probes", default=None, help="comma-separated probe names (default: all 14)")
    p.add_argument("--budget-s", type=float, default=DEFAULT_BUDGET_S,
                   help=f"the whole run's time limit in seconds (default {DEFAULT_BUDGET_S:.0f})")
    p.add_argument("--timeout-s", type=float, default=DEFAULT_TIMEOUT_S,
                   help=f"limit of each subprocess in seconds (default {DEFAULT_TIMEOUT_S:.0f})")
    p.add_argument("--matmul-precision", default="highest", choices=["highest", "high", "default"],
                   help="JAX_DEFAULT_MATMUL_PRECISION of the children (default highest: full float32 dots)")
    p.add_argument("--reports-dir", help="keep the cold and warm reports here (default: discarded)")
    p.add_argument("--out", default=str(RESULTS / "gpu.json"), help="where to write the JSON")
    a = p.parse_args(argv)
    cases = resolve_models(a.models)
    if not cases:
        p.error("--models: no model given")
    start = time.monotonic()
    deadline = start + a.budget_s
    load_start = os.getloadavg()
    env = child_env(a.matmul_precision)
    # this process never holds the device while the children run: JAX is first asked about devices in
    # finish(), after them; even then it must not preallocate GPU memory another run might need
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    reports = pathlib.Path(a.reports_dir) if a.reports_dir else None
    if reports:
        reports.mkdir(parents=True, exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="jaxcert-gpu-bench-") as tmp:
        workdir = pathlib.Path(tmp)
        for k, case in enumerate(cases):
            weights_left = sum(c.weight for c in cases[k:])
            end = model_deadline(time.monotonic(), deadline, case.weight, weights_left)
            print(f"[{time.monotonic() - start:6.1f} s] {case.name} ({case.spec}, {case.dtype}): "
                  f"{max(0.0, end - time.monotonic()):.0f} s of the budget", flush=True)
            row = model_row(case, a.elements, a.probes, env, end, a.timeout_s, workdir, reports)
            rows.append(row)
            msg = (f"cold {row['cold_s']:.1f} s, warm {row['warm_s']:.1f} s, "
                   f"{row['warm']['evals_per_s']:.3g} evals/s warm, overall {row['overall']:.4f}"
                   if row["status"] == "ok" else f"{row['status']} at {row['failed_stage']}: {row['reason']}")
            print(f"[{time.monotonic() - start:6.1f} s] {case.name}: {msg}", flush=True)
    devices = next((r["load"].get("jax_devices") for r in rows if r.get("load", {}).get("jax_devices")), None)
    result = {
        "benchmark": "benchmarks/gpu.py",
        "command": " ".join(["python", "benchmarks/gpu.py", *(argv if argv is not None else sys.argv[1:])]),
        "elements": a.elements.split(","), "probes": a.probes or "all",
        "budget_s": a.budget_s, "timeout_s": a.timeout_s, "weights": {c.name: c.weight for c in cases},
        "cold_share": COLD_SHARE, "matmul_precision": a.matmul_precision,
        "total_wall_s": time.monotonic() - start,
        "jax_devices_seen_by_children": devices,
        "on_gpu": bool(devices) and any(("cuda" in d.lower() or "gpu" in d.lower()) for d in devices),
        "gpus": gpu_description(),
        "models": rows,
        "notes": ("cold: a fresh JAXCERT_CACHE_DIR (no XLA cache, no executable store); warm: a second process "
                  "on that folder. Wall times are whole processes (imports included); evals_per_s is the report's "
                  "aggregate n_evals over that wall time, evals_per_s_in_suite over the report's own wall time "
                  "(certify() alone). The load step (model build, weight conversion) is not included."),
    }
    finish(result, load_start, a.out, "the host side (tracing, compilation, Python) of every time is inflated")
    return 0 if all(r["status"] == "ok" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
