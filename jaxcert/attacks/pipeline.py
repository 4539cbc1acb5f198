r"""Relax → attack → relax (docs/attacks.md §2), batched over structures × attacks × ε × seeds.

Per run (docs/attacks.md §2, "Sequence per run"):

1. relax the input at fixed cell to R_ref (the reference; FIRE by default, fmax
   0.01 eV/Å, 300 steps, both configurable and recorded);
2. attack R_ref, giving R_adv (the **immediate** stage);
3. relax R_adv with the same model and settings to R_fin (the **post-relaxation**
   stage).

The first relaxation depends only on the structure, so :func:`run_grid` does it
once per structure (the reference repeats it, deterministically, for every row)
and vmaps steps 2–3 over (attack, ε, seed).  Relaxations are ``lax.while_loop``
per structure, so under ``vmap`` each run keeps its own step count and an honest
``converged`` flag (max_i ‖F_i‖ < fmax; the reference reports success even at the
step limit, docs/attacks.md §2).

Reference optimiser: the study uses ASE LBFGS; jaxcert's pipeline defaults to
FIRE (ASE defaults, :func:`jaxcert.optim.relax.fire`) because it is O(N) and vmaps
cheaply; ``optimizer="lbfgs"`` selects the port of ASE's LBFGS (the study's steps,
:func:`jaxcert.optim.relax.lbfgs`) and ``optimizer="bfgs"`` the ASE-BFGS port (L-BFGS
above :data:`jaxcert.optim.relax.BFGS_MAX_ATOMS` atoms).  With FIRE, step counts differ
from the reference's LBFGS counts.

Neighbour lists (large cells): every relaxation and attack loop carries the
structure's Verlet list; the host drivers (:func:`run_grid`, :func:`relax_batch`,
:func:`relax_attack_relax`) read each run's overflow flag and, if a list
overflowed, enlarge it and run the whole call again
(:func:`jaxcert.core.neighbors.rerun_on_overflow`; a warning, and
``GridResult.neighbor_regrowths``).

Randomness: the PGD start of seed k uses ``PRNGKey(k)``; by default the same key
serves every structure, attack and ε, so the random pattern in units of ε is shared
across materials of equal N, as in the reference (docs/attacks.md §1.5).  With
``distinct_keys=True`` the key is ``fold_in``-ed with the structure, attack and ε
indices (docs/attacks.md §1.5, proposed).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxcert.attacks import losses as _losses
from jaxcert.attacks.attacks import SignRule, sign_attack, sign_rule_of
from jaxcert.attacks.attacks import run as _run_attack
from jaxcert.core import batching, inputs, neighbors
from jaxcert.core.model import Model
from jaxcert.core.structure import Structure, stack
from jaxcert.optim import relax as _relax_mod
from jaxcert.optim.relax import RelaxResult

#: The relaxers of the pipeline, by ``PipelineConfig.optimizer`` name: the fixed-cell relaxers of
#: :data:`jaxcert.optim.relax.FIXED_CELL_RELAXERS` (each ``f(model, s, fmax=, max_steps=)``).
RELAXERS = _relax_mod.FIXED_CELL_RELAXERS
OPTIMIZERS = tuple(RELAXERS)

__all__ = ["AttackSpec", "PipelineConfig", "Stage", "RunResult", "GridResult", "ATTACKS", "RELAXERS", "OPTIMIZERS",
           "attack_relax", "relax_attack_relax", "run_grid", "relax_batch", "check_attackable",
           "check_relative"]


@dataclasses.dataclass(frozen=True)
class AttackSpec:
    """One attack configuration (static), checked on construction (docs/attacks.md §8).

    Attributes:
      name: ``"fgsm"``, ``"ifgsm"`` or ``"pgd"``.
      n_steps: n, an integer ≥ 1 (FGSM: 1).
      alpha_ratio: α/ε, a finite number > 0 (FGSM 1, I-FGSM 1/n, PGD default 0.1 as the experiment); pgd only.
      random_start: ``None`` (the attack's own start: uniform for PGD, none for FGSM/I-FGSM) or ``True`` for
        FGSM/I-FGSM: the R+FGSM random sign start (±ε/2, then ε/2 along the gradient sign; docs/attacks.md §6).
        PGD always starts uniformly in the box, so ``False`` is refused for it.

    Raises:
      InputError (a ValueError) naming the field, the value and what is allowed.
    """

    name: str = "pgd"
    n_steps: int = 10
    alpha_ratio: float | None = None
    random_start: bool | None = None

    def __post_init__(self):
        inputs.choice("AttackSpec.name", self.name, ("fgsm", "ifgsm", "pgd"))
        object.__setattr__(self, "n_steps", inputs.integer("AttackSpec.n_steps", self.n_steps, minimum=1))
        if self.name == "fgsm" and self.n_steps != 1:
            raise inputs.InputError(f"AttackSpec.n_steps: got {self.n_steps} for fgsm; allowed: 1 (fgsm takes "
                                    "exactly one step; use ifgsm for n > 1)")
        if self.alpha_ratio is not None:
            if self.name != "pgd":
                raise inputs.InputError("AttackSpec.alpha_ratio: alpha is fixed for fgsm (ε) and ifgsm (ε/n); only "
                                        "pgd takes alpha_ratio (as the reference CLI)")
            object.__setattr__(self, "alpha_ratio", inputs.positive("AttackSpec.alpha_ratio", self.alpha_ratio))
        if self.random_start is not None:
            if not isinstance(self.random_start, (bool, np.bool_)):
                raise inputs.InputError(f"AttackSpec.random_start: got {self.random_start!r}; allowed: None, True "
                                        "or False")
            object.__setattr__(self, "random_start", bool(self.random_start))
            if self.name == "pgd" and not self.random_start:
                raise inputs.InputError("AttackSpec.random_start: got False for pgd; allowed: None or True (PGD "
                                        "always starts from a uniform random point of the ε box)")
            if self.name != "pgd" and not self.random_start:
                object.__setattr__(self, "random_start", None)  # False = the default: one spelling, one key

    @property
    def rule(self) -> SignRule:
        """α/ε, projection and start of this attack: :func:`jaxcert.attacks.attacks.sign_rule_of`, the
        definition :func:`~jaxcert.attacks.attacks.fgsm`, ``ifgsm`` and ``pgd`` use as well."""
        return sign_rule_of(self.name, self.n_steps, random_start=bool(self.random_start),
                            alpha_ratio=self.alpha_ratio)

    @property
    def sign_start(self) -> float:
        """β of the R+FGSM random sign start as a fraction of ε (0: none)."""
        return self.rule.sign_start

    @property
    def start(self) -> str:
        """How the attack starts: ``"uniform"`` (PGD), ``"sign"`` (R+FGSM random sign step) or ``"none"``."""
        return "uniform" if self.name == "pgd" else ("sign" if self.sign_start > 0 else "none")

    @property
    def alpha(self) -> float:
        """α/ε (with the R+FGSM start: (1 − β)/n): :func:`jaxcert.attacks.attacks.step_ratio`."""
        return self.rule.alpha_ratio

    @property
    def label(self) -> str:
        base = "FGSM" if self.name == "fgsm" else ("I-FGSM" if self.name == "ifgsm" else "PGD")
        return "R+" + base if self.sign_start > 0 else base


#: The experiment's three attacks at each ε (docs/attacks.md §5).
ATTACKS = (AttackSpec("fgsm", 1), AttackSpec("ifgsm", 10), AttackSpec("pgd", 10, 0.1))


@dataclasses.dataclass(frozen=True)
class PipelineConfig:
    """Static settings of the pipeline (recorded with every run).

    Attributes:
      fmax: convergence threshold max_i ‖F_i‖ < fmax in eV/Å (docs/attacks.md §2: 0.01).
      max_steps: relaxation step limit (300, the seed's value; the LiCOHPF config used 600).
      optimizer: ``"fire"`` (default), ``"lbfgs"`` or ``"bfgs"`` (:mod:`jaxcert.optim.relax`).
      loss: objective name, ``"energy"`` (the reference) or ``"force_norm"``.
      relative: ε is a fraction of the minimum lattice-vector length.
      distinct_keys: fold structure/attack/ε indices into the PGD key.

    Raises:
      InputError (a ValueError) on a non-finite or non-positive fmax, a max_steps that is not an integer ≥ 1, an
      unknown optimizer or loss (docs/attacks.md §8).
    """

    fmax: float = 0.01
    max_steps: int = 300
    optimizer: str = "fire"
    loss: str = "energy"
    relative: bool = False
    distinct_keys: bool = False

    def __post_init__(self):
        # checked and normalised (fmax a float, max_steps an int) so that equal settings hash equally
        object.__setattr__(self, "fmax", inputs.positive("PipelineConfig.fmax", self.fmax, "eV/Å"))
        object.__setattr__(self, "max_steps", inputs.integer("PipelineConfig.max_steps", self.max_steps, minimum=1))
        inputs.choice("PipelineConfig.optimizer", self.optimizer, OPTIMIZERS)
        inputs.choice("PipelineConfig.loss", self.loss, tuple(sorted(_losses._SINGLE)))
        for name in ("relative", "distinct_keys"):
            v = getattr(self, name)
            if not isinstance(v, (bool, np.bool_)):
                raise inputs.InputError(f"PipelineConfig.{name}: got {v!r}; allowed: true or false")
            object.__setattr__(self, name, bool(v))


class Stage(NamedTuple):
    """A structure with its model energy (eV) and forces (eV/Å).

    :class:`Stage`, :class:`RunResult` and :class:`GridResult` stay NamedTuples rather than
    :class:`~jaxcert.core.result.Result` dataclasses: they are the pytrees the jitted, vmapped grid returns.
    """

    structure: Structure
    energy: jax.Array
    forces: jax.Array


class RunResult(NamedTuple):
    """One attack-relax run from a reference (fields may carry batch axes).

    Attributes:
      adversarial: the immediate stage R_adv.
      final: the post-relaxation stage R_fin.
      steps, converged, fmax: of the second relaxation (fmax reached, eV/Å).
      epsilon: ε in Å; alpha: α in Å; small_grad_fraction, grad_max: the gradient at R_ref, see
        :mod:`jaxcert.attacks.attacks` (a fraction of 1 is a stationary start, docs/attacks.md §6).
    """

    adversarial: Stage
    final: Stage
    steps: jax.Array
    converged: jax.Array
    fmax: jax.Array
    epsilon: jax.Array
    alpha: jax.Array
    small_grad_fraction: jax.Array
    grad_max: jax.Array

    @property
    def status(self) -> jax.Array:
        """The second relaxation's :class:`~jaxcert.core.result.Status` code per run
        (:func:`jaxcert.optim.relax.status_code`: OK, NON_FINITE or NOT_CONVERGED)."""
        return _relax_mod.status_code(self.converged, self.fmax)


class GridResult(NamedTuple):
    """Batched pipeline output.

    Attributes:
      reference: Stage (S,) at R_ref; ref_steps, ref_converged, ref_fmax (S,) of the first relaxation.
      runs: RunResult with leading axes (S, A, E, K) = structures × attacks × ε × seeds.
      attacks, epsilons, seeds, config: the grid (host values; ``epsilons`` as requested, float64, while the
        runs used them cast to the structures' dtype, see ``runs.epsilon``).
      neighbor_regrowths: how many times a neighbour list overflowed and the grid was run again with a larger
        one (0 on the dense path; docs/architecture.md §2.3).
    """

    reference: Stage
    ref_steps: jax.Array
    ref_converged: jax.Array
    ref_fmax: jax.Array
    runs: RunResult
    attacks: tuple
    epsilons: np.ndarray
    seeds: np.ndarray
    config: PipelineConfig
    neighbor_regrowths: int = 0

    @property
    def ref_status(self) -> jax.Array:
        """The first relaxation's :class:`~jaxcert.core.result.Status` code per structure
        (:func:`jaxcert.optim.relax.status_code`)."""
        return _relax_mod.status_code(self.ref_converged, self.ref_fmax)


def _relax(model: Model, s: Structure, cfg: PipelineConfig) -> RelaxResult:
    """One relaxation with the pipeline's settings (:func:`jaxcert.optim.relax.relax`)."""
    return _relax_mod.relax(model, s, fmax=cfg.fmax, max_steps=cfg.max_steps, optimizer=cfg.optimizer)


def _stage(model: Model, s: Structure) -> Stage:
    E, F = model.energy_and_forces_of(model.params, s)
    return Stage(s, E, F)


def _loss(model: Model, cfg: PipelineConfig):
    return _losses.get(cfg.loss, model)


def attack_relax(model: Model, s_ref: Structure, eps: Any, key: Any, n_steps: Any, alpha_ratio: Any,
                 random_start: Any, project: Any, config: PipelineConfig = PipelineConfig(),
                 max_attack_steps: int | None = None, movable: Any = None, sign_start: Any = 0.0) -> RunResult:
    """Attack a (prepared) reference and relax the result; pure, jittable, vmappable in every array arg.

    ``random_start`` is PGD's uniform start, ``sign_start`` the R+FGSM sign step β (docs/attacks.md §6).  Values are
    not checked here (they may be traced); :func:`run_grid` checks them at the boundary.
    """
    attack = sign_attack(_loss(model, config), eps, jnp.asarray(eps) * alpha_ratio, n_steps,
                         random_start=random_start, sign_start=sign_start, project=project,
                         max_steps=max_attack_steps if max_attack_steps is not None else n_steps,
                         relative=config.relative, movable=movable)
    st = _run_attack(attack, s_ref, key)
    adv = st.structure
    rel = _relax(model, adv, config)
    return RunResult(_stage(model, adv), _stage(model, rel.structure), rel.steps, rel.converged, rel.fmax,
                     st.epsilon, st.alpha, st.small_grad_fraction, st.grad_max)


def _spec_arrays(attacks: Sequence[AttackSpec]):
    """(n, α/ε, uniform start, projection, β) per attack as host arrays, from each :attr:`AttackSpec.rule`."""
    rules = [a.rule for a in attacks]
    n = np.array([a.n_steps for a in attacks], np.int32)
    ratio = np.array([r.alpha_ratio for r in rules])
    rs = np.array([r.uniform_start for r in rules])
    proj = np.array([r.project for r in rules])
    sign = np.array([r.sign_start for r in rules])
    return n, ratio, rs, proj, sign


def _check_grid_args(epsilons: Any, seeds: Any) -> tuple[np.ndarray, np.ndarray]:
    """ε (finite, > 0) and seeds (integers in [0, 2³¹ − 1], each once) as host arrays, or InputError."""
    eps = inputs.number_list("epsilons", np.atleast_1d(np.asarray(epsilons, dtype=object)).tolist(), unit="Å")
    ks = inputs.integer_list("seeds", np.atleast_1d(np.asarray(seeds, dtype=object)).tolist(), seeds=True)
    return np.asarray(eps, np.float64), np.asarray(ks, np.int64)


def check_attackable(name: str, s: Any) -> None:
    """Refuse a structure whose every perturbation is a rigid translation: fewer than two real atoms
    (docs/attacks.md §7).  ``s`` is an ``ase.Atoms`` or a (possibly stacked) :class:`Structure`; ``name`` names it
    in the message."""
    if hasattr(s, "get_positions"):  # ase.Atoms
        counts, pbc = np.asarray([len(s)]), bool(np.any(s.get_pbc()))
    else:
        counts = np.asarray(s.mask).reshape(-1, np.asarray(s.mask).shape[-1]).sum(axis=-1)
        pbc = any(s.pbc)
    for i, n in enumerate(counts.tolist()):
        if n < 2:
            where = name if counts.size == 1 else f"{name}[{i}]"
            kind = "a periodic cell" if pbc else "a structure"
            raise inputs.InputError(
                f"{where}: {kind} with {n} atom has no relative degrees of freedom: every perturbation is a rigid "
                "translation, so the attack measures nothing; allowed: at least 2 atoms; give a supercell (e.g. "
                "ase Atoms.repeat, or --min-length for an element symbol)")


def check_relative(name: str, s: Any, relative: bool) -> None:
    """Refuse ε relative to the lattice (``relative=True``) on a structure that is not periodic along all three axes:
    L = min(|a|, |b|, |c|) is a lattice period only there (a molecule's cell may be zero or an arbitrary box).
    ``s`` is an ``ase.Atoms`` or a :class:`Structure`; ``name`` names the setting in the message."""
    if not relative:
        return
    pbc = tuple(bool(p) for p in (s.get_pbc() if hasattr(s, "get_pbc") else s.pbc))
    if not all(pbc):
        raise inputs.InputError(f"{name}: ε relative to the smallest lattice vector needs a structure periodic along "
                                f"all three axes, got pbc={list(pbc)} (a molecule, cluster or slab has no lattice "
                                "period along a non-periodic axis); allowed: absolute ε in Å (relative off)")


def relax_attack_relax(model: Model, s: Structure, spec: AttackSpec, eps: float, seed: int,
                       config: PipelineConfig = PipelineConfig()) -> tuple[RelaxResult, Stage, RunResult]:
    """One full run, unbatched (the looped reference for tests and small jobs); ``s`` prepared here."""
    eps_h, seed_h = _check_grid_args([eps], [seed])
    check_attackable("structure", s)
    check_relative("PipelineConfig.relative", s, config.relative)
    s = model.prepare(s)

    def run(t):
        out = _one_run(model, t, spec, jnp.asarray(eps_h[0], t.dtype), jnp.asarray(int(seed_h[0]), jnp.uint32), config)
        return out, _list_ok(out[0].structure, out[2].final.structure)

    return neighbors.rerun_on_overflow(run, s, "relax_attack_relax")[0]


def _list_ok(*structures: Structure) -> list:
    """The overflow flags (sticky ``ok``) of the lists the structures' loops carried."""
    return [neighbors.list_ok(x.neighbor_state) for x in structures]


@partial(jax.jit, static_argnames=("spec", "cfg"))
def _one_run(model, s, spec, eps, seed, cfg):
    ref = _relax(model, s, cfg)
    n, ratio, rs, proj, sign = (x[0] for x in _spec_arrays([spec]))
    run = attack_relax(model, ref.structure, eps, jax.random.PRNGKey(seed), int(n), float(ratio), bool(rs),
                       bool(proj), cfg, sign_start=float(sign))
    return ref, _stage(model, ref.structure), run


@partial(jax.jit, static_argnames=("cfg",))
def _relax_batch(model, s, cfg):
    ref = _relax_mod.relax_batch(model, s, optimizer=cfg.optimizer, fmax=cfg.fmax, max_steps=cfg.max_steps,
                                 max_batch=model.max_batch)
    return ref, batching.vmap(lambda x: _stage(model, x), model.max_batch)(ref.structure)


def relax_batch(model: Model, s: Structure, config: PipelineConfig = PipelineConfig()) -> tuple[RelaxResult, Stage]:
    """Relax a batched (stacked, prepared) structure: one vmapped program (rerun with a larger neighbour list
    if one overflowed)."""
    def run(t):
        out = _relax_batch(model, t, config)
        return out, _list_ok(out[0].structure)

    return neighbors.rerun_on_overflow(run, s, "relax_batch")[0]


@partial(jax.jit, static_argnames=("cfg", "max_n"))
def _grid(model, s_ref, eps, seeds, n, ratio, rs, proj, sign, cfg, max_n):
    keys = jax.vmap(jax.random.PRNGKey)(seeds)  # (K, 2)
    S, A, E = s_ref.positions.shape[0], n.shape[0], eps.shape[0]

    def one(s, i_s, i_a, i_e, key):
        if cfg.distinct_keys:
            key = jax.random.fold_in(jax.random.fold_in(jax.random.fold_in(key, i_s), i_a), i_e)
        return attack_relax(model, s, eps[i_e], key, n[i_a], ratio[i_a], rs[i_a], proj[i_a], cfg, max_n,
                            sign_start=sign[i_a])

    b = model.max_batch  # a memory budget: batches beyond it run in chunks (jaxcert.core.batching)
    f = batching.vmap(one, b, in_axes=(None, None, None, None, 0))  # seeds
    f = batching.vmap(f, b, in_axes=(None, None, None, 0, None))  # ε
    f = batching.vmap(f, b, in_axes=(None, None, 0, None, None))  # attacks
    f = batching.vmap(f, b, in_axes=(0, 0, None, None, None))  # structures
    return f(s_ref, jnp.arange(S), jnp.arange(A), jnp.arange(E), keys)


def run_grid(model: Model, structures: Structure | Sequence[Structure], epsilons: Any, seeds: Any = (42,),
             attacks: Sequence[AttackSpec] | AttackSpec = ATTACKS,
             config: PipelineConfig = PipelineConfig(), progress: Any = None) -> GridResult:
    """Relax each structure once, then attack and relax every (attack, ε, seed) in one vmapped program.

    Args:
      model: a JAX :class:`~jaxcert.Model`.
      structures: a list of structures (stacked with padding here) or an already stacked batch.
      epsilons: (E,) ε values in Å (fractions of L with ``config.relative``), each finite and > 0.
      seeds: (K,) integer seeds in [0, 2³¹ − 1], each once (PGD and R+FGSM random starts).
      attacks: attack specifications (default: the experiment's FGSM, I-FGSM n=10, PGD n=10 α=0.1ε).
      config: :class:`PipelineConfig`.
      progress: optional callback ``progress(phase)`` called as each phase starts: ``"relax"`` (the reference
        relaxations) and ``"attack + relax"`` (the attacks and second relaxations, one compiled program, so one
        phase).  With a callback the reference relaxation is waited for before the second phase is reported, so
        that the phases are timed honestly (the second phase needs its result anyway).

    Returns:
      :class:`GridResult`; ``runs`` has leading axes (S, A, E, K).

    Raises:
      InputError (a ValueError) before any computation on a bad ε or seed, an attack that is not an
      :class:`AttackSpec`, or a structure with fewer than two atoms (docs/attacks.md §7, §8).
    """
    if isinstance(structures, Structure) and structures.positions.ndim == 2:
        structures = [structures]
    if isinstance(attacks, AttackSpec):
        attacks = (attacks,)
    attacks = tuple(attacks)
    if not attacks or not all(isinstance(x, AttackSpec) for x in attacks):
        raise inputs.InputError(f"attacks: got {attacks!r}; allowed: a non-empty sequence of AttackSpec")
    if not isinstance(config, PipelineConfig):
        raise inputs.InputError(f"config: got {type(config).__name__}; allowed: a PipelineConfig")
    eps_host, seeds_np = _check_grid_args(epsilons, seeds)  # ε as requested (recorded unrounded)
    s = stack(list(structures)) if not isinstance(structures, Structure) else structures
    check_attackable("structures", s)
    check_relative("PipelineConfig.relative", s, config.relative)
    s = model.prepare(s)
    dt = s.dtype
    eps = jnp.asarray(eps_host, dt)
    n, ratio, rs, proj, sign = _spec_arrays(attacks)

    def run(t):
        if progress is not None:
            progress("relax")
        ref, ref_stage = _relax_batch(model, t, config)
        if progress is not None:
            jax.block_until_ready(ref_stage)
            progress("attack + relax")
        runs = _grid(model, ref.structure, eps, jnp.asarray(seeds_np, jnp.uint32), jnp.asarray(n),
                     jnp.asarray(ratio, dt), jnp.asarray(rs), jnp.asarray(proj), jnp.asarray(sign, dt), config,
                     int(n.max()))
        return (ref, ref_stage, runs), _list_ok(ref.structure, runs.final.structure)

    (ref, ref_stage, runs), _, regrown = neighbors.rerun_on_overflow(run, s, "run_grid")
    return GridResult(ref_stage, ref.steps, ref.converged, ref.fmax, runs, attacks, eps_host, seeds_np, config,
                      regrown)
