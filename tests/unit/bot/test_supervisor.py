"""The embedded-process supervisor's restart logic on a hand-moved clock and fake children:
no process is started and nothing sleeps."""

from __future__ import annotations

from collections.abc import Sequence

from bot.supervisor import Backoff, ChildStatus, Supervisor


class FakeChild:
    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.code: int | None = None
        self.group_killed = False
        self.terminated = False

    def poll(self) -> int | None:
        return self.code

    def terminate(self) -> None:
        self.terminated = True

    def wait(self, timeout: float) -> bool:
        return self.terminated

    def kill_group(self) -> None:
        self.group_killed = True


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Harness:
    def __init__(self) -> None:
        self.clock = Clock()
        self.started: list[tuple[list[str], FakeChild]] = []
        self.supervisor = Supervisor(
            {"worker": ["w"], "beat": ["b"]}, spawn=self.spawn, clock=self.clock
        )

    def spawn(self, argv: Sequence[str]) -> FakeChild:
        child = FakeChild(pid=100 + len(self.started))
        self.started.append((list(argv), child))
        return child

    def latest(self, argv0: str) -> FakeChild:
        return [c for a, c in self.started if a == [argv0]][-1]

    def worker(self) -> ChildStatus:
        return next(s for s in self.supervisor.status() if s.name == "worker")

    def at(self, t: float) -> None:
        self.clock.now = 1000.0 + t
        self.supervisor.tick()


def test_supervisor_starts_every_child_on_its_first_look() -> None:
    h = Harness()
    assert [s.state for s in h.supervisor.status()] == ["starting", "starting"]
    h.at(0)
    assert [a for a, _ in h.started] == [["w"], ["b"]]
    assert [(s.name, s.state, s.restarts) for s in h.supervisor.status()] == [
        ("worker", "running", 0),
        ("beat", "running", 0),
    ]


def test_supervisor_restarts_a_dead_child_after_the_backoff_and_counts_it() -> None:
    h = Harness()
    h.at(0)
    first = h.latest("w")
    first.code = -9
    h.at(5)
    assert first.group_killed  # what it left behind (its pool) is gone before a restart
    assert (h.worker().state, h.worker().last_exit, h.worker().pid) == ("restarting", -9, None)
    h.at(5.5)  # within the first delay (1 s): not yet
    assert h.worker().state == "restarting"
    h.at(6)
    assert h.latest("w") is not first
    assert (h.worker().state, h.worker().restarts) == ("running", 1)
    assert h.worker().pid == h.latest("w").pid
    beat = next(s for s in h.supervisor.status() if s.name == "beat")
    assert (beat.state, beat.restarts) == ("running", 0)


def test_supervisor_doubles_the_delay_for_deaths_in_a_row_up_to_the_cap() -> None:
    h = Harness()
    h.at(0)
    t = 0.0
    delays = []
    for _ in range(9):
        h.latest("w").code = 1
        h.at(t)  # dies at once: a child that cannot start
        died_at = t
        while h.worker().state != "running":
            t += 0.5
            h.at(t)
        delays.append(t - died_at)
    assert delays == [1, 2, 4, 8, 16, 32, 60, 60, 60]
    assert h.worker().restarts == 9


def test_supervisor_starts_the_delay_over_after_a_stable_minute() -> None:
    h = Harness()
    h.at(0)
    for died, restarted in ((0, 1), (1, 3), (3, 7)):  # three quick deaths: next wait 8 s
        h.latest("w").code = 1
        h.at(died)
        h.at(restarted)
        assert h.worker().state == "running"
    h.latest("w").code = 1
    h.at(7 + 60)  # lived a minute
    h.at(7 + 61)
    assert (h.worker().state, h.worker().restarts) == ("running", 4)


def test_backoff_is_bounded() -> None:
    b = Backoff(first_s=1, max_s=60)
    assert [b.delay(n) for n in (1, 2, 3, 6, 7, 30)] == [1, 2, 4, 32, 60, 60]


def test_supervisor_stop_terminates_and_kills_each_group_and_restarts_nothing() -> None:
    h = Harness()
    h.at(0)
    children = [c for _, c in h.started]
    h.supervisor.stop(grace_s=0)
    assert all(c.terminated and c.group_killed for c in children)
    h.at(100)
    assert len(h.started) == 2
    assert [s.state for s in h.supervisor.status()] == ["stopped", "stopped"]
