"""Certify → find → repair: probes and failure findings as differentiable losses (docs/research.md §3).

::

    from jaxcert import repair as rp
    losses = rp.from_escalation(model, "inv/escalation.json")       # the findings of jaxcert investigate
    structs, labels = rp.anchor_structures(["C", "O", "Pt"])        # where the model must stay
    anchor = rp.anchor_loss(model, structs, labels=labels)
    result = rp.repair(model, losses, anchor, steps=300, trainable="radial")
    result.solved, result.after, result.reports_after

Every loss is a pure JAX scalar of the parameters (``jax.grad`` works; ``tests/repair`` checks each against
finite differences), zero for a model that already does what it asks.
"""

from jaxcert.repair._anchor import anchor_structures
from jaxcert.repair._fit import RepairResult, evaluate, repair, trainable_mask
from jaxcert.repair._floor import MAX_BINDING, ZBL_SHARE, wall_floor, zbl
from jaxcert.repair._losses import (
    Batch,
    Loss,
    anchor_loss,
    barrier_loss,
    desorption_loss,
    from_escalation,
    probe_loss,
    wall_loss,
)

__all__ = ["Loss", "Batch", "wall_loss", "barrier_loss", "desorption_loss", "probe_loss", "anchor_loss",
           "from_escalation", "anchor_structures", "repair", "RepairResult", "trainable_mask", "evaluate", "zbl",
           "wall_floor", "MAX_BINDING", "ZBL_SHARE"]
