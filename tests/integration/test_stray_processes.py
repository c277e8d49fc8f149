"""What a test command leaves running, on the real backends (the run script in
worker/gates/testrun.py): a process still on its way out is not a stray, one that lives
on is, and neither a process that forks and exits in a loop nor a zombie leader whose
other threads run escapes the kill. The sandbox answers afterwards (its resident process,
frozen with the rest while the strays are killed, runs again)."""

from __future__ import annotations

from pathlib import Path

import pytest

from worker.gates.testrun import run_tests
from worker.sandbox.base import Sandbox, SandboxFactory

pytestmark = pytest.mark.integration

# Lists the processes of the sandbox whose command line holds $1, this shell aside
# (builtins only, so the look lists nothing of its own).
_FIND = (
    'for f in /proc/[0-9]*; do [ "$f" = "/proc/$$" ] && continue; a=(); '
    'mapfile -d "" a <"$f/cmdline" 2>/dev/null || continue; r="${a[*]}"; '
    'case "$r" in *"$1"*) echo "$f: $r" ;; esac; done; exit 0'
)
# Forks a copy of itself and exits, forever: no pid lives long.
HOPPER = "#!/bin/sh\n[ -e /tmp/hop.on ] || exit 0\nsh /tmp/hop.sh & exit 0\n"
# The main thread leaves by pthread_exit while another thread sleeps: the leader shows
# "State: Z" with "Threads: 2".
ZOMBIE_LEADER = (
    "import ctypes, threading, time\n"
    "threading.Thread(target=time.sleep, args=(600,)).start()\n"
    "ctypes.CDLL(None).pthread_exit(None)\n"
)


def _left(sandbox: Sandbox, name: str) -> str:
    found = sandbox.exec(["bash", "-c", _FIND, "find", name], timeout=30)
    assert found.exit_code == 0, found.stderr
    return found.stdout.strip()


def _tree(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "hop.sh").write_text(HOPPER)
    (tree / "leader.py").write_text(ZOMBIE_LEADER)
    return tree


def test_a_child_still_exiting_is_not_a_stray_and_one_that_lives_on_is(
    tmp_path: Path, backend_factory: SandboxFactory
) -> None:
    # The first child ends on its own a moment after the command (0.3 s, well inside
    # the 2 s the run script gives); the second would sleep for ten minutes.
    with backend_factory(_tree(tmp_path)) as sandbox:
        exiting = run_tests(sandbox, "sleep 0.3 & echo started", timeout=60)
        assert exiting.exit_code == 0 and exiting.strays == 0, exiting.log()
        lasting = run_tests(sandbox, "sleep 601 & echo started", timeout=60)
        assert lasting.exit_code == 0 and lasting.strays == 1, lasting.log()
        assert _left(sandbox, "sleep 601") == ""


def test_a_fork_hopper_and_a_zombie_leader_are_counted_and_killed(
    tmp_path: Path, backend_factory: SandboxFactory
) -> None:
    with backend_factory(_tree(tmp_path)) as sandbox:
        hop = run_tests(
            sandbox, "touch /tmp/hop.on; cp hop.sh /tmp/hop.sh; sh /tmp/hop.sh", timeout=60
        )
        assert hop.strays >= 1, hop.log()
        assert _left(sandbox, "/tmp/hop.sh") == ""
        leader = run_tests(sandbox, "python3 leader.py & sleep 0.5; echo left", timeout=60)
        assert leader.strays == 1, leader.log()
        assert _left(sandbox, "leader.py") == ""
        # The sandbox's own process runs again: the next command is answered.
        assert sandbox.exec(["true"], timeout=30).exit_code == 0
