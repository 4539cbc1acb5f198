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
    factory returning one), or a bridged model (``chgnet``, ``sevennet:7net-0``, ``ase:module:attr``,
    options after ``@`` such as ``chgnet@float64,fd``; needs jaxcert-bridges); then apply
    ``--defect name=strength`` wrappers in order."""
    from jaxcert import models
    from jaxcert.model import Model

    head = spec.split(":", 1)[0].split("@", 1)[0]
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


#: ``jaxcert sweep`` settings: TOML key → built-in default (a flag given on the command line wins over the TOML
#: file, which wins over these).  ``[config]`` in the TOML file holds PipelineConfig fields.
_SWEEP_DEFAULTS: dict[str, Any] = {
    "model": None, "defect": [], "dtype": "float64", "structures": "mp2d", "attacks": "fgsm,ifgsm,pgd",
    "epsilons": "0.001,0.002,0.003,0.004,0.005,0.01,0.02,0.03,0.04,0.05,0.1,0.2,0.3,0.4,0.5,1,2,3,4,5,10",
    "seeds": "42,43,44,45,46", "n_steps": 10, "alpha_ratio": None, "db": None, "chunk": 4, "max_chunks": None,
    "executor": "local", "scheduler": None, "export": None, "plots": None, "contour": None, "json": None,
    "quiet": False,
}
_SWEEP_FLAGS = {"attacks": "attack", "epsilons": "eps", "seeds": "seed"}  # TOML key → argparse dest where different
_SWEEP_CONFIG = ("fmax", "max_steps", "optimizer", "loss", "relative", "distinct_keys")
_SWEEP_PATHS = ("db", "export", "plots", "contour", "json")


def _sweep_settings(a: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any]]:
    """Merge command-line flags, the optional TOML file and defaults; returns (settings, PipelineConfig fields)."""
    import os

    doc: dict[str, Any] = {}
    base = "."
    if a.config is not None:
        try:
            import tomllib
        except ImportError:  # Python 3.10
            try:
                import tomli as tomllib
            except ImportError:
                raise SystemExit("jaxcert sweep: a TOML file needs Python >= 3.11 (tomllib) or the tomli "
                                 "package") from None
        try:
            with open(a.config, "rb") as fh:
                doc = tomllib.load(fh)
        except FileNotFoundError:
            raise SystemExit(f"jaxcert sweep: no such TOML file: {a.config!r}") from None
        except tomllib.TOMLDecodeError as err:
            raise SystemExit(f"jaxcert sweep: {a.config}: invalid TOML: {err}") from None
        base = os.path.dirname(os.path.abspath(a.config))
        unknown = set(doc) - set(_SWEEP_DEFAULTS) - {"config"}
        if unknown:
            raise SystemExit(f"jaxcert sweep: {a.config}: unknown key(s) {sorted(unknown)}; allowed: "
                             f"{', '.join(sorted(_SWEEP_DEFAULTS))} and a [config] table")
        bad = set(doc.get("config", {})) - set(_SWEEP_CONFIG)
        if bad:
            raise SystemExit(f"jaxcert sweep: {a.config}: unknown [config] key(s) {sorted(bad)}; allowed: "
                             f"{', '.join(_SWEEP_CONFIG)}")
    out: dict[str, Any] = {}
    for key, default in _SWEEP_DEFAULTS.items():
        flag = getattr(a, _SWEEP_FLAGS.get(key, key), None)
        if flag is not None and flag != []:
            out[key] = flag
        elif key in doc:
            out[key] = doc[key]
            if key in _SWEEP_PATHS and isinstance(doc[key], str) and not os.path.isabs(doc[key]):
                out[key] = os.path.join(base, doc[key])  # relative to the TOML file
        else:
            out[key] = default
    cfg = dict(doc.get("config", {}))
    for key in _SWEEP_CONFIG:
        flag = getattr(a, key, None)
        if flag is not None and flag is not False:
            cfg[key] = flag
    out["_base"] = base
    if out["model"] is None:
        raise SystemExit("jaxcert sweep: no model: give --model or 'model = ...' in the TOML file")
    if out["db"] is None:
        raise SystemExit("jaxcert sweep: no store: give --db or 'db = ...' in the TOML file")
    return out, cfg


def _listed(x: Any, kind: Any) -> list[Any]:
    """A TOML list or a comma-separated string, as a list of ``kind``."""
    items = x if isinstance(x, (list, tuple)) else str(x).split(",")
    return [kind(v.strip()) if isinstance(v, str) else kind(v) for v in items if not (isinstance(v, str)
                                                                                     and not v.strip())]


def _sweep_attacks(x: Any, n_steps: int, alpha_ratio: float | None) -> tuple:
    """Attack specs from names (``"fgsm,ifgsm,pgd"`` or a list) or TOML tables ``{name, n_steps, alpha_ratio}``."""
    from jaxcert.attacks import AttackSpec

    specs = []
    for item in (x if isinstance(x, list) else _listed(x, str)):
        if isinstance(item, dict):
            extra = set(item) - {"name", "n_steps", "alpha_ratio"}
            if extra or "name" not in item:
                raise SystemExit(f"jaxcert sweep: an attack table needs 'name' and may set n_steps, alpha_ratio; "
                                 f"got {sorted(item)}")
            name = item["name"]
            specs.append(AttackSpec(name, int(item.get("n_steps", 1 if name == "fgsm" else n_steps)),
                                    item.get("alpha_ratio")))
        else:
            name = str(item).strip()
            specs.append(AttackSpec(name, 1 if name == "fgsm" else n_steps, alpha_ratio if name == "pgd" else None))
    return tuple(specs)


def cmd_sweep(a: argparse.Namespace) -> int:
    """``jaxcert sweep [sweep.toml] [flags]``: resumable sweep into an SQLite store (+ NPZ arrays, export, plots)."""
    st, cfg_kw = _sweep_settings(a)
    dtype = _set_dtype(st["dtype"])
    import os

    from jaxcert.attacks import PipelineConfig, crystals
    from jaxcert.attacks.sweep import Store, sweep, text_progress
    from jaxcert.structure import Structure

    model = load_model(st["model"], _listed(st["defect"], str))
    spec = ",".join(st["structures"]) if isinstance(st["structures"], list) else st["structures"]
    known = crystals.table()
    structures = {}
    for lab in crystals.resolve(spec):
        near_toml = os.path.join(st["_base"], lab)  # structure files are found next to the TOML file too
        path = near_toml if lab not in known and not os.path.exists(lab) and os.path.exists(near_toml) else lab
        atoms = crystals.build(lab) if lab in known else _attack_structure(path, 0.0, 0)
        structures[lab] = Structure.from_ase(atoms, dtype=dtype)
    specs = _sweep_attacks(st["attacks"], int(st["n_steps"]), st["alpha_ratio"])
    cfg = PipelineConfig(**cfg_kw)
    store = Store(st["db"])
    try:
        counts = sweep(model, structures, _listed(st["epsilons"], float), _listed(st["seeds"], int), attacks=specs,
                       cfg=cfg, store=store, chunk=int(st["chunk"]), max_chunks=st["max_chunks"],
                       progress=None if st["quiet"] else text_progress(), executor=st["executor"],
                       scheduler=st["scheduler"])
    except ImportError as err:
        raise SystemExit(f"jaxcert sweep: {err}") from None
    print(f"{st['db']}: {counts}")
    if st["export"]:
        try:
            n = store.export(st["export"])
        except ImportError as err:
            raise SystemExit(f"jaxcert sweep: {err}") from None
        print(f"wrote {n} rows to {st['export']}")
    if st["plots"]:
        files = _plot_rows(store.rows(), st["plots"], st["contour"])
        print(f"wrote {len(files)} files to {st['plots']}")
    if st["json"]:
        from jaxcert.report import to_jsonable

        with open(st["json"], "w") as fh:
            json.dump(to_jsonable({"schema": "jaxcert-sweep/1", "counts": counts, "config": vars(cfg),
                                   "structures": list(structures), "runs": store.rows()}), fh, indent=2,
                      allow_nan=False)
        print(f"wrote {st['json']}")
    return 0


def _plot_rows(rows: list, out: str, contour: str | None, metrics: str | None = None) -> list:
    from jaxcert.attacks import plots

    doc = None
    if contour:
        with open(contour) as fh:
            doc = json.load(fh)
        doc = doc if isinstance(doc, list) else [doc]
    chosen = plots.PLOT_METRICS if not metrics else tuple(_listed(metrics, str))
    return plots.write_plots(rows, out, metrics=chosen, contour=doc)


def cmd_plot_sweep(a: argparse.Namespace) -> int:
    """``jaxcert plot-sweep DB --out DIR``: metric-vs-ε figures of a sweep store."""
    import os

    from jaxcert.attacks.sweep import Store

    if not os.path.exists(a.db):
        raise SystemExit(f"jaxcert plot-sweep: no such store: {a.db!r}")
    where = {k: v for k, v in (("model", a.model), ("dtype", a.dtype)) if v}
    rows = Store(a.db).rows(**where)
    if not rows:
        raise SystemExit(f"jaxcert plot-sweep: {a.db} has no finished runs" + (f" for {where}" if where else ""))
    files = _plot_rows(rows, a.out, a.contour, a.metrics)
    print(f"wrote {len(files)} files to {a.out}")
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
    sw = sub.add_parser("sweep", help="resumable relax-attack-relax sweep into an SQLite store",
                        description="Settings come from the flags, else from the optional TOML file (keys: "
                        + ", ".join(sorted(_SWEEP_DEFAULTS)) + "; a [config] table with " + ", ".join(_SWEEP_CONFIG)
                        + "), else from the defaults shown.")
    sw.add_argument("config", nargs="?", help="optional sweep.toml describing the grid (see description)")
    sw.add_argument("--model", help="registered name (see `jaxcert models`), module:attr, or a bridged model")
    sw.add_argument("--defect", action="append", default=[], metavar="NAME=STRENGTH", help="wrap the model in a defect")
    sw.add_argument("--dtype", help="float64 (default) or float32")
    sw.add_argument("--json", help="write the JSON report here")
    sw.add_argument("--structures", help="comma-separated set names (mp2d: the 20 rebuilt crystals of the study's 2D "
                    "set; sei: the 20 Li-C-O-H-P-F stand-ins; all: both), crystal labels, element symbols or files "
                    "(default mp2d)")
    sw.add_argument("--attack", help="comma-separated fgsm, ifgsm, pgd (default all three)")
    sw.add_argument("--eps", help="epsilon grid in A (default: the experiment's 21 values)")
    sw.add_argument("--relative", action="store_true", default=None,
                    help="--eps are fractions of the minimum lattice length")
    sw.add_argument("--seed", help="comma-separated seeds (default 42,43,44,45,46)")
    sw.add_argument("--n-steps", type=int, help="attack steps for ifgsm/pgd (default 10)")
    sw.add_argument("--alpha-ratio", type=float, help="pgd step alpha/eps (default 0.1)")
    sw.add_argument("--fmax", type=float, help="relaxation threshold in eV/A (default 0.01)")
    sw.add_argument("--max-steps", type=int, help="relaxation step limit (default 300)")
    sw.add_argument("--optimizer", choices=["fire", "bfgs"], help="relaxation optimizer (default fire)")
    sw.add_argument("--db", help="SQLite file (created or resumed); per-atom arrays go to <db>.arrays/")
    sw.add_argument("--chunk", type=int, help="structures per vmapped program / dask task (default 4)")
    sw.add_argument("--max-chunks", type=int, help="stop after this many chunks (rerun to resume)")
    sw.add_argument("--executor", choices=["local", "dask"], help="local (default) or dask (dask.distributed: a "
                    "LocalCluster, or --scheduler)")
    sw.add_argument("--scheduler", metavar="ADDRESS", help="dask scheduler address, e.g. tcp://host:8786")
    sw.add_argument("--export", metavar="PATH", help="export all rows to PATH (.csv, or .parquet with pyarrow)")
    sw.add_argument("--plots", metavar="DIR", help="write metric-vs-epsilon figures (median, IQR) to DIR")
    sw.add_argument("--contour", metavar="JSON", help="contour results (jaxcert.attacks.contour output, a list) for "
                    "the baseline band in --plots")
    sw.add_argument("--quiet", action="store_true", default=None, help="no progress bar")
    sw.set_defaults(fn=cmd_sweep)
    ps = sub.add_parser("plot-sweep", help="metric-vs-epsilon figures (median, IQR, contour band) of a sweep store")
    ps.add_argument("db", help="the sweep's SQLite file")
    ps.add_argument("--out", required=True, help="output directory")
    ps.add_argument("--model", help="only rows of this model")
    ps.add_argument("--dtype", help="only rows of this dtype (float32 or float64)")
    ps.add_argument("--contour", metavar="JSON", help="contour results (a JSON list of jaxcert.attacks.contour "
                    "outputs) for the baseline band")
    ps.add_argument("--metrics", help="comma-separated metrics, e.g. post_relaxation.max_displacement,steps_after "
                    "(default: jaxcert.attacks.plots.PLOT_METRICS)")
    ps.set_defaults(fn=cmd_plot_sweep)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from jaxcert.cache import enable_compilation_cache

    enable_compilation_cache()  # compiled probe programs are reused by the next run ($JAXCERT_CACHE_DIR=off: never)
    try:
        return args.fn(args)
    except (KeyError, ValueError) as err:
        msg = err.args[0] if isinstance(err, KeyError) and err.args else err
        print(f"jaxcert: error: {msg}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
