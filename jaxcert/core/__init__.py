"""The core room: atoms, models and their exact derivatives (docs/architecture.md, "Rooms").

``structure`` (the :class:`~jaxcert.core.structure.Structure` pytree), ``model`` (the :class:`Model` contract),
``derivatives`` (exact and finite-difference engines), ``neighbors``, ``geometry``, ``linalg``, ``batching``,
``units``, ``elements``, ``stats``, ``inputs`` (the input boundary) and ``cache`` (the executable store).

Rule (checked by ``tests/test_architecture.py``): a core module imports no other jaxcert room.
"""
