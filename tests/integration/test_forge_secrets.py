"""After a full run on each forge, no token value is anywhere it could leak: log records,
exception messages, the checkout's .git folder, or the URLs the forge was asked for."""

from __future__ import annotations

import base64
import logging
import traceback
from pathlib import Path

import pytest

from bot.forges import make_forge
from bot.forges.base import (
    CommitStatus,
    DraftPullRequest,
    ForgeError,
    ForgeName,
    IssueRef,
    RepoRef,
)
from bot.forges.redact import install_redacting_filter
from bot.settings import Settings
from tests.fakes import commit_files, git
from tests.plugins.forge import ForgeWorld, settings_for

pytestmark = pytest.mark.integration


def _forms(token: str) -> list[str]:
    """The token and the encodings it travels in."""
    return [
        token,
        *(
            base64.b64encode(f"{user}:{token}".encode()).decode()
            for user in ("x-access-token", "oauth2")
        ),
    ]


def _assert_nowhere(token: str, texts: list[str], where: str) -> None:
    for form in _forms(token):
        for text in texts:
            assert form not in text, f"token found in {where}"


@pytest.mark.parametrize("kind", ["github", "gitlab"])
def test_forge_tokens_never_leak_through_a_full_run(
    kind: ForgeName,
    forge_world: ForgeWorld,
    forge_settings: Settings,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    caplog.set_level(logging.DEBUG)
    world = forge_world
    token = world.bot.token
    repo = world.repo(kind)
    issue = world.forge.create_issue(
        kind, repo.full_name, title="Fix add", body="please", author="maya"
    )
    forge = make_forge(forge_settings, kind)
    ref = IssueRef(repo, issue.number)
    errors: list[BaseException] = []

    forge.get_issue(ref)
    assert forge.has_write_access(repo, "maya")
    comment = forge.post_comment(ref, "Working")
    checkout = tmp_path / "checkout"
    forge.clone(repo, checkout)
    git(checkout, "checkout", "-q", "-b", "ribbit/issue-1-fix-add")
    commit_files(checkout, {"widgets/__init__.py": "def add(a, b):\n    return a + b\n"}, "fix")
    forge.push(repo, checkout, "ribbit/issue-1-fix-add")
    pr = forge.open_draft_pull_request(
        repo,
        DraftPullRequest(
            head="ribbit/issue-1-fix-add",
            base="main",
            title="Fix add",
            body="Fixes #1",
            labels=["bot"],
            reviewers=["maya"],
        ),
    )
    forge.set_commit_status(repo, pr.head_sha, CommitStatus(state="success"))
    forge.edit_comment(ref, comment, "Done")
    forge.get_pull_request_diff(pr.ref)
    # Failures too: their messages and tracebacks must be as clean.
    world.forge.fail_next(r".", count=1000, status=500)
    for action in (lambda: forge.get_issue(ref), lambda: forge.clone(repo, tmp_path / "x")):
        with pytest.raises(ForgeError) as excinfo:
            action()
        errors.append(excinfo.value)
    world.forge.faults.clear()
    with pytest.raises(ForgeError) as denied:
        forge.default_branch(RepoRef(kind, "acme/elsewhere"))
    errors.append(denied.value)

    log_text = [r.getMessage() for r in caplog.records] + [caplog.text]
    _assert_nowhere(token, log_text, "log records")
    error_text = ["".join(traceback.format_exception(e)) + repr(e) for e in errors]
    _assert_nowhere(token, error_text, "exceptions")
    git_files = [
        p.read_text(errors="replace")
        for p in (checkout / ".git").rglob("*")
        if p.is_file() and p.stat().st_size < 1_000_000
    ]
    _assert_nowhere(token, git_files, "the checkout's .git folder")
    assert "extraheader" not in (checkout / ".git" / "config").read_text().lower()
    _assert_nowhere(token, [r.path for r in world.forge.requests], "request URLs")
    out, err = capfd.readouterr()
    _assert_nowhere(token, [out, err], "stdout/stderr")


def test_forge_redacting_filter_masks_a_token_logged_by_mistake(
    forge_world: ForgeWorld, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Building the forge registers its token with the process-wide registry.
    make_forge(
        settings_for(
            forge_world.forge, tmp_path, github_token=forge_world.bot.token, gitlab_token=None
        ),
        "github",
    )
    logger = logging.getLogger("ribbit.test.redaction")
    filt = install_redacting_filter(logger)
    caplog.handler.addFilter(filt)
    try:
        logger.warning("token is %s", forge_world.bot.token)
    finally:
        logger.removeFilter(filt)
        caplog.handler.removeFilter(filt)
    assert forge_world.bot.token not in caplog.text
    assert "token is ***" in caplog.text


@pytest.mark.parametrize("kind", ["github", "gitlab"])
def test_forge_masks_a_known_token_in_text_it_posts(
    kind: ForgeName, forge_world: ForgeWorld, forge_settings: Settings
) -> None:
    world = forge_world
    token = world.bot.token
    repo = world.repo(kind)
    issue = world.forge.create_issue(kind, repo.full_name, title="t", author="maya")
    forge = make_forge(forge_settings, kind)
    ref = IssueRef(repo, issue.number)

    # Model output or a test log could quote a token; it must not reach the forge.
    comment = forge.post_comment(ref, f"the log said TOKEN={token}")
    forge.edit_comment(ref, comment, f"still {token}")
    stored = world.forge.comments(kind, repo.full_name, issue.number)[0]

    assert token not in stored.body and stored.body == "still ***"
    assert all(token not in old for old in stored.history)
