"""solve and revise: from an issue (or a review) to a gated draft pull request.

    permission -> prepare (.ribbit.yml, issue, branch, clone, image)
        -> agent (sandbox: setup, agent) -> record (diff, trajectory) -> gates
        -> pass: publish (worker/pipelines/publish.py: commit on a host clone, push,
           open/update the draft PR, commit status, gate review)
        -> fail: no PR (unless the repo asks for a draft with the failing report)

:class:`SolveRun` is that sequence, one method per phase; a revise job is the same run
on the bot's open PR, with what revision.py adds (the PR to revise, the reviewers'
brief). A run talks to the outside only through its parts (:class:`SolveParts`: the
forge, the model, the policy, the job's set-up environment, the sandboxes and the
gates), built by ``SolveParts.production`` for the worker and passed in as fakes by the
unit tests.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

from bot.forges.base import (
    Forge,
    ForgeError,
    ForgeUnavailable,
    Issue,
    IssueRef,
    PullRequestRef,
)
from bot.forges.branches import branch_name_for_issue, validate_branch_name
from bot.hostgit import git_ok
from bot.store.records import PublishPlan, SolveRecord, WithheldText
from worker.agent.repo_task import agent_limits
from worker.gates.testcmd import resolve_test_command
from worker.gates.verdict import TestVerdict
from worker.jobs import JobCancelled, JobContext, JobRefused, pipeline
from worker.metrics import InstrumentedPolicy, record_gates, record_setup_refusals
from worker.pipelines.held import held_back
from worker.pipelines.issue_task import issue_task, judge_comments
from worker.pipelines.phases import EpisodeRan, Prepared, solve_record
from worker.pipelines.publish import (
    Publisher,
    commit_message,
    image_markdown,
    pr_body,
    pr_title,
    setup_markdown,
)
from worker.pipelines.replies import WRITE_ACCESS_REFUSAL, check_actor
from worker.pipelines.revision import pull_request_to_revise, revision_brief
from worker.pipelines.trusted_text import IssueText, TrustedText
from worker.pipelines.workspace import Stages, Workdir
from worker.repo_config import CONFIG_PATH, RepoConfig, RepoConfigError, parse_repo_config
from worker.sandbox.failure import setup_failure
from worker.sandbox.setupcmd import with_detected_setup
from worker.settings import ModelSettings, SandboxSettings, WorkerSettings
from worker.status import LiveTurns, Status, StatusComment

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from bot.store.records.gate_report import GateReport
    from worker.agent import AgentTask
    from worker.agent.episode import SandboxRecipe
    from worker.agent.loop import AgentResult
    from worker.agent.policy import Policy
    from worker.gates import GateContext
    from worker.sandbox.base import Sandbox, SandboxFactory
    from worker.sandbox.repoimage import ImageChoice
    from worker.sandbox.setup import SetupResult

log = logging.getLogger(__name__)


class GatesFailed(JobRefused):
    """The patch did not pass the gates; the message names which."""


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
        from worker.model_choice import preflight
        from worker.sandbox import sandbox_factory
        from worker.sandbox.envcache import JobEnvironment

        settings, job = ctx.settings, ctx.job
        repo = job.repo_ref

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
            forge=ctx.forges(repo.forge, installation_id=job.installation_id),
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
        self.repo = self.job.repo_ref
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
        self.stages = Stages(ctx)
        self.workdir = Workdir(self.settings.data_dir / "work" / self.job.id)
        self.publisher = Publisher(
            self.forge, ctx, workdir=self.workdir, status=self.status, stages=self.stages
        )
        self._job_env: JobSetup | None = None
        # What the trust rule let into the prompt's issue and kept out of it (_task), for
        # every record written after.
        self._issue_text: IssueText | None = None
        self._withheld: tuple[WithheldText, ...] | None = None
        # Until the job's image is chosen (_choose_image): the deployment's.
        self._sandbox_settings = self.settings.sandbox

    def run(self, *, revise: bool = False) -> SolveRecord:
        try:
            return self._run(revise=revise)
        except JobCancelled:
            self.status.show(Status("cancelled", self._cancel_reason()))
            raise
        except JobRefused:  # GatesFailed too
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

    def _run(self, *, revise: bool) -> SolveRecord:
        started = time.monotonic()
        with self.stages("permission"):
            self.check_permission(revise=revise)
        stored = self.job.solve_record
        plan = stored.publish.checked() if stored.publish is not None else None
        if plan is not None:
            return self._resume(plan, stored)
        prepared = self._prepare(revise=revise)
        task = self._task(prepared)
        model = self.ready_model()
        agent = self._run_agent(prepared, task, model)
        record = self._record(prepared, agent)
        if not agent.result.diff.strip():
            self._no_change(record, agent.result)
        record, report, report_md = self._judge(prepared, record, agent.result.diff)
        seconds = time.monotonic() - started
        plan = self._plan(prepared, agent, report, report_md, seconds=seconds)
        return self.publisher.publish(plan, record)

    # -- phases -----------------------------------------------------------------------------

    def check_permission(self, *, revise: bool) -> None:
        try:
            check_actor(self.ctx, self.forge)
        except JobRefused:
            # The same check as every command's.
            reason = (
                f"@{self.job.actor} {WRITE_ACCESS_REFUSAL} to {self.repo.full_name}; "
                "only collaborators with write access can ask Ribbit for work"
            )
            # A revision is asked by a review, which anyone may leave (intake drops the
            # ones the forge marks as outsiders', not a read-only collaborator's): the
            # refusal stays in the job's record, never on the issue's one status comment,
            # or every such review would overwrite it. Labelling takes a role on the
            # forge, so a refused label is told on the issue.
            if not revise:
                self.status.show(Status("refused", reason))
            raise JobRefused(reason) from None

    def ready_model(self) -> ModelSettings:
        """The model version for this job, checked to be there before the agent starts."""
        from worker.model_choice import ModelNotReady

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
        return git_ok(self.workdir.checkout, "rev-parse", "HEAD").decode(errors="replace").strip()

    def _resume(self, plan: PublishPlan, stored: SolveRecord) -> SolveRecord:
        """An earlier attempt got past the gates and may have pushed: publish what it made
        (the same commit, the same PR) instead of running the agent again."""
        with self.stages("clone"):
            self.clone(plan.branch if plan.revise else None)
        return self.publisher.publish(plan, stored)

    def _prepare(self, *, revise: bool) -> Prepared:
        """.ribbit.yml, the issue, the branch to push to (the PR's, for a revision), the
        host clone and the job's image."""
        self.status.show(Status("working", "Reading the issue and the repository."))
        with self.stages("config"):
            config = self.load_config()
            issue = self.forge.get_issue(self.issue_ref)
        pr = pull_request_to_revise(self.forge, self.ctx, config, self.status) if revise else None
        branch = validate_branch_name(pr.head_branch) if pr is not None else self._new_branch(issue)
        with self.stages("clone"):
            base_sha = self.clone(branch if revise else None)
        named_setup = "setup" in config.model_fields_set
        config = with_detected_setup(
            config, self.workdir.checkout, enabled=self.settings.sandbox.detect_setup
        )
        with self.stages("image"):
            image = self._choose_image(config)
        return Prepared(config, named_setup, issue, branch, base_sha, image, pr)

    def _new_branch(self, issue: Issue) -> str:
        branch = branch_name_for_issue(issue.ref.number, issue.title)
        if self.forge.find_pull_request(self.repo, branch) is None:
            return branch
        # A retry starts over: a fresh branch and PR beside the earlier one, never a
        # force-push over it (reviewers may have pushed there).
        return validate_branch_name(f"{branch}-{self.job.id[:6]}")

    def _task(self, prepared: Prepared) -> AgentTask:
        """The agent's task: the issue with its writers' comments, the repository's
        instructions, and for a revision the PR's diff and what the reviewers said. All
        forge text goes through the one trust rule (trusted_text.py); what it kept out is
        remembered for the job's record."""
        issue, config, pr = prepared.issue, prepared.config, prepared.pr
        trust = TrustedText(self.forge, self.repo)
        # The job's actor (checked for write access first thing) asked for this work, so
        # they vouch for an issue a non-writer wrote.
        text = trust.issue(issue, vouched_by=self.job.actor)
        comments = judge_comments(trust, issue.comments)
        extra = (
            revision_brief(self.forge, PullRequestRef(self.repo, pr.ref.number), self.job, trust)
            if pr is not None
            else None
        )
        self._issue_text, self._withheld = text, trust.withheld()
        return issue_task(
            text,
            comments,
            repo=self.repo.full_name,
            number=issue.ref.number,
            base_commit=prepared.base_sha,
            config=config,
            checkout=self.workdir.checkout,
            extra_instructions=extra,
            metadata={"job_id": self.job.id, "kind": self.job.kind},
        )

    def _run_agent(self, prepared: Prepared, task: AgentTask, model: ModelSettings) -> EpisodeRan:
        """The episode: the agent's sandbox on the job's image, set up, then the agent.
        A failed setup stops the job; so does a cancel that came while the agent ran."""
        from worker.agent.episode import run_episode

        config = prepared.config
        limits = agent_limits(self.settings.agent, config)
        policy = InstrumentedPolicy(self.parts.policy(model))
        if prepared.image.note:
            self.status.show(Status("working", prepared.image.note))

        def phase(name: str) -> AbstractContextManager[None]:
            if name == "setup" and config.setup:
                self.status.show(Status("working", f"Setting up: `{config.setup}`."))
            elif name == "agent":
                self.status.show(Status("working", "The agent is working in a sandbox."))
            return self.stages(name)

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
        record_setup_refusals(episode.setup.blocked)
        if episode.agent is None:
            self._setup_failed(episode.setup, detected=not prepared.named_setup)
        self.ctx.check_cancelled()
        return EpisodeRan(model, episode.setup, episode.agent)

    def _record(self, prepared: Prepared, agent: EpisodeRan) -> SolveRecord:
        """What the run made, for the job's record (its trajectory written beside it)."""
        from worker.agent import write_jsonl

        config, result = prepared.config, agent.result
        assert self._issue_text is not None  # _task ran before the agent
        traj_dir = self.settings.data_dir / "trajectories"
        traj_dir.mkdir(parents=True, exist_ok=True)
        traj_path = traj_dir / f"{self.job.id}.jsonl"
        write_jsonl(traj_path, [result.trajectory])
        return solve_record(
            prepared,
            agent,
            self._issue_text,
            self._withheld,
            trajectory_path=traj_path,
            # The command the gate runs (detected per ecosystem when .ribbit.yml names
            # none), so an environment built from this job tests the same way.
            test_command=resolve_test_command(config, self.workdir.checkout).command,
            deployment_image=self.settings.sandbox.image,
        )

    def _no_change(self, record: SolveRecord, result: AgentResult) -> NoReturn:
        self.ctx.store.record_solve(self.job.id, record.with_(timings=self.stages.timings))
        reason = f"the agent ended ({result.exit_reason}) without changing any file"
        self.status.show(Status("no_change", reason.capitalize() + "."))
        raise JobRefused(reason)

    def _judge(
        self, prepared: Prepared, record: SolveRecord, diff: str
    ) -> tuple[SolveRecord, GateReport, str]:
        """The gates on the agent's diff: the record with their report, the report, and
        its markdown with the test verdict's notes. A patch the gates hold back (held.py)
        stops the job here, with no PR."""
        self.status.show(Status("gates", "Running the tests, Semgrep and patch hygiene."))
        issue = prepared.issue
        with self.stages("gates"):
            report = self._gates(
                prepared.config,
                prepared.base_sha,
                diff,
                issue.title + "\n" + issue.body,
                issue_labels=issue.labels,
            )
        record_gates(report)
        record = record.with_(gates=report, gates_summary=report.summary_line())
        tests_result = report.result("tests")
        verdict = TestVerdict.from_result(tests_result)
        notes = verdict.notes_markdown() if tests_result else ""
        report_md = report.to_markdown() + (f"\n\n{notes}\n" if notes else "")
        held = held_back(report, verdict, prepared.config)
        if held is not None:
            self.ctx.store.record_solve(self.job.id, record.with_(timings=self.stages.timings))
            self.status.show(
                Status("failed", held.failure.to_markdown(), report_markdown=report_md)
            )
            raise GatesFailed(held.reason, failure=held.failure)
        return record, report, report_md

    def _plan(
        self,
        prepared: Prepared,
        agent: EpisodeRan,
        report: GateReport,
        report_md: str,
        *,
        seconds: float,
    ) -> PublishPlan:
        """What to publish, fixed before the first push (a rerun publishes the same)."""
        issue, config, result = prepared.issue, prepared.config, agent.result
        body = pr_body(
            config=config,
            issue=issue.ref.number,
            summary=_final_message(result.trajectory),
            report_md=report_md,
            model=agent.model.model,
            exit_reason=result.exit_reason,
            turns=len(result.trajectory.turns),
            seconds=seconds,
            job_id=self.job.id,
            setup_md="\n\n".join(
                filter(None, [image_markdown(prepared.image), setup_markdown(agent.setup)])
            ),
            job_link=self.status.link,
            verdict=report.verdict,
        )
        return PublishPlan(
            branch=prepared.branch,
            base_sha=prepared.base_sha,
            diff=result.diff,
            commit_message=commit_message(issue.title, self.job.id, revise=prepared.revise),
            commit_date=f"{int(time.time())} +0000",
            title=pr_title(issue.title, issue.ref.number),
            body=body,
            labels=tuple(config.labels),
            reviewers=tuple(config.reviewers),
            passed=report.passed,
            summary_line=report.summary_line(),
            report_md=report_md,
            revise=prepared.revise,
            verdict=report.verdict,
        )

    def _setup_failed(self, setup: SetupResult, *, detected: bool) -> NoReturn:
        """The agent never works in a half-set-up environment: the job stops here, with
        the setup output on the issue."""
        log.warning("setup failed for job %s: %s", self.job.id, setup.summary())
        self.ctx.store.record_solve(
            self.job.id,
            SolveRecord(
                setup=setup.to_record(), timings=self.stages.timings, withheld=self._withheld
            ),
        )
        failure = setup_failure(
            setup, detected=detected, permitted_hosts=self.settings.sandbox.repo_setup_hosts
        )
        self.status.show(Status("failed", failure.to_markdown()))
        raise JobRefused(f"setup failed: {setup.summary()}", failure=failure)

    # -- the job's sandboxes --------------------------------------------------------------

    def _gates(
        self,
        config: RepoConfig,
        base_sha: str,
        diff: str,
        issue_text: str,
        *,
        issue_labels: tuple[str, ...] = (),
    ) -> GateReport:
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
                issue_labels=issue_labels,
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


@pipeline("solve")
def solve(ctx: JobContext) -> SolveRecord:
    return SolveRun(ctx, SolveParts.production(ctx)).run()


@pipeline("revise")
def revise(ctx: JobContext) -> SolveRecord:
    return SolveRun(ctx, SolveParts.production(ctx)).run(revise=True)
