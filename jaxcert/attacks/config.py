"""``jaxcert attack`` / ``sweep`` / ``plot-sweep`` inputs, checked before any computation (docs/attacks.md §7, §8).

The bounds of every numeric argument, the structure arguments (a file or an element symbol), the attack lists,
the output files, and the sweep configuration (:class:`SweepConfig`: flags, then the TOML file, then defaults).
A bad value is an :class:`~jaxcert.core.inputs.InputError` naming the flag it came from, or ``sweep.toml: key`` when
it came from the TOML file.  The command line (:mod:`jaxcert.cli.attack`) only parses and calls these.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np

from jaxcert.attacks import crystals, metrics, plots
from jaxcert.attacks.pipeline import OPTIMIZERS, AttackSpec, PipelineConfig, check_attackable, check_relative
from jaxcert.attacks.sweep import Store, check_store
from jaxcert.core import inputs
from jaxcert.core.inputs import InputError
from jaxcert.core.structure import Structure

__all__ = ["ATTACK_NAMES", "MAX_STEPS", "MAX_RATTLE", "MAX_MIN_LENGTH", "MAX_EPS_A", "MAX_EPS_RELATIVE",
           "MAX_ALPHA_RATIO", "SWEEP_DEFAULTS", "SWEEP_CONFIG", "SweepConfig", "load_sweep_config",
           "read_sweep_toml", "check_attack_args", "load_structure", "check_outputs", "read_contour",
           "sweep_attacks", "sweep_structures", "check_sweep_outputs", "plot_metrics", "AttackInputs",
           "prepare_attack", "SweepInputs", "prepare_sweep", "half_cell_warning", "stored_rows"]

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


def load_structure(name: str, spec: str, min_length: float | None, *, base: str | None = None,
                    length_name: str = "--min-length"):
    """A structure argument as ``ase.Atoms`` with its provenance in ``info`` (docs/attacks.md §7).

    ``spec`` is a file (also looked up relative to ``base``, the TOML file's directory), read with
    :func:`jaxcert.core.inputs.read_atoms` and repeated only when ``min_length`` is given; or an element symbol,
    built by
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


def check_attack_args(a: Any) -> dict[str, Any]:
    """Check every argument of ``jaxcert attack`` (before any computation); the checked values by name.

    ``a`` has the attributes of the parsed command line (``attack``, ``eps``, ``seed``, ``n_steps``,
    ``alpha_ratio``, ``fmax``, ``max_steps``, ``rattle``, ``rattle_seed``, ``min_length``, ``relative``)."""
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


@dataclass(frozen=True)
class AttackInputs:
    """Everything ``jaxcert attack`` runs on, checked before any computation (:func:`prepare_attack`).

    ``atoms``: the structure (``ase.Atoms``, rattled when asked, provenance in ``info``); ``specs`` and
    ``pipeline``: what :func:`~jaxcert.attacks.run_grid` takes; ``eps``, ``seeds``: the grid;
    ``structure_info`` and ``extra_config``: what the :class:`~jaxcert.attacks.AttackReport` records of how the
    structure was built and of the settings :class:`~jaxcert.attacks.PipelineConfig` does not hold.
    """

    atoms: Any
    specs: tuple[AttackSpec, ...]
    pipeline: PipelineConfig
    eps: list[float]
    seeds: list[int]
    structure_info: dict[str, Any]
    extra_config: dict[str, Any]


def prepare_attack(a: Any) -> AttackInputs:
    """Check every argument of ``jaxcert attack`` and build its structure (docs/attacks.md §7, §8).

    ``a`` has the attributes of the parsed command line: those of :func:`check_attack_args` and ``structure``,
    ``dtype``, ``json``, ``optimizer``, ``loss``, ``random_start``.  The ``--json`` file is checked (not
    written); the model is not loaded.

    Raises:
      InputError: a bad argument, named by its flag.
    """
    v = check_attack_args(a)
    inputs.choice("--dtype", a.dtype, ("float64", "float32"))
    optimizer = inputs.choice("--optimizer", a.optimizer, OPTIMIZERS)
    loss = inputs.choice("--loss", a.loss, ("energy", "force_norm"))
    check_outputs([("--json", a.json)])
    atoms = load_structure("--structure", a.structure, v["min_length"])
    check_relative("--relative", atoms, bool(a.relative))
    if v["rattle"] > 0:
        atoms.rattle(v["rattle"], seed=v["rattle_seed"])
    random_start = bool(a.random_start)
    specs = tuple(AttackSpec(n, 1 if n == "fgsm" else v["n_steps"], v["alpha_ratio"] if n == "pgd" else None,
                             True if (random_start and n != "pgd") else None) for n in v["names"])
    pipeline = PipelineConfig(fmax=v["fmax"], max_steps=v["max_steps"], optimizer=optimizer, loss=loss,
                              relative=bool(a.relative))
    info = {"spec": a.structure, "source": atoms.info.get("jaxcert_source"),
            "formula": atoms.get_chemical_formula(), "n_atoms": len(atoms),
            "repeats": list(atoms.info.get("supercell", (1, 1, 1))),
            "min_length_A": atoms.info.get("min_length_A", v["min_length"]),
            "cell_lengths_A": np.linalg.norm(atoms.get_cell().array, axis=1).tolist(),
            "pbc": [bool(p) for p in atoms.get_pbc()], "rattle_A": v["rattle"], "rattle_seed": v["rattle_seed"]}
    extra = {"rattle": v["rattle"], "rattle_seed": v["rattle_seed"], "min_length": v["min_length"],
             "random_start": random_start}
    return AttackInputs(atoms, specs, pipeline, v["eps"], v["seeds"], info, extra)


def refuse_stationary_sign_attacks(model: Any, s: Structure, specs: Any, name: str = "--attack") -> None:
    """Refuse FGSM and I-FGSM without a random start on a stationary input (docs/attacks.md §6).

    When every movable force component of the input is below :func:`~jaxcert.attacks.attacks.grad_tolerance`
    (a relaxed high-symmetry crystal: the gradient vanishes by symmetry), the first relaxation stays there and
    sign(g) = 0, so the attack would move nothing and every metric would be 0.  That is an empty experiment,
    refused before any work with the reason and the two ways out; a structure that only becomes stationary
    during the first relaxation still gets the run's ``stationary_start`` warning.  PGD and the random-start
    variants are never refused.  One force evaluation of the input."""
    from jaxcert.attacks.attacks import grad_tolerance

    plain = sorted({sp.name for sp in specs if sp.name in ("fgsm", "ifgsm") and sp.start == "none"})
    if not plain:
        return
    forces = np.asarray(model.forces(s))[np.asarray(s.mask, bool)]
    tol = grad_tolerance(forces.dtype)
    if forces.size and np.all(np.isfinite(forces)) and float(np.max(np.abs(forces))) < tol:
        raise InputError(f"{name}: {', '.join(plain)} on a stationary point moves nothing: every force component of "
                         f"the input is below {tol:g} eV/Å (zero by symmetry), so sign(g) = 0; add --random-start "
                         "(R+FGSM: a random ±ε/2 sign step first) or use pgd (docs/attacks.md §6)")


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


def check_outputs(files: list[tuple[str, Any]]) -> None:
    """Every output file checked before any work (:func:`jaxcert.core.inputs.output_file`), and no two the same."""
    given = [(n, p) for n, p in files if p]
    inputs.distinct_outputs(given)
    for n, p in given:
        inputs.output_file(n, p)


def read_contour(name: str, path: Any) -> list | None:
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


def _unique_or_fail(name: str, values: list) -> list:
    dup = sorted({v for v in values if values.count(v) > 1})
    if dup:
        raise InputError(f"{name}: {dup} given more than once; each value must appear once")
    return values


#: ``jaxcert sweep`` settings: TOML key → built-in default (a flag given on the command line wins over the TOML
#: file, which wins over these).  ``[config]`` in the TOML file holds PipelineConfig fields.
SWEEP_DEFAULTS: dict[str, Any] = {
    "model": None, "defect": [], "dtype": "float64", "structures": "mp2d", "attacks": "fgsm,ifgsm,pgd",
    "epsilons": "0.001,0.002,0.003,0.004,0.005,0.01,0.02,0.03,0.04,0.05,0.1,0.2,0.3,0.4,0.5,1,2,3,4,5,10",
    "seeds": "42,43,44,45,46", "n_steps": 10, "alpha_ratio": None, "random_start": False, "min_length": None,
    "db": None, "chunk": 4, "max_chunks": None, "dry_run": False, "executor": "local", "scheduler": None,
    "export": None, "plots": None, "contour": None, "json": None, "quiet": False,
}
_SWEEP_FLAGS = {"attacks": "attack", "epsilons": "eps", "seeds": "seed"}  # TOML key → argparse dest where different
SWEEP_CONFIG = ("fmax", "max_steps", "optimizer", "loss", "relative", "distinct_keys")
_SWEEP_PATHS = ("db", "export", "plots", "contour", "json")
_SWEEP_BOOLS = ("random_start", "dry_run", "quiet")


def _flag_name(key: str) -> str:
    return "--" + _SWEEP_FLAGS.get(key, key).replace("_", "-")


def read_sweep_toml(path: str) -> dict[str, Any]:
    """The TOML file of ``jaxcert sweep`` as a dict (not yet checked); InputError for a missing or invalid file."""
    try:
        import tomllib
    except ImportError:  # Python 3.10
        try:
            import tomli as tomllib
        except ImportError:
            raise InputError("jaxcert sweep: a TOML file needs Python >= 3.11 (tomllib) or the tomli "
                             "package") from None
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise InputError(f"jaxcert sweep: no such TOML file: {path!r}") from None
    except tomllib.TOMLDecodeError as err:
        raise InputError(f"jaxcert sweep: {path}: invalid TOML: {err}") from None


@dataclass(frozen=True)
class SweepConfig:
    """Every ``jaxcert sweep`` setting, checked (docs/attacks.md §5, §8).

    ``settings``: TOML key → value (:data:`SWEEP_DEFAULTS` keys, plus ``_base``, the folder relative paths and
    structure files are resolved against); ``pipeline``: the :class:`~jaxcert.attacks.PipelineConfig` fields that
    were set (the ``[config]`` table or flags); ``names``: how a message names each setting, the flag (``--eps``)
    when it came from a flag, ``sweep.toml: epsilons`` when from the file (``config.KEY`` for pipeline fields).
    A flag given wins over the TOML file, which wins over :data:`SWEEP_DEFAULTS`.
    """

    settings: Mapping[str, Any]
    pipeline: Mapping[str, Any]
    names: Mapping[str, str]

    def __getitem__(self, key: str) -> Any:
        return self.settings[key]

    @classmethod
    def from_mapping(cls, doc: Mapping[str, Any] | None = None, flags: Mapping[str, Any] | None = None, *,
                     path: str | None = None) -> SweepConfig:
        """Merge ``flags`` (argparse dests → value, None or [] = not given), the TOML document ``doc`` (read from
        ``path``, which names it in messages and anchors its relative paths) and the defaults; check every value.

        Raises:
          InputError: an unknown key, a bad value (named by flag or TOML key), or no model / store.
        """
        doc = dict(doc or {})
        flags = dict(flags or {})
        label = path if path is not None else "sweep.toml"
        toml = os.path.basename(label)
        base = os.path.dirname(os.path.abspath(path)) if path is not None else "."
        unknown = set(doc) - set(SWEEP_DEFAULTS) - {"config"}
        if unknown:
            raise InputError(f"jaxcert sweep: {label}: unknown key(s) {sorted(unknown)}; allowed: "
                             f"{', '.join(sorted(SWEEP_DEFAULTS))} and a [config] table")
        if not isinstance(doc.get("config", {}), dict):
            raise InputError(f"{toml}: config: got {doc['config']!r}; allowed: a [config] table")
        bad = set(doc.get("config", {})) - set(SWEEP_CONFIG)
        if bad:
            raise InputError(f"jaxcert sweep: {label}: unknown [config] key(s) {sorted(bad)}; allowed: "
                             f"{', '.join(SWEEP_CONFIG)}")
        out: dict[str, Any] = {}
        names: dict[str, str] = {}
        for key, default in SWEEP_DEFAULTS.items():
            flag = flags.get(_SWEEP_FLAGS.get(key, key))
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
        for key in SWEEP_CONFIG:
            names[f"config.{key}"] = f"{toml}: [config] {key}"
            flag = flags.get(key)
            if flag is not None and flag is not False:
                cfg[key] = flag
                names[f"config.{key}"] = _flag_name(key)
        out["_base"] = base
        if out["model"] is None:
            raise InputError("jaxcert sweep: no model: give --model or 'model = ...' in the TOML file")
        if out["db"] is None:
            raise InputError("jaxcert sweep: no store: give --db or 'db = ...' in the TOML file")
        _check_sweep(out, cfg, names)
        sweep_attacks(out["attacks"], out["n_steps"], out["alpha_ratio"], out["random_start"], names["attacks"])
        return cls(MappingProxyType(out), MappingProxyType(cfg), MappingProxyType(names))


def load_sweep_config(path: str | None = None, flags: Mapping[str, Any] | None = None) -> SweepConfig:
    """:class:`SweepConfig` from the TOML file at ``path`` (optional) and ``flags``
    (:meth:`SweepConfig.from_mapping`)."""
    doc = read_sweep_toml(path) if path is not None else {}
    return SweepConfig.from_mapping(doc, flags, path=path)


def _boolean(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise InputError(f"{name}: got {value!r}; allowed: true or false")
    return value


def _text(name: str, value: Any, *, optional: bool = True) -> Any:
    if (value is None and optional) or isinstance(value, str):
        return value
    raise InputError(f"{name}: got {value!r}; allowed: a string")


def _check_sweep(st: dict[str, Any], cfg: dict[str, Any], names: Mapping[str, str]) -> None:
    """Check every sweep setting, from the flags or the TOML file, before any computation (in place)."""
    n = names
    _text(n["model"], st["model"], optional=False)
    if not isinstance(st["defect"], (str, list)):
        raise InputError(f"{n['defect']}: got {st['defect']!r}; allowed: NAME=STRENGTH defects, a string or a list")
    st["defect"] = [str(d) for d in inputs.split_list(n["defect"], st["defect"], what="NAME=STRENGTH defects")] \
        if st["defect"] else []
    st["dtype"] = inputs.choice(n["dtype"], st["dtype"], ("float64", "float32"))
    st["epsilons"] = inputs.number_list(n["epsilons"], st["epsilons"], unit=_EPS_UNIT)  # each once: _eps_bound
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


def sweep_attacks(x: Any, n_steps: int, alpha_ratio: float | None, random_start: bool, name: str) -> tuple:
    """Attack specs from names (``"fgsm,ifgsm,pgd"`` or a list) or TOML tables ``{name, n_steps, alpha_ratio,
    random_start}``; every value checked, messages naming ``name``."""

    specs = []
    if isinstance(x, str):  # the one list parser: ',' and '' name nothing and are refused
        x = inputs.name_list(name, x, ATTACK_NAMES, what="attacks")
    for item in inputs.split_list(name, x, what="attacks or attack tables"):
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


def sweep_structures(st: Mapping[str, Any], name: str, length: str = "--min-length") -> dict[str, Any]:
    """label → ``ase.Atoms`` (with provenance in ``info``): set names, crystal labels, files, element symbols."""

    try:
        labels = crystals.resolve(st["structures"])
    except KeyError as err:
        raise InputError(f"{name}: {err.args[0]}") from None
    known = crystals.table()
    out = {}
    for lab in labels:
        if lab in known:
            atoms = crystals.build(lab)
            atoms.info.update({"jaxcert_source": f"jaxcert.attacks.crystals.build({lab!r})", "supercell": (1, 1, 1)})
        else:
            atoms = load_structure(f"{name} {lab!r}", lab, st["min_length"], base=st["_base"], length_name=length)
        out[lab] = atoms
    return out


def check_sweep_outputs(st: Mapping[str, Any], names: Mapping[str, str]) -> list | None:
    """Check every output of a sweep before any work; returns the ``contour`` document (an input, read here).

    ``db``: a file path in an existing writable folder that is new, empty or a jaxcert store
    (:func:`jaxcert.attacks.sweep.check_store`; a foreign file is refused unchanged); ``<db>.arrays/``: a folder or
    a new one next to it (created only when runs will be computed); ``export``, ``json``: file paths in existing
    folders; ``plots``: a folder, existing or new inside an existing one (created here); no two files the same.
    """
    files = [(names[k], st[k]) for k in ("db", "export", "json")]
    check_outputs(files)
    check_store(st["db"], names["db"])
    arrays = st["db"] + ".arrays"
    if os.path.lexists(arrays) and not os.path.isdir(arrays):
        raise InputError(f"{names['db']}: the arrays folder {arrays!r} of this store exists and is not a directory; "
                         "allowed: a store whose <db>.arrays is a folder or does not exist yet")
    contour = read_contour(names["contour"], st["contour"])
    # folders last, so that a refusal above creates nothing
    if st["plots"]:
        inputs.output_dir(names["plots"], st["plots"])
    if not st["dry_run"]:
        inputs.output_dir(names["db"] + " (arrays folder)", arrays)
    return contour


@dataclass(frozen=True)
class SweepInputs:
    """What ``jaxcert sweep`` runs, checked before any computation (:func:`prepare_sweep`).

    ``specs``: the attacks; ``atoms``: label → ``ase.Atoms`` (provenance in ``info``, which enters the run keys);
    ``pipeline``: the relaxation settings; ``contour``: the ``contour`` document for the plots, or None;
    ``warnings``: what the user should know before the runs start (one line each).
    """

    specs: tuple[AttackSpec, ...]
    atoms: dict[str, Any]
    pipeline: PipelineConfig
    contour: list | None
    warnings: tuple[str, ...]


def prepare_sweep(conf: SweepConfig, dtype: Any) -> SweepInputs:
    """Build and check everything a sweep of ``conf`` needs but the model: attacks, structures (each converted to
    a :class:`~jaxcert.core.structure.Structure` of ``dtype`` once, so that a bad distance or cell is refused
    now), ε relative to the lattice only on fully periodic structures, then the outputs (last: it may create the
    plots and arrays folders, so a refusal above creates nothing).

    Raises:
      InputError: a bad setting, named as in ``conf.names``.
    """
    st, names = conf.settings, conf.names
    specs = sweep_attacks(st["attacks"], st["n_steps"], st["alpha_ratio"], st["random_start"], names["attacks"])
    atoms = sweep_structures(st, names["structures"], names["min_length"])
    pipeline = PipelineConfig(**conf.pipeline)
    for lab, x in atoms.items():
        check_relative(f"{names['config.relative']} ({lab!r})", x, pipeline.relative)
        Structure.from_ase(x, dtype=dtype)
    contour = check_sweep_outputs(st, names)
    note = half_cell_warning(atoms, max(st["epsilons"]), pipeline.relative)
    return SweepInputs(specs, atoms, pipeline, contour, () if note is None else (note,))


def half_cell_warning(atoms: Mapping[str, Any], eps_max: float, relative: bool) -> str | None:
    """A warning when the largest ε exceeds half the smallest periodic lattice vector of some structure (atoms can
    then be moved across the cell and into each other's images; such runs are flagged
    ``epsilon_exceeds_half_cell``), else None.  Non-periodic axes have no period and are not compared."""
    over = []
    for lab, x in atoms.items():
        pbc = np.asarray(x.get_pbc(), bool)
        if not pbc.any():
            continue
        length = float(np.min(np.linalg.norm(x.get_cell().array, axis=1)[pbc]))
        if eps_max * (length if relative else 1.0) > 0.5 * length:
            over.append(f"{lab} (L/2 = {0.5 * length:.3g} Å)")
    if not over:
        return None
    return (f"the largest eps exceeds half the smallest lattice vector of {len(over)} of {len(atoms)} structure(s), "
            f"e.g. {', '.join(over[:3])}: atoms can be moved across the cell and into each other; those runs are "
            "flagged epsilon_exceeds_half_cell")


def stored_rows(db: str, *, model: str | None = None, dtype: str | None = None, name: str = "DB") -> list:
    """The finished runs of an existing sweep store (``plot-sweep``), optionally of one model and dtype.  The store
    is opened only if it is a jaxcert store and never created.

    Raises:
      InputError: no such file, not a jaxcert store, a bad ``dtype``, or no finished run matches.
    """
    if not os.path.exists(db):
        raise InputError(f"{name}: no such store: {db!r}")
    if dtype:
        inputs.choice("--dtype", dtype, ("float64", "float32"))
    where = {k: v for k, v in (("model", model), ("dtype", dtype)) if v}
    rows = Store(db, name=name, create=False).rows(**where)
    if not rows:
        raise InputError(f"{name}: {db} has no finished runs" + (f" for {where}" if where else ""))
    return rows


def plot_metrics(name: str, value: Any, rows: list) -> tuple[str, ...]:
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
