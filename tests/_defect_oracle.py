"""The defect × probe expectations: a test oracle (moved out of ``jaxcert.models.defects``).

``EXPECTED_PROBES`` maps each defect to ``(must_trip, must_not_trip)``
probe names (docs/probes.md §4, plus ``"lam"``, the ‖J_anti‖/‖J‖ benchmark of
seed 002).  Their meaning:

* **must_trip**: the identity the probe certifies is violated at first order in
  the knob on the probe's default substrate, so the probe's defect rises from
  the clean floor in proportion to the strength.  The defaults are sized so that
  the probe fires on the reference LJ of Si (docs/probes.md §7; weakly bound
  elements such as Ar fire more), except betti for curl and nonintegrable,
  whose small antisymmetric Jacobian entries need a larger strength.  A probe
  that samples a few Jacobian or strain entries (betti, cross_maxwell) sees the
  defect with high probability, not certainty.
* **must_not_trip**: the identity holds exactly for every strength (or, for the
  statistical probes config_temperature, virial and equipartition, holds in the
  long-trajectory limit with the same assumptions as for the clean model), so
  the probe stays at the clean model's value up to round-off or sampling noise.
* a probe in **neither** list depends on geometry, element, engine (exact
  autodiff vs finite differences) or relaxer; each docstring says why.
"""

#: Probe names of docs/probes.md §4 plus ``lam``, the λ = ‖J_anti‖/‖J‖ conservativeness probe.
PROBE_NAMES: tuple[str, ...] = (
    "equivariance", "parity", "representation", "zero_modes", "trimer", "conservativeness", "betti",
    "stress_consistency", "cross_maxwell", "reversibility", "config_temperature", "virial", "equipartition",
    "smoothness", "lam",
)


def _not(*trip_and_neither: str) -> tuple[str, ...]:
    """Every probe except the given ones (in PROBE_NAMES order)."""
    return tuple(p for p in PROBE_NAMES if p not in trip_and_neither)


_STAT = ("config_temperature", "virial", "equipartition")

#: defect name → (probes that must trip, probes that must not trip); see the module docstring.
EXPECTED_PROBES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "curl": (
        ("equivariance", "representation", "zero_modes", "trimer", "betti", "cross_maxwell", *_STAT, "lam"),
        ("parity", "stress_consistency", "reversibility"),
    ),
    # zero_modes is in neither list: with forces that are not a gradient the relaxation cannot reach
    # F = 0, and the rotational null vectors of the Hessian exist only at F = 0 (measured: score 0.37 on Si).
    "nonintegrable": (
        ("conservativeness", "betti", "cross_maxwell", "lam"),
        ("equivariance", "parity", "representation", "trimer", "stress_consistency", "reversibility"),
    ),
    "orientation": (
        ("equivariance", "parity", "representation", "zero_modes", "trimer"),
        ("conservativeness", "betti", "stress_consistency", "cross_maxwell", "reversibility", "lam"),
    ),
    "chirality": (("parity",), _not("parity", "smoothness")),
    "eggbox": (
        ("equivariance", "representation", "zero_modes", "trimer"),
        ("parity", "conservativeness", "betti", "stress_consistency", "cross_maxwell", "reversibility", "lam"),
    ),
    "nonextensive": (("representation", "trimer"), _not("representation", "trimer")),
    "bad_stress": (("stress_consistency", "cross_maxwell"), _not("stress_consistency", "cross_maxwell")),
    "parity_stress": (("parity", "cross_maxwell"), _not("parity", "cross_maxwell", "stress_consistency")),
    "ripple": (("smoothness",), _not("smoothness", "reversibility", *_STAT)),
    "kinked": (
        ("smoothness",),
        _not("smoothness", "zero_modes", "cross_maxwell", "reversibility", *_STAT),
    ),
    # an energy step that no derivative sees: forces, stress and trajectories are the clean model's, and the
    # energies other probes compare have the same pair distances on both sides; only the bond scan crosses r_s
    "step": (("smoothness",), _not("smoothness")),
    "noise": (
        ("equivariance", "representation", "conservativeness", "reversibility", "smoothness"),
        ("parity", "stress_consistency"),
    ),
}
