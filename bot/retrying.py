"""The one retry loop: bounded attempts, exponential backoff with full jitter.

Callers say which errors are worth another try and which of those are not (a rate
limit is deferred by the job, never slept through). The sleep and the jitter are
parameters so tests run the loop without waiting.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def full_jitter(base_delay: float, attempt: int) -> float:
    """A wait drawn from [0, base_delay * 2**attempt] (AWS's "full jitter"): retries of
    many workers after one outage spread out instead of arriving together."""
    return random.uniform(0, base_delay * 2**attempt)  # noqa: S311


def retry(
    action: Callable[[], T],
    *,
    retry_on: tuple[type[BaseException], ...],
    give_up_on: tuple[type[BaseException], ...] = (),
    attempts: int,
    base_delay: float,
    before_retry: Callable[[], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    delay: Callable[[float, int], float] = full_jitter,
) -> T:
    """``action()``, tried up to ``attempts`` times while it raises one of ``retry_on``
    (but none of ``give_up_on``); the last error is raised as it was. ``before_retry``
    runs before each wait (e.g. removing a partial clone)."""
    for attempt in range(attempts):
        try:
            return action()
        except give_up_on:
            raise
        except retry_on:
            if attempt == attempts - 1:
                raise
            if before_retry is not None:
                before_retry()
            sleep(delay(base_delay, attempt))
    raise ValueError(f"attempts must be at least 1, not {attempts}")
