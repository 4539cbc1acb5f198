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
  ``emt_soft``, ``emt_stiff``: EMT committee variants;
* one planted failure per dimer observable on Mo and W (docs/detective.md §2.1, §7): ``lj_issue28_barrier`` (issue
  28's 0.2 eV bump at 4 Å on Mo–Mo, Mo–W, W–W), ``lj_planted_barrier`` (0.3 eV, above every asymptote),
  ``lj_planted_secondary_well``, ``lj_planted_collapse``, ``lj_planted_force_mismatch``;
* ``lj_planted_wall_dip``: a pocket on the W–W repulsive wall (the ``wall_dip`` observable);
* ``emt_coverage_barrier``: a C–Cu desorption barrier that exists only while CO sees its own periodic images (in a
  2×2 Cu(111) cell, not in 3×3): an image artefact the robustness probe must label (docs/detective.md §4.6);
* for the desorption observables: ``emt_planted_asymptote`` (a C/Cu reference shift: the desorbed state is not
  the sum of its fragments) and ``emt_planted_force_mismatch`` (a C–Cu force term missing from the energy).

Issue 28's search::

    jaxcert investigate --target jaxcert.detective.examples:lj_issue28_barrier \\
        --committee lj,jaxcert.detective.examples:lj_soft,jaxcert.detective.examples:lj_stiff \\
        --protocols dimers --elements Cu,Mo,Ni,Al,W,Fe,Ti,Zr --out inv/
"""

from __future__ import annotations

from jaxcert import models
from jaxcert.core.model import Model
from jaxcert.detective import planted

__all__ = ["lj_planted_dimers", "lj_all_planted", "lj_soft", "lj_stiff", "lj_soft_planted", "lj_stiff_planted",
           "emt_planted_desorption", "emt_soft", "emt_stiff", "PLANTED_ELEMENTS", "SHAPE_ELEMENTS",
           "lj_issue28_barrier", "lj_planted_barrier", "lj_planted_secondary_well", "lj_planted_collapse",
           "lj_planted_force_mismatch", "emt_planted_asymptote", "emt_planted_force_mismatch", "lj_planted_wall_dip",
           "emt_coverage_barrier"]

#: The elements of the planted dimer attraction.
PLANTED_ELEMENTS = ("Sb", "Mo")
#: The elements of the planted shape failures (issue 28's Mo–Mo, Mo–W, W–W).
SHAPE_ELEMENTS = ("Mo", "W")


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


def lj_issue28_barrier() -> Model:
    return planted.pair_barrier(models.get("lj"), SHAPE_ELEMENTS, height=0.2, r0=4.0)


def lj_planted_barrier() -> Model:
    return planted.pair_barrier(models.get("lj"), SHAPE_ELEMENTS)


def lj_planted_secondary_well() -> Model:
    return planted.pair_secondary_well(models.get("lj"), SHAPE_ELEMENTS)


def lj_planted_collapse() -> Model:
    return planted.short_range_collapse(models.get("lj"), SHAPE_ELEMENTS)


def lj_planted_force_mismatch() -> Model:
    return planted.force_mismatch(models.get("lj"), SHAPE_ELEMENTS)


def emt_planted_asymptote() -> Model:
    return planted.mixed_reference(models.get("emt"), ["C"], ["Cu"], shift=0.3)


def emt_planted_force_mismatch() -> Model:
    return planted.force_mismatch(models.get("emt"), (), amplitude=0.3, r0=3.2, width=0.3,
                                  element_pairs=[("C", "Cu")])


def lj_planted_wall_dip() -> Model:
    return planted.wall_dip(models.get("lj"), ["W"])


def emt_coverage_barrier() -> Model:
    return planted.coverage_barrier(models.get("emt"), "C", "Cu")
