"""``jaxcert attack``, ``jaxcert sweep`` and ``jaxcert plot-sweep`` (relax → attack → relax; docs/attacks.md).

Every numeric argument is checked with :mod:`jaxcert.inputs` before any computation, and a bad one ends the
command with one line naming the argument, the value and what is allowed (exit 2; docs/attacks.md §8).
Structures (docs/attacks.md §7): a file goes through :func:`jaxcert.inputs.read_atoms`; an element symbol
becomes its conventional cell repeated to every lattice vector ≥ ``--min-length`` Å
(:func:`jaxcert.attacks.crystals.element_cell`); a cell of one atom is refused.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

import numpy as np

from jaxcert import inputs
from jaxcert.attacks import AttackSpec, PipelineConfig, crystals, plots, run_grid
from jaxcert.attacks.pipeline import OPTIMIZERS, check_attackable
from jaxcert.attacks.report import AttackReport
from jaxcert.attacks.sweep import Store, SweepProgress, sweep
from jaxcert.cli._common import load_model, model_args, set_dtype
from jaxcert.inputs import InputError
from jaxcert.report import to_jsonable
from jaxcert.structure import Structure

__all__ = ["cmd_attack", "cmd_sweep", "cmd_plot_sweep", "register"]

ATTACK_NAMES = ("fgsm", "ifgsm", "pgd")
#: What ``--eps`` allows, for the messages.
_EPS_UNIT = "Å, or a fraction of the smallest lattice vector with --relative"


def _is_symbol(spec: str) -> bool:
    from ase.data import atomic_numbers

    return spec in atomic_numbers and spec != "X"


def _load_structure(name: str, spec: str, min_length: float | None, *, base: str | None = None):
    """A structure argument as ``ase.Atoms`` with its provenance in ``info`` (docs/attacks.md §7).

    ``spec`` is a file (also looked up relative to ``base``, the TOML file's directory), read with
    :func:`jaxcert.inputs.read_atoms` and repeated only when ``min_length`` is given; or an element symbol, built by
    :func:`jaxcert.attacks.crystals.element_cell` (``min_length`` default 8 Å).  A cell of fewer than two atoms is
    refused (every perturbation would be a rigid translation).
    """

    near = os.path.join(base, spec) if base is not None else None
    path = spec if os.path.exists(spec) else (near if near is not None and os.path.exists(near) else None)
    if path is not None:
        atoms = inputs.read_atoms(name, path)
        source = f"file {spec!r}"
        reps = (1, 1, 1) if min_length is None else crystals.repeats_for_length(atoms, min_length)
        if reps != (1, 1, 1):
            atoms = atoms.repeat(reps)
            source += f" .repeat({reps})"
            atoms.info["jaxcert_key"] = f"repeat:{reps}"
        atoms.info.update({"jaxcert_source": source, "supercell": reps})
    elif _is_symbol(spec):
        try:
            atoms = crystals.element_cell(spec, crystals.ELEMENT_MIN_LENGTH if min_length is None else min_length)
        except ValueError as err:
            raise InputError(f"{name}: {err}") from None
    else:
        fixed = spec[:1].upper() + spec[1:].lower()
        hint = f" (did you mean the element {fixed!r}?)" if _is_symbol(fixed) else ""
        raise InputError(f"{name}: got {spec!r}; allowed: an existing structure file (cif, extxyz, POSCAR, ...) or an "
                         f"element symbol such as Si{hint}")
    check_attackable(name, atoms)
    return atoms


def _attack_args(a: argparse.Namespace) -> dict[str, Any]:
    """Check every argument of ``jaxcert attack`` (before any computation); the checked values by name."""
    names = [inputs.choice("--attack", x, ATTACK_NAMES) for x in _split(a.attack)]
    if not names:
        raise InputError(f"--attack: got {a.attack!r}; allowed: fgsm, ifgsm, pgd or a comma-separated list")
    if len(set(names)) != len(names):
        raise InputError(f"--attack: {a.attack!r} names an attack more than once; each attack must appear once")
    out: dict[str, Any] = {
        "names": names,
        "eps": inputs.number_list("--eps", a.eps, unit=_EPS_UNIT),
        "seeds": inputs.integer_list("--seed", a.seed, seeds=True),
        "n_steps": inputs.integer("--n-steps", a.n_steps, minimum=1),
        "alpha_ratio": None if a.alpha_ratio is None else inputs.positive("--alpha-ratio", a.alpha_ratio),
        "fmax": inputs.positive("--fmax", a.fmax, "eV/Å"),
        "max_steps": inputs.integer("--max-steps", a.max_steps, minimum=1),
        "rattle": inputs.non_negative("--rattle", a.rattle, "Å"),
        "rattle_seed": inputs.seed("--rattle-seed", a.rattle_seed),
        "min_length": None if a.min_length is None else inputs.non_negative("--min-length", a.min_length, "Å"),
    }
    if out["alpha_ratio"] is not None and set(names) != {"pgd"}:
        raise InputError("--alpha-ratio applies to pgd only (fgsm steps eps, ifgsm eps/n), as in the reference CLI")
    _unique_or_fail("--eps", out["eps"])
    return out


def _split(x: Any) -> list[Any]:
    """A comma-separated string or a (TOML) list, blanks dropped, strings stripped."""
    items = x if isinstance(x, (list, tuple)) else str(x).split(",")
    return [v.strip() if isinstance(v, str) else v for v in items if not (isinstance(v, str) and not v.strip())]


def _unique_or_fail(name: str, values: list) -> list:
    dup = sorted({v for v in values if values.count(v) > 1})
    if dup:
        raise InputError(f"{name}: {dup} given more than once; each value must appear once")
    return values


def _print_warnings(warnings: list[str], indent: str = "  ", stream: Any = None) -> None:
    for w in warnings:
        print(f"{indent}warning: {w}", file=stream or sys.stdout)


def cmd_attack(a: argparse.Namespace) -> int:
    """``jaxcert attack``: relax → attack → relax one structure, both stages' metrics (docs/attacks.md §2)."""
    v = _attack_args(a)
    inputs.choice("--dtype", a.dtype, ("float64", "float32"))
    atoms = _load_structure("--structure", a.structure, v["min_length"])
    if v["rattle"] > 0:
        atoms.rattle(v["rattle"], seed=v["rattle_seed"])
    dtype = set_dtype(a.dtype)
    model = load_model(a.model, a.defect, a.max_batch)
    s = Structure.from_ase(atoms, dtype=dtype)
    specs = tuple(AttackSpec(n, 1 if n == "fgsm" else v["n_steps"], v["alpha_ratio"] if n == "pgd" else None,
                             True if (a.random_start and n != "pgd") else None) for n in v["names"])
    cfg = PipelineConfig(fmax=v["fmax"], max_steps=v["max_steps"], optimizer=a.optimizer, loss=a.loss,
                         relative=a.relative)
    t0 = time.perf_counter()
    g = run_grid(model, [s], v["eps"], v["seeds"], attacks=specs, config=cfg)
    wall = time.perf_counter() - t0
    info = {"spec": a.structure, "source": atoms.info.get("jaxcert_source"), "formula": atoms.get_chemical_formula(),
            "n_atoms": len(atoms), "repeats": list(atoms.info.get("supercell", (1, 1, 1))),
            "min_length_A": atoms.info.get("min_length_A", v["min_length"]),
            "cell_lengths_A": np.linalg.norm(atoms.get_cell().array, axis=1).tolist(),
            "rattle_A": v["rattle"], "rattle_seed": v["rattle_seed"]}
    report = AttackReport.from_grid(g, model.name, structure=info, wall_s=wall, extra_config={
        "rattle": v["rattle"], "rattle_seed": v["rattle_seed"], "min_length": v["min_length"],
        "random_start": bool(a.random_start)})
    first = report.first_relaxation[0]
    print(f"{model.name} on {info['formula']} ({len(atoms)} atoms, {info['source']}); first relaxation: "
          f"{first['steps']} steps, converged={first['converged']}")
    print(report.table())
    if a.json:
        report.write_json(a.json)
        print(f"wrote {a.json}")
    return 0


#: ``jaxcert sweep`` settings: TOML key → built-in default (a flag given on the command line wins over the TOML
#: file, which wins over these).  ``[config]`` in the TOML file holds PipelineConfig fields.
_SWEEP_DEFAULTS: dict[str, Any] = {
    "model": None, "defect": [], "dtype": "float64", "structures": "mp2d", "attacks": "fgsm,ifgsm,pgd",
    "epsilons": "0.001,0.002,0.003,0.004,0.005,0.01,0.02,0.03,0.04,0.05,0.1,0.2,0.3,0.4,0.5,1,2,3,4,5,10",
    "seeds": "42,43,44,45,46", "n_steps": 10, "alpha_ratio": None, "random_start": False, "min_length": None,
    "db": None, "chunk": 4, "max_chunks": None, "dry_run": False, "executor": "local", "scheduler": None,
    "export": None, "plots": None, "contour": None, "json": None, "quiet": False,
}
_SWEEP_FLAGS = {"attacks": "attack", "epsilons": "eps", "seeds": "seed"}  # TOML key → argparse dest where different
_SWEEP_CONFIG = ("fmax", "max_steps", "optimizer", "loss", "relative", "distinct_keys")
_SWEEP_PATHS = ("db", "export", "plots", "contour", "json")
_SWEEP_BOOLS = ("random_start", "dry_run", "quiet")


def _flag_name(key: str) -> str:
    return "--" + _SWEEP_FLAGS.get(key, key).replace("_", "-")


def _sweep_settings(a: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any], dict[str, str]]:
    """Merge command-line flags, the optional TOML file and defaults.

    Returns (settings, PipelineConfig fields, names) where ``names[key]`` is how a message names the setting: the
    flag (``--eps``) when it came from the command line, ``sweep.toml: epsilons`` when from the TOML file.
    """
    doc: dict[str, Any] = {}
    base = "."
    toml = None
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
        toml = os.path.basename(a.config)
        unknown = set(doc) - set(_SWEEP_DEFAULTS) - {"config"}
        if unknown:
            raise InputError(f"jaxcert sweep: {a.config}: unknown key(s) {sorted(unknown)}; allowed: "
                             f"{', '.join(sorted(_SWEEP_DEFAULTS))} and a [config] table")
        if not isinstance(doc.get("config", {}), dict):
            raise InputError(f"{toml}: config: got {doc['config']!r}; allowed: a [config] table")
        bad = set(doc.get("config", {})) - set(_SWEEP_CONFIG)
        if bad:
            raise InputError(f"jaxcert sweep: {a.config}: unknown [config] key(s) {sorted(bad)}; allowed: "
                             f"{', '.join(_SWEEP_CONFIG)}")
    out: dict[str, Any] = {}
    names: dict[str, str] = {}
    for key, default in _SWEEP_DEFAULTS.items():
        flag = getattr(a, _SWEEP_FLAGS.get(key, key), None)
        names[key] = _flag_name(key)
        if flag is not None and flag != []:
            out[key] = flag
        elif key in doc:
            out[key] = doc[key]
            names[key] = f"{toml}: {key}"
            if key in _SWEEP_PATHS and isinstance(doc[key], str) and not os.path.isabs(doc[key]):
                out[key] = os.path.join(base, doc[key])  # relative to the TOML file
        else:
            out[key] = default
    cfg = dict(doc.get("config", {}))
    for key in _SWEEP_CONFIG:
        names[f"config.{key}"] = f"{toml}: [config] {key}"
        flag = getattr(a, key, None)
        if flag is not None and flag is not False:
            cfg[key] = flag
            names[f"config.{key}"] = _flag_name(key)
    out["_base"] = base
    if out["model"] is None:
        raise InputError("jaxcert sweep: no model: give --model or 'model = ...' in the TOML file")
    if out["db"] is None:
        raise InputError("jaxcert sweep: no store: give --db or 'db = ...' in the TOML file")
    return out, cfg, names


def _boolean(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise InputError(f"{name}: got {value!r}; allowed: true or false")
    return value


def _text(name: str, value: Any, *, optional: bool = True) -> Any:
    if (value is None and optional) or isinstance(value, str):
        return value
    raise InputError(f"{name}: got {value!r}; allowed: a string")


def _check_sweep(st: dict[str, Any], cfg: dict[str, Any], names: dict[str, str]) -> None:
    """Check every sweep setting, from the flags or the TOML file, before any computation (in place)."""
    n = names
    _text(n["model"], st["model"], optional=False)
    st["dtype"] = inputs.choice(n["dtype"], st["dtype"], ("float64", "float32"))
    st["epsilons"] = _unique_or_fail(n["epsilons"], inputs.number_list(n["epsilons"], st["epsilons"], unit=_EPS_UNIT))
    st["seeds"] = inputs.integer_list(n["seeds"], st["seeds"], seeds=True)
    st["n_steps"] = inputs.integer(n["n_steps"], st["n_steps"], minimum=1)
    if st["alpha_ratio"] is not None:
        st["alpha_ratio"] = inputs.positive(n["alpha_ratio"], st["alpha_ratio"])
    st["chunk"] = inputs.integer(n["chunk"], st["chunk"], minimum=1)
    if st["max_chunks"] is not None:
        st["max_chunks"] = inputs.integer(n["max_chunks"], st["max_chunks"], minimum=1)
    if st["min_length"] is not None:
        st["min_length"] = inputs.non_negative(n["min_length"], st["min_length"], "Å")
    st["executor"] = inputs.choice(n["executor"], st["executor"], ("local", "dask"))
    for key in _SWEEP_BOOLS:
        _boolean(n[key], st[key])
    for key in (*_SWEEP_PATHS, "scheduler"):
        _text(n[key], st[key])
    if not isinstance(st["structures"], (str, list)) or not all(isinstance(x, str) for x in _split(st["structures"])):
        raise InputError(f"{n['structures']}: got {st['structures']!r}; allowed: set names, crystal labels, element "
                         "symbols or files, comma-separated or a list of strings")
    if not _split(st["structures"]):
        raise InputError(f"{n['structures']}: got {st['structures']!r}; allowed: a non-empty list of structures")
    checks = {"fmax": lambda k, x: inputs.positive(k, x, "eV/Å"),
              "max_steps": lambda k, x: inputs.integer(k, x, minimum=1),
              "optimizer": lambda k, x: inputs.choice(k, x, OPTIMIZERS),
              "loss": lambda k, x: inputs.choice(k, x, ("energy", "force_norm")),
              "relative": _boolean, "distinct_keys": _boolean}
    for key, value in list(cfg.items()):
        cfg[key] = checks[key](names[f"config.{key}"], value)


def _sweep_attacks(x: Any, n_steps: int, alpha_ratio: float | None, random_start: bool, name: str) -> tuple:
    """Attack specs from names (``"fgsm,ifgsm,pgd"`` or a list) or TOML tables ``{name, n_steps, alpha_ratio,
    random_start}``; every value checked, messages naming ``name``."""

    specs = []
    for item in _split(x):
        if isinstance(item, dict):
            extra = set(item) - {"name", "n_steps", "alpha_ratio", "random_start"}
            if extra or "name" not in item:
                raise InputError(f"{name}: an attack table needs 'name' and may set n_steps, alpha_ratio, "
                                 f"random_start; got {sorted(item)}")
            kind = inputs.choice(f"{name}: name", item["name"], ATTACK_NAMES)
            steps = inputs.integer(f"{name}: {kind}.n_steps", item.get("n_steps", 1 if kind == "fgsm" else n_steps),
                                   minimum=1)
            ratio = item.get("alpha_ratio")
            if ratio is not None:
                ratio = inputs.positive(f"{name}: {kind}.alpha_ratio", ratio)
            rs = _boolean(f"{name}: {kind}.random_start", item.get("random_start", random_start and kind != "pgd"))
            specs.append(AttackSpec(kind, steps, ratio, None if (kind == "pgd" and rs) else (rs or None)))
        else:
            kind = inputs.choice(name, item, ATTACK_NAMES)
            specs.append(AttackSpec(kind, 1 if kind == "fgsm" else n_steps, alpha_ratio if kind == "pgd" else None,
                                    True if (random_start and kind != "pgd") else None))
    if not specs:
        raise InputError(f"{name}: got {x!r}; allowed: fgsm, ifgsm, pgd (a comma-separated list or attack tables)")
    return tuple(specs)


def _sweep_structures(st: dict[str, Any], name: str) -> dict[str, Any]:
    """label → ``ase.Atoms`` (with provenance in ``info``): set names, crystal labels, files, element symbols."""

    spec = ",".join(_split(st["structures"]))
    try:
        labels = crystals.resolve(spec)
    except KeyError as err:
        raise InputError(f"{name}: {err.args[0]}") from None
    known = crystals.table()
    out = {}
    for lab in labels:
        if lab in known:
            atoms = crystals.build(lab)
            atoms.info.update({"jaxcert_source": f"jaxcert.attacks.crystals.build({lab!r})", "supercell": (1, 1, 1)})
        else:
            atoms = _load_structure(f"{name} {lab!r}", lab, st["min_length"], base=st["_base"])
        out[lab] = atoms
    return out


def _sweep_summary(rows: list[dict[str, Any]]) -> None:
    """One warning line per kind over the sweep's stored rows (stderr)."""
    if not rows:
        return
    n = len(rows)
    still = [r for r in rows if r.get("stationary_start") and r.get("random_start") == "none"]
    big = [r for r in rows if r.get("epsilon_exceeds_half_cell")]
    bad = [r for r in rows if r.get("nonfinite")]
    if still:
        labels = sorted({r["structure"] for r in still})
        print(f"warning: {len(still)} of {n} runs started at a stationary point (the attack gradient at the reference "
              f"is below its tolerance, e.g. {', '.join(labels[:3])}), and FGSM/I-FGSM without a random start moved "
              "nothing there or followed round-off; rerun with --random-start", file=sys.stderr)
    if big:
        labels = sorted({r["structure"] for r in big})
        print(f"warning: {len(big)} of {n} runs have eps above half the smallest lattice vector (e.g. "
              f"{', '.join(labels[:3])}): atoms can be moved across the cell and into each other's periodic images "
              "(rows flagged epsilon_exceeds_half_cell)", file=sys.stderr)
    if bad:
        print(f"warning: {len(bad)} of {n} runs have non-finite energies or positions (rows flagged nonfinite)",
              file=sys.stderr)


def cmd_sweep(a: argparse.Namespace) -> int:
    """``jaxcert sweep [sweep.toml] [flags]``: resumable sweep into an SQLite store (+ NPZ arrays, export, plots)."""
    st, cfg_kw, names = _sweep_settings(a)
    _check_sweep(st, cfg_kw, names)
    specs = _sweep_attacks(st["attacks"], st["n_steps"], st["alpha_ratio"], st["random_start"], names["attacks"])
    atoms = _sweep_structures(st, names["structures"])
    dtype = set_dtype(st["dtype"])
    cfg = PipelineConfig(**cfg_kw)
    model = load_model(st["model"], [str(d) for d in _split(st["defect"])],
                       getattr(a, "max_batch", None))  # a memory budget only: not part of the run keys
    for x in atoms.values():  # the structure checks (distances, cell) before anything is computed
        Structure.from_ase(x, dtype=dtype)
    eps_max = max(st["epsilons"])
    over = []
    for lab, x in atoms.items():
        L = float(np.min(np.linalg.norm(x.get_cell().array, axis=1)))
        if any(x.get_pbc()) and (eps_max * (L if cfg.relative else 1.0)) > 0.5 * L:
            over.append(f"{lab} (L/2 = {0.5 * L:.3g} Å)")
    if over:
        print(f"warning: the largest eps exceeds half the smallest lattice vector of {len(over)} of {len(atoms)} "
              f"structure(s), e.g. {', '.join(over[:3])}: atoms can be moved across the cell and into each other; "
              "those runs are flagged epsilon_exceeds_half_cell", file=sys.stderr)
    store = Store(st["db"])
    progress = None if st["quiet"] else SweepProgress()
    try:
        # ase.Atoms, so that the rows record how each structure was built and an element cell's tag enters the keys
        counts = sweep(model, atoms, st["epsilons"], st["seeds"], attacks=specs, config=cfg, store=store,
                       chunk=st["chunk"], max_chunks=st["max_chunks"], dry_run=st["dry_run"], progress=progress,
                       dtype=dtype, executor=st["executor"], scheduler=st["scheduler"])
    except ImportError as err:
        raise InputError(f"jaxcert sweep: {err}") from None
    finally:
        if progress is not None:
            progress.close()
    print(f"{st['db']}: {counts}")
    mine = [r for r in store.rows(model=model.name, dtype=st["dtype"]) if r["structure"] in atoms]
    _sweep_summary(mine)
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

        built = {lab: {"source": x.info.get("jaxcert_source"), "formula": x.get_chemical_formula(),
                       "n_atoms": len(x), "repeats": list(x.info.get("supercell", (1, 1, 1)))}
                 for lab, x in atoms.items()}
        with open(st["json"], "w") as fh:
            json.dump(to_jsonable({"schema": "jaxcert-sweep/1", "counts": counts, "config": vars(cfg),
                                   "structures": list(atoms), "structure_info": built,
                                   "runs": store.rows()}), fh, indent=2, allow_nan=False)
        print(f"wrote {st['json']}")
    return 0


def _plot_rows(rows: list, out: str, contour: str | None, metrics: str | None = None) -> list:

    doc = None
    if contour:
        with open(contour) as fh:
            doc = json.load(fh)
        doc = doc if isinstance(doc, list) else [doc]
    chosen = plots.PLOT_METRICS if not metrics else tuple(str(m) for m in _split(metrics))
    return plots.write_plots(rows, out, metrics=chosen, contour=doc)


def cmd_plot_sweep(a: argparse.Namespace) -> int:
    """``jaxcert plot-sweep DB --out DIR``: metric-vs-ε figures of a sweep store."""
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
    """Add this module's subcommands to the ``jaxcert`` parser (numbers are taken as text and checked by
    :mod:`jaxcert.inputs`, so a bad one gets one line naming it; docs/attacks.md §8)."""
    at = sub.add_parser("attack", help="relax -> adversarial attack -> relax, immediate and post-relaxation metrics")
    model_args(at)
    at.add_argument("--structure", required=True, help="a structure file, or an element symbol: its conventional "
                    "cell (ase.build.bulk cubic=True where possible) repeated to --min-length")
    at.add_argument("--min-length", default=None, metavar="A", help="repeat the cell until every lattice vector is at "
                    "least this long in A (default 8 for an element symbol; a file is repeated only when given; "
                    "0 = no repeat)")
    at.add_argument("--attack", default="pgd", help="fgsm, ifgsm, pgd or a comma-separated list (default pgd)")
    at.add_argument("--random-start", action="store_true", help="fgsm/ifgsm: R+FGSM random start (a random +-eps/2 "
                    "sign step seeded by --seed, then eps/2 along the gradient sign); pgd always starts at random")
    at.add_argument("--eps", default="0.05", help="epsilon in A, > 0 (comma-separated list allowed; default 0.05)")
    at.add_argument("--relative", action="store_true", help="--eps is a fraction of the minimum lattice length")
    at.add_argument("--seed", default="42", help="seed(s) of the random starts, integers in [0, 2^31-1], "
                    "comma-separated (default 42)")
    at.add_argument("--n-steps", default="10", help="attack steps for ifgsm/pgd, an integer >= 1 (default 10)")
    at.add_argument("--alpha-ratio", default=None, help="pgd step alpha/eps, > 0 (default 0.1)")
    at.add_argument("--loss", default="energy", choices=["energy", "force_norm"], help="objective ascended")
    at.add_argument("--fmax", default="0.01", help="relaxation threshold in eV/A, > 0 (default 0.01)")
    at.add_argument("--max-steps", default="300", help="relaxation step limit, an integer >= 1 (default 300)")
    at.add_argument("--optimizer", default="fire", choices=list(OPTIMIZERS))
    at.add_argument("--rattle", default="0", help="Gaussian rattle of the input in A, >= 0 (default 0)")
    at.add_argument("--rattle-seed", default="0", help="seed of --rattle, an integer in [0, 2^31-1] (default 0)")
    at.set_defaults(fn=cmd_attack)
    sw = sub.add_parser("sweep", help="resumable relax-attack-relax sweep into an SQLite store",
                        description="Settings come from the flags, else from the optional TOML file (keys: "
                        + ", ".join(sorted(_SWEEP_DEFAULTS)) + "; a [config] table with " + ", ".join(_SWEEP_CONFIG)
                        + "), else from the defaults shown.")
    sw.add_argument("config", nargs="?", help="optional sweep.toml describing the grid (see description)")
    sw.add_argument("--model", help="registered name (see `jaxcert models`), module:attr, or a bridged model")
    sw.add_argument("--defect", action="append", default=[], metavar="NAME=STRENGTH", help="wrap the model in a defect")
    sw.add_argument("--dtype", help="float64 (default) or float32")
    sw.add_argument("--max-batch", metavar="N", help="evaluate at most N geometries at once (a memory budget; "
                    "results are unchanged, so it is not part of the run keys); 'none' lifts the model's own limit")
    sw.add_argument("--json", help="write the JSON report here")
    sw.add_argument("--structures", help="comma-separated set names (mp2d: the 20 rebuilt crystals of the study's 2D "
                    "set; sei: the 20 Li-C-O-H-P-F stand-ins; all: both), crystal labels, element symbols or files "
                    "(default mp2d)")
    sw.add_argument("--attack", help="comma-separated fgsm, ifgsm, pgd (default all three)")
    sw.add_argument("--eps", help="epsilon grid in A, each > 0 (default: the experiment's 21 values)")
    sw.add_argument("--relative", action="store_true", default=None,
                    help="--eps are fractions of the minimum lattice length")
    sw.add_argument("--seed", help="comma-separated seeds, integers in [0, 2^31-1] (default 42,43,44,45,46)")
    sw.add_argument("--n-steps", help="attack steps for ifgsm/pgd, an integer >= 1 (default 10)")
    sw.add_argument("--alpha-ratio", help="pgd step alpha/eps, > 0 (default 0.1)")
    sw.add_argument("--random-start", action="store_true", default=None, help="fgsm/ifgsm: R+FGSM random start "
                    "(+-eps/2 random sign step, then eps/2 along the gradient sign; seeded by each run's seed)")
    sw.add_argument("--min-length", metavar="A", help="repeat element cells (default 8 A) and, when given, files "
                    "until every lattice vector is at least this long")
    sw.add_argument("--fmax", help="relaxation threshold in eV/A, > 0 (default 0.01)")
    sw.add_argument("--max-steps", help="relaxation step limit, an integer >= 1 (default 300)")
    sw.add_argument("--optimizer", choices=list(OPTIMIZERS), help="relaxation optimizer (default fire)")
    sw.add_argument("--db", help="SQLite file (created or resumed); per-atom arrays go to <db>.arrays/")
    sw.add_argument("--chunk", help="structures per vmapped program / dask task, an integer >= 1 (default 4)")
    sw.add_argument("--max-chunks", help="stop after this many chunks, an integer >= 1 (rerun to resume)")
    sw.add_argument("--dry-run", action="store_true", default=None, help="count requested, stored and pending runs; "
                    "compute nothing")
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
