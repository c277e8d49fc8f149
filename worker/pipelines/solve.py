"""solve and revise: from an issue (or a review) to a gated draft pull request.

    permission -> .ribbit.yml -> clone -> sandbox (setup, agent) -> diff -> gates
        -> pass: commit on a host clone, push, open/update the draft PR, commit status
        -> fail: no PR (unless the repo asks for a draft with the failing report)

A run talks to the outside only through its parts (:class:`SolveParts`: the forge, the
model, the policy, the job's set-up environment, the sandboxes and the gates), built by
``SolveParts.production`` for the worker and passed in as fakes by the unit tests. The
push is made from a host clone the sandbox never touched, with the sandbox's
diff applied, so nothing the untrusted code wrote into its own ``.git``
(hooks, config) ever runs on the host.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

from bot.forges import make_forge
from bot.forges.base import (
    Comment,
    CommitStatus,
    DraftPullRequest,
    Forge,
    ForgeError,
    ForgeUnavailable,
    IssueRef,
    PullRequestRef,
    RepoRef,
)
from bot.forges.branches import branch_name_for_issue, validate_branch_name
from bot.forges.sanitize import sanitize_forge_text
from bot.hostgit import latest_tag, run_git
from bot.runtime import Runtime
from bot.store.models import Job
from bot.store.payloads import PayloadError, PersonAsks
from bot.store.records import SolveRecord, TaskRecord
from worker.agent.repo_task import agent_limits, repo_instructions
from worker.gates import review
from worker.gates.testcmd import resolve_test_command
from worker.jobs import WAITING_HOOKS, JobCancelled, JobContext, JobRefused, pipeline
from worker.metrics import InstrumentedPolicy, record_gates, record_stage
from worker.pipelines.replies import WRITE_ACCESS_REFUSAL, check_actor
from worker.pipelines.verdict import TestVerdict
from worker.repo_config import CONFIG_PATH, RepoConfig, RepoConfigError, parse_repo_config
from worker.sandbox.setupcmd import with_detected_setup
from worker.settings import ModelSettings, SandboxSettings, WorkerSettings
from worker.status import LiveTurns, Status, StatusComment

if TYPE_CHECKING:
    from bot.store.gate_report import GateReport
    from worker.agent.episode import SandboxRecipe
    from worker.agent.policy import Policy
    from worker.gates import GateContext
    from worker.sandbox.base import Sandbox, SandboxFactory
    from worker.sandbox.repoimage import ImageChoice
    from worker.sandbox.setup import SetupResult

log = logging.getLogger(__name__)

BOT_NAME = "Ribbit"
BOT_EMAIL = "ribbit@users.noreply.local"
MAX_SUMMARY_CHARS = 4000


class GatesFailed(Exception):
    """The patch did not pass the gates; the message names which."""


@dataclass
class Workdir:
    root: Path

    @property
    def checkout(self) -> Path:
        return self.root / "repo"

    def clean(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


@dataclass(frozen=True)
class PublishPlan:
    """Everything the publish steps (commit, push, PR) need, stored in the job's result
    before the push so a rerun resumes from it instead of running the agent again."""

    branch: str
    base_sha: str
    diff: str
    commit_message: str
    commit_date: str  # git's internal format, "<unix seconds> +0000"
    title: str
    body: str
    labels: tuple[str, ...]
    reviewers: tuple[str, ...]
    passed: bool
    summary_line: str
    report_md: str
    revise: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            **{f.name: getattr(self, f.name) for f in fields(self)},
            "labels": list(self.labels),
            "reviewers": list(self.reviewers),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> PublishPlan | None:
        """The plan a record stored (None: none, or one this code cannot use)."""
        if not isinstance(data, dict):
            return None
        try:
            plan = cls(
                **{
                    **data,
                    "labels": tuple(data["labels"]),
                    "reviewers": tuple(data["reviewers"]),
                }
            )
        except (KeyError, TypeError):
            return None
        validate_branch_name(plan.branch)
        return plan


BOT_IDENTITY = {
    "GIT_AUTHOR_NAME": BOT_NAME,
    "GIT_AUTHOR_EMAIL": BOT_EMAIL,
    "GIT_COMMITTER_NAME": BOT_NAME,
    "GIT_COMMITTER_EMAIL": BOT_EMAIL,
}


def _git(cwd: Path, *args: str) -> str:
    """The gates' hardened host git (the checkout holds untrusted content), as the bot."""
    proc = run_git(cwd, *args, identity=BOT_IDENTITY)
    if proc.returncode != 0:
        reason = proc.stderr.decode(errors="replace").strip()[:500]
        raise RuntimeError(f"git {args[0]} failed: {reason}")
    return proc.stdout.decode(errors="replace")


def writers_comments(forge: Forge, repo: RepoRef, comments: Sequence[Comment]) -> list[Comment]:
    """The comments that may speak in the task text: those of people with write access
    (asked once per author), never the bot's own. Anyone can comment on a public issue;
    only the repo's writers get to steer the agent."""
    writers: dict[str, bool] = {}
    kept = []
    for comment in comments:
        if comment.author == forge.bot_login:
            continue
        if comment.author not in writers:
            writers[comment.author] = forge.has_write_access(repo, comment.author)
        if writers[comment.author]:
            kept.append(comment)
    return kept


def sanitize_model_text(text: str) -> str:
    """Model output shown in a PR body must not ping people or close other issues."""
    return sanitize_forge_text(text)


def issue_link(config: RepoConfig, number: int) -> str:
    return {
        "fixes": f"Fixes #{number}",
        "closes": f"Closes #{number}",
        "refs": f"Refs #{number}",
        "none": "",
    }[config.link_issue]


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
) -> str:
    parts = []
    link = issue_link(config, issue)
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
        *([setup_md.strip(), ""] if setup_md.strip() else []),
        "### Run",
        "",
        f"- ended: `{exit_reason}` after {turns} model turns, {seconds:.0f} s",
        f"- job: `{job_id}`",
        *([f"- every turn, the diff and the gate logs: [job page]({job_link})"] * bool(job_link)),
    ]
    return "\n".join(parts) + "\n"


def setup_failure_markdown(setup: SetupResult, *, detected: bool = False) -> str:
    """The issue comment of a job whose setup failed: what ran, the tail of its output,
    what the network refused, and where to fix it."""
    where = (
        f"`{CONFIG_PATH}` names no `setup`, so this was the usual install for what the "
        f"repository declares: name the right command in `setup` on the default branch, "
        f'or `setup: ""` if nothing needs installing.'
        if detected
        else f"check `setup` in `{CONFIG_PATH}` on the default branch."
    )
    parts = [
        f"The repository's setup failed ({setup.summary()}), so the agent did not start. "
        f"This is about the repository's set-up, not a patch: {where}",
        "",
        "<details><summary>Setup output (tail)</summary>",
        "",
        "```",
        setup.output.replace("```", "``​`") or "(no output)",
        "```",
        "",
        "</details>",
    ]
    if setup.blocked:
        parts += ["", setup.blocked_markdown()]
    return "\n".join(parts)


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


def _final_message(trajectory: Any) -> str:
    for turn in reversed(getattr(trajectory, "turns", [])):
        content = getattr(turn, "content", "") or ""
        if content.strip():
            return str(content)
    return ""


class JobSetup(Protocol):
    """A job's set-up environment (worker/sandbox/envcache.py JobEnvironment): ``setup``
    sets up the agent's sandbox, ``restore`` every later one (the gates' test runs)."""

    def setup(self, sandbox: Sandbox) -> SetupResult: ...

    def restore(self, sandbox: Sandbox) -> SetupResult: ...


@dataclass(frozen=True)
class SolveParts:
    """What a solve run talks to besides the job store: built once per job by
    :meth:`production`; the unit tests pass fakes."""

    forge: Forge
    # The model version for the job, checked to be there (raises ModelNotReady).
    model: Callable[[], ModelSettings]
    policy: Callable[[ModelSettings], Policy]
    # (.ribbit.yml, the job's sandbox settings, checkout, job workdir) -> its environment
    environment: Callable[[RepoConfig, SandboxSettings, Path, Path], JobSetup]
    # The agent's sandboxes on the job's image (their setup step is the environment's).
    agent_sandboxes: Callable[[SandboxSettings], SandboxFactory]
    # The gates' sandboxes: no network, each restored from the environment's snapshot.
    gate_sandboxes: Callable[[SandboxSettings], SandboxFactory]
    gates: Callable[[GateContext], GateReport]

    @classmethod
    def production(cls, ctx: JobContext) -> SolveParts:
        from worker.agent import load_policy
        from worker.agent.episode import SandboxRecipe
        from worker.gates import run_gates
        from worker.models import preflight
        from worker.sandbox import sandbox_factory
        from worker.sandbox.envcache import JobEnvironment

        settings, job = ctx.settings, ctx.job
        repo = RepoRef(job.forge, job.repo)  # type: ignore[arg-type]

        def environment(
            config: RepoConfig, sandbox: SandboxSettings, checkout: Path, workdir: Path
        ) -> JobSetup:
            return JobEnvironment.for_job(
                config,
                sandbox,  # the job's image: its id is part of the cache key
                repo=str(repo),
                checkout=checkout,
                workdir=workdir,
                data_dir=settings.data_dir,
            )

        return cls(
            forge=make_forge(settings, repo.forge, installation_id=job.installation_id),
            model=lambda: preflight(ctx.store.db, settings, repo),
            policy=lambda model: load_policy(model, settings.agent),
            environment=environment,
            agent_sandboxes=lambda sandbox: SandboxRecipe.production(sandbox).open,
            gate_sandboxes=lambda sandbox: sandbox_factory(sandbox, network=False),
            gates=run_gates,
        )


class SolveRun:
    """One run of the solve (or revise) pipeline for one job."""

    def __init__(self, ctx: JobContext, parts: SolveParts) -> None:
        self.ctx = ctx
        self.parts = parts
        self.job = ctx.job
        self.settings: WorkerSettings = ctx.settings
        self.repo = RepoRef(self.job.forge, self.job.repo)  # type: ignore[arg-type]
        assert self.job.issue_number is not None
        self.issue_ref = IssueRef(self.repo, self.job.issue_number)
        self.forge: Forge = parts.forge
        self.status = StatusComment.for_job(
            self.settings,
            self.forge,
            self.issue_ref,
            ctx.store,
            self.job.id,
            # One status comment per issue: a retry or a revision edits the earlier one.
            self.job.status_comment_id
            or ctx.store.issue_status_comment(self.job.forge, self.job.repo, self.issue_ref.number),
        )
        self.timings: dict[str, float] = {}
        self.workdir = Workdir(self.settings.data_dir / "work" / self.job.id)
        self._job_env: JobSetup | None = None
        # Until the job's image is chosen (_choose_image): the deployment's.
        self._sandbox_settings = self.settings.sandbox

    # -- steps ------------------------------------------------------------------------------

    def _timed(self, name: str) -> _Timer:
        self.ctx.stage(name)
        return _Timer(self.timings, name, self.job.kind)

    def check_permission(self) -> None:
        try:
            check_actor(self.ctx, self.forge)
        except JobRefused:
            # The same check as every command's; the issue is told who may ask, and why.
            reason = (
                f"@{self.job.actor} {WRITE_ACCESS_REFUSAL} to {self.repo.full_name}; "
                "only collaborators with write access can ask Ribbit for work"
            )
            self.status.show(Status("refused", reason))
            raise JobRefused(reason) from None

    def ready_model(self) -> ModelSettings:
        """The model version for this job, checked to be there before the agent starts."""
        from worker.models import ModelNotReady

        try:
            return self.parts.model()
        except ModelNotReady as exc:
            self.status.show(Status("failed", exc.for_issue()))
            raise JobRefused(str(exc)) from None

    def load_config(self) -> RepoConfig:
        text = self.forge.read_file(self.repo, CONFIG_PATH)
        try:
            config = parse_repo_config(text)
        except RepoConfigError as exc:
            self.status.show(
                Status("refused", f"Fix `{CONFIG_PATH}` on the default branch first:\n\n{exc}")
            )
            raise JobRefused(str(exc)) from None
        self.ctx.store.set_trigger_label(self.repo.forge, self.repo.full_name, config.label)
        return config

    def clone(self, branch: str | None) -> str:
        self.workdir.clean()
        self.workdir.root.mkdir(parents=True, exist_ok=True)
        self.forge.clone(self.repo, self.workdir.checkout, branch=branch)
        return _git(self.workdir.checkout, "rev-parse", "HEAD").strip()

    def run(self, *, revise: bool = False) -> dict[str, Any]:
        try:
            return self._run(revise=revise)
        except JobCancelled:
            self.status.show(Status("cancelled", self._cancel_reason()))
            raise
        except (JobRefused, GatesFailed):
            raise
        except ForgeUnavailable:
            raise  # the job is deferred and retried; its comment stays as it was
        except ForgeError as exc:
            # Not found, permission denied, a push rejected because a human pushed meanwhile:
            # the forge's message says which, and carries no token.
            self.status.show(Status("failed", f"The forge refused a step: {exc}"))
            raise
        except Exception as exc:
            self.status.show(
                Status(
                    "failed",
                    f"Ribbit hit an error: `{type(exc).__name__}`. "
                    "An admin can see the details with `ribbit jobs show "
                    f"{self.job.id[:12]}`.",
                )
            )
            raise
        finally:
            self.workdir.clean()

    def _cancel_reason(self) -> str:
        job = self.ctx.store.get(self.job.id)
        return job.failure_reason or "cancelled"

    def _run(self, *, revise: bool) -> dict[str, Any]:
        started = time.monotonic()
        with self._timed("permission"):
            self.check_permission()
        stored = self.job.solve_record
        plan = PublishPlan.from_json(stored.publish)
        if plan is not None:
            # An earlier attempt got past the gates and may have pushed: publish what it
            # made (the same commit, the same PR) instead of running the agent again.
            with self._timed("clone"):
                self.clone(plan.branch if plan.revise else None)
            return self._publish(plan, stored)
        self.status.show(Status("working", "Reading the issue and the repository."))
        with self._timed("config"):
            config = self.load_config()
            issue = self.forge.get_issue(self.issue_ref)
        pr = None
        if revise:
            if self.job.pr_number is None:
                raise JobRefused("revise needs the bot's pull request")
            pr = self.forge.get_pull_request(PullRequestRef(self.repo, self.job.pr_number))
            if pr.state != "open":
                raise JobRefused(f"PR {pr.ref.number} is {pr.state}; nothing to revise")
            # Review-triggered revisions carry the review's job as parent; comment ones don't.
            if self.job.parent_id is not None and not config.revise.on_changes_requested:
                raise JobRefused(f"{CONFIG_PATH} turns off revisions on review")
            done = self.ctx.store.revisions_done(self.job.forge, self.job.repo, pr.ref.number)
            if done >= config.revise.max_revisions:
                reason = (
                    f"PR {pr.ref.number} already has {done} revisions, the limit set "
                    f"by revise.max_revisions in {CONFIG_PATH}"
                )
                self.status.show(Status("refused", reason))
                raise JobRefused(reason)
            branch = validate_branch_name(pr.head_branch)
        else:
            branch = branch_name_for_issue(issue.ref.number, issue.title)
            earlier = self.forge.find_pull_request(self.repo, branch)
            if earlier is not None:
                # A retry starts over: a fresh branch and PR beside the earlier one, never a
                # force-push over it (reviewers may have pushed there).
                branch = validate_branch_name(f"{branch}-{self.job.id[:6]}")
        with self._timed("clone"):
            base_sha = self.clone(branch if revise else None)
        named_setup = "setup" in config.model_fields_set
        config = with_detected_setup(
            config, self.workdir.checkout, enabled=self.settings.sandbox.detect_setup
        )
        with self._timed("image"):
            image = self._choose_image(config)

        from worker.agent import AgentTask, IssueComment, write_jsonl
        from worker.agent.episode import run_episode

        extra = self._revision_brief(pr) if pr is not None else None
        task = AgentTask(
            title=issue.title,
            body=issue.body,
            comments=tuple(
                IssueComment(c.author, c.body)
                for c in writers_comments(self.forge, self.repo, issue.comments)
            )[-20:],
            repo=self.repo.full_name,
            number=issue.ref.number,
            base_commit=base_sha,
            version=latest_tag(self.workdir.checkout),
            test_command=config.test,
            extra_instructions=extra,
            include_repo_context=config.prompt.include_repo_context,
            repo_instructions=repo_instructions(config, self.workdir.checkout),
            metadata={"job_id": self.job.id, "kind": self.job.kind},
        )
        limits = agent_limits(self.settings.agent, config)
        model = self.ready_model()
        policy = InstrumentedPolicy(self.parts.policy(model))
        if image.note:
            self.status.show(Status("working", image.note))

        def phase(name: str) -> _Timer:
            if name == "setup" and config.setup:
                self.status.show(Status("working", f"Setting up: `{config.setup}`."))
            elif name == "agent":
                self.status.show(Status("working", "The agent is working in a sandbox."))
            return self._timed(name)

        episode = run_episode(
            task,
            self.workdir.checkout,
            policy,
            limits,
            self._agent_sandboxes(config),
            setup_command=config.setup,
            cancel=self.ctx.cancel,
            phase=phase,
            on_turn=LiveTurns(self.settings.data_dir, self.job.id, self.status),
        )
        setup = episode.setup
        if episode.agent is None:
            self._setup_failed(setup, detected=not named_setup)
        result = episode.agent
        self.ctx.check_cancelled()
        diff = result.diff
        traj_dir = self.settings.data_dir / "trajectories"
        traj_dir.mkdir(parents=True, exist_ok=True)
        traj_path = traj_dir / f"{self.job.id}.jsonl"
        write_jsonl(traj_path, [result.trajectory])
        record = SolveRecord(
            setup=setup.to_dict(),
            sandbox_image=image.to_dict(),
            exit_reason=result.exit_reason,
            diff=diff,
            trajectory_path=str(traj_path),
            turns=len(result.trajectory.turns),
            branch=branch,
            base_sha=base_sha,
            task=TaskRecord(
                issue_title=issue.title,
                issue_body=issue.body,
                base_sha=base_sha,
                # The command the gate runs (detected per ecosystem when .ribbit.yml
                # names none), so an environment built from this job tests the same way.
                test_command=resolve_test_command(config, self.workdir.checkout).command,
                setup_command=config.setup,
                # The image that ran (a repository's own, allowed and maybe built here),
                # so training episodes run where this one did; None: the deployment's.
                image=image.image if image.image != self.settings.sandbox.image else None,
            ),
        )
        if not diff.strip():
            self.ctx.store.record_solve(self.job.id, record.with_(timings=self.timings))
            reason = f"the agent ended ({result.exit_reason}) without changing any file"
            self.status.show(Status("no_change", reason.capitalize() + "."))
            raise JobRefused(reason)

        self.status.show(Status("gates", "Running the tests, Semgrep and patch hygiene."))
        with self._timed("gates"):
            report = self._gates(config, base_sha, diff, issue.title + "\n" + issue.body)
        record_gates(report)
        record = record.with_(gates=report.to_dict(), gates_summary=report.summary_line())
        tests_result = report.result("tests")
        verdict = TestVerdict.from_details(tests_result.details if tests_result else {})
        notes = verdict.notes_markdown() if tests_result else ""
        report_md = report.to_markdown() + (f"\n\n{notes}\n" if notes else "")
        if not report.passed and not (config.gates.draft_on_failure and report.may_push):
            self.ctx.store.record_solve(self.job.id, record.with_(timings=self.timings))
            why = (
                " (hygiene or Semgrep blocked it, so it is not pushed even with "
                "gates.draft_on_failure)"
                if config.gates.draft_on_failure
                else ""
            )
            blame = (
                f"The gates did not pass (`{report.summary_line()}`), but the base tree's "
                f"tests fail too ({verdict.base_reason}): the repository's test set-up "
                f"looks broken rather than the patch. No PR was opened{why}."
                if verdict.base_broken
                else f"The patch did not pass the gates "
                f"(`{report.summary_line()}`), so no PR was opened{why}."
            )
            self.status.show(
                Status(
                    "failed",
                    blame,
                    report_markdown=report_md,
                )
            )
            raise GatesFailed(f"gates failed: {report.summary_line()}")

        summary = _final_message(result.trajectory)
        body = pr_body(
            config=config,
            issue=issue.ref.number,
            summary=summary,
            report_md=report_md,
            model=model.model,
            exit_reason=result.exit_reason,
            turns=len(result.trajectory.turns),
            seconds=time.monotonic() - started,
            job_id=self.job.id,
            setup_md="\n\n".join(filter(None, [image_markdown(image), setup_markdown(setup)])),
            job_link=self.status.link,
        )
        plan = PublishPlan(
            branch=branch,
            base_sha=base_sha,
            diff=diff,
            commit_message=(
                # A closing keyword in a commit message closes issues once merged; the
                # title is anyone's text.
                f"{'Revise' if revise else 'Fix'}: {sanitize_forge_text(issue.title[:60])}\n\n"
                f"Machine-written by {BOT_NAME} (job {self.job.id}); needs human review."
            ),
            commit_date=f"{int(time.time())} +0000",
            title=f"{issue.title[:200]} (#{issue.ref.number})",
            body=body,
            labels=tuple(config.labels),
            reviewers=tuple(config.reviewers),
            passed=report.passed,
            summary_line=report.summary_line(),
            report_md=report_md,
            revise=revise,
        )
        return self._publish(plan, record)

    def _publish(self, plan: PublishPlan, record: SolveRecord) -> dict[str, Any]:
        """Commit, push and open (or update) the PR, each step safe to repeat: the commit
        is rebuilt byte for byte from the plan (same tree, parent, message and dates, so
        the same sha), the push of a branch already at that sha changes nothing, and the
        PR is looked up before it is created. The plan is stored before the push, so a
        rerun after a lost answer, a 5xx or a killed worker resumes here."""
        with self._timed("push"):
            head_sha = self._commit(plan)
            self.ctx.store.record_solve(
                self.job.id, record.with_(publish=plan.to_dict()), branch=plan.branch
            )
            # Never forced: if a human pushed meanwhile, the push is rejected and the job
            # fails saying so, rather than overwriting their commits.
            self.forge.push(self.repo, self.workdir.checkout, plan.branch)
        with self._timed("pull_request"):
            pr = self.forge.find_pull_request(self.repo, plan.branch)
            if pr is not None and pr.state != "open":
                raise JobRefused(f"PR {pr.ref.number} for {plan.branch} is {pr.state}")
            if pr is None:
                if plan.revise:
                    raise JobRefused(f"the pull request for {plan.branch} is gone")
                pr = self.forge.open_draft_pull_request(
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
            else:
                # A revision (or a retry that found its PR): the body shows the new report.
                self.forge.update_pull_request_body(pr.ref, plan.body)
            self.forge.set_commit_status(
                self.repo,
                head_sha,
                CommitStatus(
                    "success" if plan.passed else "failure",
                    description=plan.summary_line[:140],
                ),
            )
            review.publish(
                self.forge,
                pr.ref,
                head_sha,
                review.gate_review(
                    job_id=self.job.id,
                    head_sha=head_sha,
                    passed=plan.passed,
                    summary_line=plan.summary_line,
                    report_md=plan.report_md,
                    gates=record.gates,
                    diff=plan.diff,
                    details_url=self.status.link,
                ),
            )
        # Published: the plan is dropped, the PR's fields take its place.
        record = record.with_(
            publish=None,
            pr_number=pr.ref.number,
            pr_url=pr.url,
            head_sha=head_sha,
            timings=self.timings,
        )
        self.ctx.store.update(
            self.job.id, pr_number=pr.ref.number, pr_url=pr.url, branch=plan.branch
        )
        verb = "updated" if plan.revise else "opened"
        self.status.show(
            Status(
                "opened",
                f"Draft PR {verb} (`{plan.summary_line}`).",
                pr_url=pr.url,
                report_markdown=plan.report_md,
            )
        )
        return record.to_json()

    def _setup_failed(self, setup: SetupResult, *, detected: bool) -> NoReturn:
        """The agent never works in a half-set-up environment: the job stops here, with
        the setup output on the issue."""
        log.warning("setup failed for job %s: %s", self.job.id, setup.summary())
        self.ctx.store.record_solve(
            self.job.id, SolveRecord(setup=setup.to_dict(), timings=self.timings)
        )
        self.status.show(Status("failed", setup_failure_markdown(setup, detected=detected)))
        raise JobRefused(f"setup failed: {setup.summary()}")

    def _revision_brief(self, pr: Any) -> str:
        ref = PullRequestRef(self.repo, pr.ref.number)
        diff = self.forge.get_pull_request_diff(ref)
        notes = []
        for c in self.forge.list_review_comments(ref):
            if c.author == self.forge.bot_login:
                continue
            where = f"{c.path}:{c.line}" if c.path else "conversation"
            notes.append(f"- {c.author} on {where}: {c.body.strip()}")
        for r in self.forge.list_reviews(ref):
            if r.author != self.forge.bot_login and r.body.strip():
                notes.append(f"- review by {r.author} ({r.state}): {r.body.strip()}")
        try:
            asked = self.job.payload
        except PayloadError:
            asked = None
        instructions = asked.text.strip() if isinstance(asked, PersonAsks) else ""
        parts = [
            "This is a revision of your earlier pull request. Its current diff:",
            f"```diff\n{diff[:20000]}\n```",
        ]
        if notes:
            parts += ["Review comments:", "\n".join(notes[-40:])]
        if instructions:
            parts += ["The reviewer asks:", instructions]
        return "\n\n".join(parts)

    def _gates(self, config: RepoConfig, base_sha: str, diff: str, issue_text: str) -> Any:
        from worker.gates import GateContext

        return self.parts.gates(
            GateContext(
                repo_dir=self.workdir.checkout,
                base_commit=base_sha,
                patch=diff,
                repo_config=config,
                gate_settings=self.settings.gates,
                # No network: each test run restores the job's set-up environment.
                sandbox_factory=self.parts.gate_sandboxes(self._sandbox_settings),
                issue_text=issue_text,
                cancel=self.ctx.cancel,  # /ribbit stop reaches a running test command
                setup_step=self._environment(config).restore,
            )
        )

    def _choose_image(self, config: RepoConfig) -> ImageChoice:
        """The image of every sandbox of the job: the repository's own (``.ribbit.yml``
        ``image``, its devcontainer), within what the deployment allows, else the
        deployment's. A refused one stops the job, saying why, before anything runs."""
        from worker.sandbox.repoimage import RepoImageError, choose_image

        settings = self.settings.sandbox
        try:
            choice = choose_image(settings, config, self.workdir.checkout, repo=str(self.repo))
        except RepoImageError as exc:
            self.status.show(
                Status(
                    "refused",
                    f"{exc}\n\nFix the repository's image (`{CONFIG_PATH}` `image`, or "
                    "`.devcontainer/`) on the default branch.",
                )
            )
            raise JobRefused(str(exc).splitlines()[0]) from None
        if choice.image != settings.image:
            self._sandbox_settings = settings.model_copy(update={"image": choice.image})
        return choice

    def _agent_sandboxes(self, config: RepoConfig) -> SandboxRecipe:
        """The production recipe for the agent's sandbox (on the image _choose_image
        settled), its setup step the job's environment (restored from the repository's
        cache, or set up and snapshotted)."""
        from worker.agent.episode import SandboxRecipe

        job_env = self._environment(config)
        return SandboxRecipe(
            self.parts.agent_sandboxes(self._sandbox_settings),
            lambda sandbox, command: job_env.setup(sandbox),
        )

    def _environment(self, config: RepoConfig) -> JobSetup:
        """The job's set-up environment: built (or restored from the repository's cache)
        once, in the agent's sandbox, and snapshotted; the gates' test runs restore it."""
        if self._job_env is None:
            self._job_env = self.parts.environment(
                config, self._sandbox_settings, self.workdir.checkout, self.workdir.root
            )
        return self._job_env

    def _commit(self, plan: PublishPlan) -> str:
        checkout = self.workdir.checkout
        # From the recorded base, not whatever the clone's HEAD is now (the default branch
        # may have moved; on a resumed revision the PR head may already be this commit).
        _git(checkout, "checkout", "-q", "-B", plan.branch, plan.base_sha)
        patch = self.workdir.root / "agent.patch"
        patch.write_bytes(plan.diff.encode("utf-8", errors="surrogateescape"))
        _git(checkout, "apply", "--index", "--whitespace=nowarn", str(patch))
        dated = {"GIT_AUTHOR_DATE": plan.commit_date, "GIT_COMMITTER_DATE": plan.commit_date}
        proc = run_git(
            checkout,
            "commit",
            "-q",
            "--no-verify",
            "-m",
            plan.commit_message,
            identity={**BOT_IDENTITY, **dated},
        )
        if proc.returncode != 0:
            reason = proc.stderr.decode(errors="replace").strip()[:500]
            raise RuntimeError(f"git commit failed: {reason}")
        return _git(checkout, "rev-parse", "HEAD").strip()


class _Timer:
    def __init__(self, timings: dict[str, float], name: str, kind: str) -> None:
        self.timings, self.name, self.kind = timings, name, kind

    def __enter__(self) -> None:
        self.start = time.monotonic()

    def __exit__(self, *exc: object) -> None:
        seconds = time.monotonic() - self.start
        self.timings[self.name] = round(seconds, 3)
        record_stage(self.kind, self.name, seconds)


def tell_queue_position(runtime: Runtime[WorkerSettings], job: Job, position: int) -> None:
    """The issue's status comment says the job is queued, and where."""
    repo = RepoRef(job.forge, job.repo)  # type: ignore[arg-type]
    assert job.issue_number is not None
    forge = make_forge(runtime.settings, repo.forge, installation_id=job.installation_id)
    status = StatusComment.for_job(
        runtime.settings,
        forge,
        IssueRef(repo, job.issue_number),
        runtime.store,
        job.id,
        job.status_comment_id,
    )
    ahead = "next in line" if position <= 1 else f"position {position} in the queue"
    status.show(Status("queued", f"Waiting for a free worker slot ({ahead})."))


WAITING_HOOKS["solve"] = tell_queue_position
WAITING_HOOKS["revise"] = tell_queue_position


@pipeline("solve")
def solve(ctx: JobContext) -> dict[str, Any] | None:
    try:
        return SolveRun(ctx, SolveParts.production(ctx)).run()
    except GatesFailed as exc:
        raise JobRefused(str(exc)) from None


@pipeline("revise")
def revise(ctx: JobContext) -> dict[str, Any] | None:
    try:
        return SolveRun(ctx, SolveParts.production(ctx)).run(revise=True)
    except GatesFailed as exc:
        raise JobRefused(str(exc)) from None
