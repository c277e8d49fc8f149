"""Host git refuses what a hostile checkout can name: hooks, fsmonitor, user config,
the process's secrets."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bot import hostgit


def _hostile_repo(tmp_path: Path) -> tuple[Path, Path]:
    """A checkout whose own config and hooks would each leave a marker file if run."""
    repo, marker = tmp_path / "repo", tmp_path / "ran"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    script = tmp_path / "evil.sh"
    script.write_text(f"#!/bin/sh\ntouch {marker}\n")
    script.chmod(0o755)
    hooks = repo / ".git" / "hooks"
    for hook in ("pre-commit", "post-commit", "post-checkout", "reference-transaction"):
        (hooks / hook).write_text(script.read_text())
        (hooks / hook).chmod(0o755)
    with (repo / ".git" / "config").open("a") as config:
        config.write(f"[core]\n\tfsmonitor = {script}\n")
    (repo / "a.txt").write_text("a\n")
    return repo, marker


def test_hooks_and_fsmonitor_of_the_checkout_never_run(tmp_path: Path) -> None:
    repo, marker = _hostile_repo(tmp_path)
    hostgit.git_ok(repo, "add", "a.txt")
    hostgit.git_ok(repo, "status", "--porcelain")
    hostgit.git_ok(repo, "commit", "-q", "-m", "x")
    hostgit.git_ok(repo, "checkout", "-q", "-b", "other")
    assert not marker.exists()
    author = hostgit.git_ok(repo, "log", "-1", "--format=%an <%ae>").decode().strip()
    assert author == "ribbit <ribbit@localhost>"


def test_the_environment_is_an_allow_list(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "nope")
    monkeypatch.setenv("GIT_DIR", "/somewhere/else")
    monkeypatch.setenv("HOME", "/root")
    env = hostgit.git_env()
    assert "AWS_SECRET_ACCESS_KEY" not in env
    assert "GIT_DIR" not in env
    assert env["HOME"] == "/dev/null"
    assert env["GIT_CONFIG_GLOBAL"] == "/dev/null"
    assert env["GIT_CONFIG_NOSYSTEM"] == "1"
    pairs = {
        env[f"GIT_CONFIG_KEY_{i}"]: env[f"GIT_CONFIG_VALUE_{i}"]
        for i in range(int(env["GIT_CONFIG_COUNT"]))
    }
    assert pairs["core.hooksPath"] == "/dev/null"
    assert pairs["core.fsmonitor"] == "false"


def test_only_callers_that_ask_accept_any_owner() -> None:
    assert "safe.directory" in hostgit.git_env().values()
    assert "safe.directory" not in hostgit.git_env(any_owner=False).values()


@pytest.mark.parametrize("key", ["GIT_CONFIG_GLOBAL", "GIT_DIR", "PATH", "LD_PRELOAD"])
def test_identity_cannot_turn_the_hardening_off(key: str) -> None:
    with pytest.raises(ValueError, match="identity"):
        hostgit.git_env(extra={key: "x"})


def test_failures_and_non_shas_raise_git_error(tmp_path: Path) -> None:
    with pytest.raises(hostgit.GitError, match="git rev-parse failed"):
        hostgit.git_ok(tmp_path, "rev-parse", "HEAD")
    with pytest.raises(hostgit.GitError, match="not a commit sha"):
        hostgit.resolve_commit(tmp_path, "--output=/etc/passwd")
    assert hostgit.head_commit(tmp_path) is None


def test_revision_commit_names_sha1_and_sha256_commits(tmp_path: Path) -> None:
    from bot.hostgit import GitError, revision_commit

    for fmt, length in (("sha1", 40), ("sha256", 64)):
        repo = tmp_path / fmt
        ident = ["-c", "user.name=t", "-c", "user.email=t@example.org"]
        subprocess.run(["git", "init", "-q", f"--object-format={fmt}", str(repo)], check=True)
        (repo / "a.txt").write_text("a\n")
        subprocess.run(["git", "-C", str(repo), "add", "a.txt"], check=True)
        subprocess.run(["git", "-C", str(repo), *ident, "commit", "-qm", "a"], check=True)
        assert len(revision_commit(repo, "HEAD")) == length
        with pytest.raises(GitError, match="names no commit"):
            revision_commit(repo, "HEAD^")


def test_a_timeout_is_a_git_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The family's one root: a caller catching GitError also catches a timeout."""

    def expire(argv: list[str], **_kwargs: object) -> None:
        raise subprocess.TimeoutExpired(argv, 5)

    monkeypatch.setattr(subprocess, "run", expire)
    with pytest.raises(hostgit.GitTimeout, match="git status timed out after 5s") as caught:
        hostgit.run_git(tmp_path, "status", timeout=5)
    assert isinstance(caught.value, hostgit.GitError)
    assert hostgit.head_commit(tmp_path) is None  # a timed-out HEAD is no HEAD


def test_detached_clone_is_at_the_commit_with_no_remote(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    hostgit.git_ok(None, "init", "-q", str(repo))
    for text in ("one\n", "two\n"):
        (repo / "a.txt").write_text(text)
        hostgit.git_ok(repo, "add", "a.txt")
        hostgit.git_ok(repo, "commit", "-q", "-m", text)
    first = hostgit.revision_commit(repo, "HEAD~1")
    dest = hostgit.detached_clone(repo, first, tmp_path / "clone")
    assert hostgit.head_commit(dest) == first
    assert (dest / "a.txt").read_text() == "one\n"
    assert hostgit.git_ok(dest, "remote").strip() == b""  # the host path stays out
    assert hostgit.head_commit(repo) != first  # the source did not move
