"""The CPU-only workarounds and their device-neutral forms (jaxcert/core/device.py, docs/architecture.md §4.3).

No GPU runs here: the non-CPU branch is forced on CPU by making :func:`jaxcert.core.device.platform` answer
``"gpu"`` while tracing, and must give the CPU branch's numbers to round-off, derivatives included.
That the CPU branch's programs are unchanged is checked by tests/test_linalg.py (no batched LAPACK in any
probe program) and by the tests of every probe.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from ase.build import bulk, fcc111

import jaxcert
from jaxcert.core import device as _device
from jaxcert.core import linalg
from jaxcert.core import neighbors as nb

SKEW = np.array([[1.0, 0.06, 0.03], [0.0, 1.0, 0.05], [0.0, 0.0, 1.0]])


@pytest.fixture
def as_gpu(monkeypatch):
    """Trace as for a GPU: returns a context in which :func:`jaxcert.core.device.on_cpu` is False."""
    import contextlib

    @contextlib.contextmanager
    def ctx():
        with monkeypatch.context() as m:
            m.setattr(_device, "platform", lambda: "gpu")
            jax.clear_caches()
            yield
        jax.clear_caches()

    return ctx


def test_platform_follows_the_default_backend_and_device(monkeypatch):
    assert _device.platform() == "cpu" and _device.on_cpu()  # this machine (JAX_PLATFORMS=cpu)
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    assert _device.platform() == "gpu" and not _device.on_cpu()
    with jax.default_device(jax.devices("cpu")[0]):  # an explicit default device wins
        assert _device.on_cpu()
    with jax.default_device("cpu"):
        assert _device.on_cpu()


def test_the_gpu_branch_is_the_plain_batched_call(as_gpu):
    a = jnp.eye(4)[None].repeat(3, 0)
    with as_gpu():
        hlo = jax.jit(jax.vmap(linalg.eigh)).lower(a).as_text()
        jaxpr = str(jax.make_jaxpr(linalg.eigh)(a))
    assert "custom_jvp_call" not in jaxpr and "while" not in jaxpr  # no loop, JAX's own rule
    assert "3x4x4" in hlo  # one batched decomposition
    assert "custom_jvp_call" in str(jax.make_jaxpr(linalg.eigh)(a))  # the CPU branch: the looped form


def _sym(key, shape):
    a = jax.random.normal(key, shape, jnp.float64)
    return a + jnp.swapaxes(a, -1, -2)


_LOSS = {
    "eigh": lambda f: lambda x: jnp.sum(f(x)[1] ** 3) + jnp.sum(f(x)[0] ** 2),
    "eigvalsh": lambda f: lambda x: jnp.sum(jnp.sin(f(x))),
    "svdvals": lambda f: lambda x: jnp.sum(f(x) ** 3),
    "qr": lambda f: lambda x: jnp.sum(f(x)[0] ** 3) + jnp.sum(jnp.cos(f(x)[1])),
}


def _values_and_derivatives(name, a, da, c):
    fn = getattr(linalg, name)
    loss = _LOSS[name](fn)
    values = jax.jit(jax.vmap(fn))(a)
    _, tangent = jax.jit(lambda x, dx: jax.jvp(lambda y: jax.vmap(loss)(y * c), (x,), (dx,)))(a, da)
    grad = jax.jit(jax.grad(lambda x: jnp.sum(jax.vmap(loss)(x * c))))(a)
    return jax.tree_util.tree_leaves((values, tangent, grad))


@pytest.mark.parametrize("name,shape", [(n, (3, 6, 6)) for n in ("eigh", "eigvalsh", "svdvals", "qr")]
                         + [(n, (2, 9, 4)) for n in ("svdvals", "qr")],  # eigh takes symmetric (square) input only
                         ids=lambda v: v if isinstance(v, str) else ("square" if v[-1] == v[-2] else "tall"))
def test_linalg_branches_agree(name, shape, as_gpu):
    k = jax.random.split(jax.random.PRNGKey(11), 3)
    sq = shape[-1] == shape[-2]
    a = _sym(k[0], shape) if sq else jax.random.normal(k[0], shape, jnp.float64)
    da = _sym(k[1], shape) if sq else jax.random.normal(k[1], shape, jnp.float64)
    c = 1.0 + 0.1 * jax.random.normal(k[2], shape, jnp.float64)
    cpu = _values_and_derivatives(name, a, da, c)
    with as_gpu():
        gpu = _values_and_derivatives(name, a, da, c)
    for g, w in zip(gpu, cpu, strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-9, atol=1e-10)


def test_neighbor_helpers_agree(as_gpu):
    x = jax.random.normal(jax.random.PRNGKey(0), (50, 3), jnp.float64)
    m = jax.random.normal(jax.random.PRNGKey(1), (3, 3), jnp.float64)
    idx = jax.random.randint(jax.random.PRNGKey(2), (50, 7), 0, 50)
    want_take, want_rows = nb._take(x[:, 1], idx), nb._rows_times(x, m)
    with as_gpu():
        got_take, got_rows = nb._take(x[:, 1], idx), nb._rows_times(x, m)
    np.testing.assert_array_equal(np.asarray(got_take), np.asarray(want_take))  # a gather is a copy
    np.testing.assert_allclose(np.asarray(got_rows), np.asarray(want_rows), rtol=1e-14, atol=1e-14)


def _cu(rep, seed=0):
    at = bulk("Cu", "fcc", a=3.61, cubic=True).repeat(rep)
    at.set_cell(at.cell.array @ SKEW, scale_atoms=True)
    at.positions += np.random.default_rng(seed).normal(0.0, 0.05, at.positions.shape)
    return at


def _slab():
    slab = fcc111("Cu", size=(6, 6, 3), vacuum=6.0, a=3.61)
    slab.pbc = (True, True, False)
    slab.positions += np.random.default_rng(1).normal(0.0, 0.05, slab.positions.shape)
    return slab


def _listed_efs(model, atoms):
    """E, F, σ and the Verlet list of a cell-list structure, from a fresh program (traced now)."""
    s = jaxcert.Structure.from_ase(atoms)
    s = nb.with_cell_list(model.prepare(s.replace(neighbor_list=nb.DENSE)).replace(neighbor_list=None),
                          model.cutoff_for(model.prepare(s.replace(neighbor_list=nb.DENSE))))
    assert isinstance(s.neighbor_list, nb.CellListSpec)
    fresh = s.replace(neighbor_state=None)  # built inside the program, on the branch being traced
    E, F = jax.jit(lambda t: model.energy_and_forces_of(model.params, t))(fresh)
    S = jax.jit(lambda t: model.stress_of(model.params, t))(fresh)
    idx = jax.jit(lambda t: nb.build(t).idx)(fresh)
    return float(E), np.asarray(F), np.asarray(S), np.asarray(idx)


@pytest.mark.parametrize("case", ["emt_bulk", "emt_slab"])
def test_cell_list_branches_agree(case, as_gpu):
    """Forces and stress (derivatives in positions and cell) through the cell list, both branches."""
    model = jaxcert.models.get("emt")
    atoms = _cu(4) if case == "emt_bulk" else _slab()
    E0, F0, S0, idx0 = _listed_efs(model, atoms)
    with as_gpu():
        E1, F1, S1, idx1 = _listed_efs(model, atoms)
    np.testing.assert_array_equal(idx1, idx0)
    assert abs(E1 - E0) <= 1e-11 * max(1.0, abs(E0)), (E0, E1)
    np.testing.assert_allclose(F1, F0, rtol=0, atol=1e-11)
    np.testing.assert_allclose(S1, S0, rtol=0, atol=1e-12)


def test_a_probe_gives_the_same_defects_on_both_branches(as_gpu):
    """zero_modes (QR, singular values, eigenvalues, and a BFGS relaxation's eigh) for LJ on Si."""
    cpu = jaxcert.certify(jaxcert.models.get("lj"), ["Si"], probes=["zero_modes"])
    with as_gpu():
        gpu = jaxcert.certify(jaxcert.models.get("lj"), ["Si"], probes=["zero_modes"])
    (a,), (b,) = cpu.outcomes, gpu.outcomes
    np.testing.assert_allclose(np.asarray(b.defect, float), np.asarray(a.defect, float), rtol=1e-6, atol=1e-10)
    assert list(b.gate) == list(a.gate)
