"""`ribbit serve`'s embedded worker and beat: child processes it starts, watches and
restarts.

A child that dies (the OOM killer, a crash, a SIGKILL) is started again after a delay that
doubles with each death in a row (1 s up to 60 s) and starts over once a child has lived
a stable minute, so a child that cannot start does not spin. Each child leads a process
group of its own, so that a dead worker's pool, or anything else it left, is killed with
it before the next one starts; and each child is told to die with ``ribbit serve``
(:func:`die_with_parent`), so a SIGKILLed ``ribbit serve`` leaves nothing running.

The state of each child is what /healthz, the dashboard and /metrics report
(:class:`ChildStatus`); the restart logic runs on an injected clock, so its tests need no
sleeps.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

log = logging.getLogger(__name__)

# The variable a child finds its supervisor's pid in (die_with_parent).
PARENT_ENV = "RIBBIT_EMBEDDED_PARENT"
POLL_S = 0.5

ChildState = Literal["starting", "running", "restarting", "stopped"]


@dataclass(frozen=True)
class Backoff:
    """How long a dead child waits before it is started again."""

    first_s: float = 1.0
    max_s: float = 60.0
    # A child that lived this long died of something new: its next start waits first_s.
    stable_s: float = 60.0

    def delay(self, deaths_in_a_row: int) -> float:
        return min(self.first_s * 2 ** max(deaths_in_a_row - 1, 0), self.max_s)


@dataclass(frozen=True)
class ChildStatus:
    """One embedded process, as /healthz, the dashboard and /metrics show it."""

    name: str
    state: ChildState
    pid: int | None
    restarts: int
    # The last death's exit status (negative: the signal that killed it); None: none yet.
    last_exit: int | None

    @property
    def up(self) -> bool:
        return self.state == "running"


class Child(Protocol):
    """A started child process (ChildProcess; a fake in tests)."""

    pid: int

    def poll(self) -> int | None: ...

    def terminate(self) -> None: ...

    def wait(self, timeout: float) -> bool: ...

    def kill_group(self) -> None: ...


class EmbeddedStatus(Protocol):
    """What the web app reads: the supervisor of this process's embedded children."""

    def status(self) -> list[ChildStatus]: ...


class ChildProcess:
    """A child in a process group of its own, told whose death to die with."""

    def __init__(self, argv: Sequence[str]) -> None:
        env = {**os.environ, PARENT_ENV: str(os.getpid())}
        self._proc = subprocess.Popen(list(argv), env=env, start_new_session=True)
        self.pid = self._proc.pid

    def poll(self) -> int | None:
        return self._proc.poll()

    def terminate(self) -> None:
        # The leader only: Celery's warm shutdown stops its own pool in order.
        if self._proc.poll() is None:
            self._proc.terminate()

    def wait(self, timeout: float) -> bool:
        try:
            self._proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return False
        return True

    def kill_group(self) -> None:
        # The group outlives its leader while any member lives (a dead worker's beat or
        # pool), and keeps the leader's pid as its id.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        self._proc.poll()  # reap the leader, if it was not yet


class _Slot:
    """One child's mutable record, only touched under the supervisor's lock."""

    def __init__(self, name: str, argv: Sequence[str], now: float) -> None:
        self.name, self.argv = name, argv
        self.child: Child | None = None
        self.started_at = now
        self.start_at: float | None = now  # None: running, or stopped for good
        self.deaths_in_a_row = 0
        self.restarts = 0
        self.last_exit: int | None = None

    def status(self, stopped: bool) -> ChildStatus:
        state: ChildState
        if self.child is not None:
            state = "running"
        elif stopped:
            state = "stopped"
        else:
            state = "starting" if self.restarts == 0 and self.last_exit is None else "restarting"
        pid = self.child.pid if self.child is not None else None
        return ChildStatus(self.name, state, pid, self.restarts, self.last_exit)


class Supervisor:
    """Starts each named child, restarts the dead ones with :class:`Backoff`, stops all."""

    def __init__(
        self,
        children: Mapping[str, Sequence[str]],
        spawn: Callable[[Sequence[str]], Child] = ChildProcess,
        clock: Callable[[], float] = time.monotonic,
        backoff: Backoff | None = None,
    ) -> None:
        self._spawn, self._clock = spawn, clock
        self._backoff = backoff or Backoff()
        now = clock()
        self._slots = [_Slot(name, argv, now) for name, argv in children.items()]
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def status(self) -> list[ChildStatus]:
        with self._lock:
            return [s.status(self._stopping.is_set()) for s in self._slots]

    def tick(self) -> None:
        """One look at every child: reap and schedule the dead, start the due."""
        with self._lock:
            if self._stopping.is_set():
                return
            for slot in self._slots:
                self._look_at(slot, self._clock())

    def _look_at(self, slot: _Slot, now: float) -> None:
        if slot.child is not None:
            code = slot.child.poll()
            if code is None:
                return
            pid = slot.child.pid
            slot.child.kill_group()
            slot.child, slot.last_exit = None, code
            lived = now - slot.started_at
            slot.deaths_in_a_row = (
                1 if lived >= self._backoff.stable_s else slot.deaths_in_a_row + 1
            )
            delay = self._backoff.delay(slot.deaths_in_a_row)
            slot.start_at = now + delay
            log.warning(
                "embedded %s (pid %s) exited with %s after %.0f s; restarting in %.0f s",
                slot.name,
                pid,
                code,
                lived,
                delay,
            )
        if slot.start_at is not None and now >= slot.start_at:
            if slot.last_exit is not None:
                slot.restarts += 1
            slot.child, slot.started_at, slot.start_at = self._spawn(slot.argv), now, None

    def start(self) -> None:
        """Start the children and watch them from a thread of their own. Every start comes
        from that thread, which lives until :meth:`stop`: a child's parent-death signal
        fires when the thread that started it ends."""

        def watch() -> None:
            while True:
                try:
                    self.tick()
                except Exception:  # a failed start: the next look tries again
                    log.exception("embedded process supervisor")
                if self._stopping.wait(POLL_S):
                    return

        self._thread = threading.Thread(target=watch, name="embedded-supervisor", daemon=True)
        self._thread.start()

    def stop(self, grace_s: float) -> None:
        """SIGTERM every child, wait up to ``grace_s`` for them all, then kill what is left
        of each process group."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            children = [s.child for s in self._slots if s.child is not None]
            for slot in self._slots:
                slot.child = None
        for child in children:
            child.terminate()
        deadline = self._clock() + grace_s
        for child in children:
            if not child.wait(max(deadline - self._clock(), 0.0)):
                log.warning(
                    "embedded process %d did not stop in %.0f s; killing it", child.pid, grace_s
                )
            child.kill_group()


def die_with_parent() -> None:
    """In a child of :class:`Supervisor`: receive SIGTERM when ``ribbit serve`` dies, even
    by SIGKILL, and exit now if it already has. Does nothing outside one."""
    expected = os.environ.pop(PARENT_ENV, None)
    if expected is None:
        return
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_pdeathsig = 1
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(pr_set_pdeathsig, signal.SIGTERM)
    else:  # no parent-death signal: look for the parent's death instead
        threading.Thread(target=_watch_parent, args=(int(expected),), daemon=True).start()
    # Checked after asking for the signal: a parent that died before the ask sends none.
    if os.getppid() != int(expected):
        raise SystemExit(f"ribbit: the process that started this one ({expected}) is gone")


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(1.0)
    os.kill(os.getpid(), signal.SIGTERM)
