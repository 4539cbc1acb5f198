r"""Host-side backends: what a non-JAX potential must answer, in NumPy, for the JAX side.

A backend evaluates a list of :class:`System` (one geometry each: real atoms only,
positions Å, rows-as-lattice-vectors cell Å, atomic numbers, pbc) and returns

* the energies E (eV) and the full first derivatives
  g_R = ∂E/∂R (eV/Å, shape (n, 3)) and g_h = ∂E/∂h (eV/Å, shape (3, 3), zero
  rows on non-periodic axes) — :meth:`Backend.gradients`;
* directional second derivatives (H·t) for tangents t = (t_R, t_h) of the same
  geometry — :meth:`Backend.hvps`: exact (torch double backward) in
  :class:`jaxcert_bridges.torch_bridge.TorchBackend`, central differences of
  the gradients here by default.

The cell gradient is what makes stress exact and composable: the JAX side
strains (R, h) → (R𝔽ᵀ, h𝔽ᵀ) and differentiates E(R, h) by the chain rule, so
σ = V⁻¹(g_Rᵀ R + g_hᵀ h) comes out of the same two numbers.  A model that only
reports forces F and stress σ (an ASE calculator) gives g_h through that identity,
g_hᵀ = (V σ + Fᵀ R) h⁻¹ (see :func:`cell_gradient`).

Evaluation counting: ``backend.counts`` tallies what JAX asked for (``energy``,
``gradient`` geometries, ``hvp`` tangents, host ``calls``) and what it cost
beyond that: ``fd_gradient`` (displaced-geometry gradients of finite-difference
H·t) and ``double_backward`` (torch passes of exact H·t).  Model forward
evaluations = energy + gradient + fd_gradient (:meth:`Backend.evaluations`).

Model notes: a backend that evaluates a geometry its package only warns about
(CHGNet's "isolated atom(s)" message) calls :func:`note` with the geometry and
the package's own text; ``backend.notes`` keeps text → geometries per element
symbol, and :func:`jaxcert.certify` records the notes a probe caused in that
probe's per-element details (``model_notes``, docs/architecture.md "Bridges").
"""

from __future__ import annotations

import collections
import contextlib
import contextvars
import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["System", "Backend", "GraphCache", "cell_gradient", "boxed", "fd_hvp_step", "note", "collecting_notes"]

#: (geometry, text) pairs noted during the backend call in progress (see :func:`collecting_notes`)
_NOTES: contextvars.ContextVar[list | None] = contextvars.ContextVar("jaxcert_bridge_notes", default=None)


@dataclasses.dataclass(frozen=True, eq=False)
class System:
    """One geometry on the host: positions (n, 3) Å, cell (3, 3) Å (rows), numbers (n,), pbc (3,)."""

    positions: np.ndarray
    cell: np.ndarray
    numbers: np.ndarray
    pbc: tuple[bool, bool, bool]

    @property
    def n_atoms(self) -> int:
        return int(self.positions.shape[0])

    def to_ase(self):
        """This geometry as ``ase.Atoms`` (cell kept as given, even when zero)."""
        from ase import Atoms

        return Atoms(numbers=self.numbers, positions=self.positions, cell=self.cell, pbc=self.pbc)


def cell_gradient(positions: np.ndarray, cell: np.ndarray, forces: np.ndarray, stress: np.ndarray,
                  pbc: Sequence[bool]) -> np.ndarray:
    r"""∂E/∂h (3, 3) eV/Å from forces (eV/Å) and the ASE stress σ (3, 3) eV/Å³ of a periodic cell.

    With R → R𝔽ᵀ and h → h𝔽ᵀ, V σ = ∂E/∂ε = g_Rᵀ R + g_hᵀ h, and g_R = −F, so
    g_hᵀ = (V σ + Fᵀ R) h⁻¹.  Only the symmetric part of ∂E/∂ε is known from a
    stress, which is exact for rotation-invariant models (the only ones whose
    stress is symmetric).  Rows of non-periodic axes are zero.
    """
    if not all(pbc):
        raise ValueError("cell_gradient needs a fully periodic cell")
    V = abs(np.linalg.det(cell))
    gT = (V * stress + forces.T @ positions) @ np.linalg.inv(cell)
    return gT.T


def boxed(s: System, margin: float) -> System:
    """A copy of ``s`` whose non-periodic axes get vacuum: cell vectors of length extent + 2·margin (Å).

    For models that only accept periodic input.  All three axes non-periodic: an
    orthogonal box; one non-periodic axis (a slab): the third vector along the
    normal of the two periodic ones.  Other mixed cases raise ``ValueError``.
    Atoms are not moved: with ≥ ``margin`` of vacuum no edge crosses the box.
    """
    pbc = tuple(bool(p) for p in s.pbc)
    if all(pbc):
        return s
    R = np.asarray(s.positions, np.float64)
    if not any(pbc):
        span = np.ptp(R, axis=0) if len(R) else np.zeros(3)
        cell = np.diag(span + 2.0 * margin + 1.0)
        return dataclasses.replace(s, cell=cell)
    if sum(pbc) == 2:
        k = pbc.index(False)
        a, b = (s.cell[i] for i in range(3) if i != k)
        n = np.cross(a, b)
        n /= np.linalg.norm(n)
        span = float(np.ptp(R @ n)) if len(R) else 0.0
        cell = np.array(s.cell, np.float64)
        cell[k] = n * (span + 2.0 * margin + 1.0)
        return dataclasses.replace(s, cell=cell)
    raise ValueError(f"pbc {pbc}: only fully periodic, non-periodic or slab (one open axis) input is supported")


def note(system: System, text: str) -> None:
    """Record ``text`` (a message the model's package printed or warned) for ``system``.

    Kept by the backend whose call is in progress (:func:`collecting_notes`); a no-op outside one.
    """
    sink = _NOTES.get()
    if sink is not None and text:
        sink.append((system, str(text)))


@contextlib.contextmanager
def collecting_notes(backend: Backend):
    """Collect the :func:`note` calls made inside the block into ``backend.notes`` (text → Counter of symbols)."""
    sink: list = []
    token = _NOTES.set(sink)
    try:
        yield
    finally:
        _NOTES.reset(token)
        if sink:
            from ase.data import chemical_symbols

            for s, text in sink:
                counter = backend.notes.setdefault(text, collections.Counter())
                for z in sorted(set(np.asarray(s.numbers).tolist())):
                    counter[chemical_symbols[int(z)]] += 1


class GraphCache:
    """Neighbour topologies built with cutoff + ``skin``, reused while no atom moved more than skin/2.

    Keyed by (atom count, numbers, pbc, periodic cell rows): a geometry with the same key whose atoms
    are all within skin/2 (Å, Euclidean, no wrapping) of a stored build geometry gets that build's
    payload (the most recent match; up to ``per_key`` builds per key, ``max_entries`` in all, least
    recently used dropped).  Every pair within the cutoff now was within cutoff + skin at the build,
    so a potential that zeroes (or drops) the pairs beyond its cutoff evaluates the same function
    (docs/architecture.md §6.2).  ``stats`` counts ``built`` and ``reused``.
    """

    def __init__(self, skin: float, per_key: int = 8, max_entries: int = 512):
        if not skin > 0:
            raise ValueError(f"skin must be > 0 Å, got {skin!r}")
        self.skin, self.per_key, self.max_entries = float(skin), int(per_key), int(max_entries)
        self._store: collections.OrderedDict = collections.OrderedDict()
        self.stats: collections.Counter = collections.Counter()

    @staticmethod
    def _key(s: System) -> tuple:
        pbc = np.asarray(s.pbc, bool)
        return (s.n_atoms, np.asarray(s.numbers).tobytes(), tuple(pbc.tolist()),
                np.where(pbc[:, None], np.asarray(s.cell, np.float64), 0.0).tobytes())

    def get(self, s: System) -> Any | None:
        """The payload stored for a build geometry within skin/2 of ``s``, or None."""
        entries = self._store.get(self._key(s))
        if entries is None:
            return None
        R = np.asarray(s.positions, np.float64)
        for k, (R0, payload) in enumerate(entries):
            if np.max(np.linalg.norm(R - R0, axis=1), initial=0.0) <= 0.5 * self.skin:
                entries.insert(0, entries.pop(k))
                self._store.move_to_end(self._key(s))
                self.stats["reused"] += 1
                return payload
        return None

    def put(self, s: System, payload: Any) -> None:
        """Store ``payload`` (built at cutoff + skin) for the geometry ``s``."""
        self.stats["built"] += 1
        key = self._key(s)
        entries = self._store.setdefault(key, [])
        self._store.move_to_end(key)
        entries.insert(0, (np.array(s.positions, np.float64), payload))
        del entries[self.per_key:]
        while sum(len(v) for v in self._store.values()) > self.max_entries:
            self._store.popitem(last=False)


def fd_hvp_step(dtype: Any) -> float:
    """Central-difference step (Å) for H·t from gradients: docs/probes.md §1.5's rule for a first derivative."""
    from jaxcert.core.derivatives import fd_step

    return fd_step(1, 2, dtype)


class Backend:
    """A host potential: subclasses implement :meth:`gradients` (and :meth:`hvps` when exact).

    Attributes:
      name: label for reports.
      cutoff: interaction range in Å (used for image counts and vacuum), or None.
      elements: supported atomic numbers, or None for any.
      exact_hvp: True when :meth:`hvps` is exact (autograd), False for finite differences.
      counts: geometries evaluated per kind and host calls.
      notes: messages of the model's package (:func:`note`): text → Counter of element symbols
        (geometries containing that element for which the package gave that text).
    """

    name: str = "backend"
    cutoff: float | None = None
    elements: tuple[int, ...] | None = None
    exact_hvp: bool = False
    #: step (Å) for finite-difference H·t; None: the dtype-aware rule of :func:`fd_hvp_step`
    fd_step: float | None = None

    def __init__(self) -> None:
        self.counts: collections.Counter = collections.Counter()
        self.notes: dict[str, collections.Counter] = {}

    # ---------------------------------------------------------------- required
    def gradients(self, systems: Sequence[System], dtype: Any) -> tuple[np.ndarray, list, list]:
        """Energies (B,) eV, ∂E/∂R list of (n_b, 3) eV/Å and ∂E/∂h list of (3, 3) eV/Å."""
        raise NotImplementedError

    # ---------------------------------------------------------------- optional
    def energies(self, systems: Sequence[System], dtype: Any) -> np.ndarray:
        """Energies (B,) in eV (default: from :meth:`gradients`)."""
        return self.gradients(systems, dtype)[0]

    def hvps(self, systems: Sequence[System], tR: Sequence[np.ndarray], th: Sequence[np.ndarray],
             dtype: Any) -> tuple[np.ndarray, list, list, list, list]:
        r"""Energies, gradients and directional second derivatives for T tangents per system.

        Args:
          systems: B geometries.
          tR: per system (T, n_b, 3) position tangents (Å).
          th: per system (T, 3, 3) cell tangents (Å).

        Returns:
          (E (B,), g_R list (n_b, 3), g_h list (3, 3), Ht_R list (T, n_b, 3), Ht_h list (T, 3, 3)).

        Default: central differences of :meth:`gradients`, one batched call of
        2·B·T displaced geometries with step δ/‖t‖_∞ along each tangent
        (δ from :attr:`fd_step` or :func:`fd_hvp_step`; truncation O(δ²)).
        """
        E, gR, gh = self.gradients(systems, dtype)
        delta = self.fd_step if self.fd_step is not None else fd_hvp_step(dtype)
        shifted, scales = [], []
        for s, tr, tc in zip(systems, tR, th, strict=True):
            for k in range(tr.shape[0]):
                tmax = max(float(np.max(np.abs(tr[k]), initial=0.0)), float(np.max(np.abs(tc[k]), initial=0.0)))
                h = delta / tmax if tmax > 0 else 0.0
                scales.append(h)
                for sign in (1.0, -1.0):
                    shifted.append(dataclasses.replace(s, positions=s.positions + sign * h * tr[k],
                                                       cell=s.cell + sign * h * tc[k]))
        if shifted:
            self.counts["fd_gradient"] += len(shifted)
            _, gRs, ghs = self.gradients(shifted, dtype)
        HR, Hh, i = [], [], 0
        for s, tr in zip(systems, tR, strict=True):
            T = tr.shape[0]
            hr = np.zeros((T, s.n_atoms, 3))
            hc = np.zeros((T, 3, 3))
            for k in range(T):
                h = scales[i // 2]
                if h > 0:
                    hr[k] = (gRs[i] - gRs[i + 1]) / (2 * h)
                    hc[k] = (ghs[i] - ghs[i + 1]) / (2 * h)
                i += 2
            HR.append(hr)
            Hh.append(hc)
        return E, gR, gh, HR, Hh

    def evaluations(self) -> int:
        """Model forward evaluations so far: energy + gradient + finite-difference gradient geometries."""
        return int(self.counts["energy"] + self.counts["gradient"] + self.counts["fd_gradient"])

    def check_elements(self, numbers: np.ndarray) -> None:
        """Raise :class:`jaxcert.UnsupportedElement` for numbers outside :attr:`elements`."""
        if self.elements is None:
            return
        bad = sorted(set(np.asarray(numbers).tolist()) - set(self.elements))
        if bad:
            from ase.data import chemical_symbols

            from jaxcert import UnsupportedElement

            raise UnsupportedElement(
                f"model {self.name!r} has no parameters for {', '.join(chemical_symbols[z] for z in bad)}"
            )
