"""jaxcert.lam, the convenience over the lam probe: λ of known matrices, the FD mode, skipped structures.

The clean-vs-curl separation and the identity with the suite's ``lam`` probe are in tests/probes/test_lam.py.
"""

import jax.numpy as jnp
import numpy as np
import pytest

import jaxcert
from jaxcert import lam, lambda_of_jacobian


def test_lambda_of_known_matrices():
    assert float(lambda_of_jacobian(jnp.eye(6))) == 0.0
    A = jnp.array([[0.0, 1.0], [-1.0, 0.0]])
    assert float(lambda_of_jacobian(A)) == pytest.approx(1.0)


@pytest.fixture(scope="module")
def lj():
    return jaxcert.models.get("lj")


def test_fd_mode_agrees_with_exact_for_the_curl(lj):
    from jaxcert.models.defects import curl

    m = curl(lj, 0.5)
    exact, fd = lam(m, dtype=jnp.float64), lam(m, fd=True, dtype=jnp.float64)
    # ±1e-3 Å central differences: O(h²) truncation of ‖J‖, largest on the steep H walls of the LJ
    for k in exact.per_structure:
        assert fd.per_structure[k] == pytest.approx(exact.per_structure[k], rel=1e-2)
    assert "fd" in fd.method and fd.n_evals["H2O"] == 18


def test_unsupported_structures_are_skipped_with_the_reason():
    res = lam(jaxcert.models.get("emt"), dtype=jnp.float64)
    assert "SO2" in res.skipped and "S (Z=16)" in res.skipped["SO2"]
    assert np.isnan(res.per_structure["SO2"])
    assert res.max <= 1e-10
