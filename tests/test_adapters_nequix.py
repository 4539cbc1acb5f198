"""Model.from_nequix on the published nequix-mp-1 checkpoint (docs/adapters.md §4).

References:

* float32: nequix's own ASE calculator (``NequixCalculator``, JAX backend, no kernels), run in a subprocess
  because nequix's loader cannot build its model with JAX's x64 mode on (the test session has it on).  For
  the slab (pbc = T, T, F) the calculator passes no cell to the model, which then drops the periodic image
  shifts of every edge; there the reference is the calculator's own graph and model with the cell given,
  the path it takes for a fully periodic structure.
* float64: the calculator cannot run in float64 (its graph holds float32 positions and its loader fails
  under x64), so the reference is nequix's Equinox model (its own forces and stress by autodiff) on nequix's
  own graph (matscipy neighbour list, integer shifts, cell given) with float64 positions and weights.

jaxcert evaluates structures of one pbc as one padded batch (a single compile per dtype and pbc), so the
smaller molecule also checks that padding atoms are inert.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from ase.build import bulk, molecule
from ase.cluster import Icosahedron

import jaxcert

WEIGHTS = Path(__file__).resolve().parents[1].parent / "shared/weights/nequix"
CKPT = WEIGHTS / "nequix-mp-1.nqx"

pytest.importorskip("equinox", reason="equinox is not installed (pip install 'jaxcert[nequix]')")
pytest.importorskip("jraph", reason="jraph is not installed (pip install 'jaxcert[nequix]')")
pytest.importorskip("nequix", reason="nequix is not installed (pip install --no-deps nequix==0.4.5)")
if not CKPT.is_file():
    pytest.skip(f"the nequix-mp-1 checkpoint is not at {CKPT} (MIT; nequix downloads it to "
                "~/.cache/nequix/models)", allow_module_level=True)

#: Structures of one pbc evaluated as one padded batch by jaxcert.
GROUPS = (("bulk Si", "skewed SiGe"), ("Si slab",), ("CH4", "Cu13 cluster"))
#: Tolerances (the issue's): per-atom energy eV, force components eV/Å, stress components eV/Å³.
TOL = {"float32": (1e-5, 1e-4, 1e-5), "float64": (1e-9, 1e-8, 1e-9)}

_CALCULATOR = textwrap.dedent("""
    import sys
    import ase.io, equinox as eqx, numpy as np
    from ase.geometry import complete_cell
    from nequix.calculator import NequixCalculator
    from nequix.data import dict_to_graphstuple, preprocess_graph

    ckpt, src, dst = sys.argv[1:4]
    calc = NequixCalculator(model_path=ckpt, use_kernel=False)
    out = {}
    for k, a in enumerate(ase.io.read(src, index=":")):
        a.calc = calc
        out[f"E{k}"], out[f"F{k}"] = a.get_potential_energy(), a.get_forces()
        out[f"S{k}"] = a.get_stress(voigt=False) if a.pbc.all() else np.zeros((3, 3))
        if a.pbc.any() and not a.pbc.all():  # the calculator's graph and model with the cell given
            g = preprocess_graph(a, calc.atom_indices, calc.cutoff, False)
            g["cell"] = np.asarray(complete_cell(a.cell), np.float32)
            E, F, S = eqx.filter_jit(calc.model)(calc._pad_graph_jax(dict_to_graphstuple(g), True))
            out[f"cellE{k}"], out[f"cellF{k}"], out[f"cellS{k}"] = E[0], F[:len(a)], S[0]
    np.savez(dst, **out)
""")


def _cases():
    si = bulk("Si", "diamond", a=5.43)  # 2 atoms: the 6 Å cutoff spans many images of each atom
    si.rattle(0.05, seed=1)
    sk = bulk("Si", "diamond", a=5.5)
    sk[1].symbol = "Ge"
    sk.set_cell(sk.cell[:] @ np.array([[1.0, 0.06, 0.0], [0.0, 1.0, -0.04], [0.03, 0.0, 1.0]]), scale_atoms=True)
    sk.rattle(0.05, seed=2)
    slab = bulk("Si", "diamond", a=5.43, cubic=True)
    slab.center(vacuum=6.0, axis=2)
    slab.pbc = (True, True, False)
    slab.rattle(0.05, seed=3)
    ch4 = molecule("CH4")
    ch4.rattle(0.02, seed=4)
    cu = Icosahedron("Cu", 2)  # 13 atoms
    cu.rattle(0.05, seed=5)
    return {"bulk Si": si, "skewed SiGe": sk, "Si slab": slab, "CH4": ch4, "Cu13 cluster": cu}


CASES = _cases()
NAMES = list(CASES)
#: neighbour slots per atom in these tests: the densest case (diamond Si, 6 Å) has 46 neighbours; an atom with more
#: slots than this gives NaN, so a too-small capacity fails the comparison instead of passing silently
CAPACITY = 64
MEASURED: dict[str, dict[str, dict[str, float]]] = {}  # printed at the end (pytest -s): the numbers in the docs


@pytest.fixture(scope="module")
def calculator(tmp_path_factory):
    """{name: (E, F, σ)} from nequix's ASE calculator in a fresh process (x64 off), float32."""
    import ase.io

    d = tmp_path_factory.mktemp("nequix")
    ase.io.write(d / "cases.traj", [CASES[n] for n in NAMES])
    env = {k: v for k, v in os.environ.items() if k != "JAX_ENABLE_X64"}
    env["JAX_PLATFORMS"] = "cpu"
    r = subprocess.run([sys.executable, "-c", _CALCULATOR, str(CKPT), str(d / "cases.traj"), str(d / "out.npz")],
                       capture_output=True, text=True, env=env, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    z = np.load(d / "out.npz")
    out = {}
    for k, n in enumerate(NAMES):
        out[n] = (float(z[f"E{k}"]), z[f"F{k}"], z[f"S{k}"])
        if f"cellE{k}" in z:
            out[n + " (cell given)"] = (float(z[f"cellE{k}"]), z[f"cellF{k}"], z[f"cellS{k}"])
    return out


def _jaxcert(model: jaxcert.Model, dtype) -> dict[str, tuple[float, np.ndarray, np.ndarray]]:
    """{name: (E, F, σ)} by jaxcert: one jitted E, F, σ per pbc group (one reverse pass), the group stacked
    (padded)."""
    out = {}
    for group in GROUPS:
        batch = model.prepare(jaxcert.stack([jaxcert.Structure.from_ase(CASES[n], dtype=dtype) for n in group]))

        def efs(s):
            if s.periodic:  # one reverse pass for all three (Model.energy_forces_stress_of)
                return model.energy_forces_stress_of(model.params, s)
            E, F = model.energy_and_forces_of(model.params, s)
            return E, F, jnp.zeros((3, 3), F.dtype)

        E, F, S = jax.jit(jax.vmap(efs))(batch)
        for k, n in enumerate(group):
            out[n] = (float(E[k]), np.asarray(F[k][: len(CASES[n])]), np.asarray(S[k]))
    return out


def _nequix_graph64() -> dict[str, tuple[float, np.ndarray, np.ndarray]]:
    """{name: (E, F, σ)}: nequix's model (weights cast to float64) on nequix's own float64 graph, the cell
    always given (zero shifts for the molecules, whose σ is set to zero as jaxcert's is in :func:`_jaxcert`),
    every graph padded to one shape (one compile)."""
    import equinox as eqx
    import jraph
    from ase.geometry import complete_cell
    from nequix.data import atomic_numbers_to_indices, dict_to_graphstuple, preprocess_graph

    from jaxcert.adapters import nequix as _nequix

    module, config = _nequix.load_nequix(CKPT)
    index = atomic_numbers_to_indices(config["atomic_numbers"])
    graphs = {}
    for n, a in CASES.items():
        g = preprocess_graph(a, index, module.cutoff, False)
        g["positions"], g["shifts"] = a.positions.astype(np.float64), g["shifts"].astype(np.float64)
        g["cell"] = np.asarray(complete_cell(a.cell), np.float64)
        graphs[n] = dict_to_graphstuple(g)
    n_node = max(int(g.n_node[0]) for g in graphs.values()) + 1
    n_edge = max(int(g.n_edge[0]) for g in graphs.values()) + 1
    net = eqx.filter_jit(jax.tree.map(lambda x: jnp.asarray(x, jnp.float64) if eqx.is_inexact_array(x) else x,
                                      module))
    out = {}
    for n, g in graphs.items():
        E, F, S = net(jraph.pad_with_graphs(g, n_node=n_node, n_edge=n_edge, n_graph=2))
        S = np.asarray(S[0]) if CASES[n].pbc.any() else np.zeros((3, 3))  # a molecule has no stress
        out[n] = (float(E[0]), np.asarray(F[: len(CASES[n])]), S)
    return out


def _compare(label: str, got, ref, ref_names: dict[str, str], tol: tuple[float, float, float]) -> None:
    """Record and check |ΔE|/atom, max |ΔF| and max |Δσ| of every case against ``ref[ref_names[name]]``."""
    rows = MEASURED.setdefault(label, {})
    for n in NAMES:
        E, F, S = got[n]
        E0, F0, S0 = ref[ref_names.get(n, n)]
        row = {"dE_per_atom": abs(E - E0) / len(CASES[n]), "dF": float(np.abs(F - F0).max()),
               "dS": float(np.abs(S - S0).max()), "max|F|": float(np.abs(F0).max())}
        rows[n] = row
    for n, row in rows.items():
        assert row["dE_per_atom"] <= tol[0], (n, row)
        assert row["dF"] <= tol[1], (n, row)
        assert row["dS"] <= tol[2], (n, row)
        assert row["max|F|"] > 1e-2, (n, row)  # the comparison is not between zeros


def test_float32_equals_nequix_calculator(calculator):
    model = jaxcert.Model.from_nequix(CKPT, dtype="float32")  # the default graph: a flat edge list
    assert model.edges
    assert model.name == "nequix:nequix-mp-1@float32" and model.cutoff == 6.0 and 14 in model.elements
    got = _jaxcert(model, jnp.float32)
    _compare("float32 vs calculator", got, calculator, {"Si slab": "Si slab (cell given)"}, TOL["float32"])
    assert abs(np.asarray(calculator["bulk Si"][2])).max() > 1e-3  # stress compared, not zeros
    # the calculator itself on the slab: no cell reaches the model, so its image shifts are dropped
    E_slab, E_cell = calculator["Si slab"][0], calculator["Si slab (cell given)"][0]
    MEASURED["calculator on the slab, no cell vs cell given"] = {"Si slab": {"dE": abs(E_slab - E_cell)}}


def test_float64_equals_nequix_model_on_its_own_graph():
    model = jaxcert.Model.from_nequix(CKPT, dtype="float64", capacity=CAPACITY)  # rows of slots per atom
    assert all(x.dtype == jnp.float64 for x in jax.tree.leaves(model.params))
    _compare("float64 vs nequix model on nequix graph", _jaxcert(model, jnp.float64), _nequix_graph64(), {},
             TOL["float64"])


def test_dropping_the_image_shifts_is_caught(calculator, monkeypatch):
    """Negative control: edge vectors r_j − r_i without the periodic image offset (a naive conversion of
    jaxcert's pair list) break the agreement on the periodic cell: the test can fail."""
    import jaxcert.adapters.frameworks as adapters

    build = adapters.build_graph

    def without_shifts(s, cutoff, species=None, capacity=None):
        g, ok = build(s, cutoff, species, capacity)
        R = s.positions
        return g._replace(edge_vectors=jnp.where(g.edge_mask[:, None], R[g.senders] - R[g.receivers],
                                                 g.edge_vectors)), ok

    monkeypatch.setattr(adapters, "build_graph", without_shifts)
    model = jaxcert.Model.from_nequix(CKPT, dtype="float32")
    E = float(model.energy(jaxcert.Structure.from_ase(CASES["bulk Si"], dtype=jnp.float32)))
    E_ref = calculator["bulk Si"][0]
    MEASURED["negative control (no image shifts), bulk Si"] = {"bulk Si": {"dE": abs(E - E_ref)}}
    assert not abs(E - E_ref) / 2 <= TOL["float32"][0]  # also true for NaN (a zero self-image vector)


def test_gradient_over_the_weights():
    model = jaxcert.Model.from_nequix(CKPT, dtype="float32", capacity=CAPACITY)
    s = model.prepare(jaxcert.Structure.from_ase(CASES["CH4"], dtype=jnp.float32))
    g = jax.jit(jax.grad(model.energy_of))(model.params, s)
    norms = [float(jnp.linalg.norm(x)) for x in jax.tree.leaves(g)]
    assert len(norms) == len(jax.tree.leaves(model.params)) and all(np.isfinite(norms))
    assert sum(v > 0 for v in norms) > len(norms) // 2


def test_matmul_precision_is_highest_in_the_network_only():
    """nequix's import sets JAX's global matmul precision to "highest" (full float32 on GPUs); the adapter
    restores the global setting and asks for "highest" in the network's own products (checked on the
    lowered program: no compile)."""
    before = jax.config.jax_default_matmul_precision
    model = jaxcert.Model.from_nequix(CKPT, dtype="float32", capacity=CAPACITY)
    assert jax.config.jax_default_matmul_precision == before
    s = model.prepare(jaxcert.Structure.from_ase(CASES["CH4"], dtype=jnp.float32))
    dots = [ln for ln in jax.jit(model.energy_of).lower(model.params, s).as_text().splitlines()
            if "dot_general" in ln]
    assert dots and all("HIGHEST" in ln for ln in dots)


def _float64_sizes(fn, *args) -> list[int]:
    """Sizes of every float64 array the jaxpr of ``fn(*args)`` computes, inner jaxprs included."""
    sizes: list[int] = []

    def walk(j):
        for e in j.eqns:
            sizes.extend(int(np.prod(v.aval.shape)) for v in e.outvars
                         if getattr(v.aval, "dtype", None) == jnp.float64)
            for p in e.params.values():
                for q in (p if isinstance(p, (list, tuple)) else (p,)):
                    inner = getattr(q, "jaxpr", None)
                    if inner is not None:
                        walk(getattr(inner, "jaxpr", inner))

    walk(jax.make_jaxpr(fn)(*args).jaxpr)
    return sizes


def test_a_float32_network_stays_float32_on_float64_structures(monkeypatch):
    """Under x64 (this session has it on) e3nn-jax's numpy float64 constants would promote a float32 network's
    features to float64; the adapter traces the network in its own precision.  The float32 model's forces on
    float64 structures compute no float64 array larger than the positions' own ops (a few per atom), and equal
    its forces on the same structure in float32; with the precision scope removed, edge features run in float64."""
    import contextlib

    model = jaxcert.Model.from_nequix(CKPT, dtype="float32")
    a = CASES["bulk Si"]
    s64 = model.prepare(jaxcert.Structure.from_ase(a, dtype=jnp.float64))
    s32 = model.prepare(jaxcert.Structure.from_ase(a, dtype=jnp.float32))
    small = 9 * s64.n_atoms  # positions, forces, the cell's gradient: structure-sized
    sizes = _float64_sizes(lambda s: model.forces_of(model.params, s), s64)
    assert max(sizes) <= small
    F64, F32 = (np.asarray(model.forces_of(model.params, s)) for s in (s64, s32))
    assert F64.dtype == np.float64 and np.max(np.abs(F64 - F32)) <= 1e-5
    monkeypatch.setattr(jax, "enable_x64", lambda on: contextlib.nullcontext())
    leaky = jaxcert.Model.from_nequix(CKPT, dtype="float32")
    assert max(_float64_sizes(lambda s: leaky.forces_of(leaky.params, s), s64)) > 50 * small


def test_cli_spec_and_missing_file(tmp_path):
    from jaxcert import models
    from jaxcert.cli._common import load_model
    from jaxcert.core import inputs

    assert "nequix" in models.spec_heads()
    m = load_model(f"nequix:{CKPT}@float32,capacity=128")
    assert m.name == "nequix:nequix-mp-1@float32" and dict(m.info)["graph"] == "128 slots per atom" and not m.edges
    assert load_model(f"nequix:{CKPT}@float32").edges  # the default: a flat edge list
    for bad, words in ((f"nequix:{tmp_path / 'none.nqx'}", "no Nequix checkpoint"), ("nequix:", "needs the path"),
                       (f"nequix:{CKPT}@float16", "unknown option")):
        with pytest.raises(inputs.InputError, match="--model") as err:
            load_model(bad)
        assert words in str(err.value)


def test_importing_jaxcert_never_loads_nequix():
    code = ("import sys, jaxcert, jaxcert.core.model, jaxcert.models; "
            "bad = [m for m in ('nequix', 'equinox', 'jraph') if m in sys.modules]; assert not bad, bad")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def teardown_module():
    if MEASURED:
        print("\nnequix agreement (measured):\n" + json.dumps(MEASURED, indent=1))


def test_a_checkpoint_has_one_identity_however_its_path_is_spelled(monkeypatch):
    """A relative and an absolute path to the same file give the same model description, so a report made with
    one resumes with the other (the board's TOML spells paths relative to the repository)."""
    from jaxcert.cli._common import load_model

    monkeypatch.chdir(WEIGHTS.parent)
    a = dict(load_model(f"nequix:{CKPT}@float32").info)
    b = dict(load_model("nequix:./nequix/../nequix/nequix-mp-1.nqx@float32").info)
    assert a == b and a["checkpoint_file"] == str(CKPT.resolve())
