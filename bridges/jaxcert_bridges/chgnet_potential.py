r"""CHGNet (0.3.0, r2scan; weights inside the ``chgnet`` wheel) as a torch potential.

The energy is CHGNet's own: the crystal graph comes from CHGNet's converter
(neighbour lists from the host geometry, atom graph 6 Å, bond graph 3 Å for 0.3.0), and
the graph's fractional coordinates and lattice are replaced by torch tensors
built from *our* positions and cell, ``frac = R h⁻¹``, so CHGNet's
``atom_cart = frac @ lattice`` is a differentiable function of (R, h).  The
model then runs ``_compute`` without its own force/stress heads; the
composition (AtomRef) energy depends on composition only and is added as a
constant.  E = (e_graph + e_comp) · n for the intensive model (eV).

float64 (docs/install.md): a deep copy with ``.double()``; the graph tensors we
build carry float64 positions and lattice (so nothing is rounded to float32
on the way, which is what ``TORCH_DTYPE`` would otherwise do); the composition
model stays float32 (a constant per composition).  The installed package is not
modified.

Non-periodic input is put in a box with ≥ cutoff + skin + ½ Å of vacuum (CHGNet's
graph needs a lattice); a slab gets vacuum along its open axis.

Isolated atoms (docs/architecture.md "Bridges"): CHGNet's own ASE calculator
evaluates a geometry with atoms that have no neighbour within the atom-graph
cutoff (6 Å for 0.3.0): its converter prints "Structure graph_id=None has n
isolated atom(s) with atom_graph_cutoff=6. CHGNet calculation will likely go
wrong" and the atom keeps only its embedding.  The bridge does the same (the
converter set to "warn"), captures that text and records it for the geometry
(:func:`jaxcert_bridges.backend.note`), so the trimer probe runs on CHGNet with
the warning in its per-element ``model_notes``.  ``isolated_atoms="error"``
keeps the converter's own default instead: the package refuses such a
geometry, and the suite records a skip with CHGNet's reason.

Graph reuse with a skin (``skin`` Å, default 0.5; 0 disables it): a
trajectory (MD, relaxation) evaluates nearly the same geometry at every step.
A graph is built with CHGNet's converter at cutoffs (6 + skin, 3 + skin) Å and
kept (:class:`~jaxcert_bridges.backend.GraphCache`, keyed by numbers, pbc and
periodic cell rows); a later geometry with the same key whose atoms all moved
≤ skin/2 from the build reuses its topology:
every pair now within a cutoff was within cutoff + skin then.  The energy is
the same function: CHGNet's radial bases carry a polynomial envelope that is
exactly zero at and beyond their cutoff (``torch.where``), every atom-graph
message is multiplied by the 6 Å weights and every bond-graph message by the
3 Å weights of both bonds, messages are summed (not averaged) and the norms are
per-row LayerNorms, so the extra edges add exact zeros.  The three-body rows
whose bonds are now longer than 3 Å are dropped at each step (they are zero;
dropping them keeps the cost of a fresh graph).  A geometry with an isolated
atom always takes the package's own converter (so its warning is recorded).
``graph_stats`` counts builds, reuses and fresh package graphs.
"""

from __future__ import annotations

import collections
import contextlib
import copy
import functools
import io
import warnings
from typing import Any

import numpy as np
import torch

from jaxcert_bridges.backend import GraphCache, boxed, note

__all__ = ["CHGNetPotential"]

class CHGNetPotential:
    """CHGNet as a torch potential (``energies(systems, positions, cells, dtype)`` in eV).

    Args:
      version: "0.3.0" or "r2scan" (both ship in the wheel) or a path to a checkpoint.
      skin: graph-reuse skin in Å (0: a fresh package graph at every evaluation).
      isolated_atoms: "warn" (evaluate and note CHGNet's warning, as its ASE calculator does) or
        "error" (CHGNet's converter refuses the geometry).
    """

    def __init__(self, version: str = "0.3.0", skin: float = 0.5, isolated_atoms: str = "warn"):
        from chgnet.graph import CrystalGraphConverter
        from chgnet.model import CHGNet

        if version in ("0.3.0", "0.2.0", "r2scan"):
            self.model = CHGNet.load(model_name=version, use_device="cpu", verbose=False)
        else:
            self.model = CHGNet.from_file(version, use_device="cpu", verbose=False)
        self.model.eval()
        self.version = version
        self.name = f"chgnet-{version}"
        conv = self.model.graph_converter
        if isolated_atoms not in ("warn", "error"):
            raise ValueError(f"isolated_atoms must be 'warn' or 'error', got {isolated_atoms!r}")
        conv.set_isolated_atom_response(isolated_atoms)  # "warn": what CHGNet's ASE calculator does
        self.cutoff = float(conv.atom_graph_cutoff)
        self.bond_cutoff = float(conv.bond_graph_cutoff)
        self.elements = tuple(range(1, 95))
        if not skin >= 0:
            raise ValueError(f"skin must be >= 0 Å, got {skin!r}")
        self.skin = float(skin)
        self._skin_converter = CrystalGraphConverter(
            atom_graph_cutoff=self.cutoff + self.skin, bond_graph_cutoff=self.bond_cutoff + self.skin,
            algorithm=conv.algorithm, on_isolated_atoms="ignore") if self.skin > 0 else None
        self._cache = GraphCache(self.skin) if self.skin > 0 else None
        self.graph_stats: collections.Counter = collections.Counter()

    @functools.lru_cache(maxsize=2)  # noqa: B019 - one float32 and one float64 copy per potential
    def _model(self, dt: torch.dtype):
        if dt == torch.float32:
            return self.model
        m = copy.deepcopy(self.model)
        comp = m.composition_model
        m.composition_model = None
        m = m.to(dt)
        m.composition_model = comp
        m.eval()
        return m

    def _structure(self, s):
        from pymatgen.core import Lattice, Structure

        sb = boxed(s, margin=self.cutoff + self.skin + 0.5)
        return sb, Structure(Lattice(sb.cell), [int(z) for z in s.numbers], s.positions, coords_are_cartesian=True)

    def _package_graph(self, s):
        """CHGNet's own graph of ``s`` (its converter, as its calculator runs it); its message is noted."""
        sb, struct = self._structure(s)
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            g = self.model.graph_converter(struct)
        for line in filter(None, (x.strip() for x in err.getvalue().splitlines())):
            note(s, f"chgnet: {line}")
        self.graph_stats["fresh"] += 1
        return g, sb.cell

    def _template(self, s):
        """A reusable graph for ``s``: (graph, box cell) with every pair within cutoff + skin."""
        got = self._cache.get(s)
        if got is not None:
            self.graph_stats["reused"] += 1
            return got
        sb, struct = self._structure(s)
        g = self._skin_converter(struct)
        if g.atom_graph.dim() == 1:
            g.atom_graph = g.atom_graph.reshape(0, 2)
        self.graph_stats["built"] += 1
        self._cache.put(s, (g, sb.cell))
        return g, sb.cell

    def _skin_graph(self, s):
        """The template's topology at the current geometry, three-body rows beyond the bond cutoff dropped.

        None when an atom has no neighbour within the cutoff now (then the package graph is used).
        """
        g0, box = self._template(s)
        R = np.asarray(s.positions, np.float64)
        lat = np.where(np.asarray(s.pbc)[:, None], s.cell, box)
        ag = g0.atom_graph.numpy()
        d = np.linalg.norm(R[ag[:, 1]] + g0.neighbor_image.numpy() @ lat - R[ag[:, 0]], axis=1)
        if len(np.unique(ag[d <= self.cutoff, 0])) < s.n_atoms:
            return None
        g = copy.copy(g0)
        if len(g0.bond_graph):
            du = d[g0.undirected2directed.numpy()]
            bg = g0.bond_graph.numpy()
            tol = 1e-6 * self.bond_cutoff  # rows at the boundary are zero either way; keep them
            keep = (du[bg[:, 1]] < self.bond_cutoff + tol) & (du[bg[:, 3]] < self.bond_cutoff + tol)
            g.bond_graph = g0.bond_graph[torch.from_numpy(keep)]
        return g, box

    def _graph(self, model, s, R: torch.Tensor, h: torch.Tensor, dt: torch.dtype):
        got = self._skin_graph(s) if self.skin > 0 else None
        g, box = got if got is not None else self._package_graph(s)
        g = copy.copy(g)
        periodic = torch.tensor([bool(p) for p in s.pbc])
        lattice = torch.where(periodic[:, None], h, torch.as_tensor(box, dtype=dt))
        g.lattice = lattice
        g.atom_frac_coord = R @ torch.linalg.inv(lattice)
        g.neighbor_image = g.neighbor_image.to(dt)
        return g

    def energies(self, systems, positions, cells, dt) -> torch.Tensor:
        from chgnet.model.model import BatchedGraph

        model = self._model(dt)
        with warnings.catch_warnings():  # CHGNet copies volumes with torch.tensor(tensor): harmless, noisy
            warnings.simplefilter("ignore", UserWarning)
            graphs = [self._graph(model, s, R, h, dt) for s, R, h in zip(systems, positions, cells, strict=True)]
            bg = BatchedGraph.from_graphs(graphs, bond_basis_expansion=model.bond_basis_expansion,
                                          angle_basis_expansion=model.angle_basis_expansion, compute_stress=False)
        e = model._compute(bg, compute_force=False, compute_stress=False)["e"]
        comp = model.composition_model(graphs).detach().to(dt) if model.composition_model is not None else 0.0
        e = e + comp
        if model.is_intensive:
            n = torch.tensor([s.n_atoms for s in systems], dtype=dt)
            e = e * n
        return e

    def info(self) -> dict[str, Any]:
        import chgnet

        return {"package": f"chgnet {chgnet.__version__}", "checkpoint": self.version,
                "cutoff_A": str(self.cutoff), "elements": "H-Pu (Z 1-94)", "graph_skin_A": str(self.skin)}

