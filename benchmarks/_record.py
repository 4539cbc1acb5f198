"""What every benchmark JSON carries: the machine, the load average around the run, and whether the
machine was loaded (then the timings are inflated and ratios noisy); written as strict JSON."""

from __future__ import annotations

import json
import os
import pathlib
from typing import Any

from jaxcert.core.device import machine
from jaxcert.report import to_jsonable

__all__ = ["finish"]


def finish(result: dict[str, Any], load_start: tuple[float, ...], out: str, loaded_means: str) -> None:
    """Add ``loadavg``, ``machine``, ``machine_loaded`` (1-min load above 0.75 × cores at the start or the
    end) and ``load_note`` to ``result``, then write it to ``out``; ``loaded_means`` says what a loaded
    machine does to this benchmark's numbers."""
    result["loadavg_start"] = load_start
    result["loadavg"] = os.getloadavg()
    result["machine"] = machine()
    cores = os.cpu_count() or 1
    result["machine_loaded"] = bool(max(load_start[0], result["loadavg"][0]) > 0.75 * cores)
    result["load_note"] = (f"1-min load average {load_start[0]:.2f} at the start and {result['loadavg'][0]:.2f} at "
                           f"the end on {cores} cores: "
                           + (f"the machine was loaded by other jobs during the run, so {loaded_means}"
                              if result["machine_loaded"] else "the machine was not loaded"))
    pathlib.Path(out).parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w") as fh:
        json.dump(to_jsonable(result), fh, indent=2, allow_nan=False)
    print(f"wrote {out}")
