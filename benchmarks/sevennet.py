"""SevenNet-0 natively in JAX vs the torch bridge: energy+forces per structure, same structures and precision.

Cases (issue 12 item 7):

* batches of 1, 10 and 100 13-atom clusters (the probe substrate of ``jaxcert.probes.substrates.cluster``
  for Li, Be, B, C, Na, Mg, Al, Si, P, S, rattled by 0.05 Å, seeded), one vmapped call per batch;
* a 64-atom Si cell (diamond, 2x2x2 conventional, rattled 0.05 Å; dense neighbour path) and a 512-atom one
  (4x4x4; the cell list, ``docs/architecture.md`` "Neighbour lists").

Both models are the same :class:`jaxcert.Model` interface: ``jax.jit(vmap(energy_and_forces_of))`` over a
padded batch.  The native model (``jaxcert.models.get("jax-sevennet")``) is compiled once per shape, and the
compile time (``lower().compile()``) is recorded apart from the calls; the bridge
(``jaxcert_bridges.sevennet``, the torch model behind a host callback, ``max_batch`` 64 geometries per torch
call) is timed the same way.  Each call is timed ``--repeat`` times (best and median kept); the ratio is
bridge / native per call.  Energies and forces of the two are compared (max |ΔE|/atom, max |ΔF|) so a fast
wrong answer cannot pass unnoticed.

Usage: ``python benchmarks/sevennet.py [--dtype float32] [--repeat 3] [--cases c1,c10,c100,cell64,cell512]``.
Writes ``benchmarks/results/sevennet.json`` (machine description and load via ``benchmarks/_record.py``).
Results and their reading: docs/sevennet.md "Cost".
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import time

import jax
import numpy as np

ELEMENTS = ("Li", "Be", "B", "C", "Na", "Mg", "Al", "Si", "P", "S")
CASES = ("c1", "c10", "cell64", "c100", "cell512")


def structures(case: str, dtype) -> tuple[list, str]:
    """ASE structures of a case and a one-line description."""
    from ase.build import bulk

    from jaxcert.probes import substrates

    if case.startswith("c") and case[1:].isdigit():
        count = int(case[1:])
        out = []
        for k in range(count):
            a = substrates.cluster_atoms(ELEMENTS[k % len(ELEMENTS)])
            a.rattle(0.05, seed=k)
            out.append(a)
        return out, f"{count} x 13-atom clusters ({', '.join(ELEMENTS[:min(count, 10)])}), one vmapped call"
    if case not in ("cell64", "cell512"):
        raise SystemExit(f"--cases: unknown case {case!r}; known: {', '.join(CASES)} (cN: N clusters)")
    rep = {"cell64": 2, "cell512": 4}[case]
    a = bulk("Si", "diamond", a=5.43, cubic=True).repeat(rep)
    a.rattle(0.05, seed=1)
    return [a], f"Si diamond {rep}x{rep}x{rep} conventional, {len(a)} atoms, rattled 0.05 A"


def batch(model, atoms: list, dtype):
    import jaxcert

    ss = [jaxcert.Structure.from_ase(a, dtype=dtype) for a in atoms]
    s = ss[0] if len(ss) == 1 else jaxcert.stack(ss)
    return model.prepare(s)


def time_model(model, s, repeat: int) -> dict:
    """Compile (lower + compile) apart from the calls; best and median of ``repeat`` calls."""
    f = (lambda m, x: m.energy_and_forces_of(m.params, x))
    if s.positions.ndim == 3:
        g = jax.jit(lambda m, x: jax.vmap(lambda y: f(m, y))(x))
    else:
        g = jax.jit(f)
    t0, p0 = time.perf_counter(), time.process_time()
    c = g.lower(model, s).compile()
    compile_s, compile_cpu = time.perf_counter() - t0, time.process_time() - p0
    t0 = time.perf_counter()
    E, F = jax.block_until_ready(c(model, s))
    first = time.perf_counter() - t0
    ts, cpu = [], []
    for _ in range(repeat):
        t0, p0 = time.perf_counter(), time.process_time()
        jax.block_until_ready(c(model, s))
        ts.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - p0)
    return {"compile_s": compile_s, "compile_cpu_s": compile_cpu, "first_call_s": first, "calls_s": ts,
            "calls_cpu_s": cpu, "best_s": min(ts),
            "median_s": statistics.median(ts), "E": np.asarray(E), "F": np.asarray(F)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--skip-bridge", action="store_true", help="native only (no torch)")
    ap.add_argument("--keep", action="store_true",
                    help="keep the cases already in --out that this run does not redo (each row has its own loads)")
    ap.add_argument("--out", default=str(pathlib.Path(__file__).parent / "results" / "sevennet.json"))
    a = ap.parse_args()
    if a.dtype == "float64":
        jax.config.update("jax_enable_x64", True)
    import _record

    import jaxcert

    load0 = os.getloadavg()
    dtype = np.float32 if a.dtype == "float32" else np.float64
    native = jaxcert.models.get("jax-sevennet", checkpoint="7net-0")
    bridge = None
    if not a.skip_bridge:
        import jaxcert_bridges as jb

        bridge = jb.sevennet("7net-0", precision=a.dtype)
    rows: dict = {}
    if a.keep and pathlib.Path(a.out).exists():
        rows = {k: v for k, v in json.loads(pathlib.Path(a.out).read_text())["cases"].items()
                if k not in a.cases.split(",")}

    def write(rows: dict, partial: bool) -> None:
        doc = {"schema": "jaxcert-bench-sevennet/1", "model": "SevenNet-0 (7net-0)", "dtype": a.dtype,
               "repeat": a.repeat, "native": dict(native.info), "bridge": dict(bridge.info) if bridge else None,
               "timing": "wall time of jitted energy+forces calls (jax.block_until_ready); compile timed apart; "
                         "per_structure_ms = best call / structures in the call; cpu_s: process CPU time "
                         "(user+system, all threads) over the case", "complete": not partial,
               "cases_requested": a.cases.split(","), "cases": rows}
        _record.finish(doc, load0, a.out, "every time is inflated and the ratios are noisy")

    print(f"{'case':<8} {'atoms':>6} {'native ms/struct':>17} {'compile s':>10} {'bridge ms/struct':>17} "
          f"{'bridge/native':>14} {'max dE/atom':>12} {'max dF':>9}")
    for case in a.cases.split(","):
        atoms, desc = structures(case, dtype)
        s_nat = batch(native, atoms, dtype)
        n_struct, n_atoms = len(atoms), sum(len(x) for x in atoms)
        row = {"description": desc, "structures": n_struct, "atoms": n_atoms, "load_before": os.getloadavg()}
        nat = time_model(native, s_nat, a.repeat)
        row["native"] = {k: v for k, v in nat.items() if k not in ("E", "F")}
        row["native"]["per_structure_ms"] = 1e3 * nat["best_s"] / n_struct
        if bridge is not None:
            br = time_model(bridge, batch(bridge, atoms, dtype), a.repeat)
            row["bridge"] = {k: v for k, v in br.items() if k not in ("E", "F")}
            row["bridge"]["per_structure_ms"] = 1e3 * br["best_s"] / n_struct
            row["bridge_over_native_best"] = br["best_s"] / nat["best_s"]
            per_atom = n_atoms / n_struct
            row["max_abs_dE_per_atom_eV"] = float(np.max(np.abs(nat["E"] - br["E"])) / per_atom)
            row["max_abs_dF_eV_per_A"] = float(np.max(np.abs(nat["F"] - br["F"])))
        row["load_after"] = os.getloadavg()
        rows[case] = row
        write(rows, partial=True)  # each finished case is kept if the run is cut short
        nan = float("nan")
        print(f"{case:<8} {n_atoms:>6} {row['native']['per_structure_ms']:>17.2f} {nat['compile_s']:>10.1f} "
              f"{row.get('bridge', {}).get('per_structure_ms', nan):>17.2f} "
              f"{row.get('bridge_over_native_best', nan):>14.1f} {row.get('max_abs_dE_per_atom_eV', nan):>12.2e} "
              f"{row.get('max_abs_dF_eV_per_A', nan):>9.2e}", flush=True)
    write(rows, partial=False)


if __name__ == "__main__":
    main()
