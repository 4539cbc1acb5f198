"""The one status vocabulary and result base (jaxcert/core/result.py; docs/architecture.md, "Results")."""

import dataclasses
import json

import jax.numpy as jnp
import numpy as np
import pytest

from jaxcert.controls import ControlResult
from jaxcert.core.result import Result, Status, to_jsonable
from jaxcert.probes import base
from jaxcert.report import summary


def test_every_status_has_a_distinct_code_and_a_message_and_round_trips():
    codes = [s.code for s in Status]
    assert sorted(codes) == list(range(len(Status)))
    for s in Status:
        assert s.message and Status.of(s.code) is s and Status.of(s.value) is s and Status.of(np.int32(s.code)) is s
        assert Status.of(jnp.asarray(s.code, jnp.int32)) is s
    with pytest.raises(ValueError):
        Status.of("fine")


def test_the_probe_codes_and_report_strings_are_the_statuses():
    assert base.STATUS_NAMES[base.NONFINITE] == Status.NON_FINITE.value == "non-finite"
    assert summary.UNSUPPORTED == Status.UNSUPPORTED.value and summary.NOT_RUN == ("skipped", "unsupported")
    assert [s for s in Status if not s.ran] == [Status.SKIPPED, Status.UNSUPPORTED]


@dataclasses.dataclass(frozen=True)
class _Relaxed(Result):
    energy: float
    forces: np.ndarray
    status: Status


def test_a_result_is_frozen_and_its_dict_is_strict_json():
    r = _Relaxed(energy=float("nan"), forces=np.array([[0.0, np.inf, 1.0]]), status=Status.NOT_CONVERGED)
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.energy = 1.0  # type: ignore[misc]
    d = r.to_dict()
    assert d == {"energy": None, "forces": [[0.0, None, 1.0]], "status": "not converged"}
    json.dumps(d, allow_nan=False)
    assert issubclass(ControlResult, Result)


def test_to_jsonable_is_the_one_used_by_reports_and_controls():
    from jaxcert.controls import to_jsonable as controls_to_jsonable

    assert summary.to_jsonable is to_jsonable and controls_to_jsonable is to_jsonable
    x = {"a": jnp.array([1.0, jnp.nan]), 2: (np.float32(3.5), np.int64(4), np.bool_(True)), "c": np.array(2.0)}
    assert to_jsonable(x) == {"a": [1.0, None], "2": [3.5, 4, True], "c": 2.0}
