"""A real SQLite database, migrated, for each test of the stores and of the handlers
(which decide on what the store reads in the open transaction)."""

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
