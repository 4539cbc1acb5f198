"""benchmarks/networks.py: its options, the reference-cost arithmetic on a made-up timing table, and the
comparison of two engine rows; nothing is run or timed here."""

import ast
import importlib.util
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def nw():
    """The script as a module (its top level imports the standard library only)."""
    spec = importlib.util.spec_from_file_location("bench_networks", ROOT / "benchmarks" / "networks.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    yield mod
    sys.modules.pop(spec.name, None)


def test_options(nw):
    q = nw.parse_args(["--quick"])
    assert (q.part, q.calls, q.cases) == ("percall", 2, "Si8,Si64")
    full = nw.parse_args([])
    assert (full.part, full.calls, full.substrate_calls) == ("all", 5, 20)
    assert full.cases.split(",") == list(nw.CASES)
    assert pathlib.Path(full.out) == ROOT / "benchmarks" / "results" / "networks.json"
    assert nw.parse_args(["--part", "certify", "--calls", "7"]).calls == 7
    with pytest.raises(SystemExit):
        nw.parse_args(["--cases", "Si9"])
    with pytest.raises(SystemExit):
        nw.parse_args(["--part", "nothing"])


def test_reference_calls_are_those_of_the_certify_benchmark(nw):
    tree = ast.parse((ROOT / "benchmarks" / "certify.py").read_text())
    (node,) = [n for n in tree.body if isinstance(n, ast.AnnAssign | ast.Assign)
               and "REFERENCE_CALLS" in ast.unparse(n.targets[0] if isinstance(n, ast.Assign) else n.target)]
    theirs = eval(compile(ast.Expression(node.value), "certify.py", "eval"), {"__builtins__": {}})
    assert nw.REFERENCE_CALLS == theirs


def test_reference_cost_on_a_made_up_table(nw):
    calls = {"a": 10, "b": 4, "c": 2, "d": 0}
    recipes = {"a": ("cluster", False), "b": ("bulk", True), "c": ("cluster", False), "d": ("trimer", False)}
    timings = {"cluster": {"first_s": 3.0, "median_s": 0.5}, "bulk+stress": {"first_s": 1.25, "median_s": 0.25},
               "trimer": {"first_s": 9.0, "median_s": 1.0}}
    est = nw.reference_cost(calls, recipes, timings, startup_s=2.0)
    assert est["steady_s"] == pytest.approx(12 * 0.5 + 4 * 0.25)
    assert est["warmup_s"] == {"bulk+stress": pytest.approx(1.0), "cluster": pytest.approx(2.5)}  # trimer unused
    assert est["estimate_s"] == pytest.approx(2.0 + 3.5 + 7.0)
    assert est["per_probe"]["b"] == {"calls": 4, "substrate": "bulk+stress", "per_call_s": 0.25, "cost_s": 1.0}
    assert est["calls_total"] == 16


def test_a_pair_of_rows_is_compared(nw):
    def row(E, t, peak):
        return {"atoms": 2, "process": {"peak_rss_bytes": peak},
                "timing": {"energies_eV": E, "forces_first": [[0.0, 0.0, 1.0]], "stress_first": [0.0] * 6,
                           "first_s": 10 * t, "median_s": t}}

    c = nw.compare_pair(row([-10.0, -10.00001], 1.2, 2e9), row([-10.0, -10.0], 1.0, 1e9))
    assert c["max_abs_dE_per_atom_eV"] == pytest.approx(5e-6, rel=1e-3) and c["energy_ok"]
    assert c["median_ratio_jaxcert_over_calculator"] == pytest.approx(1.2) and c["speed_ok"]
    assert c["peak_ratio_jaxcert_over_calculator"] == pytest.approx(2.0)
    assert not nw.compare_pair(row([-10.0], 2.0, 1e9), row([-10.1], 1.0, 1e9))["energy_ok"]
    assert nw.compare_pair({"failed": True}, row([-10.0], 1.0, 1e9))["status"] == "failed"
