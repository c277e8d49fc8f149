"""Hostile workspace content against every host read of a sandbox, on both backends:
read_file, write_file and diff (the patch the gates judge is computed on the host from
an export of the workspace). A FIFO must not block the host, a sparse file larger than
the workspace must not be read into memory, links must not be followed out, a deep
tree must end in an error, not a crash; and the diff must not come from anything the
sandbox runs (a ``git`` function in ~/.bash_profile)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from worker.sandbox import SandboxError, open_sandbox
from worker.sandbox.base import Sandbox
from worker.settings import SandboxSettings

pytestmark = pytest.mark.integration


@pytest.fixture
def sandbox(backend_settings: SandboxSettings, source_repo: Path) -> Iterator[Sandbox]:
    with open_sandbox(backend_settings, source_repo) as sb:
        yield sb


def test_read_file_refuses_a_fifo_without_blocking(sandbox: Sandbox) -> None:
    assert sandbox.exec(["mkfifo", "pipe"], timeout=30).exit_code == 0
    with pytest.raises((FileNotFoundError, SandboxError)):
        sandbox.read_file("pipe")


def _sparse(sandbox: Sandbox, *names: str) -> None:
    # 60 MB apparent size each, no blocks used: under bubblewrap's per-file size limit
    # (64 MB in the test settings), over the host's 32 MB read cap, and two of them
    # over the 64 MB workspace.
    for name in names:
        assert sandbox.exec(["truncate", "-s", "60M", name], timeout=30).exit_code == 0


def test_read_file_refuses_a_sparse_file_over_the_read_cap(sandbox: Sandbox) -> None:
    _sparse(sandbox, "big")
    with pytest.raises(SandboxError):
        sandbox.read_file("big")


def test_read_file_does_not_follow_a_link_out(sandbox: Sandbox) -> None:
    sandbox.exec(["ln", "-s", "/etc/passwd", "passwd"], timeout=30)
    sandbox.exec(["ln", "-s", "/etc", "etc"], timeout=30)
    for path in ("passwd", "etc/passwd"):
        with pytest.raises(PermissionError):
            sandbox.read_file(path)


def test_write_file_does_not_follow_a_link_out(sandbox: Sandbox, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    sandbox.exec(["ln", "-s", str(outside), "out"], timeout=30)
    sandbox.exec(["ln", "-s", "/tmp", "tmp"], timeout=30)
    sandbox.exec(["ln", "-s", "/etc/hostname", "host"], timeout=30)
    for path in ("out/x", "tmp/x", "host"):
        with pytest.raises((PermissionError, SandboxError)):
            sandbox.write_file(path, b"pwned")
    assert list(outside.iterdir()) == []
    assert sandbox.exec(["test", "-e", "/tmp/x"], timeout=30).exit_code != 0


def test_diff_skips_a_fifo_and_keeps_links_as_links(sandbox: Sandbox) -> None:
    sandbox.exec(["mkfifo", "pipe"], timeout=30)
    sandbox.exec(["ln", "-s", "/etc/passwd", "passwd"], timeout=30)
    sandbox.write_file("new.txt", b"hello\n")
    diff = sandbox.diff()
    assert "+hello" in diff
    assert "pipe" not in diff
    assert "new file mode 120000" in diff and "+/etc/passwd" in diff
    assert "root:" not in diff  # the link's target was never read


def test_diff_refuses_sparse_files_larger_than_the_workspace(sandbox: Sandbox) -> None:
    _sparse(sandbox, "big1", "big2")
    with pytest.raises(SandboxError):
        sandbox.diff()


def test_diff_refuses_a_tree_deeper_than_the_bound(sandbox: Sandbox) -> None:
    deep = "/".join(["d"] * 80)
    assert sandbox.exec(["mkdir", "-p", deep], timeout=30).exit_code == 0
    sandbox.exec(["touch", f"{deep}/f"], timeout=30)
    with pytest.raises(SandboxError):
        sandbox.diff()


def test_diff_is_not_computed_by_the_sandbox(sandbox: Sandbox) -> None:
    """Reproduced end to end in issue #12: a ``git`` function in the login profile
    rewrote what the host judged. The diff now never runs in the sandbox."""
    fake = "+THE FAKE DIFF"
    sandbox.exec(
        f"printf 'git() {{ echo \"{fake}\"; }}\\n' >> ~/.bash_profile; "
        "mkdir -p .git/hooks; echo 'garbage' > .git/index",
        timeout=30,
    )
    sandbox.write_file("pkg/mod.py", b"VALUE = 2\n")
    diff = sandbox.diff()
    assert fake not in diff
    assert "-VALUE = 1" in diff and "+VALUE = 2" in diff


def test_diff_stops_what_the_sandbox_left_running(sandbox: Sandbox) -> None:
    sandbox.exec(
        ["sh", "-c", "setsid sh -c 'while :; do echo x >> tick; done' >/dev/null 2>&1 &"],
        timeout=30,
    )
    first = sandbox.diff()
    assert first == sandbox.diff()
