"""Relax → attack → relax throughput: the vmapped JAX pipeline vs a sequential ASE-driven loop.

Both sides run the same runs on the same structures with the same JAX model
(Stillinger-Weber Si by default):

* **jaxcert**: :func:`jaxcert.attacks.run_grid`: one vmapped FIRE relaxation of
  the structures, then one vmapped program over (structure × attack × ε × seed)
  for attack + FIRE relaxation.  Timed cold (compilation included) and warm
  (the same call again).
* **ASE loop** (the reference's architecture, docs/attacks.md §2): for each structure
  ``ase.optimize.FIRE`` (ASE defaults, the same as :func:`jaxcert.optim.relax.fire`) to
  R_ref, then for each run a numpy sign-gradient attack with g = −F from the
  calculator (the reference's non-MACE path) and a second ``ase.optimize.FIRE``.
  The model enters through the small :class:`JaxCalculator` adapter below, which
  calls the model's jitted ``energy_and_forces`` (one compiled program, reused).
  The first relaxation is done once per structure on both sides (the reference
  repeats it per row).

Reported: runs per second for each side, the ratio, and agreement checks
(converged counts, median |E_fin(jax) − E_fin(ASE)|).  The 1-minute load
average at the start and end is recorded with the result, and ``machine_loaded``
says whether it exceeded 0.75 × the core count (other jobs sharing the machine).

Usage: ``python benchmarks/attacks.py [--structures 4] [--atoms 8] [--out benchmarks/results/attacks.json]``.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import time

import jax

jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402
from _record import finish  # noqa: E402  (benchmarks/_record.py: run as a script from benchmarks/)
from ase.build import bulk  # noqa: E402
from ase.calculators.calculator import Calculator, all_changes  # noqa: E402
from ase.optimize import FIRE  # noqa: E402

import jaxcert  # noqa: E402
from jaxcert.attacks import AttackSpec, PipelineConfig, run_grid  # noqa: E402

EPS = (0.01, 0.05, 0.1)
SEEDS = (42, 43)
SPECS = (AttackSpec("fgsm", 1), AttackSpec("ifgsm", 10), AttackSpec("pgd", 10, 0.1))


class JaxCalculator(Calculator):
    """ASE calculator around a jaxcert Model (energy eV, forces eV/Å), one jitted call per evaluation."""

    implemented_properties = ["energy", "forces"]

    def __init__(self, model, dtype=np.float64, **kw):
        super().__init__(**kw)
        self.model = model
        self.dtype = dtype
        self.n_calls = 0

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
        super().calculate(atoms, properties, system_changes)
        s = jaxcert.Structure.from_ase(self.atoms, dtype=self.dtype, min_distance=None)
        E, F = self.model.energy_and_forces(s)
        self.results = {"energy": float(E), "forces": np.asarray(F, np.float64)}
        self.n_calls += 1


def ase_attack(atoms, calc, spec: AttackSpec, eps: float, seed: int) -> np.ndarray:
    """Numpy sign-gradient attack of docs/attacks.md §1 with g = −F (energy ascent)."""
    R0 = atoms.get_positions()
    work = atoms.copy()
    work.calc = calc
    R = R0.copy()
    if spec.name == "pgd":
        R = R0 + np.random.default_rng(seed).uniform(-eps, eps, R0.shape)
    alpha = spec.alpha * eps
    for _ in range(spec.n_steps):
        work.set_positions(R)
        g = -work.get_forces()
        R = R + alpha * np.sign(g)
        if spec.name != "fgsm":
            R = R0 + np.clip(R - R0, -eps, eps)
    return R


def ase_loop(model, structures, cfg: PipelineConfig):
    calc = JaxCalculator(model)
    rows = []
    for a in structures:
        ref = a.copy()
        ref.calc = calc
        FIRE(ref, logfile=None).run(fmax=cfg.fmax, steps=cfg.max_steps)
        for spec in SPECS:
            for eps in EPS:
                for seed in SEEDS:
                    adv = ref.copy()
                    adv.set_positions(ase_attack(ref, calc, spec, eps, seed))
                    adv.calc = calc
                    opt = FIRE(adv, logfile=None)
                    conv = opt.run(fmax=cfg.fmax, steps=cfg.max_steps)
                    rows.append((bool(conv), int(opt.nsteps), float(adv.get_potential_energy())))
    return rows, calc.n_calls


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--structures", type=int, default=4)
    p.add_argument("--repeat", type=int, default=1, help="repeat the 8-atom cubic Si cell n x n x n")
    p.add_argument("--out", default=str(pathlib.Path(__file__).parent / "results" / "attacks.json"))
    args = p.parse_args(argv)

    load_start = os.getloadavg()
    model = jaxcert.models.get("sw")
    cfg = PipelineConfig()
    structures = []
    for k in range(args.structures):
        a = bulk("Si", cubic=True).repeat(args.repeat)
        a.rattle(0.05, seed=k)
        structures.append(a)
    n_runs = len(structures) * len(SPECS) * len(EPS) * len(SEEDS)
    js = [jaxcert.Structure.from_ase(a) for a in structures]

    t0 = time.perf_counter()
    g = run_grid(model, js, EPS, SEEDS, attacks=SPECS, config=cfg)
    jax.block_until_ready(g.runs.final.energy)
    cold = time.perf_counter() - t0
    t0 = time.perf_counter()
    g = run_grid(model, js, EPS, SEEDS, attacks=SPECS, config=cfg)
    jax.block_until_ready(g.runs.final.energy)
    warm = time.perf_counter() - t0

    model.energy_and_forces(js[0])  # compile the calculator's program outside the timing
    t0 = time.perf_counter()
    rows, n_calls = ase_loop(model, structures, cfg)
    t_ase = time.perf_counter() - t0

    E_jax = np.asarray(g.runs.final.energy).reshape(-1)
    E_ase = np.array([r[2] for r in rows])
    result = {
        "benchmark": "relax-attack-relax runs per second, vmapped jaxcert pipeline vs sequential ASE FIRE loop",
        "model": "sw (Stillinger-Weber Si)",
        "structures": f"{len(structures)} x rattled (0.05 A) cubic diamond Si, {len(structures[0])} atoms",
        "grid": {"attacks": [s.label for s in SPECS], "epsilon_A": EPS, "seeds": SEEDS, "runs": n_runs},
        "relaxation": {"optimizer": "FIRE (ASE defaults)", "fmax_eV_per_A": cfg.fmax, "max_steps": cfg.max_steps},
        "jax_cold_s": cold, "jax_warm_s": warm, "ase_loop_s": t_ase, "ase_model_calls": n_calls,
        "jax_runs_per_s_cold": n_runs / cold, "jax_runs_per_s_warm": n_runs / warm,
        "ase_runs_per_s": n_runs / t_ase,
        "ratio_warm": t_ase / warm, "ratio_cold": t_ase / cold,
        "agreement": {
            "converged_jax": int(np.asarray(g.runs.converged).sum()),
            "converged_ase": int(sum(r[0] for r in rows)),
            "median_abs_final_energy_diff_eV": float(np.median(np.abs(E_jax - E_ase))),
            "max_abs_final_energy_diff_eV": float(np.max(np.abs(E_jax - E_ase))),
            "median_steps_jax": float(np.median(np.asarray(g.runs.steps))),
            "median_steps_ase": float(np.median([r[1] for r in rows])),
        },
        "note": "PGD random starts differ (numpy PCG64 vs jax PRNG), so PGD endpoints agree only statistically.",
    }
    print(f"{n_runs} runs: jaxcert cold {cold:.2f} s ({n_runs / cold:.2f} runs/s), warm {warm:.2f} s "
          f"({n_runs / warm:.2f} runs/s); ASE loop {t_ase:.2f} s ({n_runs / t_ase:.2f} runs/s); "
          f"ratio warm {t_ase / warm:.1f}x, cold {t_ase / cold:.1f}x")
    print("agreement:", result["agreement"])
    finish(result, load_start, args.out, "both timings are inflated and the ratio is noisy")


if __name__ == "__main__":
    main()
