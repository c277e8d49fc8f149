"""The one retry loop: what to retry, when to stop, how long to wait, each said explicitly.

Every loop in the tree that tries something again goes through :func:`retry`: a forge
call or a git push (bounded attempts, exponential backoff with full jitter), a model
server's answer, a create-once POST, a database transaction on a dead connection, an
engine that has not recorded an exit code yet, a cgroup whose processes are still
exiting, a database schema the deployment's upgrade has not brought to head yet. Callers
say which errors are worth another try and which of those are not (a rate limit is
deferred by the job, never slept through). The sleep and the clock are parameters, so
tests run every loop without waiting.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Tried:
    """Where a retry loop stands after a failed attempt."""

    attempts: int  # made so far: 1 after the first failure
    elapsed_s: float  # since the first attempt began


# Given where the loop stands, whether to give up (the last error is then raised).
Stop = Callable[[Tried], bool]
# Given where the loop stands, the seconds to wait before the next attempt.
Wait = Callable[[Tried], float]
# Which errors another attempt may cure: exception types, or a test of the error.
RetryOn = tuple[type[BaseException], ...] | Callable[[BaseException], bool]


def stop_after_attempts(attempts: int) -> Stop:
    """Give up once ``attempts`` attempts have failed."""
    if attempts < 1:
        raise ValueError(f"attempts must be at least 1, not {attempts}")
    return lambda tried: tried.attempts >= attempts


def stop_after_seconds(seconds: float) -> Stop:
    """Give up on the first failure more than ``seconds`` after the first attempt began."""
    return lambda tried: tried.elapsed_s > seconds


def wait_fixed(seconds: float) -> Wait:
    return lambda tried: seconds


def wait_exponential(base_s: float) -> Wait:
    """``base_s``, then twice that, then four times, ... (no jitter)."""
    return lambda tried: base_s * 2 ** (tried.attempts - 1)


def wait_full_jitter(base_s: float) -> Wait:
    """A wait drawn from [0, base_s * 2**(attempts - 1)] (AWS's "full jitter"): retries of
    many workers after one outage spread out instead of arriving together."""
    return lambda tried: random.uniform(0, base_s * 2 ** (tried.attempts - 1))  # noqa: S311


def _retryable(retry_on: RetryOn, exc: BaseException) -> bool:
    if isinstance(retry_on, tuple):
        return isinstance(exc, retry_on)
    return retry_on(exc)


def retry(
    action: Callable[[], T],
    *,
    retry_on: RetryOn,
    stop: Stop,
    wait: Wait,
    give_up_on: tuple[type[BaseException], ...] = (),
    before_retry: Callable[[BaseException], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> T:
    """``action()``, tried again while it raises an error ``retry_on`` accepts (but none of
    ``give_up_on``) until ``stop`` says enough; the last error is raised as it was.
    ``before_retry`` gets the error before each wait (to remove a partial clone, or to
    log what is retried)."""
    started = clock()
    attempts = 0
    while True:
        try:
            return action()
        except give_up_on:
            raise
        except BaseException as exc:
            if not _retryable(retry_on, exc):
                raise
            attempts += 1
            tried = Tried(attempts, clock() - started)
            if stop(tried):
                raise
            if before_retry is not None:
                before_retry(exc)
            sleep(wait(tried))
