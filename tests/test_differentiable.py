"""Probe defects as differentiable losses (docs/research.md): jax.grad w.r.t. model parameters vs central differences.

float64 throughout.  betti and conservativeness are differentiable end to end: the gradient of the defect
with respect to a defect knob (a parameter leaf of a ``jaxcert.models.defects`` model) matches a central
difference of the defect, and for a knob on which the defect depends nonlinearly the difference converges
to the gradient at second order.  zero_modes relaxes in a ``lax.while_loop`` first, which reverse mode
cannot differentiate: ``jax.grad`` refuses with JAX's error instead of returning a number.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcert
from jaxcert.models import defects
from jaxcert.probes import (
    BettiConfig,
    ConservativenessConfig,
    ZeroModesConfig,
    betti,
    conservativeness,
    substrates,
    zero_modes,
)

KEY = jax.random.key(0)


@pytest.fixture(scope="module")
def curl_si():
    """Reference LJ with a curl force head (s = 0.3 eV/Å², axis (0.3, 0.2, 1)) and the Si cluster, float64."""
    model = defects.curl(jaxcert.models.get("lj"), strength=0.3, axis=(0.3, 0.2, 1.0))
    return model, substrates.cluster("Si", dtype=jnp.float64)


def _central(f, x, h):
    return (f(x + h) - f(x - h)) / (2 * h)


def test_betti_defect_gradient_matches_central_difference(curl_si):
    model, s = curl_si

    def loss(strength):
        return betti(defects.with_knobs(model, strength=strength), KEY, BettiConfig(), substrate=s).defect

    x = jnp.asarray(0.3)
    g = jax.grad(loss)(x)
    fd = _central(loss, x, 1e-4)
    assert np.isfinite(g) and g > 0
    np.testing.assert_allclose(g, fd, rtol=1e-8)
    # the curl Jacobian is linear in the strength, so d(defect)/ds = defect/s
    np.testing.assert_allclose(g, loss(x) / x, rtol=1e-10)


def test_betti_gradient_second_order_in_a_nonlinear_knob(curl_si):
    """The defect depends on the axis through n̂ = a/|a|: the central difference error falls as h²."""
    model, s = curl_si
    a0 = model.params["axis"]

    def loss(ax):
        m = defects.with_knobs(model, axis=a0.at[0].set(ax))
        return betti(m, KEY, BettiConfig(), substrate=s).defect

    x = jnp.asarray(float(a0[0]))
    g = float(jax.grad(loss)(x))
    errs = [abs(float(_central(loss, x, h)) - g) for h in (4e-2, 2e-2)]
    assert np.isfinite(g) and abs(g) > 1e-4
    assert 3.0 < errs[0] / errs[1] < 5.0  # order 2
    assert abs(float(_central(loss, x, 1e-5)) - g) < 1e-8 * max(1.0, abs(g))


def test_conservativeness_defect_gradient_matches_central_difference(curl_si):
    model, s = curl_si

    def loss(strength):
        m = defects.with_knobs(model, strength=strength)
        return conservativeness(m, KEY, ConservativenessConfig(), substrate=s).defect

    x = jnp.asarray(0.3)
    g = jax.grad(loss)(x)
    assert np.isfinite(g) and g > 0
    np.testing.assert_allclose(g, _central(loss, x, 1e-4), rtol=1e-8)


def test_gradient_vmaps_over_seeds(curl_si):
    """jax.vmap(jax.value_and_grad(...)) over keys: per key, d(defect)/ds = defect/s (linear in s)."""
    model, s = curl_si

    def loss(strength, key):
        return betti(defects.with_knobs(model, strength=strength), key, BettiConfig(), substrate=s).defect

    keys = jax.random.split(KEY, 4)
    d, g = jax.vmap(jax.value_and_grad(loss), in_axes=(None, 0))(jnp.asarray(0.3), keys)
    assert d.shape == g.shape == (4,) and np.all(np.isfinite(g))
    np.testing.assert_allclose(g, d / 0.3, rtol=1e-10, atol=1e-14)


def test_zero_modes_is_not_reverse_differentiable(curl_si):
    """The BFGS relaxation is a lax.while_loop with a data-dependent stop: reverse mode refuses it.

    The refusal comes while the backward pass is traced; the forward value is finite (docs/research.md).
    """
    model, s = curl_si
    trimer = substrates.trimer("Si", dtype=jnp.float64)  # 3 atoms: the refusal is found quickly

    def loss(strength):
        m = defects.with_knobs(model, strength=strength)
        return zero_modes(m, KEY, ZeroModesConfig(), substrate=trimer).defect

    with pytest.raises(ValueError, match="Reverse-mode differentiation does not work for lax.while_loop"):
        jax.grad(loss)(jnp.asarray(0.3))
