"""What only the bubblewrap backend has: a throwaway host uid, the private temp dir and
its reaping, and no network ever."""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.plugins.skips import skip_unless_root
from worker.sandbox.bubblewrap import TEMP_PREFIX, BubblewrapSandbox, reap_stale
from worker.settings import SandboxSettings

pytestmark = pytest.mark.integration


def test_bubblewrap_runs_as_a_throwaway_host_uid(
    bubblewrap_settings: SandboxSettings, source_repo: Path
) -> None:
    skip_unless_root("only a root worker can drop to a throwaway uid")
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


FORGER = r"""
import base64, glob, json, os
fake = base64.b64encode(b"FORGED\n").decode()
for status in glob.glob("/proc/[0-9]*/cmdline"):
    try:
        if b"--inside-sandbox" not in open(status, "rb").read():
            continue
        with open(status.replace("cmdline", "fd/1"), "w") as answers:
            for _ in range(2000):  # keeps answering small ids while the host runs more
                for n in range(1, 50):
                    answers.write(json.dumps({"id": n, "rc": 0, "out": fake, "err": "",
                                              "out_total": 7, "err_total": 0}) + "\n")
                answers.flush()
    except OSError:
        pass
"""


def test_bubblewrap_answers_cannot_be_forged_from_inside(
    bubblewrap_settings: SandboxSettings, source_repo: Path
) -> None:
    """A sandboxed process that tries to answer in the resident process's place: the
    kernel refuses it the answer pipe (/proc/PID/fd of bwrap's processes is not
    reachable from inside), and were it reachable, answers for ids it cannot guess
    (random) would be ignored. Either way the host gets the real output."""
    with BubblewrapSandbox(bubblewrap_settings, source_repo) as sb:
        launch = (
            "import subprocess as s, sys; s.Popen([sys.executable, '-c', sys.argv[1]], "
            "start_new_session=True, stdout=s.DEVNULL, stderr=s.DEVNULL)"
        )
        assert sb.exec(["python3", "-c", launch, FORGER], timeout=60).exit_code == 0
        for _ in range(20):
            assert sb.exec(["echo", "real"], timeout=30).stdout == "real\n"


def test_bubblewrap_keeps_tmp_home_and_background_processes(
    bubblewrap_settings: SandboxSettings, source_repo: Path
) -> None:
    with BubblewrapSandbox(bubblewrap_settings, source_repo) as sb:
        # A process in a session of its own (as the agent's Bash runs) outlives its exec;
        # Popen returns only after the child's setsid, so nothing races the exec's end.
        detach = (
            "import subprocess as s; p = s.Popen(['sleep', '300'], start_new_session=True, "
            "stdout=s.DEVNULL, stderr=s.DEVNULL); print(p.pid)"
        )
        sb.exec("echo kept > /tmp/t; echo kept > ~/h", timeout=30)
        started = sb.exec(["python3", "-c", detach], timeout=30)
        pid = started.stdout.strip()
        later = sb.exec(f"cat /tmp/t ~/h; kill -0 {pid} && echo alive", timeout=30)
        assert later.stdout == "kept\nkept\nalive\n"
        host_root = sb.host_root
    assert not host_root.exists()  # closing removed everything, the pid namespace with it


def test_bubblewrap_runner_refuses_a_timeout_it_could_never_keep(
    bubblewrap_settings: SandboxSettings, source_repo: Path
) -> None:
    # Past the host's own check: the runner answers as ``timeout`` does for an invalid
    # interval (125) instead of running a command no deadline would ever end.
    with BubblewrapSandbox(bubblewrap_settings, source_repo) as sb:
        for timeout in (float("nan"), float("inf"), 0.0, -5.0):
            request = {"argv": ["sleep", "300"], "env": {}, "cwd": "/", "timeout": timeout}
            answer = sb._call({**request, "cap": 100}, 30)
            assert answer is not None and answer["rc"] == 125, (timeout, answer)
        assert sb.exec(["pgrep", "sleep"], timeout=30).exit_code == 1  # none started


def test_bubblewrap_refuses_a_lone_surrogate_at_once_and_stays_open(
    bubblewrap_settings: SandboxSettings, source_repo: Path
) -> None:
    """It used to reach the runner inside, which could not start it and never answered:
    the caller waited out the timeout and the sandbox closed (issue #34 item 7)."""
    with BubblewrapSandbox(bubblewrap_settings, source_repo) as sb:
        with pytest.raises(UnicodeEncodeError):
            sb.exec(["echo", "a\ud800b"], timeout=600)
        assert sb.exec(["echo", "still open"], timeout=30).stdout == "still open\n"
