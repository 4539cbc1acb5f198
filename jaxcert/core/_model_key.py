"""What a model computes, as a digest: the executable store's key for any JAX model (:mod:`jaxcert.core.cache`).

:func:`jaxcert.core.cache.fingerprint` reads a :class:`~jaxcert.Model` whose functions are all jaxcert's by
their code and whose closed-over values it can read (the registry models and their defect wrappers, and the
networks jaxcert's adapters build from a checkpoint, e.g. :meth:`~jaxcert.Model.from_nequix`, whose installed
packages' objects count by class, package versions and fields; fast, nothing traced). Any other model (a
user's function, a Flax module of the user's through :meth:`~jaxcert.Model.from_flax`, an mlip force field, a
defect wrapper around one of these) is keyed here by :func:`traced_fingerprint`, on what it computes at the
program's shape class (each such trace is counted in the report's ``"compilation"`` as ``key_traces``):

* **the traced program**: ``jax.make_jaxpr`` of everything a probe asks of a model, on one unbatched
  sample of the program's input structures (abstract: shapes, dtypes and static fields, no values):
  the energy, the forces and their JVP with respect to the positions, and for a periodic sample the
  stress (and, with a stress head, the energy's stress) and its JVP with respect to the strain. The
  JVPs of first derivatives make every custom JVP/VJP rule run, so the rules' arithmetic is in the
  jaxpr (a ``custom_jvp_call`` otherwise prints only the rule's name). The key takes the jaxpr text
  with object addresses removed, and the bytes of every constant it holds (closed-over arrays, at
  every nesting level, and every literal);
* **the parameters by value** (their tree structure and every leaf's dtype, shape and bytes; they are
  baked into the program) and **the static fields** (name, cutoff, elements, info, max_batch, ...) by
  :func:`jaxcert.core.cache.fingerprint` (a cutoff that is a user's function is :class:`Unstorable`);
* **the code of the user's own functions** reachable from the model's functions (bytecode, constants,
  defaults, closed-over values, the globals they name, methods of their own classes), so an edit in a
  branch that the sample's shape does not take (a probe also calls the model on clusters and dimers)
  still changes the key; code from installed packages (site-packages, the standard library) counts by
  its package's version, jaxcert's by the source digest that every key carries.

A jaxpr with a host callback (``pure_callback``, ``io_callback``, ``debug_callback``, any primitive
whose name holds "callback": the torch and ASE bridges) is :class:`Unstorable`: the host code it runs
is invisible to the key. So is a :class:`~jaxcert.Model` subclass from outside jaxcert (its methods may
run on the host) and a model that cannot be traced on the sample (the program fails the same way).

Residual limit, stated: what an installed package computes at shapes other than the sample's is
covered by its version, not by the trace; a package edited in place under site-packages without a new
version is not seen. Within a process the digest is made once per (model, shape class).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import re
import threading
import time
import types
from typing import Any

import jax
import jax.extend.core as jex
import jax.numpy as jnp
import numpy as np

from jaxcert.core import cache, compilation
from jaxcert.core.cache import Unstorable
from jaxcert.core.model import Model, strain
from jaxcert.core.structure import Structure

__all__ = ["traced_fingerprint"]

#: " at 0x7f..." in printed function and object parameters (JAX masks some as 0xXXXX itself)
_ADDRESS = re.compile(r" at 0x[0-9a-fA-FX]+")
#: (id(model), sample signature) -> (model, digest); the model is held so its id stays unique
_MEMO: dict[tuple, tuple[Model, str]] = {}
_MEMO_LOCK = threading.Lock()
#: at most this many objects are read for the code digest (then the rest counts by the trace alone)
_CODE_BUDGET = 20000


def traced_fingerprint(model: Model, args: tuple) -> str:
    """Digest of what ``model`` computes in a program whose inputs are shaped like ``args`` (see the module
    docstring); :class:`Unstorable` when it cannot be told (no structure among ``args``, a host callback, a
    foreign ``Model`` subclass, a trace that fails)."""
    cls = type(model)
    if cls is not Model and not cache._is_jaxcert_module(cls.__module__):
        raise Unstorable(f"Model subclass {cls.__module__}.{cls.__qualname__} is not jaxcert's")
    sample = _sample(args)
    leaves, treedef = jax.tree_util.tree_flatten(sample)
    memo_key = (id(model), str(treedef), tuple((x.shape, str(x.dtype)) for x in leaves))
    with _MEMO_LOCK:
        hit = _MEMO.get(memo_key)
    if hit is not None and hit[0] is model:
        return hit[1]
    t0 = time.perf_counter()
    digest = _digest(model, sample)
    jax.monitoring.record_event_duration_secs(compilation.KEY_TRACE, time.perf_counter() - t0)
    with _MEMO_LOCK:
        if len(_MEMO) > 256:
            _MEMO.clear()
        _MEMO[memo_key] = (model, digest)
    return digest


def _sample(args: tuple) -> Structure:
    """One unbatched structure, abstract, of the batch among the program's inputs ``(keys, batch, ...)``."""
    found = [x for x in jax.tree_util.tree_leaves(args, is_leaf=lambda x: isinstance(x, Structure))
             if isinstance(x, Structure)]
    if not found:
        raise Unstorable("no Structure among the program's inputs")
    leaves = jax.tree_util.tree_leaves(found[0])
    if not leaves or any(len(x.shape) < 1 for x in leaves) or len({x.shape[0] for x in leaves}) != 1:
        raise Unstorable("the program's structures are not one batch")
    return jax.tree_util.tree_map(lambda x: jax.ShapeDtypeStruct(tuple(x.shape[1:]), x.dtype), found[0])


def _sym(eps: jax.Array) -> jax.Array:
    return 0.5 * (eps + eps.T)


def _asks(model: Model):
    """Everything the probes ask of ``model`` on one structure, with first-order JVPs of its derivatives."""

    def run(s: Structure, t_pos: jax.Array, t_eps: jax.Array) -> list[Any]:
        p = model.params  # closed over, as in the probe programs: concrete values, baked in
        out = [model.energy_of(p, s), *model.energy_and_forces_of(p, s)]
        out += jax.jvp(lambda r: model.forces_of(p, s.replace(positions=r)), (s.positions,), (t_pos,))
        if model.has_stress(s):
            zero = jnp.zeros((3, 3), s.positions.dtype)
            heads = (model.stress_of, model.energy_stress_of) if model.stress_fn is not None else (model.stress_of,)
            for head in heads:
                out += jax.jvp(lambda e, head=head: head(p, strain(s, _sym(e))), (zero,), (t_eps,))
        return out

    return run


def _digest(model: Model, sample: Structure) -> str:
    h = hashlib.sha256()

    def put(tag: str, payload: bytes | str = b"") -> None:
        cache._put(h, tag, payload)

    put("model-key", "1")
    put("type", f"{type(model).__module__}.{type(model).__qualname__}")
    static = tuple((f.name, getattr(model, f.name)) for f in dataclasses.fields(model)
                   if f.name not in ("energy_fn", "forces_fn", "stress_fn", "params"))
    put("static", cache.fingerprint(static))
    put("heads", repr(tuple(getattr(model, n) is None for n in ("forces_fn", "stress_fn"))))
    leaves, treedef = jax.tree_util.tree_flatten(model.params)
    put("params", _ADDRESS.sub("", str(treedef)))
    for x in leaves:
        _put_array(h, x)
    dt = sample.positions.dtype
    try:
        closed = jax.make_jaxpr(_asks(model))(sample, jax.ShapeDtypeStruct(sample.positions.shape, dt),
                                              jax.ShapeDtypeStruct((3, 3), dt))
    except Unstorable:
        raise
    except Exception as err:  # noqa: BLE001 - the program would fail the same way: nothing to store
        raise Unstorable(f"model {model.name!r} cannot be traced on the sample: {type(err).__name__}") from err
    put("jaxpr", _ADDRESS.sub("", str(closed)))
    _feed_jaxpr(h, closed, set())
    put("code", _code_digest(model))
    return h.hexdigest()


def _put_array(h: Any, x: Any) -> None:
    """dtype, shape and bytes of an array leaf (a PRNG key by its key data); :class:`Unstorable` otherwise."""
    if isinstance(x, (bool, int, float, complex)) or x is None:
        cache._put(h, type(x).__name__, repr(x))
        return
    try:
        if jax.dtypes.issubdtype(getattr(x, "dtype", np.float64), jax.dtypes.extended):
            x = jax.random.key_data(x)
        a = np.asarray(x)
    except Exception as err:  # noqa: BLE001 - a tracer or an object: not a value the key can hold
        raise Unstorable(f"a parameter or constant of type {type(x).__name__} cannot be read") from err
    if a.dtype.hasobject:
        raise Unstorable("an object array cannot be keyed")
    cache._put(h, "array", f"{a.dtype.str}{a.shape}")
    h.update(np.ascontiguousarray(a).tobytes())


def _feed_jaxpr(h: Any, j: Any, seen: set[int]) -> None:
    """The constants of a (closed) jaxpr and of every jaxpr nested in its equations' parameters, and its
    literals; :class:`Unstorable` for a host callback anywhere."""
    if id(j) in seen:
        return
    seen.add(id(j))
    if isinstance(j, jex.ClosedJaxpr):
        for c in j.consts:
            _put_array(h, c)
        _feed_jaxpr(h, j.jaxpr, seen)
        return
    for eqn in j.eqns:
        if "callback" in eqn.primitive.name:
            raise Unstorable(f"the model calls the host ({eqn.primitive.name}): its code is invisible to the key")
        for v in eqn.invars:
            if isinstance(v, jex.Literal):
                _put_array(h, v.val)
        for p in eqn.params.values():
            for sub in p if isinstance(p, (tuple, list)) else (p,):
                if isinstance(sub, (jex.ClosedJaxpr, jex.Jaxpr)):
                    _feed_jaxpr(h, sub, seen)


# ------------------------------------------------------------------------------------ code of the user's own
#: where a module's code comes from and an installed package's version (shared with the reading fingerprint)
_origin = cache._origin
_version = cache._version


def _code_digest(model: Model) -> str:
    """The user's own code reachable from the model's functions, and the versions of the packages it uses."""
    h = hashlib.sha256()
    versions: set[str] = set()
    seen: set[int] = set()
    budget = [_CODE_BUDGET]

    def put(tag: str, payload: bytes | str = b"") -> None:
        cache._put(h, tag, payload)

    def code_names(code: types.CodeType) -> set[str]:
        names = set(code.co_names)
        for c in code.co_consts:
            if isinstance(c, types.CodeType):
                names |= code_names(c)
        return names

    def walk(x: Any) -> None:
        if budget[0] <= 0:
            return
        if isinstance(x, (type(None), bool, int, float, complex, str, bytes)):
            put(type(x).__name__, repr(x))
            return
        if id(x) in seen:
            return
        seen.add(id(x))
        budget[0] -= 1
        if isinstance(x, (tuple, list)):
            put(type(x).__name__, str(len(x)))
            for v in x:
                walk(v)
        elif isinstance(x, dict):
            put("dict", str(len(x)))
            for k, v in x.items():
                walk(k)
                walk(v)
        elif isinstance(x, (np.ndarray, np.generic, jax.Array)):
            _put_array(h, x)
        elif isinstance(x, functools.partial):
            walk((x.func, x.args, x.keywords))
        elif isinstance(x, types.MethodType):
            walk((x.__func__, x.__self__))
        elif isinstance(x, types.FunctionType):
            origin = _origin(x.__module__)
            if origin == "library":
                versions.add(_version((x.__module__ or "?").split(".")[0]))
                return
            if origin == "user":
                put("fn", f"{x.__module__}.{x.__qualname__}")
                cache._feed_code(h, x.__code__)
                for name in sorted(code_names(x.__code__)):
                    if name in x.__globals__:
                        put("global", name)
                        g = x.__globals__[name]
                        if isinstance(g, types.ModuleType):
                            walk_module(g, code_names(x.__code__))
                        else:
                            walk(g)
            walk((x.__defaults__, x.__kwdefaults__))
            walk(tuple(c.cell_contents if cache._cell_set(c) else "<empty cell>" for c in (x.__closure__ or ())))
        elif isinstance(x, types.ModuleType):
            return
        elif isinstance(x, type):
            walk_class(x)
        else:
            cls = type(x)
            walk_class(cls)
            if _origin(cls.__module__) != "library":
                state = getattr(x, "__dict__", None)
                if isinstance(state, dict):
                    walk(state)
                for slot in getattr(cls, "__slots__", ()):
                    if isinstance(slot, str) and hasattr(x, slot):
                        walk(getattr(x, slot))
            else:  # a library wrapper of a user's function (jax.jit, custom_jvp/vjp, partial-like)
                for attr in ("__wrapped__", "fun", "jvp", "fwd", "bwd", "func"):
                    f = getattr(x, attr, None)
                    if callable(f) and not isinstance(f, type):
                        walk(f)

    def walk_class(cls: type) -> None:
        if id(cls) in seen:
            return
        seen.add(id(cls))
        put("type", f"{cls.__module__}.{cls.__qualname__}")
        for c in cls.__mro__:
            origin = _origin(c.__module__)
            if origin == "library":
                versions.add(_version(c.__module__.split(".")[0]))
            elif origin == "user":
                for name, v in sorted(vars(c).items()):
                    if isinstance(v, (types.FunctionType, staticmethod, classmethod, property)):
                        put("attr", name)
                        fn = v.fget if isinstance(v, property) else getattr(v, "__func__", v)
                        walk(fn)

    def walk_module(mod: types.ModuleType, names: set[str]) -> None:
        origin = _origin(mod.__name__)
        if origin == "library":
            versions.add(_version(mod.__name__.split(".")[0]))
        elif origin == "user":
            for name in sorted(names):
                if hasattr(mod, name):
                    put("attr", name)
                    walk(getattr(mod, name))

    walk((model.energy_fn, model.forces_fn, model.stress_fn))
    put("versions", repr(sorted(versions)))
    return h.hexdigest()



def register() -> None:
    """Key any :class:`Model` by what it computes in the executable store (idempotent); the suite calls it
    when it is imported, so every certify run can store and load a user's model."""
    cache.register_traced(Model, traced_fingerprint)


register()
