"""Networks on periodic cells: jaxcert's ASE calculator against each model's own, and the full certify cost.

Two parts, each timed in this run against baselines measured in this same run.

**Part 1, per call** (``--part percall``).  One call is energy, forces and stress together, float32, JAX's
x64 off.  Two pairs of engines are compared:

* nequix-mp-1-pft: :class:`jaxcert.adapters.calculator.ModelCalculator` around
  ``jaxcert.Model.from_nequix(path, dtype="float32")`` (its defaults), against nequix's own
  ``nequix.calculator.NequixCalculator(model_path=path, use_kernel=False)`` (JAX backend, no kernels, built
  offline from the local checkpoint; the checkpoint is read where it lies, never copied);
* SevenNet-0: the same ``ModelCalculator`` around the native model
  ``jaxcert.models.get("jax-sevennet", checkpoint="7net-0")``, against sevenn's
  ``sevenn.calculator.SevenNetCalculator("7net-0", device="cpu")`` (torch, the checkpoint shipped in the wheel).

Cells (each rattled by 0.05 Å with a fixed seed): diamond Si 8 (cubic) and 64 (2×2×2 cubic), Si 250
(5×5×5 primitive cell, a non-orthogonal box), bcc Li 128 (4×4×4 cubic), fcc Cu 108 (3×3×3 cubic) and a
compressed Si 64 (2×2×2 cubic at 0.9 of the lattice constant).  Each engine runs on each cell in its own
fresh process (``JAXCERT_CACHE_DIR=off``, so no compiled program is loaded from disk), which records: the
time from the process's spawn to a ready calculator; the first call (tracing and compilation included);
``--calls`` later calls (default 5), the atoms moved by 1e-3 Å (seeded normal draws) before each so that
nothing is cached, and their median; the process's peak resident memory and CPU time (``os.wait4`` on that
one child, i.e. ``getrusage`` of that process alone, so peaks of different engines never mix).  Compared:
energy per atom over every call (the same positions in both processes; acceptance |ΔE| ≤ 1e-5 eV/atom), the
largest force difference, and the ratio of medians jaxcert / calculator (acceptance ≤ 1.25).  Recorded
with each cell: the real neighbour count (directed pairs closer than the model's cutoff, over all periodic
images, from ``matscipy.neighbours.neighbour_list``) and, where jaxcert has it,
``jaxcert.core.neighbors.edge_slots(model, structure)`` = (real edges, edge slots jaxcert evaluates); null
where that function does not exist.

**Part 2, full certify on Si** (``--part certify``).  ``jaxcert certify --model SPEC --dtype float32
--elements Si --seed 0 --quiet --no-fail-on-gate --json R`` for ``nequix:<checkpoint>@float32`` and
``jax-sevennet:7net-0@float32`` (the board's spec), as separate processes: cold (a fresh, empty
``JAXCERT_CACHE_DIR`` in a temporary folder) then warm (the same folder, a second process).  Each
process's wall time, user and system CPU and peak RSS come from ``os.wait4`` on it.

The finite-difference reference (pescert) is not installable, so its cost is *estimated* here from
measurements made in this run, for each model, as

    estimate = startup + warm-up + Σ_probes calls(probe) × t(substrate(probe), properties(probe))

* calls(probe): the reference recipe's model calls per element (docs/probes.md §4.15, the table
  ``REFERENCE_CALLS`` below, identical to ``benchmarks/certify.py``): equivariance 9, parity 2,
  representation 20, zero_modes 78, trimer 115, conservativeness 31, betti 48, stress_consistency 13,
  cross_maxwell 37, reversibility 201, config_temperature 1501 + 880, virial 0, equipartition 78,
  smoothness 81;
* substrate(probe): the probe's substrate kind as registered (``jaxcert.probes.PROBES[probe].substrate``:
  cluster, trimer, bulk or p2mm), built for Si by :mod:`jaxcert.probes.substrates` (``cluster_atoms``,
  ``trimer_atoms``, ``bulk_atoms``, ``p2mm_atoms``);
* properties(probe): energy+forces, or energy+forces+stress where the probe needs a stress
  (``PROBES[probe].needs_stress``: stress_consistency, parity, cross_maxwell);
* t: the median of ``--substrate-calls`` (default 20) calls of the model's own ASE calculator
  (NequixCalculator / SevenNetCalculator, as above) on that substrate with those properties, the atoms
  moved by 1e-3 Å before each call, in one fresh process per model;
* startup: that process's time from spawn to a ready calculator (imports and checkpoint load), paid once;
* warm-up: for every (substrate, properties) used, its first call minus the median (compilation of the
  calculator's program for that shape), paid once each.

What the estimate leaves out, so it is a lower bound of the reference's cost and the ratios against it
are conservative (they make jaxcert look slower, not faster): the reference's relaxations (zero_modes'
BFGS, up to 1000 steps; config_temperature's 300-step BFGS before its trajectory; cross_maxwell's optional
cell relaxation), its own arithmetic and I/O between calls, and its report.  The published figures are
recorded in the JSON for context, not printed and not used in any ratio printed: the reference on this
machine class took 659 s wall and 1.26 GB peak for nequix-mp-1-pft on Si; an earlier jaxcert took 1,086 s
cold, 325 s warm and 6.2 GB.  Targets printed: cold ≤ 0.5× and warm ≤ 0.2× the estimate; peak ≤ 3 GB.

Usage::

    python benchmarks/networks.py                      # both parts, about an hour on a quiet 2-core CPU
    python benchmarks/networks.py --quick              # smoke test: Si8 and Si64, 2 later calls, no certify
    python benchmarks/networks.py --part certify --checkpoint /path/nequix-mp-1-pft.nqx
    python benchmarks/networks.py --part certify --probes parity --substrate-calls 2   # certify path, minutes

Writes ``benchmarks/results/networks.json`` (``--out``; rewritten after every finished row so a cut-short
run keeps what it measured) with the machine description and the load average (``benchmarks/_record.py``).
Run it on a quiet machine: every time is inflated under load (the JSON's ``machine_loaded`` says so).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[1]
DEFAULT_CKPT = ROOT.parent / "shared" / "weights" / "nequix" / "nequix-mp-1-pft.nqx"
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "networks.json"

#: The reference's (pescert) default model calls per element and probe: docs/probes.md §4.15, the same
#: table as ``benchmarks/certify.py`` (relaxations excluded; config_temperature = 1501 MD steps + 880).
REFERENCE_CALLS: dict[str, int] = {
    "equivariance": 9, "parity": 2, "representation": 20, "zero_modes": 78, "trimer": 115,
    "conservativeness": 31, "betti": 48, "stress_consistency": 13, "cross_maxwell": 37, "reversibility": 201,
    "config_temperature": 1501 + 880, "virial": 0, "equipartition": 78, "smoothness": 81,
}

#: Published measurements, for context only (recorded in the JSON, never printed, never in a printed ratio).
PUBLISHED = {
    "finite_difference_reference": {
        "what": "pescert (finite-difference reference), nequix-mp-1-pft on Si, this machine class",
        "wall_s": 659.0, "peak_GB": 1.26},
    "jaxcert_earlier": {
        "what": "an earlier jaxcert, the same certification", "cold_s": 1086.0, "warm_s": 325.0, "peak_GB": 6.2},
}

#: Acceptance targets.
MAX_DE_PER_ATOM = 1e-5  # eV/atom, jaxcert vs the model's own calculator
MAX_SPEED_RATIO = 1.25  # median call, jaxcert / calculator
MAX_COLD = 0.5  # cold certify wall / reference estimate
MAX_WARM = 0.2  # warm certify wall / reference estimate
MAX_PEAK_GB = 3.0

#: model -> (jaxcert engine, the model's own calculator)
PAIRS = {"nequix": ("jaxcert-nequix", "nequix-calculator"), "sevennet": ("jaxcert-sevennet", "sevenn-calculator")}
ENGINES = tuple(e for pair in PAIRS.values() for e in pair)
REFERENCE_ENGINE = {"nequix": "nequix-calculator", "sevennet": "sevenn-calculator"}

CASES = ("Si8", "Si64", "Si250", "Li128", "Cu108", "Si64c")
QUICK_CASES = ("Si8", "Si64")
EFS = ("energy", "forces", "stress")
EF = ("energy", "forces")


# ------------------------------------------------------------------------------------------ structures
def case_atoms(case: str):
    """The rattled periodic cell of a case (deterministic) and a one-line description."""
    from ase.build import bulk

    if case == "Si8":
        a, desc = bulk("Si", "diamond", a=5.43, cubic=True), "diamond Si, cubic cell, a = 5.43 Å"
    elif case == "Si64":
        a, desc = bulk("Si", "diamond", a=5.43, cubic=True).repeat(2), "diamond Si, 2×2×2 cubic, a = 5.43 Å"
    elif case == "Si250":
        a, desc = bulk("Si", "diamond", a=5.43).repeat(5), "diamond Si, 5×5×5 primitive (non-orthogonal), a = 5.43 Å"
    elif case == "Li128":
        a, desc = bulk("Li", "bcc", a=3.51, cubic=True).repeat(4), "bcc Li, 4×4×4 cubic, a = 3.51 Å"
    elif case == "Cu108":
        a, desc = bulk("Cu", "fcc", a=3.61, cubic=True).repeat(3), "fcc Cu, 3×3×3 cubic, a = 3.61 Å"
    elif case == "Si64c":
        a, desc = (bulk("Si", "diamond", a=0.9 * 5.43, cubic=True).repeat(2),
                   "diamond Si, 2×2×2 cubic, compressed to 0.9 × 5.43 Å")
    else:
        raise SystemExit(f"unknown case {case!r}; known: {', '.join(CASES)}")
    a.rattle(0.05, seed=CASES.index(case) + 1)
    return a, desc + ", rattled 0.05 Å"


def substrate_atoms(kind: str):
    """The Si probe substrate of a kind, as jaxcert's probes build it."""
    from jaxcert.probes import substrates

    build = {"cluster": substrates.cluster_atoms, "trimer": substrates.trimer_atoms,
             "bulk": substrates.bulk_atoms, "p2mm": substrates.p2mm_atoms}[kind]
    return build("Si")


# ------------------------------------------------------------------------------------------ the reference cost
def probe_recipes() -> dict[str, tuple[str, bool]]:
    """probe -> (substrate kind, needs a stress), from jaxcert's probe registry, for the probes of
    :data:`REFERENCE_CALLS`."""
    from jaxcert.probes import PROBES

    return {p: (PROBES[p].substrate, bool(PROBES[p].needs_stress)) for p in REFERENCE_CALLS}


def substrate_key(kind: str, stress: bool) -> str:
    return f"{kind}+stress" if stress else kind


def reference_cost(calls: dict[str, int], recipes: dict[str, tuple[str, bool]], timings: dict[str, dict[str, float]],
                   startup_s: float) -> dict[str, Any]:
    """The reference's estimated cost (module docstring): startup + warm-up + Σ calls × median per-call time.

    Args:
      calls: model calls per probe (:data:`REFERENCE_CALLS`).
      recipes: probe -> (substrate kind, needs stress) (:func:`probe_recipes`).
      timings: :func:`substrate_key` -> {"first_s", "median_s"} of the model's own calculator.
      startup_s: spawn to a ready calculator.
    """
    per_probe: dict[str, dict[str, Any]] = {}
    used: set[str] = set()
    for probe, n in calls.items():
        key = substrate_key(*recipes[probe])
        t = timings[key]["median_s"]
        per_probe[probe] = {"calls": n, "substrate": key, "per_call_s": t, "cost_s": n * t}
        if n:
            used.add(key)
    steady = sum(v["cost_s"] for v in per_probe.values())
    warmup = {k: max(0.0, timings[k]["first_s"] - timings[k]["median_s"]) for k in sorted(used)}
    total = startup_s + sum(warmup.values()) + steady
    return {"estimate_s": total, "steady_s": steady, "startup_s": startup_s, "warmup_s": warmup,
            "calls_total": sum(calls.values()), "per_probe": per_probe}


# ------------------------------------------------------------------------------------------ child processes
def make_calculator(engine: str, checkpoint: str):
    """(ASE calculator, jaxcert Model or None) of an engine."""
    if engine == "jaxcert-nequix":
        import jaxcert
        from jaxcert.adapters.calculator import ModelCalculator

        model = jaxcert.Model.from_nequix(checkpoint, dtype="float32")
        return ModelCalculator(model), model
    if engine == "jaxcert-sevennet":
        import jaxcert
        from jaxcert.adapters.calculator import ModelCalculator

        model = jaxcert.models.get("jax-sevennet", checkpoint="7net-0")
        return ModelCalculator(model), model
    if engine == "nequix-calculator":
        from nequix.calculator import NequixCalculator

        return NequixCalculator(model_path=checkpoint, use_kernel=False), None
    if engine == "sevenn-calculator":
        from sevenn.calculator import SevenNetCalculator

        return SevenNetCalculator("7net-0", device="cpu"), None
    raise SystemExit(f"unknown engine {engine!r}; known: {', '.join(ENGINES)}")


def _compute(calc, atoms, props) -> dict[str, Any]:
    """One calculation of ``props`` together, as ASE's ``get_properties`` does in newer versions."""
    calc.calculate(atoms, list(props), calc.check_state(atoms))
    return calc.results


def time_calls(calc, atoms, calls: int, props) -> dict[str, Any]:
    """First call and ``calls`` later ones, the atoms moved by 1e-3 Å (seeded) before each."""
    import numpy as np

    base = atoms.positions.copy()
    a = atoms.copy()
    a.calc = calc
    t, c = time.perf_counter(), time.process_time()
    r = _compute(calc, a, props)
    first, first_cpu = time.perf_counter() - t, time.process_time() - c
    out: dict[str, Any] = {"first_s": first, "first_cpu_s": first_cpu, "energies_eV": [float(r["energy"])],
                           "forces_first": np.asarray(r["forces"], float).tolist()}
    if "stress" in props:
        out["stress_first"] = np.asarray(r["stress"], float).tolist()
    later, later_cpu = [], []
    for k in range(calls):
        a.positions = base + 1e-3 * np.random.default_rng(1000 + k).standard_normal(base.shape)
        t, c = time.perf_counter(), time.process_time()
        r = _compute(calc, a, props)
        later.append(time.perf_counter() - t)
        later_cpu.append(time.process_time() - c)
        out["energies_eV"].append(float(r["energy"]))
    out.update(later_s=later, later_cpu_s=later_cpu, median_s=statistics.median(later) if later else None)
    return out


def neighbour_counts(model, atoms) -> dict[str, Any]:
    """Real edges within the model's cutoff (matscipy) and, where jaxcert has it, ``edge_slots``."""
    import numpy as np
    from matscipy.neighbours import neighbour_list

    import jaxcert

    out: dict[str, Any] = {"cutoff_A": float(model.cutoff),
                           "real_edges_matscipy": int(len(neighbour_list("i", atoms, float(model.cutoff))))}
    try:
        from jaxcert.core import neighbors

        fn = neighbors.edge_slots
    except AttributeError:
        out["edge_slots"] = None
        out["edge_slots_note"] = "jaxcert.core.neighbors.edge_slots does not exist in this version"
        return out
    try:
        s = jaxcert.Structure.from_ase(atoms, dtype=np.float32)
        real, slots = fn(model, s)
        out["edge_slots"] = {"real_edges": int(real), "slots": int(slots)}
        one_shot = getattr(neighbors, "ONE_SHOT_SKIN", None)  # the ASE calculator's list (one geometry per call)
        if one_shot is not None:
            out["edge_slots"]["calculator_slots"] = int(fn(model, s, skin=one_shot)[1])
    except Exception as err:  # a function under construction elsewhere: keep the run, say why
        out["edge_slots"] = None
        out["edge_slots_error"] = f"{type(err).__name__}: {err}"[:500]
    return out


def child(args: argparse.Namespace) -> None:
    """Inside one fresh process: one engine on one cell (``--case``) or on the Si substrates."""
    calc, model = make_calculator(args.child, args.checkpoint)
    t_ready_from_spawn = time.time() - args.spawned_at
    import jax

    res: dict[str, Any] = {"engine": args.child, "startup_s": t_ready_from_spawn, "jax": jax.__version__,
                           "x64": bool(jax.config.read("jax_enable_x64")), "backend": jax.default_backend()}
    if model is not None:
        res["model"] = {"name": model.name, "info": dict(model.info)}
    if args.case:
        atoms, desc = case_atoms(args.case)
        res.update(case=args.case, atoms=len(atoms), description=desc)
        res["timing"] = time_calls(calc, atoms, args.calls, EFS)
        if model is not None:
            res["neighbours"] = neighbour_counts(model, atoms)
    else:
        res["substrates"] = {}
        for kind, stress in sorted({(str(k), bool(st)) for k, st in json.loads(args.substrate_keys)}):
            atoms = substrate_atoms(kind)
            tm = time_calls(calc, atoms, args.calls, EFS if stress else EF)
            tm.pop("forces_first")
            res["substrates"][substrate_key(kind, stress)] = dict(tm, atoms=len(atoms),
                                                                  pbc=[bool(p) for p in atoms.pbc])
    import resource

    res["peak_rss_self_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    pathlib.Path(args.child_out).write_text(json.dumps(res))


def run_measured(cmd: list[str], env: dict[str, str], log: pathlib.Path) -> dict[str, Any]:
    """Run ``cmd`` to the end; its own wall time, CPU and peak RSS (``os.wait4`` on that one child)."""
    load0 = os.getloadavg()[0]
    with open(log, "wb") as fh:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, env=env, stdout=fh, stderr=subprocess.STDOUT, cwd=str(ROOT))
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    out = {"rc": p.returncode, "wall_s": wall, "user_cpu_s": ru.ru_utime, "sys_cpu_s": ru.ru_stime,
           "peak_rss_bytes": ru.ru_maxrss * 1024, "load_1min_before_after": [load0, os.getloadavg()[0]]}
    if p.returncode != 0:
        out["log_tail"] = log.read_text(errors="replace")[-3000:]
    return out


def use_this_checkout() -> None:
    """Import jaxcert from this checkout (the tree being benchmarked), whatever is installed."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))


def child_env(cache_dir: str = "off") -> dict[str, str]:
    """A child's environment: this checkout first on the path, the compile cache as given, JAX on the CPU
    unless ``JAX_PLATFORMS`` says otherwise."""
    path = os.environ.get("PYTHONPATH")
    env = dict(os.environ, JAXCERT_CACHE_DIR=cache_dir, PYTHONPATH=str(ROOT) + (os.pathsep + path if path else ""))
    env.setdefault("JAX_PLATFORMS", "cpu")
    return env


def run_child(engine: str, args: argparse.Namespace, tmp: pathlib.Path, *, case: str | None = None,
              calls: int, substrate_keys: list[tuple[str, bool]] | None = None) -> dict[str, Any]:
    """One engine in its own process; its JSON plus the process's measured resources."""
    tag = f"{engine}-{case or 'substrates'}"
    out = tmp / f"{tag}.json"
    cmd = [sys.executable, str(pathlib.Path(__file__).resolve()), "--child", engine, "--child-out", str(out),
           "--checkpoint", args.checkpoint, "--calls", str(calls), "--spawned-at", repr(time.time())]
    if case:
        cmd += ["--case", case]
    else:
        cmd += ["--substrate-keys", json.dumps(substrate_keys)]
    proc = run_measured(cmd, child_env("off"), tmp / f"{tag}.log")
    res = json.loads(out.read_text()) if proc["rc"] == 0 and out.exists() else {"failed": True}
    res["process"] = proc
    return res


# ------------------------------------------------------------------------------------------ part 1
def compare_pair(jx: dict[str, Any], ref: dict[str, Any]) -> dict[str, Any]:
    """Ratios and differences of a jaxcert row against its calculator row."""
    import numpy as np

    if jx.get("failed") or ref.get("failed"):
        return {"status": "failed"}
    n = jx["atoms"]
    tj, tr = jx["timing"], ref["timing"]
    ej, er = np.asarray(tj["energies_eV"]), np.asarray(tr["energies_eV"])
    k = min(len(ej), len(er))
    dE = float(np.max(np.abs(ej[:k] - er[:k])) / n)
    dF = float(np.max(np.abs(np.asarray(tj["forces_first"]) - np.asarray(tr["forces_first"]))))
    dS = (float(np.max(np.abs(np.asarray(tj["stress_first"]) - np.asarray(tr["stress_first"]))))
          if "stress_first" in tj and "stress_first" in tr else None)
    ratio = tj["median_s"] / tr["median_s"] if tj["median_s"] and tr["median_s"] else None
    return {"status": "ok", "max_abs_dE_per_atom_eV": dE, "max_abs_dF_eV_per_A": dF, "max_abs_dstress_eV_per_A3": dS,
            "energy_ok": dE <= MAX_DE_PER_ATOM, "median_ratio_jaxcert_over_calculator": ratio,
            "speed_ok": None if ratio is None else ratio <= MAX_SPEED_RATIO,
            "first_ratio_jaxcert_over_calculator": tj["first_s"] / tr["first_s"],
            "peak_ratio_jaxcert_over_calculator": jx["process"]["peak_rss_bytes"] / ref["process"]["peak_rss_bytes"]}


def _slim(res: dict[str, Any]) -> dict[str, Any]:
    """A child's row without the force arrays (kept only to compare)."""
    res = dict(res)
    if "timing" in res:
        res["timing"] = {k: v for k, v in res["timing"].items() if k not in ("forces_first", "stress_first")}
    return res


def _gb(b: float) -> float:
    return b / 1e9


def part_percall(args: argparse.Namespace, cases: tuple[str, ...], tmp: pathlib.Path, doc: dict, save) -> None:
    calls = args.calls
    doc["percall"] = {"calls": calls, "cases": {}, "what": (
        "one call = energy, forces and stress together (ASE calculate with all three), float32, x64 off; "
        "each engine in its own process (JAXCERT_CACHE_DIR=off); first call includes compilation; median of "
        "the later calls, atoms moved 1e-3 Å before each; peak RSS and CPU of that process from os.wait4")}
    print(f"\n== per call: energy+forces+stress, float32 ({calls} later calls, median)")
    print(f"{'case':<6} {'atoms':>5} {'model':<8} {'first s jx/calc':>16} {'median s jx/calc':>17} {'ratio':>6} "
          f"{'peak GB jx/calc':>16} {'|dE|/atom eV':>13} {'edges':>7} {'slots':>7}")
    for case in cases:
        row: dict[str, Any] = {}
        for mname, (jeng, reng) in PAIRS.items():
            jx = run_child(jeng, args, tmp, case=case, calls=calls)
            ref = run_child(reng, args, tmp, case=case, calls=calls)
            cmp_ = compare_pair(jx, ref)
            row[mname] = {"jaxcert": _slim(jx), "calculator": _slim(ref), **cmp_}
            row.setdefault("atoms", jx.get("atoms", ref.get("atoms")))
            row.setdefault("description", jx.get("description", ref.get("description")))
            doc["percall"]["cases"][case] = row
            save()
            if cmp_["status"] != "ok":
                why = "; ".join(f"{e}: {r['process'].get('log_tail', '')[-300:]!r}"
                                for e, r in ((jeng, jx), (reng, ref)) if r.get("failed"))
                print(f"{case:<6} {'':>5} {mname:<8} FAILED ({why})", flush=True)
                continue
            tj, tr = jx["timing"], ref["timing"]
            nb = jx.get("neighbours", {})
            slots = (nb.get("edge_slots") or {}).get("slots")
            ok = ("ok" if cmp_["energy_ok"] else "FAIL") + "/" + ("ok" if cmp_["speed_ok"] else "FAIL")
            print(f"{case:<6} {row['atoms']:>5} {mname:<8} {tj['first_s']:>7.2f}/{tr['first_s']:<8.2f} "
                  f"{tj['median_s']:>8.3f}/{tr['median_s']:<8.3f} {cmp_['median_ratio_jaxcert_over_calculator']:>6.2f} "
                  f"{_gb(jx['process']['peak_rss_bytes']):>7.2f}/{_gb(ref['process']['peak_rss_bytes']):<8.2f} "
                  f"{cmp_['max_abs_dE_per_atom_eV']:>13.1e} {nb.get('real_edges_matscipy', -1):>7} "
                  f"{slots if slots is not None else 'null':>7}  energy/speed {ok}", flush=True)
    rows = [r[m] for r in doc["percall"]["cases"].values() for m in PAIRS if r.get(m, {}).get("status") == "ok"]
    doc["percall"]["acceptance"] = {
        "max_abs_dE_per_atom_eV": MAX_DE_PER_ATOM, "max_median_ratio": MAX_SPEED_RATIO,
        "rows": len(rows), "energy_ok": sum(r["energy_ok"] for r in rows),
        "speed_ok": sum(bool(r["speed_ok"]) for r in rows)}
    a = doc["percall"]["acceptance"]
    print(f"acceptance: |dE| <= {MAX_DE_PER_ATOM:g} eV/atom in {a['energy_ok']}/{a['rows']} rows; "
          f"median jaxcert/calculator <= {MAX_SPEED_RATIO} in {a['speed_ok']}/{a['rows']} rows")


# ------------------------------------------------------------------------------------------ part 2
def certify_spec(model: str, checkpoint: str) -> str:
    return f"nequix:{checkpoint}@float32" if model == "nequix" else "jax-sevennet:7net-0@float32"


def certify_runs(spec: str, tmp: pathlib.Path, tag: str, probes: list[str] | None = None) -> dict[str, Any]:
    """Cold (fresh empty cache folder) then warm (the same folder) ``jaxcert certify`` processes (all
    probes, or ``probes``)."""
    cache = pathlib.Path(tempfile.mkdtemp(prefix=f"jaxcert-networks-{tag}-", dir=tmp))
    out: dict[str, Any] = {"cache_dir": "fresh temporary folder (JAXCERT_CACHE_DIR), removed afterwards"}
    for label in ("cold", "warm"):
        report = tmp / f"certify-{tag}-{label}.json"
        cmd = [sys.executable, "-m", "jaxcert.cli", "certify", "--model", spec, "--dtype", "float32",
               "--elements", "Si", "--seed", "0", "--quiet", "--no-fail-on-gate", "--json", str(report)]
        if probes:
            cmd[-2:-2] = ["--probes", ",".join(probes)]
        out["command"] = ["jaxcert", *cmd[3:-1], "R.json"]
        r = run_measured(cmd, child_env(str(cache)), tmp / f"certify-{tag}-{label}.log")
        if report.exists():
            try:
                rep = json.loads(report.read_text())
                agg = rep.get("aggregate") or {}
                r["report"] = {"wall_time_s": rep.get("wall_time_s"), "complete": rep.get("complete"),
                               **{k: agg.get(k) for k in ("overall", "gates_passed", "gates_total", "n_evals")}}
                r["probes"] = {o.get("name"): {k: o.get(k) for k in ("status", "score", "gate", "n_evals", "wall_s")}
                               for o in rep.get("probes", []) if isinstance(o, dict)}
            except (ValueError, AttributeError) as err:
                r["report_error"] = repr(err)
        if label == "cold":
            r["store_entries"] = len(list(cache.joinpath("exec").rglob("*.entry")))
        out[label] = r
    shutil.rmtree(cache, ignore_errors=True)
    return out


def part_certify(args: argparse.Namespace, tmp: pathlib.Path, doc: dict, save) -> None:
    recipes = probe_recipes()
    subset = args.probes.split(",") if args.probes else None
    calls = {p: n for p, n in REFERENCE_CALLS.items() if subset is None or p in subset}
    keys = sorted({recipes[p] for p, n in calls.items() if n})
    doc["certify"] = {"element": "Si", "seed": 0, "dtype": "float32", "models": {},
                      "reference_estimate_method": (
                          "estimate = startup + warm-up + sum over probes of calls(probe) x median per-call time of "
                          "the model's own ASE calculator on the probe's Si substrate (jaxcert.probes.substrates; "
                          "energy+forces, +stress where the probe needs a stress), measured in this run in one fresh "
                          "process; calls from docs/probes.md §4.15 (REFERENCE_CALLS); startup = spawn to a ready "
                          "calculator; warm-up = first minus median call per substrate used; relaxations, the "
                          "reference's own arithmetic and report are left out, so the estimate is a lower bound"),
                      "probes": subset or "all 14 default probes", "reference_calls": calls, "probe_recipes": recipes,
                      "targets": {"cold_over_estimate_max": MAX_COLD, "warm_over_estimate_max": MAX_WARM,
                                  "peak_GB_max": MAX_PEAK_GB},
                      "published_context": PUBLISHED}
    for mname in PAIRS:
        spec = certify_spec(mname, args.checkpoint)
        engine = REFERENCE_ENGINE[mname]
        print(f"\n== certify Si, {spec} (float32, seed 0)")
        sub = run_child(engine, args, tmp, calls=args.substrate_calls, substrate_keys=keys)
        m: dict[str, Any] = {"spec": spec, "reference_calculator": engine, "substrate_timing": sub}
        doc["certify"]["models"][mname] = m
        save()
        if sub.get("failed"):
            print(f"reference timing of {engine} failed: {sub['process'].get('log_tail', '')[-500:]}")
            est = None
        else:
            est = reference_cost(calls, {p: recipes[p] for p in calls}, sub["substrates"], sub["startup_s"])
            m["reference_estimate"] = est
            per = ", ".join(f"{k} {1e3 * v['median_s']:.1f} ms" for k, v in sub["substrates"].items())
            print(f"{engine} per call on Si substrates (median of {args.substrate_calls}): {per}")
            print(f"reference estimate: {est['estimate_s']:.1f} s = startup {est['startup_s']:.1f} s + warm-up "
                  f"{sum(est['warmup_s'].values()):.1f} s + {est['calls_total']} calls {est['steady_s']:.1f} s "
                  f"(lower bound: relaxations left out)")
            if mname == "nequix" and subset is None:
                published = PUBLISHED["finite_difference_reference"]["wall_s"]
                m["published_wall_over_estimate"] = published / est["estimate_s"]  # JSON only, for context
        runs = certify_runs(spec, tmp, mname, subset)
        m.update(runs)
        for label, target in (("cold", MAX_COLD), ("warm", MAX_WARM)):
            r = runs[label]
            peak = _gb(r["peak_rss_bytes"])
            r["peak_ok"] = peak <= MAX_PEAK_GB
            line = (f"{label}: rc {r['rc']}, wall {r['wall_s']:.1f} s, user CPU {r['user_cpu_s']:.1f} s, "
                    f"sys {r['sys_cpu_s']:.1f} s, peak {peak:.2f} GB "
                    f"({'ok' if r['peak_ok'] else 'FAIL'} <= {MAX_PEAK_GB} GB)")
            if est is not None:
                r["over_estimate"] = r["wall_s"] / est["estimate_s"]
                r["time_ok"] = r["over_estimate"] <= target
                line += (f"; {r['over_estimate']:.2f}x the reference estimate "
                         f"({'ok' if r['time_ok'] else 'FAIL'}, target <= {target}x)")
            if r["rc"] != 0:
                line += f"\n  failed: {r.get('log_tail', '')[-500:]}"
            print(line, flush=True)
        save()


# ------------------------------------------------------------------------------------------ main
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smoke test: Si8 and Si64, 2 later calls, no certify")
    ap.add_argument("--part", choices=("percall", "certify", "all"), default="all")
    ap.add_argument("--out", default=str(DEFAULT_OUT))
    ap.add_argument("--checkpoint", default=str(DEFAULT_CKPT), help="nequix-mp-1-pft .nqx (read in place)")
    ap.add_argument("--calls", type=int, default=None, help="later calls per cell (default 5; --quick 2)")
    ap.add_argument("--substrate-calls", type=int, default=20,
                    help="later calls per Si substrate for the reference estimate (default 20)")
    ap.add_argument("--cases", default=None, help=f"comma-separated subset of {','.join(CASES)}")
    ap.add_argument("--probes", default=None,
                    help="certify part on these probes only (comma-separated); the reference estimate then sums "
                         "the same probes (default: all 14)")
    # one engine in a child process (internal)
    ap.add_argument("--child", choices=ENGINES, help=argparse.SUPPRESS)
    ap.add_argument("--child-out", help=argparse.SUPPRESS)
    ap.add_argument("--case", help=argparse.SUPPRESS)
    ap.add_argument("--substrate-keys", help=argparse.SUPPRESS)
    ap.add_argument("--spawned-at", type=float, default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.calls is None:
        a.calls = 2 if a.quick else 5
    if a.spawned_at is None:
        a.spawned_at = time.time()
    if a.quick:
        a.part = "percall"
    if a.cases is None:
        a.cases = ",".join(QUICK_CASES if a.quick else CASES)
    for c in a.cases.split(","):
        if c not in CASES:
            ap.error(f"--cases: unknown case {c!r}; known: {', '.join(CASES)}")
    for p in (a.probes.split(",") if a.probes else []):
        if p not in REFERENCE_CALLS:
            ap.error(f"--probes: unknown probe {p!r}; known: {', '.join(REFERENCE_CALLS)}")
    if not a.child and a.calls < 1:
        ap.error("--calls must be at least 1")
    return a


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    use_this_checkout()
    if args.child:
        return child(args)
    if not pathlib.Path(args.checkpoint).is_file():
        raise SystemExit(f"--checkpoint: no file at {args.checkpoint}")
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
    import _record

    load0 = os.getloadavg()
    t0 = time.perf_counter()
    doc: dict[str, Any] = {"schema": "jaxcert-bench-networks/1", "quick": args.quick, "part": args.part,
                           "checkpoint": pathlib.Path(args.checkpoint).name, "dtype": "float32",
                           "python": sys.version.split()[0], "complete": False,
                           "options": {k: getattr(args, k) for k in ("calls", "substrate_calls", "cases", "probes")}}

    def save(final: bool = False) -> None:
        doc["wall_s"] = time.perf_counter() - t0
        with contextlib.redirect_stdout(sys.stdout if final else io.StringIO()):  # "wrote ..." once, at the end
            _record.finish(doc, load0, args.out, "every time is inflated and the ratios are noisy")

    with tempfile.TemporaryDirectory(prefix="jaxcert-networks-") as td:
        tmp = pathlib.Path(td)
        if args.part in ("percall", "all"):
            part_percall(args, tuple(args.cases.split(",")), tmp, doc, save)
        if args.part in ("certify", "all"):
            part_certify(args, tmp, doc, save)
    doc["complete"] = True
    save(final=True)
    print(f"total {doc['wall_s']:.0f} s; {doc['load_note']}")


if __name__ == "__main__":
    main()
