r"""Structure: the atomic configuration as a JAX pytree.

A :class:`Structure` holds

* ``positions`` (n, 3) in Å,
* ``numbers`` (n,) atomic numbers (int32),
* ``cell`` (3, 3) in Å, rows are lattice vectors (ASE convention),
* ``masses`` (n,) in amu,
* ``mask`` (n,) bool, False for padding atoms,

as array leaves, and two static (hashable, non-traced) fields:

* ``pbc`` a tuple of three bools,
* ``images`` the number of periodic images per axis that the dense neighbour
  construction enumerates (``None`` until :func:`jaxcert.core.neighbors.with_images`
  or :meth:`jaxcert.Model.prepare` sets it for a cutoff), and ``image_cutoff``,
  the cutoff (Å) the count was made for; inside ``jit`` every model output is
  NaN when a traced cell needs more images than that (never silently wrong).

Making ``pbc`` static lets every periodic/non-periodic branch (stress defined or
not, which images exist) be decided at trace time, so nothing in jitted code
branches on a Python bool of a traced value.

Padding atoms (``mask == False``) are exactly inert in every jaxcert model: they
contribute no energy, receive zero force and their positions carry zero
gradient.  :func:`stack` pads structures of different sizes to a common size so
that they batch under :func:`jax.vmap`.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxcert.core.cache import register_storable
from jaxcert.core.geometry import det3

__all__ = ["Structure", "StructureError", "UnsupportedStructure", "stack", "unstack", "validate"]

#: Default minimum allowed interatomic distance in Å at construction.
MIN_DISTANCE_A = 0.3
#: Largest supported atomic number (ASE's data tables go to 118).
MAX_Z = 118


class StructureError(ValueError):
    """Raised when a structure is physically or numerically invalid."""


class UnsupportedStructure(ValueError):
    """The model cannot evaluate this structure (e.g. an isolated atom or a pair for a graph network).

    Raised by host-side models (bridges) and, at trace time, by adapted models whose space cannot hold
    the structure (:mod:`jaxcert.adapters.frameworks`); the suite records the probe as skipped with this
    reason.  Through ``jax.pure_callback`` it arrives as a runtime error whose message
    contains the class name, which :func:`jaxcert.core.model.is_unsupported_structure` recognises.
    Re-exported by :mod:`jaxcert.core.model`.
    """




@dataclasses.dataclass(frozen=True)
class Structure:
    """Atomic configuration (pytree).  See the module docstring for fields and units.

    Construct through :meth:`Structure.create`, :meth:`from_ase` or :meth:`read`,
    which validate the input.  The raw constructor does no validation, since JAX
    rebuilds pytrees with tracers and sentinels inside transformations.
    """

    positions: jax.Array
    numbers: jax.Array
    cell: jax.Array
    masses: jax.Array
    mask: jax.Array
    pbc: tuple[bool, bool, bool] = (False, False, False)
    images: tuple[int, int, int] | None = None
    image_cutoff: float | None = None
    neighbor_list: Any = None  # a jaxcert.core.neighbors.CellListSpec (static), or None for the dense path
    neighbor_state: Any = None  # a jaxcert.core.neighbors.NeighborState (array leaves: the stored Verlet list) or None

    # ------------------------------------------------------------------ build
    @classmethod
    def create(
        cls,
        positions: Any,
        numbers: Any,
        cell: Any = None,
        pbc: Any = False,
        masses: Any = None,
        mask: Any = None,
        *,
        dtype: Any = None,
        min_distance: float | None = MIN_DISTANCE_A,
    ) -> Structure:
        """Validated constructor.

        Args:
          positions: (n, 3) Cartesian positions in Å.
          numbers: (n,) atomic numbers, or chemical symbols.
          cell: (3, 3) rows = lattice vectors in Å; ``None`` gives a zero cell
            (allowed only without pbc).
          pbc: bool or three bools.
          masses: (n,) amu; default ASE's standard atomic weights.
          mask: (n,) bool; default all True.
          dtype: float dtype; default the input's float dtype if it has one,
            else JAX's default float (float64 under x64).
          min_distance: reject atoms closer than this (Å, minimum image where
            periodic); ``None`` disables the check.
        """
        from ase.data import atomic_masses, atomic_numbers

        if dtype is None:
            arr = np.asarray(positions)
            dtype = arr.dtype if np.issubdtype(arr.dtype, np.floating) else jnp.zeros(()).dtype
            dtype = jnp.zeros((), dtype).dtype  # canonicalise (float64 -> float32 without x64)
        pos = np.asarray(positions, dtype=np.float64)
        nums_in = np.asarray(numbers)
        if nums_in.dtype.kind in "US":
            try:
                nums_in = np.array([atomic_numbers[str(x)] for x in nums_in.ravel()])
            except KeyError as err:
                raise StructureError(f"unknown chemical symbol {err.args[0]!r}") from None
        nums = np.asarray(nums_in).astype(np.int64).ravel()
        if isinstance(pbc, (bool, np.bool_)):
            pbc_t = (bool(pbc),) * 3
        else:
            pbc_t = tuple(bool(p) for p in np.asarray(pbc).ravel())
            if len(pbc_t) != 3:
                raise StructureError(f"pbc must be a bool or three bools, got {pbc!r}")
        cell_np = np.zeros((3, 3)) if cell is None else np.asarray(cell, dtype=np.float64)
        if cell_np.shape == (3,):
            cell_np = np.diag(cell_np)
        mask_np = np.ones(len(nums), bool) if mask is None else np.asarray(mask, bool).ravel()
        if masses is None:
            valid_z = np.clip(nums, 0, MAX_Z)
            masses_np = np.asarray(atomic_masses)[valid_z]
        else:
            masses_np = np.asarray(masses, dtype=np.float64).ravel()
        validate(pos, nums, cell_np, pbc_t, masses_np, mask_np, min_distance=min_distance)
        return cls(
            positions=jnp.asarray(pos, dtype),
            numbers=jnp.asarray(nums, jnp.int32),
            cell=jnp.asarray(cell_np, dtype),
            masses=jnp.asarray(masses_np, dtype),
            mask=jnp.asarray(mask_np),
            pbc=pbc_t,
        )

    @classmethod
    def from_ase(cls, atoms: Any, *, dtype: Any = None, min_distance: float | None = MIN_DISTANCE_A) -> Structure:
        """Build from an ``ase.Atoms`` (positions Å, cell rows, pbc, masses amu)."""
        return cls.create(
            atoms.get_positions(),
            atoms.get_atomic_numbers(),
            cell=np.asarray(atoms.get_cell()),
            pbc=tuple(bool(p) for p in atoms.get_pbc()),
            masses=atoms.get_masses(),
            dtype=dtype,
            min_distance=min_distance,
        )

    @classmethod
    def read(cls, path: str | os.PathLike, index: Any = None, **kw: Any) -> Structure:
        """Read a file with ``ase.io.read`` (any format ASE reads); last frame by default."""
        import ase.io

        if not os.path.exists(path):
            raise StructureError(f"no such structure file: {os.fspath(path)!r}")
        atoms = ase.io.read(path) if index is None else ase.io.read(path, index=index)
        return cls.from_ase(atoms, **kw)

    def to_ase(self) -> Any:
        """Convert to ``ase.Atoms`` (padding atoms dropped).  Needs concrete arrays."""
        import ase

        m = np.asarray(self.mask)
        return ase.Atoms(
            numbers=np.asarray(self.numbers)[m],
            positions=np.asarray(self.positions, np.float64)[m],
            cell=np.asarray(self.cell, np.float64),
            pbc=self.pbc,
            masses=np.asarray(self.masses, np.float64)[m],
        )

    # ------------------------------------------------------------- accessors
    @property
    def n_atoms(self) -> int:
        """Number of atom slots (padding included), static."""
        return self.positions.shape[-2]

    @property
    def dtype(self) -> Any:
        return self.positions.dtype

    @property
    def periodic(self) -> bool:
        """True if any axis is periodic (static)."""
        return any(self.pbc)

    @property
    def volume(self) -> jax.Array:
        """|det cell| in Å³."""

        return jnp.abs(det3(self.cell))

    def replace(self, **changes: Any) -> Structure:
        """Functional update (no validation), e.g. ``s.replace(positions=R)``."""
        return dataclasses.replace(self, **changes)

    def __repr__(self) -> str:
        shape = self.positions.shape
        return f"Structure(n={shape[-2]}, batch={shape[:-2]}, pbc={self.pbc}, images={self.images}, dtype={self.dtype})"


jax.tree_util.register_dataclass(
    Structure,
    data_fields=["positions", "numbers", "cell", "masses", "mask", "neighbor_state"],
    meta_fields=["pbc", "images", "image_cutoff", "neighbor_list"],
)


def validate(
    positions: np.ndarray,
    numbers: np.ndarray,
    cell: np.ndarray,
    pbc: tuple[bool, bool, bool],
    masses: np.ndarray,
    mask: np.ndarray,
    *,
    min_distance: float | None = MIN_DISTANCE_A,
) -> None:
    """Check a structure and raise :class:`StructureError` naming the problem."""
    n = len(numbers)
    if n == 0 or positions.size == 0:
        raise StructureError("empty structure: at least one atom is required")
    if positions.shape != (n, 3):
        raise StructureError(f"positions must have shape (n, 3) = ({n}, 3), got {positions.shape}")
    if masses.shape != (n,) or mask.shape != (n,):
        raise StructureError(f"masses and mask must have shape ({n},), got {masses.shape} and {mask.shape}")
    if not mask.any():
        raise StructureError("empty structure: every atom is masked out")
    bad = ~np.isfinite(positions).all(axis=1)
    if bad.any():
        raise StructureError(
            f"non-finite (NaN or inf) coordinates for atom(s) {np.flatnonzero(bad)[:10].tolist()}"
        )
    real = numbers[mask]
    unknown = sorted({int(z) for z in real if z < 1 or z > MAX_Z})
    if unknown:
        raise StructureError(f"unknown atomic number(s) {unknown}: valid elements have Z in 1..{MAX_Z}")
    if cell.shape != (3, 3) or not np.isfinite(cell).all():
        raise StructureError(f"cell must be a finite (3, 3) array, got shape {cell.shape}")
    if not np.isfinite(masses[mask]).all() or (masses[mask] <= 0).any():
        raise StructureError("masses must be finite and positive (amu)")
    if any(pbc):
        vol = abs(np.linalg.det(cell))
        scale = np.prod(np.linalg.norm(cell, axis=1)) + 1e-300
        if vol < 1e-8 * scale or vol < 1e-10:
            raise StructureError(
                f"singular cell (volume {vol:.3g} Å^3) with pbc={pbc}: periodic axes need a cell of full rank"
            )
        for a in range(3):
            if pbc[a] and np.linalg.norm(cell[a]) == 0:
                raise StructureError(f"lattice vector {a} is zero but pbc[{a}] is True")
    if min_distance is not None and mask.sum() >= 2:
        d, (i, j) = _min_distance(positions[mask], cell, pbc, min_distance)
        if d < min_distance:
            idx = np.flatnonzero(mask)
            raise StructureError(
                f"overlapping atoms {int(idx[i])} and {int(idx[j])}: distance {d:.4g} Å < "
                f"min_distance {min_distance} Å"
            )


#: Above this many atoms the overlap check uses matscipy's O(N) C neighbour list instead of dense numpy.
DENSE_CHECK_MAX_ATOMS = 400


def _min_distance(pos: np.ndarray, cell: np.ndarray, pbc: tuple[bool, ...],
                  within: float | None = None) -> tuple[float, tuple[int, int]]:
    """Smallest distance between distinct atoms (minimum image over ±1 images), and the pair.

    Large structures (more than :data:`DENSE_CHECK_MAX_ATOMS` atoms) with a ``within`` radius (Å) are searched
    with matscipy's cell-list neighbour list up to that radius (all images, an atom's own images included);
    when no pair lies within it, the result is ``(inf, (0, 0))``.  The dense search costs O(N²·27) memory:
    8 GB and three minutes at 8,000 atoms.
    """
    n = len(pos)
    if within is not None and n > DENSE_CHECK_MAX_ATOMS:
        from matscipy.neighbours import neighbour_list  # noqa: PLC0415 - host-side C neighbour list

        periodic = any(pbc)
        box = cell if periodic else np.eye(3) * (np.ptp(pos, axis=0) + 2.0 * within + 1.0)
        origin = np.zeros(3) if periodic else np.min(pos, axis=0) - within - 0.5
        i, j, d = neighbour_list("ijd", positions=pos - origin, cell=box, pbc=np.asarray(pbc), cutoff=float(within))
        if len(d) == 0:
            return float("inf"), (0, 0)
        k = int(np.argmin(d))
        return float(d[k]), (int(i[k]), int(j[k]))
    d = pos[None, :, :] - pos[:, None, :]
    best = np.full((n, n), np.inf)
    ranges = [(-1, 0, 1) if p else (0,) for p in pbc]
    for a in ranges[0]:
        for b in ranges[1]:
            for c in ranges[2]:
                shift = np.array([a, b, c], float) @ cell
                r = np.linalg.norm(d + shift, axis=-1)
                if a == b == c == 0:
                    np.fill_diagonal(r, np.inf)
                best = np.minimum(best, r)
    # a periodic image of an atom itself (tiny cell) also counts
    k = int(np.argmin(best))
    i, j = divmod(k, n)
    return float(best[i, j]), (i, j)


def stack(structures: Sequence[Structure], n_atoms: int | None = None) -> Structure:
    """Stack structures into one batched Structure, padding to a common size.

    Padding atoms copy the last real atom's number and mass, sit at distinct far
    positions and have ``mask = False``; every jaxcert model ignores them exactly.
    All structures must share ``pbc`` (a static field).  ``images`` becomes the
    per-axis maximum.

    Args:
      structures: the structures (each unbatched).
      n_atoms: pad to this size (default: the largest).
    """
    if not structures:
        raise StructureError("stack needs at least one structure")
    pbcs = {s.pbc for s in structures}
    if len(pbcs) != 1:
        raise StructureError(f"cannot stack structures with different pbc: {sorted(pbcs)}")
    dtypes = {s.dtype for s in structures}
    if len(dtypes) != 1:
        raise StructureError(f"cannot stack structures with different dtypes: {sorted(map(str, dtypes))}")
    size = max(s.n_atoms for s in structures) if n_atoms is None else int(n_atoms)
    padded = []
    for s in structures:
        if s.positions.ndim != 2:
            raise StructureError("stack takes unbatched structures")
        k = size - s.n_atoms
        if k < 0:
            raise StructureError(f"structure with {s.n_atoms} atoms does not fit n_atoms={size}")
        far = 1.0e4 + 10.0 * jnp.arange(1, k + 1, dtype=s.dtype)
        pad_pos = jnp.stack([far, far, far], axis=1)
        padded.append(
            s.replace(
                positions=jnp.concatenate([s.positions, pad_pos]),
                numbers=jnp.concatenate([s.numbers, jnp.repeat(s.numbers[-1:], k)]),
                masses=jnp.concatenate([s.masses, jnp.repeat(s.masses[-1:], k)]),
                mask=jnp.concatenate([s.mask, jnp.zeros(k, bool)]),
                images=None,
                image_cutoff=None,
                neighbor_list=None,
                neighbor_state=None,
            )
        )
    images, image_cutoff = None, None
    if all(s.images is not None for s in structures):
        images = tuple(int(max(s.images[a] for s in structures)) for a in range(3))
        cuts = [s.image_cutoff for s in structures if s.image_cutoff is not None]
        image_cutoff = min(cuts) if cuts else None
    out = jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *padded)
    return out.replace(images=images, image_cutoff=image_cutoff)


def unstack(batch: Structure) -> list[Structure]:
    """Inverse of :func:`stack` (padding kept; use ``to_ase`` to drop it)."""
    n = batch.positions.shape[0]
    return [jax.tree_util.tree_map(lambda x, i=i: x[i], batch) for i in range(n)]

# the executable store and stored host values may rebuild these types (jaxcert/core/cache.py)
register_storable(Structure, value=True, node=True)
