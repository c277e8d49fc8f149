from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes import LocalDirSandbox, make_git_repo

REPO_FILES = {
    "README.md": "# calc\n",
    "calc.py": "def add(a, b):\n    return a - b\n\n\ndef sub(a, b):\n    return a - b\n",
    "pkg/util.py": "X = 1\nX = 1\n",
    "tests/test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    make_git_repo(path, REPO_FILES)
    return path


@pytest.fixture
def sandbox(repo: Path) -> Iterator[LocalDirSandbox]:
    with LocalDirSandbox(repo) as sb:
        yield sb
