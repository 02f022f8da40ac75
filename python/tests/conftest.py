"""Where the module, the CLI and the fixtures are (set by scripts/test.sh).

PTEPACK_PYTHON_DIR  directory holding the built module (default: build/python)
PTEPACK_CLI         the ptepack command line tool (default: build/ptepack)
PTEPACK_FIXTURES_DIR  real ExecuTorch files (default: ../shared/fixtures/executorch)
"""
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.environ.get("PTEPACK_PYTHON_DIR", os.path.join(ROOT, "build", "python")))

FIXTURES = os.environ.get(
    "PTEPACK_FIXTURES_DIR", os.path.join(os.path.dirname(ROOT), "shared", "fixtures", "executorch"))
CLI = os.environ.get("PTEPACK_CLI", os.path.join(ROOT, "build", "ptepack"))


@pytest.fixture
def fixture():
    def path(name):
        p = os.path.join(FIXTURES, name)
        if not os.path.exists(p):
            pytest.skip(f"real ExecuTorch fixtures not found in {FIXTURES} (set PTEPACK_FIXTURES_DIR)")
        return p
    return path
