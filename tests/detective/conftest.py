"""Shared fixtures: analytic committees built once per session, so compiled programs are reused."""

import pytest

from jaxcert import models
from jaxcert.detective import examples as ex


@pytest.fixture(scope="session")
def lj_models():
    lj = models.get("lj")
    return {"lj": lj, "soft": ex.lj_soft(), "stiff": ex.lj_stiff(), "planted": ex.lj_planted_dimers()}
