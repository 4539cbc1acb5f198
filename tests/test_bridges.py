"""Run the bridge tests (tests/bridges/, torch, CHGNet, SevenNet, ASE calculators) in their own process."""

import os
import pathlib
import subprocess
import sys

import pytest


def test_bridge_suite_in_its_own_process():
    pytest.importorskip("jaxcert_bridges")
    root = pathlib.Path(__file__).resolve().parent.parent
    env = dict(os.environ, JAXCERT_BRIDGE_PROCESS="1")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/bridges"],
                       cwd=root, env=env, capture_output=True, text=True)
    print(r.stdout[-4000:])
    assert r.returncode == 0, r.stdout[-8000:] + r.stderr[-4000:]
    assert " passed" in r.stdout
