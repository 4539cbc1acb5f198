"""A checkpoint network is keyed in the executable store by what it is, not by tracing it (jaxcert/core/cache.py,
docs/architecture.md §4.3).

A network that a jaxcert adapter builds from a file (Model.from_nequix) is read like jaxcert's own models: its energy
is jaxcert's code closing over the checkpoint's configuration and the Equinox skeleton (an installed package's
objects: their class, their package's version and their fields), its parameters count by value. So a second
process loads the network's program from the store and traces nothing of the network. Whatever should change the
key still does (other weights, another checkpoint file, another precision or graph option, another package
version, other jaxcert source), and a user's model that copies a checkpoint's description is still traced.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcert
from jaxcert.core import cache
from jaxcert.probes import kinds, substrates

NQX = Path(__file__).resolve().parents[2] / "shared" / "weights" / "nequix" / "nequix-mp-1.nqx"

pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("nequix") is None, reason="nequix is not installed"),
    pytest.mark.skipif(not NQX.is_file(), reason=f"no checkpoint at {NQX}"),
]


@pytest.fixture(scope="module")
def nequix_model():
    return jaxcert.Model.from_nequix(NQX, dtype="float32")


def _trimer(model):
    """The smallest substrate (an Si trimer, not periodic) prepared for ``model``, as one chunk of one item."""
    s, _ = substrates.stacked("trimer", ["Si"], dtype=jnp.float32)
    return model.prepare(s)


def _key(model):
    """The store key of the model's evaluate program on one Si trimer."""
    return cache.ExecutableStore("/nonexistent").key(("kernel", kinds.KINDS["evaluate"], (), model),
                                                     (_trimer(model),))


@pytest.fixture
def count_traces(monkeypatch):
    """How many times a model is traced to make its key (the registered tracer is wrapped)."""
    calls = []
    traced = cache._TRACED[jaxcert.Model]

    def counting(model, args):
        calls.append(model.name)
        return traced(model, args)

    monkeypatch.setitem(cache._TRACED, jaxcert.Model, counting)
    return calls


def test_a_checkpoint_network_is_keyed_without_tracing(nequix_model, count_traces):
    key = _key(nequix_model)
    assert key is not None and count_traces == []
    assert cache.fingerprint(nequix_model)  # read: no program inputs needed, nothing to trace at
    again = jaxcert.Model.from_nequix(NQX, dtype="float32")  # the same file loaded again: the same key
    assert again is not nequix_model and _key(again) == key and count_traces == []


def test_what_the_network_computes_changes_its_key(nequix_model, tmp_path, monkeypatch):
    key = _key(nequix_model)
    leaves, treedef = jax.tree_util.tree_flatten(nequix_model.params)
    leaves[-1] = leaves[-1].at[(0,) * leaves[-1].ndim].add(1e-3)
    changed = {
        "params": nequix_model.replace(params=jax.tree_util.tree_unflatten(treedef, leaves)),
        "dtype": jaxcert.Model.from_nequix(NQX),  # the network follows the structure's dtype
        "graph": jaxcert.Model.from_nequix(NQX, dtype="float32", capacity=64),
    }
    data = bytearray(NQX.read_bytes())  # one weight of the checkpoint changed in its lowest bit
    data[-4] ^= 1
    other = tmp_path / NQX.name
    other.write_bytes(bytes(data))
    changed["checkpoint"] = jaxcert.Model.from_nequix(other, dtype="float32", name=nequix_model.name)
    for what, model in changed.items():
        assert _key(model) not in (None, key), what
    # another version of a package whose code the network runs (e3nn-jax), or other jaxcert source
    versions = cache._package_versions
    edited = lambda top: versions(top) + ("+edited" if top == "e3nn_jax" else "")  # noqa: E731
    monkeypatch.setattr(cache, "_package_versions", edited)
    cache._object_class.cache_clear()
    try:
        assert _key(nequix_model.replace()) not in (None, key)
    finally:
        monkeypatch.setattr(cache, "_package_versions", versions)
        cache._object_class.cache_clear()
    assert _key(nequix_model.replace()) == key
    monkeypatch.setattr(cache, "_source_digest", lambda: "edited")
    assert _key(nequix_model) not in (None, key)


def _users_energy(p, s):  # the user's own code: whatever it claims, it is traced
    return jnp.sum(s.positions**2) * 0.0 + jnp.sum(jnp.where(s.mask, 1.0, 0.0)).astype(s.positions.dtype)


def test_a_users_model_that_claims_a_checkpoint_is_still_traced(nequix_model, count_traces):
    forged = jaxcert.Model(_users_energy, params=nequix_model.params, name=nequix_model.name,
                           cutoff=nequix_model.cutoff, elements=nequix_model.elements, info=nequix_model.info,
                           max_batch=nequix_model.max_batch)
    with pytest.raises(cache.Unstorable):  # cannot be read: only a trace can tell what it computes
        cache.fingerprint(forged)
    with pytest.raises(cache.Unstorable):  # the network's own model with the user's energy: the same
        cache.fingerprint(nequix_model.replace(energy_fn=_users_energy))
    key = _key(forged)
    assert key is not None and key != _key(nequix_model) and count_traces == [nequix_model.name]


class _UsersClass:
    def __init__(self, x):
        self.x = x


def test_installed_packages_objects_are_read_and_the_users_are_not():
    ns = argparse.Namespace  # a class of the standard library, written in Python
    assert cache.fingerprint(ns(a=1, b=(2, 3))) == cache.fingerprint(ns(b=(2, 3), a=1))
    assert cache.fingerprint(ns(a=1)) != cache.fingerprint(ns(a=2))
    assert cache.fingerprint(json) == cache.fingerprint(json)  # a module by its name and version
    for users in (_UsersClass(1), ns(f=_users_energy), ns(c=_UsersClass), sys.modules[__name__]):
        with pytest.raises(cache.Unstorable):
            cache.fingerprint(users)
    with pytest.raises(cache.Unstorable):  # an extension type: its state cannot be read
        cache.fingerprint(np.random.RandomState(0))


CHILD = r"""
import json, sys
import jax.numpy as jnp
import numpy as np
import jaxcert
from jaxcert.core import cache, compilation
from jaxcert.probes import kinds, substrates, suite

model = jaxcert.Model.from_nequix(sys.argv[2], dtype="float32")
import nequix.model  # imported by the adapter: count the network's traces (it runs in Python only then)
calls = []
node_energies = nequix.model.Nequix.node_energies
nequix.model.Nequix.node_energies = lambda self, *a, **k: calls.append(1) or node_energies(self, *a, **k)
cache.enable_compilation_cache(sys.argv[1])
s, _ = substrates.stacked("trimer", ["Si"], dtype=jnp.float32)
before = compilation.snapshot()
out = suite._answer(model, kinds.Request("evaluate", (model.prepare(s),)), {})  # one item per element
st = cache.executable_store()
print(json.dumps({"network_traces": len(calls), "compilation": compilation.since(before), "hits": st.hits,
                  "misses": st.misses, "energy": np.asarray(out.energy).tolist(),
                  "forces": np.asarray(out.forces).tolist()}))
"""


def _process(cache_dir) -> dict:
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    root = os.path.dirname(os.path.dirname(jaxcert.__file__))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-c", CHILD, str(cache_dir), str(NQX)], capture_output=True, text=True,
                         env=env, timeout=600, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_second_process_loads_the_network_and_traces_none_of_it(tmp_path):
    cold = _process(tmp_path)
    assert cold["misses"] >= 1 and cold["hits"] == 0 and cold["network_traces"] >= 1
    warm = _process(tmp_path)
    assert warm["network_traces"] == 0  # the network's code never ran: nothing of it was traced
    comp = warm["compilation"]
    assert warm["hits"] >= 1 and warm["misses"] == 0 and comp["store_loads"] == warm["hits"]
    first = cold["compilation"]
    assert comp["key_traces"] == 0 and first["key_traces"] == 0  # read, never traced for its key
    assert comp["compiles"] < first["compiles"] and comp["compile_s"] < 0.25 * first["compile_s"]
    assert warm["energy"] == cold["energy"] and warm["forces"] == cold["forces"]  # the same executable: bit-identical
