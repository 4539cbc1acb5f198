"""jaxcert: exact, batched certification of machine-learning interatomic potentials in JAX.

Core objects: :class:`Structure` (a pytree of positions Å, numbers, cell Å, pbc,
masses amu, mask), :class:`Model` (pure energy function, optional force/stress
heads), :mod:`jaxcert.derivatives` (exact and finite-difference engines),
:mod:`jaxcert.models` (analytic zoo and defect models), :mod:`jaxcert.substrates`.
``import jaxcert`` never imports torch.
"""

from jaxcert import derivatives, models, neighbors, units
from jaxcert._adapters import Graph, build_graph
from jaxcert._lam import LAMBDA_GATE, LambdaResult, lam, lambda_of_jacobian
from jaxcert._version import __version__
from jaxcert.model import (
    Model,
    StressUnavailable,
    UnsupportedElement,
    UnsupportedStructure,
    from_voigt,
    strain,
    voigt,
)
from jaxcert.probes.suite import certify
from jaxcert.structure import Structure, StructureError, stack, unstack

__all__ = [
    "Structure", "StructureError", "stack", "unstack",
    "Model", "StressUnavailable", "UnsupportedElement", "UnsupportedStructure", "strain", "voigt", "from_voigt",
    "derivatives", "models", "neighbors", "units", "__version__", "certify", "lam", "LambdaResult", "LAMBDA_GATE",
    "lambda_of_jacobian", "Graph", "build_graph",
]
