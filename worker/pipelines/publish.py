"""Publishing a gated change: commit, push, draft PR, commit status, gate review and the
issue's status comment, plus the markdown the PR body and the comments are made of.

    PublishPlan (bot/store/records/publish.py, in the job's record) -> commit -> push
        -> find or open the PR -> commit status + gate review on the head -> the PR's
        fields in the record

Every step is safe to repeat, so a rerun after a lost answer, a 5xx or a killed worker
resumes from the stored plan (:meth:`Publisher.publish`). The commit is made on a host
clone the sandbox never touched, with the sandbox's diff applied, so nothing the
untrusted code wrote into its own ``.git`` (hooks, config) ever runs on the host.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bot.forges.base import CommitStatus, DraftPullRequest, Forge, PullRequest
from bot.forges.sanitize import sanitize_forge_text, sanitize_forge_title
from bot.hostgit import git_ok, identity
from bot.store.records import PublishPlan, SolveRecord
from bot.store.records.gate_report import UNVERIFIED_NOTE, Verdict
from worker.gates import review
from worker.jobs import JobContext, JobRefused
from worker.pipelines.workspace import Stages, Workdir
from worker.repo_config import RepoConfig
from worker.status import Status, StatusComment

if TYPE_CHECKING:
    from worker.sandbox.repoimage import ImageChoice
    from worker.sandbox.setup import SetupResult


BOT_NAME = "Ribbit"
BOT_EMAIL = "ribbit@users.noreply.local"
MAX_SUMMARY_CHARS = 4000
BOT_IDENTITY = identity(BOT_NAME, BOT_EMAIL)


def commit_message(issue_title: str, job_id: str, *, revise: bool) -> str:
    # A closing keyword in a commit message closes issues once merged; the title is
    # anyone's text, and sanitised with the prefix, which is a keyword itself ("Fix:"
    # before a title "#7 crashes" closes #7).
    subject = sanitize_forge_title(f"{'Revise' if revise else 'Fix'}: {issue_title}", limit=72)
    return f"{subject}\n\nMachine-written by {BOT_NAME} (job {job_id}); needs human review."


def pr_title(issue_title: str, number: int) -> str:
    # A squash merge makes the title a commit subject on the default branch, where a
    # closing keyword closes issues; the issue's own number is kept whole at the end.
    return sanitize_forge_title(issue_title, suffix=f"(#{number})")


# -- markdown --------------------------------------------------------------------------------


def sanitize_model_text(text: str) -> str:
    """Model output shown in a PR body must not ping people or close other issues."""
    return sanitize_forge_text(text)


_ISSUE_LINKS = {"fixes": "Fixes #{}", "closes": "Closes #{}", "refs": "Refs #{}", "none": ""}
_CLOSING = ("fixes", "closes")
# What an unverified draft's body opens with.
UNVERIFIED_WARNING = f"> [!WARNING]\n> {UNVERIFIED_NOTE}"


def issue_link(config: RepoConfig, number: int, *, verified: bool = True) -> str:
    """How the PR names its issue. An unverified patch never uses a closing keyword:
    merging what no test shows to be a fix must not close the bug."""
    link = config.link_issue
    if not verified and link in _CLOSING:
        link = "refs"
    return _ISSUE_LINKS[link].format(number)


def as_unverified(body: str, issue: int, verdict: Verdict = Verdict.BEFORE_EVIDENCE) -> str:
    """A published PR body as an unverified draft's reads (``ribbit prs rejudge``): Ribbit's
    own closing line for ``issue`` (a whole line, as :func:`pr_body` writes it) becomes
    a reference, the report's "passed" heading says ``verdict`` instead, and the warning
    opens the body. Unchanged when it already reads so: applying it twice is applying it
    once."""
    refs = _ISSUE_LINKS["refs"].format(issue)
    swap = {_ISSUE_LINKS[link].format(issue): refs for link in _CLOSING}
    swap[Verdict.VERIFIED.heading] = verdict.heading
    out = "\n".join(_swapped(line, swap) for line in body.split("\n"))
    # The warning at the top, not its words anywhere: the summary is the model's text.
    warned = out.replace("\r\n", "\n").startswith(UNVERIFIED_WARNING)
    return out if warned else f"{UNVERIFIED_WARNING}\n\n{out}"


def _swapped(line: str, swap: dict[str, str]) -> str:
    # A body edited on the web comes back with CRLF line ends; they are kept.
    text = line.removesuffix("\r")
    return swap.get(text, text) + line[len(text) :]


def pr_body(
    *,
    config: RepoConfig,
    issue: int,
    summary: str,
    report_md: str,
    model: str,
    exit_reason: str,
    turns: int,
    seconds: float,
    job_id: str,
    setup_md: str = "",
    job_link: str | None = None,
    verdict: Verdict,
) -> str:
    parts = []
    if verdict is Verdict.UNVERIFIED:
        parts += [UNVERIFIED_WARNING, ""]
    link = issue_link(config, issue, verified=verdict is Verdict.VERIFIED)
    if link:
        parts.append(link)
    parts += [
        "",
        "> [!IMPORTANT]",
        f"> This change was written by a machine ({BOT_NAME}, model `{model}`) and needs "
        "human review. Ribbit never merges, approves, or marks its pull requests ready.",
        "",
        "### Summary (from the agent)",
        "",
        sanitize_model_text(summary.strip()[:MAX_SUMMARY_CHARS]) or "_(no summary)_",
        "",
        sanitize_forge_text(report_md.strip()),  # test ids and paths come from the patch
        "",
        # What set-up printed or asked the network for comes from the repository.
        *([sanitize_forge_text(setup_md.strip()), ""] if setup_md.strip() else []),
        "### Run",
        "",
        f"- ended: `{exit_reason}` after {turns} model turns, {seconds:.0f} s",
        f"- job: `{job_id}`",
        *([f"- every turn, the diff and the gate logs: [job page]({job_link})"] * bool(job_link)),
    ]
    return "\n".join(parts) + "\n"


def image_markdown(image: ImageChoice) -> str:
    """The PR body's word on the repository's own image: which one ran, or why not."""
    if image.requested is None:
        return ""
    if image.note:
        return f"### Sandbox image\n\n{image.note}"
    how = " (built for this job)" if image.built else ""
    return (
        f"### Sandbox image\n\n- `{image.image}`{how}, for the repository's "
        f"{image.requested.describe()}"
    )


def setup_markdown(setup: SetupResult) -> str:
    """The PR body's setup section: what ran, and any request the network refused."""
    if setup.command is None:
        return ""
    lines = ["### Setup", "", f"- `{setup.command}`: succeeded in {setup.duration_s:.0f} s"]
    if setup.blocked:
        lines += ["", setup.blocked_markdown()]
    return "\n".join(lines)


# -- the publisher ---------------------------------------------------------------------------


class Publisher:
    """Publishes one job's plan through its forge: commit on the job's host clone, push,
    the draft PR, the head's status and gate review, the issue's status comment."""

    def __init__(
        self,
        forge: Forge,
        ctx: JobContext,
        *,
        workdir: Workdir,
        status: StatusComment,
        stages: Stages,
    ) -> None:
        self.forge, self.ctx = forge, ctx
        self.repo = ctx.job.repo_ref
        self.workdir, self.status, self.stages = workdir, status, stages

    def publish(self, plan: PublishPlan, record: SolveRecord) -> SolveRecord:
        """Commit, push and open (or update) the PR, each step safe to repeat: the commit
        is rebuilt byte for byte from the plan (same tree, parent, message and dates, so
        the same sha), the push of a branch already at that sha changes nothing, and the
        PR is looked up before it is created. The plan is stored before the push, so a
        rerun after a lost answer, a 5xx or a killed worker resumes here."""
        with self.stages("push"):
            head_sha = self.push(plan, record)
        with self.stages("pull_request"):
            pr = self.pull_request(plan)
            self.report(pr, head_sha, plan, record)
        return self.published(pr, head_sha, plan, record)

    def push(self, plan: PublishPlan, record: SolveRecord) -> str:
        """The plan's commit on its branch, pushed; the plan is stored first. The head sha."""
        head_sha = self.commit(plan)
        self.ctx.store.record_solve(
            self.ctx.job.id, record.with_(publish=plan.to_dict()), branch=plan.branch
        )
        # Never forced: if a human pushed meanwhile, the push is rejected and the job
        # fails saying so, rather than overwriting their commits.
        self.forge.push(self.repo, self.workdir.checkout, plan.branch)
        return head_sha

    def commit(self, plan: PublishPlan) -> str:
        """The plan's diff committed on its base as the bot, at the plan's date: the same
        plan gives the same sha."""
        checkout = self.workdir.checkout
        bot = BOT_IDENTITY
        # From the recorded base, not whatever the clone's HEAD is now (the default branch
        # may have moved; on a resumed revision the PR head may already be this commit).
        git_ok(checkout, "checkout", "-q", "-B", plan.branch, plan.base_sha, identity=bot)
        patch = self.workdir.root / "agent.patch"
        patch.write_bytes(plan.diff.encode("utf-8", errors="surrogateescape"))
        git_ok(checkout, "apply", "--index", "--whitespace=nowarn", str(patch), identity=bot)
        dated = {**bot, "GIT_AUTHOR_DATE": plan.commit_date, "GIT_COMMITTER_DATE": plan.commit_date}
        git_ok(checkout, "commit", "-q", "--no-verify", "-m", plan.commit_message, identity=dated)
        return git_ok(checkout, "rev-parse", "HEAD", identity=bot).decode(errors="replace").strip()

    def pull_request(self, plan: PublishPlan) -> PullRequest:
        """The branch's open PR with the plan's body: the one found, else a new draft."""
        pr = self.forge.find_pull_request(self.repo, plan.branch)
        if pr is not None and pr.state != "open":
            raise JobRefused(f"PR {pr.ref.number} for {plan.branch} is {pr.state}")
        if pr is None:
            if plan.revise:
                raise JobRefused(f"the pull request for {plan.branch} is gone")
            return self.forge.open_draft_pull_request(
                self.repo,
                DraftPullRequest(
                    head=plan.branch,
                    base=self.forge.default_branch(self.repo),
                    title=plan.title,
                    body=plan.body,
                    labels=plan.labels,
                    reviewers=plan.reviewers,
                ),
            )
        # A revision (or a retry that found its PR): the body shows the new report.
        self.forge.update_pull_request_body(pr.ref, plan.body)
        return pr

    def report(
        self, pr: PullRequest, head_sha: str, plan: PublishPlan, record: SolveRecord
    ) -> None:
        """The gates' verdict on the head: a commit status and the review of findings."""
        self.forge.set_commit_status(
            self.repo,
            head_sha,
            CommitStatus(
                plan.status_state,
                description=(
                    ("Not verified: " if plan.verdict is Verdict.UNVERIFIED else "")
                    + plan.summary_line
                )[:140],
            ),
        )
        review.publish(
            self.forge,
            pr.ref,
            head_sha,
            review.gate_review(
                job_id=self.ctx.job.id,
                head_sha=head_sha,
                passed=plan.passed,
                unverified=plan.verdict is Verdict.UNVERIFIED,
                summary_line=plan.summary_line,
                report_md=plan.report_md,
                gates=record.gates,
                diff=plan.diff,
                details_url=self.status.link,
            ),
        )

    def published(
        self, pr: PullRequest, head_sha: str, plan: PublishPlan, record: SolveRecord
    ) -> SolveRecord:
        """The job's record once published (the plan dropped, the PR's fields in its
        place), the job's PR fields stored and the issue told."""
        record = record.with_(
            publish=None,
            pr_number=pr.ref.number,
            pr_url=pr.url,
            head_sha=head_sha,
            timings=self.stages.timings,
        )
        self.ctx.store.update(
            self.ctx.job.id, pr_number=pr.ref.number, pr_url=pr.url, branch=plan.branch
        )
        verb = "updated" if plan.revise else "opened"
        unverified = (
            " Not verified: no test fails without this patch."
            if plan.verdict is Verdict.UNVERIFIED
            else ""
        )
        self.status.show(
            Status(
                "opened",
                f"Draft PR {verb} (`{plan.summary_line}`).{unverified}",
                pr_url=pr.url,
                report_markdown=plan.report_md,
                verdict=plan.verdict,
            )
        )
        return record
