"""The resident runner's pure parts, imported (never run as a script: its main loop is
meant for the inside of a sandbox): the exit codes it answers the way ``timeout -k``
does, when its loop wakes, output kept up to the cap, requests it refuses, and the
kill(-1) that must never fire outside a sandbox. Commands here are short real processes
in their own groups, driven through ``_watch`` with the clock passed in."""

from __future__ import annotations

import base64
import contextlib
import json
import math
import os
import selectors
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from worker.sandbox import session_server as server
from worker.sandbox.session_server import KILLED, POLL_S, TIMED_OUT, Job


def _answers(capfd: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in capfd.readouterr().out.splitlines()]


@pytest.fixture
def sel() -> Iterator[selectors.BaseSelector]:
    selector = selectors.DefaultSelector()
    yield selector
    selector.close()


# Taken before the fixture below replaces it in every test.
_REAL_KILL_ALL = server._kill_all


@pytest.fixture(autouse=True)
def no_kill_all(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Records kill(-1) instead of sending it, in every test: this is the host, not a
    sandbox, and a broken guard must fail a test, not end the session."""
    calls: list[bool] = []
    monkeypatch.setattr(server, "_kill_all", lambda: calls.append(True))
    return calls


def _start(
    argv: list[str],
    sel: selectors.BaseSelector,
    timeout: float = 30,
    cap: int = 65536,
    cwd: Path | None = None,
) -> Job:
    jobs: list[Job] = []
    request = {"id": 7, "argv": argv, "timeout": timeout, "cap": cap, "cwd": str(cwd or "/")}
    request["env"] = {"PATH": os.environ["PATH"]}
    server._start(request, sel, jobs)
    (job,) = jobs
    return job


def _wait_exit(job: Job) -> None:
    """Until the command has ended, leaving it unreaped (as the runner's loop finds it)."""
    os.waitid(os.P_PID, job.proc.pid, os.WEXITED | os.WNOWAIT)


def _run_to_end(job: Job, sel: selectors.BaseSelector) -> None:
    """Read the job's output to its end, then let ``_watch`` reap it."""
    server._close_exit_fd(job, sel)
    for fd in list(job.open):
        os.set_blocking(fd, True)
        while chunk := os.read(fd, 65536):
            job.feed(fd, chunk)
        sel.unregister(fd)
        job.files[fd].close()
        job.open.discard(fd)
    if job.rc is None:
        _wait_exit(job)
    assert server._watch(job, now=job.term_at - 1)


# -- exit codes ------------------------------------------------------------------------


class _Signalled:
    def __init__(self, signalled: int) -> None:
        self.signalled = signalled


@pytest.mark.parametrize(
    ("signalled", "returncode", "answer"),
    [
        (0, 0, 0),
        (0, 3, 3),
        (0, 124, 124),  # the command's own 124 is passed through as it is
        (0, -signal.SIGSEGV, 128 + signal.SIGSEGV),  # as a shell reports a signal death
        (signal.SIGTERM, -signal.SIGTERM, TIMED_OUT),
        (signal.SIGTERM, 0, TIMED_OUT),  # it caught SIGTERM and exited cleanly: still late
        (signal.SIGKILL, -signal.SIGKILL, KILLED),
    ],
)
def test_exit_code_is_what_a_shell_or_timeout_would_say(
    signalled: int, returncode: int, answer: int
) -> None:
    assert server._exit_code(_Signalled(signalled), returncode) == answer
    assert (TIMED_OUT, KILLED) == (124, 137)


# -- requests it answers without running anything ------------------------------------------


@pytest.mark.parametrize("timeout", [0, -1, math.nan, math.inf, 1e9])
def test_start_refuses_a_timeout_that_could_never_be_kept(
    timeout: float, sel: selectors.BaseSelector, capfd: pytest.CaptureFixture[str]
) -> None:
    jobs: list[Job] = []
    server._start({"id": 3, "argv": ["true"], "timeout": timeout}, sel, jobs)
    assert jobs == []
    (answer,) = _answers(capfd)
    assert (answer["id"], answer["rc"]) == (3, 125)
    assert base64.b64decode(answer["err"]) == b"invalid timeout\n"


def test_start_answers_127_for_a_command_that_cannot_start(
    sel: selectors.BaseSelector, capfd: pytest.CaptureFixture[str]
) -> None:
    jobs: list[Job] = []
    server._start({"id": 4, "argv": ["/nonexistent/cmd"], "timeout": 5}, sel, jobs)
    assert jobs == []
    (answer,) = _answers(capfd)
    assert answer["rc"] == 127 and b"nonexistent" in base64.b64decode(answer["err"])


def test_stop_all_kills_everything_else_then_answers(
    sel: selectors.BaseSelector, capfd: pytest.CaptureFixture[str], no_kill_all: list[bool]
) -> None:
    jobs: list[Job] = []
    server._start({"id": 9, "stop_all": True}, sel, jobs)
    assert no_kill_all == [True] and jobs == []
    (answer,) = _answers(capfd)
    assert (answer["id"], answer["rc"], answer["out_total"]) == (9, 0, 0)


def test_kill_all_never_fires_outside_a_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[tuple[int, int]] = []
    monkeypatch.setattr(os, "kill", lambda pid, sig: sent.append((pid, sig)))
    monkeypatch.setattr(sys, "argv", ["-c"])
    monkeypatch.setattr(os, "getuid", lambda: 1000)
    _REAL_KILL_ALL()  # not started with --inside-sandbox
    monkeypatch.setattr(sys, "argv", ["-c", "--inside-sandbox"])
    monkeypatch.setattr(os, "getuid", lambda: 0)
    _REAL_KILL_ALL()  # root: kill(-1) would take the machine
    assert sent == []
    monkeypatch.setattr(os, "getuid", lambda: 1000)
    _REAL_KILL_ALL()
    assert sent == [(-1, signal.SIGKILL)]


# -- a command's life ----------------------------------------------------------------------


def test_command_runs_in_its_own_group_with_only_the_given_env(
    sel: selectors.BaseSelector, capfd: pytest.CaptureFixture[str], no_kill_all: list[bool]
) -> None:
    os.environ["RIBBIT_TEST_HOST_SECRET"] = "s3cret"
    try:
        jobs: list[Job] = []
        request = {
            "id": 11,
            "argv": [
                "sh",
                "-c",
                'echo "$ONLY"; env | grep -c RIBBIT_TEST; cut -d" " -f5 /proc/$$/stat; exit 3',
            ],
            "env": {"ONLY": "this", "PATH": os.environ["PATH"]},
            "cwd": "/",
            "timeout": 30,
        }
        server._start(request, sel, jobs)
    finally:
        del os.environ["RIBBIT_TEST_HOST_SECRET"]
    (job,) = jobs
    _run_to_end(job, sel)
    assert job.rc == 3 and no_kill_all == []
    server._finish(job, sel, jobs)
    assert jobs == []
    (answer,) = _answers(capfd)
    out = base64.b64decode(answer["out"]).decode().split()
    assert (answer["id"], answer["rc"]) == (11, 3)
    assert out[:2] == ["this", "0"]
    # Its own process group (the one a timeout signals), not the runner's.
    assert int(out[2]) == job.proc.pid != os.getpgrp()


def test_output_is_kept_up_to_the_cap_and_counted_beyond(
    sel: selectors.BaseSelector, capfd: pytest.CaptureFixture[str]
) -> None:
    job = _start(["sh", "-c", "printf 0123456789; printf abc >&2"], sel, cap=4)
    _run_to_end(job, sel)
    jobs = [job]
    server._finish(job, sel, jobs)
    (answer,) = _answers(capfd)
    assert base64.b64decode(answer["out"]) == b"0123"
    assert base64.b64decode(answer["err"]) == b"abc"
    assert (answer["out_total"], answer["err_total"]) == (10, 3)


def test_output_cap_holds_across_chunks(sel: selectors.BaseSelector) -> None:
    job = _start(["true"], sel, cap=4)
    for chunk in (b"abc", b"def", b"ghi"):
        job.feed(job.out_fd, chunk)
    assert (bytes(job.kept[job.out_fd]), job.total[job.out_fd]) == (b"abcd", 9)
    _run_to_end(job, sel)


def test_a_late_command_gets_sigterm_then_answers_124(
    sel: selectors.BaseSelector, no_kill_all: list[bool]
) -> None:
    job = _start(["sleep", "30"], sel)
    assert not server._watch(job, now=job.term_at - 0.5)  # not yet
    assert job.signalled == 0
    assert not server._watch(job, now=job.term_at)
    assert job.signalled == signal.SIGTERM
    _wait_exit(job)
    assert server._watch(job, now=job.term_at + 0.1)
    assert job.rc == TIMED_OUT
    # What the command detached goes too: a timeout takes the whole sandbox's strays.
    assert no_kill_all == [True]
    _run_to_end(job, sel)


def test_a_command_that_ignores_sigterm_is_killed_and_answers_137(
    sel: selectors.BaseSelector, no_kill_all: list[bool]
) -> None:
    job = _start(["sh", "-c", "trap '' TERM; echo ready; while :; do sleep 1; done"], sel)
    os.set_blocking(job.out_fd, True)
    assert os.read(job.out_fd, 6) == b"ready\n"  # the trap is set
    server._watch(job, now=job.term_at)
    assert job.signalled == signal.SIGTERM
    assert not server._watch(job, now=job.kill_at - 0.1)
    assert job.proc.poll() is None  # SIGTERM was ignored
    server._watch(job, now=job.kill_at)
    assert job.signalled == signal.SIGKILL
    _wait_exit(job)
    assert server._watch(job, now=job.kill_at + 0.1)
    assert job.rc == KILLED
    _run_to_end(job, sel)


def test_a_command_that_ends_takes_its_group_but_not_its_own_sessions(
    sel: selectors.BaseSelector, tmp_path: Path
) -> None:
    # One child stays in the command's group; one starts a session of its own (as the
    # agent's Bash tool does): the first dies with the command, the second lives on.
    script = (
        "sleep 30 & echo $! > grouped; "
        "setsid sh -c 'echo $$ > detached.tmp; mv detached.tmp detached; exec sleep 30' & "
        "while [ ! -e detached ]; do :; done; exit 0"
    )
    job = _start(["sh", "-c", script], sel, cwd=tmp_path)
    _wait_exit(job)
    grouped = int((tmp_path / "grouped").read_text())
    detached = int((tmp_path / "detached").read_text())
    try:
        assert server._watch(job, now=job.term_at - 1)
        assert job.rc == 0
        assert _gone(grouped)
        assert _state(detached) not in {None, "Z"}  # still running, no wait needed
    finally:
        for pid in (grouped, detached):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        _run_to_end(job, sel)


def _state(pid: int) -> str | None:
    """The process's state letter (None: no such process)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return None
    return stat.rsplit(")", 1)[1].split()[0]


def _gone(pid: int) -> bool:
    """Dead or a zombie (the test's sh, now gone, was its parent; init reaps it)."""
    for _ in range(500):
        if _state(pid) in {None, "Z"}:
            return True
        time.sleep(0.01)  # a bounded moment for the SIGKILL to land, not a timing check
    return False


# -- when the loop wakes -------------------------------------------------------------------


def test_next_wake_follows_the_job_through_its_deadlines(sel: selectors.BaseSelector) -> None:
    job = _start(["true"], sel, timeout=10)
    assert job.kill_at == job.term_at + server.KILL_GRACE_S
    assert job.next_wake() == job.term_at
    job.signalled = signal.SIGTERM
    assert job.next_wake() == job.kill_at
    job.signalled = signal.SIGKILL
    assert job.next_wake() == job.deadline == job.kill_at + 1
    job.signalled, job.rc = 0, 0
    assert job.next_wake() == job.deadline  # ended: only its held output is waited for
    _run_to_end(job, sel)


def test_wait_is_none_when_idle_and_never_negative(sel: selectors.BaseSelector) -> None:
    assert server._wait_s([]) is None
    job = _start(["true"], sel, timeout=10)
    assert 9 < (server._wait_s([job]) or 0) <= 10
    job.term_at = 0.0  # long past
    assert server._wait_s([job]) == 0.0
    _run_to_end(job, sel)


def test_wait_polls_a_running_job_without_a_pidfd(sel: selectors.BaseSelector) -> None:
    job = _start(["true"], sel, timeout=10)
    server._close_exit_fd(job, sel)
    assert server._wait_s([job]) == POLL_S
    job.rc = 0  # ended: nothing to poll for
    assert (server._wait_s([job]) or 0) > POLL_S
    _run_to_end(job, sel)
