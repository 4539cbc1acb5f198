"""The 14 certification probes (PROBES.md §4), the suite and the contract.

Each probe is ``jaxcert.probes.<name>(model, key, config=..., substrate=None) -> ProbeResult``.
Importing this package registers every probe in :data:`PROBES`.
"""

import importlib

from jaxcert.probes.base import PROBES, ProbeResult, ProbeSkip, ProbeSpec, score_map

_MODULES = (
    "conservativeness", "equivariance", "smoothness", "stress_consistency", "parity", "representation",
    "cross_maxwell", "betti", "zero_modes", "trimer", "reversibility", "config_temperature",
    "equipartition", "virial",
)

for _m in _MODULES:
    _mod = importlib.import_module(f"jaxcert.probes.{_m}")
    globals()[_m] = getattr(_mod, _m)

from jaxcert.probes.suite import DEFAULT_ORDER, certify, combine_scores  # noqa: E402

__all__ = ["PROBES", "ProbeResult", "ProbeSkip", "ProbeSpec", "score_map", "certify", "combine_scores",
           "DEFAULT_ORDER", *_MODULES]
