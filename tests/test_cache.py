"""The executable store (jaxcert/cache.py, docs/architecture.md §4.3): keys, hits, bit-identical results, misses.

A stored probe program is loaded in a fresh process without tracing and must give bit-identical results to the
run that compiled it; anything jaxcert cannot fingerprint (a user's function) is never stored; a changed model,
config or closed-over value is a different key; a corrupt entry, or one that fails when it runs, is recompiled.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcert
from jaxcert import cache, elements, models, substrates
from jaxcert.models import lj as lj_module
from jaxcert.probes import PROBES, suite

PROBE_SET = "betti,zero_modes"  # zero_modes: a relaxation and LAPACK eigh (lazily initialised by jaxlib)

CHILD = r"""
import json, sys
import jax
jax.config.update("jax_enable_x64", True)
import jaxcert
from jaxcert import cache, models, substrates
cache.enable_compilation_cache(sys.argv[1])
rep = jaxcert.certify(models.get("lj"), "Ar", probes=sys.argv[2], seed=0, dtype="float64", compile_workers=0)
st = cache.executable_store()
print(json.dumps({"hits": st.hits, "misses": st.misses, "ase_build": "ase.build" in sys.modules,
                  "defects": {o.name: [float(x) for x in o.defect] for o in rep.outcomes},
                  "status": {o.name: o.status for o in rep.outcomes}}))
"""


def _fresh_process(path, probes=PROBE_SET) -> dict:
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    root = os.path.dirname(os.path.dirname(jaxcert.__file__))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-c", CHILD, str(path), probes], capture_output=True, text=True, env=env,
                         timeout=900, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture
def store(tmp_path, monkeypatch):
    """The store on in this process (and JAX's persistent cache in tmp_path); both off again afterwards."""
    prev = jax.config.jax_compilation_cache_dir
    cache.enable_compilation_cache(str(tmp_path))
    suite._EXECUTABLES.clear()
    suite._FROM_STORE.clear()
    yield cache.executable_store()
    monkeypatch.setattr(cache, "_STORE", None)
    jax.config.update("jax_compilation_cache_dir", prev)
    suite._EXECUTABLES.clear()


def test_a_stored_program_runs_in_a_fresh_process_with_identical_results(store, tmp_path):
    # host results this worker computed before the store was on live in in-process caches, not the store
    elements._d_nn_unscaled.cache_clear()
    lj_module._tables.cache_clear()
    rep = jaxcert.certify(models.get("lj"), "Ar", probes=PROBE_SET, seed=0, dtype=jnp.float64, compile_workers=0)
    assert store.hits == 0
    assert len(list((tmp_path / "exec").rglob("*.pkl"))) == 2  # one program per probe
    child = _fresh_process(tmp_path)
    assert child["hits"] == 2 and child["misses"] == 0  # nothing traced or compiled for the two probes
    # the substrates and the LJ tables were read from the store (cache.stored), so ASE never built a crystal
    assert list((tmp_path / "host").rglob("*.pkl")) and not child["ase_build"]
    assert child["status"] == {o.name: o.status for o in rep.outcomes}
    # bit-identical: the very executable the first run compiled
    assert child["defects"] == {o.name: [float(x) for x in o.defect] for o in rep.outcomes}


def _key(model, name="betti", cfg=None):
    spec = PROBES[name]
    s = model.prepare(substrates.stacked(spec.substrate, ["Ar"], dtype=jnp.float64)[0])
    keys = jax.random.split(suite.probe_key(0, name), 1)
    return cache.ExecutableStore("/nonexistent").key(("probe", name, cfg or spec.config(), (), model), (keys, s))


def test_keys_follow_what_the_program_computes():
    lj = models.get("lj")
    base = _key(lj)
    assert base is not None and base == _key(models.get("lj"))  # a new, equal model: the same key
    assert _key(lj.replace(params=jax.tree_util.tree_map(lambda p: p * 1.01, lj.params))) != base  # parameters
    assert _key(models.get("lj", rc=6.0)) != base  # a closed-over constant of the energy function
    assert _key(lj, cfg=PROBES["betti"].config(n_pairs=6)) != base  # the probe's config
    assert _key(lj.replace(name="other")) != base  # static fields
    assert _key(lj, name="smoothness") != base


def test_a_function_from_outside_jaxcert_is_never_stored():
    def energy(params, s):  # this test module is not jaxcert: its callees are invisible to the key
        return params * jnp.sum(s.positions**2)

    model = jaxcert.Model(energy, params=jnp.asarray(1.0), name="user")
    assert _key(model) is None
    with pytest.raises(cache.Unstorable, match="not jaxcert's"):
        cache.fingerprint(energy)


def test_a_corrupt_entry_is_a_miss_and_is_recompiled(store, tmp_path):
    first = jaxcert.certify(models.get("lj"), "Ar", probes="betti", seed=0, dtype=jnp.float64, compile_workers=0)
    (entry,) = (tmp_path / "exec").rglob("*.pkl")
    entry.write_bytes(b"not an executable")
    suite._EXECUTABLES.clear()
    again = jaxcert.certify(models.get("lj"), "Ar", probes="betti", seed=0, dtype=jnp.float64, compile_workers=0)
    assert store.misses >= 1 and store.hits == 0
    np.testing.assert_array_equal(again.outcomes[0].defect, first.outcomes[0].defect)
    assert entry.read_bytes() != b"not an executable"  # stored again, compiled afresh


def test_a_stored_program_that_fails_to_run_is_dropped_and_recompiled(store, monkeypatch):
    first = jaxcert.certify(models.get("lj"), "Ar", probes="betti", seed=0, dtype=jnp.float64, compile_workers=0)

    class Pending:  # what a real failure looks like: dispatch returns, the error comes when the result is read
        def block_until_ready(self):
            raise RuntimeError("NOT_FOUND: Function fusion.1 not found")

    class Broken:
        def __call__(self, *args):
            return Pending()

    served = []

    def load_once(key):  # the stored entry loads, once; after the discard it is gone
        served.append(key)
        return Broken() if len(served) == 1 else None

    monkeypatch.setattr(store, "load", load_once)
    discarded = []
    monkeypatch.setattr(store, "discard", lambda key: discarded.append(key))
    suite._EXECUTABLES.clear()
    again = jaxcert.certify(models.get("lj"), "Ar", probes="betti", seed=0, dtype=jnp.float64, compile_workers=0)
    assert len(discarded) == 1
    assert again.outcomes[0].status == ["ok"]
    np.testing.assert_array_equal(again.outcomes[0].defect, first.outcomes[0].defect)


def test_a_warm_jax_cache_with_an_empty_store_stores_working_programs(store, tmp_path):
    """After an upgrade (new jaxcert source, same programs) JAX's persistent cache is warm and the store
    empty. jaxlib serialises an executable that it loaded from JAX's cache without its kernels, so the
    store must compile such a program afresh (cache.persistent_cache_bypassed): before that fix the next
    process loaded programs that failed with "Function ... not found" in every probe."""
    rep = jaxcert.certify(models.get("lj"), "Ar", probes="betti", seed=0, dtype=jnp.float64, compile_workers=0)
    for entry in (tmp_path / "exec").rglob("*.pkl"):
        entry.unlink()  # the store is empty, JAX's cache (tmp_path / "xla") still holds the program
    filling = _fresh_process(tmp_path, probes="betti")
    assert filling["misses"] == 1 and filling["hits"] == 0 and list((tmp_path / "exec").rglob("*.pkl"))
    warm = _fresh_process(tmp_path, probes="betti")
    assert warm["hits"] == 1 and warm["misses"] == 0 and warm["status"] == {"betti": ["ok"]}
    assert warm["defects"] == filling["defects"] == {"betti": [float(x) for x in rep.outcomes[0].defect]}
