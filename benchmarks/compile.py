"""What a certify run spends on compiling, per model: traces of the model's energy function, compiled XLA
programs, compile seconds and run seconds, cold (empty cache) and warm (a second process on that cache).

Each measurement is a fresh process (``--child``), so "cold" is what a user's first run of a model costs and
"warm" what the next run costs:

* **cold**: an empty ``$JAXCERT_CACHE_DIR``; XLA compile time and the number of compiled programs come from
  JAX's monitoring events (``/jax/core/compile/backend_compile_duration``; tracing and lowering from
  ``jaxpr_trace_duration`` and ``jaxpr_to_mlir_module_duration``);
* **warm**: the same cache folder again;
* **count**: caches off, with a profile hook counting the Python calls of the model's energy function, which
  happen only while JAX traces it (a compiled program never calls Python).  Run separately because the hook
  slows tracing; its wall time is not reported.

Cases: ``lj`` (Li…S, float64), ``emt`` (Cu, float64), ``neural_pair`` (a user's MLP pair potential, width 48 on
radial features, written as a plain :class:`jaxcert.Model`; Si and C, float64), ``sevennet``
(``jax-sevennet:7net-0``, float32) and ``nequix`` (nequix-mp-1 from ``../shared/weights/nequix``, float32);
``--elements`` overrides the element list of the two networks (default Si,C: the full Li…S cold run of
SevenNet-0 takes about 20 minutes on this 2-core machine).

Usage: ``python benchmarks/compile.py [--cases lj,emt,neural_pair] [--elements Si,C] [--out PATH]``; writes
``benchmarks/results/compile.json`` with the machine description and the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
NEQUIX = ROOT.parent / "shared" / "weights" / "nequix" / "nequix-mp-1.nqx"
LI_S = "Li,Be,B,C,Na,Mg,Al,Si,P,S"
CASES = {  # name -> (default elements, dtype)
    "lj": (LI_S, "float64"),
    "emt": ("Cu", "float64"),
    "neural_pair": ("Si,C", "float64"),
    "sevennet": ("Si,C", "float32"),
    "nequix": ("Si,C", "float32"),
}
EVENTS = {"/jax/core/compile/backend_compile_duration": "compile_s",
          "/jax/core/compile/jaxpr_trace_duration": "trace_s",
          "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower_s"}


def neural_pair_model() -> Any:
    """A user's neural pair potential: E = ½ Σ_ij MLP(radial basis(r_ij)) · f_cut(r_ij), width 48, two hidden
    layers, random weights (seeded), 5 Å cutoff, species-blind.  A plain :class:`jaxcert.Model` as the README's
    "Your own model" shows; nothing of it is jaxcert's own code."""
    import jax
    import jax.numpy as jnp

    import jaxcert

    cutoff, n_basis, width = 5.0, 8, 48
    keys = jax.random.split(jax.random.key(7), 3)

    def dense(k: Any, n_in: int, n_out: int) -> dict[str, Any]:
        return {"w": jax.random.normal(k, (n_in, n_out)) / jnp.sqrt(n_in), "b": jnp.zeros(n_out)}

    params = {"l1": dense(keys[0], n_basis, width), "l2": dense(keys[1], width, width),
              "l3": dense(keys[2], width, 1)}
    centres = jnp.linspace(0.8, cutoff, n_basis)

    def energy_fn(p: dict[str, Any], s: Any) -> Any:
        pr = jaxcert.core.neighbors.pairs(s, cutoff=cutoff)
        r = jnp.where(pr.mask, pr.r, cutoff)
        basis = jnp.exp(-4.0 * (r[..., None] - centres) ** 2)
        h = jax.nn.silu(basis @ p["l1"]["w"] + p["l1"]["b"])
        h = jax.nn.silu(h @ p["l2"]["w"] + p["l2"]["b"])
        e = (h @ p["l3"]["w"] + p["l3"]["b"])[..., 0]
        fcut = 0.5 * (jnp.cos(jnp.pi * jnp.clip(r / cutoff, 0.0, 1.0)) + 1.0)
        repulsion = jnp.exp(-3.0 * (r - 1.0))  # keeps the clusters bound from collapsing
        return 0.5 * jnp.sum(jnp.where(pr.mask, (0.05 * e + repulsion) * fcut, 0.0))

    return jaxcert.Model(energy_fn, params=params, name="neural-pair-mlp48", cutoff=cutoff)


def load(case: str) -> Any:
    from jaxcert import models

    if case == "neural_pair":
        return neural_pair_model()
    if case == "sevennet":
        return models.from_spec("jax-sevennet:7net-0@float32")
    if case == "nequix":
        if not NEQUIX.exists():
            raise SystemExit(f"nequix weights not found at {NEQUIX}")
        return models.from_spec(f"nequix:{NEQUIX}@float32")
    return models.get(case)


def child(case: str, mode: str, cache_dir: str, elements: str) -> dict[str, Any]:
    """One certify run in this process; the measured numbers as a dict."""
    os.environ["JAXCERT_CACHE_DIR"] = cache_dir if mode != "count" else "off"
    import jax

    dtype_name = CASES[case][1]
    if dtype_name == "float64":
        jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    import jaxcert
    from jaxcert.core.cache import enable_compilation_cache

    enable_compilation_cache()
    ev = {"compile_s": 0.0, "trace_s": 0.0, "lower_s": 0.0, "programs": 0}
    lock = threading.Lock()

    def listener(event: str, duration: float, **_kw: Any) -> None:
        if event in EVENTS:
            with lock:
                ev[EVENTS[event]] += duration
                ev["programs"] += event.endswith("backend_compile_duration")

    jax.monitoring.register_event_duration_secs_listener(listener)
    model = load(case)
    fn = model.energy_fn
    while hasattr(fn, "func"):  # functools.partial
        fn = fn.func
    code = getattr(fn, "__code__", None)
    traces = [0]
    if mode == "count" and code is not None:
        def hook(frame: Any, event: str, _arg: Any) -> None:
            if event == "call" and frame.f_code is code:
                traces[0] += 1
        sys.setprofile(hook)
        threading.setprofile(hook)
    t0 = time.perf_counter()
    rep = jaxcert.certify(model, elements, seed=0, dtype=jnp.float64 if dtype_name == "float64" else jnp.float32)
    wall = time.perf_counter() - t0
    sys.setprofile(None)
    threading.setprofile(None)
    n_evals = int(sum(int(x) for o in rep.outcomes for x in o.n_evals))
    out = {"wall_s": wall, **ev, "n_evals": n_evals, "model_evals_per_s": n_evals / wall if wall > 0 else None,
           "overall": rep.aggregate().get("overall"), "device": str(jax.devices()[0])}
    if mode == "count":
        out = {"traces": traces[0] if code is not None else None}
    return out


def run_child(case: str, mode: str, cache_dir: str, elements: str) -> dict[str, Any]:
    env = {**os.environ, "JAX_PLATFORMS": os.environ.get("JAX_PLATFORMS", "cpu"), "PYTHONPATH": str(ROOT)}
    p = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", case, "--mode", mode,
                        "--cache", cache_dir, "--elements", elements], env=env, capture_output=True, text=True)
    if p.returncode != 0:
        return {"error": (p.stderr.strip().splitlines() or ["?"])[-1][:300]}
    return json.loads(p.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default="lj,emt,neural_pair")
    ap.add_argument("--elements", default=None, help="element list of the neural_pair, sevennet and nequix cases")
    ap.add_argument("--no-count", action="store_true", help="skip the trace-counting run")
    ap.add_argument("--out", default=str(HERE / "results" / "compile.json"))
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--mode", help=argparse.SUPPRESS)
    ap.add_argument("--cache", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        print(json.dumps(child(a.child, a.mode, a.cache, a.elements)))
        return 0
    sys.path.insert(0, str(HERE))
    from _record import finish

    load0 = os.getloadavg()
    rows = []
    for case in [c.strip() for c in a.cases.split(",") if c.strip()]:
        elements = a.elements if (a.elements and case in ("neural_pair", "sevennet", "nequix")) else CASES[case][0]
        with tempfile.TemporaryDirectory(prefix="jaxcert-compile-") as tmp:
            cache_dir = os.path.join(tmp, "cache")
            cold = run_child(case, "cold", cache_dir, elements)
            warm = run_child(case, "warm", cache_dir, elements)
        count = {} if a.no_count else run_child(case, "count", "off", elements)
        row = {"case": case, "elements": elements, "dtype": CASES[case][1], "cold": cold, "warm": warm, **count}
        if "wall_s" in cold and "wall_s" in warm:
            row["compile_share_cold"] = cold["compile_s"] / cold["wall_s"]
            row["cold_over_warm"] = cold["wall_s"] / warm["wall_s"]
        rows.append(row)
        print(f"{case:12s} {elements:28s} cold {cold.get('wall_s', float('nan')):7.1f} s "
              f"(compile {cold.get('compile_s', float('nan')):6.1f} s, {cold.get('programs', '?')} programs) "
              f"warm {warm.get('wall_s', float('nan')):7.1f} s ({warm.get('programs', '?')} programs) "
              f"traces {row.get('traces', '-')}" + (f"  ERROR {cold.get('error') or warm.get('error')}"
                                                   if "error" in cold or "error" in warm else ""), flush=True)
    finish({"benchmark": "compile", "rows": rows}, load0, a.out,
           "compile and run seconds are inflated; counts of traces and programs are not")
    return 0


if __name__ == "__main__":
    sys.exit(main())
