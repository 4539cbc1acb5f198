"""Model.from_mlip on a real InstaDeep mlip ForceField (NequIP at random initialisation; docs/adapters.md §3).

The reference is the ForceField's own prediction (its conservative predictor: forces and stress by its own
autodiff) on the graph mlip builds itself (``Graph.from_chemical_system``, matscipy's neighbour list).
"""

import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from ase import Atoms
from ase.build import bulk, molecule

import jaxcert
from jaxcert.cli import main

mlip = pytest.importorskip("mlip", reason="InstaDeep mlip is not installed (pip install 'jaxcert[mlip]')")

from mlip.data import DatasetInfo  # noqa: E402
from mlip.data.chemical_system import ChemicalSystem  # noqa: E402
from mlip.graph import Graph  # noqa: E402
from mlip.models import ForceField, Nequip  # noqa: E402
from mlip.models.force_field import get_dummy_graph_for_model_init  # noqa: E402
from mlip.typing.properties import Properties  # noqa: E402

CUTOFF = 4.0
MODULE = """
import jax
import jaxcert
from mlip.data import DatasetInfo
from mlip.models import ForceField, Nequip
from mlip.models.force_field import get_dummy_graph_for_model_init
from mlip.typing.properties import Properties

info = DatasetInfo(atomic_energies_map={{1: -1.1, 6: -7.3, 14: -4.6}}, graph_cutoff_angstrom={cutoff},
                   avg_num_neighbors=12.0)
cfg = Nequip.Config(num_layers=2, target_irreps="8x0e + 8x0o + 4x1o + 4x1e", l_max=2, radial_mlp_hidden=[16])
network, properties = Nequip(cfg, info), Properties()
predictor = ForceField.get_predictor_class(properties, network.config)(
    mlip_network=network, required_properties=properties,
    energy_head=ForceField.get_energy_head(network.config, properties, network))
params = jax.jit(predictor.init)(jax.random.key(1), get_dummy_graph_for_model_init())  # what from_mlip_network does
model = jaxcert.Model.from_mlip(ForceField(predictor=predictor, params=params))
"""


@pytest.fixture(scope="module")
def force_field():
    """The ForceField ``from_mlip_network`` builds, with its random initialisation compiled (the eager one takes
    three times longer on this CPU; same predictor, same key)."""
    info = DatasetInfo(atomic_energies_map={1: -1.1, 6: -7.3, 14: -4.6}, graph_cutoff_angstrom=CUTOFF,
                       avg_num_neighbors=12.0)
    cfg = Nequip.Config(num_layers=2, target_irreps="8x0e + 8x0o + 4x1o + 4x1e", l_max=2, radial_mlp_hidden=[16])
    network, properties = Nequip(cfg, info), Properties(stress=True)
    predictor = ForceField.get_predictor_class(properties, network.config)(
        mlip_network=network, required_properties=properties,
        energy_head=ForceField.get_energy_head(network.config, properties, network))
    params = jax.jit(predictor.init)(jax.random.key(1), get_dummy_graph_for_model_init())
    return ForceField(predictor=predictor, params=params)


def _reference(ff, atoms):
    """The ForceField's own prediction on mlip's own graph, compiled (eager e3nn-jax costs about 15 s per case)."""
    g = Graph.from_chemical_system(ChemicalSystem.from_ase_atoms(atoms, get_property_fields=False), CUTOFF)
    p = jax.jit(lambda graph: ff(graph))(g)
    return float(np.asarray(p.energy)[0]), np.asarray(p.forces), np.asarray(p.stress)[0]


def _cases():
    sic = bulk("SiC", "zincblende", a=4.36)  # 2 atoms: the cutoff spans several images of each atom
    sic.set_cell(sic.cell[:] @ np.array([[1.0, 0.04, 0.0], [0.0, 1.0, -0.03], [0.02, 0.0, 1.0]]),
                 scale_atoms=True)
    sic.rattle(0.05, seed=1)
    big = bulk("Si", "diamond", a=5.43, cubic=True)
    big[1].symbol = "C"
    big.rattle(0.05, seed=2)
    slab = bulk("Si", "diamond", a=5.43, cubic=True).repeat((1, 1, 2))
    slab.center(vacuum=6.0, axis=2)
    slab.pbc = (True, True, False)
    slab.rattle(0.05, seed=3)
    ch4 = molecule("CH4")
    ch4.rattle(0.02, seed=4)
    return {"skewed 2-atom SiC": sic, "8-atom SiC": big, "Si slab": slab, "CH4": ch4}


#: the 8-atom SiC cell is compared in test_padding_atoms_are_inert; the skewed 2-atom cell is the harder periodic case
@pytest.mark.parametrize("name", ["skewed 2-atom SiC", "Si slab", "CH4"])
def test_energy_forces_stress_equal_the_force_fields_own(force_field, name):
    atoms = _cases()[name]
    model = jaxcert.Model.from_mlip(force_field)
    s = jaxcert.Structure.from_ase(atoms, dtype=jnp.float64)
    E_ref, F_ref, S_ref = _reference(force_field, atoms)
    # one compiled call per case (energy, forces and stress from one pass; equal to the separate calls,
    # tests/test_calculator.py), so the four cases cost four compilations, not twelve
    if all(atoms.pbc):
        E, F, S = model.energy_forces_stress(s)
        np.testing.assert_allclose(np.asarray(S), S_ref, atol=1e-10)
        assert np.abs(S_ref).max() > 1e-5
    else:
        E, F = model.energy_and_forces(s)
    assert abs(float(E) - E_ref) < 1e-10 * max(1.0, abs(E_ref))
    np.testing.assert_allclose(np.asarray(F), F_ref, atol=1e-10)
    assert np.abs(F_ref).max() > 1e-3  # the comparison is not between zeros


def test_padding_atoms_are_inert(force_field):
    """In a stacked batch the smaller structure is padded: its energy is that of the structure alone."""
    model = jaxcert.Model.from_mlip(force_field)
    cases = _cases()
    small, large = cases["skewed 2-atom SiC"], cases["8-atom SiC"]
    batch = jaxcert.stack([jaxcert.Structure.from_ase(a, dtype=jnp.float64) for a in (small, large)])
    batch = model.prepare(batch)
    E = jax.jit(jax.vmap(lambda s: model.energy_of(model.params, s)))(batch)
    for e, atoms in zip(np.asarray(E), (small, large), strict=True):
        assert abs(e - _reference(force_field, atoms)[0]) < 1e-10 * max(1.0, abs(e))


def test_ignoring_the_image_shifts_is_caught(force_field, monkeypatch):
    """Negative control: an adapter that drops the periodic image offsets (as a naive conversion of
    jaxcert's pair list would) gives another energy for a small periodic cell; the comparison sees it."""
    import jaxcert.adapters.frameworks as adapters

    monkeypatch.setattr(adapters, "inv3", lambda h: jnp.zeros_like(h))
    model = jaxcert.Model.from_mlip(force_field)
    atoms = _cases()["skewed 2-atom SiC"]
    E = float(model.energy(jaxcert.Structure.from_ase(atoms, dtype=jnp.float64)))
    assert abs(E - _reference(force_field, atoms)[0]) > 1e-3


def test_unsupported_elements_and_configurations_are_refused(force_field):
    model = jaxcert.Model.from_mlip(force_field)
    assert model.elements == (1, 6, 14)
    with pytest.raises(jaxcert.core.model.UnsupportedElement, match="Fe"):
        model.energy(jaxcert.Structure.from_ase(Atoms("Fe2", positions=[[0, 0, 0], [0, 0, 2.2]]),
                                                dtype=jnp.float64))
    with pytest.raises(TypeError, match="ForceField"):
        jaxcert.Model.from_mlip(object())


def test_certify_from_the_cli_with_module_attr(tmp_path, monkeypatch, capsys):
    (tmp_path / "my_mlip_model.py").write_text(textwrap.dedent(MODULE.format(cutoff=CUTOFF)))
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "r.json"
    code = main(["certify", "--model", "my_mlip_model:model", "--elements", "Si", "--probes",
                 "equivariance,conservativeness", "--json", str(out), "--quiet"])
    sys.modules.pop("my_mlip_model", None)
    assert code == 0, capsys.readouterr().err
    import json

    rep = json.loads(out.read_text())
    assert rep["model"]["name"] == "mlip-nequip"
    probes = {p["name"]: p for p in rep["probes"]}
    assert set(probes) == {"equivariance", "conservativeness"}
    for p in probes.values():  # an exactly invariant, conservative network passes both gates
        assert all(v["gate"] for v in p["per_element"].values()), p["name"]


def test_importing_jaxcert_never_loads_mlip():
    import subprocess

    code = ("import sys, jaxcert, jaxcert.core.model; "
            "bad = [m for m in ('mlip', 'e3j') if m in sys.modules]; assert not bad, bad")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
