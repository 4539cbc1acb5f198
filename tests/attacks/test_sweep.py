"""SQLite sweep store: interrupted sweeps resume without recomputing or duplicating rows."""

from ase.build import bulk

import jaxcert
from jaxcert.attacks import AttackSpec, PipelineConfig
from jaxcert.attacks.sweep import Store, sweep, task_key

CFG = PipelineConfig(max_steps=60)


def test_keys_depend_on_every_parameter():
    spec = AttackSpec("pgd", 10)
    k = task_key("sw", "si", spec, 0.05, 42, CFG)
    assert k == task_key("sw", "si", AttackSpec("pgd", 10, 0.1), 0.05, 42, CFG)
    others = [task_key("lj", "si", spec, 0.05, 42, CFG), task_key("sw", "si2", spec, 0.05, 42, CFG),
              task_key("sw", "si", AttackSpec("pgd", 10, 0.2), 0.05, 42, CFG),
              task_key("sw", "si", spec, 0.051, 42, CFG), task_key("sw", "si", spec, 0.05, 43, CFG),
              task_key("sw", "si", spec, 0.05, 42, PipelineConfig(max_steps=61))]
    assert len({k, *others}) == 7


def test_sweep_resumes(tmp_path):
    model = jaxcert.models.get("sw")
    structures = {}
    for seed in (1, 2):
        a = bulk("Si", cubic=True)
        a.rattle(0.05, seed=seed)
        structures[f"si_{seed}"] = a
    path = str(tmp_path / "sweep.sqlite")
    kw = dict(epsilons=[0.02], seeds=[42], attacks=[AttackSpec("fgsm", 1)], cfg=CFG, chunk=1)
    first = sweep(model, structures, store=Store(path), max_chunks=1, **kw)  # "interrupted" after one chunk
    assert first == {"requested": 2, "already_done": 0, "computed": 1, "remaining": 1}
    store = Store(path)  # reopened from disk
    assert len(store) == 1
    second = sweep(model, structures, store=store, **kw)
    assert second == {"requested": 2, "already_done": 1, "computed": 1, "remaining": 0}
    third = sweep(model, structures, store=store, **kw)
    assert third["computed"] == 0 and len(store) == 2
    rows = store.rows()
    assert [r["structure"] for r in rows] == ["si_1", "si_2"]
    assert all(r["attack"] == "fgsm" and r["epsilon_A"] == 0.02 for r in rows)
    assert rows[0]["immediate"]["linf_displacement"] <= 0.02 + 1e-12
    assert store.rows(structure="si_2")[0]["seed"] == 42
