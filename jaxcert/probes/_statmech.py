r"""What the statistical-mechanics plans share (config_temperature, equipartition, virial; docs/probes.md §5).

Each of the three plans asks first for the shared Langevin trajectory (a ``langevin`` request,
:func:`jaxcert.probes.kinds.langevin`, with the probe's key, thermostat and ``n_steps``); the answer is a
:class:`jaxcert.probes.kinds.Fresh`.  A trajectory this request computed (``fresh`` True: alone, or the first
asker in the suite) is charged to the probe (its ``n_evals``, ``reused`` False); one shared from an
earlier identical request (``fresh`` False) costs nothing here (``reused`` True).  :func:`charge`
reads that (traced-safe: ``fresh`` is a traced bool under the suite's vmap).

A trajectory passed by keyword (``trajectory=``, the probes' public functions) is checked and extended
with the model where too short (:func:`jaxcert.optim.dynamics.get_trajectory`) outside the plan; the later
stages then read it as a shared answer and only the extension is charged (:func:`run`).
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp

from jaxcert.core.model import Model
from jaxcert.core.structure import Structure
from jaxcert.optim.dynamics import Trajectory, get_trajectory
from jaxcert.probes import kinds, stages
from jaxcert.probes.base import ProbeResult

__all__ = ["ask_trajectory", "charge", "run"]


def ask_trajectory(cfg: Any, keep_key: bool = False):
    """Stage 0 of a stat-mech plan: ask for the trajectory with the probe's key, thermostat and ``n_steps``;
    the state carried on is the key (``keep_key``, for later draws) or nothing."""
    def ask(key: jax.Array, s: Structure) -> stages.Ask:
        return stages.Ask(key if keep_key else None, kinds.langevin(s, key, cfg.thermostat, cfg.n_steps))

    return ask


def charge(answer: kinds.Fresh) -> tuple[Trajectory, jax.Array, jax.Array]:
    """(trajectory, evaluations charged to this probe, ``reused`` flag) of a ``langevin`` answer."""
    traj = answer.value
    fresh = jnp.asarray(answer.fresh, bool)
    return traj, jnp.where(fresh, traj.n_evals, 0).astype(jnp.int32), ~fresh


@functools.partial(jax.jit, static_argnames=("plan", "config", "facts"))
def _given(model: Model, key: jax.Array, s: Structure, traj: Trajectory, extension: jax.Array,
           plan: stages.Plan, config: Any, facts: stages.Facts) -> ProbeResult:
    """The plan with the trajectory request answered by ``traj`` (as shared), the rest inline; the
    extension's evaluations charged."""
    steps = plan(config, facts)
    out = steps[1](steps[0](key, s).state, kinds.Fresh(traj, jnp.asarray(False)))
    for stage in steps[2:]:
        out = stage(out.state, kinds.answer(model, out.requests))
    extension = jnp.asarray(extension).astype(jnp.int32)
    details = dict(out.details)
    details["trajectory"] = {**details["trajectory"], "md_evals": extension}
    return out._replace(n_evals=out.n_evals + extension, details=details)


def run(model: Model, plan: stages.Plan, config: Any, key: jax.Array, s: Structure,
        trajectory: Trajectory | None) -> ProbeResult:
    """Run a stat-mech plan alone: with its own trajectory (``trajectory=None``, :func:`stages.run`) or on a
    passed one (checked against ``config.thermostat``, extended to ``config.n_steps`` if shorter; only the
    extension is charged and ``reused`` is True)."""
    if trajectory is None:
        return stages.run(model, plan, config, key, s)
    traj, extension, _ = get_trajectory(model, s, key, config.thermostat, config.n_steps, trajectory)
    return _given(model, key, s, traj, extension, plan, config, stages.facts_of(model))
