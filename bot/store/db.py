"""Engine and session handling, and the group commit that lets concurrent webhooks share
a transaction (``GroupCommit``). Schema changes go through Alembic: `migrate` applies them
under a lock (the one caller is `ribbit db upgrade`, or a process start where
RIBBIT_DATABASE_AUTO_UPGRADE allows it: bot/runtime.py), and `schema` says where a
database stands against this code's migrations."""

from __future__ import annotations

import fcntl
import functools
import logging
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import StaticPool

from bot.retrying import retry, stop_after_attempts, wait_fixed

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
T = TypeVar("T")
log = logging.getLogger(__name__)
# PostgreSQL connections kept per process: one per web thread (waitress's 8 by default, up
# to 16) and the sender. With SQLAlchemy's default of 5 the others were opened and closed
# around every transaction under load.
POOL_SIZE = 18


def _connection_lost(exc: BaseException) -> bool:
    return isinstance(exc, DBAPIError) and exc.connection_invalidated


def _log_lost(exc: BaseException) -> None:
    orig = exc.orig if isinstance(exc, DBAPIError) else exc
    log.warning("database connection lost (%s); retrying on a new one", orig)


class Database:
    """One engine plus a session factory; create once per process and share."""

    def __init__(self, url: str, *, pre_ping: bool = True) -> None:
        """``pre_ping=False`` (the web process): no round trip before each transaction; a
        dead connection fails its first statement instead, and ``transaction`` re-runs
        its work once on a fresh one."""
        self.url = url
        self.engine = make_engine(url, pre_ping=pre_ping)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        # SQLite has one writer, and every transaction here takes the write lock up front
        # (BEGIN IMMEDIATE). Threads of one process wait for it on a Python lock, which
        # hands over at once; SQLite's own busy handler, left for other processes, polls
        # with sleeps that grow to 100 ms, which made 8 web threads answer in seconds.
        self._writer: AbstractContextManager[object] = (
            threading.RLock() if url.startswith("sqlite") else nullcontext()
        )

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A transaction: committed on success, rolled back on error."""
        with self._writer, self._sessions() as session, session.begin():
            yield session

    def transaction(self, work: Callable[[Session], T]) -> T:
        """``work`` in a transaction, re-run once on a fresh connection if the first one
        was found dead (the engine does not ping before use); ``work`` must start from
        scratch each time, as nothing of the lost transaction was kept. (A connection lost
        during COMMIT may have committed: a webhook re-run then meets its own delivery row
        and is answered "duplicate", and its job, never handed over, is the sweep's.)"""

        def once() -> T:
            with self.session() as session:
                return work(session)

        return retry(
            once,
            retry_on=_connection_lost,
            stop=stop_after_attempts(2),
            wait=wait_fixed(0),
            before_retry=_log_lost,
        )

    def ping(self) -> None:
        with self.engine.connect() as conn:
            conn.execute(text("SELECT 1"))

    def migrate(self) -> None:
        migrate(self.engine)

    def schema(self) -> SchemaState:
        return schema_state(self.engine)

    def describe(self) -> str:
        """The database's URL with its password hidden, for messages."""
        return self.engine.url.render_as_string(hide_password=True)

    def dispose(self) -> None:
        self.engine.dispose()


def use_wal(path: Path) -> None:
    """Put the SQLite file at ``path`` (created if missing) in WAL mode. The journal mode is
    a property of the file, so it holds for every later connection to it, from any process
    and any library (kombu's, to the embedded broker, opens it with SQLite's defaults)."""
    conn = sqlite3.connect(path, timeout=30)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
    finally:
        conn.close()


def make_engine(url: str, *, pre_ping: bool = True) -> Engine:
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
            # In WAL mode NORMAL syncs at checkpoints instead of at every commit (FULL made
            # every webhook wait for an fsync). The database stays consistent through any
            # crash, and a killed process loses nothing (its commits are in the OS's page
            # cache). What is traded is durability of the last commits before a power loss
            # or kernel crash: those webhooks were answered but are gone, and the forge
            # keeps them in its delivery log to redeliver (intake dedupes by delivery id and
            # body, so redelivering everything around the outage is safe); the worker's
            # state changes are re-done by the sweep and the reconciliation.
            cur.execute("PRAGMA synchronous=NORMAL")
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
    # A pre-ping costs every transaction a round trip (SELECT 1) before its first statement.
    # Without it, a connection that died (a PostgreSQL restart, a failover) fails its first
    # statement instead; SQLAlchemy then invalidates it and every pooled connection older
    # than it, and ``Database.transaction`` re-runs its work once on a fresh one. The
    # recycle age keeps connections younger than the idle timeouts of proxies and
    # firewalls, which drop them without a word.
    return create_engine(
        url,
        pool_pre_ping=pre_ping,
        pool_size=POOL_SIZE,
        max_overflow=POOL_SIZE,
        pool_recycle=1800,
    )


def alembic_config(engine: Engine | None = None):
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.attributes["engine"] = engine
    return cfg


@dataclass(frozen=True)
class SchemaState:
    """Where a database's schema stands against this code's migrations."""

    current: str | None  # None: no schema at all yet (a new database)
    head: str  # the newest revision this code has
    known: bool  # ``current`` is one of this code's revisions (False: a newer Ribbit's)

    @property
    def at_head(self) -> bool:
        return self.current == self.head


@functools.cache
def _revisions() -> tuple[str, frozenset[str]]:
    """This code's head revision and every revision it has (read once: parsing the
    migration scripts costs more than the query that follows)."""
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(alembic_config())
    head = script.get_current_head()
    if head is None:
        raise RuntimeError(f"no migrations in {MIGRATIONS_DIR}")
    return head, frozenset(rev.revision for rev in script.walk_revisions())


def head_revision() -> str:
    """The newest schema revision this code has."""
    return _revisions()[0]


def schema_state(engine: Engine) -> SchemaState:
    from alembic.runtime.migration import MigrationContext

    head, revisions = _revisions()
    with engine.connect() as conn:
        current = MigrationContext.configure(conn).get_current_revision()
    return SchemaState(current=current, head=head, known=current is None or current in revisions)


# Alembic runs migrations through module-level proxies (alembic.context, alembic.op): two
# threads of one process migrating at once (a worker's pool threads building their runtime
# together, a test's app beside its worker) tear them down under each other (KeyError).
_MIGRATING = threading.Lock()


def migrate(engine: Engine) -> None:
    """Bring the schema to the newest revision (idempotent). Processes upgrading together
    take turns: the first migrates, the others then find nothing left to do. PostgreSQL:
    an advisory lock (migrations/env.py); SQLite: a lock file beside the database, and the
    migration's own BEGIN IMMEDIATE transaction keeps other writers out while it runs."""
    from alembic import command

    with _MIGRATING, _sqlite_migration_lock(engine):
        command.upgrade(alembic_config(engine), "head")


@contextmanager
def _sqlite_migration_lock(engine: Engine) -> Iterator[None]:
    """An exclusive lock on DB-migrate.lock beside a SQLite file, waited for without a
    time limit (BEGIN IMMEDIATE alone would give up after the busy timeout, 30 s, while
    another process's migration runs), saying so once when another process holds it."""
    database = engine.url.database
    if engine.dialect.name != "sqlite" or not database or database == ":memory:":
        yield
        return
    path = Path(f"{database}-migrate.lock")
    with path.open("a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log.warning("waiting for another process's schema upgrade to finish (%s)", path)
            fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


class _Pending:
    """One caller's work in a :class:`GroupCommit`, and what became of it."""

    __slots__ = ("error", "finished", "result", "wake", "work")

    def __init__(self, work: Callable[[Session], Any]) -> None:
        self.work = work
        self.finished = False
        self.result: Any = None
        self.error: BaseException | None = None
        # Set when the work is settled, or when its caller is to take the lead.
        self.wake = threading.Event()

    def settle(self, result: Any = None, error: BaseException | None = None) -> None:
        self.result, self.error, self.finished = result, error, True
        self.wake.set()


class GroupCommit:
    """Runs the work of concurrent callers in one shared transaction (group commit).

    A webhook's transaction is short; its fixed costs are not: a session, BEGIN, and a
    COMMIT that writes the same index pages again (SQLite) or waits for a WAL flush
    (PostgreSQL). Under load the web threads queue their work here and one of them leads:
    it takes what is queued (up to ``max_batch``) and runs it in one transaction, in
    arrival order, as if each work had run alone after the one before, while the others
    sleep until theirs is settled. A leader leads only until its own work is done, then
    wakes the first caller still queued to lead next, so no answer waits behind a stream
    of other webhooks' batches. At saturation this cut the web process's CPU per webhook
    by a sixth to a fifth. A caller alone, the usual case at low load, gets a transaction
    of its own, as before.

    Each caller gets its own result or exception, and nothing of its work is kept when it
    raises: if one work fails, the transaction rolls back, that work is run again alone
    (so that its error is its own, not a neighbour's), and the rest run again together. A
    ``work`` must therefore start from scratch each time, as for
    :meth:`Database.transaction`, whose retry on a lost connection also applies.
    """

    def __init__(self, db: Database, *, max_batch: int = 32) -> None:
        self.db = db
        self.max_batch = max_batch
        self._leader = threading.Lock()
        self._queued = threading.Lock()
        self._pending: list[_Pending] = []

    def run(self, work: Callable[[Session], T]) -> T:
        item = _Pending(work)
        with self._queued:
            self._pending.append(item)
        while not item.finished:
            if self._leader.acquire(blocking=False):
                try:
                    self._lead_until(item)
                finally:
                    self._leader.release()
                    self._hand_over()
            else:
                # The leader settles this work or, leaving with it still queued, wakes the
                # first caller queued (perhaps this one) to lead: a caller that found the
                # lead taken is never left waiting with nobody to run its work.
                item.wake.wait()
                item.wake.clear()
        if item.error is not None:
            raise item.error
        return item.result

    def _lead_until(self, item: _Pending) -> None:
        while not item.finished:
            with self._queued:
                batch = self._pending[: self.max_batch]
                del self._pending[: self.max_batch]
            if not batch:  # unreachable: an unsettled work is queued while we lead
                raise RuntimeError("group commit lost a work")
            try:
                self._commit(batch)
            finally:
                # Never leave a taken work unsettled: its caller would wait forever.
                for taken in batch:
                    if not taken.finished:
                        taken.settle(error=RuntimeError("group commit interrupted"))

    def _hand_over(self) -> None:
        with self._queued:
            if self._pending:
                self._pending[0].wake.set()

    def _commit(self, batch: list[_Pending]) -> None:
        while len(batch) > 1:
            done: list[Any] = []
            try:
                self.db.transaction(functools.partial(self._in_order, batch, done))
            except Exception:
                if len(done) == len(batch):  # the commit failed: no work to blame
                    for item in batch:
                        self._alone(item)
                    return
                failed = batch[len(done)]
                self._alone(failed)
                batch = [item for item in batch if item is not failed]
                continue
            for item, result in zip(batch, done, strict=True):
                item.settle(result)
            return
        if batch:
            self._alone(batch[0])

    @staticmethod
    def _in_order(batch: list[_Pending], done: list[Any], session: Session) -> None:
        done.clear()  # a rerun on a fresh connection starts over
        for item in batch:
            done.append(item.work(session))

    def _alone(self, item: _Pending) -> None:
        try:
            item.settle(self.db.transaction(item.work))
        except Exception as exc:
            item.settle(error=exc)
