r"""Repair: fine-tune a model's parameters on losses from findings, anchored where it was (docs/research.md §3).

:func:`repair` minimises

.. math::  J(\theta) = \sum_i w_i\,L_i(\theta) + w_a\,L_\mathrm{anchor}(\theta)

with an optax update rule over the parameters a ``trainable`` filter selects (the others are frozen: their
updates are zero), and stops when every finding loss is zero (the model does what each asks) or after ``steps``.
A state file (``state``) makes it resumable: parameters, optimiser state and history are written atomically
every ``every`` steps, and a rerun with the same losses continues from there.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxcert.core.model import Model
from jaxcert.repair._losses import Loss

__all__ = ["RepairResult", "repair", "trainable_mask", "evaluate"]


@dataclasses.dataclass(frozen=True)
class RepairResult:
    """What :func:`repair` returns.

    Attributes:
      params: the repaired parameters (same pytree as ``model.params``).
      model: ``model`` with the repaired parameters.
      before, after: loss name -> value (dimensionless) before and after.
      reports_before, reports_after: loss name -> its physical numbers (eV, Å) before and after.
      history: one row per logged step: ``{"step", "objective", <loss name>: value}``.
      steps: optimiser steps taken (in all runs, resumed ones included).
      solved: every finding loss is zero after the repair.
      trainable: number of trainable parameters, of ``total``.
      wall_s: seconds of this call.
    """

    params: Any
    model: Model
    before: dict[str, float]
    after: dict[str, float]
    reports_before: dict[str, Any]
    reports_after: dict[str, Any]
    history: list[dict[str, float]]
    steps: int
    solved: bool
    trainable: int
    total: int
    wall_s: float

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in ("before", "after", "reports_before", "reports_after", "history", "steps",
                                                  "solved", "trainable", "total", "wall_s")}


def trainable_mask(params: Any, trainable: str | Callable[[str], bool] | None) -> Any:
    """A pytree of bools like ``params``: which leaves the repair may change.  ``None``: every inexact leaf; a
    string: a regular expression searched in the leaf's key path (``jax.tree_util.keystr``, e.g.
    ``"radial"`` or ``"layers\\[3\\]"``); a callable: ``path -> bool``."""
    def pick(path: Any, x: Any) -> bool:
        if not (hasattr(x, "dtype") and jnp.issubdtype(jnp.asarray(x).dtype, jnp.inexact)):
            return False
        key = jax.tree_util.keystr(path)
        if trainable is None:
            return True
        if isinstance(trainable, str):
            return re.search(trainable, key) is not None
        return bool(trainable(key))

    return jax.tree_util.tree_map_with_path(pick, params)


def evaluate(losses: Sequence[Loss], params: Any) -> tuple[dict[str, float], dict[str, Any]]:
    """(loss name -> value, loss name -> its report) at ``params``."""
    vals = {lo.name: float(lo(params)) for lo in losses}
    reps = {lo.name: lo.report(params) for lo in losses if lo.report is not None}
    return vals, reps


def _save_state(path: str, params: Any, opt_state: Any, step: int, history: list, names: list[str]) -> None:
    from jaxcert.core.files import atomic_write

    leaves = [np.asarray(x) for x in jax.tree.leaves((params, opt_state))]
    meta = json.dumps({"step": step, "history": history, "names": names, "n_leaves": len(leaves)})
    import io

    buf = io.BytesIO()
    np.savez(buf, meta=np.frombuffer(meta.encode(), np.uint8), **{f"l{k}": x for k, x in enumerate(leaves)})
    atomic_write(path, buf.getvalue())


def _load_state(path: str, like: Any, names: list[str]) -> tuple[Any, int, list] | None:
    if not os.path.isfile(path):
        return None
    with np.load(path) as z:
        meta = json.loads(bytes(z["meta"]).decode())
        if meta["names"] != names:
            raise ValueError(f"state: {path} belongs to a repair with other losses ({', '.join(meta['names'])}); "
                             "remove it or use another --out")
        leaves = [z[f"l{k}"] for k in range(meta["n_leaves"])]
    treedef = jax.tree.structure(like)
    if treedef.num_leaves != len(leaves):
        raise ValueError(f"state: {path} does not fit this model's parameters")
    ref = jax.tree.leaves(like)
    restored = jax.tree.unflatten(treedef, [jnp.asarray(x, r.dtype) for x, r in zip(leaves, ref, strict=True)])
    return restored, int(meta["step"]), list(meta["history"])


def repair(model: Model, findings: Sequence[Loss], anchor: Loss | None = None, *, steps: int = 300,
           learning_rate: float = 1e-3, trainable: str | Callable[[str], bool] | None = None,
           optimizer: Any = None, every: int = 10, state: str | os.PathLike | None = None,
           log: Callable[[str], None] | None = None, extra: Sequence[Loss] = (),
           max_seconds: float | None = None) -> RepairResult:
    """Fine-tune ``model`` until every finding loss is zero (docs/research.md §3).

    Args:
      model: the model (any :class:`~jaxcert.Model`; its ``params`` are optimised).
      findings: the losses to drive to zero (:func:`~jaxcert.repair.wall_loss`, ``barrier_loss``, ``probe_loss``,
        or :func:`~jaxcert.repair.from_escalation`).
      anchor: self-distillation loss (:func:`~jaxcert.repair.anchor_loss`), or None.
      steps: at most this many optimiser steps (in all, a resumed run included).
      learning_rate: of the default rule, ``optax.adam``.
      trainable: which parameters may change (:func:`trainable_mask`); the others are frozen.
      optimizer: an ``optax.GradientTransformation`` instead of Adam.
      every: log, check and (with ``state``) save every this many steps.
      state: a file that makes the repair resumable (written atomically).
      log: progress lines (None: quiet).
      extra: losses only evaluated before and after (e.g. a held-out anchor), never optimised.
      max_seconds: stop at the first logged step after this many seconds of this call (the state is saved; a
        rerun continues).

    Returns:
      :class:`RepairResult`.
    """
    import optax

    if steps < 0:
        raise ValueError(f"steps: got {steps}; allowed: >= 0")
    if not findings:
        raise ValueError("findings: at least one loss to repair")
    t0 = time.perf_counter()
    say = log or (lambda _m: None)
    objective_losses = [*findings, *([anchor] if anchor is not None else [])]
    names = [lo.name for lo in objective_losses]
    if len(set(names)) != len(names):
        raise ValueError(f"findings: loss names must be distinct, got {names}")
    params0 = model.params
    mask = trainable_mask(params0, trainable)
    n_train = int(sum(int(np.size(x)) for x, m in zip(jax.tree.leaves(params0), jax.tree.leaves(mask), strict=True)
                      if m))
    n_total = int(sum(int(np.size(x)) for x in jax.tree.leaves(params0)))
    if n_train == 0:
        raise ValueError(f"trainable: {trainable!r} selects no parameter")
    labels = jax.tree.map(lambda m: "train" if m else "freeze", mask)
    rule = optimizer if optimizer is not None else optax.adam(learning_rate)
    # labels given as a function: a labels pytree that is itself callable (an Equinox module) would be taken for one
    opt = optax.multi_transform({"train": rule, "freeze": optax.set_to_zero()}, lambda _: labels)

    def objective(params: Any) -> tuple[jax.Array, jax.Array]:
        vals = jnp.stack([lo.fn(params) for lo in objective_losses])
        w = jnp.asarray([lo.weight for lo in objective_losses], vals.dtype)
        return jnp.sum(w * vals), vals

    @jax.jit
    def step_fn(params: Any, opt_state: Any) -> tuple[Any, Any, jax.Array, jax.Array]:
        (J, vals), g = jax.value_and_grad(objective, has_aux=True)(params)
        updates, opt_state = opt.update(g, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, J, vals

    before, reports_before = evaluate([*objective_losses, *extra], params0)
    params, opt_state, done, history = params0, opt.init(params0), 0, []
    path = os.fspath(state) if state is not None else None
    if path is not None:
        got = _load_state(path, (params0, opt_state), names)
        if got is not None:
            (params, opt_state), done, history = got
            say(f"[repair] resumed at step {done} from {path}")
    n_find = len(findings)
    solved = bool(all(float(lo(params)) == 0.0 for lo in findings))
    while done < steps and not solved:
        params, opt_state, J, vals = step_fn(params, opt_state)
        done += 1
        if done % every == 0 or done == steps:
            v = np.asarray(vals, np.float64)
            history.append({"step": done, "objective": float(J), **{n: float(x) for n, x in zip(names, v,
                                                                                                  strict=True)}})
            solved = bool(np.all(v[:n_find] == 0.0))
            say(f"[repair] step {done}: objective {float(J):.4g}; " + ", ".join(
                f"{n} {x:.3g}" for n, x in zip(names, v, strict=True)))
            if path is not None:
                _save_state(path, params, opt_state, done, history, names)
            if max_seconds is not None and time.perf_counter() - t0 > max_seconds:
                say(f"[repair] stopped at step {done}: {max_seconds:g} s spent")
                break
    solved = bool(all(float(lo(params)) == 0.0 for lo in findings))
    after, reports_after = evaluate([*objective_losses, *extra], params)
    return RepairResult(params=params, model=model.replace(params=params), before=before, after=after,
                        reports_before=reports_before, reports_after=reports_after, history=history, steps=done,
                        solved=solved, trainable=n_train, total=n_total, wall_s=time.perf_counter() - t0)
