r"""Throughput of a model: model evaluations per second of the suite, atom·steps per second of NVE dynamics.

The report's ``"throughput"`` object (``certify(..., throughput=True)``; the CLI's ``certify --throughput`` and
``board`` ask for it; docs/board.md, "Throughput") holds:

* ``suite``: the model evaluations of the probes that ran (their ``n_evals``) over the wall time of
  those probes (their ``wall_s``), in evaluations per second.  It is the end-to-end rate of the suite as
  run: tracing, compilation and the host work between programs included, so a cold run (empty
  compilation cache) reads lower than a warm one.  Probes kept from an earlier run by ``--resume`` enter
  with the evaluations and wall time recorded when they ran.
* ``nacl``: atom·steps per second measured as the published finite-difference board (pescert-bench)
  measures its speed column, so the two columns can be set side by side: NaCl rocksalt, a = 5.64 Å, the
  2-atom primitive cell repeated 5 × 5 × 2 (100 atoms, :func:`nacl_cell`); NVE velocity Verlet
  (:func:`jaxcert.optim.dynamics.velocity_verlet`), 1 fs, velocities drawn at 300 K; 20 warm-up steps, then
  three timed repeats of 100 steps, each continuing the trajectory; the rate is the mean of the three
  repeats' n_atoms · 100 / wall time, with their sample standard deviation (:func:`nacl_rate`).  JAX compiles
  the 100-step program before the clock starts (``compile_s``); the warm-up's own 20-step program compiles
  during the warm-up, as a PyTorch model's first calls do.
* ``md``: only when ``nacl`` could not be measured (a model without Na or Cl): the same integrator on about
  100 atoms of the first element the model supports, its reference crystal repeated r × r × r times,
  r = round((100 / atoms per cell)^(1/3)) (:func:`md_rate`; one untimed run of the 50-step program, then one
  timed).  Not comparable with the published column; the board shows it in the model's card only.
* ``hardware`` (:func:`jaxcert.core.device.hardware`) and ``peak_memory``
  (:func:`jaxcert.core.device.peak_memory`): what the rates were measured on, and the peak memory of the run.

Wall-clock rates depend on what else the machine is doing: the machine's load average is in the report's
``machine`` object.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

from jaxcert.core import inputs
from jaxcert.core.device import device_name, hardware, peak_memory
from jaxcert.core.model import Model
from jaxcert.core.neighbors import grow, list_ok
from jaxcert.core.structure import Structure
from jaxcert.optim.dynamics import maxwell_boltzmann, velocity_verlet, verlet_program
from jaxcert.probes.base import NOT_RUN
from jaxcert.probes.substrates import bulk_atoms

__all__ = ["suite_rate", "md_cell", "md_rate", "nacl_cell", "nacl_rate", "throughput", "MD_ATOMS", "MD_STEPS",
           "MD_TIMESTEP_FS", "MD_TEMPERATURE_K", "NACL_A", "NACL_REPEAT", "NACL_WARMUP_STEPS", "NACL_TIMED_STEPS",
           "NACL_REPEATS", "NACL_SYSTEM"]

#: About this many atoms in the MD cell (the published board's 100-atom cell).
MD_ATOMS = 100
#: Timed velocity Verlet steps (after an untimed run of the same program).
MD_STEPS = 50
#: Time step (fs) and initial temperature (K) of the measured run.
MD_TIMESTEP_FS, MD_TEMPERATURE_K = 1.0, 300.0
#: The published board's throughput cell: NaCl rocksalt of lattice constant NACL_A (Å), the primitive cell
#: repeated NACL_REPEAT times (100 atoms).
NACL_A, NACL_REPEAT = 5.64, (5, 5, 2)
#: Its protocol: warm-up steps, timed steps per repeat, and repeats (pescert-bench's ``throughput`` entry of
#: every model: ``warmup_steps`` 20, ``timed_steps`` 100, ``n_repeats`` 3).
NACL_WARMUP_STEPS, NACL_TIMED_STEPS, NACL_REPEATS = 20, 100, 3
NACL_SYSTEM = f"NaCl rocksalt a={NACL_A} A, primitive x {NACL_REPEAT}"
#: Enlargements of an overflowing neighbour list during the timed repeats before the measurement gives up.
_MAX_REGROWTHS = 4


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
        return {"error": _why(err), "element": element}
    return {"integrator": "NVE velocity Verlet (jaxcert.optim.dynamics)", "element": element, "n_atoms": n,
            "n_steps": int(n_steps), "warmup_steps": int(n_steps), "timestep_fs": float(timestep_fs),
            "temperature_k": float(temperature_k), "wall_s": wall,
            "atom_steps_per_s": n * n_steps / wall if wall > 0 else None, "energy_drift_eV_per_atom": drift}


def nacl_cell(dtype: Any = None) -> Structure:
    """The published board's throughput cell (module docstring): NaCl rocksalt, a = :data:`NACL_A` Å, the 2-atom
    primitive cell repeated :data:`NACL_REPEAT` times, 100 atoms."""
    from ase.build import bulk

    return Structure.from_ase(bulk("NaCl", "rocksalt", a=NACL_A).repeat(NACL_REPEAT), dtype=dtype)


def _why(err: BaseException) -> str:
    return (f"model called sys.exit({err.code!r})" if isinstance(err, SystemExit) else
            f"{type(err).__name__}: {str(err).strip()[:300]}")


def nacl_rate(model: Model, dtype: Any = None, warmup_steps: int = NACL_WARMUP_STEPS,
              timed_steps: int = NACL_TIMED_STEPS, n_repeats: int = NACL_REPEATS,
              timestep_fs: float = MD_TIMESTEP_FS, temperature_k: float = MD_TEMPERATURE_K,
              seed: int = 0) -> dict[str, Any]:
    """Atom·steps per second of NVE velocity Verlet on :func:`nacl_cell`, measured as the published board measures
    it (module docstring): ``warmup_steps`` untimed steps, then ``n_repeats`` timed runs of ``timed_steps`` steps,
    each continuing from where the last ended.

    Returns ``{"system", "n_atoms", "integrator", "timestep_fs", "temperature_k", "warmup_steps", "timed_steps",
    "n_repeats", "repeat_atom_steps_per_s", "atom_steps_per_s" (their mean), "atom_steps_per_s_stdev" (their sample
    standard deviation), "ms_per_step", "compile_s", "wall_s", "energy_drift_eV_per_atom"}``; the drift (total
    energy per atom, end of the last repeat minus start of the first) says whether the run was sane NVE.  A model
    that has no parameters for Na or Cl, or fails in any way (``sys.exit`` included), gives
    ``{"error": message, "system": ...}``: its report is written all the same.
    """
    supported = inputs.supported_elements(model)
    if supported is not None and not {"Na", "Cl"} <= set(supported):
        return {"error": f"the model has no parameters for {', '.join(e for e in ('Na', 'Cl') if e not in supported)}",
                "system": NACL_SYSTEM}
    try:
        s = model.prepare(nacl_cell(dtype))
        n = int(np.sum(np.asarray(s.mask)))
        v = maxwell_boltzmann(jax.random.key(seed), s, temperature_k)
        t0 = time.perf_counter()
        warm = jax.block_until_ready(velocity_verlet(model, s, v, timestep_fs, warmup_steps))  # its compile too
        warm_s = time.perf_counter() - t0
        s = s.replace(positions=warm.positions, neighbor_state=warm.neighbor_state)
        v = warm.velocities
        t0 = time.perf_counter()
        program = verlet_program(model, s, v, timestep_fs, timed_steps)
        compile_s = time.perf_counter() - t0
        rates, energies, regrown = [], [], 0
        while len(rates) < n_repeats:
            t0 = time.perf_counter()
            res = jax.block_until_ready(program(model, s, v, timestep_fs))
            wall = time.perf_counter() - t0
            if not bool(np.all(np.asarray(list_ok(res.neighbor_state)))):  # overflowed: larger list, same repeat
                if regrown == _MAX_REGROWTHS:
                    raise RuntimeError(f"the neighbour list still overflows after {regrown} enlargements")
                regrown += 1
                s = model.prepare(grow(s))
                program = verlet_program(model, s, v, timestep_fs, timed_steps)
                continue
            rates.append(n * timed_steps / wall)
            energies.append(np.asarray(res.energies, float))
            s = s.replace(positions=res.positions, neighbor_state=res.neighbor_state)
            v = res.velocities
    except (Exception, SystemExit) as err:  # noqa: BLE001 - optional; the report says why it is missing
        return {"error": _why(err), "system": NACL_SYSTEM}
    e = np.concatenate(energies)
    drift = float((e[-1] - e[0]) / n) if np.all(np.isfinite(e)) else None
    mean = float(statistics.fmean(rates))
    return {"system": NACL_SYSTEM, "n_atoms": n,
            "integrator": f"NVE velocity Verlet, {timestep_fs} fs, {temperature_k} K init (jaxcert.optim.dynamics)",
            "timestep_fs": float(timestep_fs), "temperature_k": float(temperature_k),
            "warmup_steps": int(warmup_steps), "timed_steps": int(timed_steps), "n_repeats": int(n_repeats),
            "repeat_atom_steps_per_s": [float(r) for r in rates], "atom_steps_per_s": mean,
            "atom_steps_per_s_stdev": float(statistics.stdev(rates)) if len(rates) > 1 else None,
            "ms_per_step": 1e3 * n / mean, "compile_s": compile_s, "warmup_s": warm_s,
            "wall_s": float(sum(n * timed_steps / r for r in rates)), "energy_drift_eV_per_atom": drift,
            **({"list_regrown": regrown} if regrown else {})}


def throughput(model: Model, elements: Sequence[str], outcomes: Sequence[Any], dtype: Any = None,
               md: bool | dict[str, Any] = True, nacl: bool | dict[str, Any] = True,
               memory_since_reset: bool = False) -> dict[str, Any]:
    """The report's ``"throughput"`` object (module docstring): the device and hardware, :func:`suite_rate` of
    ``outcomes``, :func:`nacl_rate` and, only where that failed, :func:`md_rate` on the first of ``elements`` (the
    elements the model supports, in the run's order), then the run's peak memory.

    ``nacl`` and ``md`` may each be an earlier measurement of this model on this device (a resumed report): it is
    kept, marked ``"kept": true``, instead of measured again.  ``False`` skips the measurement.
    ``memory_since_reset``: the host peak-memory count was reset when the run began
    (:func:`jaxcert.core.device.reset_peak_memory`), so the peak is this run's."""
    out: dict[str, Any] = {"device": device_name(), "hardware": hardware(), "suite": suite_rate(outcomes),
                           "nacl": None, "md": None}
    if isinstance(nacl, dict):
        out["nacl"] = {**nacl, "kept": True}
    elif nacl:
        out["nacl"] = nacl_rate(model, dtype)
    if isinstance(md, dict):
        out["md"] = {**md, "kept": True}
    elif md and elements and (out["nacl"] is None or "error" in out["nacl"]):
        out["md"] = md_rate(model, elements[0], dtype)
    out["peak_memory"] = peak_memory(memory_since_reset)
    return out
