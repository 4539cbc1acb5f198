"""The executable store (jaxcert/core/cache.py, docs/architecture.md §4.3): keys, hits, bit-identical results, misses.

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
from jaxcert import models
from jaxcert.core import cache, elements
from jaxcert.core.derivatives import EXACT, FiniteDifference
from jaxcert.models import lj as lj_module
from jaxcert.probes import PROBES, kinds, stages, substrates, suite

PROBE_SET = "betti,zero_modes"  # zero_modes: a relaxation and LAPACK eigh (lazily initialised by jaxlib)

CHILD = r"""
import json, sys
import jax
jax.config.update("jax_enable_x64", True)
import jaxcert
from jaxcert import models
from jaxcert.core import cache
from jaxcert.probes import substrates
cache.enable_compilation_cache(sys.argv[1])
rep = jaxcert.certify(models.get("lj"), "Ar", probes=sys.argv[2], seed=0, dtype="float64", compile_workers=0)
st = cache.executable_store()
print(json.dumps({"hits": st.hits, "misses": st.misses, "ase_build": "ase.build" in sys.modules,
                  "defects": {o.name: [float(x) for x in o.defect] for o in rep.outcomes},
                  "status": {o.name: o.status for o in rep.outcomes}, "compilation": rep.compilation}))
"""


def _child_env() -> dict:
    """A child process's environment: CPU, this checkout first on the path, and the same trace-changing settings
    as this process (a store key carries them: importing nequix earlier in this worker sets the default matmul
    precision to "highest", and the child must see the programs the same way)."""
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    root = os.path.dirname(os.path.dirname(jaxcert.__file__))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    if jax.config.jax_default_matmul_precision is not None:
        env["JAX_DEFAULT_MATMUL_PRECISION"] = str(jax.config.jax_default_matmul_precision)
    return env


def _fresh_process(path, probes=PROBE_SET) -> dict:
    env = _child_env()
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
    # betti: 2 stage programs + the positions-tangent kernel on a chunk of 32 (its 24 columns); zero_modes:
    # 3 stages + the relax kernel + the same tangent kernel on a chunk of 64 (its 39 Hessian columns)
    assert len(list((tmp_path / "exec").rglob("*.entry"))) == 8
    child = _fresh_process(tmp_path)
    assert child["hits"] == 8 and child["misses"] == 0  # nothing traced or compiled for the two probes
    # the substrates and the LJ tables were read from the store (cache.stored), so ASE never built a crystal
    assert list((tmp_path / "host").rglob("*.entry")) and not child["ase_build"]
    assert child["status"] == {o.name: o.status for o in rep.outcomes}
    # bit-identical: the very executable the first run compiled
    assert child["defects"] == {o.name: [float(x) for x in o.defect] for o in rep.outcomes}
    # each report says so (jaxcert.core.compilation): the cold run compiled its programs, the warm one loaded
    # the 8 and compiled only what is not stored (small eager operations), in a fraction of the time
    cold, warm = rep.compilation, child["compilation"]
    assert cold["store_loads"] == 0 and cold["compiles"] >= 8 and cold["traces"] >= 8
    assert warm["store_loads"] == 8 and warm["compiles"] < cold["compiles"]
    assert warm["compile_s"] < 0.5 * cold["compile_s"]


def _key(model, kind="tangent", options=(("engine", EXACT), ("wrt", "positions")), substrate="cluster"):
    """The store key of the model's kernel of ``kind`` on the ``substrate`` shape class (the program that holds
    the model; betti's Jacobian columns on one Ar cluster come from the tangent kernel)."""
    s = model.prepare(substrates.stacked(substrate, ["Ar"], dtype=jnp.float64)[0])
    one = jax.tree.map(lambda x: x[0], s)
    size = suite._chunk(model, kind, PROBES["betti"].config().n_pairs * 2)  # betti's 24 columns: a chunk of 32
    chunk = jax.tree.map(lambda x: jnp.broadcast_to(x, (size, *x.shape)), one)
    args = (chunk, jnp.zeros_like(chunk.positions)) if kind == "tangent" else (chunk,)
    return cache.ExecutableStore("/nonexistent").key(("kernel", kinds.KINDS[kind], options, model), args)


def _stage_key(name="betti", cfg=None, k=0):
    """The store key of stage ``k`` of a probe's plan on one Ar substrate (no model in it)."""
    spec = PROBES[name]
    cfg = cfg or spec.config()
    s = substrates.stacked(spec.substrate, ["Ar"], dtype=jnp.float64)[0]
    keys = jax.random.split(suite.probe_key(0, name), 1)
    facts = stages.facts_of(models.get("lj"))
    return cache.ExecutableStore("/nonexistent").key(("stage", spec.plan, k, cfg, facts), (keys, s))


def test_keys_follow_what_the_program_computes():
    lj = models.get("lj")
    base = _key(lj)
    assert base is not None and base == _key(models.get("lj"))  # a new, equal model: the same key
    assert _key(lj.replace(params=jax.tree_util.tree_map(lambda p: p * 1.01, lj.params))) != base  # parameters
    assert _key(models.get("lj", rc=6.0)) != base  # a closed-over constant of the energy function
    assert _key(lj.replace(name="other")) != base  # static fields
    assert _key(lj, kind="evaluate", options=()) != base  # another kind
    assert _key(lj, options=(("engine", FiniteDifference()), ("wrt", "positions"))) != base  # its options
    # a stage program is keyed by the probe's plan, stage and config, and by no model
    stage = _stage_key()
    assert stage is not None and stage == _stage_key()
    assert _stage_key(cfg=PROBES["betti"].config(n_pairs=6)) != stage  # the probe's config
    assert _stage_key(k=1) is None or _stage_key(k=1) != stage
    assert _stage_key(name="smoothness") != stage


def test_a_function_from_outside_jaxcert_is_keyed_by_tracing_not_by_its_code():
    def energy(params, s):  # this test module is not jaxcert: the key traces what the model computes
        return params * jnp.sum(s.positions**2)

    model = jaxcert.Model(energy, params=jnp.asarray(1.0), name="user")
    with pytest.raises(cache.Unstorable, match="not jaxcert's"):
        cache.fingerprint(energy)
    with pytest.raises(cache.Unstorable):  # without the program's inputs there is nothing to trace at
        cache.fingerprint(model)
    assert _key(model) is not None and _key(model) == _key(jaxcert.Model(energy, params=jnp.asarray(1.0), name="user"))


# ------------------------------------------------------------------- a user's model, keyed by what it computes
#: a user's pair potential in its own module (not jaxcert's): parameters, a closed-over module-level array, a
#: constant in the energy's code and a helper with a custom JVP rule (which runs only under differentiation)
USER_MODULE = """
import jax
import jax.numpy as jnp
import numpy as np

import jaxcert

SCALE = np.asarray([1.0, 0.02])


@jax.custom_jvp
def soft(x):
    return jnp.log1p(jnp.exp(x))


@soft.defjvp
def _soft_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return soft(x), t * jax.nn.sigmoid(x) * 1.0


def energy(p, s):
    pr = jaxcert.core.neighbors.pairs(s, cutoff=6.0)
    r = jnp.where(pr.mask, pr.r, 6.0)
    a = p["a"]
    morse = jnp.exp(-2.0 * a * (r - 3.7)) - 2.0 * jnp.exp(-a * (r - 3.7))
    fc = 0.5 * (jnp.cos(jnp.pi * jnp.clip(r / 6.0, 0.0, 1.0)) + 1.0)
    e = p["eps"] * SCALE[0] * morse + SCALE[1] * soft(3.7 - r)
    if s.n_atoms == 1000:  # a branch that no structure of these tests takes
        e = e * 2.0
    return 0.5 * jnp.sum(jnp.where(pr.mask, e * fc, 0.0))


def callback_energy(p, s):  # a host term (as the torch and ASE bridges have), constant in the positions
    host = jax.pure_callback(lambda x: np.asarray(0.5 * x), jax.ShapeDtypeStruct((), s.positions.dtype),
                             jax.lax.stop_gradient(energy(p, s)), vmap_method="sequential")
    return host + energy(p, s)


PARAMS = {"a": jnp.asarray(1.2), "eps": jnp.asarray(0.01)}


def model(params=PARAMS):
    return jaxcert.Model(energy, params=params, name="user-morse", cutoff=6.0)
"""

#: one-line edits a user might make; each changes what the model computes but not its parameters' shapes
EDITS = {
    "code": ("(r - 3.7)) - 2.0", "(r - 3.8)) - 2.0"),  # a constant in the energy function's code
    "global": ("SCALE = np.asarray([1.0, 0.02])", "SCALE = np.asarray([1.1, 0.02])"),  # a closed-over array
    "jvp_rule": ("jax.nn.sigmoid(x) * 1.0", "jax.nn.sigmoid(x) * 1.5"),  # a custom JVP rule: forces only
    "branch": ("e = e * 2.0", "e = e * 3.0"),  # code the traced shape does not run: seen by the code digest
}


def _user_module(folder, edit=None, name="user_model"):
    """The user's module, as ``name`` in ``folder`` (every variant has the same module name, as an edited file does)."""
    import importlib.util

    src = USER_MODULE
    if edit is not None:
        old, new = EDITS[edit]
        assert src.count(old) == 1
        src = src.replace(old, new)
    folder.mkdir(exist_ok=True)
    path = folder / f"{name}.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _naive_key(model):
    """What a key on the parameters' structure, shapes and dtypes and the static fields would see."""
    leaves, treedef = jax.tree_util.tree_flatten(model.params)
    return (str(treedef), [(x.shape, str(x.dtype)) for x in leaves], model.name, model.cutoff, model.elements)


def _energy_forces(model):
    s = substrates.stacked("cluster", ["Ar"], dtype=jnp.float64)[0]
    s = jax.tree_util.tree_map(lambda x: x[0], s)
    return np.asarray(model.energy(s)), np.asarray(model.forces(s))


def test_a_users_model_is_keyed_by_what_it_computes(tmp_path, monkeypatch):
    from jaxcert.core import _model_key

    base_mod = _user_module(tmp_path / "base")
    base = base_mod.model()
    key = _key(base)
    assert key is not None
    assert _key(_user_module(tmp_path / "again").model()) == key  # the same code, imported again: a hit
    e0, f0 = _energy_forces(base)
    changed = {"params": base_mod.model({**base_mod.PARAMS, "eps": jnp.asarray(0.011)})}
    changed.update({edit: _user_module(tmp_path / edit, edit).model() for edit in EDITS})
    for what, model in changed.items():
        assert _naive_key(model) == _naive_key(base), what  # a key on shapes alone would serve a stale program
        assert _key(model) != key, what
        e, f = _energy_forces(model)
        if what == "branch":  # not run at this shape: the same results here, yet another program elsewhere
            np.testing.assert_array_equal(e, e0)
            np.testing.assert_array_equal(f, f0)
            continue
        if what == "jvp_rule":  # the rule runs only under differentiation: the same energy, other forces
            np.testing.assert_array_equal(e, e0)
        else:
            assert not np.array_equal(e, e0), what
        assert not np.array_equal(f, f0), what
    # the trace alone (without the digest of the user's code) sees every edit that runs at the traced shape
    monkeypatch.setattr(_model_key, "_code_digest", lambda model: "")
    _model_key._MEMO.clear()
    traced_only = _key(base)
    for what, model in changed.items():
        assert (_key(model) == traced_only) == (what == "branch"), what
    # a defect wrapper around the user's model is traced as a whole; it differs from the model it wraps
    from jaxcert.models import defects

    wrapped = _key(defects.curl(base, 0.1))
    assert wrapped is not None and wrapped != key and wrapped != _key(defects.curl(base, 0.2))


def test_a_model_that_calls_the_host_is_not_stored_and_still_runs(store, tmp_path):
    mod = _user_module(tmp_path / "src")
    model = jaxcert.Model(mod.callback_energy, params=mod.PARAMS, name="user-callback", cutoff=6.0)
    assert _key(model) is None  # the host code a pure_callback runs is invisible to any key
    rep = jaxcert.certify(model, "Ar", probes="betti", seed=0, dtype=jnp.float64, compile_workers=0)
    assert rep.outcomes[0].status == ["ok"]
    # only betti's two stage programs (no model in them) are stored; the kernel that calls the host is not
    assert len(list((tmp_path / "exec").rglob("*.entry"))) == 2 and store.misses == 2


USER_CHILD = r"""
import json, sys
import jax
jax.config.update("jax_enable_x64", True)
sys.path.insert(0, sys.argv[2])
import jaxcert
from jaxcert.core import cache
import user_model
cache.enable_compilation_cache(sys.argv[1])
compiles = []
jax.monitoring.register_event_duration_secs_listener(
    lambda event, duration, **kw: compiles.append(1) if event == "/jax/core/compile/backend_compile_duration" else None)
rep = jaxcert.certify(user_model.model(), "Ar", probes="betti,parity", seed=0, dtype="float64", compile_workers=0)
st = cache.executable_store()
print(json.dumps({"hits": st.hits, "misses": st.misses, "compiles": len(compiles),
                  "defects": {o.name: [float(x) for x in o.defect] for o in rep.outcomes},
                  "status": {o.name: o.status for o in rep.outcomes}, "compilation": rep.compilation}))
"""


def test_a_users_model_is_stored_and_loaded_in_a_fresh_process_with_identical_results(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "user_model.py").write_text(USER_MODULE)
    cache_dir = tmp_path / "cache"
    env = _child_env()

    def child() -> dict:
        out = subprocess.run([sys.executable, "-c", USER_CHILD, str(cache_dir), str(tmp_path / "src")],
                             capture_output=True, text=True, env=env, timeout=900, check=False)
        assert out.returncode == 0, out.stderr[-3000:]
        return json.loads(out.stdout.strip().splitlines()[-1])

    cold = child()
    # betti: 2 stages + the tangent kernel; parity: 2 stages + the evaluate kernel on the crystal
    assert cold["hits"] == 0 and cold["misses"] == 6
    assert len(list((cache_dir / "exec").rglob("*.entry"))) == 6
    warm = child()
    assert warm["hits"] == 6 and warm["misses"] == 0  # every program loaded, none compiled
    assert warm["compiles"] < cold["compiles"]
    assert warm["status"] == cold["status"] == {"betti": ["ok"], "parity": ["ok"]}
    assert warm["defects"] == cold["defects"]  # bit-identical: the very executables the first process compiled


def test_a_corrupt_entry_is_a_miss_and_is_recompiled(store, tmp_path):
    first = jaxcert.certify(models.get("lj"), "Ar", probes="betti", seed=0, dtype=jnp.float64, compile_workers=0)
    entry = store._file(_key(models.get("lj")))  # the kernel, the program that holds the model
    entry.write_bytes(b"not an executable")
    suite._EXECUTABLES.clear()
    again = jaxcert.certify(models.get("lj"), "Ar", probes="betti", seed=0, dtype=jnp.float64, compile_workers=0)
    assert store.misses == 4 and store.hits == 2  # 3 + the corrupt kernel; betti's 2 stage programs hit
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

    def load_once(key, args):  # the stored entry loads, once; after the discard it is gone
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
    for entry in (tmp_path / "exec").rglob("*.entry"):
        entry.unlink()  # the store is empty, JAX's cache (tmp_path / "xla") still holds the program
    filling = _fresh_process(tmp_path, probes="betti")
    assert filling["misses"] == 3 and filling["hits"] == 0 and list((tmp_path / "exec").rglob("*.entry"))
    warm = _fresh_process(tmp_path, probes="betti")
    assert warm["hits"] == 3 and warm["misses"] == 0 and warm["status"] == {"betti": ["ok"]}
    assert warm["defects"] == filling["defects"] == {"betti": [float(x) for x in rep.outcomes[0].defect]}


# ------------------------------------------------------------- a cache that cannot be used against its user
class _Planted:
    """A pickle that, when unpickled, creates ``marker`` (what a planted entry could do with os.system)."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def _stacked_call():
    return (PROBES["betti"].substrate, ["Ar"]), {"dtype": jnp.float64}


@pytest.mark.parametrize("where", ["host", "exec"])
def test_a_planted_pickle_is_never_unpickled(where, store, tmp_path):
    """An entry planted under the very name the cache looks up (its key from the cache's own API) runs nothing and
    changes nothing: the code before STORE_FORMAT 2 unpickled it (the marker appeared during an ordinary warm run)."""
    import pickle

    first = jaxcert.certify(models.get("lj"), "Ar", probes="betti", seed=0, dtype=jnp.float64, compile_workers=0)
    args, kw = _stacked_call()
    ref, _ = substrates.stacked(*args, **kw)
    if where == "host":
        planted = store._value_file(store.value_key(substrates.stacked.__wrapped__, args, kw))
    else:
        planted = store._file(_key(models.get("lj")))
    assert planted.is_file()  # the name a warm run reads
    marker = tmp_path / "planted-code-ran"
    planted.write_bytes(pickle.dumps(_Planted(marker)))
    suite._EXECUTABLES.clear()
    if where == "host":
        out = substrates.stacked(*args, **kw)
        assert not marker.exists()
        s, symbols = out
        assert symbols == ["Ar"] and isinstance(s, jaxcert.Structure)
        np.testing.assert_array_equal(s.positions, ref.positions)
    again = jaxcert.certify(models.get("lj"), "Ar", probes="betti", seed=0, dtype=jnp.float64, compile_workers=0)
    assert not marker.exists()
    # host: every program hits (3); exec: the planted kernel is a miss, betti's 2 stage programs hit
    assert again.outcomes[0].status == ["ok"] and store.hits == (3 if where == "host" else 2)
    np.testing.assert_array_equal(again.outcomes[0].defect, first.outcomes[0].defect)


def test_a_planted_executable_payload_cannot_name_other_globals(store, tmp_path):
    """Even behind a valid header and digest, JAX's executable pickle is read by a closed unpickler."""
    import pickle

    first = jaxcert.certify(models.get("lj"), "Ar", probes="betti", seed=0, dtype=jnp.float64, compile_workers=0)
    key = _key(models.get("lj"))
    tree, arrays = cache._unpack(cache._unseal("exec", key, store._file(key).read_bytes()))
    marker = tmp_path / "planted-code-ran"
    evil = np.frombuffer(pickle.dumps(_Planted(marker)), np.uint8)
    store._file(key).write_bytes(cache._seal("exec", key, cache._pack(tree, {"payload": evil})))
    suite._EXECUTABLES.clear()
    again = jaxcert.certify(models.get("lj"), "Ar", probes="betti", seed=0, dtype=jnp.float64, compile_workers=0)
    assert not marker.exists() and store.hits == 2 and store.misses >= 1  # the stages hit, the kernel is compiled
    np.testing.assert_array_equal(again.outcomes[0].defect, first.outcomes[0].defect)


def test_a_tampered_or_malformed_host_entry_does_not_change_results(store):
    args, kw = _stacked_call()
    ref, _ = substrates.stacked(*args, **kw)
    key = store.value_key(substrates.stacked.__wrapped__, args, kw)
    f = store._value_file(key)
    header, _, body = f.read_bytes().partition(b"\n")
    tree, arrays = cache._unpack(body)
    (pos_name,) = [n for n, a in arrays.items() if a.shape == np.shape(ref.positions)]
    arrays[pos_name] = arrays[pos_name] * 1.5  # a moved atom, the old digest kept: a digest mismatch
    f.write_bytes(header + b"\n" + cache._pack(tree, arrays))
    got, _ = substrates.stacked(*args, **kw)
    np.testing.assert_array_equal(got.positions, ref.positions)
    assert cache._unseal("host", key, f.read_bytes())  # computed again and stored afresh
    # a valid digest over a structure the decoder would never write: refused, computed again
    for bad in (["dataclass", "Popen", [["args", ["str", "id"]]]], ["tuple", [["int", 3]]], ["float", 1.0]):
        f.write_bytes(cache._seal("host", key, cache._pack(bad, {})))
        got, symbols = substrates.stacked(*args, **kw)
        np.testing.assert_array_equal(got.positions, ref.positions)
        assert symbols == ["Ar"]
    # an entry moved to another key (valid in itself) fails that key's digest
    other = store.value_key(substrates.stacked.__wrapped__, ("trimer", ["Ar"]), kw)
    store._write(store._value_file(other), f.read_bytes())
    assert store.load_value(other) is cache._MISSING


def test_host_values_round_trip_as_data_and_anything_else_is_not_stored(store):
    s, _ = substrates.stacked("bulk", ["Ar", "Si"], dtype=jnp.float64)
    value = (s, ["Ar", "Si"], {"x": np.arange(3.0), "y": None, "z": (1, 2.5, float("nan"), True, "s")},
             np.float64(0.1), jnp.arange(4))
    assert store.save_value("0" * 64, value)
    back = store.load_value("0" * 64)
    assert isinstance(back, tuple) and isinstance(back[1], list) and isinstance(back[2]["z"], tuple)
    assert type(back[3]) is np.float64 and back[3] == value[3]
    assert isinstance(back[4], jax.Array) and back[4].dtype == value[4].dtype
    assert back[2]["z"][:2] == (1, 2.5) and np.isnan(back[2]["z"][2]) and back[2]["z"][3:] == (True, "s")
    for a, b in zip(jax.tree_util.tree_leaves(value[0]), jax.tree_util.tree_leaves(back[0]), strict=True):
        assert isinstance(b, jax.Array) and a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)
    assert back[0].pbc == s.pbc and back[0].images == s.images
    for unsupported in (object(), {1: 2}, np.array([object()]), lambda: 0, {"k": {1, 2}}):
        assert not store.save_value("1" * 64, unsupported)
    assert not list(store._value_file("1" * 64).parent.glob("*"))


def test_output_structures_are_stored_as_json():
    from jaxcert.core.neighbors import CellListSpec, NeighborState
    from jaxcert.optim.dynamics import LangevinConfig, Trajectory
    from jaxcert.probes.base import ProbeResult

    s, _ = substrates.stacked("bulk", ["Ar", "Si"], dtype=jnp.float64)
    res = ProbeResult(1, 2, 3, 4, 5, {"a": 1, "b": [None, (2, 3)], "c": {}, "s": s})
    traj = Trajectory(s, *range(8), LangevinConfig(temperature_k=12.5))
    listed = s.replace(neighbor_list=CellListSpec(5.0, (2, 2, 3), 8, 16, 0.5), neighbor_state=NeighborState(*range(5)))
    for value in (res, traj, (s, {"x": [traj]}), listed):
        tree = jax.tree_util.tree_structure(value)
        assert cache.decode_treedef(json.loads(json.dumps(cache.encode_treedef(tree)))) == tree
    with pytest.raises(cache.EntryError):
        cache.encode_treedef(jax.tree_util.tree_structure({1: 0}))  # only the nodes a probe's result uses
    with pytest.raises(cache.EntryError):
        cache.decode_treedef(["node", "Popen", ["none"], []])


def _no_store(monkeypatch):
    monkeypatch.setattr(cache, "_STORE", None)


def test_a_folder_others_can_write_or_own_is_not_used(tmp_path, monkeypatch, capsys):
    _no_store(monkeypatch)
    prev = jax.config.jax_compilation_cache_dir
    d = tmp_path / "shared"
    d.mkdir()
    os.chmod(d, 0o777)
    assert cache.enable_compilation_cache(str(d)) is None
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(d) in err[0] and "writable by group or others" in err[0] and "chmod 700" in err[0]
    assert cache.executable_store() is None and jax.config.jax_compilation_cache_dir == prev
    assert os.listdir(d) == []
    os.chmod(d, 0o700)
    os.makedirs(d / "exec", mode=0o700)
    os.chmod(d / "exec", 0o757)  # a subfolder others can write
    assert cache.enable_compilation_cache(str(d)) is None
    assert str(d / "exec") in capsys.readouterr().err
    if os.getuid() != 0:
        return  # chown needs root; the mode checks above ran
    os.chmod(d / "exec", 0o700)
    os.chown(d, 12345, 12345)
    assert cache.enable_compilation_cache(str(d)) is None
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "owned by uid 12345" in line and str(d) in line
    assert cache.executable_store() is None and jax.config.jax_compilation_cache_dir == prev


def test_a_new_cache_folder_is_private(tmp_path, monkeypatch):
    _no_store(monkeypatch)
    prev = jax.config.jax_compilation_cache_dir
    root = tmp_path / "new" / "jaxcert"
    try:
        assert cache.enable_compilation_cache(str(root)) == str(root)
        for d in (root, *(root / sub for sub in cache.SUBFOLDERS)):
            assert d.stat().st_mode & 0o777 == 0o700
        store = cache.executable_store()
        assert store.save_value("ab" * 32, {"x": np.arange(2)})
        f = store._value_file("ab" * 32)
        assert f.stat().st_mode & 0o777 == 0o600 and f.parent.stat().st_mode & 0o777 == 0o700
    finally:
        jax.config.update("jax_compilation_cache_dir", prev)


@pytest.mark.parametrize("where", ["file", "under_a_file"])
def test_an_unusable_cache_dir_never_stops_a_command(where, tmp_path, monkeypatch, capsys):
    from jaxcert import cli

    _no_store(monkeypatch)
    f = tmp_path / "not-a-folder"
    f.write_text("x")
    path = f if where == "file" else f / "jaxcert"
    monkeypatch.setenv("JAXCERT_CACHE_DIR", str(path))
    assert cli.main(["models"]) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if "cache not used" in line]
    assert len(warnings) == 1 and str(path) in warnings[0] and "JAXCERT_CACHE_DIR" in warnings[0]
    assert cache.executable_store() is None and f.read_text() == "x"


def test_stored_executables_beyond_the_resident_cap_are_dropped_and_loaded_again(store, monkeypatch):
    """A loaded executable holds memory (about 55 MB for a nequix program): only suite.RESIDENT_STORED of those
    the store can give back stay resident; the rest are loaded again when needed, with identical results."""
    def resident():
        return len([k for k in suite._EXECUTABLES if k in suite._STORED])

    def run():
        return jaxcert.certify(models.get("lj"), "Ar", probes="betti,zero_modes", seed=0, dtype=jnp.float64,
                               compile_workers=0)

    first = run()
    stored = resident()
    assert stored > 2  # the default cap (12) keeps every stored program of the two probes
    monkeypatch.setattr(suite, "RESIDENT_STORED", 2)
    suite._EXECUTABLES.clear()
    hits = store.hits
    again = run()
    assert resident() <= 2
    assert store.hits - hits == stored  # every stored program loaded, none compiled again
    hits = store.hits
    third = run()
    assert store.hits - hits >= stored - 2  # at most 2 were still resident: the others were loaded again
    for a, b, c in zip(first.outcomes, again.outcomes, third.outcomes, strict=True):
        np.testing.assert_array_equal(a.defect, b.defect)
        np.testing.assert_array_equal(a.defect, c.defect)
