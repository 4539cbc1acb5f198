"""jaxcert.Model.from_flax / from_graph_module on a real Flax linen message-passing net (docs/adapters.md §2).

Identities at random initialisation: F = −∇E agrees with central finite differences (float64, O(h²)),
E is invariant under a random rotation and translation at the float floor, padding atoms are inert,
the energy of a periodic cell is differentiable in the cell (stress against finite differences), and
jax.grad over the weights is finite and non-zero.  Negative control: a net fed the raw edge
vector (not its length) breaks rotation invariance, and the same check sees it.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

nn = pytest.importorskip("flax.linen")

import jaxcert  # noqa: E402
from jaxcert import Graph, Model, Structure, stack, unstack  # noqa: E402
from jaxcert.core.model import strain  # noqa: E402

RC = 4.0


class MessagePassing(nn.Module):
    """Energy = Σ_i per-node output of two rounds of distance-based messages (invariant by construction)."""

    features: int = 8
    n_species: int = 2
    use_vector: bool = False  # the negative control: a message that sees the raw x component of the edge

    @nn.compact
    def __call__(self, g: Graph) -> jax.Array:
        n = g.species.shape[0]
        h = nn.Embed(self.n_species, self.features)(g.species)
        r = jnp.sqrt(jnp.sum(g.edge_vectors**2, axis=-1))
        x = r / RC
        env = jnp.where(g.edge_mask & (x < 1.0), (1.0 - x**2) ** 2, 0.0)  # smooth cutoff
        k = jnp.arange(1, 5, dtype=r.dtype)
        radial = jnp.sin(jnp.pi * k * x[:, None]) / jnp.maximum(r, 1e-9)[:, None]
        if self.use_vector:
            radial = radial + g.edge_vectors[:, :1]
        for _ in range(2):
            w = nn.Dense(self.features)(radial) * env[:, None]
            msg = w * h[g.senders]
            h = h + nn.silu(nn.Dense(self.features)(jax.ops.segment_sum(msg, g.receivers, n)))
        return nn.Dense(1)(h)[:, 0]  # per-node energies (n,)


def _model(use_vector: bool = False) -> Model:
    mod = MessagePassing(use_vector=use_vector)
    s = _cluster()
    # initialise on the graph the adapter builds (jaxcert.build_graph), as a user would
    g, _ = jaxcert.build_graph(s, RC, species=("Si", "O"))
    variables = mod.init(jax.random.PRNGKey(0), g)
    return Model.from_flax(mod, variables, cutoff=RC, species=("Si", "O"), name="flax-mp")


def _cluster(n: int = 7, seed: int = 0) -> Structure:
    rng = np.random.default_rng(seed)
    grid = 1.8 * np.stack(np.meshgrid(*[np.arange(3)] * 3, indexing="ij"), -1).reshape(-1, 3)
    pos = grid[rng.permutation(len(grid))[:n]] + rng.normal(scale=0.15, size=(n, 3))
    return Structure.create(pos, (["Si", "O"] * n)[:n], dtype=jnp.float64, min_distance=0.9)


def _rot(seed: int) -> np.ndarray:
    q, _ = np.linalg.qr(np.random.default_rng(seed).normal(size=(3, 3)))
    return q * np.sign(np.linalg.det(q))


def test_forces_against_finite_differences_and_weight_gradient():
    m, s = _model(), _cluster()
    E, F = m.energy_and_forces(s)
    fd = _fd_forces(m, s)
    assert np.abs(np.asarray(F)).max() > 1e-3
    assert np.abs(np.asarray(F) - fd).max() < 1e-7 * max(1.0, np.abs(fd).max())
    g = jax.grad(lambda p: m.energy_of(p, m.prepare(s)))(m.params)
    leaves = [np.asarray(x) for x in jax.tree_util.tree_leaves(g)]
    assert all(np.isfinite(x).all() for x in leaves) and any(np.abs(x).max() > 0 for x in leaves)


def _fd_forces(m: Model, s: Structure, h: float = 1e-5) -> np.ndarray:
    """Central differences of the energy, all 6n displaced copies in one vmapped call."""
    sp = m.prepare(s)
    d = h * jnp.eye(3 * s.n_atoms, dtype=s.dtype).reshape(-1, s.n_atoms, 3)
    e = jax.jit(jax.vmap(lambda R: m.energy_of(m.params, sp.replace(positions=R))))
    return -np.asarray((e(s.positions + d) - e(s.positions - d)) / (2 * h)).reshape(s.n_atoms, 3)


def _rotation_residual(m: Model, s: Structure) -> float:
    Q = jnp.asarray(_rot(3))
    t = jnp.asarray([0.3, -1.2, 2.0])
    s2 = s.replace(positions=s.positions @ Q.T + t)
    return abs(float(m.energy(s2)) - float(m.energy(s)))


def test_rotation_invariance_at_the_float_floor_and_negative_control():
    s = _cluster()
    assert _rotation_residual(_model(), s) < 1e-12
    assert _rotation_residual(_model(use_vector=True), s) > 1e-4  # a non-invariant net is caught


def test_padding_is_inert_and_stress_is_exact_in_the_cell():
    m = _model()
    small, big = _cluster(5), _cluster(8, seed=1)
    padded = unstack(stack([small, big]))[0]
    assert abs(float(m.energy(padded)) - float(m.energy(small))) < 1e-12
    s = Structure.create(np.asarray(big.positions), big.numbers, cell=np.diag([4.2, 4.5, 4.8]) + 0.3 * np.tri(3, k=-1),
                         pbc=True, dtype=jnp.float64, min_distance=0.5)
    sig = np.asarray(m.stress(s))
    h, V = 1e-5, float(s.volume)
    fd = np.zeros((3, 3))
    for a in range(3):
        for b in range(3):
            e = np.zeros((3, 3))
            e[a, b] += h / 2
            e[b, a] += h / 2
            fd[a, b] = (float(m.energy(strain(s, jnp.asarray(e)))) - float(m.energy(strain(s, -jnp.asarray(e))))) / (
                2 * h * V)
    assert np.abs(sig).max() > 1e-4 and np.abs(sig - fd).max() < 1e-7 * max(1.0, np.abs(fd).max())


def test_cli_certifies_a_flax_model_given_as_module_attr(tmp_path, monkeypatch):
    """``certify --model mymods:model`` on a module file exposing the Flax net above, one fast probe."""
    import json

    from jaxcert.cli import main

    (tmp_path / "mymods_flax.py").write_text(
        "from tests.test_adapters_graph import _model\n"
        "model = _model()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "r.json"
    rc = main(["certify", "--model", "mymods_flax:model", "--elements", "Si", "--probes", "conservativeness",
               "--quiet", "--json", str(out)])
    rep = json.loads(out.read_text())
    assert rc == 0 and "flax-mp" in json.dumps(rep) and rep["probes"][0]["name"] == "conservativeness"


def test_flax_nnx_module_with_its_state_as_parameters():
    """An nnx module (params=None): its state is the parameter leaf; rotation invariance and weight gradients."""
    nnx = pytest.importorskip("flax.nnx")

    class Net(nnx.Module):
        def __init__(self, rngs):
            self.embed = nnx.Embed(2, 4, rngs=rngs)
            self.radial = nnx.Linear(2, 4, rngs=rngs)
            self.out = nnx.Linear(4, 1, rngs=rngs)

        def __call__(self, g: Graph) -> jax.Array:
            r = jnp.sqrt(jnp.sum(g.edge_vectors**2, axis=-1))
            env = jnp.where(g.edge_mask & (r < RC), (1.0 - (r / RC) ** 2) ** 2, 0.0)
            h = self.embed(g.species)
            msg = self.radial(jnp.stack([r, r * r], -1)) * env[:, None] * h[g.senders]
            h = h + jax.ops.segment_sum(msg, g.receivers, h.shape[0])
            return self.out(nnx.silu(h))[:, 0]

    m = Model.from_flax(Net(nnx.Rngs(0)), cutoff=RC, species=("Si", "O"), name="nnx-mp")
    s = _cluster()
    assert _rotation_residual(m, s) < 1e-12 and abs(float(m.energy(s))) > 1e-6
    g = jax.grad(lambda p: m.energy_of(p, m.prepare(s)))(m.params)
    leaves = [np.asarray(x) for x in jax.tree_util.tree_leaves(g)]
    assert leaves and all(np.isfinite(x).all() for x in leaves) and any(np.abs(x).max() > 0 for x in leaves)
