from __future__ import annotations

import logging

from alembic import context
from sqlalchemy import text

from bot.store.tables import Base

# Any fixed number: the advisory lock that serialises migrations across processes.
MIGRATION_LOCK_KEY = 727466

engine = context.config.attributes["engine"]
with engine.begin() as connection:
    if connection.dialect.name == "postgresql":
        # Upgrades run together would each find no version table and each create the
        # schema (one then fails). The lock is held until this transaction ends; SQLite's
        # upgrades take a lock file instead (bot/store/db.py). Tried first without waiting,
        # so that an upgrade queued behind another says so.
        key = {"key": MIGRATION_LOCK_KEY}
        if not connection.execute(text("SELECT pg_try_advisory_xact_lock(:key)"), key).scalar():
            logging.getLogger("bot.store.db").warning(
                "waiting for another process's schema upgrade to finish (advisory lock %d)",
                MIGRATION_LOCK_KEY,
            )
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), key)
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()
