r"""Sign-gradient coordinate attacks as ``(init, update)`` pairs of pure functions.

Notation (docs/attacks.md §1.1): positions R ∈ ℝ^{N×3} in Å, the cell fixed, J(R) the
objective (eV for the energy; :mod:`jaxcert.attacks.losses`), g = ∂J/∂R at fixed
cell, ε the budget in Å, α the step in Å, n the number of steps.  The bound is the
per-coordinate L∞ box around the start R₀,

.. math::  B_ε(R_0) = \{R : |R_{ik} - R_{0,ik}| \le ε\}, \qquad
           Π_ε(R) = R_0 + \operatorname{clip}(R - R_0, -ε, ε),

(Π_ε is the exact Euclidean projection onto the box).  Every attack iterates

.. math::  R_{t+1} = Π_ε\big(R_t + α\,\operatorname{sign}(g(R_t))\big), \qquad t = 0 … n-1,

with ``sign(0) = 0``:

* :func:`fgsm` — one step, α = ε, no projection, no random start unless asked for
  (R+FGSM, below) (Goodfellow, Shlens & Szegedy, ICLR 2015): every coordinate with a non-zero
  gradient moves by exactly ±ε, so an atom moves by ε√3 (docs/attacks.md §1.3).
* :func:`ifgsm` — n steps of α = ε/n (Kurakin, Goodfellow & Bengio, ICLR
  workshop 2017; docs/attacks.md §1.4), projected after each step (a no-op in exact
  arithmetic; it removes the last-ulp overshoot of n·(ε/n)).
* :func:`pgd` — uniform random start R⁽⁰⁾ = R₀ + U, U_ik ~ U[−ε, ε] keyed by
  ``key`` (drawn in float32 and cast, so the pattern does not depend on the
  dtype), then n projected steps of α (default 0.1 ε, the experiment's
  ``alpha_ratio``) (Madry et al., ICLR 2018; docs/attacks.md §1.5).  Unlike the
  reference's ``main`` branch this PGD is implemented, and the projection is
  compulsory.

Fixes relative to the reference (docs/attacks.md §1.8): the objective is *ascended*
(the reference's default branch descends the energy), I-FGSM steps ε/n (not ε),
the box is L∞ per Cartesian coordinate (not per-atom L2).

Movable atoms: padding atoms (``s.mask`` False) and atoms outside the optional
``movable`` mask get g := 0 and no random start, so they never move
(docs/attacks.md §1.9, proposed).  Positions stay unwrapped Cartesian; the cell never
changes.

ε units: absolute Å by default.  With ``relative=True`` ε and α are fractions of
the minimum lattice-vector length L = min(|a|, |b|, |c|) of the input cell and are
converted to Å at ``init`` (ε_Å = ε·L; ε% = 100 ε_Å/L of docs/attacks.md §1.7).

Residual-force noise and stationary points (docs/attacks.md §1.8 item 7 and §6):
at a relaxed R₀ the sign of g is set by residual forces that can be numerical
noise, and at a symmetric minimum (relaxed diamond Si) g is zero by symmetry, so
sign(g) = 0 and FGSM/I-FGSM move nothing.  ``init`` records the fraction of
movable components with |g(R₀)| below the dtype's tolerance
:func:`grad_tolerance` (eV/Å for the energy loss) in ``small_grad_fraction`` and
max |g(R₀)| in ``grad_max``; a fraction of 1 marks a stationary start.
``grad_floor`` (off by default, as the reference) zeroes components with |g|
below it before taking the sign.

Random sign start (R+FGSM; Tramèr et al., "Ensemble Adversarial Training", ICLR
2018; docs/attacks.md §6): with ``sign_start = β`` (a fraction of ε, traced)
``init`` first takes a random sign step R⁽⁰⁾ = R₀ + βε·s, s_ik = ±1 with equal
probability keyed by ``key``, and the attack then steps from there; :func:`fgsm`
and :func:`ifgsm` with ``random_start=True`` use β = :data:`SIGN_START` = 1/2 and
spend the rest of the budget, (1 − β)ε, along the gradient sign (one step for
FGSM, n steps of (1 − β)ε/n for I-FGSM), projected onto B_ε, so every
coordinate still ends within ±ε of R₀.

All hyperparameters (ε, α, n, random start, projection) are array leaves of the
state, so one program vmaps over structures × ε × seeds × attacks: ``update`` is a
no-op once ``step ≥ n_steps`` and :func:`run` loops ``max_steps`` times.

The step as an optax chain (docs/attacks.md §1.10): ``update`` feeds the raw gradient
g = ∂J/∂R through one :class:`optax.GradientTransformation` built by
:func:`attack_transform` and adds the result with :func:`optax.apply_updates`:

.. math::  \text{mask} \to \text{ascent}\,(g \mapsto -g) \to [\text{zero\_below}] \to
           \text{rule} \to Π_ε \to \text{mask},

where the rule follows optax's descent convention (it is handed the gradient of −J
and returns an update to *add*).  The sign rule of FGSM, I-FGSM and PGD is
:func:`sign_rule` = ``chain(optax.scale_by_sign(), optax.scale_by_learning_rate(α))``,
so −α·sign(−g) = +α·sign(g) with sign(0) = 0 as before; :func:`project_linf` turns
the update u into Π_ε(R + u) − R; :func:`mask_atoms` zeroes the rows of padding and
fixed atoms.  Any optax optimizer can take the rule's place (:func:`optax_attack`,
or ``optimizer=`` of :func:`sign_attack`, :func:`ifgsm` and :func:`pgd`); its state
lives in ``AttackState.opt_state`` and the projection still applies.

Usage::

    attack = pgd(losses.energy(model), epsilon=0.05, n_steps=10)
    state = run(attack, model.prepare(s), key)          # or init + fori_loop(update)
    R_adv = state.structure.positions

    adam = optax_attack(losses.energy(model), optax.adam(1e-2), epsilon=0.05, n_steps=50)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from jaxcert.core import neighbors
from jaxcert.core.structure import Structure

__all__ = [
    "Attack", "AttackState", "sign_attack", "fgsm", "ifgsm", "pgd", "run", "min_lattice_length",
    "SMALL_GRAD", "SMALL_GRAD_F32", "SIGN_START", "PGD_ALPHA_RATIO", "grad_tolerance", "step_ratio", "is_projected",
    "SignRule", "sign_rule_of",
    "optax_attack", "attack_transform", "sign_rule", "ascent", "zero_below", "mask_atoms", "project_linf",
]

#: |g| below this counts as a noise-dominated component in ``small_grad_fraction`` in float64 (docs/attacks.md §1.8.7).
SMALL_GRAD = 1e-6
#: The same tolerance in float32: round-off alone leaves |g| up to ~2e-5 eV/Å on relaxed 64-atom diamond Si (SW),
#: so 1e-6 would call float32 noise a gradient; 1e-3 eV/Å is ~60x that noise and 10x below the default fmax.
SMALL_GRAD_F32 = 1e-3
#: β of the R+FGSM random sign start: a random ±βε step, then (1 − β)ε along the gradient sign (Tramèr et al. 2018).
SIGN_START = 0.5


def grad_tolerance(dtype: Any) -> float:
    """|g| below this is "zero" for the stationary-point test: :data:`SMALL_GRAD` (float64) or
    :data:`SMALL_GRAD_F32` (float32 and narrower); docs/attacks.md §6."""
    return SMALL_GRAD if jnp.finfo(dtype).bits >= 64 else SMALL_GRAD_F32


class AttackState(NamedTuple):
    """State of a sign-gradient attack (a pytree; every field may carry batch axes).

    Attributes:
      structure: current structure, positions R_t in Å (cell, numbers unchanged).
      origin: R₀ (N, 3) Å, the centre of the box.
      epsilon: budget ε in Å.
      alpha: step α in Å of the sign rule (not used, and 0 for :func:`optax_attack`, where an optax optimizer sets
        the step).
      n_steps: steps this attack takes (int).
      project: whether Π_ε is applied after each step (bool).
      step: steps taken so far (int).
      movable: (N,) bool, atoms allowed to move (padding excluded).
      small_grad_fraction: fraction of movable components with |g(R₀)| < :func:`grad_tolerance`; 1 at a
        stationary start.
      grad_max: max over movable components of |g(R₀)| (eV/Å for the energy loss).
      opt_state: state of the step's optax chain (:func:`attack_transform`): empty (no leaves) for the sign rule,
        the optimizer's state (e.g. Adam's moments) when an optax optimizer is the rule.
    """

    structure: Structure
    origin: jax.Array
    epsilon: jax.Array
    alpha: jax.Array
    n_steps: jax.Array
    project: jax.Array
    step: jax.Array
    movable: jax.Array
    small_grad_fraction: jax.Array
    grad_max: jax.Array
    opt_state: Any = ()


class Attack(NamedTuple):
    """``init(s, key=None) -> AttackState``, ``update(state) -> AttackState``; ``max_steps`` static loop length."""

    init: Callable[..., AttackState]
    update: Callable[[AttackState], AttackState]
    max_steps: int


def min_lattice_length(cell: jax.Array) -> jax.Array:
    """L = min(|a|, |b|, |c|) in Å (rows of ``cell``)."""
    return jnp.min(jnp.sqrt(jnp.sum(cell * cell, axis=-1)), axis=-1)


# ------------------------------------------------------------------------------------------------------------------
# The step rule as small optax gradient transformations.  Each acts on the (N, 3) update array (or any pytree of
# them); ``params`` is the current R (Å).  They close over arrays, so they may be built inside a traced function
# (``update`` rebuilds the chain from the state's leaves at every step; its structure never changes).
# ------------------------------------------------------------------------------------------------------------------


def ascent() -> optax.GradientTransformation:
    """g ↦ −g: hands a descent-convention optax rule the gradient of −J, so that adding its update *ascends* J."""
    return optax.scale(-1.0)


def zero_below(floor: float) -> optax.GradientTransformation:
    """Zero the components with |g| < ``floor`` (the ``grad_floor`` of docs/attacks.md §1.8.7); identity for
    ``floor <= 0`` (static)."""
    if not floor > 0.0:
        return optax.identity()

    def update_fn(updates, state, params=None):
        del params
        return jax.tree.map(lambda g: jnp.where(jnp.abs(g) < floor, jnp.zeros_like(g), g), updates), state

    return optax.GradientTransformation(optax.init_empty_state, update_fn)


def mask_atoms(movable: Any) -> optax.GradientTransformation:
    """Zero the rows (atoms) of the update where ``movable`` (N,) is False: padding and fixed atoms never move
    (docs/attacks.md §1.9)."""

    def update_fn(updates, state, params=None):
        del params
        mov = jnp.asarray(movable, bool)
        return jax.tree.map(lambda u: jnp.where(mov[:, None], u, jnp.zeros_like(u)), updates), state

    return optax.GradientTransformation(optax.init_empty_state, update_fn)


def project_linf(origin: Any, epsilon: Any, enabled: Any = True) -> optax.GradientTransformation:
    """Π_ε as an update: u ↦ Π_ε(R + u) − R, Π_ε(X) = R₀ + clip(X − R₀, −ε, ε), so that R + u lands in
    B_ε(R₀) (up to one rounding of the addition).  ``enabled`` (bool, may be traced) False passes u through.
    Needs ``params`` (the current R)."""

    def update_fn(updates, state, params=None):
        if params is None:
            raise ValueError("project_linf needs params (the current positions R) in update(updates, state, params)")

        def one(u, R, R0):
            P = R0 + jnp.clip(R + u - R0, -epsilon, epsilon)
            return jnp.where(enabled, P - R, u)

        return jax.tree.map(one, updates, params, origin), state

    return optax.GradientTransformation(optax.init_empty_state, update_fn)


def sign_rule(alpha: Any) -> optax.GradientTransformation:
    """The FGSM/I-FGSM/PGD step in optax's descent convention: u = −α·sign(g) (sign(0) = 0, ``jnp.sign``).
    Fed the gradient of −J (:func:`ascent`), it gives +α·sign(∂J/∂R)."""
    return optax.chain(optax.scale_by_sign(), optax.scale_by_learning_rate(alpha))


def attack_transform(rule: optax.GradientTransformation, *, origin: Any, epsilon: Any, movable: Any,
                     project: Any = True, grad_floor: float = 0.0) -> optax.GradientTransformation:
    """The whole step, fed g = ∂J/∂R (the gradient of the objective to *ascend*):
    ``chain(mask_atoms, ascent, zero_below(grad_floor), rule, project_linf, mask_atoms)``.

    ``rule`` is any optax optimizer or transformation in the usual descent convention (:func:`sign_rule`, or e.g.
    ``optax.adam(1e-2)``); apply the result with ``optax.apply_updates(R, u)``.  The first mask keeps padding and
    fixed atoms out of the rule's statistics, the last keeps them in place whatever the rule does (weight decay).
    """
    return optax.chain(
        mask_atoms(movable), ascent(), zero_below(grad_floor), rule,
        project_linf(origin, epsilon, project), mask_atoms(movable),
    )


def sign_attack(
    loss: Callable[[Structure], jax.Array],
    epsilon: Any,
    alpha: Any,
    n_steps: Any,
    *,
    random_start: Any = False,
    sign_start: Any = 0.0,
    project: Any = True,
    max_steps: int | None = None,
    relative: bool = False,
    movable: Any = None,
    descend: bool = False,
    grad_floor: float = 0.0,
    optimizer: optax.GradientTransformation | None = None,
) -> Attack:
    r"""The general sign-gradient attack R ← Π_ε(R + α sign ∂J/∂R) (module docstring).

    Args:
      loss: J(s) → scalar, ascended (``descend=True`` descends it).
      epsilon: ε in Å (or a fraction of L with ``relative``); may be traced.
      alpha: α in Å (or a fraction of L); may be traced.
      n_steps: n; may be traced when ``max_steps`` is given.
      random_start: uniform start in the box (may be traced; PGD).
      sign_start: β of the R+FGSM random sign start, a ±βε step before the first gradient step (a fraction of
        ε, 0 = off; may be traced; ignored where ``random_start`` is on).
      project: apply Π_ε after each step (may be traced).
      max_steps: static loop length for :func:`run` (default ``n_steps``).
      relative: ε and α are fractions of the minimum lattice-vector length.
      movable: optional (N,) bool mask of atoms allowed to move (and'ed with ``s.mask``).
      descend: descend J instead of ascending it.
      grad_floor: zero |g| components below this before the sign (0 = off, the reference).
      optimizer: an optax optimizer (descent convention, e.g. ``optax.adam(1e-2)``) used as the step rule in
        place of :func:`sign_rule` (α is then unused; its learning rate is in Å-per-unit-update and is *not*
        scaled by ``relative``).  Masking, ascent, ``grad_floor`` and the projection apply as for the sign rule.
    """
    if max_steps is None:
        max_steps = int(n_steps)
    sgn = -1.0 if descend else 1.0

    def raw_grad(s: Structure, R: jax.Array) -> jax.Array:
        return jax.grad(lambda X: sgn * loss(s.replace(positions=X)))(R)

    def transform(origin, eps, a, mov, proj) -> optax.GradientTransformation:
        rule = sign_rule(a) if optimizer is None else optimizer
        return attack_transform(rule, origin=origin, epsilon=eps, movable=mov, project=proj, grad_floor=grad_floor)

    def init(s: Structure, key: Any = None) -> AttackState:
        R0 = s.positions
        dt = R0.dtype
        scale = min_lattice_length(s.cell).astype(dt) if relative else jnp.asarray(1.0, dt)
        eps = jnp.asarray(epsilon, dt) * scale
        a = jnp.asarray(alpha, dt) * scale
        mov = s.mask if movable is None else s.mask & jnp.asarray(movable, bool)
        if key is None:
            key = jax.random.PRNGKey(0)
        # drawn in float32 whatever the dtype, so a float32 and a float64 run of one seed start from the same
        # pattern (as the reference, which draws with NumPy and casts): dtype agreement then measures round-off only
        U = jax.random.uniform(key, R0.shape, jnp.float32, minval=-1.0, maxval=1.0).astype(dt) * eps
        # R+FGSM: ±1 per coordinate (also drawn dtype-independently), scaled by βε
        S = jax.random.rademacher(key, R0.shape, jnp.float32).astype(dt) * (jnp.asarray(sign_start, dt) * eps)
        uniform = jnp.asarray(random_start, bool)
        U = jnp.where(uniform, U, jnp.where(jnp.asarray(sign_start, dt) > 0, S, 0.0))
        U = jnp.where(mov[:, None], U, 0.0)
        R = R0 + jnp.clip(U, -eps, eps)
        g0 = jnp.where(mov[:, None], raw_grad(s, R0), 0.0)
        n_mov = jnp.maximum(3 * jnp.sum(mov), 1).astype(dt)
        small = jnp.sum((jnp.abs(g0) < grad_tolerance(dt)) & mov[:, None]) / n_mov
        proj = jnp.asarray(project, bool)
        return AttackState(
            structure=neighbors.update(s.replace(positions=R)), origin=R0, epsilon=eps, alpha=a,
            n_steps=jnp.asarray(n_steps, jnp.int32), project=proj,
            step=jnp.asarray(0, jnp.int32), movable=mov, small_grad_fraction=small,
            grad_max=jnp.max(jnp.abs(g0)), opt_state=transform(R0, eps, a, mov, proj).init(R),
        )

    def update(state: AttackState) -> AttackState:
        s = state.structure
        R = s.positions
        tx = transform(state.origin, state.epsilon, state.alpha, state.movable, state.project)
        u, opt_state = tx.update(raw_grad(s, R), state.opt_state, R)
        Rn = optax.apply_updates(R, u)
        active = state.step < state.n_steps
        Rn = jnp.where(active, Rn, R)
        opt_state = jax.tree.map(lambda new, old: jnp.where(active, new, old), opt_state, state.opt_state)
        moved = neighbors.update(s.replace(positions=Rn))  # a Verlet list (large cells) is rebuilt when stale
        return state._replace(structure=moved, step=state.step + active.astype(jnp.int32), opt_state=opt_state)

    return Attack(init, update, int(max_steps))


#: α/ε of PGD when none is given (the experiment's ``alpha_ratio``; docs/attacks.md §1.5).
PGD_ALPHA_RATIO = 0.1


def step_ratio(name: str, n_steps: int, sign_start: float = 0.0, alpha_ratio: float | None = None) -> float:
    """α/ε of the named attack: the one definition of the step rule (host numbers; the pipeline's
    :class:`~jaxcert.attacks.pipeline.AttackSpec` and :func:`fgsm`, :func:`ifgsm`, :func:`pgd` all use it).

    FGSM: 1 − β; I-FGSM: (1 − β)/n (β = ``sign_start``, the R+FGSM sign step, 0 without it); PGD: ``alpha_ratio``
    (default :data:`PGD_ALPHA_RATIO`).
    """
    if name == "fgsm":
        return 1.0 - sign_start
    if name == "ifgsm":
        return (1.0 - sign_start) / n_steps
    if name == "pgd":
        return PGD_ALPHA_RATIO if alpha_ratio is None else float(alpha_ratio)
    raise ValueError(f"step_ratio: unknown attack {name!r}; allowed: fgsm, ifgsm, pgd")


def is_projected(name: str, sign_start: float = 0.0) -> bool:
    """Whether the named attack applies Π_ε after each step: I-FGSM and PGD always, FGSM only after an R+FGSM
    sign start (β > 0), where the sign step plus (1 − β)ε could otherwise leave the box."""
    return name != "fgsm" or sign_start > 0


class SignRule(NamedTuple):
    """Everything that tells FGSM, I-FGSM and PGD apart, as host numbers: the one definition the attack
    constructors (:func:`fgsm`, :func:`ifgsm`, :func:`pgd`) and the pipeline's
    :class:`~jaxcert.attacks.pipeline.AttackSpec` both read, so that a pipeline run and a direct call take the
    same steps.  The step itself is :func:`sign_rule` (optax) inside :func:`attack_transform`.

    Attributes:
      alpha_ratio: α/ε (:func:`step_ratio`).
      project: whether Π_ε follows each step (:func:`is_projected`).
      uniform_start: PGD's uniform random start in B_ε.
      sign_start: β of the R+FGSM random sign start (0: none).
    """

    alpha_ratio: float
    project: bool
    uniform_start: bool
    sign_start: float


def sign_rule_of(name: str, n_steps: int, *, random_start: bool = False, alpha_ratio: float | None = None
                 ) -> SignRule:
    """The :class:`SignRule` of the named attack (``"fgsm"``, ``"ifgsm"`` or ``"pgd"``) with ``n_steps`` steps.

    ``random_start``: for FGSM and I-FGSM the R+FGSM sign start (β = :data:`SIGN_START`); PGD always starts
    uniformly in the box, whatever it says.  ``alpha_ratio``: PGD's α/ε (default :data:`PGD_ALPHA_RATIO`).
    """
    beta = SIGN_START if (random_start and name != "pgd") else 0.0
    return SignRule(step_ratio(name, n_steps, beta, alpha_ratio), is_projected(name, beta), name == "pgd", beta)


def _from_rule(loss, epsilon: Any, n_steps: int, r: SignRule, alpha: Any = None, **kw: Any) -> Attack:
    """:func:`sign_attack` with the settings of ``r`` (α = ``alpha``, or α/ε·ε)."""
    a = jnp.asarray(epsilon) * r.alpha_ratio if alpha is None else alpha
    return sign_attack(loss, epsilon, a, n_steps, random_start=r.uniform_start, sign_start=r.sign_start,
                       project=r.project, **kw)


def fgsm(loss, epsilon: Any = 0.05, *, random_start: bool = False, **kw: Any) -> Attack:
    """FGSM: R_adv = R₀ + ε sign(g(R₀)); one step, no projection (docs/attacks.md §1.3).

    With ``random_start`` this is R+FGSM (Tramèr et al. 2018; docs/attacks.md): a random ±ε/2 sign step R',
    then R_adv = Π_ε(R' + (ε/2) sign(g(R'))), so the attack moves even where g(R₀) = 0.
    """
    return _from_rule(loss, epsilon, 1, sign_rule_of("fgsm", 1, random_start=random_start), **kw)


def ifgsm(loss, epsilon: Any = 0.05, n_steps: int = 10, *, random_start: bool = False, **kw: Any) -> Attack:
    """I-FGSM/BIM: n steps of ε/n, projected (docs/attacks.md §1.4; experiment n = 10).

    With ``random_start``: a random ±ε/2 sign step, then n projected steps of (ε/2)/n (docs/attacks.md).
    """
    return _from_rule(loss, epsilon, n_steps, sign_rule_of("ifgsm", n_steps, random_start=random_start), **kw)


def pgd(loss, epsilon: Any = 0.05, n_steps: int = 10, alpha: Any = None, alpha_ratio: float = PGD_ALPHA_RATIO,
        **kw: Any) -> Attack:
    """PGD: uniform random start in B_ε, n projected steps of α = ``alpha`` or ``alpha_ratio``·ε
    (docs/attacks.md §1.5; experiment n = 10, α = 0.1 ε)."""
    return _from_rule(loss, epsilon, n_steps, sign_rule_of("pgd", n_steps, alpha_ratio=alpha_ratio), alpha, **kw)


def optax_attack(loss, optimizer: optax.GradientTransformation, epsilon: Any = 0.05, n_steps: int = 10, *,
                 random_start: Any = False, **kw: Any) -> Attack:
    """An iterative attack whose step rule is any optax optimizer, projected onto B_ε after every step.

    ``optimizer`` is used in optax's usual (descent) convention, e.g. ``optax.adam(1e-2)``; the chain of
    :func:`attack_transform` hands it the gradient of −J, so adding its update ascends J.  ``random_start`` gives
    PGD's uniform start in the box.  Other keywords as :func:`sign_attack` (``movable``, ``relative`` (ε only: the
    learning rate stays in Å), ``descend``, ``grad_floor``, ``max_steps``).  ``state.opt_state`` holds the
    optimizer's state; ``state.alpha`` is 0 (unused).
    """
    return sign_attack(loss, epsilon, 0.0, n_steps, random_start=random_start, project=True, optimizer=optimizer,
                       **kw)


def run(attack: Attack, s: Structure, key: Any = None) -> AttackState:
    """``init`` then ``attack.max_steps`` updates in a ``fori_loop`` (jittable, vmappable)."""
    state = attack.init(s, key)
    return jax.lax.fori_loop(0, attack.max_steps, lambda i, st: attack.update(st), state)
