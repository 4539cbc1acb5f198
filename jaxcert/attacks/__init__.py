"""Adversarial coordinate attacks (docs/attacks.md): FGSM, I-FGSM, PGD as ``(init, update)`` pure functions,
the relax → attack → relax pipeline batched over structures × attacks × ε × seeds, and host-side metrics.

.. code-block:: python

    from jaxcert.attacks import losses, pgd, run
    attack = pgd(losses.energy(model), epsilon=0.05, n_steps=10)
    state = run(attack, model.prepare(s), jax.random.PRNGKey(42))

Modules: :mod:`~jaxcert.attacks.attacks` (update rules), :mod:`~jaxcert.attacks.losses` (objectives),
:mod:`~jaxcert.attacks.pipeline` (relax → attack → relax, vmapped grid), :mod:`~jaxcert.attacks.metrics`
(docs/attacks.md §3 on the host), :mod:`~jaxcert.attacks.report` (``AttackReport``: rows, JSON, table),
:mod:`~jaxcert.attacks.crystals` (the 20 crystals of §5, rebuilt from published
data; structure sets; supercells), :mod:`~jaxcert.attacks.sei` (20 Li–C–O–H–P–F crystals standing in for the
private LiCOHPF set), :mod:`~jaxcert.attacks.contour` (the §4 baseline), :mod:`~jaxcert.attacks.sweep`
(resumable SQLite store, NPZ arrays, CSV/Parquet export, local or dask executor), :mod:`~jaxcert.attacks.plots`
(metric vs ε: median, IQR, contour band).
"""

from jaxcert.attacks import losses
from jaxcert.attacks.attacks import (
    SIGN_START,
    Attack,
    AttackState,
    SignRule,
    fgsm,
    grad_tolerance,
    ifgsm,
    min_lattice_length,
    optax_attack,
    pgd,
    run,
    sign_attack,
    sign_rule_of,
)
from jaxcert.attacks.pipeline import (
    ATTACKS,
    AttackSpec,
    GridResult,
    PipelineConfig,
    RunResult,
    Stage,
    attack_relax,
    check_attackable,
    relax_attack_relax,
    relax_batch,
    run_grid,
)
from jaxcert.attacks.report import AttackReport

__all__ = [
    "losses", "Attack", "AttackState", "fgsm", "ifgsm", "pgd", "optax_attack", "run",
    "sign_attack", "sign_rule_of", "SignRule", "min_lattice_length",
    "grad_tolerance", "SIGN_START", "ATTACKS", "AttackSpec", "GridResult", "PipelineConfig", "RunResult", "Stage",
    "attack_relax", "check_attackable", "relax_attack_relax", "relax_batch", "run_grid", "AttackReport",
]
