"""Fixtures for the trainer's commands."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The deployment's DATA_DIR, where the commands find the database and the stores."""
    data = tmp_path / "data"
    monkeypatch.setenv("RIBBIT_DATA_DIR", str(data))
    return data
