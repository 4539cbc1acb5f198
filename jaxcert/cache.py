"""Persistent XLA compilation cache: compile each probe program once per machine, not once per run.

A full suite is dominated by XLA compilation on CPU (each probe is one program
over all elements; running it takes milliseconds to seconds, compiling it
seconds).  JAX can store compiled executables on disk, keyed by the program
and the compile options, so a second ``jaxcert certify`` in a new process loads
them instead of compiling.  The CLI enables this by default in
``$JAXCERT_CACHE_DIR`` (default ``~/.cache/jaxcert/xla``); ``JAXCERT_CACHE_DIR=off``
disables it.  Programs with host callbacks (bridged torch/ASE models) are not
cached by JAX and compile as before.
"""

from __future__ import annotations

import os

__all__ = ["enable_compilation_cache", "default_cache_dir"]


def default_cache_dir() -> str | None:
    """``$JAXCERT_CACHE_DIR`` or ``~/.cache/jaxcert/xla``; None when the variable is "off", "0" or empty."""
    path = os.environ.get("JAXCERT_CACHE_DIR", os.path.join(os.path.expanduser("~"), ".cache", "jaxcert", "xla"))
    return None if path.strip().lower() in ("", "0", "off", "none", "false") else path


def enable_compilation_cache(path: str | None = None) -> str | None:
    """Store and reuse compiled programs under ``path`` (default :func:`default_cache_dir`); returns the path used.

    Every program is cached (no minimum compile time or size): the suite's
    programs each take seconds to compile on CPU.
    """
    import jax

    path = path if path is not None else default_cache_dir()
    if path is None:
        return None
    os.makedirs(path, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    return path
