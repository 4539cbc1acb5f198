"""Compiled programs kept between processes: JAX's persistent cache and jaxcert's executable store.

Two layers, both under ``$JAXCERT_CACHE_DIR`` (default ``~/.cache/jaxcert``; ``off`` disables
both), both switched on by :func:`enable_compilation_cache` (the CLI does this):

* **JAX's persistent compilation cache** (``<dir>/xla``) keys a compiled executable on the
  *lowered* program. It serves every jitted function, but a process still has to trace and
  lower each program to find its key: 14 s of a 23 s warm suite run (docs/architecture.md §4.3).
* **Stored host results** (``<dir>/host``, :func:`stored`): pure host functions that build inputs
  from ASE's reference data (the suite's stacked substrates, nearest-neighbour distances) are kept by
  the same key recipe, so a warm process neither imports ``ase.build`` nor runs the small eager
  programs that stack and pad the substrates (docs/architecture.md §4.3).
* **The executable store** (``<dir>/exec``) keys a probe program on *what it computes* instead:
  the probe and its config, the model (:func:`fingerprint`: its functions' code and closed-over
  values, its parameters, its static fields), the input shapes and dtypes, the jaxcert source
  and the JAX/XLA/CPU environment. A hit deserialises the executable without tracing or
  lowering anything. Only models whose functions are jaxcert's own (the registry models and their
  defect wrappers) are stored: for a user's function jaxcert cannot see every module it calls, so a
  stale executable could be served; those programs use JAX's cache only. A program that raised
  while tracing (a probe skip) was never compiled, so it is never stored and traces again.

Both are pure caches: a hit runs the very executable a miss would compile, so results are
bit-identical (tested). A corrupt or unreadable entry is ignored and recompiled.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import functools
import hashlib
import os
import pathlib
import pickle
import platform
import tempfile
import threading
import types
from collections.abc import Iterator
from typing import Any

import numpy as np

__all__ = ["enable_compilation_cache", "default_cache_dir", "ExecutableStore", "executable_store", "fingerprint",
           "Unstorable", "stored"]

#: bump when the stored format or the key recipe changes
STORE_FORMAT = 1


def default_cache_dir() -> str | None:
    """``$JAXCERT_CACHE_DIR`` or ``~/.cache/jaxcert``; None when the variable is "off", "0" or empty."""
    path = os.environ.get("JAXCERT_CACHE_DIR", os.path.join(os.path.expanduser("~"), ".cache", "jaxcert"))
    return None if path.strip().lower() in ("", "0", "off", "none", "false") else path


_STORE: ExecutableStore | None = None


def enable_compilation_cache(path: str | None = None) -> str | None:
    """Reuse compiled programs across processes under ``path`` (default :func:`default_cache_dir`).

    Turns on JAX's persistent cache in ``<path>/xla`` (every program, no minimum compile time or
    size: the suite's programs each take seconds to compile on CPU) and jaxcert's
    :class:`ExecutableStore` in ``<path>/exec``. Returns the path used, or None when disabled.
    """
    import jax

    global _STORE
    path = path if path is not None else default_cache_dir()
    if path is None:
        _STORE = None
        return None
    os.makedirs(os.path.join(path, "xla"), exist_ok=True)
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


def fingerprint(obj: Any) -> str:
    """A digest of what ``obj`` computes, for keys of the executable store.

    Covers plain values, containers, numpy/JAX arrays (their bytes), dtypes, enums, dataclasses
    (type and fields, so a :class:`~jaxcert.Model`'s functions, parameters and static fields),
    ``functools.partial`` and functions defined in jaxcert modules: their code objects, default
    arguments and closed-over values, recursively. Anything else (a function from another package,
    an arbitrary object) raises :class:`Unstorable`. Code a function calls through module globals is
    covered by the jaxcert source digest that every key also carries (:func:`_source_digest`).
    """
    h = hashlib.sha256()
    _feed(h, obj, set())
    return h.hexdigest()


def _feed(h: Any, x: Any, seen: set[int]) -> None:
    def put(tag: str, payload: bytes | str = b"") -> None:
        payload = payload.encode() if isinstance(payload, str) else payload
        h.update(tag.encode() + b":" + str(len(payload)).encode() + b":" + payload)

    if isinstance(x, enum.Enum):
        put("enum", f"{type(x).__module__}.{type(x).__qualname__}.{x.name}")
    elif isinstance(x, _SCALARS):
        put(type(x).__name__, repr(x))
    elif isinstance(x, (np.dtype, np.generic)):
        put("np", f"{type(x).__name__}:{x!r}")
    elif isinstance(x, type):
        put("type", f"{x.__module__}.{x.__qualname__}")
    elif isinstance(x, (tuple, list)):
        put(type(x).__name__, str(len(x)))
        for v in x:
            _feed(h, v, seen)
    elif isinstance(x, dict):
        put("dict", str(len(x)))
        for k in sorted(x, key=repr):
            _feed(h, k, seen)
            _feed(h, x[k], seen)
    elif isinstance(x, functools.partial):
        put("partial")
        _feed(h, (x.func, x.args, x.keywords), seen)
    elif isinstance(x, types.MethodType):
        put("method")
        _feed(h, (x.__func__, x.__self__), seen)
    elif isinstance(x, types.FunctionType):
        if id(x) in seen:
            put("fn-cycle", x.__qualname__)
            return
        seen.add(id(x))
        if not _is_jaxcert_module(x.__module__):
            raise Unstorable(f"function {x.__module__}.{x.__qualname__} is not jaxcert's")
        put("fn", f"{x.__module__}.{x.__qualname__}")
        _feed_code(h, x.__code__)
        _feed(h, (x.__defaults__, x.__kwdefaults__), seen)
        _feed(h, tuple(c.cell_contents if _cell_set(c) else "<empty cell>" for c in (x.__closure__ or ())), seen)
    elif isinstance(x, types.BuiltinFunctionType) or type(x).__name__ in ("ufunc", "PjitFunction"):
        name = f"{getattr(x, '__module__', '')}.{getattr(x, '__qualname__', getattr(x, '__name__', ''))}"
        if name.split(".")[0] not in ("jax", "jaxlib", "numpy", "math", "builtins", "operator", "jaxcert"):
            raise Unstorable(f"callable {name} is not JAX's, numpy's or jaxcert's")
        put("builtin", name)
    elif dataclasses.is_dataclass(x):
        put("dataclass", f"{type(x).__module__}.{type(x).__qualname__}")
        for f in dataclasses.fields(x):
            put("field", f.name)
            _feed(h, getattr(x, f.name), seen)
    elif hasattr(x, "__array__") and hasattr(x, "dtype") and hasattr(x, "shape"):
        try:
            a = np.asarray(x)
        except Exception as err:  # noqa: BLE001 - a tracer or a key array: not a constant we can key on
            raise Unstorable(f"array of type {type(x).__name__} cannot be read") from err
        put("array", f"{a.dtype.str}{a.shape}")
        h.update(np.ascontiguousarray(a).tobytes())
    else:
        raise Unstorable(f"cannot fingerprint a {type(x).__module__}.{type(x).__qualname__}")


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
        else:
            h.update(repr(c).encode())


@functools.lru_cache(maxsize=1)
def _source_digest() -> str:
    """Digest of every ``.py`` file of the installed jaxcert package (a changed jaxcert misses)."""
    root = pathlib.Path(__file__).resolve().parent
    h = hashlib.sha256()
    for p in sorted(root.rglob("*.py")):
        h.update(str(p.relative_to(root)).encode())
        h.update(p.read_bytes())
    return h.hexdigest()


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


@functools.lru_cache(maxsize=1)
def _initialise_runtime() -> None:
    """Set up what jaxlib sets up lazily while lowering, before a stored executable can run.

    jaxlib resolves its CPU LAPACK kernels (from scipy) the first time a decomposition is lowered; an
    executable loaded without lowering anything would call unresolved kernels (a segfault, seen with
    zero_modes' ``eigh``). Lowering (not compiling) one tiny ``eigh`` does it through public API.
    """
    import jax
    import jax.numpy as jnp

    jax.jit(jnp.linalg.eigh).lower(jnp.eye(2))


class ExecutableStore:
    """Serialised executables on disk, keyed by :meth:`key` (see the module docstring).

    Entries are written atomically (temporary file + rename), so concurrent processes never
    read a partial entry; any unreadable entry is treated as a miss. Within a process, loading and
    serialising take one lock: jaxlib 0.10's deserialiser crashed (SIGSEGV) when two compile-ahead
    threads loaded executables at once.
    """

    def __init__(self, path: str | os.PathLike):
        self.path = pathlib.Path(path)
        self.hits = 0
        self.misses = 0
        self._lock = threading.Lock()

    def key(self, identity: Any, args: tuple) -> str | None:
        """Key of the program ``identity`` (a tuple of fingerprintable values) on inputs shaped like ``args``.

        None when some part cannot be fingerprinted (then the program is not stored).
        """
        import jax

        leaves, treedef = jax.tree_util.tree_flatten(args)
        tree = str(treedef)
        if "0x" in tree:  # an object identity in the static structure: not reproducible across processes
            return None
        try:
            ident = fingerprint(identity)
        except Unstorable:
            return None
        sig = repr((tree, tuple((tuple(x.shape), str(x.dtype)) for x in leaves)))
        h = hashlib.sha256("|".join((ident, sig, _source_digest(), _environment_digest())).encode())
        return h.hexdigest()

    def _file(self, key: str) -> pathlib.Path:
        return self.path / key[:2] / f"{key}.pkl"

    def value_key(self, fn: Any, args: tuple, kw: dict[str, Any]) -> str | None:
        """Key of the host call ``fn(*args, **kw)`` (:func:`stored`); None when it cannot be fingerprinted."""
        try:
            ident = fingerprint(("host", fn, args, kw))
        except Unstorable:
            return None
        parts = (ident, _source_digest(), _environment_digest(), _data_versions())
        return hashlib.sha256("|".join(parts).encode()).hexdigest()

    def _value_file(self, key: str) -> pathlib.Path:
        return self.path.parent / "host" / key[:2] / f"{key}.pkl"

    def load_value(self, key: str) -> Any:
        """The stored result for ``key``, or the module's missing marker (unreadable entries are misses)."""
        try:
            return pickle.loads(self._value_file(key).read_bytes())
        except Exception:  # noqa: BLE001 - missing, partial or stale: compute again
            return _MISSING

    def save_value(self, key: str, value: Any) -> bool:
        """Store a host result atomically; False when it cannot be pickled or written."""
        try:
            blob = pickle.dumps(value)
        except Exception:  # noqa: BLE001 - an unpicklable result is simply not stored
            return False
        return self._write(self._value_file(key), blob)

    def _write(self, f: pathlib.Path, blob: bytes) -> bool:
        try:
            f.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=f.parent, prefix=".tmp-")
            with os.fdopen(fd, "wb") as fh:
                fh.write(blob)
            os.replace(tmp, f)
        except OSError:
            return False
        return True

    def has(self, key: str) -> bool:
        """Whether an entry for ``key`` exists (it may still fail to load)."""
        return self._file(key).is_file()

    def load(self, key: str) -> Any | None:
        """The stored executable for ``key``, loaded on this process's devices, or None."""
        from jax.experimental import serialize_executable

        f = self._file(key)
        _initialise_runtime()
        with self._lock:
            try:
                payload, in_tree, out_tree = pickle.loads(f.read_bytes())
                exe = serialize_executable.deserialize_and_load(payload, in_tree, out_tree)
            except Exception:  # noqa: BLE001 - missing, partial, stale or foreign: recompile
                self.misses += 1
                return None
            self.hits += 1
        return exe

    def discard(self, key: str) -> None:
        """Remove the entry for ``key`` (one that loaded but failed to run), so it is compiled again."""
        self._file(key).unlink(missing_ok=True)
        self.hits -= 1
        self.misses += 1

    def save(self, key: str, compiled: Any) -> bool:
        """Store ``compiled`` (a ``jax.stages.Compiled``) under ``key``; False when it cannot be serialised."""
        from jax.experimental import serialize_executable

        try:
            with self._lock:
                blob = pickle.dumps(serialize_executable.serialize(compiled))
        except Exception:  # noqa: BLE001 - host callbacks and the like cannot be serialised
            return False
        return self._write(self._file(key), blob)


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
    hit returns the pickled result of the earlier call: the same arrays, bit for bit. Arguments that
    cannot be fingerprinted (an ``ase.Atoms``, a user's object) run ``fn`` without storing. ``fn``
    must be a jaxcert function whose result depends only on its arguments and that reference data.
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
