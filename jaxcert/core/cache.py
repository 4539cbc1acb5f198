"""Compiled programs kept between processes: JAX's persistent cache and jaxcert's executable store.

Two layers, both under ``$JAXCERT_CACHE_DIR`` (default ``~/.cache/jaxcert``; ``off`` disables
both), both switched on by :func:`enable_compilation_cache` (the CLI does this):

* **JAX's persistent compilation cache** (``<dir>/xla``) keys a compiled executable on the
  *lowered* program. It serves every jitted function, but a process still has to trace and
  lower each program to find its key, most of a warm suite run (docs/architecture.md §4.3).
* **Stored host results** (``<dir>/host``, :func:`stored`): pure host functions that build inputs
  from ASE's reference data (the suite's stacked substrates, nearest-neighbour distances) are kept by
  the same key recipe, so a warm process neither imports ``ase.build`` nor runs the small eager
  programs that stack and pad the substrates (docs/architecture.md §4.3).
* **The executable store** (``<dir>/exec``) keys a probe program on *what it computes* instead:
  the probe and its config, the model (:func:`fingerprint`: its functions' code and closed-over
  values, its parameters, its static fields), the input shapes and dtypes, the jaxcert source (with
  the versions of the packages it imports), the JAX settings that change a trace and the JAX/XLA/CPU
  environment. A hit deserialises the executable without tracing or lowering anything. A model whose
  functions are all jaxcert's own is read by its code, nothing traced: the registry models, their
  defect wrappers, and the networks jaxcert's adapters build from a checkpoint
  (:meth:`~jaxcert.Model.from_nequix`: jaxcert's energy closing over the checkpoint's configuration and
  the network's Equinox skeleton, whose installed-package objects count by class, package versions and
  fields; :func:`fingerprint`). Any other JAX model (a user's function, a Flax module of the user's, an
  mlip force field) is keyed by what it computes at the program's shape class
  (:mod:`jaxcert.core._model_key`: the jaxpr of its energy, forces, stress and their JVPs on one
  abstract sample, every constant in it, its parameters by value, its static fields, the user's own code
  and the versions of the packages it calls), traced once per model and shape class in a process. A
  model with a host callback (the torch and ASE bridges) is not stored: the host code is invisible to
  the key. A program that raised while tracing (a probe skip) was never compiled, so it is never
  stored and traces again.

Both are pure caches: a hit runs the very executable a miss would compile, so results are
bit-identical (tested). A corrupt or unreadable entry is ignored and recompiled.

**Trust model.** A stored executable is native code that this process runs, so whoever can write the
cache folder can run code as the user: write access to the folder is the trust boundary, and the only
defence. jaxcert therefore creates the folder and its ``xla``, ``host`` and ``exec`` subfolders with
mode 0700 and its files with mode 0600, and before using it checks that the folder and each subfolder
is a folder owned by the current user and not writable by group or others; otherwise it prints one
warning line (the path, the reason, the fix) and runs without any cache (neither layer), never
stopping the command (:func:`cache_dir_problem`). Nothing read back is unpickled by jaxcert's own
code: host results are JSON (structure) plus an ``allow_pickle=False`` npz (arrays), and only the
types :func:`stored` functions return are accepted; an executable entry keeps its output pytree
structure as JSON and JAX's serialised executable, whose own pickle stream is read by an unpickler
that resolves only the handful of JAX classes an executable needs (:data:`_EXECUTABLE_GLOBALS`), so a
planted pickle cannot call ``os.system``. Every entry carries a SHA-256 of its key and payload: a
truncated, corrupted or moved entry is ignored and computed again. That digest is not a signature
(anyone who can write the folder can write a valid entry); a shared CI cache must therefore be
restored only from trusted branches (never from a pull request's run), like any other build cache.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import functools
import hashlib
import hmac
import io
import json
import os
import pathlib
import pickle
import platform
import re
import stat
import sys
import tempfile
import threading
import types
from collections.abc import Iterator
from typing import Any

import numpy as np

from jaxcert.core import compilation

__all__ = ["register_storable", "register_traced", "enable_compilation_cache", "default_cache_dir", "cache_dir_problem",
           "ExecutableStore", "executable_store", "fingerprint", "Unstorable", "stored"]

#: bump when the stored format or the key recipe changes (the versions so far: docs/architecture.md, "History")
STORE_FORMAT = 4

#: the subfolders of the cache folder: JAX's persistent cache, stored host results, the executable store
SUBFOLDERS = ("xla", "host", "exec")


def default_cache_dir() -> str | None:
    """``$JAXCERT_CACHE_DIR`` or ``~/.cache/jaxcert``; None when the variable is "off", "0" or empty."""
    path = os.environ.get("JAXCERT_CACHE_DIR", os.path.join(os.path.expanduser("~"), ".cache", "jaxcert"))
    return None if path.strip().lower() in ("", "0", "off", "none", "false") else path


_STORE: ExecutableStore | None = None


def cache_dir_problem(path: str | os.PathLike) -> str | None:
    """Why the cache folder ``path`` must not be used, or None when it is fit (creating it if missing).

    Creates ``path`` and its :data:`SUBFOLDERS` with mode 0700 where missing, then checks the folder and
    each subfolder: a folder (not a file), owned by the current user, not writable by group or others,
    writable by the user. The answer is one phrase naming the path, the reason and the fix.
    """
    root = os.fspath(path)
    if os.path.lexists(root) and not os.path.isdir(root):
        return f"{root} is not a folder; set JAXCERT_CACHE_DIR to a folder of your own (or to off)"
    try:
        os.makedirs(root, mode=0o700, exist_ok=True)
    except (OSError, ValueError) as err:  # ValueError: a NUL in the path
        return f"{root} cannot be created ({_why(err)}); set JAXCERT_CACHE_DIR to a writable folder (or off)"
    problem = _folder_problem(root)
    if problem:
        return problem
    for sub in SUBFOLDERS:
        folder = os.path.join(root, sub)
        if os.path.lexists(folder) and not os.path.isdir(folder):
            return f"{folder} is not a folder; remove it or set JAXCERT_CACHE_DIR to another folder (or off)"
        try:
            os.makedirs(folder, mode=0o700, exist_ok=True)
        except (OSError, ValueError) as err:
            return f"{folder} cannot be created ({_why(err)}); fix with `chmod 700 {root}`"
        problem = _folder_problem(folder)
        if problem:
            return problem
    return None


def _why(err: Exception) -> str:
    return getattr(err, "strerror", None) or str(err)


def _folder_problem(folder: str) -> str | None:
    """Ownership and mode of one existing folder: None when only its user can write it."""
    try:
        st = os.stat(folder)
    except (OSError, ValueError) as err:
        return f"{folder} cannot be read ({_why(err)}); set JAXCERT_CACHE_DIR to a folder of your own"
    getuid = getattr(os, "getuid", None)  # POSIX only; elsewhere the mode and access checks remain
    if getuid is not None and st.st_uid != getuid():
        return (f"{folder} is owned by uid {st.st_uid}, not by you (uid {getuid()}); "
                "set JAXCERT_CACHE_DIR to a folder of your own (or off)")
    if getuid is not None and st.st_mode & 0o022:
        return (f"{folder} is writable by group or others (mode {stat.S_IMODE(st.st_mode):03o}); "
                f"fix with `chmod 700 {folder}` or set JAXCERT_CACHE_DIR")
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"{folder} is not writable by you; fix with `chmod 700 {folder}` or set JAXCERT_CACHE_DIR"
    return None


def enable_compilation_cache(path: str | None = None) -> str | None:
    """Reuse compiled programs across processes under ``path`` (default :func:`default_cache_dir`).

    Turns on JAX's persistent cache in ``<path>/xla`` (every program, no minimum compile time or
    size: the suite's programs each take seconds to compile on CPU) and jaxcert's
    :class:`ExecutableStore` in ``<path>/exec``. Returns the path used, or None when disabled.

    A folder that is unfit (:func:`cache_dir_problem`: a file, not the user's, writable by others,
    not writable, cannot be created) is not used at all: one warning line goes to stderr and the
    process runs without either cache layer. This never raises.
    """
    import jax

    global _STORE
    _STORE = None
    path = path if path is not None else default_cache_dir()
    if path is None:
        return None
    problem = cache_dir_problem(path)
    if problem is not None:
        print(f"jaxcert: warning: cache not used: {problem}", file=sys.stderr)
        return None
    jax.config.update("jax_compilation_cache_dir", os.path.join(path, "xla"))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    _STORE = ExecutableStore(os.path.join(path, "exec"))
    return path


_BYPASS_LOCK = threading.Lock()
_BYPASS_DEPTH = 0
_BYPASS_SAVED = True
_HITS = threading.local()


def _count_cache_hit(event: str, **_: Any) -> None:
    if event == "/jax/compilation_cache/cache_hits":
        _HITS.n = getattr(_HITS, "n", 0) + 1


@functools.lru_cache(maxsize=1)
def _listen_for_cache_hits() -> bool:
    import jax

    try:
        jax.monitoring.register_event_listener(_count_cache_hit)
    except Exception:  # noqa: BLE001 - no monitoring: the bypass alone must do
        return False
    return True


@dataclasses.dataclass
class Bypass:
    """What :func:`persistent_cache_bypassed` found: whether the program compiled in the block may be stored."""

    storable: bool = False


@contextlib.contextmanager
def persistent_cache_bypassed() -> Iterator[Bypass]:
    """Compile without JAX's persistent cache inside this block; ``.storable`` says, after it, whether to store.

    jaxlib 0.10 serialises an executable that it *loaded* from JAX's persistent cache without its
    kernels ("Function add_multiply_fusion not found" when the stored copy runs), so a program meant
    for the executable store must be compiled afresh. JAX decides once per process whether its cache
    is used (``jax._src.compilation_cache.is_cache_used``) and ignores the per-thread
    ``jax_enable_compilation_cache`` after that decision, so this block clears the process-wide
    decision while any store-bound compile runs (other threads compiling meanwhile just miss the cache:
    slower, never wrong) and restores it after. ``storable`` stays False, and the program is not
    stored, when that switch is unavailable in this JAX or a cache hit was seen in this thread during
    the block (counted through ``jax.monitoring``).
    """
    global _BYPASS_DEPTH, _BYPASS_SAVED
    import jax
    from jax._src import compilation_cache as cc

    switchable = all(hasattr(cc, n) for n in ("_cache_used", "is_cache_used", "_cache_initialized_mutex"))
    listening = _listen_for_cache_hits()
    state = Bypass()
    if not (switchable and listening):
        yield state
        return
    with _BYPASS_LOCK:
        if _BYPASS_DEPTH == 0:
            cc.is_cache_used(jax.devices()[0].client)  # settle JAX's once-per-process decision first
            with cc._cache_initialized_mutex:
                _BYPASS_SAVED = cc._cache_used
                cc._cache_used = False
        _BYPASS_DEPTH += 1
    before = getattr(_HITS, "n", 0)
    try:
        yield state
    finally:
        with _BYPASS_LOCK:
            _BYPASS_DEPTH -= 1
            if _BYPASS_DEPTH == 0:
                with cc._cache_initialized_mutex:
                    cc._cache_used = _BYPASS_SAVED
    state.storable = getattr(_HITS, "n", 0) == before  # a hit here: the bypass failed, never store it


def executable_store() -> ExecutableStore | None:
    """The store enabled by :func:`enable_compilation_cache`, or None."""
    return _STORE


class Unstorable(Exception):  # noqa: N818 - a signal, not an error
    """Raised by :func:`fingerprint` for a value whose identity it cannot pin down."""


_SCALARS = (type(None), bool, int, float, complex, str, bytes)


def fingerprint(obj: Any, at: tuple | None = None) -> str:
    """A digest of what ``obj`` computes, for keys of the executable store.

    Covers plain values, containers, numpy/JAX arrays (their bytes), dtypes, enums, slices, jaxcert's
    dataclasses (type and fields, so a :class:`~jaxcert.Model`'s functions, parameters and static fields),
    ``functools.partial`` and functions defined in jaxcert modules: their code objects, default arguments and
    closed-over values, recursively. Code a function calls through module globals is covered by the jaxcert
    source digest that every key also carries (:func:`_source_digest`, with the versions of the packages
    jaxcert's source imports).

    Objects of **installed packages** (site-packages or the standard library: :func:`_origin`) count by their
    package's version and the versions of what that package requires (:func:`_package_versions`), plus their
    state: a module by its name, a class by its name, a function by its name, defaults and closed-over values,
    any other object (an Equinox module skeleton, an e3nn-jax ``Irreps``) by its class, its dataclass fields,
    ``__dict__`` and ``__slots__`` values, recursively. Only classes written in Python are read this way (an
    extension type's state is invisible: :class:`Unstorable`). This is how a network that a jaxcert adapter
    builds from a checkpoint (:meth:`~jaxcert.Model.from_nequix`) is keyed without tracing it: its energy is
    jaxcert's code closing over the checkpoint's configuration and the network's static skeleton, its
    parameters are read by value. Anything of the user's own (a function, a class, a module outside jaxcert
    and the installed packages), met anywhere in that walk, raises :class:`Unstorable`.

    An instance of a type registered with :func:`register_traced` (a :class:`~jaxcert.Model`) that cannot be
    read that way (its energy is a user's function) is fingerprinted by tracing it at the program inputs ``at``
    (:mod:`jaxcert.core._model_key`); without ``at``, or when that fails, it raises :class:`Unstorable`, as
    does anything else (an arbitrary object of the user's).
    """
    h = hashlib.sha256()
    outer = (getattr(_WALK, "budget", None), getattr(_WALK, "memo", None))  # a trace inside a walk fingerprints too
    _WALK.budget, _WALK.memo = _OBJECT_BUDGET, {}
    try:
        _feed(h, obj, set(), at)
    except RecursionError as err:
        raise Unstorable("too deeply nested to fingerprint") from err
    finally:
        _WALK.budget, _WALK.memo = outer
    return h.hexdigest()


#: at most this many objects of installed packages are read per fingerprint (then it is :class:`Unstorable`)
_OBJECT_BUDGET = 200_000
_WALK = threading.local()

#: type -> fingerprint(obj, program inputs) by tracing, for instances whose code jaxcert cannot read
_TRACED: dict[type, Any] = {}


def register_traced(cls: type, fn: Any) -> type:
    """Fingerprint instances of ``cls`` that :func:`fingerprint` cannot read by ``fn(obj, args)``: a digest
    of what ``obj`` computes on program inputs shaped like ``args`` (raising :class:`Unstorable` when it
    cannot tell). Registered by the module that owns the tracing, so this module imports none of it."""
    _TRACED[cls] = fn
    return cls


def _put(h: Any, tag: str, payload: bytes | str = b"") -> None:
    payload = payload.encode() if isinstance(payload, str) else payload
    h.update(tag.encode() + b":" + str(len(payload)).encode() + b":" + payload)


#: builtin classes an object of an installed package may derive from (their state is its items)
_BUILTIN_BASES = (object, tuple, list, dict)


def _feed(h: Any, x: Any, seen: set[int], at: tuple | None = None) -> None:
    def put(tag: str, payload: bytes | str = b"") -> None:
        _put(h, tag, payload)

    if isinstance(x, enum.Enum):
        put("enum", f"{type(x).__module__}.{type(x).__qualname__}.{x.name}")
    elif isinstance(x, _SCALARS):
        put(type(x).__name__, repr(x))
    elif isinstance(x, (np.dtype, np.generic)):
        put("np", f"{type(x).__name__}:{x!r}")
    elif isinstance(x, type):
        put("type", f"{x.__module__}.{x.__qualname__}{_versions_of(x.__module__, f'class {x.__qualname__}')}")
    elif isinstance(x, (tuple, list)):
        if type(x) not in (tuple, list):  # a NamedTuple, an e3nn-jax Irreps: its class counts too
            put("class", f"{type(x).__module__}.{type(x).__qualname__}{_versions_of(type(x).__module__)}")
        put(type(x).__name__ if type(x) in (tuple, list) else "tuple-like", str(len(x)))
        for v in x:
            _feed(h, v, seen, at)
        if type(x) not in (tuple, list) and getattr(x, "__dict__", None):  # attributes beside the items
            _feed(h, dict(vars(x)), seen, at)
    elif isinstance(x, dict):
        if type(x) is not dict:
            put("class", f"{type(x).__module__}.{type(x).__qualname__}{_versions_of(type(x).__module__)}")
        put("dict", str(len(x)))
        for k in sorted(x, key=repr):
            _feed(h, k, seen, at)
            _feed(h, x[k], seen, at)
        if type(x) is not dict and getattr(x, "__dict__", None):
            _feed(h, dict(vars(x)), seen, at)
    elif isinstance(x, slice):
        put("slice")
        _feed(h, (x.start, x.stop, x.step), seen, at)
    elif isinstance(x, functools.partial):
        put("partial")
        _feed(h, (x.func, x.args, x.keywords), seen, at)
    elif isinstance(x, types.MethodType):
        put("method")
        _feed(h, (x.__func__, x.__self__), seen, at)
    elif isinstance(x, types.ModuleType):
        put("module", f"{x.__name__}{_versions_of(x.__name__, f'module {x.__name__}')}")
    elif isinstance(x, types.FunctionType):
        if id(x) in seen:
            put("fn-cycle", x.__qualname__)
            return
        seen.add(id(x))
        origin = _origin(x.__module__)
        if origin == "user":
            raise Unstorable(f"function {x.__module__}.{x.__qualname__} is not jaxcert's")
        put("fn", f"{x.__module__}.{x.__qualname__}")
        if origin == "jaxcert":
            _feed_code(h, x.__code__)
        else:  # an installed package's function: its code counts by the package's version
            put("versions", _versions_of(x.__module__))
        _feed(h, (x.__defaults__, x.__kwdefaults__), seen, at)
        _feed(h, tuple(c.cell_contents if _cell_set(c) else "<empty cell>" for c in (x.__closure__ or ())), seen, at)
    elif isinstance(x, types.BuiltinFunctionType) or type(x).__name__ in ("ufunc", "PjitFunction"):
        name = f"{getattr(x, '__module__', '')}.{getattr(x, '__qualname__', getattr(x, '__name__', ''))}"
        if name.split(".")[0] not in ("jax", "jaxlib", "numpy", "math", "builtins", "operator", "jaxcert"):
            raise Unstorable(f"callable {name} is not JAX's, numpy's or jaxcert's")
        put("builtin", name)
    elif dataclasses.is_dataclass(x) and not isinstance(x, type) and (
            _is_jaxcert_module(type(x).__module__) or any(isinstance(x, cls) for cls in _TRACED)):
        traced = next((fn for cls, fn in _TRACED.items() if isinstance(x, cls)), None)
        if traced is not None:  # read its code if it is all jaxcert's (fast), else trace it at the inputs
            try:
                put("read", _read_digest(x, seen, at))
            except Unstorable:
                if at is None:
                    raise
                try:
                    put("traced", traced(x, at))
                except Unstorable:
                    raise
                except Exception as err:  # noqa: BLE001 - a key that cannot be made: the program is just not stored
                    raise Unstorable(f"tracing failed: {type(err).__name__}: {err}") from err
        else:
            _feed_dataclass(h, x, seen, at)
    elif hasattr(x, "__array__") and hasattr(x, "dtype") and hasattr(x, "shape"):
        try:
            a = np.asarray(x)
        except Exception as err:  # noqa: BLE001 - a tracer or a key array: not a constant we can key on
            raise Unstorable(f"array of type {type(x).__name__} cannot be read") from err
        if a.dtype.hasobject:
            raise Unstorable("an object array cannot be keyed")
        put("array", f"{a.dtype.str}{a.shape}")
        h.update(np.ascontiguousarray(a).tobytes())
    else:
        _feed_object(h, x, seen, at)


#: id(model) -> (model, digest) of the models read (not traced) by :func:`fingerprint` in this process; the model
#: is held so its id stays unique. Like the traced digest (:mod:`jaxcert.core._model_key`) and the suite's
#: programs, it is made once per model object: a model's parameters are not changed in place.
_READ_MEMO: dict[int, tuple[Any, str]] = {}
_READ_LOCK = threading.Lock()


def _read_digest(x: Any, seen: set[int], at: tuple | None) -> str:
    """The digest of a model (an instance of a :func:`register_traced` type) read field by field, once per
    model object in a process; :class:`Unstorable` when some part of it cannot be read."""
    with _READ_LOCK:
        hit = _READ_MEMO.get(id(x))
    if hit is not None and hit[0] is x:
        return hit[1]
    sub = hashlib.sha256()
    _feed_dataclass(sub, x, set(seen), at)
    digest = sub.hexdigest()
    with _READ_LOCK:
        if len(_READ_MEMO) > 256:
            _READ_MEMO.clear()
        _READ_MEMO[id(x)] = (x, digest)
    return digest


def _feed_object(h: Any, x: Any, seen: set[int], at: tuple | None) -> None:
    """An object of an installed package by its class (and that package's versions) and its state: dataclass
    fields, ``__dict__`` and ``__slots__`` values. :class:`Unstorable` for an object of the user's or of jaxcert
    (jaxcert's own values are dataclasses), and for a class written in C (its state cannot be read).

    Within one :func:`fingerprint` an object met again (a shared ``Irrep``) reuses its digest."""
    cls = type(x)
    label, slots = _object_class(cls)
    memo = getattr(_WALK, "memo", None)
    hit = memo.get(id(x)) if memo is not None else None
    if hit is not None and hit[0] is x:
        _put(h, "object", hit[1])
        return
    if id(x) in seen:  # an object that contains itself
        _put(h, "object-cycle", label)
        return
    _WALK.budget = getattr(_WALK, "budget", _OBJECT_BUDGET) - 1
    if _WALK.budget < 0:
        raise Unstorable("too many objects to fingerprint")
    state: dict[str, Any] = {}
    if dataclasses.is_dataclass(x):
        for f in dataclasses.fields(x):
            if hasattr(x, f.name):
                state[f.name] = getattr(x, f.name)
    d = getattr(x, "__dict__", None)
    if isinstance(d, dict):
        for k, v in d.items():
            state.setdefault(k, v)
    for s in slots:
        if s not in state and hasattr(x, s):
            state[s] = getattr(x, s)
    sub = hashlib.sha256()
    _put(sub, "object", label)
    seen.add(id(x))  # as an ancestor only: equal objects shared or copied give the same digest
    try:
        _put(sub, "state", str(len(state)))
        for k in sorted(state):
            _put(sub, "attr", k)
            _feed(sub, state[k], seen, at)
    finally:
        seen.discard(id(x))
    digest = sub.hexdigest()
    if memo is not None:
        memo[id(x)] = (x, digest)
    _put(h, "object", digest)


@functools.lru_cache(maxsize=1024)
def _object_class(cls: type) -> tuple[str, tuple[str, ...]]:
    """(name with its package's versions, ``__slots__`` names) of an installed package's class written in Python;
    :class:`Unstorable` for any other (a class of the user's or jaxcert's in its bases, an extension type)."""
    for c in cls.__mro__:
        if c in _BUILTIN_BASES:
            continue
        if _origin(c.__module__) != "library":
            raise Unstorable(f"cannot fingerprint a {cls.__module__}.{cls.__qualname__} "
                             f"({c.__module__}.{c.__qualname__} is not an installed package's class)")
        if not _written_in_python(c):
            raise Unstorable(f"cannot fingerprint a {cls.__module__}.{cls.__qualname__}: its state is not Python's")
    slots: list[str] = []
    for c in cls.__mro__:
        names = vars(c).get("__slots__", ())
        for s in (names,) if isinstance(names, str) else names:
            if isinstance(s, str) and s not in ("__dict__", "__weakref__") and s not in slots:
                slots.append(s)
    return f"{cls.__module__}.{cls.__qualname__}{_versions_of(cls.__module__)}", tuple(slots)


def _feed_dataclass(h: Any, x: Any, seen: set[int], at: tuple | None) -> None:
    """A jaxcert dataclass by type and fields; another package's (its methods may compute anything) is
    :class:`Unstorable`."""
    cls = type(x)
    if not _is_jaxcert_module(cls.__module__):
        raise Unstorable(f"dataclass {cls.__module__}.{cls.__qualname__} is not jaxcert's")
    _put(h, "dataclass", f"{cls.__module__}.{cls.__qualname__}")
    for f in dataclasses.fields(x):
        _put(h, "field", f.name)
        _feed(h, getattr(x, f.name), seen, at)


# ----------------------------------------------------------------------------- where code comes from, versions
@functools.lru_cache(maxsize=1)
def _library_roots() -> tuple[str, ...]:
    import sysconfig

    paths = sysconfig.get_paths()
    roots = {paths.get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    return tuple(sorted(os.path.realpath(r) + os.sep for r in roots if r))


@functools.lru_cache(maxsize=4096)
def _origin(module: str | None) -> str:
    """"jaxcert", "library" (installed: site-packages or the standard library) or "user" for a module name."""
    if _is_jaxcert_module(module):
        return "jaxcert"
    if not module or module == "__main__":
        return "user"
    if module == "builtins" or module.split(".")[0] in sys.builtin_module_names:
        return "library"
    mod = sys.modules.get(module) or sys.modules.get(module.split(".")[0])
    path = getattr(mod, "__file__", None)
    if not path:
        return "user"
    real = os.path.realpath(path)
    in_lib = any(real.startswith(r) for r in _library_roots())
    return "library" if in_lib or "site-packages" in real or "dist-packages" in real else "user"


def _written_in_python(cls: type) -> bool:
    """Whether ``cls`` is defined in a ``.py`` module (an extension type's instance state is not readable)."""
    mod = sys.modules.get(cls.__module__)
    return str(getattr(mod, "__file__", "") or "").endswith(".py")


def _version(top: str) -> str:
    """``top=<version>`` of an imported top-level module (its ``__version__``, else its distribution's)."""
    mod = sys.modules.get(top)
    v = getattr(mod, "__version__", None)
    if v is None:
        from importlib import metadata

        try:
            v = metadata.version(top)
        except Exception:  # noqa: BLE001 - no distribution of that name
            v = "?"
    return f"{top}={v}"


def _versions_of(module: str | None, what: str = "") -> str:
    """"" for jaxcert's code (the source digest covers it), ``@<versions>`` for an installed package's
    (:func:`_package_versions`); :class:`Unstorable` for the user's own ``what``."""
    origin = _origin(module)
    if origin == "jaxcert":
        return ""
    if origin == "user":
        raise Unstorable(f"{what or module} is the user's own code, not jaxcert's or an installed package's")
    return "@" + _package_versions((module or "?").split(".")[0])


@functools.lru_cache(maxsize=256)
def _package_versions(top: str) -> str:
    """The versions an installed package's code is keyed by: its distribution's and, transitively, those of
    the distributions it requires (extras left out), as ``name=version`` sorted; Python's version for the
    standard library. A package found by no distribution counts by its ``__version__``."""
    from importlib import metadata

    if top == "builtins" or top in sys.stdlib_module_names:
        return f"python={sys.version.split()[0]}"
    found: dict[str, str] = {}

    def walk(name: str) -> None:
        key = name.replace("_", "-").replace(".", "-").lower()
        if key in found:
            return
        try:
            dist = metadata.distribution(name)
        except Exception:  # noqa: BLE001 - not installed (a requirement behind a platform marker)
            return
        found[key] = dist.version or "?"
        for req in dist.requires or ():
            spec, _, marker = req.partition(";")
            if "extra" in marker:
                continue
            m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", spec)
            if m:
                walk(m.group(1))

    walk(top)
    if not found:
        return _version(top)
    return ",".join(f"{k}={v}" for k, v in sorted(found.items()))


def _is_jaxcert_module(name: str | None) -> bool:
    return name == "jaxcert" or (name or "").startswith("jaxcert.")


def _cell_set(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018
    except ValueError:
        return False
    return True


def _feed_code(h: Any, code: types.CodeType) -> None:
    h.update(code.co_code)
    h.update(repr(code.co_names).encode())
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            _feed_code(h, c)
        elif isinstance(c, frozenset):  # `x in {"a", "b"}`: a set's repr order follows the process's hash seed
            h.update(repr(sorted(repr(v) for v in c)).encode())
        else:
            h.update(repr(c).encode())


@functools.lru_cache(maxsize=1)
def _source_digest() -> str:
    """Digest of every ``.py`` file of the installed jaxcert package (a changed jaxcert misses) and of the
    versions of the installed packages its source imports (:func:`_imported_versions`: jaxcert's code calls
    e3nn-jax, equinox, ... through its own module globals and function-level imports)."""
    root = pathlib.Path(__file__).resolve().parents[1]  # the jaxcert package (this file is jaxcert/core/cache.py)
    h = hashlib.sha256()
    imported: set[str] = set()
    for p in sorted(root.rglob("*.py")):
        text = p.read_bytes()
        h.update(str(p.relative_to(root)).encode())
        h.update(text)
        imported.update(_IMPORT.findall(text.decode("utf-8", "replace")))
    h.update(_imported_versions(frozenset(imported)).encode())
    return h.hexdigest()


#: the top-level name of ``import x.y`` / ``from x.y import z`` at the start of a line (any indentation)
_IMPORT = re.compile(r"^[ \t]*(?:from|import)[ \t]+([A-Za-z_]\w*)", re.M)


def _imported_versions(names: frozenset[str]) -> str:
    """``name=version`` of each top-level module in ``names`` that an installed distribution provides (the
    standard library, jaxcert and modules found by no distribution are left out), sorted."""
    from importlib import metadata

    out = []
    for name in sorted(names - set(sys.stdlib_module_names) - {"jaxcert", "__future__"}):
        try:
            out.append(f"{name}={metadata.distribution(name).version}")
        except Exception:  # noqa: BLE001 - not installed, or a module whose distribution has another name
            continue
    return ",".join(out)


@functools.lru_cache(maxsize=1)
def _environment_digest() -> str:
    """JAX and jaxlib versions, x64, XLA flags, the device and the CPU's feature flags."""
    import jax
    import jaxlib

    cpu_flags = ""
    try:
        with open("/proc/cpuinfo") as fh:
            cpu_flags = next((line for line in fh if line.startswith("flags")), "")
    except OSError:
        pass
    dev = jax.devices()[0]
    parts = (STORE_FORMAT, jax.__version__, jaxlib.__version__, bool(jax.config.jax_enable_x64),
             os.environ.get("XLA_FLAGS", ""), dev.platform, getattr(dev, "device_kind", ""),
             platform.machine(), cpu_flags)
    return hashlib.sha256(repr(parts).encode()).hexdigest()


#: JAX settings read while a program is traced that change the program (the default matmul precision: nequix
#: sets it when imported; dtype promotion; the PRNG implementation)
_TRACE_SETTINGS = ("jax_enable_x64", "jax_default_matmul_precision", "jax_numpy_dtype_promotion",
                   "jax_default_prng_impl", "jax_threefry_partitionable")


def _trace_config() -> str:
    """The current values of :data:`_TRACE_SETTINGS` (read at every key: they may change within a process)."""
    import jax

    values = []
    for name in _TRACE_SETTINGS:
        try:
            values.append(f"{name}={getattr(jax.config, name)!r}")
        except Exception:  # noqa: BLE001 - a setting this JAX does not have
            values.append(f"{name}=-")
    return ",".join(values)


@functools.lru_cache(maxsize=1)
def _initialise_runtime() -> None:
    """Set up what jaxlib sets up lazily while lowering, before a stored executable can run.

    jaxlib resolves its CPU LAPACK kernels (from scipy) the first time a decomposition is lowered; an
    executable loaded without lowering anything would call unresolved kernels (a segfault). Lowering
    (not compiling) one tiny ``eigh`` does it through public API.
    """
    import jax
    import jax.numpy as jnp

    jax.jit(jnp.linalg.eigh).lower(np.eye(2, dtype=np.float32))  # a numpy input: nothing eager is compiled


#: every global that JAX's serialised executable may name (jaxlib 0.10: collected from the suite's programs);
#: the executable's pickle stream is read by an unpickler that resolves these and nothing else. A JAX that
#: needs another one just misses the store (the program is compiled, as without a cache).
_EXECUTABLE_GLOBALS = frozenset({
    ("jax", "P"),
    ("jax._src.core", "ManualAxisType"),
    ("jax._src.core", "MemorySpace"),
    ("jax._src.core", "ShapedArray"),
    ("jax._src.interpreters.pxla", "AllArgsInfo"),
    ("jax._src.interpreters.pxla", "UnloadedMeshExecutable"),
    ("jax._src.layout", "Layout"),
    ("jax._src.linear_util", "DebugInfo"),
    ("jax._src.mesh", "AbstractMesh"),
    ("jax._src.named_sharding", "_unpickle_named_sharding"),
    ("jax._src.random.prng", "KeyTy"),
    ("jax._src.random.prng", "PRNGImpl"),
    ("jax._src.random.threefry2x32", "threefry_fold_in"),
    ("jax._src.random.threefry2x32", "threefry_random_bits"),
    ("jax._src.random.threefry2x32", "threefry_seed"),
    ("jax._src.random.threefry2x32", "threefry_split"),
    ("jax._src.sharding_impls", "_unpickle_single_device_sharding"),
    ("jax._src.stages", "ArgInfo"),
    ("jaxlib._jax", "DeviceList"),
    ("numpy", "dtype"),
})


class EntryError(ValueError):
    """A cache entry that is missing, corrupt, of another format or of a type jaxcert does not store."""


_MAGIC = b"jaxcert-cache"


def _seal(kind: str, key: str, body: bytes) -> bytes:
    """``body`` behind a header naming the format and a SHA-256 of (kind, key, body)."""
    digest = hashlib.sha256(f"{kind}|{key}|".encode() + body).hexdigest().encode()
    return b"%s %d %s %s\n" % (_MAGIC, STORE_FORMAT, kind.encode(), digest) + body


def _unseal(kind: str, key: str, blob: bytes) -> bytes:
    """The body of an entry written by :func:`_seal` for the same kind and key; :class:`EntryError` otherwise."""
    head, sep, body = blob.partition(b"\n")
    parts = head.split(b" ")
    if not sep or len(parts) != 4 or parts[:3] != [_MAGIC, str(STORE_FORMAT).encode(), kind.encode()]:
        raise EntryError("not an entry of this format")
    digest = hashlib.sha256(f"{kind}|{key}|".encode() + body).hexdigest().encode()
    if not hmac.compare_digest(digest, parts[3]):
        raise EntryError("digest mismatch")
    return body


def _pack(tree: Any, arrays: dict[str, np.ndarray]) -> bytes:
    """``tree`` (JSON) and ``arrays`` as one npz (no pickled members)."""
    members = {"tree": np.frombuffer(json.dumps(tree, separators=(",", ":")).encode(), np.uint8)}
    members.update(arrays)
    buf = io.BytesIO()
    np.savez(buf, **members)
    return buf.getvalue()


def _unpack(body: bytes) -> tuple[Any, dict[str, np.ndarray]]:
    """Inverse of :func:`_pack`, never unpickling anything."""
    with np.load(io.BytesIO(body), allow_pickle=False) as npz:
        members = {name: npz[name] for name in npz.files}
    tree = members.pop("tree", None)
    if tree is None or tree.dtype != np.uint8 or tree.ndim != 1:
        raise EntryError("no structure")
    return json.loads(tree.tobytes().decode()), members


#: the dataclasses a stored value may contain, and the pytree node types an executable's output structure may
#: contain, by name: only these are rebuilt on load.  Each module registers its own types
#: (:func:`register_storable`), so this module imports none of them.
_DATACLASSES: dict[str, type] = {}
_NODES: dict[str, type] = {"tuple": tuple, "list": list, "dict": dict, "none": type(None)}


def register_storable(cls: type, *, value: bool = False, node: bool = False) -> type:
    """Allow ``cls`` in stored host values (``value``: a dataclass rebuilt field by field) and/or in stored
    executables' output trees (``node``: a registered pytree node).  Returns ``cls`` (usable as a decorator)."""
    if value:
        _DATACLASSES[cls.__name__] = cls
    if node:
        _NODES[cls.__name__] = cls
    return cls


def _storable_dataclasses() -> dict[str, type]:
    return _DATACLASSES


def _storable_nodes() -> dict[str, type]:
    return _NODES


def _array_ok(a: np.ndarray) -> bool:
    return a.dtype.kind in "biufc" and not a.dtype.hasobject and np.dtype(a.dtype.str) == a.dtype


def encode_value(x: Any, arrays: dict[str, np.ndarray]) -> Any:
    """A :func:`stored` result as JSON, its arrays added to ``arrays``; :class:`EntryError` for other types.

    Stored: None, bool, int, float, str, tuple, list, dict with string keys, numpy arrays and scalars, JAX
    arrays (committed to no device, not weakly typed) and the dataclasses of :func:`_storable_dataclasses`.
    """
    import jax

    def array(tag: str, a: np.ndarray) -> list:
        if not _array_ok(a):
            raise EntryError(f"array of dtype {a.dtype} is not stored")
        name = f"a{len(arrays)}"
        arrays[name] = a
        return [tag, name]

    t = type(x)
    if x is None:
        return ["none"]
    if t is bool:
        return ["bool", x]
    if t is int:
        return ["int", str(x)]
    if t is float:
        return ["float", x.hex()]
    if t is str:
        return ["str", x]
    if t is tuple or t is list:
        return [t.__name__, [encode_value(v, arrays) for v in x]]
    if t is dict:
        if not all(type(k) is str for k in x):
            raise EntryError("dict keys must be strings")
        return ["dict", [[k, encode_value(v, arrays)] for k, v in x.items()]]
    if t is np.ndarray:
        return array("ndarray", x)
    if isinstance(x, np.generic):
        return array("npscalar", np.asarray(x))
    if isinstance(x, jax.Array):
        if getattr(x, "weak_type", False) or getattr(x, "committed", False) or not x.is_fully_addressable:
            raise EntryError("a weakly typed, committed or distributed JAX array is not stored")
        return array("jax", np.asarray(x))
    named = {c: n for n, c in _storable_dataclasses().items()}
    if t in named:
        return ["dataclass", named[t],
                [[f.name, encode_value(getattr(x, f.name), arrays)] for f in dataclasses.fields(x)]]
    raise EntryError(f"a {t.__module__}.{t.__qualname__} is not stored")


def decode_value(node: Any, arrays: dict[str, np.ndarray]) -> Any:
    """Inverse of :func:`encode_value`; :class:`EntryError` for anything it would not have written."""
    import jax.numpy as jnp

    if not isinstance(node, list) or not node or not isinstance(node[0], str):
        raise EntryError("malformed node")
    tag, *rest = node

    def one(kind: type) -> Any:
        if len(rest) != 1 or not isinstance(rest[0], kind):
            raise EntryError(f"malformed {tag} node")
        return rest[0]

    def array() -> np.ndarray:
        a = arrays.get(one(str))
        if a is None or not _array_ok(a):
            raise EntryError("missing or unsupported array")
        return a

    if tag == "none" and not rest:
        return None
    if tag == "bool":
        return one(bool)
    if tag == "int":
        return int(one(str))
    if tag == "float":
        return float.fromhex(one(str))
    if tag == "str":
        return one(str)
    if tag in ("tuple", "list"):
        items = [decode_value(v, arrays) for v in one(list)]
        return tuple(items) if tag == "tuple" else items
    if tag == "dict":
        pairs = one(list)
        if not all(isinstance(p, list) and len(p) == 2 and isinstance(p[0], str) for p in pairs):
            raise EntryError("malformed dict node")
        return {k: decode_value(v, arrays) for k, v in pairs}
    if tag == "ndarray":
        return array()
    if tag == "npscalar":
        a = array()
        if a.ndim:
            raise EntryError("a numpy scalar must be 0-d")
        return a[()]
    if tag == "jax":
        return jnp.asarray(array())
    if tag == "dataclass" and len(rest) == 2 and isinstance(rest[0], str) and isinstance(rest[1], list):
        cls = _storable_dataclasses().get(rest[0])
        fields = rest[1]
        if cls is None or not all(isinstance(p, list) and len(p) == 2 for p in fields):
            raise EntryError("unknown or malformed dataclass")
        if [p[0] for p in fields] != [f.name for f in dataclasses.fields(cls)]:
            raise EntryError(f"fields of {rest[0]} do not match")
        return cls(**{name: decode_value(v, arrays) for name, v in fields})
    raise EntryError(f"unknown node {tag!r}")


def encode_treedef(treedef: Any) -> Any:
    """A pytree structure as JSON: each node's type (one of :func:`_storable_nodes`), its static data (as
    :func:`encode_value` writes it, without arrays) and its children; a leaf is ``"*"``.

    :class:`EntryError` for any other node type or static data (such a program is simply not stored).
    """
    if treedef.num_nodes == 1 and treedef.num_leaves == 1:
        return "*"
    kind, aux = treedef.node_data()
    name = {c: n for n, c in _storable_nodes().items()}.get(kind)
    if name is None:
        raise EntryError(f"pytree node {kind!r} is not stored")
    if kind is dict and not all(type(k) is str for k in aux):
        raise EntryError("dict keys must be strings")
    arrays: dict[str, np.ndarray] = {}
    aux_json = encode_value(list(aux) if kind is dict else aux, arrays)
    if arrays:
        raise EntryError("arrays in a pytree's static data are not stored")
    return ["node", name, aux_json, [encode_treedef(c) for c in treedef.children()]]


def decode_treedef(node: Any) -> Any:
    """Inverse of :func:`encode_treedef`."""
    import jax

    if node == "*":
        return jax.tree_util.tree_structure(0)
    if not (isinstance(node, list) and len(node) == 4 and node[0] == "node" and isinstance(node[1], str)
            and isinstance(node[3], list)):
        raise EntryError("malformed pytree node")
    kind = _storable_nodes().get(node[1])
    if kind is None:
        raise EntryError(f"unknown pytree node {node[1]!r}")
    aux = decode_value(node[2], {})
    if kind is dict and not (isinstance(aux, list) and all(type(k) is str for k in aux)):
        raise EntryError("dict keys must be strings")
    kids = [decode_treedef(c) for c in node[3]]
    return jax.tree_util.PyTreeDef.from_node_data_and_children(jax.tree_util.default_registry, (kind, aux), kids)


class _ExecutableUnpickler(pickle.Unpickler):
    """Reads the pickle stream of JAX's serialised executable, resolving only :data:`_EXECUTABLE_GLOBALS`.

    Devices, the client and the executable itself come through persistent ids, as JAX writes them.
    """

    def __init__(self, file: Any, backend: Any):
        super().__init__(file)
        self.backend = backend
        self.devices = backend.devices()
        self.by_id = {d.id: d for d in self.devices}

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in _EXECUTABLE_GLOBALS:
            raise pickle.UnpicklingError(f"{module}.{name} is not part of a serialised executable")
        return super().find_class(module, name)

    def persistent_load(self, pid: Any) -> Any:
        from jax._src.lib import xla_client as xc

        kind = pid[0] if isinstance(pid, tuple) and pid else None
        if kind == "exec" and len(pid) == 2 and isinstance(pid[1], bytes):
            return self.backend.deserialize_executable(pid[1], executable_devices=xc.DeviceList(tuple(self.devices)))
        if kind == "device" and len(pid) == 2:
            return self.by_id[pid[1]]
        if kind == "client":
            return self.backend
        raise pickle.UnpicklingError(f"unknown persistent id {kind!r}")


def _load_executable(payload: bytes, in_tree: Any, out_tree: Any) -> Any:
    """A ``jax.stages.Compiled`` from the payload of ``serialize_executable.serialize``, read without
    resolving any global outside :data:`_EXECUTABLE_GLOBALS` (jax.experimental.serialize_executable's
    loader, with a closed unpickler)."""
    import jax
    from jax._src.interpreters import pxla

    backend = jax.devices()[0].client
    unloaded, args_info_flat, no_kwargs = _ExecutableUnpickler(io.BytesIO(payload), backend).load()
    if not isinstance(unloaded, pxla.UnloadedMeshExecutable) or not isinstance(no_kwargs, bool):
        raise EntryError("not a serialised executable")
    args_info = in_tree.unflatten(args_info_flat)
    return jax.stages.Compiled(unloaded.load(), [], args_info, out_tree, no_kwargs=no_kwargs)


class ExecutableStore:
    """Serialised executables on disk, keyed by :meth:`key` (see the module docstring).

    Entries are written atomically (a 0600 temporary file in a 0700 folder, then a rename), so
    concurrent processes never read a partial entry; an unreadable entry, or one whose digest does
    not match its key and payload, is treated as a miss. Within a process, loading and serialising
    take one lock: jaxlib 0.10's deserialiser can crash (SIGSEGV) when two threads load executables
    at once.
    """

    def __init__(self, path: str | os.PathLike):
        self.path = pathlib.Path(path)
        self.hits = 0
        self.misses = 0
        self._lock = threading.Lock()

    def key(self, identity: Any, args: tuple) -> str | None:
        """Key of the program ``identity`` (a tuple of fingerprintable values) on inputs shaped like ``args``.

        A model in ``identity`` whose functions are not all jaxcert's is keyed by what it computes on inputs
        of this shape class (:func:`register_traced`, :mod:`jaxcert.core._model_key`). None when some part cannot
        be fingerprinted (then the program is not stored).
        """
        import jax

        leaves, treedef = jax.tree_util.tree_flatten(args)
        tree = str(treedef)
        if "0x" in tree:  # an object identity in the static structure: not reproducible across processes
            return None
        try:
            ident = fingerprint(identity, at=tuple(args))
        except Unstorable:
            return None
        sig = repr((tree, tuple((tuple(x.shape), str(x.dtype)) for x in leaves)))
        h = hashlib.sha256("|".join((ident, sig, _source_digest(), _environment_digest(), _trace_config())).encode())
        return h.hexdigest()

    def _file(self, key: str) -> pathlib.Path:
        return self.path / key[:2] / f"{key}.entry"

    def value_key(self, fn: Any, args: tuple, kw: dict[str, Any]) -> str | None:
        """Key of the host call ``fn(*args, **kw)`` (:func:`stored`); None when it cannot be fingerprinted."""
        try:
            ident = fingerprint(("host", fn, args, kw))
        except Unstorable:
            return None
        parts = (ident, _source_digest(), _environment_digest(), _data_versions())
        return hashlib.sha256("|".join(parts).encode()).hexdigest()

    def _value_file(self, key: str) -> pathlib.Path:
        return self.path.parent / "host" / key[:2] / f"{key}.entry"

    def load_value(self, key: str) -> Any:
        """The stored result for ``key``, or the module's missing marker.

        Missing, truncated, tampered (digest mismatch), old-format and malformed entries are all misses.
        """
        try:
            tree, arrays = _unpack(_unseal("host", key, self._value_file(key).read_bytes()))
            return decode_value(tree, arrays)
        except Exception:  # noqa: BLE001 - missing, partial, stale or foreign: compute again
            return _MISSING

    def save_value(self, key: str, value: Any) -> bool:
        """Store a host result atomically; False when it is of a type not stored (:func:`encode_value`)
        or cannot be written."""
        arrays: dict[str, np.ndarray] = {}
        try:
            body = _pack(encode_value(value, arrays), arrays)
        except Exception:  # noqa: BLE001 - an unsupported result is simply not stored
            return False
        return self._write(self._value_file(key), _seal("host", key, body))

    def _write(self, f: pathlib.Path, blob: bytes) -> bool:
        try:
            f.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=f.parent, prefix=".tmp-")  # mode 0600
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(blob)
                os.replace(tmp, f)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
        except OSError:
            return False
        return True

    def has(self, key: str) -> bool:
        """Whether an entry for ``key`` exists (it may still fail to load)."""
        return self._file(key).is_file()

    def load(self, key: str, args: tuple) -> Any | None:
        """The stored executable for ``key``, for inputs ``args`` (as passed to the jitted function), or None."""
        import jax

        _initialise_runtime()
        with self._lock:
            try:
                tree, arrays = _unpack(_unseal("exec", key, self._file(key).read_bytes()))
                payload = arrays.get("payload")
                if set(arrays) != {"payload"} or payload.dtype != np.uint8 or payload.ndim != 1:
                    raise EntryError("no executable")
                in_tree = jax.tree_util.tree_structure((tuple(args), {}))  # how the program was lowered
                exe = _load_executable(payload.tobytes(), in_tree, decode_treedef(tree))
            except Exception:  # noqa: BLE001 - missing, partial, stale or foreign: recompile
                self.misses += 1
                return None
            self.hits += 1
        jax.monitoring.record_event(compilation.STORE_LOAD)  # counted in the report's "compilation"
        return exe

    def discard(self, key: str) -> None:
        """Remove the entry for ``key`` (one that loaded but failed to run), so it is compiled again."""
        self._file(key).unlink(missing_ok=True)
        self.hits -= 1
        self.misses += 1

    def save(self, key: str, compiled: Any) -> bool:
        """Store ``compiled`` (a ``jax.stages.Compiled``) under ``key``; False when it cannot be serialised
        or its output structure is not one :func:`encode_treedef` writes."""
        from jax.experimental import serialize_executable

        try:
            with self._lock:
                payload, _, out_tree = serialize_executable.serialize(compiled)
            body = _pack(encode_treedef(out_tree), {"payload": np.frombuffer(payload, np.uint8)})
        except Exception:  # noqa: BLE001 - host callbacks and the like cannot be serialised
            return False
        return self._write(self._file(key), _seal("exec", key, body))


_MISSING = object()


@functools.lru_cache(maxsize=1)
def _data_versions() -> str:
    """Versions of the packages whose reference data host functions read (ASE, numpy)."""
    from importlib import metadata

    out = []
    for pkg in ("ase", "numpy"):
        try:
            out.append(f"{pkg}={metadata.version(pkg)}")
        except metadata.PackageNotFoundError:
            out.append(f"{pkg}=?")
    return ",".join(out)


def stored(fn: Any) -> Any:
    """Keep the results of the pure host function ``fn`` in the store across processes.

    With the store off (:func:`enable_compilation_cache` not called, or ``$JAXCERT_CACHE_DIR=off``)
    ``fn`` simply runs. With it on, a call is keyed on ``fn`` (its code, by :func:`fingerprint`), the
    arguments, the jaxcert source, the JAX environment and the versions of ASE and numpy, and a
    hit returns the result of the earlier call: the same arrays, bit for bit. Results are stored as
    data only (:func:`encode_value`: JSON and an npz read without pickle), so only plain values,
    containers, arrays and :class:`~jaxcert.Structure` are stored; any other result, and any call whose
    arguments cannot be fingerprinted (an ``ase.Atoms``, a user's object), runs ``fn`` without storing.
    ``fn`` must be a jaxcert function whose result depends only on its arguments and that reference data.
    """

    @functools.wraps(fn)
    def wrapper(*args: Any, **kw: Any) -> Any:
        store = executable_store()
        if store is None:
            return fn(*args, **kw)
        key = store.value_key(fn, args, kw)
        if key is None:
            return fn(*args, **kw)
        hit = store.load_value(key)
        if hit is not _MISSING:
            return hit
        out = fn(*args, **kw)
        store.save_value(key, out)
        return out

    return wrapper
