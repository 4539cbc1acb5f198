"""The probe × defect matrix (issue 3, 7b): every defect model trips the probes it must trip AND
leaves the others clean, both directions asserted, on the production substrates of one element.

The table is ``tests/_defect_oracle.py`` (``EXPECTED_PROBES``) (must_trip, must_not_trip); "trips" means
score < 0.5 or a failed gate, "clean" means score > 0.85 and no failed gate.  The λ rows are checked
in tests/test_lam.py.

Cost: one compiled program per (defect, probe), about 5 s each here, so the whole matrix is most of the
test suite's time.  The default run asserts the sensitivity half (every defect trips each static probe it
must trip); the specificity half (it leaves every other static probe clean) and the four
molecular-dynamics probes (reversibility and the three on the shared Langevin trajectory) run with
``pytest -m slow``.  The clean model passing every probe is asserted by default
(tests/probes/test_suite.py), and the MD probes' own defects in tests/probes/test_{reversibility,
config_temperature,virial,equipartition}.py.
"""

import jax.numpy as jnp
import pytest

import jaxcert
from jaxcert.models import defects
from tests._defect_oracle import EXPECTED_PROBES

ELEMENT = "Si"
TRIP, CLEAN = 0.5, 0.85
MD = {"reversibility", "config_temperature", "virial", "equipartition", "lam"}
#: strengths for the matrix where the wrapper default is not the right operating point
STRENGTH = {"chirality": 1.0, "eggbox": 0.5, "nonintegrable": 20.0}


@pytest.fixture(scope="module")
def lj():
    return jaxcert.models.get("lj")


def _check(lj, name, include_md, specificity=True):
    must_trip, must_not = EXPECTED_PROBES[name]
    must_not = must_not if specificity else ()
    skip = set() if include_md else MD
    skip.add("lam")
    trip = [p for p in must_trip if p not in skip]
    clean = [p for p in must_not if p not in skip]
    factory = defects.DEFECTS[name]
    model = factory(lj, STRENGTH[name]) if name in STRENGTH else factory(lj)
    rep = jaxcert.certify(model, [ELEMENT], probes=[*trip, *clean], seed=0, dtype=jnp.float64)
    v = {o.name: (o.summary()["score"], o.summary()["gate"], o.summary()["status"], o.message) for o in rep.outcomes}
    wrong = []
    for p in trip:
        score, gate, status, msg = v[p]
        if not (score < TRIP or gate is False):
            wrong.append(f"{p} should trip: score {score:.3g}, gate {gate}, {status} {msg or ''}")
    for p in clean:
        score, gate, status, msg = v[p]
        if not (score > CLEAN and gate is not False):
            wrong.append(f"{p} should stay clean: score {score:.3g}, gate {gate}, {status} {msg or ''}")
    assert not wrong, f"{model.name}: " + "; ".join(wrong)


@pytest.mark.parametrize("name", sorted(EXPECTED_PROBES))
def test_defect_trips_its_probes(lj, name):
    _check(lj, name, include_md=False, specificity=False)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(EXPECTED_PROBES))
def test_defect_trips_its_probes_and_only_those(lj, name):
    _check(lj, name, include_md=False)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(EXPECTED_PROBES))
def test_full_matrix_including_dynamics(lj, name):
    _check(lj, name, include_md=True)
