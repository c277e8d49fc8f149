"""Every list of job kinds is the job-kind table's (bot/store/kinds.py), so none can drift:
the dashboard's filter once offered a kind that does not exist and missed one that does."""

from __future__ import annotations

from typing import get_args

import pytest
from celery import Celery

from bot.queue import TASK_FOR_KIND
from bot.store.jobs import AGENT_KINDS, JobKind
from bot.store.kinds import Kind
from bot.store.payloads import PayloadError, encode_payload
from bot.web.admin.queries import JOB_KINDS, JobFilter

NAMES = tuple(kind.spec.name for kind in Kind)


def test_the_typed_kind_names_the_table() -> None:
    assert get_args(JobKind) == NAMES


def test_the_dashboard_filters_every_kind_of_the_table() -> None:
    assert tuple(kind.spec.name for kind in Kind if kind.spec.on_dashboard) == JOB_KINDS
    assert JOB_KINDS == NAMES
    for name in NAMES:
        assert JobFilter.from_args({"kind": name}).kind == name
    assert JobFilter.from_args({"kind": "reconcile"}).kind is None


def test_agent_kinds_are_the_tables() -> None:
    assert AGENT_KINDS == ("solve", "revise")
    assert tuple(kind.spec.name for kind in Kind if kind.spec.runs_agent) == AGENT_KINDS


def test_each_kind_is_sent_to_its_task() -> None:
    assert {kind.spec.name: kind.spec.task for kind in Kind} == TASK_FOR_KIND


@pytest.mark.parametrize("kind", list(Kind), ids=lambda kind: kind.spec.name)
def test_each_kind_carries_only_its_payload(kind: Kind) -> None:
    from bot.store.payloads import CommandOrder, OutcomeOf, PersonAsks, UnknownWord

    samples = [PersonAsks("x"), UnknownWord("x"), CommandOrder("stop", None), OutcomeOf("bot")]
    for sample in samples:
        if kind.spec.payload is not None and isinstance(sample, kind.spec.payload):
            assert encode_payload(kind.spec.name, sample) is not None
        else:
            with pytest.raises(PayloadError):
                encode_payload(kind.spec.name, sample)


def test_the_worker_runs_every_kind() -> None:
    import worker.pipelines  # noqa: F401  (registers the pipelines)
    from worker.jobs import PIPELINES
    from worker.metrics import KINDS

    assert set(PIPELINES) == set(NAMES)
    assert frozenset(NAMES) == KINDS


def test_the_worker_defines_each_kinds_task_with_its_limits_and_no_retries() -> None:
    from worker import tasks

    app = Celery("probe", set_as_current=False)
    app.finalize()
    assert set(tasks.JOB_TASKS) == set(NAMES)
    job_tasks = {name for name in app.tasks if name.startswith("ribbit.")}
    assert job_tasks - {"ribbit.sweep", "ribbit.reconcile"} == {kind.spec.task for kind in Kind}
    for kind in Kind:
        task = app.tasks[kind.spec.task]
        assert (task.acks_late, task.reject_on_worker_lost, task.max_retries) == (True, True, 0)
        # Agent kinds run under the app-wide limit (worker/celery_app.py), the rest short.
        limits = (None, None) if kind.spec.runs_agent else (240, 300)
        assert (task.soft_time_limit, task.time_limit) == limits, kind
