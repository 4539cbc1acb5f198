r"""Batched model evaluation under a memory budget: ``vmap`` that becomes a chunked loop when it must.

A probe evaluates the model on many geometries at once: the suite vmaps over elements, a probe vmaps over
its scan grid (``smoothness``: 81 points), and ``jacfwd`` pushes 3N tangents through the force at once.
These batches multiply.  For a small analytic potential that is what makes the suite fast; for a large
network it is a memory wall: the native SevenNet-0 (5 interaction layers, about 30 kB of edge features per
edge per layer in float32) holds the residuals of every edge of every geometry of the batch for the
backward pass, so 10 elements × 81 points of 13-atom clusters (137 k edges) need more than 24 GB.

:attr:`jaxcert.Model.max_batch` sets how many geometries the model may see at once.  Every batched
evaluation in jaxcert goes through :func:`vmap` (and :func:`jacfwd`), which keeps track, at trace time, of
the batch already opened by the enclosing calls (the product of their sizes).  While the product stays
within the budget it is ``jax.vmap``; beyond it the batch is evaluated by ``jax.lax.map`` in chunks of
``max(1, budget // enclosing)`` geometries, one chunk after another (the last chunk padded with copies of
the last item, so the loop compiles one body), so at most about ``budget`` geometries are live at once.
Results are those of ``jax.vmap`` (a chunked loop computes the same function; on the CPU they agree to the
last bit in the tests, ``tests/test_batching.py``), derivatives
included, and ``max_batch=None`` (the default, every built-in potential) is plain ``jax.vmap``: the
programs are unchanged.

The budget counts geometries, not bytes: a force evaluation (reverse mode) and a jvp of it count one each.
Only batches opened through this module are counted; a ``jax.vmap`` of your own around a probe multiplies
the live batch by its size, so divide the budget by it.
``docs/architecture.md`` "Batching and memory" says how to choose it; the CLI sets it with
``--max-batch``.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import jax
import jax.numpy as jnp

from jaxcert.core import device

T = TypeVar("T")

__all__ = ["vmap", "jacfwd", "enclosing", "ProgramTooLarge", "MEMORY_SHARE", "needed_bytes", "check_fits",
           "out_of_memory", "compiled", "in_chunks"]

_state = threading.local()


def enclosing() -> int:
    """The product of the batch sizes opened by the enclosing :func:`vmap` calls (1 outside any)."""
    return getattr(_state, "outer", 1)


@contextlib.contextmanager
def _opened(size: int) -> Iterator[None]:
    before = enclosing()
    _state.outer = before * max(int(size), 1)
    try:
        yield
    finally:
        _state.outer = before


def _leading(args: tuple) -> int:
    sizes = {x.shape[0] for x in jax.tree_util.tree_leaves(args) if hasattr(x, "shape") and x.ndim > 0}
    if len(sizes) != 1:
        raise ValueError(f"batching.vmap: mapped arguments need one leading size, got {sorted(sizes)}")
    return sizes.pop()


def vmap(f: Callable[..., Any], max_batch: int | None = None, in_axes: int | None | tuple = 0
         ) -> Callable[..., Any]:
    """``jax.vmap(f, in_axes)``, chunked to respect ``max_batch``.

    Args:
      f: the per-item function.
      max_batch: how many geometries may be evaluated at once, counting the enclosing batches
        (:attr:`jaxcert.Model.max_batch`); ``None`` is plain ``jax.vmap``.
      in_axes: 0 (every argument mapped over its leading axis), or a tuple with 0 or ``None`` per
        argument (``None``: the argument is shared by every item).

    Returns:
      A function of the stacked arguments, returning the stacked results.
    """
    if max_batch is None:
        return jax.vmap(f, in_axes=in_axes)
    if int(max_batch) < 1:
        raise ValueError(f"max_batch must be a positive integer or None, got {max_batch!r}")

    def mapped(*args: Any) -> Any:
        axes = tuple(in_axes) if isinstance(in_axes, (tuple, list)) else (in_axes,) * len(args)
        if len(axes) != len(args) or any(a not in (0, None) for a in axes):
            raise ValueError(f"batching.vmap: in_axes must be 0 or None per argument, got {in_axes!r}")
        which = [i for i, a in enumerate(axes) if a == 0]
        n = _leading(tuple(args[i] for i in which))
        room = max(1, int(max_batch) // enclosing())
        if n <= room:
            with _opened(n):
                return jax.vmap(f, in_axes=in_axes)(*args)

        def item(xs: tuple) -> Any:
            full = list(args)
            for i, x in zip(which, xs, strict=True):
                full[i] = x
            return f(*full)

        # padded to a whole number of chunks (copies of the last item, results cut off): lax.map then has one body;
        # a remainder would compile the item function a second time (measured: twice the compile of a network's
        # chunked Hessian)
        pad = -n % room
        xs = tuple(args[i] for i in which)
        if pad:
            xs = jax.tree_util.tree_map(lambda a: jnp.concatenate([a, jnp.repeat(a[-1:], pad, axis=0)]), xs)
        with _opened(room):
            out = jax.lax.map(item, xs, batch_size=room)
        return jax.tree_util.tree_map(lambda o: o[:n], out) if pad else out

    return mapped


def jacfwd(f: Callable[[jax.Array], jax.Array], max_batch: int | None = None) -> Callable[[jax.Array], jax.Array]:
    """``jax.jacfwd(f)`` for an array argument: one jvp per input component, batched by :func:`vmap`.

    The Jacobian has shape ``f(x).shape + x.shape``, as ``jax.jacfwd`` gives it.
    """
    if max_batch is None:
        return jax.jacfwd(f)

    def jac(x: jax.Array) -> jax.Array:
        basis = jnp.eye(x.size, dtype=x.dtype).reshape(x.size, *x.shape)
        cols = vmap(lambda v: jax.jvp(f, (x,), (v,))[1], max_batch)(basis)  # (x.size, *out)
        out_ndim = cols.ndim - 1
        return jnp.moveaxis(cols, 0, -1).reshape(*cols.shape[1:], *x.shape) if out_ndim else cols.reshape(x.shape)

    return jac


# ------------------------------------------------------------------ memory of one call (docs/architecture.md "Memory")
#: the share of the available memory one call may plan to use (the rest is left for the host side)
MEMORY_SHARE = 0.8


class ProgramTooLarge(MemoryError):
    """A compiled program needs more memory than the device has available (:func:`check_fits`)."""


def needed_bytes(exe: Any) -> int | None:
    """Bytes the compiled program ``exe`` holds while it runs: arguments, outputs and temporaries, less the
    outputs that alias arguments (XLA's buffer assignment, ``exe.memory_analysis()``); ``None`` where the
    executable has no memory statistics."""
    try:
        m = exe.memory_analysis()
        return int(m.argument_size_in_bytes + m.output_size_in_bytes + m.temp_size_in_bytes - m.alias_size_in_bytes)
    except Exception:  # noqa: BLE001 - an executable without memory statistics
        return None


def check_fits(exe: Any) -> None:
    """Refuse to run the compiled program ``exe`` when its buffers (arguments, outputs and temporaries, from
    XLA's buffer assignment: ``exe.memory_analysis()``) exceed :data:`MEMORY_SHARE` of the memory available
    now (:func:`jaxcert.core.device.available_bytes`).

    The caller then evaluates fewer geometries per call (the suite and the detective's committee halve them),
    so a large model on many geometries runs in smaller chunks instead of failing an allocation or, where the
    kernel over-commits memory, being killed by it.  Nothing is checked where either number is unknown.

    Raises:
      ProgramTooLarge: with both numbers.
    """
    need = needed_bytes(exe)
    free = device.available_bytes() if need is not None else None
    if free is not None and need > MEMORY_SHARE * free:
        raise ProgramTooLarge(f"a call needs {need / 1e9:.2f} GB of memory and {free / 1e9:.2f} GB are available "
                              f"(at most {MEMORY_SHARE:.0%} of it is used); evaluate fewer geometries at once "
                              "or use a device with more memory")


def out_of_memory(err: BaseException) -> bool:
    """A call that did not fit: refused by :func:`check_fits`, or an allocation XLA could not make."""
    return isinstance(err, ProgramTooLarge) or "RESOURCE_EXHAUSTED" in str(err)


def in_chunks(n: int, width: int, call: Callable[[int, int, int], T]) -> tuple[list[T], int]:
    """``call(lo, hi, width)`` on consecutive chunks ``[lo, hi)`` of ``range(n)`` with ``hi - lo <= width``:
    the one loop that evaluates many items a chunk at a time in the memory available.

    A chunk whose call did not fit (:func:`out_of_memory`) is tried again at half the width, down to one item;
    the chunks already done are kept, and the later chunks use the smaller width.  ``call`` receives the
    width so that it can pad its chunk to it (one compiled program per width).  Any other error is raised.

    Returns:
      (the results of the calls in order, the width the last call used).
    """
    if width < 1:
        raise ValueError(f"width must be at least 1, got {width}")
    out: list[T] = []
    lo = 0
    while lo < n:
        hi = min(n, lo + width)
        try:
            out.append(call(lo, hi, width))
        except Exception as err:
            if width == 1 or not out_of_memory(err):
                raise
            width = max(1, width // 2)
            continue
        lo = hi
    return out, width


def compiled(cache: dict[Any, Any], fn: Any, *args: Any, **static: Any) -> Any:
    """The compiled program of the jitted ``fn`` for the shapes and dtypes of ``args`` (and the values of its
    static arguments ``static``), from ``cache`` or compiled once into it, after :func:`check_fits`.
    Call it with ``args`` only.  A leaf may be a Python scalar (a model's ``params={"eps": 0.1}``): it is keyed by
    its type, as ``jax.jit`` traces it (weakly typed)."""
    leaves, treedef = jax.tree_util.tree_flatten(args)
    key = (fn, treedef, tuple((tuple(jnp.shape(x)), str(getattr(x, "dtype", type(x).__name__))) for x in leaves),
           tuple(sorted(static.items())))
    exe = cache.get(key)
    if exe is None:
        exe = cache[key] = fn.lower(*args, **static).compile()
    check_fits(exe)
    return exe
