"""The adapter room: models written for other JAX frameworks, as a :class:`jaxcert.Model`.

``frameworks`` (jax-md energy functions, graph modules, Flax linen and nnx, InstaDeep mlip force fields),
``nequix`` (Nequix checkpoints) and ``calculator`` (the other direction: any Model as an ASE calculator).
See docs/adapters.md.

The constructors are installed on :class:`~jaxcert.core.model.Model` as static methods (``Model.from_jax_md``,
``Model.from_graph_module``, ``Model.from_flax``, ``Model.from_mlip``, ``Model.from_nequix``), so the core,
which imports no adapter, keeps one calling convention for users; ``import jaxcert`` imports this package first.

Rule (checked by ``tests/test_architecture.py``): imports only :mod:`jaxcert.core` and this room.
"""

from jaxcert.adapters.calculator import ModelCalculator, to_ase_calculator
from jaxcert.adapters.frameworks import Graph, build_graph, from_flax, from_graph_module, from_jax_md, from_mlip
from jaxcert.adapters.nequix import from_nequix
from jaxcert.core.model import Model

for _f in (from_jax_md, from_graph_module, from_flax, from_mlip, from_nequix):
    setattr(Model, _f.__name__, staticmethod(_f))
del _f

__all__ = ["Graph", "ModelCalculator", "to_ase_calculator", "build_graph", "from_flax", "from_graph_module",
           "from_jax_md", "from_mlip", "from_nequix"]
