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
"""

from __future__ import annotations

import itertools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxcert.geometry import det3, inv3, is_concrete, plane_spacings
from jaxcert.structure import Structure, StructureError

__all__ = ["Pairs", "image_counts", "with_images", "coverage", "pairs", "neighbor_table"]

#: Relative margin on the cutoff when counting images (strain, drift of the cell).
IMAGE_MARGIN = 0.05


class Pairs(NamedTuple):
    """Neighbour candidates of each atom (leading axes may be batched).

    Attributes:
      dR: (n, m, 3) displacement r_j + image - r_i in Å.
      r: (n, m) distance in Å (1.0 where ``mask`` is False, so it is safe to divide).
      mask: (n, m) True for a real pair (both atoms real, not an atom with itself).
      j: (n, m) index of the neighbour atom.
    """

    dR: jax.Array
    r: jax.Array
    mask: jax.Array
    j: jax.Array


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


def with_images(s: Structure, cutoff: float, margin: float = IMAGE_MARGIN) -> Structure:
    """Return ``s`` with its static ``images`` set for ``cutoff`` (Å); keeps a larger existing count."""
    if not is_concrete(s.cell):
        if s.images is None:
            raise StructureError(
                "the cell is traced (inside jit/vmap/grad) and the structure has no static image count; "
                "call model.prepare(structure) or jaxcert.neighbors.with_images(structure, cutoff) "
                "outside the transformation"
            )
        return s
    if not is_concrete(cutoff):  # a cutoff computed inside jit: keep the static count (coverage is checked in pairs)
        if s.images is None:
            raise StructureError(
                "the cutoff is traced and the structure has no static image count; call model.prepare(structure) "
                "or jaxcert.neighbors.with_images(structure, cutoff) outside the transformation"
            )
        return s
    need = image_counts(s.cell, s.pbc, float(cutoff), margin)
    cut = float(cutoff)
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
    """All (atom, neighbour, image) candidates of an unbatched structure.

    Differentiable in ``s.positions`` and ``s.cell``.  ``cutoff`` (Å) sets the
    image count (if ``s.images`` is unset and the cell is concrete) and the
    coverage check; pairs beyond the cutoff are still returned (masking them is
    the model's cutoff function's job, which keeps derivatives smooth).
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
    return Pairs(dR=dR, r=r, mask=real, j=j)


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
    dR = jnp.take_along_axis(p.dR, idx[:, :, None], axis=1)
    dR = jnp.where(overflow, jnp.nan, dR)
    mask = take(p.mask)
    r = jnp.sqrt(jnp.where(mask, jnp.sum(dR * dR, -1), 1.0))
    return Pairs(dR=dR, r=r, mask=mask, j=take(p.j))
