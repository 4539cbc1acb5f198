"""Adversarial coordinate attacks (ATTACKS.md): FGSM, I-FGSM, PGD as ``(init, update)`` pure functions,
the relax → attack → relax pipeline batched over structures × attacks × ε × seeds, and host-side metrics.

.. code-block:: python

    from jaxcert.attacks import losses, pgd, run
    attack = pgd(losses.energy(model), epsilon=0.05, n_steps=10)
    state = run(attack, model.prepare(s), jax.random.PRNGKey(42))
"""

from jaxcert.attacks import losses
from jaxcert.attacks.attacks import (
    Attack,
    AttackState,
    fgsm,
    ifgsm,
    min_lattice_length,
    pgd,
    run,
    sign_attack,
)
from jaxcert.attacks.pipeline import (
    ATTACKS,
    AttackSpec,
    GridResult,
    PipelineConfig,
    RunResult,
    Stage,
    attack_relax,
    relax_attack_relax,
    relax_batch,
    run_grid,
)

__all__ = [
    "losses", "Attack", "AttackState", "fgsm", "ifgsm", "pgd", "run", "sign_attack", "min_lattice_length",
    "ATTACKS", "AttackSpec", "GridResult", "PipelineConfig", "RunResult", "Stage", "attack_relax",
    "relax_attack_relax", "relax_batch", "run_grid",
]
