"""A real SQLite database, migrated, for each store test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bot.store.db import Database


@pytest.fixture
def db() -> Iterator[Database]:
    database = Database("sqlite://")
    database.migrate()
    yield database
    database.dispose()
