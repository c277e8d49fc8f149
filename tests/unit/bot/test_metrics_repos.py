"""The web app's repository gauges: counts from the store, never a label per repository."""

from __future__ import annotations

from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from bot.settings import Settings
from bot.store.jobs import JobSpec, JobStore
from bot.store.tables import utcnow
from bot.web.metrics import repos_all_failing


def _finish(store: JobStore, repo: str, issue: int, state: str, kind: str = "solve") -> None:
    with store.db.session() as session:
        job = store.create(
            session,
            JobSpec(kind=kind, forge="github", repo=repo, issue_number=issue),  # type: ignore[arg-type]
        )
        assert job is not None
        job_id = job.id
    store.transition(job_id, "running")
    store.transition(job_id, state)  # type: ignore[arg-type]


def _scrape(client: Any) -> dict[str, list[Any]]:
    text = client.get("/metrics").get_data(as_text=True)
    return {fam.name: fam.samples for fam in text_string_to_metric_families(text)}


def test_metrics_repos_failing_counts_repos_where_every_job_failed(
    client: Any, store: JobStore, settings: Settings
) -> None:
    threshold = settings.notify.failure_threshold
    for n in range(threshold):
        _finish(store, "acme/broken", n + 1, "failed")
    for n in range(threshold):
        _finish(store, "acme/flaky", n + 1, "failed")
    _finish(store, "acme/flaky", 99, "succeeded")  # one success: not "every job failing"
    for n in range(threshold - 1):
        _finish(store, "acme/young", n + 1, "failed")  # too few to say
    for n in range(threshold):
        _finish(store, "acme/chatty", n + 1, "failed", kind="help")  # not agent jobs
    assert repos_all_failing(store, settings, utcnow()) == 1
    samples = _scrape(client)
    (failing,) = samples["ribbit_repos_failing"]
    assert failing.value == 1 and failing.labels == {}
    assert [s.value for s in samples["ribbit_repos_budget_spent"]] == [0]


def test_metrics_budget_and_pauses_are_counts(
    client: Any, store: JobStore, settings: Settings
) -> None:
    store.pause(forge="github", repo="acme/a")
    store.pause(forge="gitlab", repo="group/b")
    samples = _scrape(client)
    scopes = {s.labels["scope"]: s.value for s in samples["ribbit_paused_scopes"]}
    assert scopes == {"all": 0, "repo": 2}
    store.pause()
    scopes = {s.labels["scope"]: s.value for s in _scrape(client)["ribbit_paused_scopes"]}
    assert scopes["all"] == 1


def test_metrics_budget_spent_counts_repos_at_their_daily_budget(
    store: JobStore, settings: Settings
) -> None:
    from bot.web.metrics import repos_budget_spent

    tight = settings.model_copy(
        update={"admission": settings.admission.model_copy(update={"daily_jobs_per_repo": 2})}
    )
    _finish(store, "acme/busy", 1, "succeeded")
    _finish(store, "acme/busy", 2, "failed")
    _finish(store, "acme/calm", 1, "succeeded")
    assert repos_budget_spent(store, tight, utcnow()) == 1
    assert repos_budget_spent(store, settings, utcnow()) == 0
