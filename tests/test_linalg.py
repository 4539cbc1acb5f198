"""jaxcert.core.linalg: the one-matrix-at-a-time LAPACK wrappers (jaxcert/core/linalg.py).

They must give the batched routines' results for explicit batch dimensions, under vmap and
under nested vmap, keep forward-mode derivatives, and contain no batched LAPACK call in the
compiled program (the batched call is what can deadlock XLA:CPU's intra-op pool).
"""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcert import models
from jaxcert.core import linalg
from jaxcert.core.structure import stack
from jaxcert.probes import PROBES, substrates, suite


def _sym(key, shape):
    a = jax.random.normal(key, shape, jnp.float64)
    return a + jnp.swapaxes(a, -1, -2)


@pytest.mark.parametrize("name", ["eigh", "eigvalsh", "svdvals", "qr"])
def test_matches_batched_lapack(name):
    ref = {"eigh": jnp.linalg.eigh, "eigvalsh": jnp.linalg.eigvalsh,
           "svdvals": lambda a: jnp.linalg.svd(a, compute_uv=False), "qr": jnp.linalg.qr}[name]
    fn = getattr(linalg, name)
    a = _sym(jax.random.PRNGKey(0), (3, 2, 5, 5))
    for got, want in [(fn(a), ref(a)), (jax.vmap(fn)(a), ref(a)), (jax.vmap(jax.vmap(fn))(a), ref(a)),
                      (fn(a[0, 0]), ref(a[0, 0]))]:
        for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want), strict=True):
            assert g.shape == w.shape
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", ["svdvals", "qr"])
def test_rectangular(name):
    """Tall (m > n) matrices, as zero_modes' (3n, 6) basis, forward and reverse."""
    a = jax.random.normal(jax.random.PRNGKey(6), (2, 9, 4), jnp.float64)
    fn, ref = getattr(linalg, name), {"svdvals": lambda x: jnp.linalg.svd(x, compute_uv=False),
                                      "qr": jnp.linalg.qr}[name]
    loss = lambda f: lambda x: sum(jnp.sum(jnp.tanh(y)) for y in jax.tree_util.tree_leaves(jax.vmap(f)(x)))  # noqa: E731
    np.testing.assert_allclose(np.asarray(jax.grad(loss(fn))(a)), np.asarray(jax.grad(loss(ref))(a)), rtol=1e-9,
                               atol=1e-11)
    for g, w in zip(jax.tree_util.tree_leaves(jax.vmap(fn)(a)), jax.tree_util.tree_leaves(ref(a)), strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-12, atol=1e-12)


def test_forward_mode_derivative_of_eigenvalues():
    """d λ_k = v_kᵀ dA v_k (first-order perturbation theory), against the jvp."""
    a = _sym(jax.random.PRNGKey(1), (4, 6, 6))
    da = _sym(jax.random.PRNGKey(2), (4, 6, 6))
    w, v = jnp.linalg.eigh(a)
    _, dw = jax.jvp(lambda x: jax.vmap(linalg.eigvalsh)(x), (a,), (da,))
    np.testing.assert_allclose(np.asarray(dw), np.asarray(jnp.einsum("bik,bij,bjk->bk", v, da, v)), atol=1e-10)


def _custom_call_operand_shapes(hlo: str) -> list[str]:
    return [line for line in hlo.splitlines() if "custom_call" in line and "lapack" in line]


def test_no_batched_lapack_call_under_vmap():
    a = _sym(jax.random.PRNGKey(3), (10, 8, 8))
    plain = jax.jit(jax.vmap(jnp.linalg.eigh)).lower(a).as_text()
    looped = jax.jit(jax.vmap(linalg.eigh)).lower(a).as_text()
    assert any("10x8x8" in line for line in _custom_call_operand_shapes(plain))  # the batched call, as a control
    calls = _custom_call_operand_shapes(looped)
    assert calls and not any("10x8x8" in line for line in calls)


@pytest.mark.parametrize("name", ["eigh", "eigvalsh", "svdvals", "qr"])
def test_reverse_mode_matches_jax(name):
    """grad through the loop equals grad through jnp.linalg (non-degenerate spectrum)."""
    a = _sym(jax.random.PRNGKey(4), (3, 6, 6))
    c = jax.random.normal(jax.random.PRNGKey(5), (3, 6, 6), jnp.float64)
    mine = {"eigh": lambda x: jnp.sum(linalg.eigh(x)[1] ** 3) + jnp.sum(linalg.eigh(x)[0] ** 2),
            "eigvalsh": lambda x: jnp.sum(jnp.sin(linalg.eigvalsh(x))),
            "svdvals": lambda x: jnp.sum(linalg.svdvals(x) ** 3),
            "qr": lambda x: jnp.sum(linalg.qr(x)[0] ** 3) + jnp.sum(jnp.cos(linalg.qr(x)[1]))}[name]
    ref = {"eigh": lambda x: jnp.sum(jnp.linalg.eigh(x)[1] ** 3) + jnp.sum(jnp.linalg.eigh(x)[0] ** 2),
           "eigvalsh": lambda x: jnp.sum(jnp.sin(jnp.linalg.eigvalsh(x))),
           "svdvals": lambda x: jnp.sum(jnp.linalg.svd(x, compute_uv=False) ** 3),
           "qr": lambda x: jnp.sum(jnp.linalg.qr(x)[0] ** 3) + jnp.sum(jnp.cos(jnp.linalg.qr(x)[1]))}[name]
    g = jax.grad(lambda x: jnp.sum(jax.vmap(mine)(x * c)))(a)
    g_ref = jax.grad(lambda x: jnp.sum(jax.vmap(ref)(x * c)))(a)
    np.testing.assert_allclose(np.asarray(g), np.asarray(g_ref), rtol=1e-9, atol=1e-11)


def _batched_lapack_calls(mlir: str) -> list[str]:
    """LAPACK custom calls whose first operand has more than two dimensions (a batched call)."""
    out = []
    for line in mlir.splitlines():
        m = re.search(r"custom_call @(lapack_\w+)\(.*?:\s*\(tensor<([0-9x]+)x[a-z]", line)
        if m and m.group(2).count("x") >= 2:
            out.append(f"{m.group(1)} on {m.group(2)}")
    return out


def test_control_batched_call_is_detected():
    a = _sym(jax.random.PRNGKey(7), (2, 5, 5))
    assert _batched_lapack_calls(jax.jit(jax.vmap(jnp.linalg.eigh)).lower(a).as_text())
    assert not _batched_lapack_calls(jax.jit(jax.vmap(linalg.eigh)).lower(a).as_text())


def test_no_probe_program_batches_lapack():
    """Every probe's suite program (vmapped over two elements) calls LAPACK on single matrices only."""
    model = models.get("lj")
    found = {}
    for name, spec in PROBES.items():
        if spec.structures is not None:  # lam: two of its named structures
            named = spec.structures(jnp.float64)
            batch = stack([named["H2O"], named["CH4"]])
        else:
            batch, _ = substrates.stacked(spec.substrate, ["Si", "Al"], dtype=jnp.float64)
        batch = model.prepare(batch)
        keys = jax.random.split(jax.random.PRNGKey(0), 2)
        mlir = suite._compiled(model, spec, spec.config(), ()).lower(keys, batch).as_text()
        if calls := _batched_lapack_calls(mlir):
            found[name] = calls
    assert not found
