"""SevenNet-0 (weights in the wheel) through the torch bridge."""

import warnings

import pytest

pytest.importorskip("sevenn")
jb = pytest.importorskip("jaxcert_bridges")

from tests.bridges import _universal as U  # noqa: E402


@pytest.fixture(scope="module")
def model():
    return jb.sevennet("7net-0")


def test_matches_sevennet_calculator(model):
    from sevenn.calculator import SevenNetCalculator

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        calc = SevenNetCalculator("7net-0", device="cpu")
    U.check_matches_calculator(model, calc, atol_f32=5e-5, atol_f64=5e-5)


def test_exact_second_derivatives(model):
    U.check_exact_second_derivatives(model)


def test_float32_and_float64_floors(model):
    res = U.rotation_residuals(model)
    assert res["float64"] < 1e-8 and res["float32"] < 1e-4
    assert res["float32"] > 10 * res["float64"]


def test_multifidelity_needs_its_modal():
    with pytest.raises(ValueError, match="modal"):
        jb.sevennet("7net-mf-0")
    m = jb.sevennet("7net-mf-0", modal="PBE")
    import jaxcert

    s = jaxcert.Structure.from_ase(U.si_cell())
    assert abs(float(m.energy(s)) / s.n_atoms + 5.4) < 0.5  # a Si cell near -5.4 eV/atom (PBE)


def test_graph_reuse_with_a_skin_is_exact():
    """Edges built at cutoff + skin and cut back to the cutoff: the fresh-graph energy and gradients (float64)."""
    from jaxcert_bridges.sevennet_potential import SevenNetPotential

    U.check_graph_reuse(SevenNetPotential("7net-0", skin=0.5), SevenNetPotential("7net-0", skin=0.0))


def test_load_spells_the_bridge_torch_sevennet(monkeypatch):
    """``torch-sevennet:...`` is the bridge's own spelling; ``sevennet:...`` still resolves to the same call."""
    calls = []
    monkeypatch.setattr(jb, "sevennet", lambda name, modal=None, **kw: calls.append((name, modal, kw)))
    jb.load("torch-sevennet:7net-mf-0:PBE@float64")
    jb.load("sevennet:7net-mf-0:PBE@float64")
    jb.load("torch-sevennet")
    assert calls == [("7net-mf-0", "PBE", {"precision": "float64"})] * 2 + [("7net-0", None, {})]
