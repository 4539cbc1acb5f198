"""benchmarks/gpu.py: a model that cannot load, or a process that runs out of time, is a row with its reason."""

import importlib.util
import pathlib
import sys
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def gpu():
    """The script as a module (it puts benchmarks/ on sys.path for its _record import; taken off again)."""
    path = list(sys.path)
    spec = importlib.util.spec_from_file_location("bench_gpu", ROOT / "benchmarks" / "gpu.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    sys.path[:] = path
    return mod


def test_a_model_that_cannot_load_is_a_row_with_the_reason(gpu, tmp_path):
    (case,) = gpu.resolve_models("no-such-model")
    row = gpu.model_row(case, "Si", "parity", gpu.child_env("highest"), time.monotonic() + 120, 60.0, tmp_path)
    assert row["status"] == "failed" and row["failed_stage"] == "load"
    assert "unknown model 'no-such-model'" in row["reason"]
    assert "cold" not in row and "warm" not in row


def test_a_process_past_its_limit_is_killed_and_reported(gpu):
    t0 = time.monotonic()
    res = gpu.run_child([sys.executable, "-c", "import time; time.sleep(60)"], gpu.child_env("default"), 1.0)
    assert res["status"] == "timeout" and "killed after" in res["reason"]
    assert time.monotonic() - t0 < 30


def test_no_time_left_skips_the_model(gpu, tmp_path):
    (case,) = gpu.resolve_models("lj")
    row = gpu.model_row(case, "Si", "parity", gpu.child_env("highest"), time.monotonic() + 1.0, 60.0, tmp_path)
    assert row["status"] == "skipped" and "no time left" in row["reason"]


def test_the_budget_is_shared_by_weight(gpu):
    cases = gpu.resolve_models("lj,7net-0,nequix-mp-1,jax-sevennet:7net-l3i5@float32")
    assert [c.dtype for c in cases] == ["float64", "float32", "float32", "float32"]
    now, deadline = 0.0, 450.0
    ends = []
    for k, c in enumerate(cases):  # every model uses its whole share: the last one ends at the deadline
        now = gpu.model_deadline(now, deadline, c.weight, sum(x.weight for x in cases[k:]))
        ends.append(now)
    assert ends[0] == pytest.approx(450 / 7) and ends[-1] == pytest.approx(deadline)
    assert all(a < b for a, b in zip(ends[:-1], ends[1:], strict=True))
