"""Shared fixtures: analytic committees built once per session, so compiled programs are reused."""

import pytest

from jaxcert import models
from jaxcert.detective import examples as ex


@pytest.fixture(scope="session")
def lj_models():
    return {"lj": models.get("lj"), "soft": ex.lj_soft(), "stiff": ex.lj_stiff()}
