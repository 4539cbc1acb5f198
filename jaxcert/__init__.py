"""jaxcert: exact, batched certification of machine-learning interatomic potentials in JAX.

Core objects: :class:`Structure` (a pytree of positions Å, numbers, cell Å, pbc,
masses amu, mask), :class:`Model` (pure energy function, optional force/stress
heads), :mod:`jaxcert.core.derivatives` (exact and finite-difference engines),
:mod:`jaxcert.models` (analytic zoo and defect models), :mod:`jaxcert.probes.substrates`.
``import jaxcert`` never imports torch.

The package is laid out in rooms by role (docs/architecture.md, "Rooms"): ``core``, ``adapters``, ``optim``
and ``report`` below; ``probes``, ``models``, ``attacks``, ``controls``, ``detective`` and ``cli`` above them.
``adapters`` is imported first: it installs the ``Model.from_*`` constructors.
"""

from jaxcert import adapters, models
from jaxcert._lam import LAMBDA_GATE, LambdaResult, lam, lambda_of_jacobian
from jaxcert._version import __version__
from jaxcert.adapters.frameworks import Graph, build_graph
from jaxcert.core import derivatives, neighbors, units
from jaxcert.core.model import (
    Model,
    ModelOutputError,
    StressUnavailable,
    UnsupportedElement,
    UnsupportedStructure,
    from_voigt,
    strain,
    voigt,
)
from jaxcert.core.structure import Structure, StructureError, stack, unstack
from jaxcert.probes.suite import certify

__all__ = [
    "Structure", "StructureError", "stack", "unstack",
    "Model", "ModelOutputError", "StressUnavailable", "UnsupportedElement", "UnsupportedStructure", "strain",
    "voigt", "from_voigt",
    "adapters", "derivatives", "models", "neighbors", "units", "__version__", "certify", "lam", "LambdaResult",
    "LAMBDA_GATE",
    "lambda_of_jacobian", "Graph", "build_graph",
]
