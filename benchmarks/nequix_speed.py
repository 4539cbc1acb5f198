"""Speed of ``Model.from_nequix`` (nequix-mp-1, float32) against nequix's own ASE calculator.

For a rattled 13-atom Cu icosahedron and a rattled 64-atom diamond Si cell (2×2×2 cubic): the time to load
the checkpoint, the first energy+forces call (trace + compile + run) and the median of later calls (same
shape, positions moved a little each time, so nothing is cached), for

* jaxcert, ``Model.energy_and_forces`` at the default neighbour capacity (256 slots per atom) and at 96;
* nequix's ``NequixCalculator`` (JAX backend, no kernels), ``get_potential_energy`` + ``get_forces``.

Float32 without x64, as ``--model nequix:PATH@float32 --dtype float32`` runs.  jaxcert's graph has a fixed
number of slots per atom (the capacity) where nequix's holds the edges within the cutoff (about 46 per atom
in diamond Si), so a periodic cell costs jaxcert more work per call (docs/adapters.md §4).

Writes ``benchmarks/results/nequix_speed.json`` (``--out``) with the machine and the load average.
Usage: ``python benchmarks/nequix_speed.py [--checkpoint PATH] [--calls 5] [--out PATH]``.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402
import numpy as np  # noqa: E402
from ase.build import bulk  # noqa: E402
from ase.cluster import Icosahedron  # noqa: E402

import jaxcert  # noqa: E402

try:
    from _record import finish
except ImportError:  # run as a module
    from benchmarks._record import finish

ROOT = pathlib.Path(__file__).resolve().parents[1]
DEFAULT_CKPT = ROOT.parent / "shared/weights/nequix/nequix-mp-1.nqx"


def structures() -> dict[str, object]:
    cu = Icosahedron("Cu", 2)
    cu.rattle(0.05, seed=1)
    si = bulk("Si", "diamond", a=5.43, cubic=True).repeat((2, 2, 2))
    si.rattle(0.05, seed=2)
    return {"Cu13 cluster": cu, "Si64 cell": si}


def _moved(atoms, k: int):
    a = atoms.copy()
    a.positions += 1e-3 * np.random.default_rng(k).standard_normal(a.positions.shape)
    return a


def time_jaxcert(model: jaxcert.Model, atoms, calls: int) -> dict[str, float]:
    s = jaxcert.Structure.from_ase(atoms, dtype=np.float32)
    t = time.perf_counter()
    E, F = model.energy_and_forces(s)
    jax.block_until_ready(F)
    first = time.perf_counter() - t
    later = []
    for k in range(calls):
        s = jaxcert.Structure.from_ase(_moved(atoms, k), dtype=np.float32)
        t = time.perf_counter()
        jax.block_until_ready(model.energy_and_forces(s))
        later.append(time.perf_counter() - t)
    return {"first_call_s": first, "later_call_median_s": statistics.median(later), "later_calls_s": later,
            "energy_eV": float(E)}


def time_calculator(calc, atoms, calls: int) -> dict[str, float]:
    a = atoms.copy()
    a.calc = calc
    t = time.perf_counter()
    E = a.get_potential_energy()
    a.get_forces()
    first = time.perf_counter() - t
    later = []
    for k in range(calls):
        a.positions = _moved(atoms, k).positions
        t = time.perf_counter()
        a.get_potential_energy()
        a.get_forces()
        later.append(time.perf_counter() - t)
    return {"first_call_s": first, "later_call_median_s": statistics.median(later), "later_calls_s": later,
            "energy_eV": float(E)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", default=str(DEFAULT_CKPT))
    ap.add_argument("--calls", type=int, default=5)
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/nequix_speed.json"))
    args = ap.parse_args()
    load_start = os.getloadavg()
    result: dict[str, object] = {"checkpoint": pathlib.Path(args.checkpoint).name, "dtype": "float32",
                                 "x64": bool(jax.config.read("jax_enable_x64")), "calls": args.calls,
                                 "jax": jax.__version__}
    t = time.perf_counter()
    models = {"jaxcert capacity 256 (default)": jaxcert.Model.from_nequix(args.checkpoint, dtype="float32")}
    result["jaxcert_load_s"] = time.perf_counter() - t
    models["jaxcert capacity 96"] = jaxcert.Model.from_nequix(args.checkpoint, dtype="float32", capacity=96)
    from nequix.calculator import NequixCalculator

    t = time.perf_counter()
    calc = NequixCalculator(model_path=args.checkpoint, use_kernel=False)
    result["nequix_calculator_load_s"] = time.perf_counter() - t
    rows: dict[str, dict[str, object]] = {}
    for name, atoms in structures().items():
        row: dict[str, object] = {"atoms": len(atoms)}
        for label, model in models.items():
            if label != "jaxcert capacity 256 (default)" and not all(atoms.pbc):
                continue  # a 13-atom cluster has 12 neighbour slots per atom whatever the capacity
            row[label] = time_jaxcert(model, atoms, args.calls)
            print(name, label, row[label]["first_call_s"], row[label]["later_call_median_s"], flush=True)
        row["nequix calculator"] = time_calculator(calc, atoms, args.calls)
        print(name, "calculator", row["nequix calculator"]["first_call_s"],
              row["nequix calculator"]["later_call_median_s"], flush=True)
        rows[name] = row
    result["structures"] = rows
    finish(result, load_start, args.out, "every time is inflated and the ratios are noisy")


if __name__ == "__main__":
    main()
