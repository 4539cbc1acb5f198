"""Native JAX SevenNet (jaxcert.models.sevennet) against sevenn's own calculator and the bridge's float64 copy.

52 structures in seven families (tests/models/_sevennet_cases.py); each pbc kind is one padded batch and
one vmapped, compiled call for energy, forces and stress.  Compilation dominates (about 15-30 s per batch
shape and precision on this 2-core CPU), so the float64 check of the periodic families, the reversed-edge
control and the other checkpoints are marked ``slow`` (``-m slow``).  Tolerances are issue 12's: float32 against
``SevenNetCalculator`` E ≤ 4e-6 eV/atom (two float32 evaluations, each within 2e-6 eV/atom of the float64
model — measured ≤ 1.7e-6 for ours on the edge list, ≤ 1.1e-6 for sevenn's — differ by up to the sum),
F ≤ 2e-5 eV/Å, σ ≤ 2e-6 eV/Å³; float64 against the torch model's
float64 copy (the bridge's) E ≤ 1e-10 eV/atom.  Negative controls: one perturbed weight and reversed
edge vectors must fail the same comparison.  docs/sevennet.md records the measured maxima.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

pytest.importorskip("sevenn", reason="sevenn (and torch) are needed for the reference calculator")
pytest.importorskip("e3nn_jax", reason="the native SevenNet needs e3nn-jax (pip install 'jaxcert[e3nn]')")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import torch  # noqa: E402

import jaxcert  # noqa: E402
from jaxcert.models.sevennet import sevennet  # noqa: E402
from tests.models import _sevennet_cases as cases  # noqa: E402

F32 = {"E": 4e-6, "F": 2e-5, "S": 2e-6}
F64_E = 1e-10


def _groups():
    """pbc kind -> (names, atoms): periodic families, slabs, finite systems."""
    fam = cases.families()
    groups = {"bulk": ("binary_bulk", "ternary_bulk", "skewed", "small_cells"), "slab": ("slabs",),
              "finite": ("molecules", "clusters")}
    return {g: [(f, a) for f in names for a in fam[f]] for g, names in groups.items()}


@pytest.fixture(scope="module")
def native():
    return sevennet("7net-0")


@pytest.fixture(scope="module")
def groups():
    return _groups()


@pytest.fixture(scope="module")
def reference(groups):
    """SevenNetCalculator (float32) E, F and σ per structure."""
    from sevenn.calculator import SevenNetCalculator

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        calc = SevenNetCalculator("7net-0", device="cpu")
    out = {}
    for g, items in groups.items():
        res = []
        for _, a in items:
            b = a.copy()
            b.calc = calc
            res.append((b.get_potential_energy(), b.get_forces(), b.get_stress() if all(b.pbc) else None))
        out[g] = res
    return out


def _one(model, s):
    """(E, F, σ) of one structure; σ = (1/V) ∂E/∂ε for a symmetric strain (zeros without pbc)."""

    def energy(R, eps):
        moved = s.replace(positions=R)
        return model.energy_of(model.params, jaxcert.strain(moved, 0.5 * (eps + eps.T)) if s.periodic else moved)

    zero = jnp.zeros((3, 3), s.positions.dtype)
    e, (g, dE) = jax.value_and_grad(energy, argnums=(0, 1))(s.positions, zero)
    vol = jnp.abs(jnp.linalg.det(s.cell)) if s.periodic else 1.0
    return e, -g * s.mask[:, None], dE / vol


_run = jax.jit(lambda model, S: jax.vmap(lambda s: _one(model, s))(S))


def _evaluate(model, items, dtype, params=None):
    """[(E, F, σ Voigt)] of a family group: one padded batch, one compiled call (params are traced)."""
    S = model.prepare(jaxcert.stack([jaxcert.Structure.from_ase(a, dtype=dtype) for _, a in items]))
    m = model if params is None else model.replace(params=params)
    E, F, sig = jax.device_get(_run(m, S))
    return [(float(E[k]), np.asarray(F[k][: len(a)], float), np.asarray(jaxcert.voigt(sig[k]), float))
            for k, (_, a) in enumerate(items)]


def _errors(items, got, ref):
    """Per-family maxima of |ΔE|/atom, |ΔF| and |Δσ| (Voigt)."""
    out: dict[str, list[float]] = {}
    for (fam, a), (e, f, s), (E, F, S) in zip(items, got, ref, strict=True):
        err = out.setdefault(fam, [0.0, 0.0, 0.0])
        err[0] = max(err[0], abs(e - E) / len(a))
        err[1] = max(err[1], float(np.abs(f - F).max()))
        if S is not None:
            err[2] = max(err[2], float(np.abs(s - S).max()))
    return out


def test_there_are_at_least_50_structures(groups):
    assert sum(len(v) for v in groups.values()) >= 50
    assert {f for v in groups.values() for f, _ in v} >= {"binary_bulk", "ternary_bulk", "skewed", "small_cells",
                                                           "slabs", "molecules", "clusters"}


@pytest.mark.parametrize("group", ["bulk", "slab", "finite"])
def test_float32_matches_sevennet_calculator(native, groups, reference, group):
    got = _evaluate(native, groups[group], np.float32)
    errs = _errors(groups[group], got, reference[group])
    print(group, {f: [f"{x:.1e}" for x in v] for f, v in errs.items()})
    for fam, (dE, dF, dS) in errs.items():
        assert dE <= F32["E"] and dF <= F32["F"] and dS <= F32["S"], (fam, dE, dF, dS)


def _torch_f64(items, checkpoint="7net-0", modal=None):
    """E, F, σ of the float64 copy of the torch model (the bridge's), by torch autograd."""
    from jaxcert_bridges.sevennet_potential import SevenNetPotential

    pot = SevenNetPotential(checkpoint, modal=modal)
    out = []
    for _, a in items:
        s = jaxcert.Structure.from_ase(a, dtype=np.float64)
        R = torch.tensor(a.positions, dtype=torch.float64, requires_grad=True)
        eps = torch.zeros(3, 3, dtype=torch.float64, requires_grad=True)
        F_ = torch.eye(3, dtype=torch.float64) + 0.5 * (eps + eps.T)
        h = torch.tensor(np.asarray(a.cell), dtype=torch.float64)
        E = pot.energies([s], [R @ F_.T], [h @ F_.T], torch.float64)[0]
        gR, gE = torch.autograd.grad(E, (R, eps))
        S = (gE.numpy() / a.get_volume()) if all(a.pbc) else None
        out.append((float(E.detach()), -gR.numpy(), None if S is None else S[[0, 1, 2, 1, 0, 0], [0, 1, 2, 2, 2, 1]]))
    return out


@pytest.mark.parametrize("group", [pytest.param("bulk", marks=pytest.mark.slow), "finite"])
def test_float64_matches_torch_float64(native, groups, group):
    items = groups[group]
    got = _evaluate(native, items, np.float64)
    errs = _errors(items, got, _torch_f64(items))
    print(group, {f: [f"{x:.1e}" for x in v] for f, v in errs.items()})
    for fam, (dE, dF, dS) in errs.items():
        assert dE <= F64_E and dF <= 1e-9 and dS <= 1e-10, (fam, dE, dF, dS)


def test_a_perturbed_weight_fails(native, groups, reference):
    """Negative control: the hidden radial-MLP layer of the third convolution scaled by 1.01 (same compiled call)."""
    key = sorted((k for k in native.params if k.endswith(".radial1")), key=lambda k: int(k.split(".")[0]))[2]
    params = dict(native.params)
    params[key] = params[key] * 1.01
    items = groups["finite"]
    errs = _errors(items, _evaluate(native, items, np.float32, params=params), reference["finite"])
    assert max(v[0] for v in errs.values()) > 10 * F32["E"] or max(v[1] for v in errs.values()) > 10 * F32["F"]


@pytest.mark.slow
def test_reversed_edges_fail(groups, reference):
    """Negative control: messages built from r_i − r_j (the wrong direction) break the agreement."""
    wrong = sevennet("7net-0", _flip_edges=True)
    items = groups["finite"][:4]
    errs = _errors(items, _evaluate(wrong, items, np.float32), reference["finite"][:4])
    assert max(v[1] for v in errs.values()) > 10 * F32["F"]  # measured 6.7e-4 eV/Å


@pytest.mark.slow
@pytest.mark.parametrize("checkpoint,modal", [("7net-mf-0", "PBE"), ("7net-mf-0", "R2SCAN"), ("7net-l3i5", None)])
def test_other_checkpoints_match_torch_float64(groups, checkpoint, modal):
    """SevenNet-MF-0 (both modalities) and -l3i5 run through the same operations; exactness is checked in
    float64 against the torch model's float64 copy (float32 maxima against the calculators: docs/sevennet.md)."""
    model = sevennet(checkpoint, modal=modal)
    items = groups["finite"]
    errs = _errors(items, _evaluate(model, items, np.float64), _torch_f64(items, checkpoint, modal))
    print(checkpoint, modal, {f: [f"{x:.1e}" for x in v] for f, v in errs.items()})
    for fam, (dE, dF, _) in errs.items():
        assert dE <= F64_E and dF <= 1e-9, (fam, dE, dF)
