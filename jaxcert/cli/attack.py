"""``jaxcert attack``, ``jaxcert sweep`` and ``jaxcert plot-sweep`` (relax → attack → relax; docs/attacks.md)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from jaxcert.cli._common import load_model, model_args, set_dtype
from jaxcert.inputs import InputError

__all__ = ["cmd_attack", "cmd_sweep", "cmd_plot_sweep", "register"]


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
            raise InputError(f"--structure {spec!r} is neither a file nor an element ase.build.bulk knows: "
                             f"{err}") from None
    if rattle > 0:
        atoms.rattle(rattle, seed=seed)
    return atoms


def cmd_attack(a: argparse.Namespace) -> int:
    dtype = set_dtype(a.dtype)
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
        raise InputError("--alpha-ratio applies to pgd only (fgsm steps eps, ifgsm eps/n), as in the reference CLI")
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
                raise InputError("jaxcert sweep: a TOML file needs Python >= 3.11 (tomllib) or the tomli "
                                 "package") from None
        try:
            with open(a.config, "rb") as fh:
                doc = tomllib.load(fh)
        except FileNotFoundError:
            raise InputError(f"jaxcert sweep: no such TOML file: {a.config!r}") from None
        except tomllib.TOMLDecodeError as err:
            raise InputError(f"jaxcert sweep: {a.config}: invalid TOML: {err}") from None
        base = os.path.dirname(os.path.abspath(a.config))
        unknown = set(doc) - set(_SWEEP_DEFAULTS) - {"config"}
        if unknown:
            raise InputError(f"jaxcert sweep: {a.config}: unknown key(s) {sorted(unknown)}; allowed: "
                             f"{', '.join(sorted(_SWEEP_DEFAULTS))} and a [config] table")
        bad = set(doc.get("config", {})) - set(_SWEEP_CONFIG)
        if bad:
            raise InputError(f"jaxcert sweep: {a.config}: unknown [config] key(s) {sorted(bad)}; allowed: "
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
        raise InputError("jaxcert sweep: no model: give --model or 'model = ...' in the TOML file")
    if out["db"] is None:
        raise InputError("jaxcert sweep: no store: give --db or 'db = ...' in the TOML file")
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
                raise InputError(f"jaxcert sweep: an attack table needs 'name' and may set n_steps, alpha_ratio; "
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
    dtype = set_dtype(st["dtype"])
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
        raise InputError(f"jaxcert sweep: {err}") from None
    print(f"{st['db']}: {counts}")
    if st["export"]:
        try:
            n = store.export(st["export"])
        except ImportError as err:
            raise InputError(f"jaxcert sweep: {err}") from None
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
        raise InputError(f"jaxcert plot-sweep: no such store: {a.db!r}")
    where = {k: v for k, v in (("model", a.model), ("dtype", a.dtype)) if v}
    rows = Store(a.db).rows(**where)
    if not rows:
        raise InputError(f"jaxcert plot-sweep: {a.db} has no finished runs" + (f" for {where}" if where else ""))
    files = _plot_rows(rows, a.out, a.contour, a.metrics)
    print(f"wrote {len(files)} files to {a.out}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add this module's subcommands to the ``jaxcert`` parser."""
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
