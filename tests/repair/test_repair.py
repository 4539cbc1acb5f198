"""Certify → find → repair on planted models (docs/research.md §3).

* A planted collapse of the Mo–Mo wall, found by ``investigate``, is repaired by the loss its escalation names
  (through ``jaxcert repair``, cut short and resumed: tests/repair/test_cli.py).
* A planted C–Cu desorption barrier is repaired by its barrier loss, with the anchor pulling against it (the
  planted term also acts on anchor structures) and the drift bounded.
* Every loss's gradient agrees with central finite differences along a random direction (float64).
* A clean model's losses are exactly zero with an exactly zero gradient.
* Repaired nequix parameters are written in nequix's own format: nequix loads the file, and jaxcert reads back
  exactly the parameters it wrote.
"""

import json
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcert import models
from jaxcert import repair as rp
from jaxcert.detective import examples as ex
from jaxcert.models import defects

CKPT = pathlib.Path(__file__).resolve().parents[2].parent / "shared" / "weights" / "nequix" / "nequix-mp-1.nqx"


def _max_abs(tree) -> float:
    return max(float(np.max(np.abs(np.asarray(x)))) for x in jax.tree.leaves(tree))


def _directional(loss, params, seed=0, h=1e-5, mask=None):
    """(d/dt L(p + t v) by autodiff, by central differences) along a random unit direction v."""
    leaves, tree = jax.tree.flatten(params)
    keys = jax.random.split(jax.random.key(seed), len(leaves))
    v = [jax.random.normal(k, jnp.shape(x), jnp.asarray(x).dtype) for k, x in zip(keys, leaves, strict=True)]
    if mask is not None:
        v = [a * m for a, m in zip(v, jax.tree.leaves(mask), strict=True)]
    norm = np.sqrt(sum(float(jnp.sum(a * a)) for a in v))
    v = jax.tree.unflatten(tree, [a / norm for a in v])
    g = jax.jit(jax.grad(loss))(params)
    loss = jax.jit(loss)
    exact = sum(float(jnp.sum(a * b)) for a, b in zip(jax.tree.leaves(g), jax.tree.leaves(v), strict=True))
    plus = jax.tree.map(lambda p, d: p + h * d, params, v)
    minus = jax.tree.map(lambda p, d: p - h * d, params, v)
    return exact, (float(loss(plus)) - float(loss(minus))) / (2 * h)


@pytest.fixture(scope="module")
def barrier():
    """The planted C–Cu barrier, its loss and its anchor (built once: the EMT slab programs are the cost)."""
    target = ex.emt_planted_desorption()
    loss = rp.desorption_loss(target, "Cu", "CO", {"dz_step": 0.2})
    structs, labels = rp.anchor_structures(["Cu", "C", "O"], max_atoms=8)
    return target, loss, rp.anchor_loss(target, structs, labels=labels)


def test_a_planted_desorption_barrier_is_repaired_against_its_anchor(barrier):
    emt = models.get("emt")
    target, loss, anchor = barrier
    assert float(loss(target.params)) > 0.1 and float(anchor(target.params)) == 0.0
    r = rp.repair(target, [loss], anchor, steps=300, learning_rate=2e-3, trainable="amplitude")
    assert r.solved, r.after
    assert r.reports_before[loss.name]["rise_above_asymptote_eV"] > 0.1
    assert r.reports_after[loss.name]["rise_above_asymptote_eV"] == 0.0
    drift = r.reports_after["anchor"]
    assert 0.0 < drift["max_energy_drift_eV_per_atom"] <= 2e-3  # the planted term acts on the anchor too
    assert drift["max_force_rms_eV_per_A"] <= 0.03
    clean = rp.desorption_loss(emt, "Cu", "CO", {"dz_step": 0.2})
    assert float(clean(emt.params)) == 0.0  # the clean model's loss is zero, with a zero gradient
    assert _max_abs(jax.jit(jax.grad(clean.fn))(emt.params)) == 0.0


def test_gradients_of_every_loss_agree_with_finite_differences(lj_models, barrier):
    lj = lj_models["lj"]
    collapse = ex.lj_planted_collapse()
    wall = rp.wall_loss(collapse, "Mo", "Mo", step=0.05)
    planted, barrier, _ = barrier
    structs, labels = rp.anchor_structures(["Mo"])
    anchor = rp.anchor_loss(lj, structs, labels=labels)
    moved = jax.tree.map(lambda x: x * 1.01, lj.params)  # the anchor is flat at its own minimum: move off it
    curl = defects.curl(lj, strength=0.3)
    probe = rp.probe_loss(curl, "betti", "Si")
    weak = {**collapse.params, "strength": jnp.asarray(5.0)}  # a collapse of a few hundred eV, not 10⁷
    for loss, params, mask in ((wall, weak, rp.trainable_mask(collapse.params, "strength|r_c")),
                               (barrier, planted.params, rp.trainable_mask(planted.params, "amplitude|r0|width")),
                               (anchor, moved, None), (probe, curl.params, rp.trainable_mask(curl.params, "strength"))):
        exact, fd = _directional(loss.fn, params, mask=mask)
        assert abs(exact) > 1e-6, loss.name
        assert abs(exact - fd) <= 1e-5 * max(1.0, abs(exact)), (loss.name, exact, fd)


def test_a_clean_models_losses_are_zero_with_zero_gradient(lj_models):
    lj = lj_models["lj"]  # the clean EMT's desorption loss: test_a_planted_desorption_barrier_is_repaired...
    for model, loss in ((lj, rp.wall_loss(lj, "Mo", "Mo", step=0.05)), (lj, rp.wall_loss(lj, "Cu", "W", step=0.05))):
        assert float(loss(model.params)) == 0.0, loss.name
        assert _max_abs(jax.jit(jax.grad(loss.fn))(model.params)) == 0.0, loss.name
    structs, labels = rp.anchor_structures(["Mo"])
    anchor = rp.anchor_loss(lj, structs, labels=labels)
    # the anchor at the original parameters: zero to round-off (its forces recomputed by another program)
    assert float(anchor(lj.params)) < 1e-20 and _max_abs(jax.jit(jax.grad(anchor.fn))(lj.params)) < 1e-10


def test_bad_repair_requests_are_refused(lj_models):
    lj = lj_models["lj"]
    wall = rp.wall_loss(lj, "Mo", "Mo", step=0.1)
    with pytest.raises(ValueError, match="trainable"):
        rp.repair(lj, [wall], trainable="no-such-leaf")
    with pytest.raises(ValueError, match="findings"):
        rp.repair(lj, [])
    with pytest.raises(ValueError, match="did not escalate"):
        rp.from_escalation(lj, {"escalated": False})


@pytest.mark.skipif(not CKPT.is_file(), reason="the nequix checkpoints ship in ../shared/weights/nequix")
def test_repaired_nequix_parameters_are_written_in_nequixs_own_format(tmp_path):
    pytest.importorskip("nequix")
    import nequix.model

    from jaxcert.adapters.nequix import save_nequix

    model = jaxcert_from_nequix()
    leaves, tree = jax.tree.flatten(model.params)
    changed = jax.tree.unflatten(tree, [leaves[0] * 1.5] + leaves[1:])
    out = tmp_path / "repaired.nqx"
    save_nequix(model, changed, out)
    back = jaxcert_from_nequix(out)
    for a, b in zip(jax.tree.leaves(back.params), jax.tree.leaves(changed), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b, np.float32))
    with jax.enable_x64(False):  # nequix builds its skeleton in the default dtype (float32), as its users run it
        module, config = nequix.model.load_model(str(out), kernel=False)  # nequix's own loader
    assert config == json.loads(CKPT.open("rb").readline().decode())
    with pytest.raises(ValueError, match="checkpoint"):
        save_nequix(models.get("lj"), models.get("lj").params, tmp_path / "x.nqx")


def jaxcert_from_nequix(path=CKPT):
    import jaxcert

    return jaxcert.Model.from_nequix(path, dtype="float32")


def test_an_anchor_that_shares_a_bond_length_with_the_held_out_set_is_refused():
    with pytest.raises(ValueError, match="bonds: .* held-out"):
        rp.anchor_structures(["Cu"], bonds=(1.0, 1.1))
    structs, labels = rp.anchor_structures(["Cu"], bonds=(0.9, 1.0, 1.7))
    held, held_labels = rp.anchor_structures(["Cu"], bonds=(0.9, 1.0, 1.7), held_out=True)
    assert [lab for lab in labels if lab.startswith("molecule:CuCu")] == ["molecule:CuCu@0.9", "molecule:CuCu@1",
                                                                          "molecule:CuCu@1.7"]
    # the same slab and bulk cell, rattled with another seed (and strained otherwise): no structure is shared
    assert set(labels) & set(held_labels) == {"surface:Cu(111)"}
    a, b = structs[labels.index("surface:Cu(111)")], held[held_labels.index("surface:Cu(111)")]
    assert np.abs(np.asarray(a.positions) - np.asarray(b.positions)).max() > 1e-3
