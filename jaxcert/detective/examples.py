"""Zero-argument model factories for ``jaxcert investigate`` examples and tests (docs/detective.md §8).

Every factory is a ``module:attr`` spec for ``--target`` / ``--committee``, e.g.::

    jaxcert investigate --target jaxcert.detective.examples:lj_planted_dimers \\
        --committee lj,jaxcert.detective.examples:lj_soft,jaxcert.detective.examples:lj_stiff \\
        --protocols dimers --elements Sb,Mo,Si,Cu --out inv/

* ``lj_planted_dimers``: the reference LJ with a spurious mid-range attraction for Sb and Mo dimers only;
* ``lj_all_planted``/``lj_soft_planted``/``lj_stiff_planted``: the same attraction in every model (a protocol
  artefact);
* ``lj_soft``, ``lj_stiff``: committee variants of the reference LJ (energy and length scales);
* ``emt_planted_desorption``: EMT with a spurious barrier on the C–Cu distance (CO leaving Cu);
  ``emt_soft``, ``emt_stiff``: EMT committee variants.
"""

from __future__ import annotations

from jaxcert import models
from jaxcert.core.model import Model
from jaxcert.detective import planted

__all__ = ["lj_planted_dimers", "lj_all_planted", "lj_soft", "lj_stiff", "lj_soft_planted", "lj_stiff_planted",
           "emt_planted_desorption", "emt_soft", "emt_stiff", "PLANTED_ELEMENTS"]

#: The elements of the planted dimer attraction.
PLANTED_ELEMENTS = ("Sb", "Mo")


def lj_planted_dimers() -> Model:
    return planted.pair_attraction(models.get("lj"), PLANTED_ELEMENTS)


def lj_all_planted() -> Model:
    return planted.pair_attraction(models.get("lj"), PLANTED_ELEMENTS)


def lj_soft() -> Model:
    return planted.variant(models.get("lj"), 0.9, 1.03, name="lj-soft")


def lj_stiff() -> Model:
    return planted.variant(models.get("lj"), 1.1, 0.97, name="lj-stiff")


def lj_soft_planted() -> Model:
    return planted.pair_attraction(lj_soft(), PLANTED_ELEMENTS)


def lj_stiff_planted() -> Model:
    return planted.pair_attraction(lj_stiff(), PLANTED_ELEMENTS)


def emt_planted_desorption() -> Model:
    return planted.desorption_barrier(models.get("emt"), "C", "Cu")


def emt_soft() -> Model:
    return planted.variant(models.get("emt"), 0.92, 1.02, name="emt-soft")


def emt_stiff() -> Model:
    return planted.variant(models.get("emt"), 1.08, 0.98, name="emt-stiff")
