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
import math
import os
import sys
import time
from typing import Any

import numpy as np

from jaxcert import inputs
from jaxcert.attacks import AttackSpec, PipelineConfig, crystals, metrics, plots, run_grid
from jaxcert.attacks.pipeline import OPTIMIZERS, check_attackable, check_relative
from jaxcert.attacks.report import AttackReport
from jaxcert.attacks.sweep import Store, SweepProgress, check_store, sweep
from jaxcert.cli._common import load_model, model_args, set_dtype
from jaxcert.inputs import InputError
from jaxcert.progress import StepProgress
from jaxcert.report import to_jsonable
from jaxcert.structure import Structure

__all__ = ["cmd_attack", "cmd_sweep", "cmd_plot_sweep", "register"]

ATTACK_NAMES = ("fgsm", "ifgsm", "pgd")
#: What ``--eps`` allows, for the messages.
_EPS_UNIT = "Å, or a fraction of the smallest lattice vector with --relative"

#: Bounds of the numeric arguments (docs/attacks.md §8).  Step counts: the attack and relaxation loops count in
#: int32 (``lax.fori_loop`` / ``while_loop``), so more steps cannot be represented.
MAX_STEPS = 2**31 - 1
#: ``--rattle`` (Å): the standard deviation of ASE's Gaussian rattle of the input.  1 Å is already of the order of
#: half a bond length; beyond it atoms overlap or swap, and the "reference" relaxation starts from a different
#: structure rather than a perturbed one.
MAX_RATTLE = 1.0
#: ``--min-length`` (Å): an outer bound that keeps the repeat count finite; the real bound is the supercell size,
#: :data:`jaxcert.attacks.crystals.MAX_SUPERCELL_ATOMS` atoms, checked before the cell is built.
MAX_MIN_LENGTH = 1e6
#: ``--eps`` upper bounds: 100 Å absolute (ten times the experiment's largest ε), 10 as a fraction of the smallest
#: lattice vector with ``--relative``.  Beyond them positions stop being a perturbation and, at the extreme, they
#: overflow (``--eps 1e300`` on 4-atom Cu: numpy overflow warnings, and no result after 80 s).
MAX_EPS_A, MAX_EPS_RELATIVE = 100.0, 10.0
#: PGD's ``--alpha-ratio`` = α/ε: a step of 2ε crosses the whole box [−ε, ε], so every larger ratio gives
#: the same projected PGD run; larger values are refused rather than silently equal.
MAX_ALPHA_RATIO = 2.0


def _is_symbol(spec: str) -> bool:
    from ase.data import atomic_numbers

    return spec in atomic_numbers and spec != "X"


def _load_structure(name: str, spec: str, min_length: float | None, *, base: str | None = None,
                    length_name: str = "--min-length"):
    """A structure argument as ``ase.Atoms`` with its provenance in ``info`` (docs/attacks.md §7).

    ``spec`` is a file (also looked up relative to ``base``, the TOML file's directory), read with
    :func:`jaxcert.inputs.read_atoms` and repeated only when ``min_length`` is given; or an element symbol, built by
    :func:`jaxcert.attacks.crystals.element_cell` (``min_length`` default 8 Å).  A cell of fewer than two atoms is
    refused (every perturbation would be a rigid translation), and so is a repeat beyond
    :data:`jaxcert.attacks.crystals.MAX_SUPERCELL_ATOMS` atoms (named ``length_name``, before anything is tiled).
    A non-periodic structure (a molecule or cluster) is accepted: repeats apply to periodic axes only, and its
    ε% of the lattice is null (docs/attacks.md §1.7).
    """

    near = os.path.join(base, spec) if base is not None else None
    path = spec if os.path.exists(spec) else (near if near is not None and os.path.exists(near) else None)
    if path is not None:
        atoms = inputs.read_atoms(name, path)
        source = f"file {spec!r}"
        reps = (1, 1, 1) if min_length is None else crystals.repeats_for_length(atoms, min_length)
        try:
            crystals.check_supercell(atoms, reps, what=f"structure in {spec!r}")
        except crystals.SupercellTooLarge as err:
            raise InputError(f"{length_name}: got {min_length:g}; {err} (allowed: a length whose repeat stays within "
                             "the limit)") from None
        if reps != (1, 1, 1):
            atoms = atoms.repeat(reps)
            source += f" .repeat({reps})"
            atoms.info["jaxcert_key"] = f"repeat:{reps}"
        atoms.info.update({"jaxcert_source": source, "supercell": reps})
    elif _is_symbol(spec):
        length = crystals.ELEMENT_MIN_LENGTH if min_length is None else min_length
        try:
            atoms = crystals.element_cell(spec, length, max_atoms=crystals.MAX_SUPERCELL_ATOMS)
        except crystals.SupercellTooLarge as err:
            raise InputError(f"{length_name}: got {length:g}; {err} (allowed: a length whose repeat stays within "
                             "the limit)") from None
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
    names = inputs.name_list("--attack", a.attack, ATTACK_NAMES, what="attacks")
    out: dict[str, Any] = {
        "names": names,
        "eps": inputs.number_list("--eps", a.eps, unit=_EPS_UNIT),
        "seeds": inputs.integer_list("--seed", a.seed, seeds=True),
        "n_steps": _steps("--n-steps", a.n_steps),
        "alpha_ratio": None if a.alpha_ratio is None else _alpha_ratio("--alpha-ratio", a.alpha_ratio),
        "fmax": inputs.positive("--fmax", a.fmax, "eV/Å"),
        "max_steps": _steps("--max-steps", a.max_steps),
        "rattle": _bounded("--rattle", a.rattle, MAX_RATTLE, "Å"),
        "rattle_seed": inputs.seed("--rattle-seed", a.rattle_seed),
        "min_length": None if a.min_length is None else _bounded("--min-length", a.min_length, MAX_MIN_LENGTH, "Å"),
    }
    if out["alpha_ratio"] is not None and set(names) != {"pgd"}:
        raise InputError("--alpha-ratio applies to pgd only (fgsm steps eps, ifgsm eps/n), as in the reference CLI")
    _eps_bound("--eps", out["eps"], bool(a.relative))
    return out


def _eps_bound(name: str, values: list[float], relative: bool) -> list[float]:
    """Each ε at most :data:`MAX_EPS_A` Å (:data:`MAX_EPS_RELATIVE` with ``relative``), each once."""
    top = MAX_EPS_RELATIVE if relative else MAX_EPS_A
    over = [v for v in values if v > top]
    if over:
        unit = "as a fraction of the smallest lattice vector (--relative)" if relative else "Å"
        raise InputError(f"{name}: got {over[0]:g}; allowed: a finite number > 0 and <= {top:g} ({unit})")
    return _unique_or_fail(name, values)


def _steps(name: str, value: Any) -> int:
    """A step count: an integer in [1, :data:`MAX_STEPS`]."""
    return inputs.integer(name, value, minimum=1, maximum=MAX_STEPS)


def _alpha_ratio(name: str, value: Any) -> float:
    return inputs.positive(name, value, maximum=MAX_ALPHA_RATIO)


def _bounded(name: str, value: Any, maximum: float, unit: str) -> float:
    """A finite number in [0, maximum]."""
    x = inputs.non_negative(name, value, unit)
    if x > maximum:
        raise InputError(f"{name}: got {value!r}; allowed: a finite number >= 0 and <= {maximum:g} ({unit})")
    return x


def _outputs(files: list[tuple[str, Any]]) -> None:
    """Every output file checked before any work (:func:`jaxcert.inputs.output_file`), and no two the same."""
    given = [(n, p) for n, p in files if p]
    inputs.distinct_outputs(given)
    for n, p in given:
        inputs.output_file(n, p)


def _contour_doc(name: str, path: Any) -> list | None:
    """Read the ``--contour`` JSON up front: a list of contour results (or one), else InputError naming ``name``."""
    if not path:
        return None
    try:
        with open(path) as fh:
            doc = json.load(fh)
    except FileNotFoundError:
        raise InputError(f"{name}: no such file {path!r}") from None
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise InputError(f"{name}: cannot read {path!r} as JSON ({type(err).__name__}: {str(err)[:160]}); allowed: "
                         "a JSON list of jaxcert.attacks.contour results") from None
    doc = doc if isinstance(doc, list) else [doc]
    if not all(isinstance(d, dict) for d in doc):
        raise InputError(f"{name}: {path!r} is not a list of contour results (JSON objects); allowed: a JSON list of "
                         "jaxcert.attacks.contour results")
    return doc


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
    _outputs([("--json", a.json)])
    atoms = _load_structure("--structure", a.structure, v["min_length"])
    check_relative("--relative", atoms, bool(a.relative))
    if v["rattle"] > 0:
        atoms.rattle(v["rattle"], seed=v["rattle_seed"])
    dtype = set_dtype(a.dtype)
    model = load_model(a.model, a.defect, a.max_batch)
    s = Structure.from_ase(atoms, dtype=dtype)
    specs = tuple(AttackSpec(n, 1 if n == "fgsm" else v["n_steps"], v["alpha_ratio"] if n == "pgd" else None,
                             True if (a.random_start and n != "pgd") else None) for n in v["names"])
    cfg = PipelineConfig(fmax=v["fmax"], max_steps=v["max_steps"], optimizer=a.optimizer, loss=a.loss,
                         relative=a.relative)
    # progress per phase (stderr; a rich bar on a terminal, one line per phase otherwise): the attacks and the
    # second relaxations are one compiled program, so they are one phase
    progress = None if a.quiet else StepProgress(["relax", "attack + relax", "metrics"],
                                                 {"relax": 1.0, "attack + relax": 2.0, "metrics": 1.0},
                                                 label=f"attack {len(atoms)} atoms")
    phase = None if progress is None else (lambda name: progress(name, 0, 0, 0.0))
    t0 = time.perf_counter()
    try:
        g = run_grid(model, [s], v["eps"], v["seeds"], attacks=specs, config=cfg, progress=phase)
        wall = time.perf_counter() - t0
        if phase is not None:
            phase("metrics")
        info = _attack_info(a, atoms, v)
        report = AttackReport.from_grid(g, model.name, structure=info, wall_s=wall, extra_config={
            "rattle": v["rattle"], "rattle_seed": v["rattle_seed"], "min_length": v["min_length"],
            "random_start": bool(a.random_start)})
        if phase is not None:
            phase("done")
    finally:
        if progress is not None:
            progress.close()
    first = report.first_relaxation[0]
    print(f"{model.name} on {info['formula']} ({len(atoms)} atoms, {info['source']}); first relaxation: "
          f"{first['steps']} steps, converged={first['converged']}")
    print(report.table())
    if a.json:
        report.write_json(a.json)
        print(f"wrote {a.json}")
    return 0


def _attack_info(a: argparse.Namespace, atoms: Any, v: dict[str, Any]) -> dict[str, Any]:
    """``structure_info`` of the attack report: what was built and how."""
    return {"spec": a.structure, "source": atoms.info.get("jaxcert_source"), "formula": atoms.get_chemical_formula(),
            "n_atoms": len(atoms), "repeats": list(atoms.info.get("supercell", (1, 1, 1))),
            "min_length_A": atoms.info.get("min_length_A", v["min_length"]),
            "cell_lengths_A": np.linalg.norm(atoms.get_cell().array, axis=1).tolist(),
            "pbc": [bool(p) for p in atoms.get_pbc()],
            "rattle_A": v["rattle"], "rattle_seed": v["rattle_seed"]}


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
    st["n_steps"] = _steps(n["n_steps"], st["n_steps"])
    if st["alpha_ratio"] is not None:
        st["alpha_ratio"] = _alpha_ratio(n["alpha_ratio"], st["alpha_ratio"])
    st["chunk"] = inputs.integer(n["chunk"], st["chunk"], minimum=1)
    if st["max_chunks"] is not None:
        st["max_chunks"] = inputs.integer(n["max_chunks"], st["max_chunks"], minimum=1)
    if st["min_length"] is not None:
        st["min_length"] = _bounded(n["min_length"], st["min_length"], MAX_MIN_LENGTH, "Å")
    st["executor"] = inputs.choice(n["executor"], st["executor"], ("local", "dask"))
    for key in _SWEEP_BOOLS:
        _boolean(n[key], st[key])
    for key in (*_SWEEP_PATHS, "scheduler"):
        _text(n[key], st[key])
    if not isinstance(st["structures"], (str, list)) or not all(isinstance(x, str) for x in st["structures"]):
        raise InputError(f"{n['structures']}: got {st['structures']!r}; allowed: set names, crystal labels, element "
                         "symbols or files, comma-separated or a list of strings")
    st["structures"] = inputs.name_list(n["structures"], st["structures"],
                                        what="structures (set names, crystal labels, element symbols or files)")
    checks = {"fmax": lambda k, x: inputs.positive(k, x, "eV/Å"),
              "max_steps": _steps,
              "optimizer": lambda k, x: inputs.choice(k, x, OPTIMIZERS),
              "loss": lambda k, x: inputs.choice(k, x, ("energy", "force_norm")),
              "relative": _boolean, "distinct_keys": _boolean}
    for key, value in list(cfg.items()):
        cfg[key] = checks[key](names[f"config.{key}"], value)
    _eps_bound(n["epsilons"], st["epsilons"], bool(cfg.get("relative", False)))


def _sweep_attacks(x: Any, n_steps: int, alpha_ratio: float | None, random_start: bool, name: str) -> tuple:
    """Attack specs from names (``"fgsm,ifgsm,pgd"`` or a list) or TOML tables ``{name, n_steps, alpha_ratio,
    random_start}``; every value checked, messages naming ``name``."""

    specs = []
    if isinstance(x, str):  # the one list parser: ',' and '' name nothing and are refused
        x = inputs.name_list(name, x, ATTACK_NAMES, what="attacks")
    for item in _split(x):
        if isinstance(item, dict):
            extra = set(item) - {"name", "n_steps", "alpha_ratio", "random_start"}
            if extra or "name" not in item:
                raise InputError(f"{name}: an attack table needs 'name' and may set n_steps, alpha_ratio, "
                                 f"random_start; got {sorted(item)}")
            kind = inputs.choice(f"{name}: name", item["name"], ATTACK_NAMES)
            steps = _steps(f"{name}: {kind}.n_steps", item.get("n_steps", 1 if kind == "fgsm" else n_steps))
            ratio = item.get("alpha_ratio")
            if ratio is not None:
                ratio = _alpha_ratio(f"{name}: {kind}.alpha_ratio", ratio)
            rs = _boolean(f"{name}: {kind}.random_start", item.get("random_start", random_start and kind != "pgd"))
            specs.append(AttackSpec(kind, steps, ratio, None if (kind == "pgd" and rs) else (rs or None)))
        else:
            kind = inputs.choice(name, item, ATTACK_NAMES)
            specs.append(AttackSpec(kind, 1 if kind == "fgsm" else n_steps, alpha_ratio if kind == "pgd" else None,
                                    True if (random_start and kind != "pgd") else None))
    if not specs:
        raise InputError(f"{name}: got {x!r}; allowed: fgsm, ifgsm, pgd (a comma-separated list or attack tables)")
    return tuple(specs)


def _sweep_structures(st: dict[str, Any], name: str, length: str = "--min-length") -> dict[str, Any]:
    """label → ``ase.Atoms`` (with provenance in ``info``): set names, crystal labels, files, element symbols."""

    spec = ",".join(st["structures"])
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
            atoms = _load_structure(f"{name} {lab!r}", lab, st["min_length"], base=st["_base"], length_name=length)
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
    atoms = _sweep_structures(st, names["structures"], names["min_length"])
    if cfg_kw.get("relative"):
        for lab, x in atoms.items():
            check_relative(f"{names['config.relative']} ({lab!r})", x, True)
    contour = _sweep_outputs(st, names)  # after every input check: it may create the plots and arrays folders
    dtype = set_dtype(st["dtype"])
    cfg = PipelineConfig(**cfg_kw)
    model = load_model(st["model"], [str(d) for d in _split(st["defect"])],
                       getattr(a, "max_batch", None))  # a memory budget only: not part of the run keys
    for x in atoms.values():  # the structure checks (distances, cell) before anything is computed
        Structure.from_ase(x, dtype=dtype)
    eps_max = max(st["epsilons"])
    over = []
    for lab, x in atoms.items():
        pbc = np.asarray(x.get_pbc(), bool)
        if not pbc.any():
            continue
        L = float(np.min(np.linalg.norm(x.get_cell().array, axis=1)[pbc]))  # lattice periods: periodic axes only
        if (eps_max * (L if cfg.relative else 1.0)) > 0.5 * L:
            over.append(f"{lab} (L/2 = {0.5 * L:.3g} Å)")
    if over:
        print(f"warning: the largest eps exceeds half the smallest lattice vector of {len(over)} of {len(atoms)} "
              f"structure(s), e.g. {', '.join(over[:3])}: atoms can be moved across the cell and into each other; "
              "those runs are flagged epsilon_exceeds_half_cell", file=sys.stderr)
    store = Store(st["db"], name=names["db"])
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
        files = _plot_rows(store.rows(), st["plots"], contour)
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


def _sweep_outputs(st: dict[str, Any], names: dict[str, str]) -> list | None:
    """Check every output of a sweep before any work; returns the ``contour`` document (an input, read here).

    ``db``: a file path in an existing writable folder that is new, empty or a jaxcert store
    (:func:`jaxcert.attacks.sweep.check_store`; a foreign file is refused unchanged); ``<db>.arrays/``: a folder or
    a new one next to it (created only when runs will be computed); ``export``, ``json``: file paths in existing
    folders; ``plots``: a folder, existing or new inside an existing one (created here); no two files the same.
    """
    files = [(names[k], st[k]) for k in ("db", "export", "json")]
    _outputs(files)
    check_store(st["db"], names["db"])
    arrays = st["db"] + ".arrays"
    if os.path.lexists(arrays) and not os.path.isdir(arrays):
        raise InputError(f"{names['db']}: the arrays folder {arrays!r} of this store exists and is not a directory; "
                         "allowed: a store whose <db>.arrays is a folder or does not exist yet")
    contour = _contour_doc(names["contour"], st["contour"])
    # folders last, so that a refusal above creates nothing
    if st["plots"]:
        inputs.output_dir(names["plots"], st["plots"])
    if not st["dry_run"]:
        inputs.output_dir(names["db"] + " (arrays folder)", arrays)
    return contour


def _plot_metrics(name: str, value: Any, rows: list) -> tuple[str, ...]:
    """``--metrics``: dotted metric paths, each present as a number in some row (each names its figure file)."""
    import re

    if not value:
        return plots.PLOT_METRICS
    chosen = inputs.name_list(name, value, what="metrics")
    bad = [m for m in chosen if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)*", m)
           or not any(math.isfinite(metrics.value(r, m)) for r in rows)]
    if bad:
        raise InputError(f"{name}: no finite values of {', '.join(map(repr, bad))} in the selected rows; allowed: "
                         f"dotted metric paths of the stored rows, e.g. {', '.join(plots.PLOT_METRICS[:3])}")
    return tuple(chosen)


def _plot_rows(rows: list, out: str, contour: list | None, metrics: tuple[str, ...] = plots.PLOT_METRICS) -> list:
    return plots.write_plots(rows, out, metrics=metrics, contour=contour)


def cmd_plot_sweep(a: argparse.Namespace) -> int:
    """``jaxcert plot-sweep DB --out DIR``: metric-vs-ε figures of a sweep store (opened only if it is a jaxcert
    store; never created)."""
    if not os.path.exists(a.db):
        raise InputError(f"DB: no such store: {a.db!r}")
    contour = _contour_doc("--contour", a.contour)
    if a.dtype:
        inputs.choice("--dtype", a.dtype, ("float64", "float32"))
    store = Store(a.db, name="DB", create=False)
    where = {k: v for k, v in (("model", a.model), ("dtype", a.dtype)) if v}
    rows = store.rows(**where)
    if not rows:
        raise InputError(f"DB: {a.db} has no finished runs" + (f" for {where}" if where else ""))
    chosen = _plot_metrics("--metrics", a.metrics, rows)
    inputs.output_dir("--out", a.out)
    files = _plot_rows(rows, a.out, contour, chosen)
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
    at.add_argument("--quiet", action="store_true", help="no progress display (phases on stderr)")
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
