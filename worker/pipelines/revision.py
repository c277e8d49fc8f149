"""What a revise job needs beyond a solve: the pull request it may revise, and the brief
that tells the agent what the reviewers said.

Reviewers' words reach the agent only when the trust rule admits them
(:mod:`worker.pipelines.trusted_text`): a writer's, under their name.

A revise job is a solve run (:class:`worker.pipelines.solve.SolveRun` with
``revise=True``) on the bot's open PR: it clones the PR's branch, the agent gets the PR's
diff and the reviewers' words on top of the issue, and the new commit goes on the same
branch (:mod:`worker.pipelines.publish`).
"""

from __future__ import annotations

from bot.forges.base import Forge, PullRequest, PullRequestRef
from bot.store.payloads import PayloadError, PersonAsks
from bot.store.tables import Job
from worker.jobs import JobContext, JobRefused
from worker.pipelines.trusted_text import TrustedText
from worker.repo_config import CONFIG_PATH, RepoConfig
from worker.status import Status, StatusComment

MAX_DIFF_CHARS = 20000
MAX_REVIEW_NOTES = 40


def pull_request_to_revise(
    forge: Forge, ctx: JobContext, config: RepoConfig, status: StatusComment
) -> PullRequest:
    """The job's pull request, open and within the repository's revise rules; a refusal
    the issue should hear about (the revision limit) is shown on its status comment."""
    job = ctx.job
    if job.pr_number is None:
        raise JobRefused("revise needs the bot's pull request")
    repo = job.repo_ref
    pr = forge.get_pull_request(PullRequestRef(repo, job.pr_number))
    if pr.state != "open":
        raise JobRefused(f"PR {pr.ref.number} is {pr.state}; nothing to revise")
    # Review-triggered revisions carry the review's job as parent; comment ones don't.
    if job.parent_id is not None and not config.revise.on_changes_requested:
        raise JobRefused(f"{CONFIG_PATH} turns off revisions on review")
    done = ctx.store.revisions_done(job.forge, job.repo, pr.ref.number)
    if done >= config.revise.max_revisions:
        reason = (
            f"PR {pr.ref.number} already has {done} revisions, the limit set "
            f"by revise.max_revisions in {CONFIG_PATH}"
        )
        status.show(Status("refused", reason))
        raise JobRefused(reason)
    return pr


def revision_brief(forge: Forge, ref: PullRequestRef, job: Job, trust: TrustedText) -> str:
    """The agent's extra instructions for a revision: the PR's current diff, what its
    writers said in review and what the job's asker typed, each under its author's name
    (``trust`` decides whose words may speak; the bot's own never do)."""
    diff = forge.get_pull_request_diff(ref)
    notes = review_notes(forge, ref, trust)
    instructions = _asked(job, trust)
    parts = [
        "This is a revision of your earlier pull request. Its current diff:",
        f"```diff\n{diff[:MAX_DIFF_CHARS]}\n```",
    ]
    if notes:
        parts += ["Review comments:", "\n".join(notes[-MAX_REVIEW_NOTES:])]
    if instructions:
        parts += [f"@{job.actor} asks:", instructions]
    return "\n\n".join(parts)


def review_notes(forge: Forge, ref: PullRequestRef, trust: TrustedText) -> list[str]:
    """One line per writer's review comment, then per writer's review with a body."""
    notes = []
    for c in forge.list_review_comments(ref):
        if not trust.admit("review_comment", c.author):
            continue
        where = f"{c.path}:{c.line}" if c.path else "conversation"
        notes.append(f"- {c.author} on {where}: {c.body.strip()}")
    for r in forge.list_reviews(ref):
        # A review without words says nothing to the agent, whoever left it.
        if r.body.strip() and trust.admit("review", r.author):
            notes.append(f"- review by {r.author} ({r.state}): {r.body.strip()}")
    return notes


def _asked(job: Job, trust: TrustedText) -> str:
    """The text a person gave the job (a ``/ribbit revise <what>``, a review's body), if
    that person may speak; a payload this code cannot read is no text rather than a
    failed revision."""
    try:
        asked = job.payload
    except PayloadError:
        return ""
    if not isinstance(asked, PersonAsks) or not asked.text.strip():
        return ""
    return asked.text.strip() if trust.admit("request", job.actor or "") else ""
