"""The statistical probes run to a precision: standard error against trajectory length, and the suite's cost.

Part 1 (``errors``): the shared trajectory of config_temperature, virial and equipartition on the reference
Lennard-Jones clusters (13 atoms, ``--elements``, ``--seeds`` keys), run with BAOAB at 2 fs to the cap with an
unreachable target, so every prefix can be judged: after every 100 steps, each probe's block-jackknife
standard error (10 blocks, the probes' own estimator, :func:`jaxcert.probes._statmech.prefix_jackknife`) as the
rms over elements and seeds.  It says how long a run must be for a target error.

Part 2 (``suite``): ``jaxcert.certify`` of the three probes on the same elements, per seed, with the
reference's fixed-length trajectory (ASE Langevin, 1 fs, 400 warm-up + 1100 stored steps) and with the
default run to a precision; per probe the element-mean defect, its noise floor √(2/π)·SE, the mean SE, the
stored steps run per element, the model evaluations and the warm wall time (the second of two identical runs).

Usage::

    python benchmarks/adaptive_sampling.py          # writes benchmarks/results/adaptive_sampling.json
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from _record import finish  # noqa: E402

OUT = pathlib.Path(__file__).parent / "results" / "adaptive_sampling.json"
ELEMENTS = "Li,Be,B,C,Na,Mg,Al,Si,P,S"
PROBES = ("config_temperature", "virial", "equipartition")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--elements", default=ELEMENTS)
    ap.add_argument("--suite-seeds", type=int, default=3)
    ap.add_argument("--out", default=str(OUT))
    a = ap.parse_args()
    load0 = os.getloadavg()
    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import numpy as np

    import jaxcert
    from jaxcert.core.units import KB_EV_PER_K
    from jaxcert.models.lj import lennard_jones
    from jaxcert.optim.dynamics import LangevinConfig
    from jaxcert.probes import ConfigTemperatureConfig, EquipartitionConfig, VirialConfig, substrates
    from jaxcert.probes import _statmech as sm

    els = a.elements.split(",")
    lj = lennard_jones()
    batch, _ = substrates.stacked("cluster", els, dtype=jnp.float64)
    batch = lj.prepare(batch)
    base = ConfigTemperatureConfig()
    th, sp0 = base.thermostat, base.sampling
    sp = dataclasses.replace(sp0, se_target=0.0)
    kT = KB_EV_PER_K * th.temperature_k

    # ---------------------------------------------------------------- part 1: SE against length
    run = jax.jit(jax.vmap(lambda s, k: sm.sampled_trajectory(lj, s, k, th, sp, base.n_steps)))
    lengths = list(range(sp.chunk_steps, base.n_steps + 1, sp.chunk_steps))
    se = {p: [] for p in PROBES}  # per (seed, element): SE at each length
    relaxed = []
    for seed in range(a.seeds):
        keys = jax.random.split(jax.random.key(1000 + seed), len(els))
        tr = run(batch, keys)
        relaxed.append(np.asarray(tr.relax_fmax) < th.relax_fmax)

        def one(tr1):
            sd = tr1.sampled
            out = []
            for n in lengths:
                ct = sd["config_temperature"]
                vr = sd["virial"]
                stat = sm.equipartition_statistic(sd["omega2"], sd["keep"], kT)
                out.append(jnp.stack([
                    sm.prefix_jackknife(sm.ct_statistic, (ct["F2"], ct["t"], ct["T_kin"]), 0, n // sp.ct_every,
                                        sp.n_blocks).stderr,
                    sm.prefix_jackknife(sm.virial_statistic, (vr["W"], vr["K"]), 0, n // sp.virial_every,
                                        sp.n_blocks).stderr,
                    sm.prefix_jackknife(stat, sd["equipartition"]["Q2"], 0, n // sp.equipartition_every,
                                        sp.n_blocks).stderr]))
            return jnp.stack(out)

        errs = np.asarray(jax.jit(jax.vmap(one))(tr))  # (el, lengths, 3)
        for j, p in enumerate(PROBES):
            se[p].append(errs[:, :, j])
    conv = np.concatenate(relaxed)
    by_length = []
    for i, n in enumerate(lengths):
        row = {"stored_steps": n, "fs": n * th.timestep_fs}
        for p in PROBES:
            x = np.concatenate(se[p])[:, i]
            keep = conv if p != "config_temperature" else np.ones_like(conv)
            row[p] = {"rms_se": float(np.sqrt(np.mean(x[keep] ** 2))), "max_se": float(np.max(x[keep]))}
        by_length.append(row)
        print(f"{n:5d} steps  " + "  ".join(f"{p} {row[p]['rms_se']:.3f}" for p in PROBES), flush=True)

    # ---------------------------------------------------------------- part 2: the suite
    ref_th = LangevinConfig()
    reference = {"config_temperature": ConfigTemperatureConfig(thermostat=ref_th, sampling=None),
                 "virial": VirialConfig(thermostat=ref_th, sampling=None),
                 "equipartition": EquipartitionConfig(thermostat=ref_th, sampling=None)}
    modes = {"reference fixed length (ASE Langevin, 1 fs, 1100 steps)": reference,
             f"default: BAOAB {th.timestep_fs:g} fs, to SE {sp0.se_target:g}": {}}
    suite = []
    for label, configs in modes.items():
        for seed in range(a.suite_seeds):
            for _ in range(2):  # the second run is warm (compiled)
                t0 = time.perf_counter()
                rep_ = jaxcert.certify(lj, els, probes=",".join(PROBES), seed=seed, configs=configs,
                                       card=False)
                wall = time.perf_counter() - t0
            row = {"mode": label, "seed": seed, "warm_wall_s": wall, "probes": {}}
            js = {q["name"]: q for q in rep_.to_dict()["probes"]}
            for p in PROBES:
                pr = js[p]
                per = pr["per_element"]
                ses = [per[e]["details"]["defect_stderr"] for e in els if "details" in per[e]]
                runs = [per[e]["details"].get("n_steps_run", per[e]["details"]["trajectory"]["n_steps"])
                        for e in els]
                stopped = [per[e]["details"].get("stopped_by_target") for e in els]
                row["probes"][p] = {
                    "defect_mean": pr["defect"], "score": pr["score"], "n_evals": pr["n_evals"],
                    "mean_se": float(np.mean(ses)), "noise_floor": float(np.mean(np.sqrt(2 / np.pi) * np.array(ses))),
                    "steps_run_per_element": runs, "stopped_by_target": stopped,
                }
            suite.append(row)
            print(label, seed, f"{wall:.1f} s", {p: (round(v["defect_mean"], 3), round(v["mean_se"], 3),
                                                     int(np.mean(v["steps_run_per_element"])), v["n_evals"])
                                                 for p, v in row["probes"].items()}, flush=True)

    result = {
        "benchmark": "adaptive_sampling",
        "what": __doc__.split("\n\n")[1].replace("\n", " ") + " " + __doc__.split("\n\n")[2].replace("\n", " "),
        "settings": {"elements": els, "seeds_errors": a.seeds, "seeds_suite": a.suite_seeds, "float": "float64",
                     "thermostat": dataclasses.asdict(th), "sampling": dataclasses.asdict(sp0),
                     "errors_exclude": "virial and equipartition rows leave out runs whose relaxation did not "
                                       "converge (P: it stops at a saddle, docs/statistics.md §5)"},
        "errors_by_length": by_length,
        "suite": suite,
    }
    finish(result, load0, a.out, "the warm wall times are inflated; errors, defects and evaluations are not")


if __name__ == "__main__":
    main()
