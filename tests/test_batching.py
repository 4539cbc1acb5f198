"""jaxcert.core.batching: vmap under a memory budget (Model.max_batch) computes what jax.vmap computes, in chunks."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from ase.build import bulk

import jaxcert
from jaxcert import models
from jaxcert.cli import main
from jaxcert.core import batching


def _rattled_batch(k: int) -> jaxcert.Structure:
    ss = []
    for i in range(k):
        a = bulk("Ar", "fcc", a=5.26, cubic=True)
        a.rattle(0.05, seed=i)
        ss.append(jaxcert.Structure.from_ase(a, dtype=jnp.float64))
    return jaxcert.stack(ss)


def _has_loop(fn, *args) -> bool:
    text = str(jax.make_jaxpr(fn)(*args))
    return "scan" in text or "while" in text


@pytest.mark.parametrize("budget", [1, 2, 3, 7])
def test_chunked_energy_and_forces_equal_vmap(budget):
    model = models.get("lj")
    batch = model.prepare(_rattled_batch(7))
    ef = lambda s: (model.energy_of(model.params, s), model.forces_of(model.params, s))  # noqa: E731
    ref = jax.jit(jax.vmap(ef))(batch)
    got = jax.jit(batching.vmap(ef, budget))(batch)
    for r, g in zip(ref, got, strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(r), rtol=1e-13, atol=1e-13)
    # the budget binds below the batch size: a loop over chunks; at the batch size: plain vmap
    assert _has_loop(batching.vmap(ef, budget), batch) == (budget < 7)


def test_nested_batches_share_the_budget():
    seen = []

    def inner(x):
        seen.append(batching.enclosing())
        return jnp.sin(x) * x

    def nested(budget):
        return batching.vmap(lambda row: batching.vmap(inner, budget)(row), budget)

    x = jnp.arange(20.0).reshape(4, 5)
    got = jax.jit(nested(6))(x)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(jnp.sin(x) * x))
    # the outer batch (4) fits; the inner one (5) does not fit beside it: chunks of 6 // 4 = 1
    assert seen and all(e == 4 for e in seen)
    assert _has_loop(nested(6), x)
    assert not _has_loop(nested(20), x)  # 4 x 5 fits in 20: two plain vmaps


def test_chunking_lowers_the_working_memory():
    """XLA's own memory analysis: a gradient through 256x256 intermediates (reverse mode keeps them, as a
    network's forces do), over 64 items, needs far less working memory in chunks of 4."""

    def heavy(v):
        return jax.grad(lambda w: jnp.sum(jnp.tanh(jnp.outer(w, w)) @ jnp.sin(jnp.outer(w, w))))(v)

    x = jnp.ones((64, 256)) * jnp.linspace(0.1, 1.0, 256)
    full = jax.jit(jax.vmap(heavy)).lower(x).compile().memory_analysis().temp_size_in_bytes
    chunked = jax.jit(batching.vmap(heavy, 4)).lower(x).compile().memory_analysis().temp_size_in_bytes
    assert chunked * 8 < full, (chunked, full)  # measured: 5.5 MB against 134 MB
    np.testing.assert_allclose(np.asarray(jax.jit(batching.vmap(heavy, 4))(x)), np.asarray(jax.vmap(heavy)(x)),
                               rtol=1e-12)


def test_jacfwd_equals_jax_jacfwd():
    model = models.get("lj")
    s = model.prepare(jaxcert.Structure.from_ase(bulk("Ar", "fcc", a=5.26, cubic=True), dtype=jnp.float64))
    s = s.replace(positions=s.positions + 0.03 * jnp.sin(jnp.arange(12.0)).reshape(4, 3))
    f = lambda R: model.forces_of(model.params, s.replace(positions=R))  # noqa: E731
    ref = jax.jacfwd(f)(s.positions)
    for budget in (None, 5, 12):
        got = batching.jacfwd(f, budget)(s.positions)
        assert got.shape == ref.shape == (4, 3, 4, 3)
        np.testing.assert_allclose(np.asarray(got), np.asarray(ref), rtol=1e-13, atol=1e-13)
    g = lambda e: jnp.stack([jnp.sum(e**2), jnp.prod(e)])  # noqa: E731
    e0 = jnp.arange(1.0, 7.0)
    np.testing.assert_allclose(np.asarray(batching.jacfwd(g, 2)(e0)), np.asarray(jax.jacfwd(g)(e0)), rtol=1e-14)


def test_a_non_positive_budget_is_refused():
    with pytest.raises(ValueError, match="max_batch"):
        batching.vmap(jnp.sin, 0)


def test_probes_under_a_budget_match_the_unbatched_run():
    """Smoothness (81-point scans), equivariance (8 rotations) and zero_modes (jacfwd) on two elements."""
    model = models.get("lj")
    kw = dict(elements=["Ar", "Si"], probes=["smoothness", "equivariance", "zero_modes"], dtype=jnp.float64)
    ref = jaxcert.certify(model, **kw)
    got = jaxcert.certify(model.replace(max_batch=3), **kw)
    for a, b in zip(ref.outcomes, got.outcomes, strict=True):
        assert a.name == b.name
        # clean LJ sits at the float64 floor (equivariance ~3e-11): chunking reorders sums, so round-off is
        # compared with an absolute tolerance at that floor (a real defect is compared to 1e-9 relative)
        np.testing.assert_allclose(b.defect, a.defect, rtol=1e-9, atol=1e-10, err_msg=a.name)
        np.testing.assert_array_equal(b.gate, a.gate)


def test_defect_wrappers_keep_the_budget():
    from jaxcert.models.defects import DEFECTS

    model = models.get("lj").replace(max_batch=5)
    assert DEFECTS["curl"](model, 0.1).max_batch == 5


@pytest.mark.parametrize("value", ["0", "-3", "two", "2.5"])
def test_cli_max_batch_bad_value_exits_2_naming_it(value, capsys):
    assert main(["certify", "--model", "lj", "--elements", "Ar", "--probes", "parity", "--max-batch", value]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("jaxcert: error: --max-batch: got"), err


def test_cli_max_batch_reaches_the_model_and_changes_no_result(tmp_path):
    out = {}
    for b in ("none", "2"):
        path = tmp_path / f"{b}.json"
        main(["certify", "--model", "lj", "--elements", "Ar", "--probes", "smoothness", "--max-batch", b,
              "--json", str(path), "--quiet"])
        out[b] = json.loads(path.read_text())
    d = [[p["defect"] for p in o["probes"] if p["name"] == "smoothness"] for o in out.values()]
    assert len(d[0]) == 1 and np.allclose(d[0], d[1], rtol=1e-9, atol=1e-12)


def test_shared_arguments_with_in_axes_none():
    x, w = jnp.arange(12.0).reshape(6, 2), jnp.asarray([0.5, -1.5])
    f = lambda a, b: jnp.tanh(a @ b) * a  # noqa: E731
    ref = jax.vmap(f, in_axes=(0, None))(x, w)
    for budget in (None, 2, 4, 6):
        got = jax.jit(batching.vmap(f, budget, in_axes=(0, None)))(x, w)
        np.testing.assert_array_equal(np.asarray(got), np.asarray(ref))
    assert _has_loop(batching.vmap(f, 4, in_axes=(0, None)), x, w)
    with pytest.raises(ValueError, match="in_axes"):
        batching.vmap(f, 2, in_axes=(1, None))(x, w)


def test_the_attack_grid_under_a_budget_matches_the_unbatched_grid():
    from jaxcert.attacks import pipeline

    model = models.get("lj")
    atoms = [bulk("Ar", "fcc", a=5.26, cubic=True), bulk("Ar", "fcc", a=5.3, cubic=True)]
    for k, a in enumerate(atoms):
        a.rattle(0.02, seed=k)
    kw = dict(epsilons=[0.02, 0.05], seeds=(1, 2), config=pipeline.PipelineConfig(max_steps=40))
    ref = pipeline.run_grid(model, [jaxcert.Structure.from_ase(a, dtype=jnp.float64) for a in atoms], **kw)
    got = pipeline.run_grid(model.replace(max_batch=3),
                            [jaxcert.Structure.from_ase(a, dtype=jnp.float64) for a in atoms], **kw)
    for a, b in zip(jax.tree.leaves(ref), jax.tree.leaves(got), strict=True):
        if hasattr(a, "dtype") and jnp.issubdtype(a.dtype, jnp.floating):
            np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-9, atol=1e-12)


def test_sweep_max_batch_bad_value_exits_2_naming_it(tmp_path, capsys):
    argv = ["sweep", "--model", "lj", "--structures", "Ar", "--attack", "fgsm", "--eps", "0.01", "--seed", "1",
            "--db", str(tmp_path / "s.sqlite"), "--max-batch", "zero", "--quiet"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("jaxcert: error: --max-batch: got"), err


def test_in_chunks_covers_every_item_once_and_halves_only_what_does_not_fit():
    calls = []

    def call(lo, hi, width):
        calls.append((lo, hi, width))
        if width > 2 and lo >= 8:  # the later items are larger: four of them do not fit
            raise batching.ProgramTooLarge("does not fit")
        return list(range(lo, hi))

    parts, width = batching.in_chunks(11, 4, call)
    assert [i for p in parts for i in p] == list(range(11))
    assert width == 2
    assert calls == [(0, 4, 4), (4, 8, 4), (8, 11, 4), (8, 10, 2), (10, 11, 2)]  # finished chunks kept


def test_in_chunks_raises_other_errors_and_what_does_not_fit_one_at_a_time():
    def broken(lo, hi, width):
        raise ValueError("a bug, not memory")

    with pytest.raises(ValueError, match="a bug"):
        batching.in_chunks(3, 2, broken)

    def never_fits(lo, hi, width):
        raise RuntimeError("RESOURCE_EXHAUSTED: out of memory")

    with pytest.raises(RuntimeError, match="RESOURCE_EXHAUSTED"):
        batching.in_chunks(3, 4, never_fits)
    with pytest.raises(ValueError, match="width"):
        batching.in_chunks(3, 0, never_fits)
