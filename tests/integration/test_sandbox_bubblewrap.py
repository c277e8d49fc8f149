"""What only the bubblewrap backend has: a throwaway host uid, the private temp dir and
its reaping, and no network ever."""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

import pytest

from bot.settings import SandboxSettings
from worker.sandbox.bubblewrap import TEMP_PREFIX, BubblewrapSandbox, reap_stale

pytestmark = pytest.mark.integration


def test_bubblewrap_runs_as_a_throwaway_host_uid(
    bubblewrap_settings: SandboxSettings, source_repo: Path
) -> None:
    if os.geteuid() != 0:
        pytest.skip("only a root worker can drop to a throwaway uid")
    with BubblewrapSandbox(bubblewrap_settings, source_repo) as sb:
        # A file the sandbox creates belongs, on the host, to the uid it really runs as.
        assert sb.exec("touch made_inside; id -u", timeout=30).stdout == "1000\n"
        made_by = (sb.workspace / "made_inside").stat().st_uid
        owner = sb.host_root.stat().st_uid
    assert made_by == owner
    assert owner >= 3_000_000


def test_bubblewrap_workspace_is_private(
    bubblewrap_settings: SandboxSettings, source_repo: Path
) -> None:
    with BubblewrapSandbox(bubblewrap_settings, source_repo) as sb:
        assert sb.host_root.is_relative_to(Path(tempfile.gettempdir()))
        assert oct(sb.host_root.stat().st_mode & 0o777) == oct(0o700)


def test_bubblewrap_setup_sandbox_gets_only_the_egress_folder(
    bubblewrap_settings: SandboxSettings, source_repo: Path
) -> None:
    with BubblewrapSandbox(bubblewrap_settings, source_repo, network=True) as sb:
        assert sb.egress_dir is not None
        (sb.egress_dir / "marker").write_text("x\n")
        out = sb.exec("cat /run/ribbit-egress/marker; cat /proc/net/dev", timeout=30).stdout
        assert out.startswith("x")
        assert [line.split(":")[0].strip() for line in out.splitlines()[3:]] == ["lo"]
        written = sb.exec("touch /run/ribbit-egress/planted", timeout=30)
        assert written.exit_code != 0


def test_bubblewrap_reap_stale_removes_dead_owners_only(
    bubblewrap_settings: SandboxSettings, source_repo: Path, tmp_path: Path
) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = tmp_path / f"{TEMP_PREFIX}stale"
    (stale / "workspace").mkdir(parents=True)
    (stale / "owner").write_text(f"{dead.pid}\n")
    alive = tmp_path / f"{TEMP_PREFIX}alive"
    alive.mkdir()
    (alive / "owner").write_text(f"{os.getpid()}\n")
    assert reap_stale(tmp_path) == [stale]
    assert not stale.exists() and alive.exists()
