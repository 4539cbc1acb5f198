"""jaxcert's XLA:CPU default (jaxcert/_xla.py): the Eigen-pool flag is added once, never over the user's choice."""

import os
import subprocess
import sys

import pytest

from jaxcert._xla import EIGEN_FLAG

SNIPPET = "import os, jaxcert; print(os.environ.get('XLA_FLAGS', ''))"


def _flags_after_import(**env) -> str:
    full = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAXCERT_XLA_DEFAULTS")}
    full.update(env)
    out = subprocess.run([sys.executable, "-c", SNIPPET], env=full, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


@pytest.mark.parametrize(("env", "expected"), [
    ({}, EIGEN_FLAG),
    ({"XLA_FLAGS": "--xla_cpu_enable_fast_math=false"}, f"--xla_cpu_enable_fast_math=false {EIGEN_FLAG}"),
    ({"XLA_FLAGS": "--xla_cpu_multi_thread_eigen=true"}, "--xla_cpu_multi_thread_eigen=true"),  # the user's wins
    ({"JAXCERT_XLA_DEFAULTS": "off"}, ""),
])
def test_eigen_flag(env, expected):
    assert _flags_after_import(**env) == expected

