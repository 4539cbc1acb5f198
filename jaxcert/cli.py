"""Command line: ``jaxcert certify | lambda | models | substrates``.

Examples::

    jaxcert certify --model lj --elements Li,Be,B,C,Na,Mg,Al,Si,P,S --json r.json --html r.html
    jaxcert certify --model emt --elements Cu
    jaxcert certify --model mypkg.potential:model --elements Si       # your own jaxcert.Model
    jaxcert certify --model lj --defect curl=1.0 --elements Si        # a deliberately broken model
    jaxcert lambda --model lj --json l.json [--fd]
    jaxcert models
    jaxcert substrates --element Si --out substrates/
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from typing import Any

__all__ = ["main", "load_model"]

BRIDGED = ("chgnet", "sevennet", "mace", "orb", "fairchem", "ase")


def _set_dtype(name: str) -> Any:
    import jax

    if name not in ("float32", "float64"):
        raise SystemExit(f"--dtype must be float32 or float64, got {name!r}")
    if name == "float64":
        jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    return jnp.float64 if name == "float64" else jnp.float32


def load_model(spec: str, defects: list[str] | None = None):
    """Resolve ``--model``: a registered name, ``module:attr`` (a Model or a zero-argument
    factory returning one), or a bridged model (``chgnet``, ``sevennet:7net-0``, ``ase:module:attr``, needs
    jaxcert-bridges); then apply ``--defect name=strength`` wrappers in order."""
    from jaxcert import models
    from jaxcert.model import Model

    head = spec.split(":", 1)[0]
    if spec in models.available():
        model = models.get(spec)
    elif head in BRIDGED:
        try:
            bridges = importlib.import_module("jaxcert_bridges")
        except ImportError:
            raise SystemExit(
                f"--model {spec!r} needs the bridges: pip install -e bridges/ (distribution jaxcert-bridges); "
                "see README 'Bridges'"
            ) from None
        model = bridges.load(spec)
    elif ":" in spec:
        mod, attr = spec.split(":", 1)
        try:
            obj = getattr(importlib.import_module(mod), attr)
        except (ImportError, AttributeError) as err:
            raise SystemExit(f"cannot load --model {spec!r}: {err}") from None
        model = obj if isinstance(obj, Model) else obj()
        if not isinstance(model, Model):
            raise SystemExit(f"--model {spec!r} did not give a jaxcert.Model (got {type(model).__name__})")
    else:
        raise SystemExit(f"unknown model {spec!r}; registered: {', '.join(models.available())}; "
                         "or give module:attr for your own jaxcert.Model")
    for d in defects or []:
        from jaxcert.models import defects as dmod

        name, _, val = d.partition("=")
        if name not in dmod.DEFECTS:
            raise SystemExit(f"unknown defect {name!r}; available: {', '.join(sorted(dmod.DEFECTS))}")
        model = dmod.DEFECTS[name](model, float(val)) if val else dmod.DEFECTS[name](model)
    return model


def _progress(name: str, idx: int, total: int, last: float) -> None:
    """One status line per probe; redrawn in place on a terminal."""
    tty = sys.stderr.isatty()
    prev = f" (previous {last:.1f} s)" if idx else ""
    text = f"[{total}/{total}] done{prev}" if name == "done" else f"[{idx + 1}/{total}] {name} ...{prev}"
    if tty:
        print("\r" + text.ljust(72), end="\n" if name == "done" else "", file=sys.stderr, flush=True)
    else:
        print(text, file=sys.stderr, flush=True)


def cmd_certify(a: argparse.Namespace) -> int:
    dtype = _set_dtype(a.dtype)
    from jaxcert.probes.suite import certify

    model = load_model(a.model, a.defect)
    report = certify(model, a.elements, probes=a.probes or "all", seed=a.seed, dtype=dtype, agg=a.agg,
                     progress=None if a.quiet else _progress)
    print(report.table())
    if a.json:
        report.to_json(a.json)
        print(f"wrote {a.json}")
    if a.html:
        report.to_html(a.html)
        print(f"wrote {a.html}")
    return 0


def cmd_lambda(a: argparse.Namespace) -> int:
    dtype = _set_dtype(a.dtype)
    from jaxcert.lam import lam

    model = load_model(a.model, a.defect)
    res = lam(model, fd=a.fd, step=a.step, dtype=dtype)
    print(res.table())
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(res.to_dict(), fh, indent=2, allow_nan=False)
        print(f"wrote {a.json}")
    return 0


def cmd_models(a: argparse.Namespace) -> int:
    from jaxcert import models

    for name, desc in models.describe().items():
        print(f"{name:<10} {desc}")
    try:
        from jaxcert.models import defects

        print("\ndefects (--defect name=strength):", ", ".join(sorted(defects.DEFECTS)))
    except ImportError:
        pass
    return 0


def cmd_substrates(a: argparse.Namespace) -> int:
    from jaxcert import substrates

    for p in substrates.write_substrates(a.element, a.out):
        print(p)
    return 0


def _attack_structure(spec: str, rattle: float, seed: int):
    """``--structure``: an existing file (any format ASE reads) or an element symbol (``ase.build.bulk``)."""
    import os

    from ase.build import bulk

    if os.path.exists(spec):
        import ase.io

        atoms = ase.io.read(spec)
    else:
        try:
            atoms = bulk(spec)
        except (KeyError, ValueError, RuntimeError) as err:
            raise SystemExit(f"--structure {spec!r} is neither a file nor an element ase.build.bulk knows: "
                             f"{err}") from None
    if rattle > 0:
        atoms.rattle(rattle, seed=seed)
    return atoms


def cmd_attack(a: argparse.Namespace) -> int:
    dtype = _set_dtype(a.dtype)
    import time

    import numpy as np

    from jaxcert.attacks import AttackSpec, PipelineConfig, metrics, run_grid
    from jaxcert.report import machine, to_jsonable
    from jaxcert.structure import Structure

    model = load_model(a.model, a.defect)
    atoms = _attack_structure(a.structure, a.rattle, a.rattle_seed)
    s = Structure.from_ase(atoms, dtype=dtype)
    names = [x.strip() for x in a.attack.split(",") if x.strip()]
    if a.alpha_ratio is not None and set(names) != {"pgd"}:
        raise SystemExit("--alpha-ratio applies to pgd only (fgsm steps eps, ifgsm eps/n), as in the reference CLI")
    specs = tuple(AttackSpec(n, 1 if n == "fgsm" else a.n_steps, a.alpha_ratio if n == "pgd" else None)
                  for n in names)
    eps = [float(x) for x in a.eps.split(",")]
    seeds = [int(x) for x in a.seed.split(",")]
    cfg = PipelineConfig(fmax=a.fmax, max_steps=a.max_steps, optimizer=a.optimizer, loss=a.loss,
                         relative=a.relative)
    t0 = time.perf_counter()
    g = run_grid(model, [s], eps, seeds, attacks=specs, cfg=cfg)
    wall = time.perf_counter() - t0
    rows = [metrics.run_metrics(g, 0, i, e, k) for i in range(len(specs)) for e in range(len(eps))
            for k in range(len(seeds))]
    keys = ("median_displacement", "max_displacement", "linf_displacement", "max_delta_force", "force_angle_median",
            "delta_energy", "jaccard_distance", "coordination_change_max", "rdf_l1", "space_group_change",
            "symmetry_op_retention", "symmetry_op_retention_doc")
    print(f"{model.name} on {atoms.get_chemical_formula()} ({len(atoms)} atoms); first relaxation: "
          f"{int(np.asarray(g.ref_steps)[0])} steps, converged={bool(np.asarray(g.ref_converged)[0])}")
    for r in rows:
        print(f"\n{r['attack_label']} eps={r['epsilon']:g} ({r['epsilon_A']:.4g} A, {r['epsilon_percent_min']:.3g}% of "
              f"min lattice) seed={r['seed']}: second relaxation {r['steps_after']} steps, "
              f"converged={r['converged_after']}")
        print(f"  {'metric':<28}{'immediate':>14}{'post-relax':>14}")
        for k in keys:
            v1, v2 = r["immediate"].get(k, float("nan")), r["post_relaxation"].get(k, float("nan"))
            print(f"  {k:<28}{v1:>14.6g}{v2:>14.6g}")
    if a.json:
        doc = {"schema": "jaxcert-attack/1", "model": model.name, "structure": a.structure,
               "formula": atoms.get_chemical_formula(), "dtype": a.dtype, "config": vars(cfg) | {"rattle": a.rattle},
               "wall_s": wall, "machine": machine(), "runs": rows}
        with open(a.json, "w") as fh:
            json.dump(to_jsonable(doc), fh, indent=2, allow_nan=False)
        print(f"wrote {a.json}")
    return 0


def cmd_sweep(a: argparse.Namespace) -> int:
    dtype = _set_dtype(a.dtype)
    from jaxcert.attacks import AttackSpec, PipelineConfig, crystals
    from jaxcert.attacks.sweep import Store, sweep
    from jaxcert.structure import Structure

    model = load_model(a.model, a.defect)
    labels = crystals.resolve(a.structures)
    known = crystals.table()
    structures = {}
    for lab in labels:
        atoms = crystals.build(lab) if lab in known else _attack_structure(lab, 0.0, 0)
        structures[lab] = Structure.from_ase(atoms, dtype=dtype)
    specs = tuple(AttackSpec(n.strip(), 1 if n.strip() == "fgsm" else a.n_steps) for n in a.attack.split(","))
    cfg = PipelineConfig(fmax=a.fmax, max_steps=a.max_steps, optimizer=a.optimizer, relative=a.relative)
    store = Store(a.db)
    counts = sweep(model, structures, [float(x) for x in a.eps.split(",")], [int(x) for x in a.seed.split(",")],
                   attacks=specs, cfg=cfg, store=store, chunk=a.chunk, max_chunks=a.max_chunks, progress=print)
    print(f"{a.db}: {counts}")
    if a.json:
        from jaxcert.report import to_jsonable

        with open(a.json, "w") as fh:
            json.dump(to_jsonable({"schema": "jaxcert-sweep/1", "counts": counts, "runs": store.rows()}), fh,
                      indent=2, allow_nan=False)
        print(f"wrote {a.json}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="jaxcert", description="Exact, batched certification of ML interatomic "
                                "potentials (eV, Å, eV/Å, eV/Å³).")
    sub = p.add_subparsers(dest="cmd", required=True)

    def model_args(q):
        q.add_argument("--model", required=True, help="registered name (see `jaxcert models`), module:attr, "
                       "or a bridged model (chgnet, sevennet:7net-0, ase:module:attr)")
        q.add_argument("--defect", action="append", default=[], metavar="NAME=STRENGTH",
                       help="wrap the model in a defect (repeatable), e.g. curl=0.3")
        q.add_argument("--dtype", default="float64", help="float64 (default) or float32")
        q.add_argument("--json", help="write the JSON report here")

    c = sub.add_parser("certify", help="run the 14 certification probes")
    model_args(c)
    c.add_argument("--elements", default="Ar", help="comma-separated element symbols (default Ar)")
    c.add_argument("--probes", default=None, help="comma-separated probe names (default: all)")
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--agg", default="geometric", choices=["arithmetic", "geometric", "harmonic"])
    c.add_argument("--html", help="write a self-contained HTML report with plots")
    c.add_argument("--quiet", action="store_true", help="no progress display")
    c.set_defaults(fn=cmd_certify)

    lmb = sub.add_parser("lambda", help="conservativeness λ = ‖J_anti‖/‖J‖ on the ten seed-002 structures")
    model_args(lmb)
    lmb.add_argument("--fd", action="store_true", help="central finite differences instead of the exact Jacobian")
    lmb.add_argument("--step", type=float, default=1e-3, help="FD displacement in Å (default 1e-3)")
    lmb.set_defaults(fn=cmd_lambda)

    m = sub.add_parser("models", help="list the analytic models and defects")
    m.set_defaults(fn=cmd_models)

    s = sub.add_parser("substrates", help="write an element's probe substrates as extxyz")
    s.add_argument("--element", required=True)
    s.add_argument("--out", required=True)
    s.set_defaults(fn=cmd_substrates)
    at = sub.add_parser("attack", help="relax -> adversarial attack -> relax, immediate and post-relaxation metrics")
    model_args(at)
    at.add_argument("--structure", required=True, help="element symbol (ase.build.bulk) or a structure file")
    at.add_argument("--attack", default="pgd", help="fgsm, ifgsm, pgd or a comma-separated list (default pgd)")
    at.add_argument("--eps", default="0.05", help="epsilon in A (comma-separated list allowed; default 0.05)")
    at.add_argument("--relative", action="store_true", help="--eps is a fraction of the minimum lattice length")
    at.add_argument("--seed", default="42", help="PGD seed(s), comma-separated (default 42)")
    at.add_argument("--n-steps", type=int, default=10, help="attack steps for ifgsm/pgd (default 10)")
    at.add_argument("--alpha-ratio", type=float, default=None, help="pgd step alpha/eps (default 0.1)")
    at.add_argument("--loss", default="energy", choices=["energy", "force_norm"], help="objective ascended")
    at.add_argument("--fmax", type=float, default=0.01, help="relaxation threshold in eV/A (default 0.01)")
    at.add_argument("--max-steps", type=int, default=300, help="relaxation step limit (default 300)")
    at.add_argument("--optimizer", default="fire", choices=["fire", "bfgs"])
    at.add_argument("--rattle", type=float, default=0.0, help="Gaussian rattle of the input in A (default 0)")
    at.add_argument("--rattle-seed", type=int, default=0)
    at.set_defaults(fn=cmd_attack)
    sw = sub.add_parser("sweep", help="resumable relax-attack-relax sweep into an SQLite store")
    model_args(sw)
    sw.add_argument("--structures", default="mp2d", help="comma-separated set names (mp2d: the 20 rebuilt crystals "
                    "of the study's 2D set; sei: the 20 Li-C-O-H-P-F stand-ins; all: both), crystal labels, element "
                    "symbols or files (default mp2d)")
    sw.add_argument("--attack", default="fgsm,ifgsm,pgd")
    sw.add_argument("--eps", default="0.001,0.002,0.003,0.004,0.005,0.01,0.02,0.03,0.04,0.05,0.1,0.2,0.3,0.4,0.5,"
                    "1,2,3,4,5,10", help="epsilon grid in A (default: the experiment's 21 values)")
    sw.add_argument("--relative", action="store_true", help="--eps are fractions of the minimum lattice length")
    sw.add_argument("--seed", default="42,43,44,45,46")
    sw.add_argument("--n-steps", type=int, default=10)
    sw.add_argument("--fmax", type=float, default=0.01)
    sw.add_argument("--max-steps", type=int, default=300)
    sw.add_argument("--optimizer", default="fire", choices=["fire", "bfgs"])
    sw.add_argument("--db", required=True, help="SQLite file (created or resumed)")
    sw.add_argument("--chunk", type=int, default=4, help="structures per vmapped program")
    sw.add_argument("--max-chunks", type=int, default=None, help="stop after this many chunks (rerun to resume)")
    sw.set_defaults(fn=cmd_sweep)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.fn(args)
    except (KeyError, ValueError) as err:
        msg = err.args[0] if isinstance(err, KeyError) and err.args else err
        print(f"jaxcert: error: {msg}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
