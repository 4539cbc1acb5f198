"""The prototype relaxations of the benchmark: ``relax_batch(optimizer="cell")`` vmapped over size buckets.

:func:`_relax_impl` is the one relaxation the benchmark runs (FIRE on ASE's FrechetCellFilter coordinates),
jitted once (:data:`_relax_program`); :func:`relax_all` pads structures into size buckets so each bucket is
one compiled program, and reads every member's outcome back on the host.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxcert.controls.benchmark.geometry import structure
from jaxcert.core.neighbors import with_images
from jaxcert.core.structure import stack, unstack
from jaxcert.optim.relax import relax_batch

__all__ = ["PROTOTYPE_BUCKETS", "relax_all"]

#: Size buckets (atoms) of the padded prototype batches: one compiled relaxation per bucket.
PROTOTYPE_BUCKETS = (4, 8, 16, 32, 100_000)
_EV_PER_A3_IN_GPA = 160.21766208


def _relax_impl(model: Any, batch: Any, fmax: Any, max_steps: Any) -> Any:
    return relax_batch(model, batch, optimizer="cell", fmax=fmax, max_steps=max_steps)


_relax_program = jax.jit(_relax_impl)


def relax_all(model: Any, atoms_list: Sequence[Any], fmax: float, max_steps: int) -> list[dict[str, Any]]:
    """relax_cell (FIRE on the FrechetCellFilter coordinates) vmapped over size buckets of padded structures.

    Returns, per structure: the relaxed ``structure``, ``converged``, ``steps``, the final ``fmax`` (eV/Å) and
    the largest stress component ``smax_GPa``.
    """
    sizes = np.array([len(a) for a in atoms_list])
    out: list[dict[str, Any]] = [{} for _ in atoms_list]
    lo = 0
    for hi in PROTOTYPE_BUCKETS:
        idx = np.flatnonzero((sizes > lo) & (sizes <= hi))
        lo = hi
        if idx.size == 0:
            continue
        ss = []
        for i in idx:
            s = structure(atoms_list[i])
            rc = model.cutoff_for(s)
            ss.append(with_images(s, rc, margin=0.1) if rc is not None else s)
        batch = stack(ss)
        r = _relax_program(model, batch, jnp.asarray(fmax), jnp.asarray(int(max_steps)))
        r = jax.device_get(r)
        for k, (i, st) in enumerate(zip(idx, unstack(r.structure), strict=True)):
            out[i] = {"structure": st, "converged": bool(r.converged[k]), "steps": int(r.steps[k]),
                      "fmax": float(r.fmax[k]), "smax_GPa": float(r.smax[k]) * _EV_PER_A3_IN_GPA}
    return out
