"""bot/web/handlers/issues.py: a trigger label asks for a solve job, within admission."""

from __future__ import annotations

from dataclasses import replace

from sqlalchemy.orm import Session

from bot.store.jobs import IntakeView, JobState, JobStore
from bot.web.events import Actor, IssueLabeled
from bot.web.handlers import issues, registry
from tests.unit.bot.handlers.desk import ALICE, BOT_LOGIN, FORGE, REPO, HandlerDesk, decided


def labeled(
    number: int = 3, label: str = "ribbit", actor: Actor = ALICE, repo: str = REPO
) -> IssueLabeled:
    return IssueLabeled(
        forge=FORGE,
        repo=repo,
        actor=actor,
        delivery_id=f"d-{number}-{label}",
        installation_id=42,
        issue_number=number,
        label=label,
    )


def test_issues_labeled_routes_to_enqueue_solve() -> None:
    assert registry.handlers_for("issues.labeled") == [issues.enqueue_solve]


def test_trigger_label_creates_a_solve_job_with_the_delivery(desk: HandlerDesk) -> None:
    ctx = desk.dispatch(labeled(3))
    assert decided(ctx) == (None, None, 1)
    [job] = desk.stored(ctx)
    assert (job.kind, job.state, job.forge, job.repo) == ("solve", "queued", FORGE, REPO)
    assert (job.issue_number, job.pr_number, job.parent_id) == (3, None, None)
    assert (job.actor, job.delivery_id, job.installation_id) == ("alice", "d-3-ribbit", 42)
    assert job.payload is None
    assert not job.held
    assert ctx.notes == []


def test_label_added_by_the_bot_is_ignored(desk: HandlerDesk) -> None:
    for actor in (Actor("renovate[bot]", is_bot=True), Actor(BOT_LOGIN), Actor("Ribbit-Bot")):
        ctx = desk.dispatch(labeled(actor=actor))
        assert decided(ctx) == (None, "label added by the bot itself", 0), actor
    assert desk.count() == 0


def test_other_label_is_ignored_with_its_name(desk: HandlerDesk) -> None:
    ctx = desk.dispatch(labeled(label="bug"))
    assert decided(ctx) == (None, "label 'bug' is not the trigger label", 0)
    # The label is compared whole, not by prefix or case.
    for near in ("ribbit-later", "Ribbit", "ribbit "):
        assert desk.dispatch(labeled(label=near)).jobs == [], near


def test_label_named_by_the_repositorys_config_triggers_too(desk: HandlerDesk) -> None:
    desk.store.set_trigger_label(FORGE, REPO, "fix-me")
    assert decided(desk.dispatch(labeled(3, label="fix-me"))) == (None, None, 1)
    # The settings' label still works there; another repository's label does not.
    assert decided(desk.dispatch(labeled(4, label="ribbit"))) == (None, None, 1)
    assert desk.dispatch(labeled(5, label="fix-me", repo="acme/other")).jobs == []


def test_spent_daily_budget_refuses(desk: HandlerDesk) -> None:
    desk.seed("solve", issue=1, state="succeeded")
    desk.seed("revise", issue=2, pr=9, state="failed")
    desk.seed("explain", issue=5)  # replies are not agent work: they spend no budget
    ctx = desk.dispatch(labeled(3), settings=desk.with_admission(daily_jobs_per_repo=2))
    refusal, ignored, jobs = decided(ctx)
    assert (ignored, jobs) == (None, 0)
    assert refusal is not None
    assert refusal.startswith(f"daily job budget of 2 for {FORGE}:{REPO} is spent")
    # One more job a day, and the same delivery is accepted.
    ctx = desk.dispatch(labeled(3), settings=desk.with_admission(daily_jobs_per_repo=3))
    assert decided(ctx) == (None, None, 1)


def test_budget_of_another_repository_does_not_count(desk: HandlerDesk) -> None:
    desk.seed("solve", issue=1, repo="acme/other")
    ctx = desk.dispatch(labeled(3), settings=desk.with_admission(daily_jobs_per_repo=1))
    assert decided(ctx) == (None, None, 1)


def test_repository_outside_the_allow_list_is_refused(desk: HandlerDesk) -> None:
    refused = f"repository {FORGE}:{REPO} is not in RIBBIT_ADMISSION__ALLOWED_REPOS"
    # The same name on the other forge is another repository.
    for allowed in (["acme/other"], ["gitlab:acme/widgets"], ["acme/widgets-fork"]):
        ctx = desk.dispatch(labeled(3), settings=desk.with_admission(allowed_repos=allowed))
        assert decided(ctx) == (refused, None, 0), allowed
    for allowed in (["acme/widgets"], ["GitHub:ACME/Widgets"]):
        issue = 10 + len(allowed[0])
        ctx = desk.dispatch(labeled(issue), settings=desk.with_admission(allowed_repos=allowed))
        assert decided(ctx) == (None, None, 1), allowed


def test_issue_with_an_active_job_is_ignored_naming_it(desk: HandlerDesk) -> None:
    states: tuple[JobState, ...] = ("queued", "running")
    for state in states:
        active = desk.seed("solve", issue=3, state=state)
        ctx = desk.dispatch(labeled(3))
        assert decided(ctx) == (None, f"issue already has active job {active.id}", 0)
        desk.store.transition(active.id, "cancelled")


def test_finished_jobs_and_other_issues_do_not_block(desk: HandlerDesk) -> None:
    desk.seed("solve", issue=3, state="failed")
    desk.seed("revise", issue=3, pr=9, state="succeeded")
    desk.seed("solve", issue=4, state="running")
    desk.seed("command", issue=3)  # a queued command is no agent job
    assert decided(desk.dispatch(labeled(3))) == (None, None, 1)


def test_paused_bot_or_repository_keeps_the_job_held(desk: HandlerDesk) -> None:
    desk.store.pause(forge=FORGE, repo=REPO)
    ctx = desk.dispatch(labeled(3))
    [job] = desk.stored(ctx)
    assert job.held
    assert ctx.notes == [f"job {job.id} held: the bot is paused"]
    # Another repository is not held back by this one's pause...
    assert not desk.stored(desk.dispatch(labeled(3, repo="acme/other")))[0].held
    # ...but is by the whole bot's.
    desk.store.pause()
    assert desk.stored(desk.dispatch(labeled(4, repo="acme/other")))[0].held


class StaleViewStore(JobStore):
    """A store whose view missed the job a concurrent delivery inserted just before."""

    def intake_view(
        self, session: Session, forge: str, repo: str, issue_number: int | None
    ) -> IntakeView:
        return replace(super().intake_view(session, forge, repo, issue_number), active_job_id=None)


def test_job_created_by_a_concurrent_delivery_is_not_doubled(desk: HandlerDesk) -> None:
    desk.seed("solve", issue=3)
    racing = replace(desk, store=StaleViewStore(desk.db))
    ctx = racing.dispatch(labeled(3))
    assert decided(ctx) == (None, "issue already has an active job", 0)
    assert desk.count() == 1
