from __future__ import annotations

from email.utils import formatdate

from bot.forges.retries import is_github_rate_limited, retry_after_seconds, retry_policy


def test_retry_after_seconds_from_each_header() -> None:
    assert retry_after_seconds({"Retry-After": "30"}, now=0) == 30
    assert retry_after_seconds({"retry-after": formatdate(1000, usegmt=True)}, now=940) == 60
    assert retry_after_seconds({"X-RateLimit-Reset": "1100"}, now=1000) == 100
    assert retry_after_seconds({"RateLimit-Reset": "1050"}, now=1000) == 50
    assert retry_after_seconds({"X-RateLimit-Reset": "900"}, now=1000) == 0
    assert retry_after_seconds({}, now=0) is None
    assert retry_after_seconds({"Retry-After": "soon"}, now=0) is None


def test_github_rate_limit_detection() -> None:
    assert is_github_rate_limited(403, {"X-RateLimit-Remaining": "0"}, "API rate limit exceeded")
    assert is_github_rate_limited(403, {"Retry-After": "60"}, "")
    assert is_github_rate_limited(403, {}, "You have exceeded a secondary rate limit.")
    assert is_github_rate_limited(429, {}, "")
    assert not is_github_rate_limited(
        403, {"X-RateLimit-Remaining": "4999"}, "Resource not accessible by integration"
    )
    assert not is_github_rate_limited(500, {"Retry-After": "1"}, "")


def test_retry_policy_never_retries_post_on_a_status() -> None:
    policy = retry_policy()
    assert policy.is_retry("GET", 502)
    assert policy.is_retry("PATCH", 503)
    assert not policy.is_retry("POST", 502)
    assert not policy.is_retry("GET", 404)
    assert policy.backoff_jitter > 0
