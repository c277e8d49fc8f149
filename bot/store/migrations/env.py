from __future__ import annotations

from alembic import context
from sqlalchemy import text

from bot.store.models import Base

# Any fixed number: the advisory lock that serialises migrations across processes.
MIGRATION_LOCK_KEY = 727466

engine = context.config.attributes["engine"]
with engine.begin() as connection:
    if connection.dialect.name == "postgresql":
        # Processes starting together would each find no version table and each create the
        # schema (one then fails). The lock is held until this transaction ends; SQLite's
        # migration transaction already begins IMMEDIATE (bot/store/db.py), which
        # serialises it the same way.
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY})
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()
