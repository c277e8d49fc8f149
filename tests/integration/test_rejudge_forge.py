"""`ribbit prs rejudge` through the real GitHub and GitLab clients over HTTP to the local
forge: an open draft opened on the old judge's word with ``Fixes #4`` comes back as an
unverified draft's body (``Refs #4``, the warning on top) with a failure status on
Ribbit's head, and a second run sends nothing more."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.forges import forge_factory, make_forge
from bot.forges.base import DraftPullRequest, ForgeName
from bot.settings import Settings
from bot.store import audit
from bot.store.db import Database
from bot.store.records.gate_report import Verdict
from bot.store.tables import Job
from tests.fakes import commit_files, git
from tests.plugins.forge import ForgeWorld
from worker.pipelines.publish import UNVERIFIED_WARNING, pr_body
from worker.rejudge import Action, rejudge
from worker.repo_config import RepoConfig

pytestmark = pytest.mark.integration
BEFORE_EVIDENCE = {"passed": True, "duration_s": 1.0, "summary": "tests ✔", "gates": []}


@pytest.fixture
def db() -> Iterator[Database]:
    database = Database("sqlite://")
    database.migrate()
    yield database
    database.dispose()


@pytest.mark.parametrize("kind", ["github", "gitlab"])
def test_an_old_judged_draft_is_relabelled_once_on_the_real_forge(
    kind: ForgeName, forge_world: ForgeWorld, forge_settings: Settings, db: Database, tmp_path: Path
) -> None:
    repo = forge_world.repo(kind)
    forge = make_forge(forge_settings, kind)
    checkout, branch = tmp_path / "checkout", "ribbit/issue-4-fix-add"
    forge.clone(repo, checkout)
    git(checkout, "checkout", "-q", "-b", branch)
    commit_files(checkout, {"widgets/__init__.py": "def add(a, b):\n    return a + b\n"}, "Fix")
    forge.push(repo, checkout, branch)
    old_body = pr_body(
        config=RepoConfig(),
        issue=4,
        summary="Fixed add.",
        report_md=Verdict.VERIFIED.heading,
        model="m",
        exit_reason="agent",
        turns=1,
        seconds=1.0,
        job_id="j1",
        verdict=Verdict.VERIFIED,  # what the old judge wrote: passed, Fixes #4
    )
    pr = forge.open_draft_pull_request(
        repo, DraftPullRequest(head=branch, base="main", title="Fix add (#4)", body=old_body)
    )
    with db.session() as s:
        s.add(
            Job(
                id="j1",
                kind="solve",
                state="succeeded",
                forge=kind,
                repo=repo.full_name,
                issue_number=4,
                pr_number=pr.ref.number,
                result={"gates": BEFORE_EVIDENCE, "head_sha": pr.head_sha},
            )
        )
    forges = forge_factory(forge_settings)

    [done] = rejudge(db, forges, "alice (cli)", dry_run=False)
    body = forge.get_pull_request(pr.ref).body
    [again] = rejudge(db, forges, "alice (cli)", dry_run=False)

    assert (done.action, again.action) == (Action.RELABELLED, Action.ALREADY)
    lines = body.splitlines()
    assert body.startswith(UNVERIFIED_WARNING) and "Refs #4" in lines and "Fixes #4" not in lines
    assert forge.get_pull_request(pr.ref).body == body
    statuses = forge_world.forge.repo(kind, repo.full_name).statuses
    assert [(s.sha, s.description) for s in statuses] == [
        (pr.head_sha, "Not verified: judged before evidence")
    ]
    assert statuses[0].state == ("failure" if kind == "github" else "failed")
    assert [(r.action, r.outcome) for r in audit.recent(db)] == [("rejudge", "ok")]
