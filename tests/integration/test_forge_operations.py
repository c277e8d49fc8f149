"""Every Forge operation, on both forges, through the real client libraries over HTTP
to the local forge, with real git clone and push."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.forges import make_forge
from bot.forges.base import (
    CommitStatus,
    DraftPullRequest,
    Forge,
    ForgeName,
    ForgeNotFound,
    IssueRef,
    PullRequestRef,
)
from bot.forges.branches import branch_name_for_issue
from bot.settings import Settings
from tests.fakes import commit_files, git
from tests.plugins.forge import ForgeWorld
from worker.repo_config import RepoConfigError, parse_repo_config

pytestmark = pytest.mark.integration
FORGES = ["github", "gitlab"]


def _push_fix(forge: Forge, world: ForgeWorld, kind: ForgeName, tmp_path: Path, branch: str) -> str:
    repo = world.repo(kind)
    checkout = tmp_path / f"checkout-{kind}"
    forge.clone(repo, checkout)
    git(checkout, "checkout", "-q", "-b", branch)
    return commit_files(
        checkout, {"widgets/__init__.py": "def add(a, b):\n    return a + b\n"}, "Fix add"
    )


@pytest.mark.parametrize("kind", FORGES)
def test_forge_get_issue_reads_title_body_labels_and_comments(
    kind: ForgeName, forge_world: ForgeWorld, forge_settings: Settings
) -> None:
    world = forge_world
    repo = world.repo(kind)
    issue = world.forge.create_issue(
        kind,
        repo.full_name,
        title="add() subtracts",
        body="`add(1, 2)` is -1",
        author="maya",
        labels=("bug",),
    )
    world.forge.add_label(kind, repo.full_name, issue.number, "ribbit", actor="maya")
    world.forge.comment_as(
        kind, repo.full_name, issue.number, author="otto", body="$(rm -rf /) is just text here"
    )

    got = make_forge(forge_settings, kind).get_issue(IssueRef(repo, issue.number))

    assert got.title == "add() subtracts"
    assert got.body == "`add(1, 2)` is -1"
    assert got.author == "maya"
    assert got.state == "open"
    assert set(got.labels) == {"bug", "ribbit"}
    assert [(c.author, c.body) for c in got.comments] == [("otto", "$(rm -rf /) is just text here")]
    assert got.url


@pytest.mark.parametrize("kind", FORGES)
def test_forge_has_write_access_by_role(
    kind: ForgeName, forge_world: ForgeWorld, forge_settings: Settings
) -> None:
    world = forge_world
    repo = world.repo(kind)
    world.forge.add_collaborator(kind, repo.full_name, "rita", "read")
    world.forge.add_collaborator(kind, repo.full_name, "walt", "write")
    forge = make_forge(forge_settings, kind)

    assert forge.has_write_access(repo, "maya")  # maintain
    assert forge.has_write_access(repo, "walt")
    assert not forge.has_write_access(repo, "rita")  # read only
    assert not forge.has_write_access(repo, "otto")  # outsider
    assert not forge.has_write_access(repo, "nobody-at-all")  # no such user


@pytest.mark.parametrize("kind", FORGES)
def test_forge_status_comment_is_edited_in_place(
    kind: ForgeName, forge_world: ForgeWorld, forge_settings: Settings
) -> None:
    world = forge_world
    repo = world.repo(kind)
    issue = world.forge.create_issue(kind, repo.full_name, title="t", author="maya")
    forge = make_forge(forge_settings, kind)
    ref = IssueRef(repo, issue.number)

    comment_id = forge.post_comment(ref, "Queued")
    forge.edit_comment(ref, comment_id, "Running tests")
    forge.edit_comment(ref, comment_id, "Opened a draft PR")

    comments = world.forge.comments(kind, repo.full_name, issue.number)
    assert len(comments) == 1
    assert comments[0].id == comment_id
    assert comments[0].author == "ribbit-bot"
    assert comments[0].body == "Opened a draft PR"
    assert comments[0].history[0].startswith("Queued")
    assert comments[0].history[1] == "Running tests"


@pytest.mark.parametrize("kind", FORGES)
def test_forge_default_branch_and_repo_config(
    kind: ForgeName, forge_world: ForgeWorld, forge_settings: Settings
) -> None:
    repo = forge_world.repo(kind)
    forge = make_forge(forge_settings, kind)

    assert forge.default_branch(repo) == "main"
    config = parse_repo_config(forge.read_file(repo, ".ribbit.yml"))
    assert config.labels == ["bot"]
    assert config.reviewers == ["maya"]
    assert forge.read_file(repo, "no/such/file.txt") is None
    assert forge.read_file(repo, "README.md", ref="main") == "# widgets\n"


@pytest.mark.parametrize("kind", FORGES)
def test_forge_invalid_repo_config_is_a_clear_error(
    kind: ForgeName, forge_world: ForgeWorld, forge_settings: Settings
) -> None:
    world = forge_world
    world.forge.create_repo(kind, "acme/broken", files={".ribbit.yml": "test: [unclosed\n"})
    world.forge.add_collaborator(kind, "acme/broken", "ribbit-bot", "write")
    world.forge.create_repo(
        kind, "acme/wrongkey", files={".ribbit.yml": "reviewers: maya\nmax_turns: 3\n"}
    )
    world.forge.add_collaborator(kind, "acme/wrongkey", "ribbit-bot", "write")
    forge = make_forge(forge_settings, kind)
    from bot.forges.base import RepoRef

    with pytest.raises(RepoConfigError, match=r"\.ribbit\.yml is not valid YAML"):
        parse_repo_config(forge.read_file(RepoRef(kind, "acme/broken"), ".ribbit.yml"))
    with pytest.raises(RepoConfigError, match="max_turns") as excinfo:
        parse_repo_config(forge.read_file(RepoRef(kind, "acme/wrongkey"), ".ribbit.yml"))
    assert "reviewers" in str(excinfo.value)


@pytest.mark.parametrize("kind", FORGES)
def test_forge_clone_and_push_are_visible_in_the_bare_repo(
    kind: ForgeName, forge_world: ForgeWorld, forge_settings: Settings, tmp_path: Path
) -> None:
    world = forge_world
    repo = world.repo(kind)
    forge = make_forge(forge_settings, kind)
    branch = branch_name_for_issue(7, "add() returns a - b!")

    sha = _push_fix(forge, world, kind, tmp_path, branch)
    forge.push(repo, tmp_path / f"checkout-{kind}", branch)

    assert branch == "ribbit/issue-7-add-returns-a-b"
    assert world.forge.branches(kind, repo.full_name)[branch] == sha
    bare = world.forge.repo(kind, repo.full_name).bare
    assert "return a + b" in git(bare, "show", f"{branch}:widgets/__init__.py")
    # A second clone of the pushed branch gets the same commit, and a revision on top of it
    # is a plain fast-forward push.
    again = tmp_path / "again"
    forge.clone(repo, again, branch=branch)
    assert git(again, "rev-parse", "HEAD") == sha
    revision = commit_files(again, {"tests/test_add.py": "def test_add(): ...\n"}, "Add a test")
    forge.push(repo, again, branch)
    assert world.forge.branches(kind, repo.full_name)[branch] == revision


@pytest.mark.parametrize("kind", FORGES)
def test_forge_push_never_forces(
    kind: ForgeName, forge_world: ForgeWorld, forge_settings: Settings, tmp_path: Path
) -> None:
    world = forge_world
    repo = world.repo(kind)
    forge = make_forge(forge_settings, kind)
    branch = "ribbit/issue-8-x"
    _push_fix(forge, world, kind, tmp_path, branch)
    checkout = tmp_path / f"checkout-{kind}"
    forge.push(repo, checkout, branch)
    first = world.forge.branches(kind, repo.full_name)[branch]
    git(checkout, "commit", "-q", "--amend", "-m", "rewritten history")

    with pytest.raises(Exception, match="never force"):
        forge.push(repo, checkout, branch)
    assert world.forge.branches(kind, repo.full_name)[branch] == first


@pytest.mark.parametrize("kind", FORGES)
def test_forge_draft_pull_request_with_labels_and_reviewers(
    kind: ForgeName, forge_world: ForgeWorld, forge_settings: Settings, tmp_path: Path
) -> None:
    world = forge_world
    repo = world.repo(kind)
    forge = make_forge(forge_settings, kind)
    branch = "ribbit/issue-3-fix-add"
    sha = _push_fix(forge, world, kind, tmp_path, branch)
    forge.push(repo, tmp_path / f"checkout-{kind}", branch)

    pr = forge.open_draft_pull_request(
        repo,
        DraftPullRequest(
            head=branch,
            base="main",
            title="Fix add()",
            body="Fixes #3",
            labels=["bot", "ribbit"],
            reviewers=["maya"],
        ),
    )

    assert pr.draft
    assert pr.state == "open"
    assert pr.head_branch == branch and pr.head_sha == sha
    assert pr.base_branch == "main"
    assert pr.body == "Fixes #3"
    assert set(pr.labels) == {"bot", "ribbit"}
    assert pr.author == "ribbit-bot"
    if kind == "gitlab":
        assert pr.title == "Draft: Fix add()"
    else:
        assert pr.title == "Fix add()"
    stored = world.forge.pulls(kind, repo.full_name)
    assert len(stored) == 1
    assert stored[0].draft
    assert stored[0].requested_reviewers == ["maya"]
    # Opening again (a retried job) reuses the PR instead of making a second one.
    again = forge.open_draft_pull_request(
        repo, DraftPullRequest(head=branch, base="main", title="Fix add()", body="Fixes #3")
    )
    assert again.ref == pr.ref
    assert len(world.forge.pulls(kind, repo.full_name)) == 1
    found = forge.find_pull_request(repo, branch)
    assert found is not None and found.ref == pr.ref
    assert forge.find_pull_request(repo, "ribbit/issue-999-none") is None
    assert [p.ref for p in forge.list_open_pull_requests(repo)] == [pr.ref]
    assert forge.list_open_pull_requests(repo, head_prefix="other/") == []


@pytest.mark.parametrize("kind", FORGES)
def test_forge_reviews_review_comments_status_and_merged_diff(
    kind: ForgeName, forge_world: ForgeWorld, forge_settings: Settings, tmp_path: Path
) -> None:
    world = forge_world
    repo = world.repo(kind)
    forge = make_forge(forge_settings, kind)
    branch = "ribbit/issue-4-fix-add"
    sha = _push_fix(forge, world, kind, tmp_path, branch)
    forge.push(repo, tmp_path / f"checkout-{kind}", branch)
    pr = forge.open_draft_pull_request(
        repo, DraftPullRequest(head=branch, base="main", title="Fix", body="Fixes #4")
    )
    world.forge.submit_review(
        kind,
        repo.full_name,
        pr.ref.number,
        author="maya",
        state="CHANGES_REQUESTED",
        body="add a test",
        comments=(("widgets/__init__.py", 2, "why plus?"),),
    )

    reviews = forge.list_reviews(pr.ref)
    comments = forge.list_review_comments(pr.ref)
    forge.set_commit_status(
        repo,
        pr.head_sha,
        CommitStatus(
            state="failure", description="tests: 1 failed", target_url="http://ribbit.local/jobs/1"
        ),
    )

    assert [(r.author, r.state) for r in reviews] == [("maya", "changes_requested")]
    assert [(c.author, c.body, c.path, c.line) for c in comments] == [
        ("maya", "why plus?", "widgets/__init__.py", 2)
    ]
    statuses = world.forge.repo(kind, repo.full_name).statuses
    assert [(s.sha, s.context, s.description) for s in statuses] == [
        (sha, "ribbit/gates", "tests: 1 failed")
    ]
    assert statuses[0].state == ("failure" if kind == "github" else "failed")

    world.forge.merge_pull_request(kind, repo.full_name, pr.ref.number, actor="maya")
    merged = forge.get_pull_request(pr.ref)
    diff = forge.get_pull_request_diff(pr.ref)

    assert merged.state == "merged"
    assert merged.merged_by == "maya"
    assert merged.merged_at is not None
    assert merged.merge_commit_sha == world.forge.branches(kind, repo.full_name)["main"]
    assert "diff --git a/widgets/__init__.py b/widgets/__init__.py" in diff
    assert "-    return a - b" in diff and "+    return a + b" in diff
    assert forge.list_open_pull_requests(repo) == []


@pytest.mark.parametrize("kind", FORGES)
def test_forge_missing_things_are_not_found(
    kind: ForgeName, forge_world: ForgeWorld, forge_settings: Settings
) -> None:
    repo = forge_world.repo(kind)
    forge = make_forge(forge_settings, kind)
    with pytest.raises(ForgeNotFound):
        forge.get_issue(IssueRef(repo, 404))
    with pytest.raises(ForgeNotFound):
        forge.get_pull_request(PullRequestRef(repo, 404))
    from bot.forges.base import RepoRef

    with pytest.raises(ForgeNotFound):
        forge.default_branch(RepoRef(kind, "acme/nope"))


@pytest.mark.parametrize("kind", FORGES)
def test_forge_unknown_reviewer_does_not_fail_the_draft(
    kind: ForgeName, forge_world: ForgeWorld, forge_settings: Settings, tmp_path: Path
) -> None:
    world = forge_world
    repo = world.repo(kind)
    forge = make_forge(forge_settings, kind)
    branch = "ribbit/issue-5-x"
    _push_fix(forge, world, kind, tmp_path, branch)
    forge.push(repo, tmp_path / f"checkout-{kind}", branch)

    pr = forge.open_draft_pull_request(
        repo,
        DraftPullRequest(
            head=branch, base="main", title="x", body="x", reviewers=["otto", "ghost-user", "maya"]
        ),
    )

    assert pr.draft
    stored = world.forge.pulls(kind, repo.full_name)[0]
    # GitHub refuses a request naming a non-collaborator, GitLab drops non-members and
    # unknown users: either way the one valid reviewer is still asked.
    assert stored.requested_reviewers == ["maya"]


@pytest.mark.parametrize("kind", FORGES)
def test_forge_reads_every_page_of_a_long_thread(
    kind: ForgeName, forge_world: ForgeWorld, forge_settings: Settings
) -> None:
    world = forge_world
    repo = world.repo(kind)
    issue = world.forge.create_issue(kind, repo.full_name, title="busy", author="maya")
    for n in range(45):
        world.forge.comment_as(kind, repo.full_name, issue.number, author="maya", body=f"c{n}")
    forge = make_forge(forge_settings, kind)
    ref = IssueRef(repo, issue.number)
    # A lost answer makes the forge look for its comment: on the last page now.
    world.forge.fail_next(r"/issues/\d+/(comments|notes)$", method="POST", after=True)

    comment_id = forge.post_comment(ref, "status")
    got = forge.get_issue(ref)

    assert [c.body for c in got.comments][:45] == [f"c{n}" for n in range(45)]
    assert got.comments[-1].id == comment_id
    assert len(world.forge.comments(kind, repo.full_name, issue.number)) == 46
    assert world.forge.request_count("GET", r"/issues/\d+/(comments|notes)$") >= 3
