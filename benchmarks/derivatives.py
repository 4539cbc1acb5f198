"""Cost of exact derivatives relative to one energy+forces evaluation, and exact vs FD Hessians.

For every analytic model on (a) the 13-atom substrate cluster of its element and
(b) a 64-atom periodic cell, measures (median of repeats, compile excluded):

* E+F, the floor (one value_and_grad);
* J·v (jvp of the force output), H·v, the dense Hessian (jacfwd), the stress
  (strain gradient), as multiples of the floor;
* the dense Hessian by central finite differences (6N force evaluations, the
  reference's recipe) and its ratio to the exact dense Hessian; the max
  deviation between the two (FD truncation, ~h²).

Writes ``benchmarks/results/derivatives.json`` with the machine description.
Run alone on a quiet machine: ``python benchmarks/derivatives.py [--repeats 7]``.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import time

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from ase.build import bulk  # noqa: E402

import jaxcert  # noqa: E402
from jaxcert.core.derivatives import EXACT, FiniteDifference  # noqa: E402
from jaxcert.core.device import machine  # noqa: E402
from jaxcert.probes import substrates  # noqa: E402

CASES = {  # model -> (kwargs, element, lattice, a, cubic repeat to 64 atoms)
    "lj": ({}, "Si", "diamond", 5.43, (2, 2, 2)),
    "morse": ({"element": "Cu"}, "Cu", "fcc", 3.61, (2, 2, 4)),
    "emt": ({}, "Cu", "fcc", 3.61, (2, 2, 4)),
    "sw": ({}, "Si", "diamond", 5.431, (2, 2, 2)),
    "tersoff": ({}, "Si", "diamond", 5.432, (2, 2, 2)),
    "eam": ({}, "Cu", "fcc", 3.615, (2, 2, 4)),
}


def _time(fn, repeats: int) -> float:
    jax.block_until_ready(fn())  # compile + warm
    ts = []
    for _ in range(repeats):
        t = time.perf_counter()
        jax.block_until_ready(fn())
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def bench(model, s, repeats: int) -> dict:
    s = model.prepare(s)
    v = jnp.asarray(np.random.default_rng(0).normal(size=s.positions.shape), s.dtype)
    fd = FiniteDifference(order=2)
    ef = jax.jit(lambda s: model.energy_and_forces_of(model.params, s))
    floor = _time(lambda: ef(s), repeats)
    out = {"n_atoms": int(s.n_atoms), "periodic": s.periodic, "energy_forces_s": floor}
    jobs = {
        "jvp": lambda: EXACT.force_jvp(model, s, v),
        "hvp": lambda: EXACT.hvp(model, s, v),
        "hessian_exact": lambda: EXACT.hessian(model, s),
        "hessian_fd": lambda: fd.hessian(model, s),
    }
    if s.periodic:
        jobs["stress"] = lambda: _stress_jit(model, s)
    for name, fn in jobs.items():
        t = _time(fn, max(3, repeats // 2) if "hessian" in name else repeats)
        out[f"{name}_s"] = t
        out[f"{name}_over_floor"] = t / floor
    out["hessian_fd_over_exact"] = out["hessian_fd_s"] / out["hessian_exact_s"]
    out["hessian_fd_force_calls"] = 6 * int(s.n_atoms)
    He, Hf = EXACT.hessian(model, s), fd.hessian(model, s)
    out["hessian_max_abs_dev_fd_vs_exact"] = float(jnp.abs(He - Hf).max())
    out["hessian_max_abs"] = float(jnp.abs(He).max())
    return out


_stress_jit = jax.jit(lambda m, s: m.stress_of(m.params, s))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--models", default=",".join(CASES))
    ap.add_argument("--out", default=str(pathlib.Path(__file__).parent / "results" / "derivatives.json"))
    a = ap.parse_args()
    results = {}
    for name in a.models.split(","):
        kw, el, lat, lc, rep = CASES[name]
        model = jaxcert.models.get(name, **kw)
        cl = substrates.cluster(el, dtype=jnp.float64)
        at = bulk(el, lat, a=lc, cubic=True).repeat(rep)
        at.rattle(0.02, seed=1)
        cell = jaxcert.Structure.from_ase(at)
        results[name] = {"element": el, "cluster13": bench(model, cl, a.repeats),
                         "cell64": bench(model, cell, a.repeats)}
        for kind in ("cluster13", "cell64"):
            r = results[name][kind]
            print(f"{name:8s} {kind:9s} n={r['n_atoms']:3d} E+F {r['energy_forces_s'] * 1e3:8.3f} ms | "
                  f"Jv {r['jvp_over_floor']:5.2f}x  Hv {r['hvp_over_floor']:5.2f}x  "
                  f"H {r['hessian_exact_over_floor']:6.1f}x  "
                  + (f"stress {r['stress_over_floor']:5.2f}x  " if "stress_over_floor" in r else "")
                  + f"| H_fd/H_exact {r['hessian_fd_over_exact']:5.2f}x  "
                  f"max|ΔH| {r['hessian_max_abs_dev_fd_vs_exact']:.1e}",
                  flush=True)
    payload = {"benchmark": "derivatives", "machine": machine(), "x64": True, "repeats": a.repeats,
               "note": "times are medians after compilation; ratios are against E+F measured in the same run",
               "results": results}
    pathlib.Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    pathlib.Path(a.out).write_text(json.dumps(payload, indent=2))
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
