"""The run's context: what every section reads (configuration, models, earlier sections) and the report it writes.

A :class:`Context` is made once per :func:`~jaxcert.controls.run_benchmark` call and handed to every section's
``run``; it holds the report as it grows (strict-JSON values only) and rewrites the report file after every
model and every section, so a run cut short keeps what it finished and ``resume`` can skip it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from jaxcert.controls.benchmark.config import COMPARISONS, PER_MODEL_SECTIONS, BenchmarkConfig, model_key
from jaxcert.controls.benchmark.headline import headline
from jaxcert.controls.benchmark.models import ModelLoader
from jaxcert.controls.benchmark.results import FINISHED, ModelRun, SectionResult
from jaxcert.core import files
from jaxcert.core.result import Status, to_jsonable

__all__ = ["Context", "atomic_write", "status_of"]


def status_of(x: Any) -> Status | None:
    """The Status a report file records, ``None`` for a missing or unknown one (that part runs again)."""
    try:
        return Status.of(x) if x is not None else None
    except (ValueError, KeyError, TypeError):
        return None


class Context:
    """Configuration, model loader, log and the report being written (``record``, the report's JSON).

    A section in progress has no ``"status"`` in the report until it finishes (:meth:`finish`).
    """

    def __init__(self, cfg: BenchmarkConfig, record: dict[str, Any], out_json: str | None,
                 log: Callable[[str], None]):
        self.cfg, self.record, self.out_json, self.log = cfg, record, out_json, log
        self.models = ModelLoader(cfg.bridge_precision, log)

    def key(self, spec: str) -> str:
        """The report's name of a model spec (bridge precision made explicit)."""
        return model_key(spec, self.cfg.bridge_precision)

    def earlier(self, name: str) -> dict[str, Any]:
        """Section ``name`` of the report as it stands (from this run or the resumed file); ``{}`` if absent."""
        return self.record["sections"].get(name, {})

    def finished(self, name: str) -> bool:
        """Whether the report already holds section ``name`` finished (kept on resume)."""
        return status_of(self.earlier(name).get("status")) in FINISHED

    def begin(self, name: str, fields: dict[str, Any]) -> None:
        """Write section ``name``'s protocol fields (no status yet), keeping the models a resumed file holds."""
        sec = self.record["sections"].setdefault(name, {})
        models = sec.get("models", {})
        sec.pop("status", None)
        sec.update({"compares": COMPARISONS[name]})
        sec.update(to_jsonable(fields))
        if name in PER_MODEL_SECTIONS:
            sec["models"] = models
        self.write()

    def kept(self, section: str, spec: str) -> ModelRun | None:
        """The finished run of ``spec`` that the report already holds in ``section``, else ``None``."""
        m = self.earlier(section).get("models", {}).get(self.key(spec))
        if m and status_of(m.get("status")) in FINISHED:
            return ModelRun.from_dict(m)
        return None

    def store(self, section: str, spec: str, run: ModelRun) -> None:
        """Record one model's run in ``section`` and rewrite the report."""
        self.record["sections"][section]["models"][self.key(spec)] = run.to_dict()
        self.write()

    def per_model(self, section: str, fields: dict[str, Any], run: Callable[[str], ModelRun]) -> SectionResult:
        """Section ``section`` over every model of the config: a finished run the report already holds is kept
        (``--resume``), any other is ``run(spec)`` and recorded as soon as it ends; the one loop of the
        per-model sections (eos, elastic, prototypes)."""
        runs: dict[str, ModelRun] = {}
        for spec in self.cfg.models:
            kept = self.kept(section, spec)
            if kept is None:
                kept = run(spec)
                self.store(section, spec, kept)
            runs[self.key(spec)] = kept
        return SectionResult(section, Status.OK, fields, runs)

    def finish(self, result: SectionResult, wall_s: float) -> None:
        """Record a finished section (its status, fields, models and wall time) and rewrite the report."""
        self.record["sections"][result.name] = {**result.to_dict(), "section_wall_s": wall_s}
        self.write()

    def write(self) -> None:
        """Refresh the model records and the headline; rewrite the report file atomically (if any)."""
        self.record["models"] = {k: v.to_dict() for k, v in self.models.info.items()}
        self.record["headline"] = headline(self.record)
        if self.out_json:
            atomic_write(self.out_json, json.dumps(to_jsonable(self.record), indent=1, allow_nan=False))


def atomic_write(path: str, text: str) -> None:
    """Write ``text`` to ``path`` through an exclusive, synced temporary file and a rename (never a half-written
    file, never through a link: :func:`jaxcert.core.files.atomic_write`)."""
    files.atomic_write(path, text)
