"""The committee: the target and its auxiliary models, evaluated batched over a protocol's configurations.

docs/detective.md §1.  Every protocol runs the *identical* configurations on every model.  Configurations that
share a periodicity are padded to one atom count and stacked (:func:`jaxcert.core.structure.stack`; padding atoms
are inert) and evaluated as one
``jax.jit(jax.vmap(...))`` program per model and chunk; ``batched=False`` evaluates them one at a time (the
baseline of ``benchmarks/detective.py``).  The evaluation counter ``n_evals`` counts one per configuration and
model for a single point, and one per optimiser step and model for a relaxation: the unit of the search budget.

A model that has no parameters for an element of a configuration (:class:`jaxcert.core.model.UnsupportedElement`) or
cannot evaluate it (:class:`jaxcert.core.model.UnsupportedStructure`, e.g. a bridged graph network on an isolated
atom) gives NaN there; the signals ignore NaN.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxcert.core import batching
from jaxcert.core.model import Model, UnsupportedElement, is_unsupported_structure
from jaxcert.core.structure import Structure
from jaxcert.optim import relax

__all__ = ["Committee", "CHUNK"]

#: Configurations per compiled batch (the last chunk is padded by repeating a configuration).
CHUNK = 64
#: Configurations per call for bridged (torch) models: isolated ones (dimers, molecules) and periodic ones
#: (slabs, crystals).  64 CHGNet slab gradients in one call held 13-14 GB (killed by the OOM killer twice);
#: 8 held about 1.6 GB.
HOST_CHUNK = 64
HOST_CHUNK_PERIODIC = 8


def _is_host(model: Model) -> bool:
    """A bridged model (its energy is a host callback, e.g. torch)."""
    return getattr(model.energy_fn, "backend", None) is not None


def _chunk(model: Model, periodic: bool) -> int:
    """Configurations per call: :data:`CHUNK` for JAX-native models (at most the model's ``max_batch``); for
    bridged models :data:`HOST_CHUNK_PERIODIC` periodic or :data:`HOST_CHUNK` isolated configurations (the bridge
    evaluates every row of a batch, filler copies included, in one torch graph).  A call that does not fit in
    the memory available takes half as many (:meth:`Committee.energies_forces`)."""
    if not _is_host(model):
        return min(CHUNK, model.max_batch) if model.max_batch else CHUNK
    return HOST_CHUNK_PERIODIC if periodic else HOST_CHUNK


def _width(n: int, chunk: int, model: Model) -> int:
    """Batch width: always ``chunk`` for native models, so one compiled program per model and periodicity serves
    every protocol and probe (filler copies cost little); the next power of two for bridged models, whose filler
    rows the bridge would evaluate in full."""
    if not _is_host(model):
        return chunk
    w = 1
    while w < n:
        w *= 2
    return min(w, chunk)


@contextlib.contextmanager
def _quiet_callbacks():
    """Silence JAX's traceback log of a refused host callback (the refusal is handled: NaN for that geometry)."""
    log = logging.getLogger("jax._src.callback")
    level = log.level
    log.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        log.setLevel(level)


def _stack(structures: Sequence[Structure], n_atoms: int) -> Structure:
    """:func:`jaxcert.core.structure.stack` done in NumPy (one transfer per field instead of eager JAX ops per
    structure; the same padding convention: copies of the last real atom far away, ``mask`` False)."""
    b = len(structures)
    s0 = structures[0]
    pos = np.zeros((b, n_atoms, 3))
    num = np.zeros((b, n_atoms), np.int32)
    mas = np.zeros((b, n_atoms))
    msk = np.zeros((b, n_atoms), bool)
    cell = np.zeros((b, 3, 3))
    for k, s in enumerate(structures):
        n = s.n_atoms
        pos[k, :n] = np.asarray(s.positions)
        num[k, :n] = np.asarray(s.numbers)
        mas[k, :n] = np.asarray(s.masses)
        msk[k, :n] = np.asarray(s.mask)
        cell[k] = np.asarray(s.cell)
        if n < n_atoms:
            far = 1.0e4 + 10.0 * np.arange(1, n_atoms - n + 1)
            pos[k, n:] = far[:, None]
            num[k, n:] = num[k, n - 1]
            mas[k, n:] = mas[k, n - 1]
    images = None
    if all(s.images is not None for s in structures):
        images = tuple(int(max(s.images[a] for s in structures)) for a in range(3))
    cuts = [s.image_cutoff for s in structures if s.image_cutoff is not None]
    dt = s0.dtype
    return Structure(positions=jnp.asarray(pos, dt), numbers=jnp.asarray(num), cell=jnp.asarray(cell, dt),
                     masses=jnp.asarray(mas, dt), mask=jnp.asarray(msk), pbc=s0.pbc, images=images,
                     image_cutoff=min(cuts) if cuts else None)


@jax.jit
def _ef_batch(model: Model, batch: Structure) -> tuple[jax.Array, jax.Array]:
    """(E (b,), F (b, n, 3)) of a stacked batch; module-level so that every Committee shares the compiled program."""
    return jax.vmap(lambda s: model.energy_and_forces_of(model.params, s))(batch)


@functools.partial(jax.jit, static_argnames=("fmax", "max_steps"))
def _relax_batch(model: Model, movable: jax.Array, batch: Structure, fmax: float, max_steps: int):
    """FIRE with fixed atoms on a stacked batch (:func:`jaxcert.optim.relax.relax_batch`): (E, positions, steps,
    converged)."""
    r = relax.relax_batch(model, batch, fmax=fmax, max_steps=max_steps, movable=movable)
    energy = jax.vmap(lambda s: model.energy_of(model.params, s))(r.structure)
    return energy, r.structure.positions, r.steps, r.converged


@dataclasses.dataclass
class Committee:
    """Target + committee models (docs/detective.md §1).

    Attributes:
      target: the model under investigation.
      members: the auxiliary models (at least one).
      specs: how each model was specified (``--target``/``--committee`` strings), for ``reproduce.py``; the model
        names when not given.
      batched: stack configurations into one program per chunk (True) or evaluate one at a time (False).
      dtype: float dtype of the configurations (default: float64 if x64 is enabled, else float32).
      n_evals: model evaluations so far (see the module docstring).
    """

    target: Model
    members: Sequence[Model]
    specs: Sequence[str] | None = None
    batched: bool = True
    dtype: Any = None
    n_evals: int = 0
    #: compiled programs (:func:`jaxcert.core.batching.compiled`) and, per (model, periodicity), the batch width
    #: that fits in memory after a call did not
    _exe: dict = dataclasses.field(default_factory=dict, init=False, repr=False)
    _cap: dict = dataclasses.field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.target, Model):
            raise TypeError(f"target: expected a jaxcert.Model, got {type(self.target).__name__}")
        self.members = list(self.members)
        if not self.members:
            raise ValueError("committee: at least one committee model is needed")
        for m in self.members:
            if not isinstance(m, Model):
                raise TypeError(f"committee: expected jaxcert.Model entries, got {type(m).__name__}")
        names, seen = [], {}
        for m in [self.target, *self.members]:
            k = seen.get(m.name, 0)
            seen[m.name] = k + 1
            names.append(m.name if k == 0 else f"{m.name}#{k + 1}")
        self.names = names
        if self.specs is None:
            self.specs = list(names)
        self.specs = list(self.specs)
        if len(self.specs) != len(names):
            raise ValueError(f"specs: expected {len(names)} entries (target + committee), got {len(self.specs)}")
        if self.dtype is None:
            self.dtype = jnp.zeros(()).dtype

    # ------------------------------------------------------------------ views
    @property
    def models(self) -> list[Model]:
        """[target, *members]."""
        return [self.target, *self.members]

    @property
    def target_name(self) -> str:
        return self.names[0]

    def cutoff(self, s: Structure) -> float | None:
        """Largest cutoff (Å) over the models for ``s`` (None if no model declares one)."""
        cuts = []
        for m in self.models:
            try:
                c = m.cutoff_for(s)
            except Exception:  # noqa: BLE001 - a cutoff that cannot be read sizes nothing
                c = None
            if c is not None:
                cuts.append(float(c))
        return max(cuts) if cuts else None

    # ------------------------------------------------------------- evaluation
    def _prepare(self, model: Model, s: Structure) -> Structure | None:
        try:
            return model.prepare(s)
        except UnsupportedElement:
            return None

    def _groups(self, structures: Sequence[Structure]) -> dict[tuple, list[int]]:
        """Indices grouped by periodicity (a static field); sizes within a group are padded to the largest."""
        groups: dict[tuple, list[int]] = {}
        for i, s in enumerate(structures):
            groups.setdefault(s.pbc, []).append(i)
        return groups

    def energies_forces(self, structures: Sequence[Structure]) -> tuple[np.ndarray, list[list[np.ndarray | None]]]:
        """Energies (n_models, n) in eV and forces ``F[model][config]`` (n_atoms, 3) eV/Å (None where NaN)."""
        return self.energies_forces_each([structures] * len(self.models))

    def energies_forces_each(self, per_model: Sequence[Sequence[Structure]]
                             ) -> tuple[np.ndarray, list[list[np.ndarray | None]]]:
        """:meth:`energies_forces` where model ``k`` evaluates its own list ``per_model[k]`` (all of one length):
        the same procedure on configurations that depend on the model, e.g. a rigid scan over the slab each model
        relaxed itself.  Counts one evaluation per configuration and model, as :meth:`energies_forces`."""
        if len(per_model) != len(self.models) or len({len(x) for x in per_model}) > 1:
            raise ValueError(f"per_model: expected {len(self.models)} lists of one length")
        n = len(per_model[0])
        E = np.full((len(self.models), n), np.nan)
        F: list[list[np.ndarray | None]] = [[None] * n for _ in self.models]
        for mi, model in enumerate(self.models):
            structures = per_model[mi]
            prepared = [self._prepare(model, s) for s in structures]
            ok = [i for i, p in enumerate(prepared) if p is not None]
            if not self.batched:
                for i in ok:
                    try:
                        with _quiet_callbacks():
                            e, f = model.energy_and_forces(prepared[i])
                        E[mi, i], F[mi][i] = float(e), np.asarray(f, np.float64)
                    except Exception as err:  # noqa: BLE001
                        if not is_unsupported_structure(err):
                            raise
                    self.n_evals += 1
                continue
            for idx in self._groups([prepared[i] for i in ok]).values():
                idx = [ok[k] for k in idx]
                periodic = prepared[idx[0]].periodic
                size = max(prepared[i].n_atoms for i in idx)
                rows = [prepared[i] for i in idx]
                parts, self._cap[(mi, periodic)] = batching.in_chunks(
                    len(idx), self._step(mi, model, periodic),
                    lambda lo, hi, width, rows=rows, model=model, size=size: self._bisect(model, rows[lo:hi], size,
                                                                                          width))
                self.n_evals += len(idx)
                for (e_k, f_k), i in zip((row for rows in parts for row in rows), idx, strict=True):
                    E[mi, i] = e_k
                    if f_k is not None and np.isfinite(e_k):
                        F[mi][i] = f_k[np.asarray(prepared[i].mask)]
        return E, F

    def _step(self, mi: int, model: Model, periodic: bool) -> int:
        """Configurations per call for model ``mi`` and a periodicity: :func:`_chunk`, or less after a call did
        not fit in memory."""
        return min(_chunk(model, bool(periodic)), self._cap.get((mi, periodic), CHUNK))

    def _bisect(self, model: Model, part: list[Structure], size: int, step: int
                ) -> list[tuple[float, np.ndarray | None]]:
        """(E, F) per structure from one padded batch; when the model refuses one geometry of the batch (e.g. a
        graph network on atoms beyond its cutoff), split the batch in halves until the refused ones are isolated
        (NaN), so the others keep their values.  Every call has the same width: one compiled program."""
        fill = part + [part[-1]] * (_width(len(part), step, model) - len(part))
        try:
            with _quiet_callbacks():
                batch = _stack(fill, size)
                e, f = batching.compiled(self._exe, _ef_batch, model, batch)(model, batch)
            e, f = np.asarray(e, np.float64), np.asarray(f, np.float64)
            return [(float(e[k]), f[k][: s.n_atoms]) for k, s in enumerate(part)]
        except Exception as err:  # noqa: BLE001
            if not is_unsupported_structure(err):
                raise
        if len(part) == 1:
            return [(float("nan"), None)]
        h = len(part) // 2
        return self._bisect(model, part[:h], size, step) + self._bisect(model, part[h:], size, step)

    def energies(self, structures: Sequence[Structure]) -> np.ndarray:
        """Energies (n_models, n) in eV (NaN where a model cannot evaluate a configuration)."""
        return self.energies_forces(structures)[0]

    def relax(self, structures: Sequence[Structure], movable: Sequence[np.ndarray], fmax: float = 0.05,
              max_steps: int = 200) -> tuple[np.ndarray, list[list[np.ndarray | None]], np.ndarray]:
        """FIRE-relax the movable atoms of each configuration with each model (fixed atoms stay put).

        Returns (relaxed energies (n_models, n) eV, relaxed positions ``P[model][config]`` Å, converged
        (n_models, n) bool).  Counts one evaluation per FIRE step and model.
        """
        n = len(structures)
        E = np.full((len(self.models), n), np.nan)
        P: list[list[np.ndarray | None]] = [[None] * n for _ in self.models]
        conv = np.zeros((len(self.models), n), bool)
        for mi, model in enumerate(self.models):
            prepared = [self._prepare(model, s) for s in structures]
            ok = [i for i, p in enumerate(prepared) if p is not None]
            groups = self._groups([prepared[i] for i in ok]).values() if self.batched else [[k] for k in range(len(ok))]
            for idx in groups:
                idx = [ok[k] for k in idx]
                periodic = prepared[idx[0]].periodic
                size = max(prepared[i].n_atoms for i in idx)
                call = functools.partial(self._relax_chunk, model, [prepared[i] for i in idx],
                                         [movable[i] for i in idx], size, float(fmax), int(max_steps))
                width = self._step(mi, model, periodic) if self.batched else 1
                parts, width = batching.in_chunks(len(idx), width, call)
                if self.batched:
                    self._cap[(mi, periodic)] = width
                for (lo, hi), out in parts:
                    self.n_evals += hi - lo
                    if out is None:
                        continue
                    e, pos, steps, cv = out
                    self.n_evals += int(np.sum(steps[:hi - lo]))
                    for k, i in enumerate(idx[lo:hi]):
                        E[mi, i] = float(e[k])
                        P[mi][i] = np.asarray(pos[k], np.float64)[: prepared[i].n_atoms][np.asarray(prepared[i].mask)]
                        conv[mi, i] = bool(cv[k])
        return E, P, conv

    def _relax_chunk(self, model: Model, items: list[Structure], movable: list[np.ndarray], size: int, fmax: float,
                     max_steps: int, lo: int, hi: int, width: int) -> tuple[tuple[int, int], tuple | None]:
        """FIRE-relax ``items[lo:hi]`` in one batch padded to the width (:func:`_width`): ((lo, hi), (energies,
        positions, steps, converged)), or ((lo, hi), None) where the model refuses a geometry of the chunk.
        A chunk that does not fit in memory raises (:func:`jaxcert.core.batching.in_chunks` halves it)."""
        part = list(range(lo, hi))
        fill = part + [part[-1]] * (_width(len(part), width, model) - len(part))
        batch = _stack([items[k] for k in fill], size)
        mov = jnp.asarray(np.stack([np.pad(np.asarray(movable[k], np.float64), (0, size - len(movable[k])))
                                    for k in fill]), batch.dtype)
        try:
            with _quiet_callbacks():
                exe = batching.compiled(self._exe, _relax_batch, model, mov, batch, fmax=fmax, max_steps=max_steps)
                out = exe(model, mov, batch)
            return (lo, hi), tuple(np.asarray(x) for x in out)
        except Exception as err:  # noqa: BLE001
            if batching.out_of_memory(err) or not is_unsupported_structure(err):
                raise
            return (lo, hi), None  # refused by the model: NaN, one evaluation each
