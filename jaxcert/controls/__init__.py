"""Benchmark controls (seed 001) as a library: ``docs/controls.md``.

Robust error statistics resampled by chemical system, the reference-vs-reference floor, Rung-0
re-referencing, the consensus test, hull F1, polymorph ordering, symmetry retention vs symprec and exact
elastic moduli. Host-side statistics are numpy float64 and vectorised; elastic constants are exact JAX
second derivatives. Private modules, public names re-exported here.
"""

from jaxcert.controls._result import ControlResult, to_jsonable

__all__ = ["ControlResult", "to_jsonable"]
