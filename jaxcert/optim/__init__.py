"""The optimiser room: relaxations (FIRE, BFGS, cell relaxation) and molecular dynamics (Langevin, Verlet).

Rule (checked by ``tests/test_architecture.py``): imports only :mod:`jaxcert.core` (docs/architecture.md,
"Rooms").
"""
