"""A plain Lennard-Jones pair potential in torch (energy shifted to zero at r_c), for bridge tests.

Its ASE twin is ``ase.calculators.lj.LennardJones(smooth=False)`` with the same σ, ε, r_c, so
energies, forces and stresses can be compared number for number.
"""

import numpy as np
import torch
from ase.neighborlist import neighbor_list

SIGMA, EPS, RC = 2.3, 0.2, 5.0  # Å, eV, Å


class TorchLJ:
    name = "torch-lj"
    cutoff = RC
    elements = None

    def __init__(self, fail_below: int = 0, fail_numbers: tuple[int, ...] = ()):
        self.fail_below = fail_below  # raise for geometries with fewer atoms (a model that cannot do pairs)
        self.fail_numbers = set(fail_numbers)  # raise for geometries holding these elements

    def _pair(self, r2):
        s6 = (SIGMA**2 / r2) ** 3
        e0 = 4 * EPS * ((SIGMA / RC) ** 12 - (SIGMA / RC) ** 6)
        return 4 * EPS * (s6 * s6 - s6) - e0

    def energies(self, systems, positions, cells, dtype):
        out = []
        for s, R, h in zip(systems, positions, cells, strict=True):
            if s.n_atoms < self.fail_below:
                raise RuntimeError(f"graph of {s.n_atoms} atoms has no triplets")
            if self.fail_numbers & {int(z) for z in np.asarray(s.numbers)}:
                raise RuntimeError("no embedding for this element")
            atoms = s.to_ase()
            i, j, S = neighbor_list("ijS", atoms, RC)
            keep = i < j if not any(s.pbc) else np.ones(len(i), bool)
            i, j, S = (torch.as_tensor(x[keep]) for x in (i, j, S))
            d = R[j] - R[i] + S.to(dtype) @ h
            e = self._pair((d * d).sum(-1))
            out.append(e.sum() * (1.0 if not any(s.pbc) else 0.5))
        return torch.stack(out)
