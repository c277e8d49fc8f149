"""Failure handling against the local forge: 5xx and lost answers are retried without
duplicates, rate limits defer with retry_after, refusals become clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.forges import make_forge
from bot.forges.base import (
    CommitStatus,
    DraftPullRequest,
    ForgeName,
    ForgeNotFound,
    ForgePermissionDenied,
    ForgeUnavailable,
    IssueRef,
)
from bot.settings import Settings
from tests.fakes import commit_files, git
from tests.plugins.forge import ForgeWorld, settings_for
from tests.plugins.services import free_port

pytestmark = pytest.mark.integration
FORGES = ["github", "gitlab"]
COMMENTS = {"github": r"/issues/\d+/comments$", "gitlab": r"/issues/\d+/notes$"}
PULLS = {"github": r"/repos/acme/widgets/pulls$", "gitlab": r"/merge_requests$"}
ISSUE = {"github": r"/issues/\d+$", "gitlab": r"/issues/\d+$"}


def _issue(world: ForgeWorld, kind: ForgeName) -> IssueRef:
    repo = world.repo(kind)
    issue = world.forge.create_issue(kind, repo.full_name, title="t", author="maya")
    return IssueRef(repo, issue.number)


def _pushed_branch(world: ForgeWorld, kind: ForgeName, settings: Settings, tmp_path: Path) -> str:
    forge = make_forge(settings, kind)
    checkout = tmp_path / "checkout"
    forge.clone(world.repo(kind), checkout)
    branch = "ribbit/issue-1-fix"
    git(checkout, "checkout", "-q", "-b", branch)
    commit_files(checkout, {"fix.txt": "fixed\n"}, "fix")
    forge.push(world.repo(kind), checkout, branch)
    return branch


@pytest.mark.parametrize("kind", FORGES)
def test_forge_get_recovers_from_5xx(
    kind: ForgeName, forge_world: ForgeWorld, forge_settings: Settings
) -> None:
    ref = _issue(forge_world, kind)
    forge_world.forge.fail_next(ISSUE[kind], count=2, status=502, method="GET")

    issue = make_forge(forge_settings, kind).get_issue(ref)

    assert issue.title == "t"
    assert forge_world.forge.request_count("GET", ISSUE[kind]) == 3


@pytest.mark.parametrize("kind", FORGES)
def test_forge_persistent_5xx_is_unavailable_after_bounded_retries(
    kind: ForgeName, forge_world: ForgeWorld, forge_settings: Settings
) -> None:
    ref = _issue(forge_world, kind)
    forge_world.forge.fail_next(ISSUE[kind], count=1000, status=503, method="GET")

    with pytest.raises(ForgeUnavailable) as excinfo:
        make_forge(forge_settings, kind).get_issue(ref)

    assert excinfo.value.retry_after is None
    assert 2 <= forge_world.forge.request_count("GET", ISSUE[kind]) <= 6


@pytest.mark.parametrize("kind", FORGES)
@pytest.mark.parametrize("lost", [False, True], ids=["refused", "answer-lost"])
def test_forge_comment_survives_a_5xx_without_duplicate(
    kind: ForgeName, lost: bool, forge_world: ForgeWorld, forge_settings: Settings
) -> None:
    ref = _issue(forge_world, kind)
    # lost: the forge stores the comment, then the answer is a 500 (a proxy timed out).
    forge_world.forge.fail_next(COMMENTS[kind], count=1, status=500, method="POST", after=lost)

    comment_id = make_forge(forge_settings, kind).post_comment(ref, "Working on it")

    comments = forge_world.forge.comments(kind, ref.repo.full_name, ref.number)
    assert len(comments) == 1
    assert comments[0].id == comment_id
    assert comments[0].body.startswith("Working on it")


@pytest.mark.parametrize("kind", FORGES)
def test_forge_pull_request_survives_a_lost_answer_without_duplicate(
    kind: ForgeName, forge_world: ForgeWorld, forge_settings: Settings, tmp_path: Path
) -> None:
    branch = _pushed_branch(forge_world, kind, forge_settings, tmp_path)
    forge_world.forge.fail_next(PULLS[kind], count=1, status=502, method="POST", after=True)

    pr = make_forge(forge_settings, kind).open_draft_pull_request(
        forge_world.repo(kind),
        DraftPullRequest(head=branch, base="main", title="Fix", body="Fixes #1", labels=["bot"]),
    )

    stored = forge_world.forge.pulls(kind, forge_world.repo(kind).full_name)
    assert [p.number for p in stored] == [pr.ref.number]
    assert stored[0].labels == ["bot"]
    assert forge_world.forge.request_count("POST", PULLS[kind]) == 1


@pytest.mark.parametrize(
    ("kind", "mode"), [("github", "primary"), ("github", "secondary"), ("gitlab", "429")]
)
def test_forge_rate_limit_defers_with_retry_after_and_posts_nothing(
    kind: ForgeName, mode: str, forge_world: ForgeWorld, forge_settings: Settings
) -> None:
    ref = _issue(forge_world, kind)
    forge_world.forge.rate_limit_next(kind, COMMENTS[kind], mode=mode, wait_s=120)

    with pytest.raises(ForgeUnavailable) as excinfo:
        make_forge(forge_settings, kind).post_comment(ref, "hello")

    assert excinfo.value.retry_after is not None
    assert 100 <= excinfo.value.retry_after <= 121
    assert "rate limit" in str(excinfo.value)
    assert forge_world.forge.comments(kind, ref.repo.full_name, ref.number) == []
    assert forge_world.forge.request_count("POST", COMMENTS[kind]) == 1


@pytest.mark.parametrize("kind", FORGES)
def test_forge_rate_limited_read_defers(
    kind: ForgeName, forge_world: ForgeWorld, forge_settings: Settings
) -> None:
    ref = _issue(forge_world, kind)
    forge_world.forge.rate_limit_next(kind, ISSUE[kind], mode="primary", wait_s=300)

    with pytest.raises(ForgeUnavailable) as excinfo:
        make_forge(forge_settings, kind).get_issue(ref)
    assert excinfo.value.retry_after is not None and excinfo.value.retry_after > 200


@pytest.mark.parametrize("kind", FORGES)
def test_forge_unreachable_is_unavailable(
    kind: ForgeName, tmp_path: Path, local_forge_server: object
) -> None:
    from tests.forge.server import LocalForge

    assert isinstance(local_forge_server, LocalForge)
    port = free_port()  # nothing listens here
    settings = Settings.model_validate(
        {
            "data_dir": tmp_path,
            "github": {
                "api_url": f"http://127.0.0.1:{port}/api/v3",
                "token": "tok_unreachable",
                "write_interval_s": 0,
                "retry_backoff_s": 0.01,
            },
            "gitlab": {
                "url": f"http://127.0.0.1:{port}/gitlab",
                "token": "tok_unreachable",
                "retry_backoff_s": 0.01,
            },
        }
    )
    from bot.forges.base import RepoRef

    with pytest.raises(ForgeUnavailable, match="unreachable"):
        make_forge(settings, kind).default_branch(RepoRef(kind, "acme/widgets"))


@pytest.mark.parametrize("kind", FORGES)
def test_forge_clone_recovers_from_a_git_5xx(
    kind: ForgeName, forge_world: ForgeWorld, forge_settings: Settings, tmp_path: Path
) -> None:
    forge_world.forge.fail_next(r"^/git/.*/info/refs$", count=1, status=503)

    make_forge(forge_settings, kind).clone(forge_world.repo(kind), tmp_path / "c")

    assert (tmp_path / "c" / "README.md").read_text() == "# widgets\n"


@pytest.mark.parametrize("kind", FORGES)
def test_forge_outsider_token_is_refused(
    kind: ForgeName, forge_world: ForgeWorld, tmp_path: Path
) -> None:
    world = forge_world
    ref = _issue(world, kind)
    outsider = make_forge(
        settings_for(
            world.forge,
            tmp_path,
            github_token=world.outsider.token,
            gitlab_token=world.outsider.token,
        ),
        kind,
    )

    # A private repository does not exist for someone without access.
    with pytest.raises(ForgeNotFound, match="404"):
        outsider.get_issue(ref)
    with pytest.raises(ForgeNotFound):
        outsider.clone(ref.repo, tmp_path / "nope")

    # With read access: reading works, writing is denied with a clear reason.
    world.forge.add_collaborator(kind, ref.repo.full_name, "otto", "read")
    assert outsider.get_issue(ref).title == "t"
    outsider.clone(ref.repo, tmp_path / "read-only")
    git(tmp_path / "read-only", "checkout", "-q", "-b", "ribbit/issue-1-x")
    commit_files(tmp_path / "read-only", {"x.txt": "x\n"}, "x")
    with pytest.raises(ForgePermissionDenied, match="403"):
        outsider.push(ref.repo, tmp_path / "read-only", "ribbit/issue-1-x")
    with pytest.raises(ForgePermissionDenied, match="403"):
        outsider.open_draft_pull_request(
            ref.repo, DraftPullRequest(head="main", base="main", title="x", body="x")
        )
    assert "ribbit/issue-1-x" not in world.forge.branches(kind, ref.repo.full_name)


@pytest.mark.parametrize("kind", FORGES)
def test_forge_bad_token_is_permission_denied(
    kind: ForgeName, forge_world: ForgeWorld, tmp_path: Path
) -> None:
    ref = _issue(forge_world, kind)
    forge = make_forge(
        settings_for(
            forge_world.forge, tmp_path, github_token="tok_revoked", gitlab_token="tok_revoked"
        ),
        kind,
    )
    with pytest.raises(ForgePermissionDenied, match="401"):
        forge.get_issue(ref)
    with pytest.raises(ForgePermissionDenied):
        forge.clone(ref.repo, tmp_path / "c")


@pytest.mark.parametrize("kind", FORGES)
def test_forge_comment_whose_answer_times_out_is_not_duplicated(
    kind: ForgeName, forge_world: ForgeWorld, tmp_path: Path
) -> None:
    ref = _issue(forge_world, kind)
    settings = settings_for(
        forge_world.forge,
        tmp_path,
        github_token=forge_world.bot.token,
        gitlab_token=forge_world.bot.token,
        http_timeout_s=1,
    )
    # The forge stores the comment at once but answers only after the client gave up.
    forge_world.forge.fail_next(
        COMMENTS[kind], count=1, status=None, method="POST", after=True, delay_s=3
    )

    comment_id = make_forge(settings, kind).post_comment(ref, "Working on it")

    comments = forge_world.forge.comments(kind, ref.repo.full_name, ref.number)
    assert [c.id for c in comments] == [comment_id]


@pytest.mark.parametrize("kind", FORGES)
def test_forge_slow_read_is_retried(
    kind: ForgeName, forge_world: ForgeWorld, tmp_path: Path
) -> None:
    ref = _issue(forge_world, kind)
    settings = settings_for(
        forge_world.forge,
        tmp_path,
        github_token=forge_world.bot.token,
        gitlab_token=forge_world.bot.token,
        http_timeout_s=1,
    )
    forge_world.forge.fail_next(ISSUE[kind], count=1, status=None, method="GET", delay_s=3)

    assert make_forge(settings, kind).get_issue(ref).title == "t"


@pytest.mark.parametrize("kind", FORGES)
def test_forge_commit_status_is_retried_after_a_5xx(
    kind: ForgeName, forge_world: ForgeWorld, forge_settings: Settings
) -> None:
    repo = forge_world.repo(kind)
    sha = forge_world.forge.branches(kind, repo.full_name)["main"]
    forge_world.forge.fail_next(r"/statuses/[0-9a-f]{40}$", count=2, status=502, method="POST")

    make_forge(forge_settings, kind).set_commit_status(repo, sha, CommitStatus(state="pending"))

    statuses = forge_world.forge.repo(kind, repo.full_name).statuses
    assert [(s.sha, s.state) for s in statuses] == [(sha, "pending")]
