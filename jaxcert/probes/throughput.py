r"""Throughput of a model: model evaluations per second of the suite, atom·steps per second of NVE dynamics.

Two numbers go into every report that asks for them (``certify(..., throughput=True)``; the CLI's
``certify`` and ``board`` ask by default) as the ``"throughput"`` object (docs/board.md, "Throughput"):

* ``suite``: the model evaluations of the probes that ran (their ``n_evals``) over the wall time of
  those probes (their ``wall_s``), in evaluations per second.  It is the end-to-end rate of the suite as
  run: tracing, compilation and the host work between programs included, so a cold run (empty
  compilation cache) reads lower than a warm one.  Probes kept from an earlier run by ``--resume`` enter
  with the evaluations and wall time recorded when they ran.
* ``md``: atom·steps per second of NVE velocity Verlet (:func:`jaxcert.optim.dynamics.velocity_verlet`,
  1 fs, velocities drawn at 300 K) on a periodic cell of about 100 atoms of the first element the model
  supports: the element's reference crystal (:func:`jaxcert.probes.substrates.bulk_atoms`) repeated
  r × r × r times, r = round((100 / atoms per cell)^(1/3)).  The program runs once untimed (its
  compilation and a warm-up of the same ``n_steps``), then once timed; atom·steps/s = n_atoms ·
  n_steps / timed wall time.  The published finite-difference board reports the same quantity.

Both name the device they ran on (:func:`jaxcert.core.device.device_name`).  Wall-clock rates depend on what else the
machine is doing: the machine's load average is in the report's ``machine`` object.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

from jaxcert.core.device import device_name
from jaxcert.core.model import Model
from jaxcert.core.structure import Structure
from jaxcert.optim.dynamics import maxwell_boltzmann, velocity_verlet
from jaxcert.probes.base import NOT_RUN
from jaxcert.probes.substrates import bulk_atoms

__all__ = ["suite_rate", "md_cell", "md_rate", "throughput", "MD_ATOMS", "MD_STEPS",
           "MD_TIMESTEP_FS", "MD_TEMPERATURE_K"]

#: About this many atoms in the MD cell (the published board's 100-atom cell).
MD_ATOMS = 100
#: Timed velocity Verlet steps (after an untimed run of the same program).
MD_STEPS = 50
#: Time step (fs) and initial temperature (K) of the measured run.
MD_TIMESTEP_FS, MD_TEMPERATURE_K = 1.0, 300.0


def suite_rate(outcomes: Sequence[Any]) -> dict[str, Any]:
    """``{"n_evals", "wall_s", "evals_per_s", "probes"}`` over the probe outcomes that ran on some element
    (a probe skipped everywhere is left out; ``evals_per_s`` is ``None`` when no time was spent)."""
    ran = [o for o in outcomes if any(st not in NOT_RUN for st in o.status)]
    n = int(sum(int(np.sum(o.n_evals)) for o in ran))
    wall = float(sum(float(o.wall_s or 0.0) for o in ran))
    return {"n_evals": n, "wall_s": wall, "evals_per_s": n / wall if wall > 0 else None,
            "probes": [o.name for o in ran]}


def md_cell(element: str, n_atoms: int = MD_ATOMS, dtype: Any = None) -> Any:
    """The periodic cell of about ``n_atoms`` atoms of ``element`` (module docstring) as a Structure."""
    atoms = bulk_atoms(element)
    r = max(1, int(round((n_atoms / len(atoms)) ** (1.0 / 3.0))))
    return Structure.from_ase(atoms.repeat(r), dtype=dtype)


def md_rate(model: Model, element: str, dtype: Any = None, n_atoms: int = MD_ATOMS, n_steps: int = MD_STEPS,
            timestep_fs: float = MD_TIMESTEP_FS, temperature_k: float = MD_TEMPERATURE_K,
            seed: int = 0) -> dict[str, Any]:
    """Atom·steps per second of NVE velocity Verlet on :func:`md_cell` (module docstring).

    Returns ``{"integrator", "element", "n_atoms", "n_steps", "warmup_steps", "timestep_fs", "temperature_k",
    "wall_s", "atom_steps_per_s", "energy_drift_eV_per_atom"}``; the drift (last minus first total energy per
    atom, eV) tells whether the run was a sane NVE run.  Any failure, ``sys.exit`` in the model included, is
    returned as ``{"error": message}`` (a model that cannot run this cell still gets its report).
    """
    try:
        s = model.prepare(md_cell(element, n_atoms, dtype))
        v = maxwell_boltzmann(jax.random.key(seed), s, temperature_k)
        jax.block_until_ready(velocity_verlet(model, s, v, timestep_fs, n_steps))  # compile + warm-up
        t0 = time.perf_counter()
        res = jax.block_until_ready(velocity_verlet(model, s, v, timestep_fs, n_steps))
        wall = time.perf_counter() - t0
        n = int(np.sum(np.asarray(s.mask)))
        e = np.asarray(res.energies, float)
        drift = float((e[-1] - e[0]) / n) if np.all(np.isfinite(e)) else None
    except (Exception, SystemExit) as err:  # noqa: BLE001 - optional; the report says why it is missing
        # a model that calls sys.exit during the NVE run is a failed measurement, not the end of the run (Ctrl-C,
        # a KeyboardInterrupt, still stops it)
        why = (f"model called sys.exit({err.code!r})" if isinstance(err, SystemExit) else
               f"{type(err).__name__}: {str(err).strip()[:300]}")
        return {"error": why, "element": element}
    return {"integrator": "NVE velocity Verlet (jaxcert.optim.dynamics)", "element": element, "n_atoms": n,
            "n_steps": int(n_steps), "warmup_steps": int(n_steps), "timestep_fs": float(timestep_fs),
            "temperature_k": float(temperature_k), "wall_s": wall,
            "atom_steps_per_s": n * n_steps / wall if wall > 0 else None, "energy_drift_eV_per_atom": drift}


def throughput(model: Model, elements: Sequence[str], outcomes: Sequence[Any], dtype: Any = None,
               md: bool | dict[str, Any] = True) -> dict[str, Any]:
    """The report's ``"throughput"`` object: the device, :func:`suite_rate` of ``outcomes`` and, with ``md``,
    :func:`md_rate` on the first of ``elements`` (the elements the model supports, in the run's order).
    ``md`` may be an earlier :func:`md_rate` result of this model on this device (a resumed report): it is
    kept, marked ``"kept": true``, instead of measured again."""
    out: dict[str, Any] = {"device": device_name(), "suite": suite_rate(outcomes), "md": None}
    if isinstance(md, dict):
        out["md"] = {**md, "kept": True}
    elif md and elements:
        out["md"] = md_rate(model, elements[0], dtype)
    return out
