"""Job records and their state machine, deliveries, and the kill switch.

JobStore is the one store the rest of Ribbit uses for these; it is made of one small store
per concern, each in its own module over the same database:

- states.py: a job's states and the moves between them (every change of state goes through
  its ``move``, which refuses moves the diagram there does not have).
- deliveries.py: the deliveries a forge sent, a duplicate refused; inserts.py: the
  insert-or-skip that makes a duplicate delivery or a second active job lose a race.
- intake.py: what a webhook reads of jobs in one statement (IntakeView) and the job it
  creates (JobSpec).
- lifecycle.py: claiming a job under the concurrency limits, its heartbeat, its moves and
  columns; dispatch.py: the sweep's side (due jobs, sent, deferred, gone stale).
- lookups.py: finding jobs; reports.py: listings, counts and tallies, with their records
  in report_records.py.
- killswitch.py: pausing the bot or a repository; repositories.py: what is recorded of a
  repository.

Every name other modules import is importable from here (``from bot.store.jobs import
JobStore, JobSpec``).
"""

from __future__ import annotations

from bot.store.db import Database
from bot.store.jobs.deliveries import Deliveries, DuplicateDelivery
from bot.store.jobs.dispatch import JobDispatch
from bot.store.jobs.intake import (
    _INTAKE_VIEW as _INTAKE_VIEW,  # the prebuilt statement, whose plan a test reads
)
from bot.store.jobs.intake import IntakeView, JobIntake, JobSpec, active_key_for, new_job_id
from bot.store.jobs.killswitch import KillSwitch
from bot.store.jobs.lifecycle import ClaimOutcome, JobLifecycle, Limits
from bot.store.jobs.lookups import JobLookups
from bot.store.jobs.report_records import (
    ActiveCounts,
    JobListing,
    JobQuery,
    JobSummary,
    RepoCount,
    RepoEndings,
)
from bot.store.jobs.reports import JobReports
from bot.store.jobs.repositories import Repositories
from bot.store.jobs.states import (
    ACTIVE_STATES,
    TERMINAL_STATES,
    TRANSITIONS,
    InvalidTransition,
    JobNotFound,
    JobState,
)
from bot.store.kinds import AGENT_KINDS, JobKind

__all__ = [
    "ACTIVE_STATES",
    "AGENT_KINDS",
    "TERMINAL_STATES",
    "TRANSITIONS",
    "ActiveCounts",
    "ClaimOutcome",
    "DuplicateDelivery",
    "IntakeView",
    "InvalidTransition",
    "JobKind",
    "JobListing",
    "JobNotFound",
    "JobQuery",
    "JobSpec",
    "JobState",
    "JobStore",
    "JobSummary",
    "Limits",
    "RepoCount",
    "RepoEndings",
    "active_key_for",
    "new_job_id",
]


class JobStore(
    Deliveries,
    JobIntake,
    JobLifecycle,
    JobDispatch,
    JobLookups,
    JobReports,
    KillSwitch,
    Repositories,
):
    """Jobs, deliveries, the kill switch and repositories over one database: the mixins
    this package's modules define, as one object, so callers hold one store while each
    method lives in the module of its concern."""

    def __init__(self, db: Database) -> None:
        self.db = db
