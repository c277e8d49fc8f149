"""bot/web/handlers/comments.py: `/ribbit <command>` on an issue or on one of the bot's PRs."""

from __future__ import annotations

from bot.store.payloads import CommandOrder, UnknownWord
from bot.store.tables import Job
from bot.web.events import Actor, CommentCreated
from bot.web.handlers import comments, registry
from tests.unit.bot.handlers.desk import ALICE, BOT_LOGIN, FORGE, REPO, HandlerDesk, decided

ISSUE = 3
PR = 9


def comment(
    body: str, *, pr: int | None = None, actor: Actor = ALICE, outsider: bool = False
) -> CommentCreated:
    return CommentCreated(
        forge=FORGE,
        repo=REPO,
        actor=actor,
        delivery_id="d-comment",
        installation_id=42,
        issue_number=None if pr else ISSUE,
        pr_number=pr,
        body=body,
        comment_id=77,
        outsider=outsider,
    )


def bot_pr(desk: HandlerDesk) -> Job:
    """The bot's PR for ISSUE, as its finished solve job records it."""
    return desk.seed("solve", issue=ISSUE, pr=PR, state="succeeded")


def test_comment_created_routes_to_run_command() -> None:
    assert registry.handlers_for("comment.created") == [comments.run_command]


def test_bot_own_comment_is_ignored(desk: HandlerDesk) -> None:
    for actor in (Actor(BOT_LOGIN), Actor("RIBBIT-BOT"), Actor("ci[bot]", is_bot=True)):
        ctx = desk.dispatch(comment("/ribbit retry", actor=actor))
        assert decided(ctx) == (None, "comment by the bot itself", 0), actor


def test_comment_without_a_command_is_ignored(desk: HandlerDesk) -> None:
    # Quoting someone's command, a longer word, or the prefix mid-line runs nothing.
    for body in ("thanks!", "> /ribbit retry", "/ribbitx retry", "please /ribbit retry", ""):
        ctx = desk.dispatch(comment(body))
        assert decided(ctx) == (None, "comment has no /ribbit command", 0), body


def test_command_prefix_comes_from_the_settings(desk: HandlerDesk) -> None:
    frog = desk.settings.model_copy(update={"command_prefix": "/frog"})
    assert desk.dispatch(comment("/ribbit explain"), settings=frog).jobs == []
    assert decided(desk.dispatch(comment("/frog explain"), settings=frog)) == (None, None, 1)


def test_outsider_command_costs_nothing(desk: HandlerDesk) -> None:
    desk.seed("solve", issue=ISSUE)
    for body in ("/ribbit retry", "/ribbit stop", "/ribbit help", "/ribbit explain"):
        ctx = desk.dispatch(comment(body, outsider=True))
        reason = "alice is not a collaborator; commands need write access"
        assert decided(ctx) == (None, reason, 0), body
        assert ctx.outsider == "command"
    assert desk.count() == 1


def test_command_on_a_pr_the_bot_did_not_open_is_ignored(desk: HandlerDesk) -> None:
    desk.seed("solve", issue=ISSUE, pr=PR + 1)  # another PR of the bot's
    ctx = desk.dispatch(comment("/ribbit revise", pr=PR))
    assert decided(ctx) == (None, f"PR/MR {PR} was not opened by Ribbit", 0)


def test_explain_on_an_issue_and_on_the_bots_pr(desk: HandlerDesk) -> None:
    [job] = desk.stored(desk.dispatch(comment("/ribbit explain")))
    assert (job.kind, job.issue_number, job.pr_number, job.payload) == (
        "explain",
        ISSUE,
        None,
        None,
    )
    assert (job.actor, job.delivery_id, job.installation_id) == ("alice", "d-comment", 42)
    bot_pr(desk)
    [job] = desk.stored(desk.dispatch(comment("/ribbit explain", pr=PR)))
    # On the PR, the job names the issue the PR works on.
    assert (job.kind, job.issue_number, job.pr_number) == ("explain", ISSUE, PR)


def test_help_names_the_unknown_word(desk: HandlerDesk) -> None:
    [job] = desk.stored(desk.dispatch(comment("/ribbit Frobnicate now")))
    assert (job.kind, job.payload) == ("help", UnknownWord("frobnicate"))
    for body in ("/ribbit help", "/ribbit"):  # asked for, not a wrong word: nothing to name
        [job] = desk.stored(desk.dispatch(comment(body)))
        assert (job.kind, job.payload) == ("help", None), body


def test_stop_without_an_active_job_is_ignored(desk: HandlerDesk) -> None:
    desk.seed("solve", issue=ISSUE, state="failed")
    desk.seed("solve", issue=ISSUE + 1)  # another issue's job is not this one's to stop
    ctx = desk.dispatch(comment("/ribbit stop"))
    assert decided(ctx) == (None, "nothing to stop: no queued or running job for this issue", 0)


def test_stop_names_the_active_job_for_the_worker(desk: HandlerDesk) -> None:
    active = desk.seed("solve", issue=ISSUE, state="running")
    [job] = desk.stored(desk.dispatch(comment("/ribbit stop")))
    assert (job.kind, job.issue_number) == ("command", ISSUE)
    assert job.payload == CommandOrder("stop", active.id)
    # Intake records the order; the job itself is the worker's to cancel.
    assert desk.store.get(active.id).state == "running"


def test_retry_without_an_active_job(desk: HandlerDesk) -> None:
    ctx = desk.dispatch(comment("/ribbit retry use the v2 API\nand keep the tests"))
    [job] = desk.stored(ctx)
    assert (job.kind, job.issue_number, job.pr_number) == ("command", ISSUE, None)
    assert job.payload == CommandOrder("retry", None, "use the v2 API\nand keep the tests")


def test_retry_of_an_active_job_names_it(desk: HandlerDesk) -> None:
    active = desk.seed("solve", issue=ISSUE)
    [job] = desk.stored(desk.dispatch(comment("/ribbit retry")))
    assert job.payload == CommandOrder("retry", active.id, "")


def test_revise_on_the_issue_is_ignored(desk: HandlerDesk) -> None:
    ctx = desk.dispatch(comment("/ribbit revise rename it"))
    reason = "/ribbit revise works on the bot's pull request, not the issue"
    assert decided(ctx) == (None, reason, 0)


def test_revise_on_the_bots_pr(desk: HandlerDesk) -> None:
    bot_pr(desk)
    [job] = desk.stored(desk.dispatch(comment("/ribbit revise rename it", pr=PR)))
    assert (job.kind, job.issue_number, job.pr_number) == ("command", ISSUE, PR)
    assert job.payload == CommandOrder("revise", None, "rename it")
    active = desk.seed("revise", issue=ISSUE, pr=PR, state="running")
    [job] = desk.stored(desk.dispatch(comment("/ribbit revise", pr=PR)))
    assert job.payload == CommandOrder("revise", active.id, "")


def test_retry_and_revise_are_refused_past_admission(desk: HandlerDesk) -> None:
    bot_pr(desk)  # one agent job today
    spent = desk.with_admission(daily_jobs_per_repo=1)
    for body, pr in (("/ribbit retry", None), ("/ribbit revise", PR), ("/ribbit revise", None)):
        refusal, ignored, jobs = decided(desk.dispatch(comment(body, pr=pr), settings=spent))
        assert refusal is not None and refusal.startswith("daily job budget of 1"), body
        assert (ignored, jobs) == (None, 0)
    outside = desk.with_admission(allowed_repos=["acme/other"])
    ctx = desk.dispatch(comment("/ribbit retry"), settings=outside)
    reason = f"repository {FORGE}:{REPO} is not in RIBBIT_ADMISSION__ALLOWED_REPOS"
    assert decided(ctx) == (reason, None, 0)


def test_stop_help_and_explain_spend_no_budget(desk: HandlerDesk) -> None:
    desk.seed("solve", issue=ISSUE, state="running")
    spent = desk.with_admission(daily_jobs_per_repo=0)
    for body in ("/ribbit stop", "/ribbit help", "/ribbit oops", "/ribbit explain"):
        assert decided(desk.dispatch(comment(body), settings=spent)) == (None, None, 1), body


def test_command_while_paused_is_held(desk: HandlerDesk) -> None:
    desk.store.pause()
    ctx = desk.dispatch(comment("/ribbit retry"))
    [job] = desk.stored(ctx)
    assert job.held
    assert ctx.notes == [f"job {job.id} held: the bot is paused"]
