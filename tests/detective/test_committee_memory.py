"""The committee under a memory shortage (docs/architecture.md "Memory"): a batch that does not fit is evaluated
in halves, with the answers of the unconstrained batch; a single configuration that does not fit raises
:class:`jaxcert.core.batching.ProgramTooLarge` with the numbers, never a crash inside XLA."""

import numpy as np
import pytest
from ase.build import bulk

from jaxcert.core import batching
from jaxcert.core.structure import Structure
from jaxcert.detective import Committee
from tests._memory import starve


def _configs():
    rng = np.random.default_rng(0)
    out = []
    for k in range(12):  # twelve rattled Cu cells: one chunk of 64 (padded) when memory is ample
        a = bulk("Cu", "fcc", a=3.6, cubic=True).repeat((2, 2, 2))
        a.positions += rng.normal(scale=0.05, size=a.positions.shape)
        a.set_cell(a.cell * (1 + 0.01 * k), scale_atoms=True)
        out.append(Structure.from_ase(a))
    return out


def _run(lj_models, monkeypatch, free):
    needs, refused = starve(monkeypatch, free)
    c = Committee(lj_models["lj"], [lj_models["soft"]])
    E, F = c.energies_forces(_configs())
    return c, E, F, needs, refused


def test_a_batch_that_does_not_fit_is_halved_with_the_same_answers(lj_models, monkeypatch):
    _, E0, F0, needs, refused = _run(lj_models, monkeypatch, 1 << 50)
    assert not refused and np.isfinite(E0).all()
    free = int(max(needs) / batching.MEMORY_SHARE * 0.99)  # the full batch no longer fits
    c, E, F, _, refused = _run(lj_models, monkeypatch, free)
    assert refused and all(w < 64 for w in c._cap.values()) and c._cap
    np.testing.assert_allclose(E, E0, rtol=1e-12)
    for fm, fm0 in zip(F, F0, strict=True):
        for f, f0 in zip(fm, fm0, strict=True):
            np.testing.assert_allclose(f, f0, rtol=1e-10, atol=1e-12)


def test_one_configuration_that_does_not_fit_is_a_clear_error(lj_models, monkeypatch):
    with pytest.raises(batching.ProgramTooLarge, match="GB of memory"):
        _run(lj_models, monkeypatch, 1000)


def test_relaxations_that_do_not_fit_are_halved_with_the_same_answers(lj_models, monkeypatch):
    configs = _configs()[:4]
    movable = [np.ones(s.n_atoms) for s in configs]

    def relax(free):
        needs, refused = starve(monkeypatch, free)
        c = Committee(lj_models["lj"], [lj_models["soft"]])
        return c, c.relax(configs, movable, fmax=0.05, max_steps=10), needs, refused

    c0, (E0, P0, conv0), needs, refused = relax(1 << 50)
    assert not refused and np.isfinite(E0).all()
    c, (E, P, conv), _, refused = relax(int(max(needs) / batching.MEMORY_SHARE * 0.99))
    assert refused and c._cap and all(w < c0._cap[k] for k, w in c._cap.items())
    np.testing.assert_allclose(E, E0, rtol=1e-10)
    np.testing.assert_array_equal(conv, conv0)
    for pm, pm0 in zip(P, P0, strict=True):
        for p, p0 in zip(pm, pm0, strict=True):
            np.testing.assert_allclose(p, p0, rtol=1e-9, atol=1e-10)
    assert c.n_evals == c0.n_evals
