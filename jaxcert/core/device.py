"""Which platform jaxcert's programs are traced for: the switch for its CPU-only workarounds.

A few code paths exist only because of XLA:CPU: :mod:`jaxcert.core.linalg` calls LAPACK one matrix at a
time (jaxlib 0.10's batched CPU kernels can deadlock XLA's intra-op pool), and
:mod:`jaxcert.core.neighbors` gathers single columns with ``mode="clip"`` and writes (n, 3) × (3, 3)
products out elementwise (XLA's CPU code is several times slower on the natural forms).  On any
other platform the plain forms are used: batched ``jnp.linalg`` with JAX's own derivative rules,
``x[idx]`` row gathers and ``@`` (docs/architecture.md §4.3 "On a GPU").

The choice is made in Python while tracing, from :func:`platform`: the platform of
``jax.config.jax_default_device`` when one is set (``with jax.default_device(d):``), else
``jax.default_backend()`` (the first platform JAX found: ``gpu`` where jax[cuda12] sees a GPU).
Both are part of JAX's trace context, so a function jitted under one default and called under the
other is traced again.  The limit: the choice follows the *default* device, not where a program
finally runs.  A program traced for one platform and run on another (``jax.jit(f).trace(...)
.lower(lowering_platforms=("cuda",))`` from a CPU default, or a function called on arrays committed
to a non-default device) keeps the branch of the default platform.  Both branches compute the same
function (tests/test_device_paths.py compares them, derivatives included), so such a program is
still correct; it is only slower on a GPU (looped LAPACK), or on a CPU exposed to the batched-LAPACK
deadlock of jaxlib 0.10.  To trace for another device, make it the default device while tracing.
``jax.lax.platform_dependent`` would choose at lowering time instead, but it stages every branch
into a ``cond``, so the CPU programs would carry the other platform's branch too; jaxcert's CPU
programs hold the CPU branch only.
"""

from __future__ import annotations

import os
import platform as _platform
from typing import Any

import jax

__all__ = ["platform", "on_cpu", "machine", "device_name", "available_bytes", "hardware", "reset_peak_memory",
           "peak_memory"]


def platform() -> str:
    """``"cpu"``, ``"gpu"``, ``"tpu"``, …: the platform of the default device at trace time."""
    dev = jax.config.jax_default_device
    if dev is None:
        return jax.default_backend()
    return dev if isinstance(dev, str) else dev.platform


def on_cpu() -> bool:
    """True when programs traced now are for XLA:CPU (the CPU-only workarounds apply)."""
    return platform() == "cpu"


def available_bytes(dev: Any = None) -> int | None:
    """Memory a new program can still allocate on ``dev`` (default: the first device), in bytes.

    An accelerator reports it (``memory_stats()``: ``bytes_limit`` − ``bytes_in_use``); for the CPU it is the
    kernel's estimate of memory available without swapping (``MemAvailable`` of ``/proc/meminfo``).
    ``None`` where neither is known: then nothing is checked (:func:`jaxcert.probes.suite` chunks by the
    model's ``max_batch`` only).
    """
    dev = dev if dev is not None else jax.devices()[0]
    try:
        stats = dev.memory_stats()
    except Exception:  # noqa: BLE001 - a backend without memory statistics
        stats = None
    if stats and "bytes_limit" in stats:
        return int(stats["bytes_limit"]) - int(stats.get("bytes_in_use", 0))
    if dev.platform != "cpu":
        return None
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def machine() -> dict[str, Any]:
    """Machine description for reports and benchmark JSON."""
    info = {
        "platform": _platform.platform(),
        "processor": _platform.processor() or _platform.machine(),
        "cpu_count": os.cpu_count(),
        "jax_backend": jax.default_backend(),
        "jax_devices": [str(d) for d in jax.devices()],
    }
    try:
        info["load_average_1_5_15min"] = list(os.getloadavg())
    except OSError:
        pass
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    info["cpu_model"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return info


def device_name() -> str:
    """The device the models run on, in words: ``"cpu (AMD EPYC 9654, 2 cores)"``, ``"gpu (NVIDIA H200)"``."""
    d = jax.devices()[0]
    if d.platform == "cpu":
        m = machine()
        return f"cpu ({m.get('cpu_model') or m.get('processor') or 'unknown CPU'}, {m.get('cpu_count')} cores)"
    return f"{d.platform} ({getattr(d, 'device_kind', str(d))})"


def _meminfo_total() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def hardware() -> dict[str, Any]:
    """What a rate was measured on (docs/board.md, "Throughput"): the device in words (:func:`device_name`), the
    platform, the CPU model and core count, the host memory, and for an accelerator its kind and memory limit
    (``None`` where not reported)."""
    d = jax.devices()[0]
    m = machine()
    accel_bytes = None
    if d.platform != "cpu":
        try:
            accel_bytes = int((d.memory_stats() or {}).get("bytes_limit")) or None
        except Exception:  # noqa: BLE001 - a backend without memory statistics
            accel_bytes = None
    return {"device": device_name(), "platform": d.platform, "cpu": m.get("cpu_model") or m.get("processor"),
            "cpu_cores": m.get("cpu_count"), "host_memory_bytes": _meminfo_total(),
            "accelerator": None if d.platform == "cpu" else str(getattr(d, "device_kind", d)),
            "accelerator_memory_bytes": accel_bytes}


def reset_peak_memory() -> bool:
    """Start the host peak-memory count afresh: the kernel's high-water mark of this process's resident memory
    (``VmHWM``) is reset by writing ``5`` to ``/proc/self/clear_refs`` (Linux >= 4.0).  Returns whether it was
    reset; where it was not, :func:`peak_memory` reports the peak since the process started."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def peak_memory(since_reset: bool = False) -> dict[str, Any]:
    """Peak memory of this process: ``host_rss_bytes``, the high-water mark of its resident memory (``VmHWM``,
    else ``ru_maxrss``), with ``host_scope`` saying since when (``since_reset``: since :func:`reset_peak_memory`
    succeeded, else since the process started); ``device_bytes``, an accelerator's ``peak_bytes_in_use`` since
    the process started (``None`` on a CPU or where not reported)."""
    host = None
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    host = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError, IndexError):
        host = None
    if host is None:
        try:
            import resource

            host = int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024  # kB on Linux
            since_reset = False
        except (ImportError, OSError, ValueError):
            host = None
    d = jax.devices()[0]
    dev = None
    if d.platform != "cpu":
        try:
            stats = d.memory_stats() or {}
            dev = int(stats["peak_bytes_in_use"]) if "peak_bytes_in_use" in stats else None
        except Exception:  # noqa: BLE001 - a backend without memory statistics
            dev = None
    return {"host_rss_bytes": host,
            "host_scope": "this model's run (certification and throughput)" if since_reset else
            "the process since it started",
            "device_bytes": dev, "device_scope": None if dev is None else "the process since it started"}
