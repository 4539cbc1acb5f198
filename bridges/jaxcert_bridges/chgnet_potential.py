r"""CHGNet (0.3.0, r2scan; weights inside the ``chgnet`` wheel) as a torch potential.

The energy is CHGNet's own: the crystal graph comes from CHGNet's converter
(neighbour lists from the host geometry, atom graph 5 Å, bond graph 3 Å), and
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

Non-periodic input is put in a box with ≥ cutoff + ½ Å of vacuum (CHGNet's
graph needs a lattice); a slab gets vacuum along its open axis.
"""

from __future__ import annotations

import copy
import functools
import warnings
from typing import Any

import torch

from jaxcert_bridges.backend import boxed

__all__ = ["CHGNetPotential"]


class CHGNetPotential:
    """CHGNet as a torch potential (``energies(systems, positions, cells, dtype)`` in eV).

    Args:
      version: "0.3.0" or "r2scan" (both ship in the wheel) or a path to a checkpoint.
    """

    def __init__(self, version: str = "0.3.0"):
        from chgnet.model import CHGNet

        if version in ("0.3.0", "0.2.0", "r2scan"):
            self.model = CHGNet.load(model_name=version, use_device="cpu", verbose=False)
        else:
            self.model = CHGNet.from_file(version, use_device="cpu", verbose=False)
        self.model.eval()
        self.version = version
        self.name = f"chgnet-{version}"
        self.cutoff = float(self.model.graph_converter.atom_graph_cutoff)
        self.elements = tuple(range(1, 95))

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

    def _graph(self, model, s, R: torch.Tensor, h: torch.Tensor, dt: torch.dtype):
        from pymatgen.core import Lattice, Structure

        sb = boxed(s, margin=self.cutoff + 0.5)
        periodic = torch.tensor([bool(p) for p in s.pbc])
        lattice = torch.where(periodic[:, None], h, torch.as_tensor(sb.cell, dtype=dt))
        struct = Structure(Lattice(sb.cell), [int(z) for z in s.numbers], s.positions, coords_are_cartesian=True)
        g = model.graph_converter(struct)
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
                "cutoff_A": str(self.cutoff), "elements": "H-Pu (Z 1-94)"}

