"""The one retry loop, run without waiting: sleep and jitter are injected."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from bot.forges.base import ForgeError, ForgeUnavailable
from bot.forges.retries import RateLimited
from bot.retrying import (
    Tried,
    retry,
    stop_after_attempts,
    stop_after_seconds,
    wait_exponential,
    wait_fixed,
    wait_full_jitter,
)


def _failing(errors: list[BaseException], result: str = "ok") -> Callable[[], str]:
    calls = iter(errors)

    def action() -> str:
        error = next(calls, None)
        if error is not None:
            raise error
        return result

    return action


def test_retries_with_exponential_waits_then_succeeds() -> None:
    waits: list[float] = []
    cleanups: list[int] = []
    out = retry(
        _failing([ForgeUnavailable("a"), ForgeUnavailable("b")]),
        retry_on=(ForgeUnavailable,),
        stop=stop_after_attempts(3),
        wait=wait_exponential(0.5),
        before_retry=lambda _exc: cleanups.append(1),
        sleep=waits.append,
    )
    assert out == "ok"
    assert waits == [0.5, 1.0]
    assert cleanups == [1, 1]


def test_the_last_error_is_raised_after_the_cap() -> None:
    waits: list[float] = []
    with pytest.raises(ForgeUnavailable, match="3"):
        retry(
            _failing([ForgeUnavailable("1"), ForgeUnavailable("2"), ForgeUnavailable("3")]),
            retry_on=(ForgeUnavailable,),
            stop=stop_after_attempts(3),
            wait=wait_full_jitter(1),
            sleep=waits.append,
        )
    assert len(waits) == 2


@pytest.mark.parametrize(
    "error", [RateLimited("slow down", retry_after=60), ForgeError("not found")]
)
def test_give_up_and_other_errors_are_not_retried(error: ForgeError) -> None:
    waits: list[float] = []
    with pytest.raises(type(error)):
        retry(
            _failing([error]),
            retry_on=(ForgeUnavailable,),
            give_up_on=(RateLimited,),
            stop=stop_after_attempts(3),
            wait=wait_fixed(1),
            sleep=waits.append,
        )
    assert waits == []


def test_full_jitter_stays_in_its_window() -> None:
    wait = wait_full_jitter(0.5)
    assert all(0 <= wait(Tried(3, 0.0)) <= 2.0 for _ in range(200))


def test_attempts_below_one_is_a_caller_error() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        stop_after_attempts(0)


def test_a_deadline_stops_on_the_first_failure_past_it() -> None:
    now = [0.0]
    waits: list[float] = []

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        now[0] += seconds

    with pytest.raises(OSError, match="busy"):
        retry(
            _failing([OSError("busy")] * 100),
            retry_on=(OSError,),
            stop=stop_after_seconds(1.0),
            wait=wait_fixed(0.25),
            sleep=sleep,
            clock=lambda: now[0],
        )
    # Failures at 0, 0.25, ..., 1.0 are within the second; the one at 1.25 is past it.
    assert waits == [0.25] * 5


def test_a_test_of_the_error_decides_what_is_retried() -> None:
    seen: list[str] = []
    out = retry(
        _failing([ForgeUnavailable("transient")]),
        retry_on=lambda exc: "transient" in str(exc),
        stop=stop_after_attempts(2),
        wait=wait_fixed(0),
        before_retry=lambda exc: seen.append(str(exc)),
        sleep=lambda _s: None,
    )
    assert out == "ok" and seen == ["transient"]
    with pytest.raises(ForgeUnavailable, match="fatal"):
        retry(
            _failing([ForgeUnavailable("fatal")]),
            retry_on=lambda exc: "transient" in str(exc),
            stop=stop_after_attempts(2),
            wait=wait_fixed(0),
            sleep=lambda _s: pytest.fail("not retried"),
        )
