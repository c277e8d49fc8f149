"""The job kinds: one table, read by everything that lists kinds.

Each kind is a member of :class:`Kind` carrying its :class:`KindSpec`: the Celery task
that runs it (worker/tasks.py defines one per member, bot/queue.py sends to it), the
payload record it carries (bot/store/payloads.py), whether it runs the agent (at most one
active per issue, the app-wide time limit) and whether the dashboard's kind filter offers
it. A new kind is one member here, plus its pipeline in worker/pipelines/;
tests/unit/test_job_kinds.py checks every consumer's list against this table.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Literal

from bot.store.payloads import CommandOrder, JobPayload, OutcomeOf, PersonAsks, UnknownWord


@dataclass(frozen=True)
class KindSpec:
    name: str  # as stored in jobs.kind and written in a JobSpec
    task: str  # the Celery task name
    payload: type[JobPayload] | None  # None: the kind carries nothing
    runs_agent: bool
    on_dashboard: bool = True


class Kind(Enum):
    SOLVE = KindSpec("solve", "ribbit.solve", PersonAsks, runs_agent=True)
    REVISE = KindSpec("revise", "ribbit.revise", PersonAsks, runs_agent=True)
    EXPLAIN = KindSpec("explain", "ribbit.explain", None, runs_agent=False)
    HELP = KindSpec("help", "ribbit.help", UnknownWord, runs_agent=False)
    COMMAND = KindSpec("command", "ribbit.command", CommandOrder, runs_agent=False)
    OUTCOME = KindSpec("outcome", "ribbit.record_outcome", OutcomeOf, runs_agent=False)

    @property
    def spec(self) -> KindSpec:
        spec: KindSpec = self.value
        return spec


# The name type checkers see on JobSpec.kind (a Literal cannot be built from the table;
# the test holds the two equal).
JobKind = Literal["solve", "revise", "explain", "help", "command", "outcome"]

KINDS: tuple[str, ...] = tuple(kind.spec.name for kind in Kind)
# Kinds that run the agent on an issue; at most one of them is active per issue.
AGENT_KINDS: tuple[str, ...] = tuple(kind.spec.name for kind in Kind if kind.spec.runs_agent)
TASK_FOR_KIND: dict[str, str] = {kind.spec.name: kind.spec.task for kind in Kind}
PAYLOAD_FOR_KIND: dict[str, type[JobPayload]] = {
    kind.spec.name: kind.spec.payload for kind in Kind if kind.spec.payload is not None
}
DASHBOARD_KINDS: tuple[str, ...] = tuple(kind.spec.name for kind in Kind if kind.spec.on_dashboard)
