"""The bounded warm shutdown: once Celery starts one, a timer of ``--drain`` seconds is set
whose end exits the process. The timer and the exit are recorded, never run."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from celery.signals import worker_shutting_down

from worker import shutdown


def test_warm_shutdown_sets_a_drain_timer_that_exits(monkeypatch: pytest.MonkeyPatch) -> None:
    timers: list[tuple[float, Callable[[], None]]] = []
    exits: list[int] = []

    class Timer:
        def __init__(self, interval: float, function: Callable[[], None]) -> None:
            timers.append((interval, function))
            self.daemon = False

        def start(self) -> None:
            assert self.daemon  # a timer that kept the process alive would be the hang itself

    monkeypatch.setattr(shutdown.threading, "Timer", Timer)
    monkeypatch.setattr(shutdown.os, "_exit", exits.append)
    # A worker started earlier in this process set its own bound: the last one set wins.
    shutdown.bound_warm_shutdown(8280.0)
    receiver = shutdown.bound_warm_shutdown(45.0)
    try:
        assert timers == []  # nothing before a stop
        kwargs: dict[str, Any] = {"sig": "SIGTERM", "how": "Warm", "exitcode": 0}
        worker_shutting_down.send(sender="celery@test", **kwargs)
        assert [interval for interval, _ in timers] == [45.0]
        timers[0][1]()
        assert exits == [shutdown.GAVE_UP]
    finally:
        worker_shutting_down.disconnect(receiver)
