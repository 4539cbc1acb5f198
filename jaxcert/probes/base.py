r"""The probe contract (docs/architecture.md "Contracts", docs/probes.md §3).

A probe is a pure function

    probe(model, key, config=Config(), substrate=None) -> ProbeResult

* ``key``: a JAX PRNG key (keyword ``key`` positional second; probes without
  randomness ``del key``).
* ``config``: a frozen dataclass whose defaults are the paper's (cite them).
  Fields that set shapes (counts) are static Python ints; continuous knobs may be
  swept by building new configs.
* ``substrate``: a :class:`~jaxcert.Structure` (already built for the probe's kind),
  an element symbol (built with :mod:`jaxcert.probes.substrates` for the probe's kind,
  outside jit), or ``None`` (element ``"Ar"``, as the reference CLI).
* Returns :class:`ProbeResult`, a pytree of arrays only, so ``jax.jit(jax.vmap(
  partial(probe, model, config=cfg)))(keys, stacked_substrates)`` runs every
  element in one program.

Score map S(d; λ) = exp(−|d|/λ); a non-finite defect scores 0 and sets
``status = NONFINITE``.  A *skip* (decided statically, e.g. a non-periodic
substrate for a stress probe, or a model that declares no stress) is signalled by
raising :class:`ProbeSkip` with the reason *before* any tracing; the suite records
it (score NaN, excluded from aggregation).  A model that raises, or returns a
wrong shape or dtype, is never a skip: the exception propagates and the suite
records the probe as an error (score 0, gate False).  ``n_evals`` counts
model-evaluation equivalents (a forward pass, or a jvp/vjp costing about one) so
costs compare with the reference's "calls".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxcert.core.cache import register_storable
from jaxcert.core.geometry import is_concrete
from jaxcert.core.model import Model, ModelOutputError
from jaxcert.core.result import Status
from jaxcert.core.structure import Structure
from jaxcert.probes import substrates
from jaxcert.report.summary import NOT_RUN, UNSUPPORTED

__all__ = [
    "ProbeResult", "ProbeSkip", "ProbeSpec", "OK", "NONFINITE", "SKIPPED", "ERROR", "UNSUPPORTED", "NOT_RUN",
    "score_map", "finalize", "resolve_substrate", "require_atoms", "require_stress", "closest_pair", "bond_of",
    "precision_bits", "PROBES", "register", "NOT_PERIODIC", "NO_STRESS",
]

NOT_PERIODIC = "substrate is not periodic; stress is undefined"
NO_STRESS = "model does not expose a stress"

#: the integer codes a jitted probe carries (jaxcert.core.result.Status)
OK, NONFINITE, SKIPPED, ERROR = (s.code for s in (Status.OK, Status.NON_FINITE, Status.SKIPPED, Status.ERROR))
STATUS_NAMES = {s.code: s.value for s in Status}


class ProbeSkip(Exception):  # noqa: N818 - a signal, not an error
    """Raised (outside tracing) when a probe does not apply; the message is the reason."""


class ProbeResult(NamedTuple):
    """Result of one probe on one substrate (all leaves are arrays).

    Attributes:
      defect: raw defect d (the probe's own units, see its docstring).
      score: S ∈ [0, 1].
      gate: bool pass/fail (True for probes without a gate; see ``ProbeSpec.gated``).
      n_evals: model-evaluation equivalents used (int).
      status: OK / NONFINITE (int code; SKIPPED and ERROR are set by the suite).
      details: dict of small arrays worth reporting or plotting.
    """

    defect: jax.Array
    score: jax.Array
    gate: jax.Array
    n_evals: jax.Array
    status: jax.Array
    details: dict[str, Any]


def score_map(defect: jax.Array, scale: float | jax.Array) -> jax.Array:
    """S(d; λ) = exp(−|d|/λ), 0 for a non-finite d (docs/probes.md §3)."""
    d = jnp.abs(defect)
    return jnp.where(jnp.isfinite(d), jnp.exp(-d / scale), 0.0)


def finalize(
    defect: jax.Array,
    score: jax.Array,
    gate: jax.Array | bool,
    n_evals: int | jax.Array,
    details: dict[str, Any],
) -> ProbeResult:
    """Assemble a :class:`ProbeResult`; non-finite defect or score → score 0, gate False, NONFINITE."""
    defect = jnp.asarray(defect)
    score = jnp.asarray(score, defect.dtype)
    finite = jnp.isfinite(defect) & jnp.isfinite(score)
    return ProbeResult(
        defect=defect,
        score=jnp.where(finite, score, 0.0),
        gate=jnp.asarray(gate, bool) & finite,
        n_evals=jnp.asarray(n_evals, jnp.int32),
        status=jnp.where(finite, OK, NONFINITE).astype(jnp.int32),
        details=details,
    )


def require_atoms(s: Structure, n: int, probe: str, why: str) -> None:
    """Raise :class:`ProbeSkip` (before tracing) when ``s`` has fewer than ``n`` real atoms.

    The count is static: the padded size, or the real atoms when the mask is concrete."""
    count = s.positions.shape[-2]
    if is_concrete(s.mask) and s.mask.ndim == 1:
        count = int(np.sum(np.asarray(s.mask)))  # host-side: jnp would trace under an enclosing jit
    if count < n:
        raise ProbeSkip(f"{probe} needs at least {n} atoms ({why}); the substrate has {count}")


def closest_pair(s: Structure) -> jax.Array:
    """In-graph default bond (docs/probes.md §2.6): int32 (2,) = (i, j), i < j, real atoms only.

    The first pair in lexicographic double-loop order with the strictly smallest
    plain (non-minimum-image) distance; ``argmin`` over the row-major upper
    triangle of squared distances returns exactly that pair.  Works on traced
    structures (jit/vmap).
    """
    R = s.positions
    n = s.n_atoms
    d2 = jnp.sum((R[:, None, :] - R[None, :, :]) ** 2, axis=-1)
    upper = jnp.triu(jnp.ones((n, n), bool), k=1) & s.mask[:, None] & s.mask[None, :]
    k = jnp.argmin(jnp.where(upper, d2, jnp.inf).reshape(-1))
    return jnp.stack([k // n, k % n]).astype(jnp.int32)


def bond_of(s: Structure, bond: tuple[int, int] | None) -> jax.Array:
    """``bond`` as an int32 (2,) array, or the in-graph closest pair when ``None``."""
    if bond is None:
        return closest_pair(s)
    return jnp.asarray(bond, jnp.int32).reshape(2)


def precision_bits(s: Structure) -> int:
    """Float precision of the substrate in bits (32 or 64): the reference's ``precision`` as a number."""
    return int(np.dtype(s.positions.dtype).itemsize * 8)


#: (model id, structure signature) -> (model, None): the model's stress traces to a (3, 3) float array
#: (:func:`require_stress`); only a successful trace is kept, a failure is raised again by every stress probe
_STRESS_SHAPES: dict[Any, tuple[Model, None]] = {}


def require_stress(model: Model, s: Structure) -> None:
    """Static checks of the stress probes (docs/probes.md §4.2, §4.8, §4.9).

    A skip (:class:`ProbeSkip`) only where there is no stress to test: a non-periodic substrate, or a model
    that declares it has none (``model.has_stress(s)`` False, e.g. ``stress_available=False``).  Otherwise the
    stress output is traced abstractly (``jax.eval_shape``, no computation), once per (model, shape class), and
    whatever that raises (the model's own exception, :class:`~jaxcert.core.model.ModelOutputError` for a wrong
    shape or dtype, ``SystemExit``) propagates: the suite records it as the probe's error, never as "no
    stress" (the reference's ``has_stress`` read any exception as "no stress", so a crashing model passed).
    """
    if not s.periodic:
        raise ProbeSkip(NOT_PERIODIC)
    if not model.has_stress(s):
        raise ProbeSkip(NO_STRESS)
    sig = (id(model), jax.tree_util.tree_structure(s), tuple((x.shape, x.dtype) for x in jax.tree.leaves(s)))
    held, _ = _STRESS_SHAPES.get(sig, (None, None))
    if held is model:  # traced once per (model, shape class), not once per stress probe
        return
    out = jax.eval_shape(model.stress_of, model.params, s)  # raises ModelOutputError for a wrong shape or dtype
    if getattr(out, "shape", None) != (*s.positions.shape[:-2], 3, 3):  # Model.stress_of checks; a subclass may not
        raise ModelOutputError(f"model {model.name!r} stress returned {getattr(out, 'shape', type(out).__name__)}, "
                               "expected (3, 3)")
    if len(_STRESS_SHAPES) > 256:
        _STRESS_SHAPES.clear()
    _STRESS_SHAPES[sig] = (model, None)  # the model is held, so its id stays its own


def resolve_substrate(model: Model, substrate: Structure | str | None, kind: str, dtype: Any = None) -> Structure:
    """Structure for a probe: build from an element symbol if needed, then ``model.prepare``."""
    if substrate is None:
        substrate = "Ar"
    if not isinstance(substrate, Structure):
        substrate = substrates.make_substrate(substrate, kind)
        if not isinstance(substrate, Structure):
            substrate = Structure.from_ase(substrate, dtype=dtype)
    return model.prepare(substrate)


@dataclasses.dataclass(frozen=True)
class ProbeSpec:
    """Registry entry: the probe function and its static metadata (docs/probes.md §4.15)."""

    name: str
    fn: Callable[..., ProbeResult]
    config: type
    substrate: str  # "cluster" | "trimer" | "bulk" | "p2mm"
    target: float = 0.0
    gated: bool = True
    needs_stress: bool = False
    needs_pbc: bool = False
    #: part of ``probes="all"`` (the default run); False for an opt-in probe (run it by name)
    default: bool = True
    #: ``dtype -> {name: Structure}``: the probe runs on these named structures (one report row each)
    #: instead of one substrate per element (docs/probes.md §4.16)
    structures: Callable[[Any], dict[str, Structure]] | None = None
    #: ``plan(config, facts) -> stages`` (:mod:`jaxcert.probes.stages`): the suite runs the stages without the
    #: model and answers their requests with shared programs; ``None``: the suite runs ``fn`` as one program
    plan: Callable[..., Any] | None = None
    #: ``check(model, s, config)`` raises :class:`ProbeSkip` before anything runs (model-dependent skips)
    check: Callable[..., None] | None = None
    #: probes with the same stream get the same keys (``probe_key(seed, stream)``), so identical requests
    #: (e.g. the statistical-mechanics trajectory) are answered once; default: the probe's name
    stream: str | None = None


#: name -> ProbeSpec, filled by each probe module's ``register`` call.
PROBES: dict[str, ProbeSpec] = {}


def register(spec: ProbeSpec) -> ProbeSpec:
    PROBES[spec.name] = spec
    return spec

# the executable store and stored host values may rebuild these types (jaxcert/core/cache.py)
register_storable(ProbeResult, node=True)
