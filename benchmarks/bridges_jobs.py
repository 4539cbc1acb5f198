"""Three bridged-CHGNet jobs side by side, each against a baseline measured in the same process (issue 12, item 6).

1. **config_temperature on Si** (float32): the probe (its 1,100-step Langevin trajectory of a
   13-atom cluster, one torch call per step) with a fresh CHGNet graph per step (``skin=0``, the
   previous behaviour) and with graph reuse (``skin=0.5`` Å, the default); graph builds/reuses and
   the defects of both runs are recorded (float32 round-off makes the two trajectories drift apart,
   so the defects agree statistically, not bitwise).
2. **relax → attack → relax** with CHGNet (float32) on Si (conventional cell, rattled 0.02 Å),
   NaCl (rocksalt, conventional) and MoS₂ (2H, 10 Å vacuum) × FGSM, I-FGSM (10 steps), PGD
   (10 steps, α = 0.1 ε) at ε = 0.05 Å: jaxcert's ``run_grid`` (all 9 runs in one vmapped
   program: every geometry of a step in one torch call; FIRE, then L-BFGS, the peer's relaxer) against
   the seed-004 peer recipe
   re-implemented here (ASE LBFGS with CHGNet's own ``CHGNetCalculator``, the 9 runs one after
   another, first relaxation repeated per run as the peer does).
3. **λ on the ten seed-002 structures** (float64): ``jaxcert.lam`` exact (jacfwd: H·v by torch
   double backward) against ``fd=True`` (central differences of forces, 2·3N force calls).

Every timing includes JAX compilation (the first call of each program) unless stated; the
peer has none.  Usage: ``python benchmarks/bridges_jobs.py [--jobs md,attack,lambda]``; writes
``benchmarks/results/bridges_jobs.json`` (machine, load) via ``benchmarks/_record.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import jaxcert_bridges as jb  # noqa: E402
import numpy as np  # noqa: E402
from _record import finish  # noqa: E402

import jaxcert  # noqa: E402

EPS = 0.05


def structures():
    """Si (conventional, rattled 0.02 Å), NaCl (rocksalt, conventional), 2H-MoS₂ monolayer with 10 Å vacuum."""
    from ase.build import bulk, mx2

    si = bulk("Si", "diamond", a=5.43, cubic=True)
    si.rattle(0.02, seed=0)
    nacl = bulk("NaCl", "rocksalt", a=5.64, cubic=True)
    mos2 = mx2("MoS2", kind="2H", a=3.18, thickness=3.19, vacuum=10.0)
    mos2.pbc = True
    return {"Si": si, "NaCl": nacl, "MoS2": mos2}


def job_md(n_steps: int = 1100) -> dict:
    from jaxcert.probes import ConfigTemperatureConfig

    out: dict = {"n_steps": n_steps}
    cfg = {"config_temperature": ConfigTemperatureConfig(n_steps=n_steps)}
    for skin in (0.0, 0.5):
        model = jb.chgnet("0.3.0", skin=skin)
        pot = jb.backend_of(model).potential
        la = os.getloadavg()
        t0 = time.perf_counter()
        rep = jaxcert.certify(model, "Si", probes="config_temperature", dtype=jnp.float32, configs=cfg)
        wall = time.perf_counter() - t0
        p = rep.probe("config_temperature")
        out[f"skin_{skin}"] = {"wall_s": wall, "loadavg_before": la, "graph": dict(pot.graph_stats),
                               "host_counts": dict(jb.backend_of(model).counts), "defect": p["defect"],
                               "status": p["status"]}
        print(f"config_temperature skin={skin}: {wall:.1f} s, graphs {dict(pot.graph_stats)}, defect {p['defect']}",
              flush=True)
    out["speedup"] = out["skin_0.0"]["wall_s"] / out["skin_0.5"]["wall_s"]
    return out


def _peer(atoms_by_name: dict) -> dict:
    """The seed-004 recipe with CHGNet's ASE calculator: LBFGS relax, attack, LBFGS relax, 9 runs in sequence."""
    from ase.optimize import LBFGS
    from chgnet.model import CHGNetCalculator

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        calc = CHGNetCalculator(use_device="cpu")
    calc.model.graph_converter.set_isolated_atom_response("ignore")
    calls = {"n": 0}
    calculate = calc.calculate

    def counted(*args, **kw):  # one CHGNet evaluation (energy, forces, stress) per call
        calls["n"] += 1
        return calculate(*args, **kw)

    calc.calculate = counted
    import torch

    old_threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the same torch threading as the bridge's default (torch_threads=1): a fair peer
    runs = {}
    t0 = time.perf_counter()
    for name, a0 in atoms_by_name.items():
        for attack, n, ratio in (("fgsm", 1, 1.0), ("ifgsm", 10, 0.1), ("pgd", 10, 0.1)):
            a = a0.copy()
            a.calc = calc
            opt = LBFGS(a, logfile=None)
            opt.run(fmax=0.01, steps=300)
            ref = a.positions.copy()
            x = ref.copy()
            if attack == "pgd":
                x = ref + np.random.default_rng(42).uniform(-EPS, EPS, ref.shape)
            for _ in range(n):
                a.positions = x
                x = x + ratio * EPS * np.sign(-a.get_forces())  # ascend the energy: ∂E/∂R = −F
                x = ref + np.clip(x - ref, -EPS, EPS)
            a.positions = x
            e_adv = a.get_potential_energy()
            opt2 = LBFGS(a, logfile=None)
            opt2.run(fmax=0.01, steps=300)
            runs[f"{name}/{attack}"] = {"ref_steps": opt.nsteps, "steps": opt2.nsteps,
                                        "dE_adv_per_atom": (e_adv - a.get_potential_energy()) / len(a)}
    torch.set_num_threads(old_threads)
    return {"wall_s": time.perf_counter() - t0, "runs": runs, "torch_threads": 1, "evaluations": calls["n"]}


def job_attack(optimizers: tuple[str, ...] = ("fire", "lbfgs")) -> dict:
    """The peer recipe, then jaxcert's grid with each relaxer in ``optimizers`` (first call compiles)."""
    from jaxcert.attacks.pipeline import ATTACKS, PipelineConfig, run_grid

    atoms = structures()
    la = os.getloadavg()
    peer = _peer(atoms)
    peer["loadavg_before"] = la
    print(f"peer recipe (ASE LBFGS + CHGNetCalculator, 9 runs): {peer['wall_s']:.1f} s, "
          f"{peer['evaluations']} evaluations", flush=True)
    structs = [jaxcert.Structure.from_ase(a, dtype=jnp.float32) for a in atoms.values()]
    out = {"peer": peer}
    for optimizer in optimizers:
        model = jb.chgnet("0.3.0", precision="float32")
        cfg = PipelineConfig(optimizer=optimizer)
        suffix = "" if optimizer == "fire" else f"_{optimizer}"
        for label in ("first (with compilation)", "second (compiled)"):
            b = jb.backend_of(model)
            before = dict(b.counts)
            la = os.getloadavg()
            t0 = time.perf_counter()
            g = run_grid(model, structs, [EPS], seeds=(42,), attacks=ATTACKS, config=cfg)
            jax.block_until_ready(g.runs)
            wall = time.perf_counter() - t0
            key = f"jaxcert_{label.split()[0]}{suffix}"
            out[key] = {
                "optimizer": optimizer, "wall_s": wall, "loadavg_before": la,
                "host_counts": {k: v - before.get(k, 0) for k, v in b.counts.items()},
                "graph": dict(b.potential.graph_stats), "ref_steps": np.asarray(g.ref_steps).tolist(),
                "steps": np.asarray(g.runs.steps).reshape(-1).tolist(),
                "converged": np.asarray(g.runs.converged).reshape(-1).tolist(),
                "dE_adv_per_atom": np.asarray(g.runs.adversarial.energy - g.runs.final.energy).reshape(-1).tolist(),
            }
            print(f"jaxcert run_grid ({optimizer}), 9 runs in one process, {label}: {wall:.1f} s, "
                  f"host {out[key]['host_counts']}", flush=True)
        out[f"speedup_first{suffix}"] = peer["wall_s"] / out[f"jaxcert_first{suffix}"]["wall_s"]
        out[f"speedup_compiled{suffix}"] = peer["wall_s"] / out[f"jaxcert_second{suffix}"]["wall_s"]
    return out


def job_lambda() -> dict:
    out = {}
    for fd in (True, False):
        model = jb.chgnet("0.3.0")
        la = os.getloadavg()
        t0 = time.perf_counter()
        res = jaxcert.lam(model, fd=fd, dtype=jnp.float64)
        wall = time.perf_counter() - t0
        key = "fd" if fd else "exact"
        out[key] = {"wall_s": wall, "loadavg_before": la, "max_lambda": res.max,
                    "host_counts": dict(jb.backend_of(model).counts)}
        print(f"lambda {key}: {wall:.1f} s, max λ {res.max:.3g}, host {out[key]['host_counts']}", flush=True)
    out["speedup"] = out["fd"]["wall_s"] / out["exact"]["wall_s"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", default="md,attack,lambda")
    ap.add_argument("--out", default="benchmarks/results/bridges_jobs.json")
    ap.add_argument("--md-steps", type=int, default=1100, help="trajectory steps of config_temperature (1100)")
    ap.add_argument("--merge", action="store_true", help="keep the other jobs already in --out (each job "
                    "records its own load average)")
    args = ap.parse_args()
    load0 = os.getloadavg()
    result: dict = {"schema": "jaxcert-bench-bridges-jobs/1", "model": "chgnet 0.3.0"}
    if args.merge and os.path.exists(args.out):
        with open(args.out) as fh:
            old = json.load(fh)
        result.update({k: v for k, v in old.items() if k in ("md", "attack", "lambda")})
    jobs = {"md": lambda: job_md(args.md_steps), "attack": job_attack, "lambda": job_lambda}
    for name in args.jobs.split(","):  # written after every job: a cut run keeps what finished
        result[name] = jobs[name]()
        finish(result, load0, args.out, "every wall time is inflated and the ratios are noisy")


if __name__ == "__main__":
    main()
