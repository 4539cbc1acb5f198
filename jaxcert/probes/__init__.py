"""The certification probes (docs/probes.md), the suite and the contract (docs/architecture.md).

The 14 probes of the default run, plus ``lam`` (λ = ‖J_anti‖/‖J‖ on the ten seed-002 structures), which
runs when named (``probes=["lam"]``, ``jaxcert certify --probes lam``; docs/probes.md §4.16).

Each probe is ``jaxcert.probes.<name>(model, key, config=..., substrate=None) -> ProbeResult``. The
implementations live in private modules (``jaxcert.probes._<name>``); their public names are re-exported
here, so ``jaxcert.probes.betti`` is the function and no submodule is shadowed. Importing this package
registers every probe in :data:`PROBES` (each module's ``register`` call), in the order of
:data:`DEFAULT_ORDER`.
"""

from jaxcert.probes._betti import BettiConfig, betti, draw_pairs
from jaxcert.probes._config_temperature import (
    HUTCHINSON_STREAM,
    ConfigTemperatureConfig,
    config_temperature,
    kinetic_dof,
)
from jaxcert.probes._conservativeness import ConservativenessConfig, conservativeness
from jaxcert.probes._cross_maxwell import (
    TRACE_VOIGT,
    CrossMaxwellConfig,
    cross_maxwell,
    relax_positions_and_cell,
    strain_basis,
)
from jaxcert.probes._equipartition import ALIGN_MODES, ROTATION_TOL, EquipartitionConfig, align_frames, equipartition
from jaxcert.probes._equivariance import EquivarianceConfig, equivariance, random_rotations, rodrigues
from jaxcert.probes._lam import LAMBDA_GATE, LamConfig, lam, lambda_of_jacobian
from jaxcert.probes._parity import ParityConfig, inversion_image, parity
from jaxcert.probes._representation import RepresentationConfig, representation, supercell, unimodular
from jaxcert.probes._reversibility import ReversibilityConfig, reversibility
from jaxcert.probes._smoothness import SmoothnessConfig, smoothness, smoothness_terms
from jaxcert.probes._stress_consistency import StressConsistencyConfig, stress_consistency, tensor_norm
from jaxcert.probes._trimer import TrimerConfig, three_body_decay, transverse_asymmetry, trimer, unit_pairs
from jaxcert.probes._virial import VirialConfig, internal_kinetic_energy, virial
from jaxcert.probes._zero_modes import ZeroModesConfig, rigid_basis, spectrum_analysis, zero_modes
from jaxcert.probes.base import (
    PROBES,
    ProbeResult,
    ProbeSkip,
    ProbeSpec,
    bond_of,
    closest_pair,
    precision_bits,
    require_atoms,
    require_stress,
    score_map,
)
from jaxcert.probes.suite import (
    DEFAULT_ORDER,
    ProbeOutcome,
    certify,
    combine_scores,
    probe_key,
    resolve_probes,
    run_on_structures,
)

#: The probe names, in the suite's default order.
NAMES = DEFAULT_ORDER

# The registry lists the probes in the suite's order, whatever order the modules were imported in.
_registered = dict(PROBES)
PROBES.clear()
PROBES.update({name: _registered.pop(name) for name in DEFAULT_ORDER})
PROBES.update(_registered)

__all__ = [
    "PROBES", "ProbeResult", "ProbeSkip", "ProbeSpec", "score_map", "bond_of", "closest_pair", "precision_bits",
    "require_atoms", "require_stress", "certify", "combine_scores", "probe_key", "resolve_probes", "ProbeOutcome",
    "run_on_structures",
    "DEFAULT_ORDER", "NAMES",
    "ConservativenessConfig",
    "conservativeness",
    "EquivarianceConfig",
    "equivariance",
    "random_rotations",
    "rodrigues",
    "SmoothnessConfig",
    "smoothness",
    "smoothness_terms",
    "StressConsistencyConfig",
    "stress_consistency",
    "tensor_norm",
    "ParityConfig",
    "parity",
    "inversion_image",
    "RepresentationConfig",
    "representation",
    "unimodular",
    "supercell",
    "CrossMaxwellConfig",
    "cross_maxwell",
    "relax_positions_and_cell",
    "strain_basis",
    "TRACE_VOIGT",
    "BettiConfig",
    "betti",
    "draw_pairs",
    "ZeroModesConfig",
    "zero_modes",
    "rigid_basis",
    "spectrum_analysis",
    "TrimerConfig",
    "trimer",
    "three_body_decay",
    "transverse_asymmetry",
    "unit_pairs",
    "ReversibilityConfig",
    "reversibility",
    "ConfigTemperatureConfig",
    "config_temperature",
    "HUTCHINSON_STREAM",
    "kinetic_dof",
    "EquipartitionConfig",
    "equipartition",
    "align_frames",
    "ROTATION_TOL",
    "ALIGN_MODES",
    "LamConfig",
    "lam",
    "lambda_of_jacobian",
    "LAMBDA_GATE",
    "VirialConfig",
    "virial",
    "internal_kinetic_energy",
]
