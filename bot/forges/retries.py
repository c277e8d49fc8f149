"""HTTP policy shared by both forge clients: bounded retries, rate-limit reading.

Retries happen inside urllib3 (both PyGithub and python-gitlab sit on
requests). Only idempotent methods are retried on 5xx or a lost response; a
POST is retried only on a connect error, where the request provably never
reached the server. Rate limits are never slept through here: they become
:class:`ForgeUnavailable` with ``retry_after`` so the job is deferred.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from email.utils import parsedate_to_datetime
from typing import TypeVar

from urllib3.util.retry import Retry

from bot.forges.base import ForgeUnavailable
from bot.retrying import retry, stop_after_attempts, wait_full_jitter

T = TypeVar("T")

RETRY_STATUSES = (500, 502, 503, 504)
IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE", "PATCH"})
HTTP_TIMEOUT_S = 30
# A rate limit that says no wait (GitHub's secondary limits, a bare GitLab 429): GitHub
# asks to wait "at least one minute".
RATE_LIMIT_WAIT_S = 60.0


class RateLimited(ForgeUnavailable):
    """The forge refused the request for a rate limit: it did nothing, wait ``retry_after``."""


def retry_policy(*, total: int = 4, backoff_factor: float = 0.5) -> Retry:
    """Bounded retries with exponential backoff and jitter.

    PATCH and PUT are safe here because Ribbit only sends whole-value updates
    (a comment's body, a status); repeating one leaves the same state.
    """
    return Retry(
        total=total,
        connect=total,
        read=2,
        status=total,
        other=0,
        status_forcelist=RETRY_STATUSES,
        allowed_methods=IDEMPOTENT_METHODS,
        backoff_factor=backoff_factor,
        backoff_max=10,
        backoff_jitter=backoff_factor,
        respect_retry_after_header=False,
        raise_on_status=False,
        raise_on_redirect=False,
    )


def retry_repeatable(action: Callable[[], T], *, attempts: int = 3, base_delay: float = 0.25) -> T:
    """Retry a POST whose repetition is harmless (a status, labels, reviewer requests).

    urllib3 never repeats a POST after a 5xx; these may be, because sending one
    twice leaves the same state. Rate limits are not retried: the caller defers.
    """
    return retry(
        action,
        retry_on=(ForgeUnavailable,),
        give_up_on=(RateLimited,),
        stop=stop_after_attempts(attempts),
        wait=wait_full_jitter(base_delay),
    )


def _header(headers: Mapping[str, str], name: str) -> str | None:
    lowered = name.lower()
    for key, value in headers.items():
        if key.lower() == lowered:
            return str(value)
    return None


def retry_after_seconds(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds to wait from Retry-After (seconds or HTTP date), X-RateLimit-Reset or
    RateLimit-Reset (epoch seconds); None when no header says."""
    now = time.time() if now is None else now
    retry_after = _header(headers, "Retry-After")
    if retry_after:
        try:
            return max(0.0, float(retry_after))
        except ValueError:
            try:
                return max(0.0, parsedate_to_datetime(retry_after).timestamp() - now)
            except (TypeError, ValueError):
                pass
    for name in ("X-RateLimit-Reset", "RateLimit-Reset"):
        reset = _header(headers, name)
        if reset:
            try:
                return max(0.0, float(reset) - now)
            except ValueError:
                continue
    return None


def is_github_rate_limited(status: int, headers: Mapping[str, str], message: str) -> bool:
    """GitHub signals primary limits with 403/429 and X-RateLimit-Remaining: 0, secondary
    limits with 403/429 and a message (and usually Retry-After)."""
    if status not in (403, 429):
        return False
    if status == 429 or _header(headers, "X-RateLimit-Remaining") == "0":
        return True
    if _header(headers, "Retry-After") is not None:
        return True
    lowered = message.lower()
    return "rate limit" in lowered or "abuse" in lowered
