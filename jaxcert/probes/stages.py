r"""Probes as stages around shared model kernels (docs/architecture.md "Kinds and stages").

A probe is declared as a *plan*: ``plan(config, facts) -> (stage_0, stage_1, …, stage_k)``.

* ``stage_0(key, s)`` builds the probe's geometries and returns :class:`Ask` ``(state, requests)``;
* ``stage_i(state, answers)`` reads the answers to the previous requests and asks again, or
* the last stage returns the :class:`~jaxcert.probes.base.ProbeResult`.

Stages never see the model: they see only ``facts`` (:class:`Facts`, static and hashable) and the answers to
their :class:`~jaxcert.probes.kinds.Request` objects.  So the same probe runs two ways:

* alone (:func:`run`): the stages are composed with the requests answered inline
  (:func:`jaxcert.probes.kinds.answer`): one pure JAX function of the model, jittable and differentiable;
* in the suite (:mod:`jaxcert.probes.suite`): each stage is a small vmapped program without the model
  (shared by every model in the executable store), and every request is answered by the one compiled
  program of its (model, kind, shape class).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax

from jaxcert.core.cache import register_storable
from jaxcert.core.model import Model
from jaxcert.core.structure import Structure
from jaxcert.probes import kinds

__all__ = ["Ask", "Facts", "facts_of", "run", "Plan"]


class Ask(NamedTuple):
    """A stage's output when it needs model quantities: the state it carries on, and the requests
    (a pytree with :class:`~jaxcert.probes.kinds.Request` leaves) whose answers the next stage reads."""

    state: Any
    requests: Any


class Facts(NamedTuple):
    """What a plan may know about the model (static): whether it has a stress output and conservative forces."""

    stress: bool
    conservative: bool


#: ``plan(config, facts)`` -> the stage functions
Plan = Callable[[Any, Facts], tuple[Callable[..., Any], ...]]


def facts_of(model: Model) -> Facts:
    """The static :class:`Facts` of ``model``."""
    return Facts(stress=bool(model.stress_available), conservative=bool(model.conservative_forces))


def compose(model: Model, stages: tuple[Callable[..., Any], ...], key: jax.Array, s: Structure) -> Any:
    """The stages composed with inline answers (no jit of its own)."""
    out = stages[0](key, s)
    for stage in stages[1:]:
        out = stage(out.state, kinds.answer(model, out.requests))
    return out


@functools.partial(jax.jit, static_argnames=("plan", "config", "facts"))
def _run(model: Model, key: jax.Array, s: Structure, plan: Plan, config: Any, facts: Facts) -> Any:
    return compose(model, plan(config, facts), key, s)


def run(model: Model, plan: Plan, config: Any, key: jax.Array | None, s: Structure) -> Any:
    """Run ``plan`` on one prepared structure with the requests answered inline (one jitted program).

    ``key`` may be ``None`` for a plan without randomness (a fixed key is passed)."""
    if key is None:
        key = jax.random.key(0)
    return _run(model, key, s, plan, config, facts_of(model))


register_storable(Ask, node=True)
register_storable(Facts, value=True)
