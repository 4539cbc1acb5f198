"""Host metrics of one relax → attack → relax run, before/after, against the run itself, per system size.

Structures: diamond Si (``bulk("Si", "diamond", a=5.431, cubic=True)``) repeated n × n × n (64, 216, 512 and
4096 atoms), rattled 0.05 Å (seed 0), with Stillinger–Weber.  For each size:

* **run**: :func:`jaxcert.attacks.run_grid` with one structure, I-FGSM (n = 10, ε = 0.05 Å, seed 42) and the
  default :class:`~jaxcert.attacks.PipelineConfig` (FIRE, fmax 0.01 eV/Å): relax, attack, relax.  Timed cold
  (compilation included) and, up to ``--warm-max-atoms``, warm (best of a few repeats); above it the cold time is
  the run's time (compilation is then a small part of it).
* **after**: :func:`jaxcert.attacks.metrics.run_metrics` of that run (both stages) as it is now, best of
  ``--repeats``: ``first`` with the memo cleared (the reference's neighbour lists and spglib datasets computed
  too, as for the first run of a reference) and ``next`` with only the reference memoised (``compare(ref, ref)``
  first: every further run of the same reference in a grid), plus a per-metric breakdown of ``next``.
* **before**: the same call with the per-operation implementation, the module at ``--before-rev`` (the last
  revision before the change) loaded from ``git show`` as a separate module.  Where its symmetry-operation test
  would need more than ``--before-full-limit`` K·N² distance evaluations (K reference operations, 98,304 at 4096
  atoms) it is timed on ``--before-sample`` operations and extrapolated linearly in K (the test is a loop over
  blocks of operations, each O(N²)); the row is then not compared.  Every other part (neighbour lists, spglib) is
  timed in full.
* **agreement**: every metric of the before and after rows compared where both are complete.
* **neighbour lists**: matscipy's C ``neighbour_list`` against ASE's ``primitive_neighbor_list`` (numpy) on the
  reference, for the RDF (6 Å) and the covalent-radius graph, best of ``--repeats``; same pairs checked.

Reported: seconds of each, the before/after ratios, and the metrics as a fraction of the run (the target: at most
10%).  The 1-minute load average at the start and end is recorded, and ``machine_loaded`` says whether it exceeded
0.75 × the core count.

Usage: ``python benchmarks/metrics.py [--sizes 2,3,4,8] [--out benchmarks/results/metrics.json]``.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import subprocess
import time
import types

import jax

jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402
from _record import finish  # noqa: E402  (benchmarks/_record.py: run as a script from benchmarks/)
from ase.build import bulk  # noqa: E402

import jaxcert  # noqa: E402
from jaxcert.attacks import AttackSpec, PipelineConfig, metrics, run_grid  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
#: The last revision of jaxcert/attacks/metrics.py with the per-operation symmetry test and ASE neighbour lists.
BEFORE_REV = "b30b979"
SPEC = AttackSpec("ifgsm", 10)
EPS, SEED = 0.05, 42


def load_before(rev: str) -> types.ModuleType:
    src = subprocess.run(["git", "show", f"{rev}:jaxcert/attacks/metrics.py"], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout
    mod = types.ModuleType("metrics_before")
    mod.__file__ = f"<git {rev}:jaxcert/attacks/metrics.py>"
    exec(compile(src, mod.__file__, "exec"), mod.__dict__)
    return mod


def best(fn, repeats: int, setup=None) -> tuple[float, object]:
    """Best wall time (s) of ``repeats`` calls of fn (``setup`` untimed before each) and the last result."""
    ts, out = [], None
    for _ in range(max(1, repeats)):
        if setup is not None:
            setup()
        t0 = time.perf_counter()
        out = fn()
        ts.append(time.perf_counter() - t0)
    return min(ts), out


def structure(n: int):
    a = bulk("Si", "diamond", a=5.431, cubic=True).repeat(n)
    a.rattle(0.05, seed=0)
    return a


def time_run(model, atoms, warm: bool, repeats: int) -> dict:
    s = jaxcert.Structure.from_ase(atoms)
    cfg = PipelineConfig()

    def go():
        g = run_grid(model, [s], (EPS,), (SEED,), attacks=(SPEC,), config=cfg)
        jax.block_until_ready(g.runs.final.energy)
        return g

    t0 = time.perf_counter()
    g = go()
    out = {"cold_s": time.perf_counter() - t0, "warm_s": None,
           "ref_steps": int(np.asarray(g.ref_steps)[0]), "steps_after": int(np.asarray(g.runs.steps).ravel()[0]),
           "converged_after": bool(np.asarray(g.runs.converged).ravel()[0])}
    if warm:
        out["warm_s"], g = best(go, repeats)
    out["run_s"] = out["warm_s"] if warm else out["cold_s"]
    out["run_timing"] = "warm (compiled), best of repeats" if warm else "cold (compilation included), one call"
    return out, g


def time_before(before, g, n_atoms: int, full_limit: float, sample: int) -> dict:
    """Wall time of before.run_metrics; the per-operation test sampled and extrapolated above full_limit."""
    orig = before._ops_kept
    extra = {"sampled_calls": 0, "measured_s": 0.0, "extrapolated_s": 0.0}

    def sampled(atoms, rotations, translations, tol):
        K = len(rotations)
        if K * n_atoms ** 2 <= full_limit or K <= sample:
            return orig(atoms, rotations, translations, tol)
        idx = np.linspace(0, K - 1, sample).astype(int)
        t0 = time.perf_counter()
        kept = orig(atoms, rotations[idx], translations[idx], tol)
        dt = time.perf_counter() - t0
        extra["sampled_calls"] += 1
        extra["measured_s"] += dt
        extra["extrapolated_s"] += dt * K / sample
        return int(round(kept * K / sample))

    before._ops_kept = sampled
    try:
        t0 = time.perf_counter()
        row = before.run_metrics(g, 0, 0, 0, 0)
        wall = time.perf_counter() - t0
    finally:
        before._ops_kept = orig
    total = wall - extra["measured_s"] + extra["extrapolated_s"]
    return {"s": total, "measured_wall_s": wall, "extrapolated": extra["sampled_calls"] > 0,
            "ops_test_sampled_calls": extra["sampled_calls"], "ops_test_sample": sample,
            "ops_test_measured_s": extra["measured_s"], "ops_test_extrapolated_s": extra["extrapolated_s"]}, row


def time_after(g, repeats: int) -> tuple[dict, dict]:
    ref = metrics._take(g.reference, (0,)).structure.to_ase()
    run = metrics._take(g.runs, (0, 0, 0, 0))
    stages = {"immediate": run.adversarial.structure.to_ase(), "post_relaxation": run.final.structure.to_ase()}

    def prime():
        metrics.clear_cache()
        metrics.compare(ref, ref)

    first, row = best(lambda: metrics.run_metrics(g, 0, 0, 0, 0), repeats, setup=metrics.clear_cache)
    nxt, _ = best(lambda: metrics.run_metrics(g, 0, 0, 0, 0), repeats, setup=prime)
    parts = {}
    for name, fn in (("displacement", metrics.displacement), ("topology", metrics.topology),
                     ("rdf_l1", metrics.rdf_l1), ("symmetry", metrics.symmetry)):
        parts[name] = best(lambda fn=fn: [fn(ref, b) for b in stages.values()], repeats, setup=prime)[0]
    metrics.clear_cache()
    return {"first_s": first, "next_s": nxt, "next_breakdown_s": parts}, row


def time_neighbours(atoms, repeats: int) -> dict:
    from ase.neighborlist import natural_cutoffs, primitive_neighbor_list
    from matscipy.neighbours import neighbour_list

    cell, pbc, pos = atoms.cell.array, atoms.pbc, atoms.positions
    radii = np.asarray(natural_cutoffs(atoms, mult=1.0))
    out = {}
    for name, cut in (("rdf_6A", 6.0), ("covalent_graph", radii)):
        t_ase, d_ase = best(lambda cut=cut: primitive_neighbor_list("d", pbc, cell, pos, cut), repeats)
        t_msp, d_msp = best(lambda cut=cut: neighbour_list("d", atoms, cut), repeats)
        same = len(d_ase) == len(d_msp) and (not len(d_ase) or np.allclose(np.sort(d_ase), np.sort(d_msp),
                                                                          rtol=0, atol=1e-12))
        out[name] = {"ase_primitive_neighbor_list_s": t_ase, "matscipy_neighbour_list_s": t_msp,
                     "ratio_ase_over_matscipy": t_ase / t_msp if t_msp > 0 else None, "pairs": len(d_msp),
                     "same_pairs": bool(same)}
    return out


def compare_rows(before_row: dict, after_row: dict) -> list[str]:
    diffs = []
    for st in ("immediate", "post_relaxation"):
        for k, v in before_row[st].items():
            w = after_row[st].get(k)
            if isinstance(v, float) and isinstance(w, float) and np.isnan(v) and np.isnan(w):
                continue
            if v != w:
                diffs.append(f"{st}.{k}: before {v!r}, after {w!r}")
    return diffs


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", default="2,3,4,8", help="repeats n of the 8-atom cubic cell (n^3 x 8 atoms)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--warm-max-atoms", type=int, default=512)
    p.add_argument("--before-rev", default=BEFORE_REV)
    p.add_argument("--before-full-limit", type=float, default=5e9)
    p.add_argument("--before-sample", type=int, default=48)
    p.add_argument("--skip-before", action="store_true")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "metrics.json"))
    args = p.parse_args(argv)

    load_start = os.getloadavg()
    model = jaxcert.models.get("sw")
    before = None if args.skip_before else load_before(args.before_rev)
    metrics.compare(structure(1), structure(1))  # imports (scipy.spatial, matscipy, spglib) outside the timings
    metrics.clear_cache()
    sizes = []
    for n in (int(x) for x in args.sizes.split(",")):
        atoms = structure(n)
        N = len(atoms)
        print(f"--- {N} atoms", flush=True)
        run, g = time_run(model, atoms, N <= args.warm_max_atoms, args.repeats)
        warm = "not timed" if run["warm_s"] is None else f"{run['warm_s']:.3f} s"
        print(f"run: cold {run['cold_s']:.2f} s, warm {warm}; steps {run['ref_steps']} + {SPEC.n_steps} + "
              f"{run['steps_after']}", flush=True)
        after, row_after = time_after(g, args.repeats)
        print(f"after: first {after['first_s']:.3f} s, next {after['next_s']:.3f} s, "
              f"breakdown {({k: round(v, 4) for k, v in after['next_breakdown_s'].items()})}", flush=True)
        entry = {"n_repeat": n, "n_atoms": N, "run": run, "after": after,
                 "neighbour_lists": time_neighbours(atoms, args.repeats)}
        if before is not None:
            bt, row_before = time_before(before, g, N, args.before_full_limit, args.before_sample)
            entry["before"] = bt
            entry["ratio_before_over_after_first"] = bt["s"] / after["first_s"]
            entry["ratio_before_over_after_next"] = bt["s"] / after["next_s"]
            entry["before_fraction_of_run"] = bt["s"] / run["run_s"]
            if not bt["extrapolated"]:
                entry["differences"] = compare_rows(row_before, row_after)
            print(f"before: {bt['s']:.2f} s{' (extrapolated)' if bt['extrapolated'] else ''}; ratio "
                  f"{entry['ratio_before_over_after_first']:.1f}x (first), {entry['ratio_before_over_after_next']:.1f}x"
                  f" (next); differences {entry.get('differences', 'not compared')}", flush=True)
        entry["after_fraction_of_run_first"] = after["first_s"] / run["run_s"]
        entry["after_fraction_of_run_next"] = after["next_s"] / run["run_s"]
        entry["within_10_percent"] = {"first": entry["after_fraction_of_run_first"] <= 0.1,
                                      "next": entry["after_fraction_of_run_next"] <= 0.1}
        print(f"metrics / run: first {100 * entry['after_fraction_of_run_first']:.1f}%, "
              f"next {100 * entry['after_fraction_of_run_next']:.1f}%", flush=True)
        print("neighbour lists:", {k: round(v["ratio_ase_over_matscipy"], 1) for k, v in
                                   entry["neighbour_lists"].items()}, flush=True)
        sizes.append(entry)
        metrics.clear_cache()

    result = {
        "benchmark": "host metrics (run_metrics, both stages) of one relax-attack-relax run, before/after, vs the run",
        "model": "sw (Stillinger-Weber Si)",
        "structures": "diamond Si a=5.431 A cubic cell repeated n x n x n, rattled 0.05 A (seed 0)",
        "run": {"attack": SPEC.label, "epsilon_A": EPS, "seed": SEED, "relaxation": "FIRE, fmax 0.01 eV/A, 300 steps"},
        "before": {"rev": args.before_rev, "source": "git show REV:jaxcert/attacks/metrics.py, loaded as a module",
                   "full_limit_KN2": args.before_full_limit, "sample_ops": args.before_sample},
        "after": {"first": "memo cleared: the reference's lists and datasets computed too (first run of a reference)",
                  "next": "reference memoised (every further run of the same reference in a grid)"},
        "repeats": args.repeats, "sizes": sizes,
    }
    finish(result, load_start, args.out, "the timings are inflated and noisy (best-of-repeats taken)")


if __name__ == "__main__":
    main()
