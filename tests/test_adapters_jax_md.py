"""jaxcert.Model.from_jax_md on jax-md's own energy functions (docs/adapters.md §1).

Identities: jax-md's Stillinger-Weber through the adapter equals jaxcert's own ``sw`` (E, F, σ to 1e-10 in
float64) on a skewed diamond cell thinner than two cutoffs (tiled supercell) and on a cluster; forces and
stress of jax-md's Lennard-Jones agree with finite differences; the three neighbour-list formats agree with
the all-pairs energy; padding atoms are inert; jax-md's NequIP at random initialisation passes the
equivariance and conservativeness probes.  Negative controls: feeding jax-md the fractional coordinates
as a plain function of (R, h) (what the adapter avoids) gives wrong forces and stress.

jax-md is imported once for the module (it runs JAX code at import: tens of seconds here).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

jax_md = pytest.importorskip("jax_md")

from jax_md import energy, partition, space  # noqa: E402

from jaxcert import Model, Structure, UnsupportedStructure, stack, unstack  # noqa: E402
from jaxcert.core.geometry import inv3  # noqa: E402
from jaxcert.core.model import strain  # noqa: E402
from jaxcert.models import get  # noqa: E402

EPS_SW = 2.1683  # jaxcert's SW epsilon (PRB 31, 5262); jax-md's default is 2.16826: pass the same value to both


def _si(skew: bool = True, rattle: float = 0.05, seed: int = 0) -> Structure:
    from ase.build import bulk

    at = bulk("Si", "diamond", a=5.431, cubic=True)
    if skew:
        cell = np.asarray(at.cell) + np.array([[0.0, 0.0, 0.0], [0.4, 0.0, 0.0], [0.3, -0.2, 0.0]])
        at.set_cell(cell, scale_atoms=True)
    at.positions += np.random.default_rng(seed).normal(scale=rattle, size=at.positions.shape)
    return Structure.from_ase(at, dtype=jnp.float64)


def _cluster(n: int = 10, seed: int = 1) -> Structure:
    rng = np.random.default_rng(seed)
    at = _si(skew=False, rattle=0.0).to_ase().repeat(2)
    pos = at.positions[:n] + rng.normal(scale=0.05, size=(n, 3))
    return Structure.create(pos, [14] * n, dtype=jnp.float64)


def _efs(m: Model, s: Structure):
    E, F = m.energy_and_forces(s)
    return float(E), np.asarray(F), (np.asarray(m.stress(s)) if s.periodic else None)


def _sw_list(fractional: bool = True, fmt=partition.Dense) -> Model:
    box = jnp.eye(3) * 5.431  # any box: the adapter passes the structure's cell as box=
    disp, _ = space.periodic_general(box, fractional_coordinates=fractional)
    _, e_fn = energy.stillinger_weber_neighbor_list(disp, box, epsilon=EPS_SW, format=fmt,
                                                     fractional_coordinates=fractional)
    return Model.from_jax_md(e_fn, cutoff=3.77118, neighbor_format=fmt, fractional_coordinates=fractional,
                             capacity=16, name="jax-md sw")


def _exact_cosine(d12, d13):
    """jax-md's cosine without its +1e-7 Å regulariser on the two distances (safe where a bond is zero)."""
    n2 = jnp.dot(d12, d12) * jnp.dot(d13, d13)
    ok = n2 > 0
    return jnp.where(ok, jnp.dot(d12, d13) / jnp.sqrt(jnp.where(ok, n2, 1.0)), 0.0)


@pytest.mark.parametrize("fractional", [True, False])
def test_stillinger_weber_matches_jaxcert_sw_in_a_skewed_thin_cell(fractional, monkeypatch):
    """8-atom skewed diamond cell (plane spacings < 2 r_c: jax-md's minimum image alone would be wrong).

    jax-md's angle term adds 1e-7 Å to both bond lengths in its cosine (``quantity.cosine_angle_between_two_
    vectors``); with that regulariser removed the two implementations agree to round-off."""
    monkeypatch.setattr(jax_md.quantity, "cosine_angle_between_two_vectors", _exact_cosine)
    s = _si()
    E0, F0, S0 = _efs(get("sw"), s)
    E1, F1, S1 = _efs(_sw_list(fractional), s)
    assert abs(E1 - E0) < 1e-10 * len(F0), (E1, E0)
    assert np.abs(F1 - F0).max() < 1e-10 and np.abs(S1 - S0).max() < 1e-10
    assert np.abs(F0).max() > 0.1 and np.abs(S0).max() > 1e-3  # non-trivial forces and stress


@pytest.mark.slow
def test_stillinger_weber_equals_jax_md_on_its_own_supercell():
    """Unpatched jax-md SW: the adapter on the 8-atom cell equals jax-md itself (its neighbour list, its
    minimum image, its ``quantity.stress``) on the 3x3x3 supercell, per cell; against jaxcert's sw the
    difference is jax-md's 1e-7 Å regulariser (measured 1.9e-8 eV, 1.1e-7 eV/Å, 7.6e-10 eV/Å³)."""
    s = _si()
    E1, F1, S1 = _efs(_sw_list(), s)
    at = s.to_ase().repeat(3)
    h = np.asarray(at.cell)
    box = jnp.asarray(h.T)  # upper triangular, as jax-md's cell list needs
    disp, _ = space.periodic_general(box)
    nfn, e_fn = energy.stillinger_weber_neighbor_list(disp, box, epsilon=EPS_SW, fractional_coordinates=True)
    u = jnp.asarray(at.positions @ np.linalg.inv(h))
    nbrs = nfn.allocate(u)
    En = float(e_fn(u, nbrs)) / 27
    Fn = -np.asarray(jax.grad(e_fn)(u, nbrs))[: s.n_atoms]  # jax-md: gradients in Cartesian units
    Sn = -np.asarray(jax_md.quantity.stress(e_fn, u, box, neighbor=nbrs))  # jax-md's sign is opposite to ASE's
    assert abs(E1 - En) < 1e-10 and np.abs(F1 - Fn).max() < 1e-10 and np.abs(S1 - Sn).max() < 1e-10
    E0, F0, S0 = _efs(get("sw"), s)
    assert abs(E1 - E0) < 1e-6 and np.abs(F1 - F0).max() < 1e-6 and np.abs(S1 - S0).max() < 1e-8


def test_stillinger_weber_all_pairs_on_a_free_cluster(monkeypatch):
    monkeypatch.setattr(jax_md.quantity, "cosine_angle_between_two_vectors", _exact_cosine)
    disp, _ = space.free()
    m = Model.from_jax_md(energy.stillinger_weber(disp, epsilon=EPS_SW), cutoff=3.77118, space="free")
    s = _cluster()
    E0, F0, _ = _efs(get("sw"), s)
    E1, F1, _ = _efs(m, s)
    assert abs(E1 - E0) < 1e-10 and np.abs(F1 - F0).max() < 1e-10
    with pytest.raises(UnsupportedStructure, match="space.free"):
        m.energy(_si())


def test_periodic_general_evaluates_a_cluster_in_vacuum(monkeypatch):
    monkeypatch.setattr(jax_md.quantity, "cosine_angle_between_two_vectors", _exact_cosine)
    box = jnp.eye(3) * 5.431
    disp, _ = space.periodic_general(box)
    m = Model.from_jax_md(energy.stillinger_weber(disp, epsilon=EPS_SW), cutoff=3.77118)
    s = _cluster()
    E0, F0, _ = _efs(get("sw"), s)
    E1, F1, _ = _efs(m, s)
    assert abs(E1 - E0) < 1e-10 and np.abs(F1 - F0).max() < 1e-10


def _lj(fmt=None, species=None) -> Model:
    box = jnp.eye(3) * 5.0
    disp, _ = space.periodic_general(box)
    kw = dict(sigma=2.0, epsilon=0.3, r_onset=1.25, r_cutoff=1.5)  # jax-md: in units of sigma (2.5, 3 Å)
    if fmt is None:
        e_fn = energy.lennard_jones_pair(disp, **kw)
    else:
        _, e_fn = energy.lennard_jones_neighbor_list(disp, box, format=fmt, fractional_coordinates=True, **kw)
    return Model.from_jax_md(e_fn, cutoff=3.0, neighbor_format=fmt, name="jax-md lj")


def _fcc(seed: int = 0, repeat: int = 1) -> Structure:
    from ase.build import bulk

    at = bulk("Ar", "fcc", a=3.3, cubic=True).repeat(repeat)  # one cell: spacing 3.3 Å < 2 r_c, 3^3 copies
    at.positions += np.random.default_rng(seed).normal(scale=0.05, size=at.positions.shape)
    return Structure.from_ase(at, dtype=jnp.float64)


def test_lennard_jones_forces_and_stress_against_finite_differences():
    m, s = _lj(), _fcc()
    E, F = m.energy_and_forces(s)
    sig = np.asarray(m.stress(s))
    h = 1e-5
    fd = np.zeros_like(np.asarray(F))
    for i in range(s.n_atoms):
        for a in range(3):
            d = jnp.zeros_like(s.positions).at[i, a].set(h)
            fd[i, a] = -(float(m.energy(s.replace(positions=s.positions + d)))
                         - float(m.energy(s.replace(positions=s.positions - d)))) / (2 * h)
    assert np.abs(np.asarray(F) - fd).max() < 1e-7 * max(1.0, np.abs(fd).max())
    V = float(s.volume)
    fs = np.zeros((3, 3))
    for a in range(3):
        for b in range(3):
            e = np.zeros((3, 3))
            e[a, b] = e[b, a] = h / 2 if a != b else h
            fs[a, b] = (float(m.energy(strain(s, jnp.asarray(e)))) - float(m.energy(strain(s, -jnp.asarray(e))))) / (
                2 * h * V) * (1.0 if a == b else 1.0)
    assert np.abs(sig - fs).max() < 1e-7 * max(1.0, np.abs(fs).max()), (sig, fs)
    assert np.abs(sig).max() > 1e-3


def test_plain_fractional_input_is_wrong_negative_control():
    """Without the adapter's handling, jax-md's custom JVP (tangents of fractional inputs taken as Cartesian)
    makes −∇_R E(R h⁻¹, box=hᵀ) wrong by the cell matrix: the adapter's forces differ from it."""
    from ase.build import bulk

    box = jnp.eye(3) * 5.0
    disp, _ = space.periodic_general(box)
    e_fn = energy.lennard_jones_pair(disp, sigma=2.0, epsilon=0.3, r_onset=1.25, r_cutoff=1.5)
    at = bulk("Ar", "fcc", a=3.3, cubic=True).repeat(2)  # plane spacing 6.6 Å > 2 r_c: no tiling needed
    at.positions += np.random.default_rng(5).normal(scale=0.05, size=at.positions.shape)
    s = Structure.from_ase(at, dtype=jnp.float64)
    naive = lambda R: e_fn(R @ inv3(s.cell), box=s.cell.T)  # noqa: E731
    F_naive = -np.asarray(jax.grad(naive)(s.positions))
    F = np.asarray(_lj().forces(s))
    assert abs(float(naive(s.positions)) - float(_lj().energy(s))) < 1e-10  # same energy ...
    assert np.abs(F).max() > 1e-2 and np.abs(F_naive - F).max() > 0.5 * np.abs(F).max()  # ... wrong forces


@pytest.mark.parametrize("fmt", [partition.Dense, partition.Sparse, partition.OrderedSparse],
                         ids=["dense", "sparse", "ordered"])
def test_neighbor_list_formats_match_all_pairs(fmt):
    s = _fcc(3, repeat=2)  # 32 atoms, no tiling (the SW and finite-difference tests tile)
    E0, F0, S0 = _efs(_lj(), s)
    E1, F1, S1 = _efs(_lj(fmt), s)
    assert abs(E1 - E0) < 1e-11 * max(1, abs(E0)) and np.abs(F1 - F0).max() < 1e-11 and np.abs(S1 - S0).max() < 1e-12


def test_supercell_energy_is_extensive():
    """E(2x2x2 supercell) = 8 E(cell): the tiling of thin cells is exact."""
    from ase.build import bulk

    m = _lj(partition.Dense)
    at = bulk("Ar", "fcc", a=3.3, cubic=True)
    at.positions += np.random.default_rng(4).normal(scale=0.05, size=at.positions.shape)
    s1 = Structure.from_ase(at, dtype=jnp.float64)
    s8 = Structure.from_ase(at.repeat(2), dtype=jnp.float64)
    assert abs(float(m.energy(s8)) - 8 * float(m.energy(s1))) < 1e-10 * abs(float(m.energy(s8)))


def test_padding_atoms_are_inert():
    """Padding atoms (jaxcert.stack) change neither energy nor forces: neighbour list, free all-pairs, and
    all-pairs on periodic_general (a cluster in vacuum); in a periodic cell an all-pairs energy is NaN."""
    sw_pg = Model.from_jax_md(energy.stillinger_weber(space.periodic_general(jnp.eye(3))[0], epsilon=EPS_SW),
                              cutoff=3.77118)
    for m in (_sw_list(), Model.from_jax_md(energy.stillinger_weber(space.free()[0], epsilon=EPS_SW),
                                            cutoff=3.77118, space="free"), sw_pg):
        small, big = _cluster(6), _cluster(9)
        b = stack([small, big])
        E_pad, F_pad = m.energy_and_forces(unstack(b)[0])  # one program for both (was two)
        assert abs(float(E_pad) - float(m.energy_and_forces(small)[0])) < 1e-10
        assert np.abs(np.asarray(F_pad)[6:]).max() == 0.0
    cell = _si(rattle=0.0)
    padded = unstack(stack([cell, Structure.from_ase(cell.to_ase().repeat((2, 1, 1)))]))[0]
    assert np.isnan(float(sw_pg.energy(padded))) and np.isfinite(float(sw_pg.energy(cell)))


def _nequip():
    """jax-md's NequIP (``energy.nequip_neighbor_list``) at random initialisation, small config, Si and O."""
    from jax_md._nn import nequip

    cfg = nequip.default_config()
    cfg.graph_net_steps = 2
    cfg.hidden_irreps = "8x0e + 4x1e + 2x2e"
    cfg.n_elements = 2
    cfg.r_max = 3.5
    cfg.radial_net_n_hidden = 8
    cfg.shift, cfg.scale = 0.0, 1.0
    box = jnp.eye(3) * 10.0
    disp, _ = space.periodic_general(box)
    _, init_fn, e_fn = energy.nequip_neighbor_list(disp, box, cfg, fractional_coordinates=True)
    # init on a throwaway graph built by the adapter's own list: a 2-atom cluster
    s0 = Structure.create([[0.0, 0.0, 0.0], [1.6, 0.0, 0.0]], ["Si", "O"], dtype=jnp.float64)
    holder = {}

    def grab(params, R, neighbor, **kw):
        holder["args"] = (R, neighbor, kw)
        return jnp.zeros((), R.dtype)

    Model.from_jax_md(grab, cutoff=3.5, neighbor_format=partition.Sparse, species=("Si", "O"), species_arg="atoms",
                      one_hot=True, params={}).energy_of({}, s0)
    R, nbr, kw = holder["args"]
    params = jax.jit(lambda key: init_fn(key, R, nbr, **kw))(jax.random.PRNGKey(0))  # one program, not op by op
    return Model.from_jax_md(e_fn, cutoff=3.5, neighbor_format=partition.Sparse, species=("Si", "O"),
                             species_arg="atoms", one_hot=True, params=params, name="jax-md nequip")


def test_nequip_at_random_init_is_invariant_and_conservative():
    """The default-run check of jax-md's NequIP through the adapter (the probes themselves: the slow test below):
    E(QR + t) = E(R) and F(QR + t) = F(R)Qᵀ for one rotation, and the force along a random direction equals the
    central difference of E (float64, relative 1e-7), with finite, non-zero weight gradients."""
    m = _nequip()
    rng = np.random.default_rng(2)
    pos = rng.uniform(0, 4.0, size=(6, 3))
    s = m.prepare(Structure.create(pos, ["Si", "O", "Si", "O", "Si", "O"], dtype=jnp.float64, min_distance=1.0))
    Q = np.linalg.qr(rng.normal(size=(3, 3)))[0]
    Q = Q * np.sign(np.linalg.det(Q))
    rotated = s.replace(positions=s.positions @ Q.T + jnp.asarray([0.3, -0.2, 0.5]))
    # one compiled program serves every evaluation: E, F and the gradient over the weights
    efg = jax.jit(lambda p, x: (*m.energy_and_forces_of(p, x), jax.grad(m.energy_of)(p, x)))
    E, F, g = efg(m.params, s)
    E2, F2, _ = efg(m.params, rotated)
    assert np.abs(np.asarray(F)).max() > 1e-6  # a non-trivial random network
    np.testing.assert_allclose(float(E2), float(E), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.asarray(F2), np.asarray(F) @ Q.T, atol=1e-10)
    u = rng.normal(size=(6, 3))
    u /= np.linalg.norm(u)
    h = 1e-4
    e = lambda x: float(efg(m.params, s.replace(positions=x))[0])  # noqa: E731
    fd = (e(s.positions + h * u) - e(s.positions - h * u)) / (2 * h)
    np.testing.assert_allclose(-float(np.sum(np.asarray(F) * u)), fd, rtol=1e-7)
    leaves = jax.tree_util.tree_leaves(g)
    assert all(np.isfinite(np.asarray(x)).all() for x in leaves)
    assert any(np.abs(np.asarray(x)).max() > 0 for x in leaves)


@pytest.mark.slow  # measured 682 s at load average 20 on the shared 2-core machine (probe programs compile)
def test_nequip_at_random_init_passes_the_symmetry_probes():
    """Equivariance (random rotations, translations, permutations) and conservativeness (F_j·û = −dE/ds) at
    the float64 floor, on a 6-atom SiO cluster and through the probes' own substrates; grad over weights."""
    from jaxcert.probes import conservativeness, equivariance

    m = _nequip()
    rng = np.random.default_rng(2)
    pos = rng.uniform(0, 4.0, size=(6, 3))
    s = Structure.create(pos, ["Si", "O", "Si", "O", "Si", "O"], dtype=jnp.float64, min_distance=1.0)
    E, F = m.energy_and_forces(s)
    assert np.isfinite(float(E)) and np.abs(np.asarray(F)).max() > 1e-6  # a non-trivial random network
    r = equivariance(m, jax.random.key(0), substrate=m.prepare(s))
    assert bool(r.gate) and float(r.defect) < 1e-6, r
    c = conservativeness(m, substrate=m.prepare(s))
    assert bool(c.gate) and float(c.defect) < 1e-6, c
    g = jax.grad(lambda p: m.energy_of(p, m.prepare(s)))(m.params)
    leaves = jax.tree_util.tree_leaves(g)
    assert all(np.isfinite(np.asarray(x)).all() for x in leaves)
    assert any(np.abs(np.asarray(x)).max() > 0 for x in leaves)


def test_cli_certifies_a_jax_md_model_given_as_module_attr(tmp_path, monkeypatch, capsys):
    """``certify --model mymods:lj`` on a module file exposing a wrapped jax-md LJ: one fast probe runs and passes."""
    import json

    from jaxcert.cli import main

    (tmp_path / "mymods_jaxmd.py").write_text(
        "import jax.numpy as jnp\n"
        "from jax_md import energy, space\n"
        "import jaxcert\n"
        "disp, _ = space.periodic_general(jnp.eye(3) * 10.0)\n"
        "lj = jaxcert.Model.from_jax_md(energy.lennard_jones_pair(disp, sigma=3.4, epsilon=0.0104, r_onset=2.0,\n"
        "                               r_cutoff=2.5), cutoff=3.4 * 2.5, name='jax-md LJ')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "r.json"
    rc = main(["certify", "--model", "mymods_jaxmd:lj", "--elements", "Ar", "--probes", "conservativeness",
               "--quiet", "--json", str(out)])
    rep = json.loads(out.read_text())
    assert rc == 0, capsys.readouterr()
    text = json.dumps(rep)
    assert "jax-md LJ" in text and "conservativeness" in text
    assert main(["certify", "--model", "mymods_jaxmd:nosuch", "--elements", "Ar", "--quiet"]) == 2
