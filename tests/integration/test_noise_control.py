"""Noise control against the local forge (real HTTP, GitHub's and GitLab's APIs) and a
real notification receiver: a repository whose bot PRs are mostly closed is paused, its
maintainers are told once with the numbers, and an admin's resume is a fresh start."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

from bot.forges import forge_factory
from bot.store.db import Database
from bot.store.jobs import JobStore
from bot.store.tables import Outcome, utcnow
from tests.plugins.forge import BOT_LOGIN, ForgeWorld
from tests.plugins.notify import NotifyReceiver
from worker.noise import NoisePause, check_repository
from worker.settings import WorkerSettings

pytestmark = pytest.mark.integration


@pytest.fixture
def noisy(
    forge_settings: WorkerSettings, notify_receiver: tuple[str, NotifyReceiver]
) -> Iterator[tuple[WorkerSettings, JobStore]]:
    noise = {"min_merge_rate": 0.3, "window_days": 30, "min_outcomes": 5}
    settings = WorkerSettings.model_validate(
        forge_settings.model_dump()
        | {"noise": noise, "notify": {"webhook_url": notify_receiver[0]}}
    )
    db = Database(settings.effective_database_url)
    db.migrate()
    yield settings, JobStore(db)
    db.dispose()


def _outcomes(store: JobStore, forge: str, repo: str, states: str, *, days_ago: float = 1) -> None:
    with store.db.session() as session:
        start = 1000 + len(session.query(Outcome).all())  # clear of the forge's own PRs
        for n, state in enumerate(states):
            session.add(
                Outcome(
                    forge=forge,
                    repo=repo,
                    pr_number=start + n,
                    state={"m": "merged", "c": "closed", "h": "merged"}[state],
                    human_authored=state == "h",
                    decided_at=utcnow() - timedelta(days=days_ago),
                )
            )


@pytest.mark.parametrize("kind", ["github", "gitlab"])
def test_noise_low_merge_rate_pauses_and_tells_maintainers_once(
    kind: str,
    forge_world: ForgeWorld,
    noisy: tuple[WorkerSettings, JobStore],
    notify_receiver: tuple[str, NotifyReceiver],
) -> None:
    settings, store = noisy
    repo = forge_world.repo(kind)  # type: ignore[arg-type]
    issue = forge_world.forge.create_issue(kind, repo.full_name, title="bug", author="maya")  # type: ignore[arg-type]
    forge, name = repo.forge, repo.full_name
    # Old closed PRs outside the window and human fixes do not count.
    _outcomes(store, forge, name, "ccccc", days_ago=45)
    _outcomes(store, forge, name, "hhhh")
    _outcomes(store, forge, name, "mccc")  # 1 of 4: too few to judge
    assert (
        check_repository(
            store, settings, forge_factory(settings), forge, name, issue_number=issue.number
        )
        is None
    )
    _outcomes(store, forge, name, "c")  # 1 of 5 merged: 20% < 30%
    pause = check_repository(
        store, settings, forge_factory(settings), forge, name, issue_number=issue.number
    )
    assert pause is not None and (pause.merged, pause.closed) == (1, 4)
    assert store.paused_scopes() == [f"{forge}:{name}"]

    comments = [
        c.body
        for c in forge_world.forge.comments(kind, name, issue.number)  # type: ignore[arg-type]
        if c.author == BOT_LOGIN
    ]
    assert len(comments) == 1
    assert "1 were merged and 4 closed" in comments[0] and "(20% merged)" in comments[0]
    assert "30%" in comments[0] and f"ribbit resume --repo {forge}:{name}" in comments[0]
    # The forge keeps a hidden marker after the text; the receiver gets the text alone.
    assert len(notify_receiver[1].texts) == 1 and comments[0].startswith(
        notify_receiver[1].texts[0]
    )

    # More closed PRs while paused: no second pause, no second message.
    _outcomes(store, forge, name, "cc")
    assert (
        check_repository(
            store, settings, forge_factory(settings), forge, name, issue_number=issue.number
        )
        is None
    )
    bot_comments = [
        c
        for c in forge_world.forge.comments(kind, name, issue.number)
        if c.author == BOT_LOGIN  # type: ignore[arg-type]
    ]
    assert len(bot_comments) == 1 and len(notify_receiver[1].texts) == 1


def test_noise_resume_is_a_fresh_start_and_a_down_receiver_is_retried(
    forge_world: ForgeWorld,
    noisy: tuple[WorkerSettings, JobStore],
    notify_receiver: tuple[str, NotifyReceiver],
) -> None:
    settings, store = noisy
    repo = forge_world.github
    forge, name = repo.forge, repo.full_name
    notify_receiver[1].status = 503
    _outcomes(store, forge, name, "ccccc")
    assert check_repository(store, settings, forge_factory(settings), forge, name) is not None
    assert notify_receiver[1].texts == []  # no issue to comment on, and the receiver is down
    notify_receiver[1].status = 200
    check_repository(
        store, settings, forge_factory(settings), forge, name
    )  # still paused: only the message goes
    assert (
        len(notify_receiver[1].texts) == 1
        and "0 were merged and 5 closed" in notify_receiver[1].texts[0]
    )
    with store.db.session() as session:
        (row,) = session.query(NoisePause).all()
        assert row.notified_at is not None

    store.resume(forge=forge, repo=name)
    # The outcomes that caused the pause do not pause it again after the resume.
    _outcomes(store, forge, name, "c", days_ago=0)
    assert check_repository(store, settings, forge_factory(settings), forge, name) is None
    assert store.paused_scopes() == []


def test_noise_control_is_off_by_default(
    forge_world: ForgeWorld, forge_settings: WorkerSettings
) -> None:
    db = Database(forge_settings.effective_database_url)
    db.migrate()
    store = JobStore(db)
    _outcomes(store, "github", forge_world.github.full_name, "cccccccccccc")
    assert (
        check_repository(
            store,
            forge_settings,
            forge_factory(forge_settings),
            "github",
            forge_world.github.full_name,
        )
        is None
    )
    assert store.paused_scopes() == []
    db.dispose()


def test_noise_a_recorded_outcome_runs_the_check(
    forge_world: ForgeWorld,
    noisy: tuple[WorkerSettings, JobStore],
    notify_receiver: tuple[str, NotifyReceiver],
) -> None:
    """The outcome pipeline (a bot PR closed on the forge) is what pauses the repository."""
    from bot.store.jobs import JobSpec
    from worker.jobs import JobContext
    from worker.pipelines.outcomes import record_outcome

    settings, store = noisy
    forge, full = forge_world.forge, forge_world.github.full_name
    issue = forge.create_issue("github", full, title="bug", author="maya")
    repo = forge.repo("github", full)
    repo.git("branch", "ribbit/issue-1-x", "main")
    pr = forge.add_pull_record(
        repo, BOT_LOGIN, "Fix", f"Fixes #{issue.number}", "ribbit/issue-1-x", "main", draft=True
    )
    forge.close_pull_request("github", full, pr.number, actor="maya")
    _outcomes(store, "github", full, "mccc")
    with store.db.session() as session:
        job = store.create(
            session,
            JobSpec(
                kind="outcome",
                forge="github",
                repo=full,
                issue_number=issue.number,
                pr_number=pr.number,
            ),
        )
        assert job is not None
        job_id = job.id
    assert (
        record_outcome(
            JobContext(store.get(job_id), settings, store, forge_factory(settings))
        ).state
        == "closed"
    )
    assert store.paused_scopes() == [f"github:{full}"]
    assert (
        len(notify_receiver[1].texts) == 1
        and "1 were merged and 4 closed" in notify_receiver[1].texts[0]
    )
