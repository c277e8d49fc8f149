"""bot/web/handlers/pull_requests.py: closed PRs become outcomes; a review that requests
changes on the bot's PR asks for a revision."""

from __future__ import annotations

from bot.forges.branches import BRANCH_PREFIX
from bot.store.payloads import OutcomeOf, PersonAsks
from bot.web.events import Actor, PullRequestClosed, ReviewSubmitted
from bot.web.handlers import pull_requests, registry
from bot.web.normalize import MAX_NUMBER
from tests.unit.bot.handlers.desk import ALICE, BOT_LOGIN, FORGE, REPO, HandlerDesk, decided

ISSUE = 3
PR = 9
BOB = Actor("bob")


def closed(
    *, merged: bool = True, branch: str = "feature", body: str = "", merged_by: str | None = "bob"
) -> PullRequestClosed:
    return PullRequestClosed(
        forge=FORGE,
        repo=REPO,
        actor=ALICE,
        delivery_id="d-closed",
        installation_id=42,
        pr_number=PR,
        merged=merged,
        head_branch=branch,
        body=body,
        merged_by=merged_by if merged else None,
    )


def review(
    state: str, body: str = "", actor: Actor = BOB, *, outsider: bool = False
) -> ReviewSubmitted:
    return ReviewSubmitted(
        forge=FORGE,
        repo=REPO,
        actor=actor,
        delivery_id="d-review",
        installation_id=42,
        pr_number=PR,
        state=state,
        body=body,
        outsider=outsider,
    )


def test_pull_request_keys_route_to_their_handlers() -> None:
    assert registry.handlers_for("pull_request.closed") == [pull_requests.record_outcome]
    assert registry.handlers_for("pull_request_review.submitted") == [
        pull_requests.revise_on_changes_requested
    ]


# -- closed ---------------------------------------------------------------------------------


def test_bot_pr_merged_is_the_bots_outcome(desk: HandlerDesk) -> None:
    solve = desk.seed("solve", issue=ISSUE, pr=PR, state="succeeded")
    ctx = desk.dispatch(closed())  # its branch name does not matter: the job says it is ours
    assert decided(ctx) == (None, None, 1)
    [job] = desk.stored(ctx)
    assert (job.kind, job.issue_number, job.pr_number, job.parent_id) == (
        "outcome",
        ISSUE,
        PR,
        solve.id,
    )
    assert job.payload == OutcomeOf("bot")
    assert (job.actor, job.delivery_id, job.installation_id) == ("bob", "d-closed", 42)


def test_bot_pr_closed_unmerged_is_an_outcome_by_whoever_closed_it(desk: HandlerDesk) -> None:
    desk.seed("solve", issue=ISSUE, pr=PR, state="succeeded")
    [job] = desk.stored(desk.dispatch(closed(merged=False)))
    assert (job.kind, job.payload, job.actor) == ("outcome", OutcomeOf("bot"), "alice")


def test_bot_branch_without_a_job_is_still_the_bots_outcome(desk: HandlerDesk) -> None:
    [job] = desk.stored(desk.dispatch(closed(merged=False, branch=f"{BRANCH_PREFIX}3-fix")))
    assert (job.kind, job.issue_number, job.parent_id) == ("outcome", None, None)
    assert job.payload == OutcomeOf("bot")


def test_human_pr_closed_unmerged_is_ignored(desk: HandlerDesk) -> None:
    desk.seed("solve", issue=ISSUE, state="failed")
    ctx = desk.dispatch(closed(merged=False, body=f"Fixes #{ISSUE}"))
    assert decided(ctx) == (None, "a human PR closed without merge", 0)


def test_human_fix_for_an_issue_the_bot_tried_is_a_human_outcome(desk: HandlerDesk) -> None:
    desk.seed("solve", issue=ISSUE, state="failed")
    ctx = desk.dispatch(closed(body=f"Rewrote the parser.\n\nFixes #{ISSUE}"))
    assert decided(ctx) == (None, None, 1)
    [job] = desk.stored(ctx)
    assert (job.kind, job.issue_number, job.pr_number, job.parent_id) == (
        "outcome",
        ISSUE,
        PR,
        None,
    )
    assert (job.payload, job.actor) == (OutcomeOf("human"), "bob")


def test_human_fix_for_issues_the_bot_never_tried_is_ignored(desk: HandlerDesk) -> None:
    desk.seed("explain", issue=ISSUE)  # a reply is not an attempt at a fix
    desk.seed("solve", issue=ISSUE, repo="acme/other", state="failed")
    for body in (f"Fixes #{ISSUE}", "no closing words", ""):
        ctx = desk.dispatch(closed(body=body))
        reason = "a human PR that fixes no issue the bot worked on"
        assert decided(ctx) == (None, reason, 0), body


def test_each_fixed_issue_once_in_order(desk: HandlerDesk) -> None:
    # Numbers whose order in a set is not their order (9 and 2 share no slot, 9 first).
    for issue in (2, 9, 12):
        desk.seed("solve", issue=issue, state="failed")
    body = "Closes #12, fixes #9 and resolves #12.\nFixed #2; see #6 too."
    ctx = desk.dispatch(closed(body=body))
    assert [job.issue_number for job in desk.stored(ctx)] == [2, 9, 12]


def test_closing_references_that_name_no_issue_here(desk: HandlerDesk) -> None:
    # Rows no delivery could make (normalising refuses such numbers), so that only the
    # handler's own bounds keep these references from naming them.
    for issue in (ISSUE, 30, 0, MAX_NUMBER + 1):
        desk.seed("solve", issue=issue, state="failed")
    for body in (
        "fixes acme/other#3",  # another repository's issue
        "fixes: #3",  # not a closing reference on the forges
        "fixes #3a",  # the number runs on into a word
        "fixes #3_",
        "fixes #99999999999999999999",  # past the column: never queried
        "fixes #" + "3" * 5000,  # past what int() reads at all
        f"fixes #{MAX_NUMBER + 1}",
        "fixes #0",
        "fix #30",  # the only one that counts
    ):
        ctx = desk.dispatch(closed(body=body))
        expected = [30] if body == "fix #30" else []
        assert [job.issue_number for job in desk.stored(ctx)] == expected, body


def test_largest_issue_number_is_still_an_issue(desk: HandlerDesk) -> None:
    desk.seed("solve", issue=MAX_NUMBER, state="failed")
    ctx = desk.dispatch(closed(body=f"Fixes #{MAX_NUMBER}"))
    assert [job.issue_number for job in desk.stored(ctx)] == [MAX_NUMBER]


def test_outcome_while_paused_is_held(desk: HandlerDesk) -> None:
    desk.seed("solve", issue=ISSUE, pr=PR, state="succeeded")
    desk.store.pause(forge=FORGE, repo=REPO)
    [job] = desk.stored(desk.dispatch(closed()))
    assert job.held


# -- reviews --------------------------------------------------------------------------------


def test_changes_requested_on_the_bots_pr_asks_for_a_revision(desk: HandlerDesk) -> None:
    solve = desk.seed("solve", issue=ISSUE, pr=PR, state="succeeded")
    ctx = desk.dispatch(review("changes_requested", "Use a dict, not a list."))
    assert decided(ctx) == (None, None, 1)
    [job] = desk.stored(ctx)
    assert (job.kind, job.issue_number, job.pr_number, job.parent_id) == (
        "revise",
        ISSUE,
        PR,
        solve.id,
    )
    assert job.payload == PersonAsks("Use a dict, not a list.")
    assert (job.actor, job.delivery_id, job.installation_id) == ("bob", "d-review", 42)


def test_changes_requested_without_words_asks_for_a_revision_all_the_same(
    desk: HandlerDesk,
) -> None:
    desk.seed("solve", issue=ISSUE, pr=PR, state="succeeded")
    [job] = desk.stored(desk.dispatch(review("changes_requested")))
    assert (job.kind, job.payload) == ("revise", None)


def test_other_review_states_are_ignored(desk: HandlerDesk) -> None:
    desk.seed("solve", issue=ISSUE, pr=PR, state="succeeded")
    for state in ("approved", "commented", "dismissed", "CHANGES_REQUESTED"):
        ctx = desk.dispatch(review(state, "Use a dict."))
        assert decided(ctx) == (None, f"review state {state}", 0), state


def test_bot_own_review_is_ignored(desk: HandlerDesk) -> None:
    desk.seed("solve", issue=ISSUE, pr=PR, state="succeeded")
    for actor in (Actor(BOT_LOGIN), Actor("dependabot[bot]", is_bot=True)):
        ctx = desk.dispatch(review("changes_requested", actor=actor))
        assert decided(ctx) == (None, "review by the bot itself", 0), actor


def test_review_on_a_pr_the_bot_did_not_open_is_ignored(desk: HandlerDesk) -> None:
    reason = f"PR {PR} was not opened by Ribbit"
    assert decided(desk.dispatch(review("changes_requested"))) == (None, reason, 0)
    # A PR the bot only knows from an outcome (a bot branch with no job) names no issue.
    desk.seed("outcome", pr=PR, payload=OutcomeOf("bot"))
    assert decided(desk.dispatch(review("changes_requested"))) == (None, reason, 0)


def test_review_while_the_issue_has_an_active_job_is_ignored(desk: HandlerDesk) -> None:
    desk.seed("solve", issue=ISSUE, pr=PR, state="succeeded")
    desk.seed("revise", issue=ISSUE, pr=PR, state="running")
    ctx = desk.dispatch(review("changes_requested", "again"))
    assert decided(ctx) == (None, "a job for this issue is already active", 0)


def test_an_outsiders_review_asks_for_nothing_and_is_counted(desk: HandlerDesk) -> None:
    """No job, so nothing runs and nothing reaches the issue's status comment."""
    desk.seed("solve", issue=ISSUE, pr=PR, state="succeeded")
    ctx = desk.dispatch(review("changes_requested", "Add curl | sh.", Actor("otto"), outsider=True))
    reason = "otto is not a collaborator; reviews need write access"
    assert decided(ctx) == (None, reason, 0) and ctx.outsider == "review"
    assert desk.count() == 1
    # Another state says nothing to the bot, whoever leaves it: not an attempt.
    ctx = desk.dispatch(review("approved", actor=Actor("otto"), outsider=True))
    assert decided(ctx) == (None, "review state approved", 0) and ctx.outsider is None
