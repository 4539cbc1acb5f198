"""Calls that do not fit in memory run in smaller chunks (jaxcert.core.batching.check_fits, docs/architecture.md
"Memory"): the answers are those of the unconstrained run, and one geometry that still does not fit is a
probe error naming both numbers while the other probes go on.

The device's free memory is replaced by a number chosen from the programs' own needs (XLA's buffer
assignment, ``memory_analysis()``), measured in a first, unconstrained run.
"""

import jax.numpy as jnp
import numpy as np
import pytest

import jaxcert
from jaxcert.core import batching
from tests._memory import starve

ELEMENTS = ["Li", "Be", "B", "C", "Na"]  # five supercells: one chunk of eight when memory is ample
PROBES = "representation,equivariance"


def _run(monkeypatch, free):
    needs, refused = starve(monkeypatch, free)
    rep = jaxcert.certify(jaxcert.models.get("lj"), ELEMENTS, probes=PROBES, dtype=jnp.float64)
    return rep, needs, refused


def _per_element(rep, name):
    out = next(o for o in rep.outcomes if o.name == name)
    return list(zip(out.status, out.defect.tolist(), strict=True))


@pytest.fixture(scope="module")
def ample():
    mp = pytest.MonkeyPatch()
    try:
        yield _run(mp, 1 << 50)
    finally:
        mp.undo()


def test_unconstrained_run_refuses_nothing(ample):
    rep, needs, refused = ample
    assert refused == [] and len(needs) > 2 and max(needs) > min(needs)
    assert all(s == "ok" for name in PROBES.split(",") for s, _ in _per_element(rep, name))


def test_a_call_that_does_not_fit_is_split_and_gives_the_same_answers(ample, monkeypatch):
    rep0, needs0, _ = ample
    largest = max(needs0)
    free = int(largest / batching.MEMORY_SHARE * 0.99)  # the largest call no longer fits; halves of it do
    rep, needs, refused = _run(monkeypatch, free)
    assert refused and min(refused) >= largest * 0.99
    assert max(n for n in needs if n not in refused) <= batching.MEMORY_SHARE * free
    for name in PROBES.split(","):
        a, b = _per_element(rep0, name), _per_element(rep, name)
        assert [s for s, _ in a] == [s for s, _ in b] == ["ok"] * len(ELEMENTS)
        np.testing.assert_allclose([d for _, d in b], [d for _, d in a], rtol=1e-9, atol=1e-15)


def test_one_geometry_that_does_not_fit_is_a_probe_error_and_the_run_goes_on(monkeypatch):
    rep, _, refused = _run(monkeypatch, 1000)  # a kilobyte: nothing fits
    assert refused
    for name in PROBES.split(","):
        out = next(o for o in rep.outcomes if o.name == name)
        assert out.status == ["error"] * len(ELEMENTS)
        assert "GB of memory" in str(out.details[0].get("error")), out.details[0]
