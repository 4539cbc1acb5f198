"""The benchmark's driver: :func:`run_benchmark` runs the sections in order and assembles the report.

Every section is a module with the same shape (``NAME`` and ``run(ctx) -> SectionResult``); the driver owns
what is common to all of them: the report's frame (schema, configuration, machine, versions, load), resuming
from a report file, the per-section wall time, and rewriting the JSON and HTML after every section.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import jax

from jaxcert.controls.benchmark import consensus, elastic, eos, hull, prototypes, rung0
from jaxcert.controls.benchmark.config import COMPARISONS, SCHEMA, SECTIONS, BenchmarkConfig
from jaxcert.controls.benchmark.context import Context, atomic_write, status_of
from jaxcert.controls.benchmark.html import render
from jaxcert.controls.benchmark.results import SectionResult
from jaxcert.core.device import machine
from jaxcert.core.inputs import InputError
from jaxcert.core.result import to_jsonable
from jaxcert.report import package_versions

__all__ = ["run_benchmark", "benchmark_html", "RUNNERS"]

#: Section name -> its ``run(ctx) -> SectionResult``, in :data:`SECTIONS` order.
RUNNERS: dict[str, Callable[[Context], SectionResult]] = {
    m.NAME: m.run for m in (eos, elastic, prototypes, rung0, consensus, hull)}


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def run_benchmark(config: BenchmarkConfig | None = None, *, out_json: str | None = None, out_html: str | None = None,
                  resume: bool = False, log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run the offline mini-benchmark (docs/controls.md, "14. The offline mini-benchmark").

    Float64 throughout (jax x64 is enabled).  With ``out_json`` the report is rewritten atomically after every
    section and every model, with ``"complete": false`` until the end, so a run cut short loses nothing;
    ``resume=True`` keeps every finished section (and, within sections 1–3, every finished model) of that file
    when its configuration (all but ``sections``) matches, and runs the rest.

    Args:
      config: what to run (default :class:`BenchmarkConfig`: every section, the default models and panel).
      out_json: report path (strict JSON, schema :data:`SCHEMA`).
      out_html: self-contained HTML page (inline SVG figures), written at the end and after every section.
      resume: continue the run in ``out_json``.
      log: progress lines (default: stderr).

    Returns:
      The report dict (JSON types only after :func:`jaxcert.controls.to_jsonable`).

    Raises:
      ValueError: ``resume`` without ``out_json``, or a file from a different configuration.
    """
    jax.config.update("jax_enable_x64", True)
    cfg = BenchmarkConfig() if config is None else config
    log = _stderr if log is None else log
    for flag, path in (("out_json", out_json), ("out_html", out_html)):
        folder = os.path.dirname(os.path.abspath(path)) if path else None
        if folder and not os.path.isdir(folder):
            raise InputError(f"{flag}: no such directory {folder!r} for {path!r}")
    result: dict[str, Any] = {"schema": SCHEMA, "complete": False, "config": dataclasses.asdict(cfg),
                              "comparisons": COMPARISONS, "sections": {}}
    if resume:
        result["sections"] = _resumed_sections(cfg, out_json, log)
    load_start = os.getloadavg()
    t_start = time.perf_counter()
    result.update({"loadavg_start": load_start, "versions": package_versions(), "machine": machine()})
    ctx = Context(cfg, result, out_json, log)
    for name in SECTIONS:
        if name not in cfg.sections:
            continue
        if ctx.finished(name):
            log(f"section {name}: kept from {out_json}")
            continue
        log(f"section {name}: {COMPARISONS[name].split(':')[0]}")
        t0 = time.perf_counter()
        section = RUNNERS[name](ctx)
        ctx.finish(section, time.perf_counter() - t0)
        if out_html:
            atomic_write(out_html, benchmark_html(result))
    result["complete"] = True
    result["wall_s"] = time.perf_counter() - t_start  # this invocation (a resumed run: the rest only)
    result["loadavg"] = os.getloadavg()
    ctx.write()
    if out_html:
        atomic_write(out_html, benchmark_html(result))
    return to_jsonable(result)


def _resumed_sections(cfg: BenchmarkConfig, out_json: str | None, log: Callable[[str], None]) -> dict[str, Any]:
    """The sections of the report file a resumed run continues (``{}`` when the file does not exist yet)."""
    if not out_json:
        raise InputError("resume: needs out_json (the report file is the checkpoint)")
    if not os.path.exists(out_json):
        return {}
    try:
        with open(out_json, encoding="utf-8") as fh:
            prev = json.load(fh)
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as err:
        raise InputError(f"resume: cannot read {out_json!r} as JSON ({type(err).__name__}); remove it or "
                         "drop --resume") from None
    if not isinstance(prev, dict) or prev.get("schema") != SCHEMA:
        raise InputError(f"resume: {out_json!r} is not a {SCHEMA} report")
    if not isinstance(prev.get("config", {}), dict) or not isinstance(prev.get("sections", {}), dict):
        raise InputError(f"resume: {out_json!r}: 'config' and 'sections' must be objects; remove the file "
                         "or drop --resume")
    prev_key = dict(prev.get("config", {}))
    prev_key.pop("sections", None)
    if prev_key != cfg.key():
        diff = sorted(k for k in set(prev_key) | set(cfg.key()) if prev_key.get(k) != cfg.key().get(k))
        raise InputError(f"resume: {out_json!r} was written with a different configuration ({', '.join(diff)})")
    sections = prev.get("sections", {})
    log(f"resuming {out_json}: " + ", ".join(f"{k} {status_of(v.get('status')) or 'unfinished'}"
                                             for k, v in sections.items()))
    return sections


def benchmark_html(result: dict[str, Any]) -> str:
    """The report as one self-contained HTML page with inline SVG figures (:mod:`jaxcert.controls.benchmark.html`)."""
    return render(to_jsonable(result))
