"""The backends' shared pieces, with no sandbox started."""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

import pytest

from tests.fakes import make_git_repo
from worker.sandbox import SandboxError, open_sandbox, reap_stale, resolve_backend
from worker.sandbox.common import (
    CappedStream,
    base_commit,
    command_argv,
    host_workspace_diff,
    sandbox_env,
    timed_out_exit,
    timeout_argv,
    workspace_cwd,
    workspace_relative,
)
from worker.settings import SandboxSettings


def test_sandbox_env_is_an_allow_list(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RIBBIT_GITHUB__TOKEN", "ghp_secret")
    monkeypatch.setenv("HOME", "/root")
    env = sandbox_env({"EXTRA": "1"})
    assert env["HOME"] == "/home/sandbox"
    assert env["EXTRA"] == "1"
    assert "RIBBIT_GITHUB__TOKEN" not in env
    assert "ghp_secret" not in env.values()
    assert set(env) - {"EXTRA"} <= set(sandbox_env())
    assert not set(env) & (set(os.environ) - set(sandbox_env()) - {"EXTRA"})


@pytest.mark.parametrize("bad", ["A=B", "1X", "", "X Y", "X\0"])
def test_sandbox_env_rejects_bad_names(bad: str) -> None:
    with pytest.raises(ValueError):
        sandbox_env({bad: "v"})


def test_sandbox_env_rejects_nul_values() -> None:
    with pytest.raises(ValueError):
        sandbox_env({"OK": "a\0b"})


def test_command_argv_string_runs_under_bash() -> None:
    assert command_argv("echo $X") == ["bash", "-lc", "echo $X"]
    assert command_argv(["ls", "-l"]) == ["ls", "-l"]
    with pytest.raises(ValueError):
        command_argv([])


def test_timeout_argv_wraps_with_kill_grace() -> None:
    assert timeout_argv(["sleep", "9"], 1.5) == ["timeout", "-k", "2", "1.500", "sleep", "9"]
    with pytest.raises(ValueError):
        timeout_argv(["true"], 0)


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("a/b.txt", "a/b.txt"),
        ("/workspace/a/b.txt", "a/b.txt"),
        ("./a", "a"),
    ],
)
def test_workspace_relative_accepts_paths_inside(given: str, expected: str) -> None:
    assert workspace_relative(given) == PurePosixPath(expected)


@pytest.mark.parametrize(
    "bad", ["../x", "/etc/passwd", "a/../../x", "/workspace", ".", "", "/workspacex/y"]
)
def test_workspace_relative_rejects_paths_outside(bad: str) -> None:
    with pytest.raises(PermissionError):
        workspace_relative(bad)


def test_workspace_cwd() -> None:
    assert workspace_cwd("/workspace") == "/workspace"
    assert workspace_cwd("pkg") == "/workspace/pkg"
    with pytest.raises(PermissionError):
        workspace_cwd("/tmp")


def test_capped_stream_keeps_head_and_counts_all() -> None:
    stream = CappedStream(cap=5)
    for chunk in (b"abc", b"defg", b"h"):
        stream.feed(chunk)
    assert (bytes(stream.data), stream.total, stream.truncated) == (b"abcde", 8, True)
    exact = CappedStream(cap=3)
    exact.feed(b"abc")
    assert not exact.truncated
    bad = CappedStream(cap=10)
    bad.feed(b"\xff\xfeok")
    assert bad.text().endswith("ok")


def test_timed_out_exit_needs_both_code_and_time() -> None:
    assert timed_out_exit(124, elapsed=2.0, timeout=2.0)
    assert timed_out_exit(137, elapsed=4.1, timeout=2.0)
    assert not timed_out_exit(124, elapsed=0.1, timeout=2.0)
    assert not timed_out_exit(1, elapsed=5.0, timeout=2.0)


def test_base_commit(tmp_path: Path) -> None:
    sha = make_git_repo(tmp_path / "r", {"a": "1"})
    assert base_commit(tmp_path / "r") == sha
    (tmp_path / "plain").mkdir()
    assert base_commit(tmp_path / "plain") is None


def test_resolve_backend_explicit_choices_are_kept() -> None:
    assert resolve_backend(SandboxSettings(backend="bubblewrap")) == "bubblewrap"
    assert resolve_backend(SandboxSettings(backend="docker")) == "docker"


def test_auto_falls_back_to_bubblewrap_without_an_engine() -> None:
    settings = SandboxSettings(backend="auto", docker_url="unix:///nonexistent/docker.sock")
    assert resolve_backend(settings) == "bubblewrap"


def test_network_is_refused_unless_setup_network(tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match="SETUP_NETWORK"):
        open_sandbox(
            SandboxSettings(backend="bubblewrap", setup_network=False), tmp_path, network=True
        )


def test_reap_stale_without_engine_reaps_bubblewrap_only() -> None:
    settings = SandboxSettings(docker_url="unix:///nonexistent/docker.sock")
    assert isinstance(reap_stale(settings), list)


def test_the_diff_leaves_out_what_setup_wrote_and_never_follows_a_link(tmp_path: Path) -> None:
    source = tmp_path / "repo"
    base = make_git_repo(source, {"pkg/mod.py": "x = 1\n"})
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("host file\n")

    def export(tree: Path) -> None:
        (tree / "pkg.egg-info").mkdir(parents=True)
        (tree / "pkg.egg-info" / "PKG-INFO").write_text("Name: pkg\n")
        (tree / "pkg").mkdir()
        (tree / "pkg" / "mod.py").write_text("x = 2\n")
        (tree / "pkg" / "new.py").write_text("y = 1\n")
        # The agent turned a folder setup made into a link out of the export.
        (tree / "build").symlink_to(outside)

    diff = host_workspace_diff(
        source, base, export, leave_out=["pkg.egg-info", "build/keep.txt", "../outside"]
    )
    assert "pkg.egg-info" not in diff
    assert "b/pkg/mod.py" in diff and "b/pkg/new.py" in diff
    assert (outside / "keep.txt").read_text() == "host file\n"


def test_a_backend_missing_a_host_diff_step_fails_when_made() -> None:
    """HostDiffedSandbox's two backend steps are abstract: a backend that leaves one out
    is refused at construction, not at its first diff in the middle of a job."""
    from collections.abc import Callable

    from worker.sandbox.common import HostDiffedSandbox
    from worker.sandbox.export import ExportLimits

    class NoExport(HostDiffedSandbox):
        def _stop_processes(self) -> None:
            pass

        def close(self) -> None:
            pass

    class Complete(NoExport):
        def _export_into(self, limits: ExportLimits) -> Callable[[Path], None]:
            return lambda _folder: None

    with pytest.raises(TypeError, match="_export_into"):
        NoExport()  # type: ignore[abstract]
    with Complete() as made:
        made.leave_out_of_diff(["node_modules"])
