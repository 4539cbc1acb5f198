"""Configurational sampling error of the two Langevin integrators on the statistical probes' exact controls.

The shared trajectory of config_temperature, virial and equipartition (docs/probes.md §5) is integrated by
ASE's ``Langevin`` (``integrator="ase"``, the reference's) or by BAOAB (``integrator="baoab"``, Leimkuhler &
Matthews 2013).  Both are exact only as the time step goes to zero.  This measures, at 30 K, friction
0.05 fs⁻¹ and FixCom (the probes' thermostat) and time steps of 1, 2 and 4 fs, the bias of

* the configurational temperature T_conf = ⟨‖F‖²⟩/(k_B⟨Tr H⟩) (exact trace, no Hutchinson noise),
* the kinetic temperature T_kin = ⟨2 KE⟩/((3N − 3) k_B) of the stored velocities (ASE's end-of-step velocities;
  BAOAB's after its O step, which a harmonic well samples exactly, where its end-of-step ones run cold),
* their ratio ρ = T_conf/T_kin (what config_temperature reads; 1 in continuous time),
* and, for the harmonic control, the potential-energy temperature T_U = 2⟨U⟩/((3N − 3) k_B),

on two controls the tests already use: the AnchoredHarmonic well (k = 3 eV/Å² on the 13-atom test
icosahedron, tests/test_dynamics.py; exact answers T_U = T_kin = 30 K and ρ = 36/39 under FixCom) and the
reference Lennard-Jones potential on the production 13-atom clusters of Li (the lightest element, the
stiffest time scale), C and Si (exact answers T_conf = T_kin = 30 K, ρ = 1).  Every control runs
``--seeds`` independent trajectories of the same physical length (400 fs warm-up, ``--fs`` fs stored);
frames are taken every 10 fs.  Each quantity is the mean over runs of the per-run estimate, its standard
error the spread over runs / √runs (independent runs: no autocorrelation assumption).

Usage::

    python benchmarks/langevin_integrators.py            # writes benchmarks/results/langevin_integrators.json
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from _record import finish  # noqa: E402

OUT = pathlib.Path(__file__).parent / "results" / "langevin_integrators.json"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=8)
    ap.add_argument("--fs", type=float, default=8800.0, help="stored physical time per run (fs)")
    ap.add_argument("--timesteps", default="1,2,4")
    ap.add_argument("--elements", default="Li,C,Si")
    ap.add_argument("--out", default=str(OUT))
    a = ap.parse_args()
    load0 = os.getloadavg()
    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import numpy as np

    import jaxcert
    from jaxcert.core.structure import stack
    from jaxcert.core.units import KB_EV_PER_K
    from jaxcert.models.lj import lennard_jones
    from jaxcert.optim import dynamics as dyn
    from jaxcert.probes import substrates
    from tests.test_dynamics import anchored_harmonic, cluster13

    T = 30.0

    def measure(model, s, anchors, seeds, integrator, dt_fs):
        """Per-run (T_conf, T_kin, ρ, T_U) of ``seeds`` runs on structure ``s`` (one element)."""
        n_store = int(round(a.fs / dt_fs))
        every = max(1, int(round(10.0 / dt_fs)))
        cfg = dyn.LangevinConfig(timestep_fs=dt_fs, warmup_steps=int(round(400 / dt_fs)), integrator=integrator)
        n = s.n_atoms
        idx = np.arange(every - 1, n_store, every)

        def one(key):
            tr = dyn.langevin_trajectory(model, s, key, cfg, n_store)
            R, F, V = tr.positions[idx], tr.forces[idx], tr.velocities[idx]

            def trace_h(x):
                J = jax.jacfwd(lambda y: model.forces_of(model.params, tr.reference.replace(positions=y)))(x)
                return -jnp.trace(J.reshape(3 * n, 3 * n))

            trh = jax.lax.map(trace_h, R)
            f2 = jnp.sum(F * F, axis=(-2, -1))
            ke = 0.5 * jnp.sum(s.masses[:, None] * V * V, axis=(-2, -1))
            T_conf = jnp.mean(f2) / (KB_EV_PER_K * jnp.mean(trh))
            T_kin = 2 * jnp.mean(ke) / ((3 * n - 3) * KB_EV_PER_K)
            if anchors is None:
                T_U = jnp.nan
            else:
                U = 0.5 * 3.0 * jnp.sum((R - anchors) ** 2, axis=(-2, -1))
                T_U = 2 * jnp.mean(U) / ((3 * n - 3) * KB_EV_PER_K)
            return jnp.stack([T_conf, T_kin, T_conf / T_kin, jnp.asarray(T_U, R.dtype),
                              jnp.max(jnp.abs(tr.positions - tr.reference.positions))])

        keys = jax.random.split(jax.random.key(2024), seeds)
        t0 = time.perf_counter()
        out = np.asarray(jax.jit(jax.vmap(one))(keys))
        return out, time.perf_counter() - t0

    def summarise(x, exact):
        x = np.asarray(x, float)
        ok = np.isfinite(x)
        if not ok.any():
            return None
        v = x[ok]
        se = float(np.std(v, ddof=1) / np.sqrt(v.size)) if v.size > 1 else float("nan")
        return {"mean": float(v.mean()), "stderr": se, "exact": exact, "bias": float(v.mean() - exact),
                "bias_in_se": float((v.mean() - exact) / se) if se > 0 else None, "runs": int(v.size)}

    controls = []
    s13 = cluster13()
    controls.append(("AnchoredHarmonic k=3 on cluster13 (Ar masses)", anchored_harmonic(s13.positions, 3.0), s13,
                     s13.positions, {"T_conf": 36 / 39 * T, "T_kin": T, "ratio": 36 / 39, "T_U": T}))
    lj = lennard_jones()
    for el in a.elements.split(","):
        s = lj.prepare(stack([substrates.cluster(el, dtype=jnp.float64)]))
        s = jax.tree.map(lambda x: x[0], s)
        controls.append((f"reference LJ, {el} cluster", lj, s, None, {"T_conf": T, "T_kin": T, "ratio": 1.0}))

    rows = []
    for name, model, s, anchors, exact in controls:
        for integ in ("ase", "baoab"):
            for dt_fs in [float(x) for x in a.timesteps.split(",")]:
                out, wall = measure(model, s, anchors, a.seeds, integ, dt_fs)
                row = {"control": name, "integrator": integ, "timestep_fs": dt_fs, "wall_s": wall,
                       "max_displacement_A": float(np.nanmax(out[:, 4]))}
                for j, key in enumerate(("T_conf", "T_kin", "ratio", "T_U")):
                    if key in exact:
                        row[key] = summarise(out[:, j], exact[key])
                rows.append(row)
                r = row["ratio"]
                print(f"{name:48s} {integ:5s} dt={dt_fs:3.0f} fs  ratio {r['mean']:.4f} ± {r['stderr']:.4f} "
                      f"(exact {r['exact']:.4f}, bias {r['bias']:+.4f})  T_kin {row['T_kin']['mean']:.2f}  "
                      f"T_conf {row['T_conf']['mean']:.2f}"
                      + (f"  T_U {row['T_U']['mean']:.2f}" if "T_U" in row else "") + f"  [{wall:.0f} s]",
                      flush=True)

    result = {
        "benchmark": "langevin_integrators",
        "what": __doc__.split("\n\n")[1].replace("\n", " "),
        "settings": {"temperature_K": T, "friction_per_fs": 0.05, "com": "fixcom", "seeds": a.seeds,
                     "stored_fs": a.fs, "warmup_fs": 400.0, "frame_every_fs": 10.0, "float": "float64",
                     "jaxcert": getattr(jaxcert, "__version__", None)},
        "rows": rows,
    }
    finish(result, load0, a.out, "wall times are inflated; the biases and standard errors are not affected")


if __name__ == "__main__":
    main()
