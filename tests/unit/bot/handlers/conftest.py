"""The handler bench over the real migrated database (tests/unit/bot/conftest.py)."""

from __future__ import annotations

import pytest

from bot.settings import Settings
from bot.store.db import Database
from bot.store.jobs import JobStore
from tests.unit.bot.handlers.desk import HandlerDesk


@pytest.fixture
def desk(db: Database, settings: Settings) -> HandlerDesk:
    return HandlerDesk(db=db, store=JobStore(db), settings=settings)
