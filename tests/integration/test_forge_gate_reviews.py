"""Gate findings on the changed lines, on both forges, through the real clients over HTTP
to the local forge: a GitHub check run with annotations, GitLab MR discussions; each
published once even when an answer is lost or the job runs again."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from bot.forges import make_forge
from bot.forges.base import (
    Annotation,
    DraftPullRequest,
    ForgeError,
    ForgeName,
    ForgeUnavailable,
    GateReview,
    PullRequest,
)
from bot.settings import Settings
from bot.store.records.gate_report import GateReport
from tests.fakes import commit_files, git
from tests.plugins.forge import ForgeWorld
from worker.gates import review

pytestmark = pytest.mark.integration

CREATE = {
    "github": r"/repos/acme/widgets/check-runs$",
    "gitlab": r"/merge_requests/\d+/discussions$",
}
PATH = "widgets/__init__.py"


def _open_pr(
    kind: ForgeName, world: ForgeWorld, settings: Settings, tmp_path: Path
) -> tuple[Any, PullRequest, str]:
    forge = make_forge(settings, kind)
    repo = world.repo(kind)
    checkout = tmp_path / f"checkout-{kind}"
    forge.clone(repo, checkout)
    branch = "ribbit/issue-9-eval"
    git(checkout, "checkout", "-q", "-b", branch)
    sha = commit_files(
        checkout, {PATH: "def add(a, b):\n    return eval(f'{a} + {b}')\n"}, "Fix add"
    )
    forge.push(repo, checkout, branch)
    pr = forge.open_draft_pull_request(
        repo, DraftPullRequest(head=branch, base="main", title="Fix add", body="b")
    )
    return forge, pr, sha


def _review(forge: Any, pr: PullRequest, sha: str) -> GateReview:
    finding = {"rule": "no-eval", "message": "eval() of @maya's input", "path": PATH}
    gates = {
        "passed": False,
        "gates": [
            {
                "name": "semgrep",
                "passed": False,
                "findings": [
                    {**finding, "gate": "semgrep", "line": 2, "severity": "error"},
                    # Line 1 is unchanged: it stays in the report, off the diff.
                    {**finding, "gate": "semgrep", "line": 1, "severity": "warning"},
                ],
            }
        ],
    }
    return review.gate_review(
        job_id="job1",
        head_sha=sha,
        passed=False,
        summary_line="semgrep ✖ (1 new finding)",
        report_md="### Ribbit gates: failed",
        gates=GateReport.from_dict(gates),
        diff=forge.get_pull_request_diff(pr.ref),
        details_url="http://ribbit.test/review/jobs/job1?sig=s",
    )


@pytest.mark.parametrize("kind", ["github", "gitlab"])
def test_gate_findings_land_on_changed_lines_once(
    kind: ForgeName, forge_world: ForgeWorld, forge_settings: Settings, tmp_path: Path
) -> None:
    world = forge_world
    forge, pr, sha = _open_pr(kind, world, forge_settings, tmp_path)
    gate_review = _review(forge, pr, sha)
    assert [(a.path, a.line, a.level) for a in gate_review.annotations] == [(PATH, 2, "failure")]

    # The first create's answer is lost after the forge made it; then the job runs again.
    world.forge.fail_next(CREATE[kind], count=1, status=502, method="POST", after=True)
    review.publish(forge, pr.ref, sha, gate_review)
    review.publish(forge, pr.ref, sha, gate_review)
    assert world.forge.request_count("POST", CREATE[kind]) == 1

    full = world.repo(kind).full_name
    if kind == "github":
        [run] = world.forge.repo(kind, full).check_runs
        assert (run.name, run.head_sha, run.status, run.conclusion) == (
            "ribbit/gates",
            sha,
            "completed",
            "failure",
        )
        assert run.external_id == gate_review.key
        assert run.details_url == gate_review.details_url
        assert run.title.startswith("Ribbit gates: semgrep")
        [note] = run.annotations
        assert (note.path, note.start_line, note.end_line, note.level) == (PATH, 2, 2, "failure")
        assert note.title == "semgrep: no-eval" and "@maya" not in note.message
    else:
        [mr] = world.forge.pulls(kind, full)
        [discussion] = mr.discussions
        assert discussion.position is not None
        assert discussion.position["new_line"] == 2 and discussion.position["head_sha"] == sha
        assert "semgrep: no-eval" in discussion.note.body and "@maya" not in discussion.note.body
        assert "[job page](http://ribbit.test/review/jobs/job1?sig=s)" in discussion.note.body
        assert discussion.note.author == "ribbit-bot"


def test_gitlab_refuses_a_note_off_the_diff_and_publish_does_not_fail_the_job(
    forge_world: ForgeWorld,
    forge_settings: Settings,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The local forge applies GitLab's rule (a diff note sits on a line the diff shows),
    so a placement bug would fail here rather than on a real GitLab."""
    forge, pr, sha = _open_pr("gitlab", forge_world, forge_settings, tmp_path)
    off_diff = GateReview(
        key="k",
        passed=False,
        title="t",
        summary="s",
        annotations=(Annotation(PATH, 1, "failure", "semgrep: x", "m"),),
    )
    with pytest.raises(ForgeError, match="line_code"):
        forge.publish_gate_review(pr.ref, sha, off_diff)
    with caplog.at_level(logging.WARNING, logger="worker.gates.review"):
        review.publish(forge, pr.ref, sha, off_diff)
    assert "gate findings not shown" in caplog.text


def test_github_token_without_checks_permission_keeps_the_job_and_an_outage_retries_it(
    forge_world: ForgeWorld, forge_settings: Settings, tmp_path: Path
) -> None:
    """Only GitHub Apps may create check runs: a 403 is logged, not raised (the commit
    status still shows the verdict); a 503 is raised so the job is retried."""
    forge, pr, sha = _open_pr("github", forge_world, forge_settings, tmp_path)
    gate_review = _review(forge, pr, sha)
    forge_world.forge.fail_next(CREATE["github"], count=1, status=403, method="POST")
    review.publish(forge, pr.ref, sha, gate_review)
    assert forge_world.forge.repo("github", "acme/widgets").check_runs == []
    forge_world.forge.fail_next(CREATE["github"], count=100, status=503, method="POST")
    with pytest.raises(ForgeUnavailable):
        review.publish(forge, pr.ref, sha, gate_review)
