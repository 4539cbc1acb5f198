"""benchmarks/board_published.py: the side-by-side comparison with the published board (pairing, difference,
the 0.05 flag, a crashed probe counted as 0) and the finite-difference re-run with its save-and-resume
(issue 26; docs/board.md)."""

from __future__ import annotations

import json
import pathlib
import shutil
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import board_published as bp  # noqa: E402


def _report(scores: dict[str, float | None], dtype: str = "float64") -> dict:
    """A report as ``jaxcert board`` writes it, reduced to the fields the comparison reads."""
    return {"dtype": dtype, "complete": True, "wall_time_s": 1.0, "elements": ["Li"],
            "aggregate": {"overall": 0.5, "method": "geometric"},
            "probes": [{"name": k, "score": v, "defect": None if v is None else 1.0 - v, "gate": None,
                        "status": "ok" if v is not None else "crashed", "message": None} for k, v in scores.items()]}


def test_compare_pairs_flags_and_counts_a_crash_as_zero(tmp_path, monkeypatch):
    shutil.copy(ROOT / "benchmarks" / "results" / "board" / "published_pescert.json", tmp_path)
    pub = json.loads((tmp_path / "published_pescert.json").read_text())["models"]["lennard-jones"]["scores"]
    probes = list(pub)
    # one probe 0.06 below the published score (flagged), one 0.04 above (not), one crashed, the rest equal
    ours = dict(pub)
    ours[probes[0]] = pub[probes[0]] - 0.06
    ours[probes[1]] = pub[probes[1]] - 0.04
    ours[probes[2]] = None
    (tmp_path / "lj.json").write_text(json.dumps(_report(ours)))
    monkeypatch.setattr(bp, "BOARD", tmp_path)
    out = bp.compare()
    assert list(out["models"]) == ["lj"]  # the only paired report present
    m = out["models"]["lj"]
    assert m["slug"] == "lennard-jones" and m["ours_dtype"] == "float64"
    rows = m["probes"]
    assert rows[probes[0]]["flagged"] and rows[probes[0]]["diff"] == pytest.approx(-0.06)
    assert not rows[probes[1]]["flagged"] and rows[probes[1]]["diff"] == pytest.approx(-0.04)
    assert rows[probes[2]]["diff"] is None and not rows[probes[2]]["flagged"]
    assert not any(rows[p]["flagged"] for p in probes[3:])
    expect = (sum(pub.values()) - pub[probes[2]] - 0.10) / len(pub)  # the crash counts as 0
    assert m["ours_arithmetic"] == pytest.approx(expect)
    table = bp.markdown(out)
    assert "-0.060 **" in table and f"| {probes[2]} | crash |" in table


def test_fd_run_differs_from_exact_and_resumes_without_recomputing(monkeypatch):
    """LJ in float32 on one element: the reference's finite differences leave a cross_maxwell defect far above
    the exact one (truncation), each half is saved when done, and a second call with the first's result
    computes nothing."""
    saved = []
    res = bp.fd_run("lj", ["cross_maxwell"], ["Al"], None,
                    save=lambda r: saved.append(sorted(set(r) & {"fd", "exact"})))
    assert saved == [["fd"], ["exact", "fd"]]
    fd, ex = (res[k]["probes"]["cross_maxwell"]["defect"] for k in ("fd", "exact"))
    assert fd > 30 * ex, (fd, ex)

    import jaxcert

    def no_certify(*a, **k):
        raise AssertionError("a kept half was recomputed")

    monkeypatch.setattr(jaxcert, "certify", no_certify)
    again = bp.fd_run("lj", ["cross_maxwell"], ["Al"], res, save=lambda r: saved.append("again"))
    assert again["fd"] == res["fd"] and again["exact"] == res["exact"] and saved[-1] != "again"
    # a different element list is a different run: the earlier halves are not reused for it
    with pytest.raises(AssertionError, match="recomputed"):
        bp.fd_run("lj", ["cross_maxwell"], ["Si"], res)


def test_board_nacl_adds_the_rate_and_changes_nothing_else(tmp_path):
    """benchmarks/board_nacl.py on a one-model board (LJ, one probe): the report gains ``throughput.nacl``
    marked as measured after the probes (time, commit, hardware, its process's peak memory) and the probes are
    untouched; a second call keeps it (measures nothing), ``force`` measures again; a model that cannot be
    loaded is recorded as an error, never a crash."""
    import board_nacl

    from jaxcert.cli import main
    from tests._stable import stable

    toml = tmp_path / "models.toml"
    toml.write_text('[[models]]\nspec = "lj"\n')
    out = tmp_path / "b"
    assert main(["board", "--models", str(toml), "--elements", "Cu", "--probes", "parity", "--out", str(out),
                 "--no-throughput", "--quiet"]) == 0
    before = json.loads((out / "lj.json").read_text())
    assert not (before.get("throughput") or {}).get("nacl")
    assert board_nacl.measure(str(out), str(toml), None, False) == [{"name": "lj", "status": "measured"}]
    after = json.loads((out / "lj.json").read_text())
    n = after["throughput"]["nacl"]
    assert n["atom_steps_per_s"] > 0 and n["n_atoms"] == 100 and n["measured_separately"]
    assert n["hardware"]["device"] and n["peak_rss_bytes"] > 0 and n["measured_utc"][:2] == "20"
    assert stable(after) == stable(before)  # the probes, defects and card as they were
    assert board_nacl.measure(str(out), str(toml), None, False) == [{"name": "lj", "status": "kept"}]
    assert json.loads((out / "lj.json").read_text()) == after
    toml.write_text('[[models]]\nspec = "lj"\n\n[[models]]\nspec = "nequix:/no/such.nqx"\nname = "gone"\n')
    (out / "gone.json").write_text((out / "lj.json").read_text().replace('"nacl"', '"old_nacl"'))
    got = board_nacl.measure(str(out), str(toml), {"gone"}, True)
    assert got == [{"name": "gone", "status": "error"}]
    assert "exited" in json.loads((out / "gone.json").read_text())["throughput"]["nacl"]["error"]
