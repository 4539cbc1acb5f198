r"""Model: a potential as pure JAX functions plus parameters.

A user wraps any JAX function ``energy_fn(params, structure) -> E`` (eV) as

.. code-block:: python

    model = jaxcert.Model(energy_fn, params=params, name="mine", cutoff=5.0)

and optionally direct heads ``forces_fn(params, s) -> (n, 3)`` eV/Å and
``stress_fn(params, s) -> (3, 3)`` eV/Å³.  Without heads

.. math::  F = -\nabla_R E, \qquad
           \sigma = V^{-1}\, \partial E(\mathbb{F}R, h\mathbb{F}^T) / \partial\varepsilon \,\big|_{\varepsilon=0},
           \quad \mathbb{F} = I + \tfrac12(\varepsilon + \varepsilon^T),

which is ASE's sign convention (a compressed crystal, whose energy falls as it
expands, has negative σ); Voigt order xx yy zz yz xz xy.

The model is a pytree: ``params`` is the only leaf, functions and metadata are
static, so ``jax.jit(f)(model, s)`` and closures over ``model`` both work.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Callable, Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from ase.data import chemical_symbols

from jaxcert.core import inputs
from jaxcert.core.geometry import det3, is_concrete
from jaxcert.core.neighbors import (
    DENSE,
    EDGE_SKIN,
    SPARSE_MIN_ATOMS,
    CellListSpec,
    EdgeListSpec,
    auto_neighbors,
    check_image_memory,
    coverage,
    ensure_edge_list,
    image_counts,
    with_images,
)
from jaxcert.core.structure import Structure, StructureError, UnsupportedStructure

__all__ = ["Model", "ModelOutputError", "StressUnavailable", "UnsupportedElement", "UnsupportedStructure", "strain",
           "voigt", "from_voigt"]


#: set while the suite traces a model-free program (a probe's stage): the model must not be reached from it
_MODEL_FREE = threading.local()


class ModelInStage(RuntimeError):
    """A probe's stage reached for the model (docs/architecture.md "Kinds and stages"): stages see only the
    answers to their requests, so their programs can be shared by every model; this one cannot."""


@contextlib.contextmanager
def model_free() -> Iterator[None]:
    """Within the block (one thread), any call of a model's energy, forces or stress raises :class:`ModelInStage`."""
    before = getattr(_MODEL_FREE, "on", False)
    _MODEL_FREE.on = True
    try:
        yield
    finally:
        _MODEL_FREE.on = before


def _refuse_in_stage(model: Any) -> None:
    if getattr(_MODEL_FREE, "on", False):
        raise ModelInStage(f"a probe stage called model {model.name!r}: a stage must ask for model quantities "
                           "with requests (jaxcert.probes.kinds), never call the model")


class StressUnavailable(ValueError):
    """The stress is not defined for this structure/model (no pbc, or no stress head)."""


class UnsupportedElement(ValueError):
    """The model has no parameters for an element of the structure."""


class ModelOutputError(ValueError):
    """A model's energy, forces or stress came back with the wrong shape or dtype (or not as an array).

    Raised while the model is traced (shapes and dtypes are static), so the check costs nothing at run time;
    the message names the model, the output, what came back and what was expected.  The suite records it as
    the probe's error (docs/probes.md §6.2), never as a skip."""


def _output_shape(what: str, s: Structure) -> tuple[int, ...]:
    lead = tuple(s.positions.shape[:-2])  # a batched structure (leading axes) gives batched outputs
    return {"energy": lead, "forces": tuple(s.positions.shape), "stress": (*lead, 3, 3)}[what]


def _describe(shape: tuple[int, ...], what: str) -> str:
    if what == "energy" and not shape:
        return "a scalar"
    if what == "forces":
        return f"{shape} (one row of 3 per atom slot)"
    if what == "stress":
        return f"{shape} (the full 3x3 tensor; jaxcert.from_voigt converts a Voigt 6-vector)"
    return str(shape)


def _checked(model: Model, what: str, s: Structure, x: Any) -> jax.Array:
    """``x`` as an array if it is the model's ``what`` ("energy", "forces", "stress") for ``s``: the expected
    shape and a real floating dtype; otherwise :class:`ModelOutputError` (at trace time: static)."""
    head = {"energy": "energy", "forces": "forces_fn", "stress": "stress_fn"}[what]
    where = f"model {model.name!r} {head}"
    if isinstance(x, (float, int)) and not isinstance(x, bool):
        x = jnp.asarray(x)
    if not (hasattr(x, "shape") and hasattr(x, "dtype")):
        raise ModelOutputError(f"{where} returned a {type(x).__name__}, expected an array of shape "
                               f"{_describe(_output_shape(what, s), what)}")
    want = _output_shape(what, s)
    if tuple(x.shape) != want:
        raise ModelOutputError(f"{where} returned shape {tuple(x.shape)}, expected {_describe(want, what)}")
    if not jnp.issubdtype(x.dtype, jnp.floating):
        raise ModelOutputError(f"{where} returned dtype {x.dtype}, expected a real floating-point dtype "
                               "(float32 or float64)")
    return x


def is_unsupported_structure(err: BaseException) -> bool:
    """True for :class:`UnsupportedStructure`, also when re-raised through a JAX host callback."""
    return isinstance(err, UnsupportedStructure) or "UnsupportedStructure" in str(err)


def strain(s: Structure, eps: jax.Array) -> Structure:
    r"""Affinely strain ``s``: 𝔽 = I + ε (ε as given; symmetrise it yourself if needed).

    Every lattice vector a → 𝔽a (``cell @ 𝔽ᵀ``) and every position r → 𝔽r.
    """
    F = jnp.eye(3, dtype=s.positions.dtype) + eps
    return s.replace(positions=s.positions @ F.T, cell=s.cell @ F.T)


_VOIGT = ((0, 0), (1, 1), (2, 2), (1, 2), (0, 2), (0, 1))


def voigt(sigma: jax.Array) -> jax.Array:
    """(…, 3, 3) tensor → (…, 6) Voigt [xx, yy, zz, yz, xz, xy] (ASE order)."""
    return jnp.stack([sigma[..., a, b] for a, b in _VOIGT], axis=-1)


def from_voigt(v: jax.Array) -> jax.Array:
    """(…, 6) Voigt → symmetric (…, 3, 3) tensor."""
    xx, yy, zz, yz, xz, xy = (v[..., k] for k in range(6))
    return jnp.stack(
        [jnp.stack([xx, xy, xz], -1), jnp.stack([xy, yy, yz], -1), jnp.stack([xz, yz, zz], -1)], -2
    )


def _sym(eps: jax.Array) -> jax.Array:
    return 0.5 * (eps + jnp.swapaxes(eps, -1, -2))


@dataclasses.dataclass(frozen=True, eq=False)
class Model:
    """A potential: ``energy_fn(params, s)`` in eV, optional direct heads.

    Attributes:
      energy_fn: ``(params, Structure) -> scalar`` eV.
      forces_fn: optional direct force head ``(params, s) -> (n, 3)`` eV/Å.
      stress_fn: optional direct stress head ``(params, s) -> (3, 3)`` eV/Å³.
      params: pytree of parameters (the only traced field).
      name: label used in reports.
      cutoff: interaction range in Å, or a function of the (concrete) atomic
        numbers returning it; used to size periodic images (``prepare``).
      elements: supported atomic numbers, or ``None`` for any.
      info: free-form static metadata (source, units, reference).
      stress_available: False for a model that cannot give a stress even for a periodic
        cell (e.g. an ASE calculator without "stress"); stress probes then skip.
      max_batch: how many geometries the model may evaluate at once (a memory budget for large
        networks); batches beyond it run as chunked loops (:mod:`jaxcert.core.batching`).  ``None``
        (default): no limit, plain ``vmap``.
      edges: the energy takes a flat edge list (a graph network): :meth:`prepare` gives every concrete
        structure, of any size, periodic or not, an edge list within the cutoff plus a skin, padded to a
        bucket (:func:`jaxcert.core.neighbors.with_edge_list`) instead of rows of neighbour slots.
    """

    energy_fn: Callable[[Any, Structure], jax.Array]
    forces_fn: Callable[[Any, Structure], jax.Array] | None = None
    stress_fn: Callable[[Any, Structure], jax.Array] | None = None
    params: Any = None
    name: str = "model"
    cutoff: float | Callable[[np.ndarray], float] | None = None
    elements: tuple[int, ...] | None = None
    info: tuple[tuple[str, str], ...] = ()
    stress_available: bool = True
    max_batch: int | None = None
    edges: bool = False

    def replace(self, **changes: Any) -> Model:
        return dataclasses.replace(self, **changes)

    @property
    def conservative_forces(self) -> bool:
        """True when forces are −∇E (no direct force head)."""
        return self.forces_fn is None

    def has_stress(self, s: Structure) -> bool:
        """Static: is a stress defined for ``s`` (periodic) with this model?"""
        return s.periodic and self.stress_available

    def prepare(self, s: Structure, skin: float | None = None) -> Structure:
        """Validate elements, set the static image count and choose the neighbour path for the model's cutoff.

        Call outside ``jit`` (the bound conveniences and every jaxcert probe do).  Structures of at least
        :data:`jaxcert.core.neighbors.SPARSE_MIN_ATOMS` atom slots whose cell holds three search radii per periodic
        axis get an O(N) cell list (:func:`jaxcert.core.neighbors.auto_neighbors`); ``neighbor_list=DENSE`` keeps
        the dense path.  A graph network (``edges``) gets a flat edge list with a Verlet ``skin`` in Å (default
        :data:`jaxcert.core.neighbors.EDGE_SKIN`, for lists that loops reuse; a one-shot evaluation such as an
        ASE calculator's call passes :data:`jaxcert.core.neighbors.ONE_SHOT_SKIN` and pays for no extra slots).
        A no-op on traced structures that already carry ``images``.  A ``skin`` that is not a finite number ≥ 0
        raises :class:`jaxcert.core.inputs.InputError` naming it.
        """
        if skin is not None:
            skin = inputs.non_negative("skin", skin, "Å")
        if self.elements is not None and is_concrete(s.numbers):
            nums = np.asarray(s.numbers)[np.asarray(s.mask)]
            bad = sorted(set(nums.tolist()) - set(self.elements))
            if bad:
                names = ", ".join(f"{chemical_symbols[z]} (Z={z})" for z in bad)
                ok = ", ".join(chemical_symbols[z] for z in self.elements)
                raise UnsupportedElement(f"model {self.name!r} has no parameters for {names}; it supports {ok}")
        if self.edges:
            return self._prepare_edges(s, skin)
        if isinstance(s.neighbor_list, EdgeListSpec) and is_concrete(s.positions):  # a network's list: rows instead
            s = s.replace(neighbor_list=None, neighbor_state=None)
        need_images = s.periodic and s.images is None
        may_list = (s.neighbor_list != DENSE and s.n_atoms >= SPARSE_MIN_ATOMS and is_concrete(s.positions)
                    and is_concrete(s.numbers))
        if not (need_images or may_list):
            return s
        rc = self.cutoff_for(s)
        if rc is None:
            return s
        counted = s.periodic and s.images is None
        if counted:
            s = with_images(s, rc)
        s = auto_neighbors(s, rc)
        if counted and not isinstance(s.neighbor_list, CellListSpec):  # the dense path: its images must fit
            check_image_memory(s, rc, who=f"model {self.name!r}")  # TooManyImages (an InputError) before any work
        return s

    def _prepare_edges(self, s: Structure, skin: float | None = None) -> Structure:
        """A graph network's structure: a fresh edge list for a concrete one (kept if it is still fresh), the
        static image count of its search radius; a traced structure is returned as it is."""
        if not (is_concrete(s.positions) and is_concrete(s.cell) and is_concrete(s.numbers)):
            return s
        rc = self.cutoff_for(s)
        if rc is None:
            return s
        spec = s.neighbor_list
        if s.periodic and not isinstance(spec, EdgeListSpec):  # the images of a search must fit, before any work
            radius = float(rc) + EDGE_SKIN
            check_image_memory(s, radius, images=image_counts(s.cell, s.pbc, radius), who=f"model {self.name!r}")
        return ensure_edge_list(s, rc, skin)

    def cutoff_for(self, s: Structure) -> float | None:
        """The cutoff in Å for ``s`` (concrete numbers needed if it depends on them)."""
        if self.cutoff is None or not callable(self.cutoff):
            return self.cutoff
        if not is_concrete(s.numbers):
            raise StructureError(
                f"model {self.name!r} has a composition-dependent cutoff; call model.prepare(s) outside jit"
            )
        nums = np.asarray(s.numbers)[np.asarray(s.mask)]
        if nums.ndim == 0 or np.asarray(s.numbers).ndim > 1:  # batched: largest over the batch
            nb = np.asarray(s.numbers).reshape(-1, s.n_atoms)
            mb = np.asarray(s.mask).reshape(-1, s.n_atoms)
            return max(float(self.cutoff(z[m])) for z, m in zip(nb, mb, strict=True))
        return float(self.cutoff(nums))

    # ------------------------------------------------------------ raw (pure)
    def energy_of(self, params: Any, s: Structure) -> jax.Array:
        """E(params, s) in eV (pure; ``s`` must be prepared; NaN if its image count does not cover the cell)."""
        _refuse_in_stage(self)
        return _guard(s, _checked(self, "energy", s, self.energy_fn(params, s)))

    def forces_of(self, params: Any, s: Structure) -> jax.Array:
        """Force output in eV/Å: the direct head if present, else −∇E."""
        _refuse_in_stage(self)
        if self.forces_fn is not None:
            F = _guard(s, _checked(self, "forces", s, self.forces_fn(params, s)))
        else:
            F = _guard(s, -jax.grad(lambda R: self.energy_of(params, s.replace(positions=R)))(s.positions))
        return F * s.mask[..., None].astype(F.dtype)

    def energy_stress_of(self, params: Any, s: Structure) -> jax.Array:
        r"""σ = (1/V) ∂E/∂ε at ε = 0 from the energy (3, 3), eV/Å³, whatever the heads."""
        if not s.periodic:
            raise StressUnavailable("stress is undefined for a non-periodic structure (pbc all False)")
        zero = jnp.zeros((3, 3), s.positions.dtype)
        dE = jax.grad(lambda e: self.energy_of(params, strain(s, _sym(e))))(zero)
        return _guard(s, dE / jnp.abs(det3(s.cell)))

    def stress_of(self, params: Any, s: Structure) -> jax.Array:
        """Stress output (3, 3) in eV/Å³: the direct head if present, else from the energy."""
        _refuse_in_stage(self)
        if not s.periodic:
            raise StressUnavailable("stress is undefined for a non-periodic structure (pbc all False)")
        if not self.stress_available:
            raise StressUnavailable(f"model {self.name!r} has no stress output")
        if self.stress_fn is not None:
            return _guard(s, _checked(self, "stress", s, self.stress_fn(params, s)))
        return self.energy_stress_of(params, s)

    # -------------------------------------------------- bound conveniences
    # Bound conveniences are jitted (one compile per model, shape and static fields):
    # eager op-by-op dispatch compiles every primitive separately and is slow on CPU.
    def energy(self, s: Structure) -> jax.Array:
        """Energy in eV."""
        return _jit_energy(self, self.prepare(s))

    def forces(self, s: Structure) -> jax.Array:
        """Forces (n, 3) in eV/Å (direct head or −∇E); zero on padding atoms."""
        return _jit_forces(self, self.prepare(s))

    def stress(self, s: Structure) -> jax.Array:
        """Stress (3, 3) in eV/Å³, ASE sign; raises :class:`StressUnavailable` without pbc."""
        if not self.has_stress(s):
            self.stress_of(self.params, s)  # raises the precise StressUnavailable
        return _jit_stress(self, self.prepare(s))

    def stress_voigt(self, s: Structure) -> jax.Array:
        """Stress as Voigt (6,) [xx, yy, zz, yz, xz, xy] in eV/Å³ (ASE order)."""
        return voigt(self.stress(s))

    def energy_and_forces(self, s: Structure) -> tuple[jax.Array, jax.Array]:
        """(E eV, F eV/Å) with one backward pass when forces are conservative."""
        return _jit_energy_and_forces(self, self.prepare(s))

    def energy_forces_stress(self, s: Structure) -> tuple[jax.Array, jax.Array, jax.Array]:
        """(E eV, F eV/Å, σ (3, 3) eV/Å³) from one jitted call, with one reverse pass for a model without heads
        (:meth:`energy_forces_stress_of`); raises :class:`StressUnavailable` without pbc or stress."""
        if not self.has_stress(s):
            self.stress_of(self.params, s)  # raises the precise StressUnavailable
        return _jit_energy_forces_stress(self, self.prepare(s))

    def energy_forces_stress_of(self, params: Any, s: Structure) -> tuple[jax.Array, jax.Array, jax.Array]:
        r"""Pure (E, F, σ).  Without heads, one reverse pass of E(𝔽R, h𝔽ᵀ) with 𝔽 = I + sym(ε) over (R, ε) at
        ε = 0 gives both derivatives: ∂E/∂R (𝔽 = I there, so it is the force's −∇E) and ∂E/∂ε = Vσ
        (docs/probes.md §1.2), the same values the separate calls give, for the cost of one backward pass.
        With a head, the head is evaluated as it is (as :meth:`forces_of` and :meth:`stress_of`)."""
        if self.forces_fn is not None or self.stress_fn is not None:
            E, F = self.energy_and_forces_of(params, s)
            return E, F, self.stress_of(params, s)
        if not s.periodic:
            raise StressUnavailable("stress is undefined for a non-periodic structure (pbc all False)")
        if not self.stress_available:
            raise StressUnavailable(f"model {self.name!r} has no stress output")
        zero = jnp.zeros((3, 3), s.positions.dtype)

        def energy(R, eps):
            return self.energy_of(params, strain(s.replace(positions=R), _sym(eps)))

        E, (g, dE) = jax.value_and_grad(energy, argnums=(0, 1))(s.positions, zero)
        F = _guard(s, -g * s.mask[..., None].astype(g.dtype))
        return E, F, _guard(s, dE / jnp.abs(det3(s.cell)))

    def energy_and_forces_of(self, params: Any, s: Structure) -> tuple[jax.Array, jax.Array]:
        """Pure (E, F); one backward pass when forces are conservative."""
        if self.forces_fn is not None:
            return self.energy_of(params, s), self.forces_of(params, s)
        E, g = jax.value_and_grad(lambda R: self.energy_of(params, s.replace(positions=R)))(s.positions)
        return E, _guard(s, -g * s.mask[..., None].astype(g.dtype))

    def __repr__(self) -> str:
        heads = [h for h, f in (("forces", self.forces_fn), ("stress", self.stress_fn)) if f is not None]
        return f"Model({self.name!r}, cutoff={self.cutoff}, heads={heads or 'conservative'})"


jax.tree_util.register_dataclass(
    Model,
    data_fields=["params"],
    meta_fields=["energy_fn", "forces_fn", "stress_fn", "name", "cutoff", "elements", "info", "stress_available",
                 "max_batch", "edges"],
)


def _guard(s: Structure, x: jax.Array) -> jax.Array:
    """x·1, or NaN where the static periodic image count does not cover the (traced) cell.

    A product (not a select) so that every derivative of the output is NaN as well.
    """
    return x * jnp.where(coverage(s), 1.0, jnp.nan).astype(x.dtype)


_jit_energy = jax.jit(lambda m, s: m.energy_of(m.params, s))
_jit_forces = jax.jit(lambda m, s: m.forces_of(m.params, s))
_jit_stress = jax.jit(lambda m, s: m.stress_of(m.params, s))
_jit_energy_and_forces = jax.jit(lambda m, s: m.energy_and_forces_of(m.params, s))
_jit_energy_forces_stress = jax.jit(lambda m, s: m.energy_forces_stress_of(m.params, s))


__all__ += ["StructureError"]
