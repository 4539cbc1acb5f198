"""The shape of the offline mini-benchmark's code (docs/controls.md, section 14): sections as modules.

Fast, no model is evaluated: every section is a module with ``NAME`` and ``run(ctx) -> SectionResult``, in the
report's order; the package imports at module level only (the bridges, which import torch, are the one lazy
import) and mutates no module state at run time; results carry a :class:`~jaxcert.core.result.Status` and lay
the report out as the schema reads it; the context keeps finished models and sections on resume and reruns the
rest.
"""

from __future__ import annotations

import ast
import dataclasses
import pathlib

import numpy as np
import pytest

from jaxcert.controls import benchmark
from jaxcert.controls.benchmark import RUNNERS, SECTIONS, BenchmarkConfig, ModelLoad, ModelRun, SectionResult
from jaxcert.controls.benchmark.context import Context
from jaxcert.core.result import Status

PACKAGE = pathlib.Path(benchmark.__file__).parent
#: the only functions allowed an import (importlib): jaxcert_bridges (torch) and ase.build (SciPy, which every
#: jaxcert command would otherwise pay: the CLI imports this package for the controls subcommand's defaults)
LAZY = {"_import_bridges", "_ase_bulk"}


def test_every_section_is_a_module_with_name_and_run_in_report_order():
    assert tuple(RUNNERS) == SECTIONS
    for name, fn in RUNNERS.items():
        assert fn.__module__ == f"jaxcert.controls.benchmark.{name}" and fn.__name__ == "run"


@pytest.mark.parametrize("path", sorted(PACKAGE.glob("*.py")), ids=lambda p: p.name)
def test_no_imports_inside_functions_and_no_globals(path):
    tree = ast.parse(path.read_text())
    for fn in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
        for node in ast.walk(fn):
            assert not isinstance(node, (ast.Import, ast.ImportFrom)), f"{path.name}:{node.lineno} in {fn.name}"
            assert not isinstance(node, (ast.Global, ast.Nonlocal)), f"{path.name}:{node.lineno} in {fn.name}"
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "import_module":
                assert fn.name in LAZY, f"{path.name}:{node.lineno}: lazy import outside {LAZY}"


def test_results_are_frozen_and_lay_out_the_report():
    run = ModelRun(Status.OK, values={"n": np.int64(3), "x": np.array([1.0, np.nan])})
    assert run.to_dict() == {"status": "ok", "n": 3, "x": [1.0, None]}
    assert ModelRun.from_dict(run.to_dict()).to_dict() == run.to_dict()
    assert ModelRun(Status.ERROR, "no bridges").to_dict() == {"status": "error", "reason": "no bridges"}
    with pytest.raises(dataclasses.FrozenInstanceError):
        run.status = Status.ERROR  # type: ignore[misc]
    with pytest.raises(TypeError):
        run.values["n"] = 4  # type: ignore[index]
    sec = SectionResult("eos", Status.OK, {"protocol": "p"}, {"emt": run}).to_dict()
    assert list(sec) == ["compares", "status", "protocol", "models"] and sec["models"]["emt"]["status"] == "ok"
    assert "models" not in SectionResult("hull", Status.OK, {"passed": True}).to_dict()
    load = ModelLoad(Status.ERROR, "bridged", reason="install").to_dict()
    assert load == {"status": "error", "kind": "bridged", "reason": "install"}


def test_context_keeps_finished_parts_and_reruns_the_rest():
    record = {"sections": {
        "eos": {"compares": "c", "models": {"emt": {"status": "skipped", "reason": "no element"},
                                            "chgnet@float32": {"status": "error", "reason": "no bridges"},
                                            "eam": {"status": "running"}}},
        "rung0": {"compares": "c", "status": "ok"},
        "hull": {"compares": "c"},                 # cut short: no status yet
        "consensus": {"compares": "c", "status": "done"},  # not a Status: run again
    }}
    ctx = Context(BenchmarkConfig(models=("emt", "chgnet", "eam"), panel=("emt",)), record, None, lambda _m: None)
    assert ctx.kept("eos", "emt") == ModelRun(Status.SKIPPED, "no element")
    assert ctx.kept("eos", "chgnet") is None and ctx.kept("eos", "eam") is None
    assert ctx.finished("rung0") and not ctx.finished("hull") and not ctx.finished("consensus")
    ctx.begin("eos", {"protocol": "p"})
    eos = record["sections"]["eos"]
    assert "status" not in eos and eos["models"]["emt"]["reason"] == "no element"
    ctx.store("eos", "chgnet", ModelRun(Status.SKIPPED, "none supported"))
    assert record["sections"]["eos"]["models"]["chgnet@float32"] == {"status": "skipped", "reason": "none supported"}
    ctx.finish(SectionResult("hull", Status.OK, {"passed": True}), 1.5)
    assert record["sections"]["hull"]["status"] == "ok" and record["sections"]["hull"]["section_wall_s"] == 1.5
    assert record["headline"]["hull_invariance_passed"] is True


def test_the_headline_is_tables_with_four_digits_and_reasons_are_given_once():
    """The page's headline is tables (no JSON dump, no 17-digit floats), and a model's failure reason is printed
    once, in the Models table, not in every section."""
    from jaxcert.controls.benchmark import html as page_html

    result = {
        "models": {"emt": {"status": "ok"}, "chgnet": {"status": "error", "reason": "pip install jaxcert-bridges"}},
        "headline": {"eos_delta_meV_per_atom": {"emt": 41.38123456789012},
                     "elastic": {"emt": {"K_log_r": 0.944412345678}}, "consensus": {"panel_size": 3}},
        "sections": {},
    }
    page = page_html.render(result)
    assert "41.38<" in page and "0.9444<" in page and "41.38123" not in page and "<pre>" not in page
    assert page.count("pip install jaxcert-bridges") == 1
    sec = {"models": {"chgnet": {"status": "error", "reason": "pip install jaxcert-bridges"}}}
    assert "pip install" not in page_html._not_ok(sec) and "Models table" in page_html._not_ok(sec)
