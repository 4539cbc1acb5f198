"""What a run spent on compilation: traces, lowerings and XLA compilations with their seconds, and the
programs that came from a cache instead (docs/architecture.md, "Compilation in the report").

On a GPU the probes run 20–100× faster than on a CPU and compiling does not, so the compile bill is what a
user's wall time is made of on a cold start. Every certification report carries it (``"compilation"``), so a
cold run and a warm one can be told apart from the report alone::

    {"traces": 41, "trace_s": 3.2, "lowerings": 41, "lower_s": 5.0, "compiles": 12, "compile_s": 48.1,
     "persistent_cache_hits": 0, "store_loads": 29, "key_traces": 0, "key_trace_s": 0.0}

The counts come from ``jax.monitoring``: JAX records a duration event for every trace of a Python function
to a jaxpr (``/jax/core/compile/jaxpr_trace_duration``), every lowering of a jaxpr to an MLIR module
(``.../jaxpr_to_mlir_module_duration``) and every XLA backend compilation
(``.../backend_compile_duration``), and an event for every hit of its persistent compilation cache; jaxcert
records one for every executable its own store (:mod:`jaxcert.core.cache`) loads without tracing
(:data:`STORE_LOAD`), and one, with its seconds, for every model it had to trace only to find a program's key in
that store (:data:`KEY_TRACE`: a model whose computation cannot be read, e.g. a user's own energy function, once
per shape class; ``key_traces`` is 0 for jaxcert's models and the networks its adapters build from checkpoints;
those traces are also among ``traces``).  Seconds are summed over threads (the suite compiles ahead on worker
threads while earlier probes run), so ``compile_s`` can exceed the wall time it overlapped.  The listeners are
process-wide: two certifications running at once in one process (threads) would count each other's
programs; the board's Dask workers are processes of their own.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import threading
from typing import Any

__all__ = ["KEY_TRACE", "STORE_LOAD", "listen", "snapshot", "since", "release_compiled", "trim_heap"]

#: the event jaxcert records when its executable store loads a compiled program (no trace, no compile)
STORE_LOAD = "/jaxcert/executable_store/load"
#: the duration event jaxcert records when it traces a model to key a program in its store
#: (:func:`jaxcert.core._model_key.traced_fingerprint`)
KEY_TRACE = "/jaxcert/executable_store/key_trace"

_DURATIONS = {
    "/jax/core/compile/jaxpr_trace_duration": ("traces", "trace_s"),
    "/jax/core/compile/jaxpr_to_mlir_module_duration": ("lowerings", "lower_s"),
    "/jax/core/compile/backend_compile_duration": ("compiles", "compile_s"),
    KEY_TRACE: ("key_traces", "key_trace_s"),
}
_EVENTS = {"/jax/compilation_cache/cache_hits": "persistent_cache_hits", STORE_LOAD: "store_loads"}
_KEYS = ("traces", "trace_s", "lowerings", "lower_s", "compiles", "compile_s", "persistent_cache_hits",
         "store_loads", "key_traces", "key_trace_s")

_LOCK = threading.Lock()
_TOTALS: dict[str, float] = dict.fromkeys(_KEYS, 0)


def _on_duration(event: str, seconds: float, **_: Any) -> None:
    keys = _DURATIONS.get(event)
    if keys is not None:
        with _LOCK:
            _TOTALS[keys[0]] += 1
            _TOTALS[keys[1]] += float(seconds)


def _on_event(event: str, **_: Any) -> None:
    key = _EVENTS.get(event)
    if key is not None:
        with _LOCK:
            _TOTALS[key] += 1


@functools.lru_cache(maxsize=1)
def listen() -> bool:
    """Register the listeners (once per process); False where ``jax.monitoring`` refuses them."""
    import jax

    try:
        jax.monitoring.register_event_duration_secs_listener(_on_duration)
        jax.monitoring.register_event_listener(_on_event)
    except Exception:  # noqa: BLE001 - no monitoring: the report then carries no compilation entry
        return False
    return True


def snapshot() -> dict[str, float] | None:
    """The process's totals so far (listening from now on if it was not); None without monitoring."""
    if not listen():
        return None
    with _LOCK:
        return dict(_TOTALS)


def since(before: dict[str, float] | None) -> dict[str, Any] | None:
    """What was traced, lowered, compiled and loaded since ``before`` (a :func:`snapshot`): the report's
    ``"compilation"`` object (module docstring); None when ``before`` is None."""
    now = snapshot()
    if before is None or now is None:
        return None
    out: dict[str, Any] = {}
    for k in _KEYS:
        d = now[k] - before.get(k, 0)
        out[k] = round(float(d), 3) if k.endswith("_s") else int(d)
    return out


def release_compiled() -> None:
    """Drop JAX's own references to programs compiled ahead of time (``jit(f).lower(...).compile()``).

    JAX keeps every lowering it makes, keyed weakly on the traced jaxpr, and the compiled executable keyed weakly on
    that lowering; the jaxpr itself stays in the trace cache.  So an executable compiled ahead of time stays in
    memory as long as its trace does, even after its holder (jaxcert's program table, which keeps a bounded number
    resident) let it go.  For a network (about 55 MB per loaded nequix-mp-1-pft program, and hundreds of MB of
    MLIR per lowering) that held most of a cold certification's memory.  Only the lowering and compilation caches
    are cleared: the traces stay, so nothing is traced again, and a later ``lower`` of the same program lowers
    again (jaxcert never does: it keeps what it compiled).  These caches are private to JAX; where one is missing
    (another JAX release) this does nothing.
    """
    from jax._src import pjit
    from jax._src.interpreters import pxla

    for fn in (getattr(pjit, "_pjit_lower", None), getattr(pxla, "_cached_lowering_to_hlo", None),
               getattr(pxla, "_cached_compilation", None)):
        clear = getattr(fn, "cache_clear", None)
        if clear is not None:
            clear()


@functools.lru_cache(maxsize=1)
def _malloc_trim() -> Any:
    name = ctypes.util.find_library("c")
    try:
        return getattr(ctypes.CDLL(name), "malloc_trim", None) if name else None
    except OSError:
        return None


def trim_heap() -> None:
    """Give the C heap's free pages back to the operating system (glibc ``malloc_trim``; elsewhere nothing).

    XLA's compiler and a program's temporary buffers allocate and free gigabytes through ``malloc``; glibc keeps
    freed pages mapped, so the process's resident memory (what a user, a scheduler or a CI sees) stays at the
    high-water mark of everything compiled so far.  Measured on a cold nequix-mp-1-pft certification of five
    probes: peak resident memory 4.3 GB without, 3.0 GB with this after every compilation, 2.8 GB with
    :func:`release_compiled` too (docs/performance.md, "Networks").
    """
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
