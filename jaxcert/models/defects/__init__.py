r"""Defect wrappers: models that break exactly one physical identity, by a tunable amount.

Each factory ``f(model, strength=..., ...) -> Model`` wraps a clean model and
adds one defect.  Conventions shared by all of them:

* **Knobs are parameter leaves.**  The wrapped model's ``params`` is a dict
  ``{"inner": <clean params>, "strength": <array>, ...}`` (further continuous
  knobs such as an axis or a length are leaves too), so a knob can be swept
  under ``jit`` or ``vmap`` without recompiling: see :func:`with_knobs`.
* **strength 0 is the clean model**, to the last bit for energies and forces
  (the defect enters as ``strength · term`` with a finite term).  For
  :func:`bad_stress` the knob is ``factor`` and ``factor = 1`` is clean.
* **Heads are kept consistent.**  An energy defect adds its exact gradient to an
  inner direct force head and its exact strain derivative to an inner stress
  head; without inner heads the wrapper has none either (forces = −∇E,
  stress = (1/V) ∂E/∂ε).  So a conservative defect never makes a model
  non-conservative by accident.
* **Lengths.**  A length knob given as ``None`` is *element-adaptive*: a multiple
  of the nearest-neighbour distance d_nn of the reference crystal
  (:func:`jaxcert.core.elements.d_nn`, averaged over the species present, as the
  reference Lennard-Jones does for σ), so one default serves every element.  A
  float is taken in Å.  The wrapper's ``cutoff`` is the larger of the inner
  model's and the defect's, so :meth:`Model.prepare` counts enough images.
* **Names** read ``"<inner>+<defect>(<knob>)"``, e.g. ``"lj+curl(0.3)"``.

The modules are by family: ``_nonconservative`` (curl, nonintegrable), ``_symmetry`` (orientation,
chirality, eggbox), ``_extensivity`` (nonextensive), ``_roughness`` (ripple, kinked, step, noise) and ``_stress``
(bad_stress, parity_stress), on the shared wrapper of ``_base``. :data:`DEFECTS` is the registry the CLI's
``--defect name=value`` reads. Which probes each defect must and must not trip is a test oracle, kept with
the tests (``tests/_defect_oracle.py``).

The defects (docs/probes.md §8.2 names in brackets):

=================  =======================================================  ====================
name               term                                                     broken identity
=================  =======================================================  ====================
curl               F_i += s n̂ × (R_i − R̄)  [NonConservative]               F = −∇E (fixed axis)
nonintegrable      F_i += s Σ_j ½(q_i + q_j) v(r_ij) r̂_ij                   F = −∇E only
orientation        E += c Σ_i (R_i·n̂)²  [SymmetryBreaking]                  E(3) invariance
chirality          E += A Σ_i v_i · ax([T_i, U_i])                         improper rotations
eggbox             E += A Σ_i Σ_G ŵ_G cos(G·R_i)                           translation
nonextensive       E += c ⟨ρ⟩  (mean-pooled density)                        extensivity
bad_stress         σ ← factor·σ  [BadStress]                                σ = (1/V)∂E/∂ε
parity_stress      σ_xy += a Σ_i sin(2π z_i^frac)  [ParityBreakingStress]   stress parity
ripple             E += A Σ_pairs sin(2π r/λ) f_c(r)                        bond-scan regularity
kinked             E += A Σ_pairs (|r − d₀| − smooth) f_c(r)  [Kinked]       C¹ continuity
step               E += A Σ_pairs H(r_s − r)                                C⁰ continuity
noise              F_i += s ξ_i(bits of R)                                  deterministic smooth F
=================  =======================================================  ====================
"""

from __future__ import annotations

from collections.abc import Callable

from jaxcert.core.model import Model
from jaxcert.models.defects._base import with_knobs
from jaxcert.models.defects._extensivity import nonextensive
from jaxcert.models.defects._nonconservative import curl, nonintegrable
from jaxcert.models.defects._roughness import kinked, noise, ripple, step
from jaxcert.models.defects._stress import bad_stress, parity_stress
from jaxcert.models.defects._symmetry import chirality, eggbox, orientation

__all__ = [
    "curl", "nonintegrable", "orientation", "chirality", "eggbox", "nonextensive", "bad_stress",
    "parity_stress", "ripple", "kinked", "step", "noise", "with_knobs", "DEFECTS",
]

#: name → factory ``f(model, knob=...) -> Model``: the names ``--defect name=value`` accepts.
DEFECTS: dict[str, Callable[..., Model]] = {
    "curl": curl,
    "nonintegrable": nonintegrable,
    "orientation": orientation,
    "chirality": chirality,
    "eggbox": eggbox,
    "nonextensive": nonextensive,
    "bad_stress": bad_stress,
    "parity_stress": parity_stress,
    "ripple": ripple,
    "kinked": kinked,
    "step": step,
    "noise": noise,
}
