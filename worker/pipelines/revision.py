"""What a revise job needs beyond a solve: the pull request it may revise, and the brief
that tells the agent what the reviewers said.

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


def revision_brief(forge: Forge, ref: PullRequestRef, job: Job) -> str:
    """The agent's extra instructions for a revision: the PR's current diff, what the
    reviewers wrote (the bot's own words left out) and what the job's asker typed."""
    diff = forge.get_pull_request_diff(ref)
    notes = review_notes(forge, ref)
    instructions = _asked(job)
    parts = [
        "This is a revision of your earlier pull request. Its current diff:",
        f"```diff\n{diff[:MAX_DIFF_CHARS]}\n```",
    ]
    if notes:
        parts += ["Review comments:", "\n".join(notes[-MAX_REVIEW_NOTES:])]
    if instructions:
        parts += ["The reviewer asks:", instructions]
    return "\n\n".join(parts)


def review_notes(forge: Forge, ref: PullRequestRef) -> list[str]:
    """One line per review comment, then per review with a body, never the bot's own."""
    notes = []
    for c in forge.list_review_comments(ref):
        if c.author == forge.bot_login:
            continue
        where = f"{c.path}:{c.line}" if c.path else "conversation"
        notes.append(f"- {c.author} on {where}: {c.body.strip()}")
    for r in forge.list_reviews(ref):
        if r.author != forge.bot_login and r.body.strip():
            notes.append(f"- review by {r.author} ({r.state}): {r.body.strip()}")
    return notes


def _asked(job: Job) -> str:
    """The text a person gave the job (a ``/ribbit revise <what>``, a review); a payload
    this code cannot read is no text rather than a failed revision."""
    try:
        asked = job.payload
    except PayloadError:
        return ""
    return asked.text.strip() if isinstance(asked, PersonAsks) else ""
