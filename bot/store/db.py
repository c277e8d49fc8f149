"""Engine and session handling. Schema changes go through Alembic; `migrate` applies them."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import StaticPool

MIGRATIONS_DIR = Path(__file__).parent / "migrations"


class Database:
    """One engine plus a session factory; create once per process and share."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine = make_engine(url)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A transaction: committed on success, rolled back on error."""
        with self._sessions() as session, session.begin():
            yield session

    def ping(self) -> None:
        with self.engine.connect() as conn:
            conn.execute(text("SELECT 1"))

    def migrate(self) -> None:
        migrate(self.engine)

    def dispose(self) -> None:
        self.engine.dispose()


def make_engine(url: str) -> Engine:
    if url.startswith("sqlite"):
        in_memory = url in {"sqlite://", "sqlite:///:memory:"}
        if in_memory:
            engine = create_engine(
                url, poolclass=StaticPool, connect_args={"check_same_thread": False}
            )
        else:
            path = url.split("///", 1)[1]
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            # The web app and the worker share the file: wait on locks instead of failing.
            engine = create_engine(url, connect_args={"timeout": 30, "check_same_thread": False})

        # pysqlite begins a transaction only before the first INSERT/UPDATE, so a SAVEPOINT
        # as the first statement opened one behind its back and its RELEASE committed on its
        # own: a delivery row outlived the intake that failed after it. The driver's own
        # transaction handling is turned off and SQLAlchemy's begin emits BEGIN itself.
        begin = "BEGIN" if in_memory else "BEGIN IMMEDIATE"

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
            dbapi_conn.isolation_level = None
            cur = dbapi_conn.cursor()
            # WAL lets the worker read while the web app writes.
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA busy_timeout=30000")
            cur.close()

        @event.listens_for(engine, "begin")
        def _sqlite_begin(conn: Connection) -> None:
            # IMMEDIATE takes the write lock up front, where busy_timeout waits for it; a
            # deferred transaction that read first fails at once (SQLITE_BUSY_SNAPSHOT) when
            # it later writes after another process committed. Transactions here are short.
            conn.exec_driver_sql(begin)

        return engine
    return create_engine(url, pool_pre_ping=True)


def alembic_config(engine: Engine):
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.attributes["engine"] = engine
    return cfg


def migrate(engine: Engine) -> None:
    """Bring the schema to the newest revision (idempotent)."""
    from alembic import command

    command.upgrade(alembic_config(engine), "head")
