"""Failure-mode search beyond benchmark scores (seed 003; docs/detective.md).

A target model and a committee (:class:`Committee`) run physical test protocols (dimer scans, rigid desorption
scans, an adsorption-energy grid, the eight exact constraints); two label-free signals (an exact-constraint
violation, decisive alone; committee disagreement, a robust z that only allocates suspicion) label each cell;
a proposer ranks failure hypotheses; the selected one is pre-registered, probed for scope, mechanism and impact,
and rejected (with the reason) or escalated with a report directory (seven sections, ``reproduce.py``, a DFT
verification card, ``escalation.json``).  Everything goes to an append-only evidence memory; a rerun resumes.

.. code-block:: python

    from jaxcert import models
    from jaxcert.detective import Committee, investigate, planted

    target = planted.pair_attraction(models.get("lj"), ["Sb", "Mo"])
    committee = Committee(target, [models.get("lj"), planted.variant(models.get("lj"), 1.1, 1.02)])
    result = investigate(committee, ["dimers"], elements=["Sb", "Mo", "Si", "Cu"], out="inv")
    result.escalated, result.hypothesis.scope["elements"]     # True, ['Mo', 'Sb']

No torch is imported here; bridged models are loaded only when the user names them.
"""

from jaxcert.detective._committee import Committee
from jaxcert.detective._constraints import CONSTRAINTS, Constraints
from jaxcert.detective._memory import EvidenceMemory
from jaxcert.detective._protocols import Cell, DimerConfig, Dimers, Protocol, Variant, dimer_metrics
from jaxcert.detective._registry import PROTOCOLS, make_protocol, protocol_config
from jaxcert.detective._report import headline
from jaxcert.detective._search import (
    Hypothesis,
    InvestigationResult,
    Proposer,
    RuleBasedProposer,
    decide,
    declare,
    investigate,
    robustness,
)
from jaxcert.detective._signals import Signal, classify, robust_z
from jaxcert.detective._surfaces import Adsorption, Desorption, SurfaceConfig, desorption_metrics

__all__ = [
    "Committee", "Protocol", "Cell", "Dimers", "DimerConfig", "Desorption", "Adsorption", "SurfaceConfig",
    "Constraints", "CONSTRAINTS", "PROTOCOLS", "make_protocol", "protocol_config", "EvidenceMemory", "Hypothesis",
    "Proposer", "RuleBasedProposer", "InvestigationResult", "investigate", "declare", "decide", "Signal",
    "classify", "robust_z", "headline", "dimer_metrics", "desorption_metrics", "Variant", "robustness",
]
