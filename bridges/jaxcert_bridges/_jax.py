r"""The JAX side of every bridge: a :class:`~jaxcert_bridges.backend.Backend` as a :class:`jaxcert.Model`.

The energy E(R, h) is a ``jax.custom_jvp`` function whose primal is a
``jax.pure_callback`` to the backend and whose JVP is g_R·t_R + g_h·t_h with
(g_R, g_h) from a second ``custom_jvp`` callback; the JVP of *that* one calls
the backend's H·t.  So every first and second derivative jaxcert takes —
forces, stress, J·v, dense Jacobians (jacfwd), ∂σ/∂R, ∂σ/∂γ, Hutchinson traces —
runs unchanged on a bridged model, exact where the backend's H·t is exact.

Limits (stated, not hidden):

* third derivatives, and reverse-over-reverse second derivatives
  (``jax.grad`` of a function of the forces), are not available: JAX cannot
  differentiate or transpose a host callback.  jaxcert's probes use
  forward-over-reverse only.
* Callbacks batch: under ``vmap`` the backend receives all geometries of the
  batch in one call (``vmap_method="expand_dims"``), and H·t calls that share a
  geometry (the 3N tangents of a ``jacfwd``) are grouped so that a torch
  backend runs one forward/backward per geometry and one double backward per
  tangent.
* Padding atoms (``mask`` False) are dropped before the backend sees the
  geometry; their derivatives are zero.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxcert.core.model import Model, UnsupportedElement, UnsupportedStructure
from jaxcert_bridges.backend import Backend, System, collecting_notes

__all__ = ["model_from_backend"]


def _batch(arrays: list[np.ndarray], cores: list[int]) -> tuple[tuple[int, ...], list[np.ndarray]]:
    """Broadcast the leading (batch) dims of ``arrays`` (core ranks ``cores``) and flatten them."""
    leads = [a.shape[: a.ndim - c] for a, c in zip(arrays, cores, strict=True)]
    shape = np.broadcast_shapes(*leads)
    out = [np.broadcast_to(a, shape + a.shape[a.ndim - c:]).reshape((-1,) + a.shape[a.ndim - c:])
           for a, c in zip(arrays, cores, strict=True)]
    return shape, out


def _systems(R, h, Z, m, pbc) -> list[System]:
    out = []
    for r, c, z, k in zip(R, h, Z, m, strict=True):
        k = np.asarray(k, bool)
        out.append(System(np.asarray(r, np.float64)[k], np.asarray(c, np.float64), np.asarray(z)[k].astype(int),
                          pbc))
    return out


def _scatter(mask: np.ndarray, rows: np.ndarray, n: int) -> np.ndarray:
    full = np.zeros(rows.shape[:-2] + (n, 3))
    full[..., np.asarray(mask, bool), :] = rows
    return full


class _Host:
    """Host functions handed to ``pure_callback`` (numpy in, numpy out, any leading batch dims)."""

    def __init__(self, backend: Backend, pbc: tuple[bool, bool, bool]):
        self.backend, self.pbc = backend, pbc
        self.open_rows = np.array([not p for p in pbc])

    def _call(self, method: str, systems: list[System], *args):
        """Run a backend method; a failure becomes :class:`UnsupportedStructure` naming the geometry."""
        try:
            with collecting_notes(self.backend):
                return getattr(self.backend, method)(systems, *args)
        except UnsupportedElement:
            raise
        except Exception as err:  # noqa: BLE001 - re-raised with the geometry that failed
            sizes = sorted({s.n_atoms for s in systems})
            raise UnsupportedStructure(
                f"UnsupportedStructure: model {self.backend.name!r} could not evaluate {len(systems)} "
                f"geometr{'y' if len(systems) == 1 else 'ies'} of {sizes} atoms (pbc {self.pbc}): "
                f"{type(err).__name__}: {err}"
            ) from err

    def energy(self, R, h, Z, m):
        shape, (R, h, Z, m) = _batch([R, h, Z, m], [2, 2, 1, 1])
        dt = R.dtype
        self.backend.counts["calls"] += 1
        self.backend.counts["energy"] += len(R)
        E = self._call("energies", _systems(R, h, Z, m, self.pbc), dt)
        return np.asarray(E, dt).reshape(shape)

    def gradients(self, R, h, Z, m):
        shape, (R, h, Z, m) = _batch([R, h, Z, m], [2, 2, 1, 1])
        dt, n = R.dtype, R.shape[1]
        self.backend.counts["calls"] += 1
        self.backend.counts["gradient"] += len(R)
        E, gR, gh = self._call("gradients", _systems(R, h, Z, m, self.pbc), dt)
        gR = np.stack([_scatter(mk, g, n) for mk, g in zip(m, gR, strict=True)]) if len(gR) else np.zeros(R.shape)
        gh = np.stack(gh) if len(gh) else np.zeros(h.shape)
        gh[:, self.open_rows] = 0.0
        return (np.asarray(E, dt).reshape(shape), gR.astype(dt).reshape(shape + (n, 3)),
                gh.astype(dt).reshape(shape + (3, 3)))

    def hvps(self, R, h, Z, m, tR, th):
        shape, (R, h, Z, m, tR, th) = _batch([R, h, Z, m, tR, th], [2, 2, 1, 1, 2, 2])
        dt, n = R.dtype, R.shape[1]
        th = np.where(self.open_rows[:, None], 0.0, th)
        # group the batch by geometry: one forward/backward per distinct geometry
        groups: dict[bytes, list[int]] = {}
        for b in range(len(R)):
            key = R[b].tobytes() + h[b].tobytes() + Z[b].tobytes() + m[b].tobytes()
            groups.setdefault(key, []).append(b)
        firsts = [idx[0] for idx in groups.values()]
        systems = _systems(R[firsts], h[firsts], Z[firsts], m[firsts], self.pbc)
        masks = [np.asarray(m[b], bool) for b in firsts]
        tRs = [tR[idx][:, mk] for idx, mk in zip(groups.values(), masks, strict=True)]
        ths = [th[idx] for idx in groups.values()]
        self.backend.counts["calls"] += 1
        self.backend.counts["gradient"] += len(systems)
        self.backend.counts["hvp"] += len(R)
        HR, Hh = self._call("hvps", systems, tRs, ths, dt)[3:]
        outHR, outHh = np.zeros((len(R), n, 3)), np.zeros((len(R), 3, 3))
        for u, idx in enumerate(groups.values()):
            outHR[idx] = _scatter(masks[u], HR[u], n)
            outHh[idx] = Hh[u]
        outHh[:, self.open_rows] = 0.0
        return tuple(x.astype(dt).reshape(shape + x.shape[1:]) for x in (outHR, outHh))


@functools.cache
def _functions(backend: Backend, pbc: tuple[bool, bool, bool]):
    host = _Host(backend, pbc)

    def shapes(R, h):
        return (jax.ShapeDtypeStruct((), R.dtype), jax.ShapeDtypeStruct(R.shape, R.dtype),
                jax.ShapeDtypeStruct((3, 3), R.dtype))

    @jax.custom_jvp
    def gradients(R, h, Z, m):
        return jax.pure_callback(host.gradients, shapes(R, h), R, h, Z, m, vmap_method="expand_dims")

    @gradients.defjvp
    def _gradients_jvp(primals, tangents):
        # primal outputs from their own callback: they must stay unbatched when only the tangents are
        # (jacfwd), and the H·t callback's outputs are batched with the tangents
        R, h, Z, m = primals
        tR, th = tangents[0], tangents[1]
        E, gR, gh = gradients(R, h, Z, m)
        HR, Hh = jax.pure_callback(host.hvps, shapes(R, h)[1:], R, h, Z, m, tR, th, vmap_method="expand_dims")
        return (E, gR, gh), (jnp.vdot(gR, tR) + jnp.vdot(gh, th), HR, Hh)

    @jax.custom_jvp
    def energy(R, h, Z, m):
        return jax.pure_callback(host.energy, jax.ShapeDtypeStruct((), R.dtype), R, h, Z, m,
                                 vmap_method="expand_dims")

    @energy.defjvp
    def _energy_jvp(primals, tangents):
        R, h, Z, m = primals
        tR, th = tangents[0], tangents[1]
        E, gR, gh = gradients(R, h, Z, m)
        return E, jnp.vdot(gR, tR) + jnp.vdot(gh, th)

    return energy


def model_from_backend(backend: Backend, name: str | None = None, info: dict[str, str] | None = None) -> Model:
    """Wrap a host backend as a :class:`jaxcert.Model` (energy eV; forces and stress by the chain rule).

    The model has no direct heads: forces are −∂E/∂R and stress V⁻¹∂E/∂ε through
    the backend's exact gradients, so a conservative backend stays conservative.
    """

    def energy_fn(params: Any, s) -> jax.Array:
        del params
        pbc = tuple(bool(p) for p in s.pbc)
        m = s.mask
        return _functions(backend, pbc)(s.positions, s.cell, s.numbers, m)

    energy_fn.backend = backend
    meta = {"bridge": type(backend).__name__, "hvp": "exact (autograd)" if backend.exact_hvp else "finite differences"}
    meta.update(info or {})
    return Model(energy_fn, params=None, name=name or backend.name, cutoff=backend.cutoff,
                 elements=backend.elements, info=tuple(sorted(meta.items())),
                 stress_available=bool(getattr(backend, "has_stress", True)))
