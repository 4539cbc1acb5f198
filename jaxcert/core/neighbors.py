r"""Periodic neighbours that stay differentiable in positions and cell.

Dense construction (every probe substrate, small cells).  For atoms i, j and an
integer image vector S on the periodic axes,

.. math::  d_{ij,S} = r_j - r_i - \lfloor f_j - f_i \rceil h + S h,

where f = r h^{-1} are fractional coordinates, h the cell (rows = lattice
vectors) and the rounding (a minimum-image reduction, held constant under
differentiation) keeps the reduced fractional separation in [-½, ½].  With
``K_a = floor(r_c / w_a + ½)`` images per axis (a reduced fractional
separation |f| ≤ ½ plus an image n reaches |f + n| ≤ r_c/w_a only for
|n| ≤ r_c/w_a + ½), where ``w_a = V / |b × c|`` is the
spacing of the lattice planes spanned by the other two vectors, every pair within
``r_c`` is enumerated, for any skew and for cutoffs beyond half the cell.  The
displacements are smooth functions of (R, h), so forces, stress (a strain
derivative) and mixed second derivatives are exact.

The number of images is a static shape.  :func:`with_images` computes it from a
concrete cell (with a small margin for strains and drift) and stores it in the
structure's static ``images`` field; :meth:`jaxcert.Model.prepare` does this for
the model's cutoff.  Inside ``jit`` the images requested by a traced cell are
checked against the static count, and an insufficient count turns every
displacement into NaN (never a silently wrong energy).

For many-body terms a capacity-limited table (:func:`neighbor_table`) keeps the
``capacity`` nearest candidates per atom, with an overflow check that again
yields NaN.

Cell-list construction (large cells, O(N)).  A structure that carries a
:class:`CellListSpec` (static; set by :func:`with_cell_list`, or automatically by
:meth:`jaxcert.Model.prepare` for large cells, ``docs/architecture.md`` "Neighbour
lists") gets its candidates from a cell list instead.  The atoms are binned by
fractional coordinate into ``cells[a]`` cells per axis (a sort and a scatter,
jittable at a static cell capacity), each at least one search radius wide in the
direction normal to the other two lattice vectors, so two atoms within the radius
are always in neighbouring cells, for any skew; each atom takes the atoms of its
neighbouring cells (27 with three or more cells per axis) as candidates.  The
minimum image is unique because the search radius is below half of every plane
spacing.  The candidates within the search radius (the cutoff plus a Verlet skin)
are compacted to ``capacity`` slots per atom and stored in the structure
(:class:`NeighborState`); the stored list is reused while no pair can have entered
the cutoff (:func:`is_fresh`), and rebuilt otherwise (:func:`update`, which loops
call once per step).  Selection uses stop-gradient positions; the returned
displacements ``r_j − r_i − ⌊f_j − f_i⌉·h`` are smooth in (R, h), exactly as on the
dense path, so forces, stress and mixed second derivatives stay exact.
Non-periodic axes (slabs, clusters) are binned over the atoms' extent along a
direction normal to the periodic ones.  A full cell, a full neighbour row, or a
cell strained until its plane spacing no longer holds the static number of cells
turns every displacement into NaN (never a silently truncated list);
:func:`with_cell_list` then sizes a new list on the host.

The binning is written here rather than taken from jax-md's ``partition``: importing
``jax_md`` runs JAX code at import (``jax_md.rigid_body``, ``jax_md.nn``), slow enough to
dominate a cold start; its cell list also handles only orthorhombic or upper-triangular boxes.
"""

from __future__ import annotations

import dataclasses
import itertools
import warnings
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxcert.core.batching import MEMORY_SHARE, ProgramTooLarge
from jaxcert.core.cache import register_storable
from jaxcert.core.device import on_cpu
from jaxcert.core.geometry import det3, inv3, is_concrete, plane_spacings
from jaxcert.core.inputs import InputError
from jaxcert.core.structure import Structure, StructureError

__all__ = ["Pairs", "image_counts", "with_images", "coverage", "pairs", "neighbor_table", "CellListSpec",
           "with_cell_list", "cell_list_fits", "dense_pairs", "listed_pairs", "auto_neighbors", "SPARSE_MIN_ATOMS",
           "DENSE", "NeighborState", "build", "is_fresh", "update", "grow", "list_ok", "rerun_on_overflow",
           "NeighborListOverflow", "GROWTH", "MAX_REGROWTHS", "TooManyImages", "check_image_memory",
           "dense_candidates", "candidate_bytes", "EdgeListSpec", "EdgeState", "Edges", "with_edge_list",
           "ensure_edge_list", "build_edges", "listed_edges", "host_edges", "edge_bucket", "edge_slots", "EDGE_SKIN",
           "ONE_SHOT_SKIN"]

#: Relative margin on the cutoff when counting images (strain, drift of the cell).
IMAGE_MARGIN = 0.05


class Pairs(NamedTuple):
    """Neighbour candidates of each atom (leading axes may be batched).

    Attributes:
      d: the three Cartesian components (x, y, z), each (n, m), of the displacement r_j + image − r_i in Å.
        Kept apart because XLA's CPU code on (n, m, 3) arrays (a minor axis of 3) is several times slower
        than on (n, m) ones, forward and, even more, in reverse mode; :attr:`dR` stacks them.
      r: (n, m) distance in Å (1.0 where ``mask`` is False, so it is safe to divide).
      mask: (n, m) True for a real pair (both atoms real, not an atom with itself).
      j: (n, m) index of the neighbour atom.
    """

    d: tuple[jax.Array, jax.Array, jax.Array]
    r: jax.Array
    mask: jax.Array
    j: jax.Array

    @property
    def dR(self) -> jax.Array:
        """(n, m, 3) displacement r_j + image − r_i in Å (the components of :attr:`d`, stacked)."""
        return jnp.stack(self.d, axis=-1)


def _split(dR: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    return dR[..., 0], dR[..., 1], dR[..., 2]


def image_counts(
    cell: Any, pbc: tuple[bool, bool, bool], cutoff: float, margin: float = IMAGE_MARGIN
) -> tuple[int, int, int]:
    """Images per axis needed to enumerate every pair within ``cutoff`` Å (concrete cell)."""
    if not any(pbc):
        return (0, 0, 0)
    cell = np.asarray(cell, np.float64)
    if cell.ndim == 3:  # batched: the maximum over the batch
        counts = [image_counts(c, pbc, cutoff, margin) for c in cell]
        return tuple(int(max(c[a] for c in counts)) for a in range(3))
    w = plane_spacings(cell)
    reach = cutoff * (1.0 + margin)
    return tuple(int(np.floor(reach / w[a] + 0.5)) if pbc[a] else 0 for a in range(3))


class TooManyImages(InputError, ProgramTooLarge):
    """A cutoff whose periodic images on the dense path would not fit in memory even for one structure
    (:func:`check_image_memory`), raised before anything is allocated: an input error (exit 2 from the CLI), and a
    :class:`~jaxcert.core.batching.ProgramTooLarge` for the loops that retry smaller batches."""


def candidate_bytes(itemsize: int) -> int:
    """Bytes one dense candidate (atom i, atom j, image S) holds at least: the :class:`Pairs` returned for it
    (three displacement components and the distance in the positions' dtype, a one-byte mask, a neighbour index
    of at least four bytes).  A model keeps more per pair (its own terms, derivatives), so this is a floor."""
    return 4 * int(itemsize) + 1 + 4


def dense_candidates(s: Structure, images: tuple[int, int, int] | None = None) -> tuple[int, int]:
    """(periodic images, neighbour candidates) the dense path enumerates for one structure of ``s``:
    ``Π(2K_a + 1)`` images and ``n² × images`` candidates, ``n`` its atom slots (a batch multiplies the
    candidates by its size; the loops that evaluate batches split them to fit, :mod:`jaxcert.core.batching`)."""
    images = s.images if images is None else images
    n_img = 1
    for k in images or (0, 0, 0):
        n_img *= 2 * int(k) + 1
    return n_img, int(s.n_atoms) ** 2 * n_img


def check_image_memory(s: Structure, cutoff: float, images: tuple[int, int, int] | None = None,
                       who: str = "") -> None:
    """Refuse, before anything is allocated, a dense neighbour search whose candidates for one structure
    (:func:`dense_candidates` × :func:`candidate_bytes`) need more than :data:`jaxcert.core.batching.MEMORY_SHARE`
    of the memory available (:func:`jaxcert.core.device.available_bytes`): a cutoff of 10⁴ Å on a 4 Å cell asks
    for about 10¹¹ images.  Nothing is checked for a non-periodic structure or where the available memory is
    unknown.

    Raises:
      TooManyImages: naming the cutoff, the images per axis and in all, the candidates and the memory.
    """
    if not s.periodic:
        return
    images = s.images if images is None else images
    if images is None:
        images = image_counts(s.cell, s.pbc, float(cutoff))
    n_img, cand = dense_candidates(s, images)
    need = cand * candidate_bytes(np.dtype(s.positions.dtype).itemsize)
    from jaxcert.core import device

    free = device.available_bytes()
    if free is None or need <= MEMORY_SHARE * free:
        return
    axes = "×".join(str(2 * int(k) + 1) for k in images)
    raise TooManyImages(
        f"{who + ': ' if who else ''}cutoff {float(cutoff):g} Å: the {int(s.n_atoms)}-atom periodic cell needs "
        f"{axes} = {n_img:,} periodic images, {cand:.3g} neighbour candidates: at least {need / 1e9:.3g} GB of "
        f"memory, and {free / 1e9:.3g} GB are available (at most {MEMORY_SHARE:.0%} used); allowed: a cutoff "
        "whose images fit (a smaller cutoff, or a larger cell)")


def with_images(s: Structure, cutoff: float, margin: float = IMAGE_MARGIN) -> Structure:
    """Return ``s`` with its static ``images`` set for ``cutoff`` (Å); keeps a larger existing count."""
    if not is_concrete(s.cell):
        if s.images is None:
            raise StructureError(
                "the cell is traced (inside jit/vmap/grad) and the structure has no static image count; "
                "call model.prepare(structure) or jaxcert.core.neighbors.with_images(structure, cutoff) "
                "outside the transformation"
            )
        return s
    if not is_concrete(cutoff):  # a cutoff computed inside jit: keep the static count (coverage is checked in pairs)
        if s.images is None:
            raise StructureError(
                "the cutoff is traced and the structure has no static image count; call model.prepare(structure) "
                "or jaxcert.core.neighbors.with_images(structure, cutoff) outside the transformation"
            )
        return s
    cut = float(cutoff)
    if not np.isfinite(cut) or cut < 0:  # an infinite cutoff has no image count (and NaN none either)
        raise InputError(f"cutoff: got {cut!r}; allowed: a finite number >= 0 (Å)")
    need = image_counts(s.cell, s.pbc, cut, margin)
    if s.images is not None:
        need = tuple(max(a, b) for a, b in zip(need, s.images, strict=True))
        if s.image_cutoff is not None:
            cut = max(cut, s.image_cutoff)
    return s.replace(images=need, image_cutoff=cut)


def coverage(s: Structure) -> jax.Array:
    """True unless the (possibly traced) cell needs more images than ``s.images`` for ``s.image_cutoff``.

    :class:`jaxcert.Model` multiplies every output by NaN where this is False, so an
    insufficient static image count can never give a silently wrong number, whatever
    the model does with out-of-range pairs.
    """
    if not s.periodic or s.images is None or s.image_cutoff is None:
        return jnp.asarray(True)
    cell = s.cell
    vol = jnp.abs(det3(cell))
    cross = jnp.stack([jnp.cross(cell[..., 1, :], cell[..., 2, :]), jnp.cross(cell[..., 2, :], cell[..., 0, :]),
                       jnp.cross(cell[..., 0, :], cell[..., 1, :])], axis=-2)
    spacing = vol[..., None] / jnp.linalg.norm(cross, axis=-1)
    need = jnp.floor(s.image_cutoff / spacing + 0.5) * jnp.asarray(s.pbc, cell.dtype)
    return jnp.all(need <= jnp.asarray(s.images, cell.dtype))


def _shift_vectors(images: tuple[int, int, int]) -> np.ndarray:
    ranges = [range(-k, k + 1) for k in images]
    shifts = np.array(list(itertools.product(*ranges)), dtype=np.float64)
    # zero shift first, so that index 0 of each block is the minimum image
    order = np.argsort(np.abs(shifts).sum(1), kind="stable")
    return shifts[order]


def pairs(s: Structure, cutoff: float) -> Pairs:
    """Neighbour candidates of an unbatched structure: the cell list if ``s`` carries one, else dense.

    Differentiable in ``s.positions`` and ``s.cell`` on both paths.  Pairs beyond the
    cutoff may still be returned (masking them is the model's cutoff function's job,
    which keeps derivatives smooth); every pair within it is.
    """
    if isinstance(s.neighbor_list, CellListSpec):
        return listed_pairs(s, cutoff)
    if isinstance(s.neighbor_list, EdgeListSpec):  # a graph network's edge list: rows come from the dense path
        s = s.replace(neighbor_list=None, neighbor_state=None)
    return dense_pairs(s, cutoff)


def dense_pairs(s: Structure, cutoff: float) -> Pairs:
    """All (atom, neighbour, image) candidates of an unbatched structure, O(N²·images).

    ``cutoff`` (Å) sets the image count (if ``s.images`` is unset and the cell is
    concrete) and the coverage check.
    """
    if s.positions.ndim != 2:
        raise ValueError("pairs takes an unbatched structure; vmap over batches")
    R, n = s.positions, s.n_atoms
    pbc_mask = jnp.asarray(s.pbc, R.dtype)
    dR = R[None, :, :] - R[:, None, :]  # (i, j, 3) = r_j - r_i
    if s.periodic:
        s = with_images(s, cutoff)
        cell = s.cell
        inv = inv3(cell)
        frac = dR @ inv
        wrap = jax.lax.stop_gradient(jnp.round(frac) * pbc_mask)
        dR = dR - wrap @ cell
        check_image_memory(s, cutoff)  # before the image vectors are built: 10^11 images never are
        shifts = jnp.asarray(_shift_vectors(s.images), R.dtype)
        dR = dR[:, :, None, :] + (shifts @ cell)[None, None, :, :]  # (i, j, S, 3)
        # coverage: the traced cell must not need more images than were enumerated
        vol = jnp.abs(det3(cell))
        cross = jnp.stack([jnp.cross(cell[1], cell[2]), jnp.cross(cell[2], cell[0]), jnp.cross(cell[0], cell[1])])
        spacing = vol / jnp.linalg.norm(cross, axis=1)
        need = jnp.floor(cutoff / spacing + 0.5) * pbc_mask
        ok = jnp.all(need <= jnp.asarray(s.images, R.dtype))
        dR = jnp.where(ok, dR, jnp.nan)
        n_s = shifts.shape[0]
        self_pair = (jnp.eye(n, dtype=bool)[:, :, None]) & (jnp.arange(n_s) == 0)[None, None, :]
        real = (s.mask[:, None] & s.mask[None, :])[:, :, None] & ~self_pair
        j = jnp.broadcast_to(jnp.arange(n)[None, :, None], (n, n, n_s))
        dR = dR.reshape(n, n * n_s, 3)
        real = real.reshape(n, n * n_s)
        j = j.reshape(n, n * n_s)
    else:
        real = s.mask[:, None] & s.mask[None, :] & ~jnp.eye(n, dtype=bool)
        j = jnp.broadcast_to(jnp.arange(n)[None, :], (n, n))
    r2 = jnp.sum(dR * dR, axis=-1)
    r = jnp.sqrt(jnp.where(real, r2, 1.0))
    return Pairs(d=_split(dR), r=r, mask=real, j=j)


def neighbor_table(s: Structure, cutoff: float, capacity: int) -> Pairs:
    """The ``capacity`` nearest candidates of each atom (for three-body terms).

    Selection uses the distances held constant under differentiation; gathered
    displacements stay differentiable.  If more than ``capacity`` candidates lie
    within ``cutoff`` for some atom, the displacements become NaN (overflow is
    never silent).
    """
    p = pairs(s, cutoff)
    m = p.r.shape[-1]
    if capacity >= m:
        return p
    key = jnp.where(p.mask, jax.lax.stop_gradient(p.r), jnp.inf)
    neg, idx = jax.lax.top_k(-key, capacity + 1)
    overflow = jnp.any(-neg[:, capacity] < cutoff)
    idx = idx[:, :capacity]
    take = lambda x: jnp.take_along_axis(x, idx, axis=1)  # noqa: E731
    d = tuple(jnp.where(overflow, jnp.nan, take(x)) for x in p.d)
    mask = take(p.mask)
    r = jnp.sqrt(jnp.where(mask, d[0] * d[0] + d[1] * d[1] + d[2] * d[2], 1.0))
    return Pairs(d=d, r=r, mask=mask, j=take(p.j))


# --------------------------------------------------------------------------- cell lists

#: Structures with at least this many atom slots get a cell list from :meth:`jaxcert.Model.prepare`
#: when the cell allows one (every periodic plane spacing above two search radii).
SPARSE_MIN_ATOMS = 256

#: ``structure.replace(neighbor_list=DENSE)`` keeps a structure on the dense path whatever its size.
DENSE = "dense"


@dataclasses.dataclass(frozen=True)
class CellListSpec:
    """Static shape of a cell list (a hashable meta field of :class:`~jaxcert.Structure`).

    Attributes:
      cutoff: search radius in Å: the model's cutoff plus ``skin``.
      cells: cells per axis (at least 1).
      cell_capacity: atom slots per cell.
      capacity: neighbour slots per atom.
      skin: Verlet skin in Å: a stored list stays valid while 2·max|u| + r_s·‖F − 1‖_F < skin, with u the
        atoms' displacements from the positions it was built at (after the affine part of the cell change F)
        and r_s the search radius.
    """

    cutoff: float
    cells: tuple[int, int, int]
    cell_capacity: int
    capacity: int
    skin: float = 0.0


class NeighborState(NamedTuple):
    """A stored Verlet list (array leaves of :class:`~jaxcert.Structure`'s ``neighbor_state``).

    Attributes:
      idx: (n, capacity) neighbour indices within the search radius at build time (n = empty slot).
      positions: (n, 3) positions it was built at, Å.
      cell: (3, 3) cell it was built at, Å.
      ok: False if a build overflowed a capacity or the cell no longer held its cells (results are NaN).  Sticky
        along a loop that carries the list (:func:`update`): once False it stays False until the host sizes a new
        list, so the state a relaxation, MD run or attack returns tells whether any of its builds overflowed.
      builds: how many times this list was built since the host made it (1 after the first build); a loop that
        carries the list counts its rebuilds here.
    """

    idx: jax.Array
    positions: jax.Array
    cell: jax.Array
    ok: jax.Array
    builds: jax.Array


def _bin(t: jax.Array, cells: tuple[int, int, int], capacity: int, iota: jax.Array):
    """Cell table (n_cells, capacity) of atom indices (n = empty slot), each atom's cell (n, 3), overflow flag."""
    n = t.shape[0]
    c = jnp.floor(t).astype(jnp.int32)  # (n, 3), each in [0, cells[a])
    flat = (c[:, 0] * cells[1] + c[:, 1]) * cells[2] + c[:, 2]
    order = jnp.argsort(flat, stable=True)
    sorted_cells = flat[order]
    rank = iota[:n] - jnp.searchsorted(sorted_cells, sorted_cells, side="left")
    table = jnp.full((cells[0] * cells[1] * cells[2], capacity), n, jnp.int32)
    table = table.at[sorted_cells, rank].set(order.astype(jnp.int32), mode="drop")
    return table, c, jnp.any(rank >= capacity)


def _search_frame(cell: jax.Array, pbc: tuple[bool, bool, bool]) -> jax.Array:
    """Rows: the lattice vectors of the periodic axes, unit vectors normal to them for the others."""
    dt = cell.dtype
    per = [a for a in range(3) if pbc[a]]
    rows = [cell[a] for a in range(3)]
    if len(per) == 3:
        return cell
    if len(per) == 2:
        n = jnp.cross(cell[per[0]], cell[per[1]])
        rows[3 - sum(per)] = n / jnp.linalg.norm(n)
    elif len(per) == 1:
        a = cell[per[0]] / jnp.linalg.norm(cell[per[0]])
        trial = jnp.where(jnp.abs(a[0]) < 0.9, jnp.asarray([1.0, 0, 0], dt), jnp.asarray([0, 1.0, 0], dt))
        e1 = trial - (trial @ a) * a
        e1 = e1 / jnp.linalg.norm(e1)
        others = [b for b in range(3) if b != per[0]]
        rows[others[0]], rows[others[1]] = e1, jnp.cross(a, e1)
    else:
        rows = list(jnp.eye(3, dtype=dt))
    return jnp.stack(rows)


def _spacings(h: jax.Array) -> jax.Array:
    vol = jnp.abs(det3(h))
    cross = jnp.stack([jnp.cross(h[1], h[2]), jnp.cross(h[2], h[0]), jnp.cross(h[0], h[1])])
    return vol / jnp.linalg.norm(cross, axis=1)


def _scaled(s: Structure, spec: CellListSpec):
    """Stop-gradient cell coordinates t in [0, cells) per axis, and whether the static cells still fit."""
    R = jax.lax.stop_gradient(s.positions)
    h = _search_frame(jax.lax.stop_gradient(s.cell), s.pbc)
    f = R @ inv3(h)
    n = jnp.asarray(spec.cells, R.dtype)
    real = s.mask[:, None]
    lo = jnp.min(jnp.where(real, f, jnp.inf), axis=0)
    hi = jnp.max(jnp.where(real, f, -jnp.inf), axis=0)
    # non-periodic axes: the atoms' extent (Å along a unit vector), at least cells * radius long
    length = jnp.maximum(hi - lo + 1e-6, n * spec.cutoff)
    pbc = np.asarray(s.pbc)
    u = jnp.where(pbc, f - jnp.floor(f), (f - lo) / length)
    t = jnp.clip(u * n, 0.0, n * (1.0 - 1e-12))
    t = jnp.where(real, t, 0.0)  # padding atoms: any cell (masked later), never a NaN
    fits = jnp.all(jnp.where(pbc, (_spacings(h) >= n * spec.cutoff) & (_spacings(h) > 2 * spec.cutoff), True))
    return t, fits


def cell_list_fits(cell: Any, pbc: tuple[bool, bool, bool], cutoff: float) -> bool:
    """True when a cell list can serve radius ``cutoff`` (Å): every periodic plane spacing > 2 radii, so the
    minimum image is the only image within reach (concrete cell)."""
    w = _spacings(_search_frame(jnp.asarray(cell, jnp.float64), pbc))
    return bool(all(float(w[a]) > 2.0 * cutoff for a in range(3) if pbc[a]))


def _offsets(cells: tuple[int, int, int]) -> list[tuple[int, ...]]:
    """Neighbouring-cell offsets, each cell once: (−1, 0, 1) per axis, (0, 1) with two cells, (0,) with one."""
    per_axis = [(-1, 0, 1) if n >= 3 else tuple(range(n)) for n in cells]
    return list(itertools.product(*per_axis))


def _candidates(s: Structure, spec: CellListSpec, iota: jax.Array):
    """(n, n_offsets·cell_capacity) candidate indices (n = empty), and the cell table's overflow flag and fit."""
    t, fits = _scaled(s, spec)
    table, c, overflow = _bin(t, spec.cells, spec.cell_capacity, iota)
    d = jnp.asarray(_offsets(spec.cells), jnp.int32)
    nb = (c[:, None, :] + d[None, :, :]) % jnp.asarray(spec.cells, jnp.int32)  # (n, n_offsets, 3)
    flat = (nb[..., 0] * spec.cells[1] + nb[..., 1]) * spec.cells[2] + nb[..., 2]
    return _take(table, flat).reshape(s.n_atoms, -1), overflow, fits


def _rows_times(x: jax.Array, m: jax.Array) -> jax.Array:
    """``x @ m`` for (n, 3) × (3, 3): on CPU written out elementwise (XLA's CPU dot is slow on this shape).

    Elsewhere a dot at full precision: float32 dots on recent NVIDIA GPUs otherwise run in TensorFloat-32
    (10-bit mantissa), too coarse for the fractional coordinates and Verlet-skin test this feeds.
    """
    if not on_cpu():
        return jnp.matmul(x, m, precision=jax.lax.Precision.HIGHEST)
    return jnp.stack([x[:, 0] * m[0, c] + x[:, 1] * m[1, c] + x[:, 2] * m[2, c] for c in range(3)], axis=-1)


def _take(x: jax.Array, idx: jax.Array) -> jax.Array:
    """``x[idx]`` along axis 0 for in-range indices (on CPU ``mode="clip"``: ~10× faster there than ``x[idx]``)."""
    return jnp.take(x, idx, axis=0, mode="clip") if on_cpu() else x[idx]


def _min_image(s: Structure, j: jax.Array) -> jax.Array:
    return jnp.stack(_min_image_components(s, j), axis=-1)


def _min_image_components(s: Structure, j: jax.Array) -> list[jax.Array]:
    """r_j − r_i − ⌊f_j − f_i⌉·h on the periodic axes, for neighbour indices j of shape (n, m).

    The wrap is taken from the fractional coordinates held constant.  Computed one Cartesian component at a
    time and stacked last: XLA's CPU code on (n, m, 3) arrays with a minor axis of 3 (gathers of rows,
    (n·m, 3) × (3, 3) products) is several times slower than on three (n, m) arrays.
    Elsewhere (:func:`jaxcert.core.device.on_cpu` False) the rows are gathered and the wrap is one product.
    """
    if not on_cpu():
        return _min_image_rows(s, j)
    R = s.positions
    comp = [_take(R[:, c], j) - R[:, c][:, None] for c in range(3)]
    if s.periodic:
        h = s.cell
        f = jax.lax.stop_gradient(_rows_times(R, inv3(h)))
        wrap = [jax.lax.stop_gradient(jnp.round(_take(f[:, a], j) - f[:, a][:, None])) if s.pbc[a] else None
                for a in range(3)]
        for c in range(3):
            for a in range(3):
                if wrap[a] is not None:
                    comp[c] = comp[c] - wrap[a] * h[a, c]
    return comp


def _min_image_rows(s: Structure, j: jax.Array) -> list[jax.Array]:
    """:func:`_min_image_components` in the natural form: (n, m, 3) row gathers and one (…, 3) × (3, 3) product."""
    R = s.positions
    d = R[j] - R[:, None, :]
    if s.periodic:
        h = s.cell
        f = jax.lax.stop_gradient(_rows_times(R, inv3(h)))
        periodic = jnp.asarray(s.pbc)
        wrap = jax.lax.stop_gradient(jnp.where(periodic, jnp.round(f[j] - f[:, None, :]), 0.0))
        d = d - jnp.matmul(wrap, jnp.where(periodic[:, None], h, 0.0), precision=jax.lax.Precision.HIGHEST)
    return [d[..., 0], d[..., 1], d[..., 2]]


def _compact(keep: jax.Array, capacity: int, iota: jax.Array) -> jax.Array:
    """Column index of the k-th kept entry of each row, for k < capacity (the row length where fewer).

    ``iota`` is ``arange`` of at least the row count and the row length (see :func:`build`).
    """
    n, m = keep.shape
    slot = jnp.cumsum(keep, axis=1) - 1
    rows = jnp.broadcast_to(iota[:n, None], (n, m))
    cols = jnp.broadcast_to(iota[None, :m], (n, m))
    out = jnp.full((n, capacity), m, jnp.int32)
    return out.at[rows, jnp.where(keep, slot, capacity)].set(cols, mode="drop")


def _iota_length(s: Structure) -> int:
    spec = s.neighbor_list
    return max(s.n_atoms, len(_offsets(spec.cells)) * spec.cell_capacity)


def build(s: Structure, iota: jax.Array | None = None) -> NeighborState:
    """A fresh Verlet list of an unbatched structure with a :class:`CellListSpec` (jittable, O(N)).

    ``iota``: ``arange`` of at least ``max(n_atoms, candidates per atom)`` (int32), the only source of the
    index ramps the build uses; :func:`_refresh` passes one through the loop state so that XLA cannot hoist
    them out of its loop (and compute them at every call).
    """
    spec = s.neighbor_list
    n = s.n_atoms
    if iota is None:
        iota = jnp.arange(_iota_length(s), dtype=jnp.int32)
    cand, cell_overflow, fits = _candidates(s, spec, iota)
    valid = (cand < n) & (cand != iota[:n, None])
    jc = jnp.where(valid, cand, 0)
    d0 = jax.lax.stop_gradient(_min_image(s, jc))
    within = valid & (jnp.sum(d0 * d0, -1) < spec.cutoff**2) & _take(s.mask, jc) & s.mask[:, None]
    count = jnp.sum(within, axis=1)
    col = _compact(within, spec.capacity, iota)
    idx = jnp.where(col < cand.shape[1], jnp.take_along_axis(jc, col, axis=1, mode="clip"), n)
    ok = fits & ~cell_overflow & (jnp.max(count) <= spec.capacity)
    R, h = jax.lax.stop_gradient(s.positions), jax.lax.stop_gradient(s.cell)
    return NeighborState(idx=idx.astype(jnp.int32), positions=R, cell=h, ok=ok, builds=jnp.asarray(1, jnp.int32))


def is_fresh(s: Structure, state: NeighborState) -> jax.Array:
    """True while ``state`` still holds every pair within the model's cutoff (the skin criterion of the spec)."""
    spec = s.neighbor_list
    R, h = jax.lax.stop_gradient(s.positions), jax.lax.stop_gradient(s.cell)
    edges = isinstance(spec, EdgeListSpec)
    if s.periodic:
        # an edge list stores each edge's image vector, so an atom wrapped into the cell has moved for it (a row
        # list takes the minimum image at every call); its frame keeps a slab's vacuum row out of the strain
        h0 = _search_frame(state.cell, s.pbc) if edges else state.cell
        h = _search_frame(h, s.pbc) if edges else h
        F = inv3(h0) @ h  # rows: r = f h = f h_ref F
        strain = jnp.sqrt(jnp.sum((F - jnp.eye(3, dtype=h.dtype)) ** 2))
        df = _rows_times(R, inv3(h)) - _rows_times(state.positions, inv3(h0))
        if not edges:
            df = df - jnp.round(df) * jnp.asarray(s.pbc, R.dtype)
        u = _rows_times(df, h)
    else:
        strain, u = jnp.zeros((), R.dtype), R - state.positions
    umax = jnp.sqrt(jnp.max(jnp.where(s.mask, jnp.sum(u * u, -1), 0.0)))
    return 2.0 * umax + spec.cutoff * strain < spec.skin


def update(s: Structure) -> Structure:
    """``s`` with its Verlet list rebuilt if it went stale (jittable); a no-op on the dense path.

    Loops over positions (relaxations, MD, attacks) call this once per step, so the model's own calls
    find a fresh list and only gather ``capacity`` neighbours per atom.
    """
    spec = s.neighbor_list
    if not isinstance(spec, CellListSpec | EdgeListSpec):
        return s
    if s.positions.ndim != 2:
        return jax.vmap(update)(s)
    s = _matching_list(s)
    if not isinstance(s.neighbor_list, CellListSpec | EdgeListSpec):
        return s
    state = s.neighbor_state
    if state is None:
        return s.replace(neighbor_state=build(s) if isinstance(spec, CellListSpec) else build_edges(s))
    return s.replace(neighbor_state=_refresh(s, state))


def _refresh(s: Structure, state: NeighborState) -> NeighborState:
    """``state`` if fresh, else a new build: a ``while_loop`` that runs its body at most once.

    Unbatched it acts as ``lax.cond``.  Under ``vmap`` (batched relaxations, attack grids) a ``cond`` would
    become a ``select`` and build every list at every call; the loop instead builds only when some member
    of the batch is stale (committing the build for the stale members only).  The loop sees stop-gradient
    positions and cell, so it carries no tangent and reverse mode never differentiates through it.
    """
    base = s.replace(neighbor_state=None)

    # XLA hoists loop-invariant work out of a while loop and runs it at every call, taken or not: a body
    # built from closed-over values, from carried values it passes through unchanged, or from index ramps
    # (iota) would do so.  The barrier ties the build, and the ramps it uses, to the loop state
    # (tests/test_cell_list.py::test_the_rebuild_stays_inside_its_loop).
    def stale(c):
        st, done, R, h, _ = c
        return ~done & ~is_fresh(base.replace(positions=R, cell=h), st)

    def rebuild(c):
        st, _, R, h, iota = c
        R, h, iota, st = jax.lax.optimization_barrier((R, h, iota, st))
        new = builder(base.replace(positions=R, cell=h), iota)
        # an overflow stays recorded (ok is sticky) and the rebuilds are counted
        new = new._replace(ok=new.ok & st.ok, builds=st.builds + 1)
        return new, jnp.asarray(True), R, h, iota

    dt = s.positions.dtype  # a network that runs in another precision casts the structure, and its list with it
    state = jax.tree.map(lambda x: x.astype(dt) if jnp.issubdtype(x.dtype, jnp.floating) else x, state)
    edges = isinstance(s.neighbor_list, EdgeListSpec)
    builder = build_edges if edges else build
    length = _edge_iota_length(s) if edges else _iota_length(s)
    carry = (state, jnp.asarray(False), jax.lax.stop_gradient(s.positions), jax.lax.stop_gradient(s.cell),
             jnp.arange(length, dtype=jnp.int32))
    return jax.lax.while_loop(stale, rebuild, carry)[0]


def listed_pairs(s: Structure, cutoff: float) -> Pairs:
    """Neighbour candidates of an unbatched structure from its Verlet list (see the module docstring), O(N).

    The stored list is used while it is fresh (:func:`is_fresh`); otherwise a new one is built here
    (only when needed, also under ``vmap``: see :func:`_refresh`).
    """
    spec = s.neighbor_list
    if s.positions.ndim != 2:
        raise ValueError("pairs takes an unbatched structure; vmap over batches")
    if is_concrete(cutoff) and float(cutoff) > spec.cutoff - spec.skin + 1e-9:
        raise StructureError(f"the structure's cell list was built for a cutoff of {spec.cutoff - spec.skin:.4f} "
                             f"Å, below the {float(cutoff):.4f} Å asked for; call with_cell_list again")
    if s.neighbor_state is not None and s.neighbor_state.positions.shape[-2] != s.n_atoms:
        return dense_pairs(_matching_list(s), cutoff)  # a structure of another size built from a listed one
    n = s.n_atoms
    state = build(s) if s.neighbor_state is None else _refresh(s, s.neighbor_state)
    mask = state.idx < n
    j = jnp.where(mask, state.idx, 0)
    # NaN by multiplication: the energy AND every derivative of it are NaN after an overflow
    nan = jnp.where(state.ok, 1.0, jnp.nan).astype(s.positions.dtype)
    d = [x * nan for x in _min_image_components(s, j)]
    r = jnp.sqrt(jnp.where(mask, d[0] * d[0] + d[1] * d[1] + d[2] * d[2], 1.0))
    return Pairs(d=tuple(d), r=r, mask=mask, j=j)


def with_cell_list(s: Structure, cutoff: float, skin: float | None = None, slack: float = 1.25,
                   at_least: CellListSpec | None = None) -> Structure:
    """``s`` with a :class:`CellListSpec` sized on the host for ``cutoff`` (Å) and a fresh Verlet list.

    The search radius is ``cutoff + skin`` (default skin: ``max(0.5 Å, IMAGE_MARGIN·cutoff)``); cells per axis
    ``floor(w_a / radius)`` (``w_a`` the plane spacing; non-periodic axes from the atoms' extent); cell and
    neighbour capacities are the largest counts found (cell occupancy, matscipy's C neighbour list) times
    ``slack``, plus one, and at least those of ``at_least`` (:func:`grow` passes the overflowed spec, enlarged).
    Batched structures share one spec.

    Raises:
      StructureError: the cell is too small for a cell list (a periodic plane spacing of at most two radii).
    """
    from matscipy.neighbours import neighbour_list  # noqa: PLC0415 - host-side C neighbour list

    if not (is_concrete(s.positions) and is_concrete(s.cell)):
        raise StructureError("with_cell_list needs a concrete structure: call it outside jit")
    skin = max(0.5, IMAGE_MARGIN * float(cutoff)) if skin is None else float(skin)
    rc = float(cutoff) + skin
    R = np.asarray(s.positions, np.float64).reshape(-1, s.n_atoms, 3)
    H = np.asarray(s.cell, np.float64).reshape(-1, 3, 3)
    M = np.asarray(s.mask).reshape(-1, s.n_atoms)
    cells, cell_cap, cap = None, 1, 1
    for Rb, hb, mb in zip(R, H, M, strict=True):
        if not cell_list_fits(hb, s.pbc, rc):
            raise StructureError(f"the cell is too small for a cell list at {rc:.3f} Å (a periodic plane spacing "
                                 f"is at most {2 * rc:.3f} Å): use the dense path")
        h = np.asarray(_search_frame(jnp.asarray(hb), s.pbc))
        f = Rb[mb] @ np.linalg.inv(h)
        w = np.asarray(_spacings(jnp.asarray(h)))
        ext = np.where(s.pbc, w, np.ptp(f, axis=0) + 1e-6)
        nb = tuple(int(max(1, np.floor(ext[a] / rc))) for a in range(3))
        cells = nb if cells is None else tuple(min(x, y) for x, y in zip(cells, nb, strict=True))
    probe = CellListSpec(cutoff=rc, cells=cells, cell_capacity=1, capacity=1, skin=skin)
    for Rb, hb, mb in zip(R, H, M, strict=True):
        one = s.replace(positions=jnp.asarray(Rb), cell=jnp.asarray(hb), mask=jnp.asarray(mb), neighbor_list=None,
                        neighbor_state=None)
        t, _ = _scaled(one, probe)
        cid = np.floor(np.asarray(t)[mb]).astype(int)
        occ = np.bincount(np.ravel_multi_index(cid.T, cells), minlength=int(np.prod(cells)))
        cell_cap = max(cell_cap, int(occ.max()) + int((~mb).sum()))  # padding atoms all sit in cell 0
        box = hb if any(s.pbc) else np.eye(3) * (np.ptp(Rb[mb], axis=0) + 2 * rc + 1.0)
        i = neighbour_list("i", positions=Rb[mb], cell=box, pbc=np.asarray(s.pbc), cutoff=rc)
        cap = max(cap, int(np.bincount(i, minlength=int(mb.sum())).max()) if len(i) else 1)
    cell_cap, cap = int(np.ceil(cell_cap * slack)) + 1, int(np.ceil(cap * slack)) + 1
    if at_least is not None:
        cell_cap, cap = max(cell_cap, at_least.cell_capacity), max(cap, at_least.capacity)
    spec = CellListSpec(cutoff=rc, cells=cells, cell_capacity=min(cell_cap, s.n_atoms), capacity=min(cap, s.n_atoms),
                        skin=skin)
    out = s.replace(neighbor_list=spec, neighbor_state=None)
    return out.replace(neighbor_state=_build_jit(out).neighbor_state)


@jax.jit
def _build_jit(s: Structure) -> Structure:
    return update(s)


#: Growth of both capacities each time :func:`rerun_on_overflow` answers an overflow.
GROWTH = 1.5
#: Reruns :func:`rerun_on_overflow` allows before it gives up (capacities up to GROWTH**4 ≈ 5× the first).
MAX_REGROWTHS = 4


class NeighborListOverflow(RuntimeWarning):
    """A Verlet list overflowed inside a compiled loop; the host sized a larger list and ran the call again."""


def grow(s: Structure, factor: float = GROWTH) -> Structure:
    """``s`` with a larger cell list (host): capacities at least ``factor`` × the current ones, and at least what
    :func:`with_cell_list` sizes for the current positions; same cutoff and skin, a fresh list.  A no-op on the
    dense path."""
    spec = s.neighbor_list
    if isinstance(spec, EdgeListSpec):  # the next buckets: at least factor × the slots, cells grown alike
        out = with_edge_list(s, spec.cutoff - spec.skin, skin=spec.skin, at_least=int(np.ceil(spec.capacity * factor)))
        new = out.neighbor_list
        if new.cells is not None and spec.cells == new.cells:
            cap = max(new.cell_capacity, min(int(np.ceil(spec.cell_capacity * factor)), s.n_atoms))
            out = out.replace(neighbor_list=dataclasses.replace(new, cell_capacity=cap))
        return out
    if not isinstance(spec, CellListSpec):
        return s
    bigger = dataclasses.replace(spec, cell_capacity=int(np.ceil(spec.cell_capacity * factor)),
                                 capacity=int(np.ceil(spec.capacity * factor)))
    return with_cell_list(s.replace(neighbor_list=None, neighbor_state=None), spec.cutoff - spec.skin, skin=spec.skin,
                          at_least=bigger)


def list_ok(state: NeighborState | None) -> jax.Array | bool:
    """The overflow status of a (possibly batched) stored list: its ``ok`` flags, True on the dense path (None)."""
    return True if state is None else state.ok


def rerun_on_overflow(run: Any, s: Structure, what: str = "the call",
                      max_tries: int = MAX_REGROWTHS) -> tuple[Any, Structure, int]:
    """Run ``run(s) -> (result, ok)`` and, on the host, answer a neighbour-list overflow by rerunning it.

    ``ok`` is a pytree of boolean arrays (usually :func:`list_ok` of the states the call's loops carried; one
    entry per structure or run).  Inside ``jit`` (``s`` traced) or on the dense path this is one plain call and
    the flags are the caller's to read.  On the host, while some flag is False, the list is enlarged
    (:func:`grow`) and the whole call is run again from ``s``, so a capacity never shows as an unexplained NaN;
    each rerun emits a :class:`NeighborListOverflow` warning.

    Returns:
      (result, the structure the result was computed from, the number of reruns).

    Raises:
      RuntimeError: still overflowing after ``max_tries`` enlargements.
    """
    result, ok = run(s)
    listed = isinstance(s.neighbor_list, CellListSpec | EdgeListSpec)
    if not listed or not (is_concrete(s.positions) and is_concrete(s.cell)):
        return result, s, 0
    for k in range(max_tries + 1):
        flags = [np.asarray(x).ravel() for x in jax.tree.leaves(ok)]
        bad = int(sum(int((~f).sum()) for f in flags))
        if bad == 0:
            return result, s, k
        if k == max_tries:
            break
        old = s.neighbor_list
        s = grow(s)
        new = s.neighbor_list
        unit = "edge slots" if isinstance(new, EdgeListSpec) else "neighbour capacity"
        warnings.warn(NeighborListOverflow(
            f"{what}: the neighbour list overflowed in {bad} of {sum(f.size for f in flags)} runs ({unit} "
            f"{old.capacity}, cell capacity {old.cell_capacity}); rerunning with {new.capacity} and "
            f"{new.cell_capacity}"), stacklevel=2)
        result, ok = run(s)
    raise RuntimeError(f"{what}: the neighbour list still overflows after {max_tries} enlargements "
                       f"(capacity {s.neighbor_list.capacity}, cell capacity {s.neighbor_list.cell_capacity})")


def auto_neighbors(s: Structure, cutoff: float, min_atoms: int | None = None) -> Structure:
    """The automatic choice of :meth:`jaxcert.Model.prepare`: a cell list for large cells, else ``s`` unchanged.

    A cell list is set when ``s`` has at least ``min_atoms`` (default :data:`SPARSE_MIN_ATOMS`) atom slots,
    carries no choice yet (``neighbor_list`` None; :data:`DENSE` or a spec are kept, except that a spec built
    for a smaller cutoff is rebuilt), and every cell of the batch has periodic plane spacings above two search radii.
    """
    spec = s.neighbor_list
    if isinstance(spec, EdgeListSpec) and is_concrete(s.positions):  # a graph network's list: rows choose anew
        s = s.replace(neighbor_list=None, neighbor_state=None)
        spec = None
    if isinstance(spec, CellListSpec):
        if spec.cutoff - spec.skin >= float(cutoff) - 1e-9 or not is_concrete(s.positions):
            return s
        return with_cell_list(s.replace(neighbor_list=None, neighbor_state=None), cutoff)
    if spec is not None or not (is_concrete(s.positions) and is_concrete(s.cell)):
        return s
    if s.n_atoms < (SPARSE_MIN_ATOMS if min_atoms is None else min_atoms):
        return s
    rc = float(cutoff) + max(0.5, IMAGE_MARGIN * float(cutoff))
    cells = np.asarray(s.cell, np.float64).reshape(-1, 3, 3)
    if not all(cell_list_fits(h, s.pbc, rc) for h in cells):
        return s
    return with_cell_list(s, cutoff)

# --------------------------------------------------------------------------- flat edge lists (graph networks)
#
# A graph network (nequix, SevenNet, a user's graph module) consumes directed edges i ← j, not rows of
# neighbour slots.  The edge list keeps the pairs within the search radius (the model's cutoff plus a skin) as
# flat arrays (receiver i, sender j, integer image vector n) padded to a *bucket* of edge slots, so the network
# evaluates about as many edges as the structure has, whatever the size.  The edge vector handed to the network
# is r_j − r_i + n·h, a smooth function of the positions R and the cell h (n is an integer held constant), so
# forces, stress and mixed derivatives stay exact.  The list is built on the host (matscipy's O(N) C neighbour
# list, at every size) and reused while no pair can have crossed into the cutoff (:func:`is_fresh`, the Verlet
# criterion of the cell list); inside a compiled loop a stale list is rebuilt in place (the cell list's
# candidates for large cells, every periodic image for small ones) and an edge count above the bucket sets
# ``ok`` False: every output becomes NaN and the host (:func:`rerun_on_overflow`) moves to a larger bucket.

#: Verlet skin (Å) of a graph network's edge list: it adds the pairs between r_c and r_c + skin (≈ 5 % more edge
#: slots at r_c = 6 Å, all masked, which the network pays for at every call) and lets a list serve every geometry
#: within skin/2 of where it was built (a probe's finite steps and strains; a loop rebuilds it in place beyond).
EDGE_SKIN = 0.1
#: Skin of an edge list evaluated once at the geometry it was built for (an ASE calculator's call): a skin of
#: zero would make the list stale at once (freshness needs 2·max|u| + r_c·|ε| < skin), so a hundredth of an Å,
#: which adds well under 1 % of slots.
ONE_SHOT_SKIN = 0.01
#: Bucket ladder: edge slots are ``EDGE_MIN_BUCKET · 2^(k/EDGE_BUCKETS_PER_OCTAVE)`` (rounded up to a multiple of
#: 8), so padding is at most ≈ 9 % and a structure's list changes shape only when its edge count moves by as much.
EDGE_BUCKETS_PER_OCTAVE = 8
EDGE_MIN_BUCKET = 64
#: Slots kept free above the edge count when a bucket is chosen (relative, absolute): a list rebuilt inside a
#: compiled program at a rotated or slightly moved geometry may count a boundary pair more.
EDGE_HEADROOM = (0.02, 8)

# grow-only: the largest bucket used so far per (atom slots, pbc, search radius), so that a shape seen once
# keeps its program (an MD run through the ASE calculator does not recompile when its edge count wobbles)
_BUCKETS: dict[tuple, int] = {}


def edge_bucket(count: int, at_least: int = 0) -> int:
    """The smallest bucket of the ladder holding ``count`` edges plus the headroom, and at least ``at_least``."""
    need = max(int(np.ceil(count * (1.0 + EDGE_HEADROOM[0]))) + EDGE_HEADROOM[1], int(at_least), EDGE_MIN_BUCKET)
    k = max(0, int(np.floor(EDGE_BUCKETS_PER_OCTAVE * np.log2(need / EDGE_MIN_BUCKET))) - 1)
    while True:  # the ladder's values are exactly these, so a bucket asked for again is itself
        b = int(np.ceil(EDGE_MIN_BUCKET * 2.0 ** (k / EDGE_BUCKETS_PER_OCTAVE) / 8.0)) * 8
        if b >= need:
            return b
        k += 1


@dataclasses.dataclass(frozen=True)
class EdgeListSpec:
    """Static shape of a flat edge list (a hashable meta field of :class:`~jaxcert.Structure`).

    Attributes:
      cutoff: search radius in Å: the model's cutoff plus ``skin``.
      skin: Verlet skin in Å (the freshness criterion of :class:`CellListSpec`).
      capacity: edge slots (the bucket).
      cells: cells per axis when a rebuild inside a compiled program takes its candidates from a cell list (large
        cells); ``None``: every periodic image of every atom (small cells, clusters).
      cell_capacity: atom slots per cell (with ``cells``).
    """

    cutoff: float
    skin: float
    capacity: int
    cells: tuple[int, int, int] | None = None
    cell_capacity: int = 0


class EdgeState(NamedTuple):
    """A stored edge list (array leaves of :class:`~jaxcert.Structure`'s ``neighbor_state``).

    Attributes:
      receivers: (E,) atom i of each edge (n = empty slot), ascending.
      senders: (E,) atom j (n = empty slot).
      shifts: (E, 3) integer image vector n of each edge (edge vector r_j − r_i + n·h), in the positions' dtype.
      positions, cell, ok, builds: as :class:`NeighborState` (where and whether it was built, rebuild count).
    """

    receivers: jax.Array
    senders: jax.Array
    shifts: jax.Array
    positions: jax.Array
    cell: jax.Array
    ok: jax.Array
    builds: jax.Array


def _host_frame(h: np.ndarray, pbc: tuple[bool, bool, bool], R: np.ndarray, radius: float) -> np.ndarray:
    """A non-singular cell for matscipy (NumPy, float64): the periodic rows of ``h`` exactly, and vacuum vectors
    normal to them, longer than the atoms' extent plus two radii, for the other axes."""
    h = np.asarray(h, np.float64)
    per = [a for a in range(3) if pbc[a]]
    out = h.copy()
    if len(per) == 3:
        return out
    if len(per) == 2:
        nrm = np.cross(h[per[0]], h[per[1]])
        dirs = [nrm / np.linalg.norm(nrm)]
    elif len(per) == 1:
        a = h[per[0]] / np.linalg.norm(h[per[0]])
        trial = np.array([1.0, 0, 0]) if abs(a[0]) < 0.9 else np.array([0, 1.0, 0])
        e1 = trial - (trial @ a) * a
        e1 /= np.linalg.norm(e1)
        dirs = [e1, np.cross(a, e1)]
    else:
        dirs = list(np.eye(3))
    for a, d in zip([a for a in range(3) if not pbc[a]], dirs, strict=True):
        ext = float(np.ptp(R @ d)) if len(R) else 0.0
        out[a] = d * (ext + 2.0 * radius + 1.0)
    return out


def host_edges(positions: Any, cell: Any, pbc: tuple[bool, bool, bool], mask: Any, radius: float
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(receivers i, senders j, image vectors n) of every pair 0 < |r_j − r_i + n·h| < ``radius`` between real
    atoms of one concrete structure, sorted by receiver: matscipy's O(N) C neighbour list (any size, any skew,
    cutoffs beyond half the cell); indices are the structure's atom slots."""
    from matscipy.neighbours import neighbour_list  # noqa: PLC0415 - host-side C neighbour list

    R = np.asarray(positions, np.float64)
    m = np.asarray(mask, bool)
    real = np.flatnonzero(m)
    if len(real) == 0 or (len(real) == 1 and not any(pbc)):  # one periodic atom still sees its own images
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros((0, 3), np.int64)
    h = np.asarray(cell, np.float64)
    box = _host_frame(h, pbc, R[real], radius)
    i, j, S = neighbour_list("ijS", positions=R[real], cell=box, pbc=np.asarray(pbc), cutoff=float(radius))
    S = np.where(np.asarray(pbc)[None, :], S, 0)
    order = np.lexsort((j, i))
    return real[i[order]], real[j[order]], S[order]


def _cell_grid(R: np.ndarray, H: np.ndarray, M: np.ndarray, pbc: tuple[bool, bool, bool], rc: float,
               slack: float) -> tuple[tuple[int, int, int], int]:
    """(cells per axis, atom slots per cell) of a cell list serving radius ``rc`` for every member of a batch."""
    cells = None
    for Rb, hb, mb in zip(R, H, M, strict=True):
        h = np.asarray(_search_frame(jnp.asarray(hb), pbc))
        f = Rb[mb] @ np.linalg.inv(h)
        w = np.asarray(_spacings(jnp.asarray(h)))
        ext = np.where(pbc, w, np.ptp(f, axis=0) + 1e-6)
        nb = tuple(int(max(1, np.floor(ext[a] / rc))) for a in range(3))
        cells = nb if cells is None else tuple(min(x, y) for x, y in zip(cells, nb, strict=True))
    probe = CellListSpec(cutoff=rc, cells=cells, cell_capacity=1, capacity=1)
    cell_cap = 1
    for Rb, hb, mb in zip(R, H, M, strict=True):
        one = Structure(positions=jnp.asarray(Rb), numbers=jnp.zeros(len(mb), jnp.int32), cell=jnp.asarray(hb),
                        masses=jnp.ones(len(mb)), mask=jnp.asarray(mb), pbc=pbc)
        t, _ = _scaled(one, probe)
        cid = np.floor(np.asarray(t)[mb]).astype(int)
        occ = np.bincount(np.ravel_multi_index(cid.T, cells), minlength=int(np.prod(cells)))
        cell_cap = max(cell_cap, int(occ.max()) + int((~mb).sum()))  # padding atoms all sit in cell 0
    return cells, int(np.ceil(cell_cap * slack)) + 1


def with_edge_list(s: Structure, cutoff: float, skin: float | None = None, at_least: int = 0) -> Structure:
    """``s`` with an :class:`EdgeListSpec` for a graph network of cutoff ``cutoff`` (Å) and a fresh edge list,
    built on the host (:func:`host_edges`).  The bucket is the smallest of the ladder (:func:`edge_bucket`) that
    holds the largest edge count of the batch, at least ``at_least`` and at least any bucket this process used for
    the same atom slots, pbc and radius (grow-only).  Periodic structures also get their static image count for
    the search radius (rebuilds inside a compiled program enumerate those images on small cells).
    """
    if not (is_concrete(s.positions) and is_concrete(s.cell)):
        raise StructureError("with_edge_list needs a concrete structure: call it outside jit")
    skin = EDGE_SKIN if skin is None else float(skin)
    rc = float(cutoff) + skin
    s = s.replace(neighbor_list=None, neighbor_state=None)
    if s.periodic:
        s = with_images(s, rc)
    n = s.n_atoms
    R = np.asarray(s.positions, np.float64).reshape(-1, n, 3)
    H = np.asarray(s.cell, np.float64).reshape(-1, 3, 3)
    M = np.asarray(s.mask).reshape(-1, n)
    lists = [host_edges(Rb, hb, s.pbc, mb, rc) for Rb, hb, mb in zip(R, H, M, strict=True)]
    count = max(len(x[0]) for x in lists)
    key = (n, s.pbc, round(rc, 6))
    E = edge_bucket(count, max(int(at_least), _BUCKETS.get(key, 0)))
    _BUCKETS[key] = E
    cells, cell_cap = None, 0
    if n >= SPARSE_MIN_ATOMS and all(cell_list_fits(h, s.pbc, rc) for h in H):
        cells, cell_cap = _cell_grid(R, H, M, s.pbc, rc, 1.25)
        cell_cap = min(cell_cap, n)
    spec = EdgeListSpec(cutoff=rc, skin=skin, capacity=E, cells=cells, cell_capacity=cell_cap)
    dt = s.positions.dtype
    rcv = np.full((len(lists), E), n, np.int32)
    snd = np.full((len(lists), E), n, np.int32)
    shf = np.zeros((len(lists), E, 3), np.float64)
    for b, (i, j, S) in enumerate(lists):
        rcv[b, :len(i)], snd[b, :len(i)], shf[b, :len(i)] = i, j, S
    batch = s.positions.shape[:-2]
    state = EdgeState(receivers=jnp.asarray(rcv.reshape(*batch, E)), senders=jnp.asarray(snd.reshape(*batch, E)),
                      shifts=jnp.asarray(shf.reshape(*batch, E, 3), dt), positions=s.positions, cell=s.cell,
                      ok=jnp.ones(batch, bool), builds=jnp.ones(batch, jnp.int32))
    return s.replace(neighbor_list=spec, neighbor_state=state)


def _fresh_on_host(s: Structure) -> bool:
    """Concrete check (NumPy) that ``s``'s stored edge list holds every pair within the model's cutoff."""
    spec, st = s.neighbor_list, s.neighbor_state
    n = s.n_atoms
    R = np.asarray(s.positions, np.float64).reshape(-1, n, 3)
    R0 = np.asarray(st.positions, np.float64).reshape(-1, n, 3)
    H = np.asarray(s.cell, np.float64).reshape(-1, 3, 3)
    H0 = np.asarray(st.cell, np.float64).reshape(-1, 3, 3)
    M = np.asarray(s.mask).reshape(-1, n)
    if not np.all(np.asarray(st.ok)):
        return False
    for Rb, R0b, hb, h0b, mb in zip(R, R0, H, H0, M, strict=True):
        if s.periodic:  # as is_fresh for an edge list: no wrapping (a wrapped atom changes its image vectors)
            h = np.asarray(_search_frame(jnp.asarray(hb), s.pbc), np.float64)
            h0 = np.asarray(_search_frame(jnp.asarray(h0b), s.pbc), np.float64)
            F = np.linalg.solve(h0, h)
            strain = float(np.sqrt(np.sum((F - np.eye(3)) ** 2)))
            u = (Rb @ np.linalg.inv(h) - R0b @ np.linalg.inv(h0)) @ h
        else:
            strain, u = 0.0, Rb - R0b
        umax = float(np.sqrt(np.max(np.where(mb, np.sum(u * u, -1), 0.0)))) if mb.any() else 0.0
        if not 2.0 * umax + spec.cutoff * strain < spec.skin:
            return False
    return True


def ensure_edge_list(s: Structure, cutoff: float, skin: float | None = None) -> Structure:
    """``s`` unchanged if it carries an edge list for at least ``cutoff`` that is fresh (checked on the host when
    ``s`` is concrete), else :func:`with_edge_list`.  A traced structure keeps what it carries."""
    spec = s.neighbor_list
    concrete = is_concrete(s.positions) and is_concrete(s.cell)
    if isinstance(spec, EdgeListSpec) and spec.cutoff - spec.skin >= float(cutoff) - 1e-9:
        if not concrete or (s.neighbor_state is not None and _fresh_on_host(s)):
            return s
    if not concrete:
        return s
    return with_edge_list(s, cutoff, skin=spec.skin if isinstance(spec, EdgeListSpec) and skin is None else skin)


def _image_shifts(s: Structure) -> np.ndarray:
    return _shift_vectors(s.images if s.periodic and s.images is not None else (0, 0, 0))


def _edge_candidates(s: Structure, spec: EdgeListSpec, iota: jax.Array):
    """(j (n, M), image vectors (n, M, 3), within (n, M), ok) of the candidates of a rebuild, stop-gradient."""
    n = s.n_atoms
    R = jax.lax.stop_gradient(s.positions)
    h = jax.lax.stop_gradient(s.cell)
    dt = R.dtype
    pbc = jnp.asarray(s.pbc, dt)
    if spec.cells is not None:
        cspec = CellListSpec(cutoff=spec.cutoff, cells=spec.cells, cell_capacity=spec.cell_capacity, capacity=1,
                             skin=spec.skin)
        cand, overflow, fits = _candidates(s, cspec, iota)
        valid = (cand < n) & (cand != iota[:n, None])
        j = jnp.where(valid, cand, 0)
        if s.periodic:
            f = _rows_times(R, inv3(h))
            shift = -jnp.round(_take(f, j) - f[:, None, :]) * pbc
        else:
            shift = jnp.zeros((*j.shape, 3), dt)
        ok = fits & ~overflow
    else:
        shifts = jnp.asarray(_image_shifts(s), dt)  # (S, 3), zero first
        n_s = shifts.shape[0]
        if s.periodic:
            f = R @ inv3(h)
            wrap = jnp.round(f[None, :, :] - f[:, None, :]) * pbc  # (i, j, 3)
            shift = shifts[None, None, :, :] - wrap[:, :, None, :]
            cut = spec.cutoff
            spacing = _spacings(h)
            need = jnp.floor(cut / spacing + 0.5) * pbc
            ok = jnp.all(need <= jnp.asarray(s.images if s.images is not None else (0, 0, 0), dt))
        else:
            shift = jnp.zeros((n, n, n_s, 3), dt)
            ok = jnp.asarray(True)
        self_pair = jnp.eye(n, dtype=bool)[:, :, None] & (jnp.arange(n_s) == 0)[None, None, :]
        valid = ~self_pair
        j = jnp.broadcast_to(jnp.arange(n, dtype=jnp.int32)[None, :, None], (n, n, n_s)).reshape(n, n * n_s)
        shift = shift.reshape(n, n * n_s, 3)
        valid = valid.reshape(n, n * n_s)
    d = _take(R, j) - R[:, None, :] + jnp.einsum("nma,ac->nmc", shift, h, precision=jax.lax.Precision.HIGHEST)
    within = valid & (jnp.sum(d * d, -1) < spec.cutoff ** 2) & _take(s.mask, j) & s.mask[:, None]
    return j, shift, within, ok


def build_edges(s: Structure, iota: jax.Array | None = None) -> EdgeState:
    """A fresh edge list of an unbatched structure with an :class:`EdgeListSpec` (jittable): candidates from
    :func:`_edge_candidates`, compacted into the bucket in receiver order; ``ok`` False if they do not fit."""
    spec = s.neighbor_list
    n = s.n_atoms
    if iota is None:
        iota = jnp.arange(_edge_iota_length(s), dtype=jnp.int32)
    j, shift, within, ok = _edge_candidates(s, spec, iota)
    m = j.shape[1]
    keep = within.reshape(-1)
    slot = jnp.cumsum(keep.astype(jnp.int32)) - 1
    total = jnp.sum(keep.astype(jnp.int32))
    E = spec.capacity
    where = jnp.where(keep, slot, E)
    i_flat = jnp.broadcast_to(iota[:n, None], (n, m)).reshape(-1)
    rcv = jnp.full((E,), n, jnp.int32).at[where].set(i_flat, mode="drop")
    snd = jnp.full((E,), n, jnp.int32).at[where].set(j.reshape(-1).astype(jnp.int32), mode="drop")
    shf = jnp.zeros((E, 3), s.positions.dtype).at[where].set(shift.reshape(-1, 3), mode="drop")
    ok = ok & (total <= E)
    R, h = jax.lax.stop_gradient(s.positions), jax.lax.stop_gradient(s.cell)
    return EdgeState(receivers=rcv, senders=snd, shifts=shf, positions=R, cell=h, ok=ok,
                     builds=jnp.asarray(1, jnp.int32))


def _edge_iota_length(s: Structure) -> int:
    spec = s.neighbor_list
    if spec.cells is None:
        return s.n_atoms
    return max(s.n_atoms, len(_offsets(spec.cells)) * spec.cell_capacity)


class Edges(NamedTuple):
    """The edges of one unbatched structure as a graph network takes them.

    Attributes:
      receivers: (E,) atom i (0 on an empty slot).
      senders: (E,) atom j (0 on an empty slot).
      vectors: three (E,) components of r_j − r_i + n·h in Å, differentiable in positions and cell (NaN after an
        overflow).
      mask: (E,) True for a real edge (filled slot, real atoms, length below the cutoff asked for).
      shifts: (E, 3) the integer image vectors n (constant; zero on empty slots).
      ok: False after an overflow (the vectors are NaN; a model multiplies its output by NaN too).
    """

    receivers: jax.Array
    senders: jax.Array
    vectors: tuple[jax.Array, jax.Array, jax.Array]
    mask: jax.Array
    shifts: jax.Array
    ok: jax.Array


def listed_edges(s: Structure, cutoff: float) -> Edges:
    """Edges within ``cutoff`` (Å) of an unbatched structure with an :class:`EdgeListSpec`: the stored list while
    it is fresh, else one rebuilt here (only when needed, also under ``vmap``: :func:`_refresh`)."""
    spec = s.neighbor_list
    if s.positions.ndim != 2:
        raise ValueError("listed_edges takes an unbatched structure; vmap over batches")
    if is_concrete(cutoff) and float(cutoff) > spec.cutoff - spec.skin + 1e-9:
        raise StructureError(f"the structure's edge list was built for a cutoff of {spec.cutoff - spec.skin:.4f} Å, "
                             f"below the {float(cutoff):.4f} Å asked for; call with_edge_list again")
    s = _matching_list(s)
    n = s.n_atoms
    state = build_edges(s) if s.neighbor_state is None else _refresh(s, s.neighbor_state)
    filled = state.receivers < n
    i = jnp.where(filled, state.receivers, 0)
    j = jnp.where(filled, state.senders, 0)
    R, h = s.positions, s.cell
    nan = jnp.where(state.ok, 1.0, jnp.nan).astype(R.dtype)
    n_vec = state.shifts
    comp = []
    for c in range(3):
        x = _take(R[:, c], j) - _take(R[:, c], i)
        if s.periodic:
            x = x + n_vec[:, 0] * h[0, c] + n_vec[:, 1] * h[1, c] + n_vec[:, 2] * h[2, c]
        comp.append(x)
    d0 = [jax.lax.stop_gradient(x) for x in comp]  # the mask from the geometry; the NaN of an overflow then
    comp = [x * nan for x in comp]  # reaches every real edge's vector and every derivative
    mask = filled & (d0[0] * d0[0] + d0[1] * d0[1] + d0[2] * d0[2] < float(cutoff) ** 2) & _take(s.mask, i) & \
        _take(s.mask, j)
    return Edges(receivers=i, senders=j, vectors=tuple(comp), mask=mask, shifts=jnp.where(filled[:, None], n_vec, 0.0),
                 ok=state.ok)


def _matching_list(s: Structure) -> Structure:
    """``s`` with a list that fits its atom slots.  A structure built from a prepared one with another number of
    atoms (a probe's supercell, inside a program) carries a list of the wrong shape: an edge list then gets a
    bucket scaled by the atom count and no stored state (a build in the program, on every periodic image), a
    cell list is dropped for the dense path."""
    st = s.neighbor_state
    if st is None or st.positions.shape[-2] == s.n_atoms:
        return s
    spec = s.neighbor_list
    if isinstance(spec, EdgeListSpec):
        cap = edge_bucket(int(np.ceil(spec.capacity * s.n_atoms / st.positions.shape[-2])))
        return s.replace(neighbor_list=dataclasses.replace(spec, capacity=cap, cells=None, cell_capacity=0),
                         neighbor_state=None)
    return s.replace(neighbor_list=None, neighbor_state=None)


def edge_slots(model: Any, s: Structure, skin: float | None = None) -> tuple[int, int]:
    """(real directed edges within the model's cutoff, edge slots the model evaluates) for a concrete,
    unbatched structure prepared with ``skin`` (:meth:`jaxcert.Model.prepare`): the padding a graph network pays
    (benchmarks; the cell-list or dense path reports its per-atom slots × atoms)."""
    t = model.prepare(s, skin=skin)
    rc = model.cutoff_for(t)
    i, _, _ = host_edges(t.positions, t.cell, t.pbc, t.mask, rc)
    spec = t.neighbor_list
    if isinstance(spec, EdgeListSpec):
        return len(i), int(spec.capacity)
    if isinstance(spec, CellListSpec):
        return len(i), int(spec.capacity) * t.n_atoms
    return len(i), int(dense_candidates(t)[1]) if t.periodic else t.n_atoms * t.n_atoms


# the executable store and stored host values may rebuild these types (jaxcert/core/cache.py)
register_storable(CellListSpec, value=True)
register_storable(NeighborState, node=True)
register_storable(EdgeListSpec, value=True)
register_storable(EdgeState, node=True)
