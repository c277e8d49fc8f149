"""What every Ribbit process builds once from Settings: the database, the job store and the
forge clients' factory.

``open_database`` is the one place a process opens the database, and with it the one
place that decides about the schema: `ribbit db upgrade` (``upgrade_database``) migrates;
every other process checks that the schema is at this code's head revision and stops with
``SchemaNotCurrent`` (the CLI prints it and exits 1) if not, unless
RIBBIT_DATABASE_AUTO_UPGRADE (on by default for the embedded SQLite) lets it upgrade at
start, under the same lock `ribbit db upgrade` takes.

``Runtime`` is the worker's per-process object and the CLI's; the web process's
``bot.web.services.Services`` is a Runtime with the intake and the dashboard's parts added.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from bot.forges import ForgeFactory, forge_factory
from bot.retrying import retry, wait_fixed
from bot.settings import Settings
from bot.store.db import Database, SchemaState
from bot.store.jobs import JobStore, Limits

log = logging.getLogger(__name__)
# How often `ribbit db check --wait` looks again (a pod's init container waiting for the
# deployment's upgrade Job).
POLL_S = 2.0


class SchemaNotCurrent(RuntimeError):
    """The database's schema is not the one this code needs; the message says what to do."""


class _NotUpgradedYet(SchemaNotCurrent):
    """Behind this code's head revision: the deployment's upgrade may still bring it there."""


def open_database(settings: Settings, *, pre_ping: bool = True) -> Database:
    """The process's database, its schema checked (or, where allowed, upgraded) first.
    ``pre_ping=False`` is the web process's choice (see ``Database``)."""
    db = Database(settings.effective_database_url, pre_ping=pre_ping)
    try:
        state = db.schema()
        if not state.at_head and state.known and settings.effective_database_auto_upgrade:
            log.info("upgrading the database schema from %s to %s", state.current, state.head)
            db.migrate()
            state = db.schema()
        if not state.at_head:
            raise SchemaNotCurrent(schema_message(db.describe(), state))
    except BaseException:
        db.dispose()
        raise
    return db


def schema_message(where: str, state: SchemaState) -> str:
    if not state.known:
        return (
            f"the database {where} is at schema revision {state.current}, which this Ribbit "
            f"does not have (its newest is {state.head}): a newer Ribbit upgraded it; run "
            "that version"
        )
    found = "has no schema yet" if state.current is None else f"is at revision {state.current}"
    return (
        f"the database {where} {found} and this Ribbit needs revision {state.head}: run "
        "`ribbit db upgrade` first (or set RIBBIT_DATABASE_AUTO_UPGRADE=true to let each "
        "process upgrade it when it starts)"
    )


def wait_for_schema(
    settings: Settings,
    timeout_s: float,
    *,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> str:
    """`ribbit db check`: the head revision once the schema is at it, re-checking every
    POLL_S for ``timeout_s`` (0: check once); never upgrades. A schema from a newer Ribbit
    is refused at once: waiting will not change it."""
    db = Database(settings.effective_database_url)

    def at_head() -> str:
        state = db.schema()
        if state.at_head:
            return state.head
        behind = _NotUpgradedYet if state.known else SchemaNotCurrent
        raise behind(schema_message(db.describe(), state))

    try:
        return retry(
            at_head,
            retry_on=(_NotUpgradedYet,),
            stop=lambda tried: tried.elapsed_s >= timeout_s,
            wait=wait_fixed(POLL_S),
            sleep=sleep,
            clock=clock,
        )
    finally:
        db.dispose()


def upgrade_database(settings: Settings) -> str:
    """`ribbit db upgrade`: bring the schema to the head revision under the migration lock
    (upgrades run together take turns); returns that revision."""
    db = Database(settings.effective_database_url)
    try:
        db.migrate()
        return str(db.schema().current)
    finally:
        db.dispose()


# The settings a process built: bot's Settings for the web tier, worker.settings'
# WorkerSettings (bot's plus the sandbox, model, agent and gates sections) for the rest.
S = TypeVar("S", bound=Settings)


@dataclass
class Runtime(Generic[S]):
    """Settings, the database, the job store and the forge clients' factory, built once per
    process and shared by everything in it (a worker's tasks, a CLI command)."""

    settings: S
    db: Database
    store: JobStore
    # What every job and sweep builds its forge client with: the deployment's forges, or
    # the fake a test opens the runtime with.
    forges: ForgeFactory

    @classmethod
    def open(
        cls, settings: S, *, pre_ping: bool = True, forges: ForgeFactory | None = None
    ) -> Runtime[S]:
        db = open_database(settings, pre_ping=pre_ping)
        return cls(
            settings=settings,
            db=db,
            store=JobStore(db),
            forges=forges or forge_factory(settings),
        )

    @property
    def limits(self) -> Limits:
        adm = self.settings.admission
        return Limits(
            max_concurrent=adm.max_concurrent_jobs,
            max_concurrent_per_repo=adm.max_concurrent_jobs_per_repo,
        )

    def close(self) -> None:
        self.db.dispose()
