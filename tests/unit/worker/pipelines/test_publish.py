"""The Publisher on the fake forge: a plan becomes one commit, one push and one draft PR,
and a rerun from the stored plan repeats none of them. Plus the plan's stored form and the
PR body."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from bot.forges.base import ForgeUnavailable
from bot.store.records import PublishPlan, SolveRecord
from bot.store.records.gate_report import Verdict
from tests.fakes import git
from tests.unit.worker.pipelines.conftest import REPO, RepoWorld
from worker.jobs import JobContext, JobRefused
from worker.pipelines.publish import (
    Publisher,
    commit_message,
    pr_body,
    pr_title,
)
from worker.pipelines.workspace import Stages, Workdir
from worker.repo_config import RepoConfig
from worker.status import StatusComment

DIFF = (
    "diff --git a/calc.py b/calc.py\n"
    "--- a/calc.py\n"
    "+++ b/calc.py\n"
    "@@ -1,2 +1,2 @@\n"
    " def add(a, b):\n"
    "-    return a - b\n"
    "+    return a + b\n"
)


def plan_for(world: RepoWorld, **changes: object) -> PublishPlan:
    plan = PublishPlan(
        branch="ribbit/1-add-subtracts",
        base_sha=git(world.forge.bare, "rev-parse", "main"),
        diff=DIFF,
        commit_message=commit_message("add() subtracts", "job1", revise=False),
        commit_date="1764000000 +0000",
        title=pr_title("add() subtracts", 1),
        body="Fixes #1\n\nthe body\n",
        labels=("bot",),
        reviewers=("maya",),
        passed=True,
        summary_line="tests: passed",
        report_md="### Gates\n\nall passed",
        revise=False,
    )
    return replace(plan, **changes)  # type: ignore[arg-type]


def publisher(world: RepoWorld, ctx: JobContext, tmp_path: Path) -> Publisher:
    """A publisher over a fresh host clone of the default branch (what SolveRun hands it)."""
    workdir = Workdir(tmp_path / "work" / ctx.job.id)
    workdir.clean()
    workdir.root.mkdir(parents=True)
    world.forge.clone(REPO, workdir.checkout)
    # The job's one status comment, edited by each attempt.
    comment_id = world.store.get(ctx.job.id).status_comment_id
    issue = world.forge.issues[1].ref
    status = StatusComment(world.forge, issue, world.store, ctx.job.id, comment_id)  # type: ignore[arg-type]
    return Publisher(world.forge, ctx, workdir=workdir, status=status, stages=Stages(ctx))  # type: ignore[arg-type]


def test_a_plan_becomes_one_commit_on_its_base_and_one_draft_pr(
    repo_world: RepoWorld, tmp_path: Path
) -> None:
    ctx = repo_world.job()
    plan = plan_for(repo_world)
    out = publisher(repo_world, ctx, tmp_path).publish(plan, SolveRecord(turns=3))

    [pr] = repo_world.forge.pulls.values()
    assert (pr.draft, pr.head_branch, pr.base_branch) == (True, plan.branch, "main")
    assert (pr.title, pr.body, pr.labels) == (plan.title, plan.body, ("bot",))
    head = repo_world.forge.branch_sha(plan.branch)
    bare = repo_world.forge.bare
    assert git(bare, "rev-parse", f"{head}^").strip() == plan.base_sha
    assert "return a + b" in git(bare, "show", head) and "Ribbit" in git(
        bare, "log", "-1", "--format=%an %cn", head
    )
    [(sha, status)] = repo_world.forge.statuses
    assert (sha, status.state, status.description) == (head, "success", "tests: passed")
    [(number, reviewed, _)] = repo_world.forge.reviews
    assert (number, reviewed) == (pr.ref.number, head)
    # The record: the PR's fields in place of the plan, the stages timed.
    record = SolveRecord.from_json(out.to_json())
    assert (record.pr_number, record.head_sha, record.publish, record.turns) == (
        pr.ref.number,
        head,
        None,
        3,
    )
    assert set(record.timings or {}) == {"push", "pull_request"}
    job = repo_world.store.get(ctx.job.id)
    assert (job.pr_number, job.pr_url, job.branch) == (pr.ref.number, pr.url, plan.branch)
    [comment] = repo_world.forge.comments.values()
    assert "Draft PR opened" in comment and pr.url in comment


def test_the_same_plan_makes_the_same_commit(repo_world: RepoWorld, tmp_path: Path) -> None:
    ctx = repo_world.job()
    plan = plan_for(repo_world)
    first = publisher(repo_world, ctx, tmp_path / "a").commit(plan)
    again = publisher(repo_world, ctx, tmp_path / "b").commit(plan)
    assert first == again
    assert (
        publisher(repo_world, ctx, tmp_path / "c").commit(
            replace(plan, commit_date="1764000001 +0000")
        )
        != first
    )  # the date is what pins it


def test_the_plan_is_stored_before_the_push(repo_world: RepoWorld, tmp_path: Path) -> None:
    ctx = repo_world.job()
    plan = plan_for(repo_world)
    repo_world.forge.fail["push"] = ForgeUnavailable("502 from the forge")
    with pytest.raises(ForgeUnavailable):
        publisher(repo_world, ctx, tmp_path).publish(plan, SolveRecord())
    stored = repo_world.store.get(ctx.job.id)
    assert stored.solve_record.publish == plan
    assert stored.branch == plan.branch and repo_world.forge.branch_sha(plan.branch) is None


def test_a_rerun_from_the_stored_plan_reuses_the_pushed_branch_and_finds_its_pr(
    repo_world: RepoWorld, tmp_path: Path
) -> None:
    ctx = repo_world.job()
    # The first attempt pushed and opened the PR, then lost the forge before the status.
    repo_world.forge.fail["set_commit_status"] = ForgeUnavailable("502 from the forge")
    with pytest.raises(ForgeUnavailable):
        publisher(repo_world, ctx, tmp_path / "first").publish(plan_for(repo_world), SolveRecord())
    pushed = repo_world.forge.branch_sha(plan_for(repo_world).branch)
    assert pushed is not None and len(repo_world.forge.pulls) == 1

    rerun = repo_world.context(ctx.job.id)
    stored = rerun.job.solve_record
    plan = stored.publish
    assert plan is not None
    repo_world.forge.calls.clear()
    out = publisher(repo_world, rerun, tmp_path / "rerun").publish(plan, stored)

    [pr] = repo_world.forge.pulls.values()
    assert repo_world.forge.branch_sha(plan.branch) == pushed  # the same commit, not a new one
    assert "open_draft_pull_request" not in repo_world.forge.calls  # found before created
    assert repo_world.forge.calls.index("find_pull_request") < repo_world.forge.calls.index(
        "update_pull_request_body"
    )
    assert [sha for sha, _ in repo_world.forge.statuses] == [pushed]
    assert SolveRecord.from_json(out.to_json()).pr_number == pr.ref.number


def test_a_closed_pr_on_the_branch_is_never_reopened(repo_world: RepoWorld, tmp_path: Path) -> None:
    ctx = repo_world.job()
    plan = plan_for(repo_world)
    publisher(repo_world, ctx, tmp_path / "first").publish(plan, SolveRecord())
    [(number, pr)] = repo_world.forge.pulls.items()
    repo_world.forge.pulls[number] = replace(pr, state="closed")
    with pytest.raises(JobRefused, match=f"PR {number} for {plan.branch} is closed"):
        publisher(repo_world, ctx, tmp_path / "again").publish(plan, SolveRecord())


def test_a_revision_whose_pr_is_gone_opens_none(repo_world: RepoWorld, tmp_path: Path) -> None:
    ctx = repo_world.job()
    plan = plan_for(repo_world, revise=True)
    with pytest.raises(JobRefused, match="is gone"):
        publisher(repo_world, ctx, tmp_path).publish(plan, SolveRecord())
    assert repo_world.forge.pulls == {}


def test_a_revision_updates_its_pr_and_says_so(repo_world: RepoWorld, tmp_path: Path) -> None:
    ctx = repo_world.job()
    publisher(repo_world, ctx, tmp_path / "first").publish(plan_for(repo_world), SolveRecord())
    revised = plan_for(repo_world, revise=True, body="the new report\n", passed=False)
    publisher(repo_world, ctx, tmp_path / "revise").publish(revised, SolveRecord())
    [pr] = repo_world.forge.pulls.values()
    assert pr.body == "the new report\n"
    assert [s.state for _, s in repo_world.forge.statuses] == ["success", "failure"]
    [comment] = repo_world.forge.comments.values()
    assert "Draft PR updated" in comment


def test_a_stored_plan_round_trips_and_an_unusable_one_reads_as_none(
    repo_world: RepoWorld,
) -> None:
    plan = plan_for(repo_world)
    assert PublishPlan.from_json(plan.to_dict()) == plan
    assert PublishPlan.from_json(None) is None
    assert PublishPlan.from_json({"branch": plan.branch}) is None  # from older code
    with pytest.raises(ValueError):
        PublishPlan.from_json({**plan.to_dict(), "branch": "--upload-pack=evil"})


@pytest.mark.parametrize("link_issue", ["fixes", "closes", "refs"])
def test_an_unverified_pr_body_says_so_first_and_never_closes_the_issue(link_issue: str) -> None:
    body = pr_body(
        config=RepoConfig(link_issue=link_issue),  # type: ignore[arg-type]
        issue=4,
        summary="",
        report_md="report",
        model="m",
        exit_reason="agent",
        turns=2,
        seconds=1.0,
        job_id="job1",
        verdict=Verdict.UNVERIFIED,
    )
    lines = body.splitlines()
    assert lines[:2] == [
        "> [!WARNING]",
        "> **Not verified: no test fails without this patch.** Nothing regressed and no gate "
        "found anything blocking, but no test shows that the patch fixes the issue.",
    ]
    assert "Refs #4" in lines and "Fixes #4" not in body and "Closes #4" not in body
    none = pr_body(
        config=RepoConfig(link_issue="none"),
        issue=4,
        summary="",
        report_md="report",
        model="m",
        exit_reason="agent",
        turns=2,
        seconds=1.0,
        job_id="job1",
        verdict=Verdict.UNVERIFIED,
    )
    assert "#4" not in none  # a repository that links no issue still links none


@pytest.mark.parametrize(
    ("verdict", "state", "description"),
    [
        (Verdict.VERIFIED, "success", "tests: passed"),
        (Verdict.UNVERIFIED, "failure", "Not verified: tests: passed"),
        (Verdict.REFUSED, "failure", "tests: passed"),
    ],
)
def test_the_heads_status_is_success_only_for_a_verified_patch(
    repo_world: RepoWorld, tmp_path: Path, verdict: Verdict, state: str, description: str
) -> None:
    ctx = repo_world.job()
    plan = plan_for(repo_world, passed=verdict is Verdict.VERIFIED, verdict=verdict)
    publisher(repo_world, ctx, tmp_path).publish(plan, SolveRecord())
    [(_sha, status)] = repo_world.forge.statuses
    assert (status.state, status.description) == (state, description)
    [comment] = repo_world.forge.comments.values()
    assert ("✅" in comment) is (verdict is Verdict.VERIFIED)


def test_a_plan_stored_before_the_verdict_levels_reads_as_judged_before_evidence(
    repo_world: RepoWorld,
) -> None:
    stored = plan_for(repo_world).to_dict()
    del stored["verdict"]
    plan = PublishPlan.from_json(stored)
    assert plan is not None and plan.verdict is Verdict.BEFORE_EVIDENCE
    unverified = plan_for(repo_world, verdict=Verdict.UNVERIFIED, passed=False)
    assert PublishPlan.from_json(unverified.to_dict()) == unverified
    assert PublishPlan.from_json({**stored, "verdict": "maybe"}) is None


def test_the_commit_message_cannot_close_issues() -> None:
    message = commit_message("fixes #7 and @maya", "job1", revise=True)
    assert message.startswith("Revise: ") and "job job1" in message
    assert "fixes #7" not in message and "@maya" not in message  # fenced, broken


@pytest.mark.parametrize(
    ("link_issue", "first_line"),
    [("fixes", "Fixes #4"), ("closes", "Closes #4"), ("refs", "Refs #4"), ("none", "")],
)
def test_the_pr_body_links_the_issue_as_the_repo_asks(link_issue: str, first_line: str) -> None:
    body = pr_body(
        config=RepoConfig(link_issue=link_issue),  # type: ignore[arg-type]
        issue=4,
        summary="",
        report_md="report",
        model="m",
        exit_reason="agent",
        turns=2,
        seconds=1.0,
        job_id="job1",
        verdict=Verdict.VERIFIED,
    )
    assert body.splitlines()[0] == first_line
    assert "_(no summary)_" in body and "job page" not in body


def test_the_pr_body_links_the_job_page_when_there_is_one() -> None:
    body = pr_body(
        config=RepoConfig(),
        issue=4,
        summary="done",
        report_md="report",
        model="m",
        exit_reason="agent",
        turns=2,
        seconds=1.0,
        job_id="job1",
        setup_md="### Setup\n\n- `make`",
        job_link="https://ribbit.test/jobs/job1",
        verdict=Verdict.VERIFIED,
    )
    assert "[job page](https://ribbit.test/jobs/job1)" in body and "### Setup" in body
