r"""PyTorch potentials with exact derivatives from torch autograd.

A *torch potential* is any object with

* ``energies(systems, positions, cells, dtype) -> Tensor (B,)`` in eV, where
  ``systems`` are the host :class:`~jaxcert_bridges.backend.System` geometries
  (use them, detached, for neighbour lists) and ``positions`` / ``cells`` are
  the matching torch tensors (Å) that require grad: the energy must be a
  differentiable function of *those* tensors (edge vectors built from them,
  e.g. ``R[j] − R[i] + shift @ cell``);
* attributes ``name``, ``cutoff`` (Å or None), ``elements`` (atomic numbers or None).

:class:`TorchBackend` then gives, for B geometries in one torch call (chunks of
``max_batch``):

* gradients: one forward and one backward, ∂E/∂R and ∂E/∂h (exact);
* H·t for T tangents per geometry: one forward, one backward with
  ``create_graph=True``, then one double backward of Σ_b g_b·t_b,k per
  tangent k (``retain_graph``) — exact second derivatives, the same numbers
  ``torch.autograd.functional.hvp`` would give.  ``batched_tangents=True``
  sends all T tangents through one vmapped double backward
  (``is_grads_batched``) instead; measured slower for CHGNet (8 benzenes, 12
  tangents, 1 thread, load 0.6: 16.1 s vs 9.9 s for the loop), so off by
  default.  ``counts["double_backward"]`` counts tangents,
  ``counts["double_backward_passes"]`` torch calls.

Threads: each torch call runs with ``torch_threads`` intra-op threads (default
1; the previous setting is restored after the call; None leaves torch's own).
Measured on this 2-core machine under a load of ≈20 (other jobs): CHGNet energy
+ gradient of a 13-atom cluster took 455–782 ms CPU and 2.6–4.5 s wall with
torch's default 2 threads, 26–30 ms CPU and 0.21–0.27 s wall with 1; a 64-atom
Si cell 2.6–2.9 s CPU vs 0.15–0.17 s (OpenMP threads spin while they wait for
a core).  On a quiet machine more threads may pay off for large cells.

``from_torch(fn)`` also accepts a plain function ``fn(positions, cell, numbers,
pbc) -> energy`` of one geometry.  ``hvp="fd"`` replaces double backward by
central differences of exact gradients (the finite-difference path, for
comparison).  ``precision=None`` follows the JAX dtype of each call (float32 →
torch float32, float64 → torch float64); "float32" / "float64" force one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from jaxcert.core.model import Model
from jaxcert_bridges._jax import model_from_backend
from jaxcert_bridges.backend import Backend, System

__all__ = ["TorchBackend", "FunctionPotential", "from_torch", "torch_dtype"]


def torch_dtype(precision: str | None, dtype: Any) -> torch.dtype:
    """torch dtype for a call: ``precision`` if given, else the (numpy/JAX) dtype of the inputs."""
    name = precision if precision is not None else np.dtype(dtype).name
    if name not in ("float32", "float64"):
        raise ValueError(f"precision must be 'float32', 'float64' or None, got {precision!r}")
    return torch.float64 if name == "float64" else torch.float32


class FunctionPotential:
    """A per-geometry torch energy function ``fn(positions, cell, numbers, pbc) -> scalar`` (eV), looped."""

    def __init__(self, fn: Callable, name: str = "torch", cutoff: float | None = None,
                 elements: Sequence[int] | None = None):
        self.fn, self.name, self.cutoff = fn, name, cutoff
        self.elements = tuple(elements) if elements is not None else None

    def energies(self, systems, positions, cells, dtype):
        return torch.stack([torch.as_tensor(self.fn(R, h, s.numbers, s.pbc)).reshape(())
                            for s, R, h in zip(systems, positions, cells, strict=True)])


class TorchBackend(Backend):
    """Backend over a torch potential: exact gradients and (``hvp="exact"``) exact H·t by double backward.

    Args:
      potential: a torch potential (see module docstring).
      precision: "float32", "float64" or None (follow the input dtype).
      hvp: "exact" (double backward) or "fd" (central differences of gradients).
      max_batch: geometries per torch call.
      torch_threads: torch intra-op threads during a call (None: torch's setting).
      batched_tangents: one vmapped double backward for all tangents (see the module docstring).
    """

    def __init__(self, potential: Any, precision: str | None = None, hvp: str = "exact", max_batch: int = 64,
                 torch_threads: int | None = 1, batched_tangents: bool = False):
        super().__init__()
        if hvp not in ("exact", "fd"):
            raise ValueError(f"hvp must be 'exact' or 'fd', got {hvp!r}")
        self.potential, self.precision, self.max_batch = potential, precision, int(max_batch)
        self.name = getattr(potential, "name", type(potential).__name__)
        self.cutoff = getattr(potential, "cutoff", None)
        els = getattr(potential, "elements", None)
        self.elements = tuple(int(z) for z in els) if els is not None else None
        self.exact_hvp = hvp == "exact"
        self.torch_threads = torch_threads
        self._batched_ok = bool(batched_tangents)  # vmapped double backward (set False on the first failure)

    def _leaves(self, systems: Sequence[System], dt: torch.dtype):
        for s in systems:
            self.check_elements(s.numbers)
        R = [torch.tensor(s.positions, dtype=dt, requires_grad=True) for s in systems]
        h = [torch.tensor(s.cell, dtype=dt, requires_grad=True) for s in systems]
        return R, h

    def _chunks(self, n: int):
        return [range(i, min(n, i + self.max_batch)) for i in range(0, n, self.max_batch)]

    def _threads(self):
        """Context: torch runs with ``torch_threads`` intra-op threads, restored afterwards."""
        import contextlib

        @contextlib.contextmanager
        def ctx():
            old = torch.get_num_threads()
            if self.torch_threads is not None and self.torch_threads != old:
                torch.set_num_threads(int(self.torch_threads))
            try:
                yield
            finally:
                if torch.get_num_threads() != old:
                    torch.set_num_threads(old)

        return ctx()

    def energies(self, systems, dtype):
        with self._threads():
            return self._energies(systems, dtype)

    def gradients(self, systems, dtype):
        with self._threads():
            return self._gradients(systems, dtype)

    def hvps(self, systems, tR, th, dtype):
        if not self.exact_hvp:
            return super().hvps(systems, tR, th, dtype)
        with self._threads():
            return self._hvps(systems, tR, th, dtype)

    def _energies(self, systems, dtype):
        dt = torch_dtype(self.precision, dtype)
        out = []
        for idx in self._chunks(len(systems)):
            sub = [systems[i] for i in idx]
            R, h = self._leaves(sub, dt)
            with torch.no_grad():
                out.append(self.potential.energies(sub, R, h, dt).detach().double().numpy())
        return np.concatenate(out) if out else np.zeros(0)

    def _gradients(self, systems, dtype):
        dt = torch_dtype(self.precision, dtype)
        E, gR, gh = [], [], []
        for idx in self._chunks(len(systems)):
            sub = [systems[i] for i in idx]
            R, h = self._leaves(sub, dt)
            e = self.potential.energies(sub, R, h, dt)
            g = torch.autograd.grad(e.sum(), R + h, allow_unused=True, materialize_grads=True)
            E.append(e.detach().double().numpy())
            gR += [x.detach().double().numpy() for x in g[: len(sub)]]
            gh += [x.detach().double().numpy() for x in g[len(sub):]]
        return (np.concatenate(E) if E else np.zeros(0)), gR, gh

    def _hvps(self, systems, tR, th, dtype):
        dt = torch_dtype(self.precision, dtype)
        E, gR, gh, HR, Hh = [], [], [], [], []
        for idx in self._chunks(len(systems)):
            sub = [systems[i] for i in idx]
            R, h = self._leaves(sub, dt)
            e = self.potential.energies(sub, R, h, dt)
            g = torch.autograd.grad(e.sum(), R + h, create_graph=True, allow_unused=True, materialize_grads=True)
            B, T = len(sub), max(tR[i].shape[0] for i in idx)
            hr = [np.zeros((T,) + tuple(R[b].shape)) for b in range(B)]
            hc = [np.zeros((T, 3, 3)) for b in range(B)]
            # tangents (T, ...) per leaf, zero-padded where a geometry has fewer than T
            tangents = [np.zeros((T,) + tuple(R[b].shape)) for b in range(B)] + [np.zeros((T, 3, 3)) for _ in range(B)]
            for b, i in enumerate(idx):
                tangents[b][: tR[i].shape[0]] = tR[i]
                tangents[B + b][: th[i].shape[0]] = th[i]
            live = [j for j in range(2 * B) if g[j].requires_grad and np.any(tangents[j])]
            if live:  # else zero tangents or a model linear in (R, h): H·t = 0
                H = self._double_backward([g[j] for j in live], R + h,
                                          [torch.as_tensor(tangents[j], dtype=dt) for j in live], T)
                for b in range(B):
                    hr[b] = H[b].detach().double().numpy()
                    hc[b] = H[B + b].detach().double().numpy()
            E.append(e.detach().double().numpy())
            gR += [x.detach().double().numpy() for x in g[:B]]
            gh += [x.detach().double().numpy() for x in g[B:]]
            HR += [hr[b][: tR[i].shape[0]] for b, i in enumerate(idx)]  # each geometry's own T (padded to the most)
            Hh += [hc[b][: th[i].shape[0]] for b, i in enumerate(idx)]
        return (np.concatenate(E) if E else np.zeros(0)), gR, gh, HR, Hh

    def _double_backward(self, outs, inputs, tangents, T: int):
        """Σ_j ∂(outs_j · t_j,k)/∂inputs for k < T: one vmapped torch call, or T calls if vmap fails."""
        self.counts["double_backward"] += T
        if self._batched_ok:
            try:
                H = torch.autograd.grad(outs, inputs, grad_outputs=tangents, retain_graph=True, allow_unused=True,
                                        materialize_grads=True, is_grads_batched=True)
                self.counts["double_backward_passes"] += 1
                return H
            except RuntimeError:  # an op without a batching rule: one tangent at a time
                self._batched_ok = False
        rows = []
        for k in range(T):
            self.counts["double_backward_passes"] += 1
            rows.append(torch.autograd.grad(outs, inputs, grad_outputs=[x[k] for x in tangents], retain_graph=True,
                                            allow_unused=True, materialize_grads=True))
        return [torch.stack([r[j] for r in rows]) for j in range(len(inputs))]


def from_torch(potential: Any, precision: str | None = None, hvp: str = "exact", name: str | None = None,
               cutoff: float | None = None, elements: Sequence[int] | None = None, max_batch: int = 64) -> Model:
    r"""A PyTorch potential as a :class:`jaxcert.Model` with exact derivatives from autograd.

    Forces are −∂E/∂R and stress V⁻¹∂E/∂ε by the chain rule through ∂E/∂R and
    ∂E/∂h (both from one backward pass); J·v = −H·v by double backward
    (``hvp="exact"``) or by central differences of exact forces (``hvp="fd"``).

    Args:
      potential: a torch potential object (``energies(systems, positions, cells, dtype)``)
        or a function ``fn(positions (n,3), cell (3,3), numbers, pbc) -> energy`` of one geometry.
      precision: "float32", "float64" or None (follow the JAX dtype of each call).
      hvp: "exact" or "fd".
      name, cutoff, elements: label, interaction range (Å) and supported atomic
        numbers (taken from the potential when it has them).
      max_batch: geometries per torch call.
    """
    if not hasattr(potential, "energies"):
        potential = FunctionPotential(potential, name=name or getattr(potential, "__name__", "torch"),
                                      cutoff=cutoff, elements=elements)
    backend = TorchBackend(potential, precision=precision, hvp=hvp, max_batch=max_batch)
    if name is not None:
        backend.name = name
    if cutoff is not None:
        backend.cutoff = cutoff
    if elements is not None:
        backend.elements = tuple(int(z) for z in elements)
    return model_from_backend(backend, info={"torch": torch.__version__, "precision": str(precision or "input"),
                                             "hvp_path": hvp})
