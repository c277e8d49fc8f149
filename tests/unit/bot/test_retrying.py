"""The one retry loop, run without waiting: sleep and jitter are injected."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from bot.forges.base import ForgeError, ForgeUnavailable
from bot.forges.retries import RateLimited
from bot.retrying import full_jitter, retry


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
        attempts=3,
        base_delay=0.5,
        before_retry=lambda: cleanups.append(1),
        sleep=waits.append,
        delay=lambda base, attempt: base * 2**attempt,
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
            attempts=3,
            base_delay=1,
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
            attempts=3,
            base_delay=1,
            sleep=waits.append,
        )
    assert waits == []


def test_full_jitter_stays_in_its_window() -> None:
    assert all(0 <= full_jitter(0.5, 2) <= 2.0 for _ in range(200))
