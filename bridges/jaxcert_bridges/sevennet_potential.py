r"""SevenNet (7net-0, 7net-mf-0 with a modal, 7net-l3i5; weights inside the ``sevenn`` wheel) as a torch potential.

The graph (edge list and integer cell shifts) comes from SevenNet's own graph
builder on the host geometry; the edge vectors are then rebuilt in torch as
``R[dst] − R[src] + shift @ h`` from *our* position and cell tensors and the
network runs module by module without its ``force_output`` head, so energy is
a differentiable function of (R, h) and forces, stress and H·v come from
autograd (SevenNet's eval-mode head would not build the double-backward graph).

Batching: several geometries are evaluated in one call as the disjoint union of
their graphs (node-wise network, no cross edges); per-geometry energies are the
segment sums of SevenNet's atomic energies.

Graph reuse with a skin (``skin`` Å, default 0.5; 0: SevenNet's graph builder
at every evaluation): the edge list is built at cutoff + skin and kept
(:class:`~jaxcert_bridges.backend.GraphCache`); a geometry whose atoms all
moved ≤ skin/2 since the build reuses it, and the edges now longer than the
cutoff are dropped before the network runs.  Dropping is required, not an
optimisation: SevenNet's XPLOR switch is the polynomial
(r_c² − r²)²(r_c² + 2r² − 3r_on²)/(r_c² − r_on²)³ for r ≥ r_on with no
zero beyond r_c, so an edge past the cutoff would contribute.  What remains
is exactly the set of pairs SevenNet's builder finds (pairs at r_c weigh 0).

float64 (docs/install.md): a deep copy with ``.double()``; SevenNet's one-hot
embedding produces float32 features, so floating tensors in the graph are cast
to the model dtype between modules (exact: one-hot values and integer shifts).
The installed package is not modified.
"""

from __future__ import annotations

import collections
import copy
import functools
import warnings
from typing import Any

import numpy as np
import torch

__all__ = ["SevenNetPotential"]

_SHIPPED = ("7net-0", "7net-0_11July2024", "7net-mf-0", "7net-l3i5")


class SevenNetPotential:
    """SevenNet as a torch potential (``energies(systems, positions, cells, dtype)`` in eV).

    Args:
      model: a shipped name ("7net-0", "7net-mf-0", "7net-l3i5") or a checkpoint path.
      modal: the fidelity of a multi-fidelity model ("PBE", "R2SCAN" for 7net-mf-0).
      skin: graph-reuse skin in Å (0: SevenNet's graph builder at every evaluation).
    """

    def __init__(self, model: str = "7net-0", modal: str | None = None, skin: float = 0.5):
        from jaxcert_bridges.backend import GraphCache

        if not skin >= 0:
            raise ValueError(f"skin must be >= 0 Å, got {skin!r}")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from sevenn.calculator import SevenNetCalculator

            calc = SevenNetCalculator(model, modal=modal, device="cpu")
        self.model = calc.model
        self.model.eval()
        self.modal = calc.modal
        self.checkpoint = model
        self.name = f"sevennet-{model}" + (f"-{modal}" if modal else "")
        self.cutoff = float(calc.cutoff)
        self.elements = tuple(sorted(int(z) for z in calc.type_map))
        self.skin = float(skin)
        self._cache = GraphCache(self.skin) if self.skin > 0 else None
        self.graph_stats: collections.Counter = collections.Counter()

    @functools.lru_cache(maxsize=2)  # noqa: B019 - one float32 and one float64 copy per potential
    def _model(self, dt: torch.dtype):
        if dt == torch.float32:
            return self.model
        return copy.deepcopy(self.model).to(dt).eval()

    def _edges(self, s) -> dict:
        """SevenNet's graph dict of ``s``: its builder's, or a reused cutoff + skin build cut back to the cutoff."""
        import sevenn._keys as KEY
        from sevenn.train.dataload import unlabeled_atoms_to_graph

        if self._cache is None:
            self.graph_stats["fresh"] += 1
            return unlabeled_atoms_to_graph(s.to_ase(), self.cutoff, with_shift=True)
        base = self._cache.get(s)
        if base is None:
            base = unlabeled_atoms_to_graph(s.to_ase(), self.cutoff + self.skin, with_shift=True)
            self._cache.put(s, base)
            self.graph_stats["built"] += 1
        else:
            self.graph_stats["reused"] += 1
        R = np.asarray(s.positions, np.float64)
        src, dst = base[KEY.EDGE_IDX]
        vec = R[dst] - R[src] + np.asarray(base[KEY.CELL_SHIFT], np.float64) @ np.asarray(s.cell, np.float64)
        keep = np.linalg.norm(vec, axis=1) < self.cutoff
        d = dict(base)
        d[KEY.EDGE_IDX] = base[KEY.EDGE_IDX][:, keep]
        d[KEY.CELL_SHIFT] = base[KEY.CELL_SHIFT][keep]
        d[KEY.EDGE_VEC] = vec[keep]
        d[KEY.POS] = R
        return d

    def _graph(self, systems, positions, cells, dt):
        import sevenn._keys as KEY
        from sevenn.atom_graph_data import AtomGraphData

        parts, vecs, offset = [], [], 0
        for s, R, h in zip(systems, positions, cells, strict=True):
            d = self._edges(s)
            src, dst = (torch.as_tensor(x, dtype=torch.long) for x in d[KEY.EDGE_IDX])
            shift = torch.as_tensor(d[KEY.CELL_SHIFT], dtype=dt)
            vecs.append(R[dst] - R[src] + shift @ h)
            d[KEY.EDGE_IDX] = d[KEY.EDGE_IDX] + offset
            parts.append(d)
            offset += s.n_atoms
        cat = {
            KEY.NODE_FEATURE: np.concatenate([d[KEY.NODE_FEATURE] for d in parts]),
            KEY.ATOMIC_NUMBERS: np.concatenate([d[KEY.ATOMIC_NUMBERS] for d in parts]),
            KEY.POS: np.concatenate([d[KEY.POS] for d in parts]),
            KEY.EDGE_IDX: np.concatenate([d[KEY.EDGE_IDX] for d in parts], axis=1),
            KEY.EDGE_VEC: np.concatenate([d[KEY.EDGE_VEC] for d in parts]),
            KEY.CELL_VOLUME: np.float64(1.0),
            KEY.NUM_ATOMS: np.int64(offset),
            KEY.INFO: {},
        }
        data = AtomGraphData.from_numpy_dict(cat)
        data[KEY.EDGE_VEC] = torch.cat(vecs)
        if self.modal:
            data[KEY.DATA_MODALITY] = self.modal
        return data

    def energies(self, systems, positions, cells, dt) -> torch.Tensor:
        import sevenn._keys as KEY

        model = self._model(dt)
        data = model._preprocess(self._graph(systems, positions, cells, dt))
        for name, module in model._modules.items():
            if name == "force_output":
                continue
            data = module(data)
            if dt != torch.float32:
                for key in data.keys():
                    v = data[key]
                    if isinstance(v, torch.Tensor) and v.dtype == torch.float32:
                        data[key] = v.to(dt)
        atomic = data[KEY.ATOMIC_ENERGY].reshape(-1)
        owner = torch.repeat_interleave(torch.arange(len(systems)), torch.tensor([s.n_atoms for s in systems]))
        return torch.zeros(len(systems), dtype=atomic.dtype).index_add(0, owner, atomic)

    def info(self) -> dict[str, Any]:
        import sevenn

        return {"package": f"sevenn {sevenn.__version__}", "checkpoint": self.checkpoint,
                "modal": str(self.modal), "cutoff_A": str(self.cutoff), "elements": f"{len(self.elements)} elements",
                "graph_skin_A": str(self.skin)}
