"""Fixtures for the trainer: small real git repositories with real bug fixes."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.fakes import LocalDirSandbox, commit_files, make_git_repo

# The host interpreter: LocalDirSandbox runs commands on the host, where "python"
# may not be the venv's.
PYTEST = f"{sys.executable} -m pytest -q"

CALC_BUGGY = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
CALC_FIXED = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n"
TEST_MUL = "from calc import mul\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n"
TEST_ADD = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"


@dataclass(frozen=True)
class FixRepo:
    path: Path
    base: str
    fix: str


def sandbox_factory(source: Path) -> LocalDirSandbox:
    return LocalDirSandbox(source)


@pytest.fixture
def fix_with_new_test(tmp_path: Path) -> FixRepo:
    """add() subtracts; the fix corrects it and adds tests/test_add.py."""
    repo = tmp_path / "calc"
    base = make_git_repo(repo, {"calc.py": CALC_BUGGY, "tests/test_mul.py": TEST_MUL})
    fix = commit_files(repo, {"calc.py": CALC_FIXED, "tests/test_add.py": TEST_ADD}, "fix add")
    return FixRepo(repo, base, fix)
