"""The benchmark's result types: one model's load, one model's run in a section, one section.

Each is a frozen :class:`~jaxcert.controls.ControlResult` whose status is a :class:`~jaxcert.core.result.Status`.
Their ``to_dict`` lays the report out flat, as the schema ``jaxcert-controls-benchmark/1`` reads: ``"status"``
first, then the reason when there is one, then the values (the sections' many statistics are kept as named
JSON fields, not as dataclass fields, so the report file stays the one interface).
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Mapping
from typing import Any

from jaxcert.controls._result import ControlResult
from jaxcert.controls.benchmark.config import COMPARISONS, PER_MODEL_SECTIONS
from jaxcert.core.result import Status, to_jsonable

__all__ = ["ModelLoad", "ModelRun", "SectionResult", "FINISHED"]

#: A model or section with one of these statuses is kept when a run is resumed; any other is run again (an
#: error may have been a missing bridge since installed).
FINISHED = (Status.OK, Status.SKIPPED)


def _frozen(values: Mapping[str, Any]) -> Mapping[str, Any]:
    return types.MappingProxyType(dict(values))


@dataclasses.dataclass(frozen=True)
class ModelLoad(ControlResult):
    """How loading one model spec went: ``OK`` with its name, load time and ``Model.info``, or ``ERROR`` with the
    reason (a missing bridge says what to install)."""

    status: Status
    kind: str
    reason: str | None = None
    name: str | None = None
    load_s: float | None = None
    info: Mapping[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The fields that are set, in field order."""
        return {f.name: to_jsonable(dict(v) if isinstance(v, Mapping) else v)
                for f in dataclasses.fields(self) if (v := getattr(self, f.name)) is not None}


@dataclasses.dataclass(frozen=True)
class ModelRun(ControlResult):
    """One model's outcome in a section (or one panel member's in the consensus section).

    ``OK`` with ``values`` (the section's statistics for the model), ``SKIPPED`` when the model supports none of
    the section's structures, ``ERROR`` when it did not load; ``reason`` says why for the latter two.
    """

    status: Status
    reason: str | None = None
    values: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "values", _frozen(self.values))

    def to_dict(self) -> dict[str, Any]:
        """``{"status", ["reason",] **values}`` as strict JSON."""
        d: dict[str, Any] = {"status": self.status.value}
        if self.reason is not None:
            d["reason"] = self.reason
        d.update(to_jsonable(dict(self.values)))
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ModelRun:
        """The run a report file holds (the inverse of :meth:`to_dict`)."""
        return cls(Status.of(d["status"]), d.get("reason"),
                   {k: v for k, v in d.items() if k not in ("status", "reason")})


@dataclasses.dataclass(frozen=True)
class SectionResult(ControlResult):
    """One section's outcome: its status, its report fields (protocol, statistics) and, for the per-model
    sections (:data:`~jaxcert.controls.benchmark.config.PER_MODEL_SECTIONS`), every model's :class:`ModelRun`."""

    name: str
    status: Status
    fields: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    models: Mapping[str, ModelRun] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "fields", _frozen(self.fields))
        if self.models is not None:
            object.__setattr__(self, "models", _frozen(self.models))

    def to_dict(self) -> dict[str, Any]:
        """``{"compares", "status", **fields, ["models"]}`` as strict JSON."""
        d: dict[str, Any] = {"compares": COMPARISONS[self.name], "status": self.status.value}
        d.update(to_jsonable(dict(self.fields)))
        if self.name in PER_MODEL_SECTIONS:
            d["models"] = {k: r.to_dict() for k, r in (self.models or {}).items()}
        return d
