"""The one ladder from a failed forge request to a Forge error, for both forges."""

from __future__ import annotations

import pytest
import requests

from bot.forges.base import ForgeError, ForgeNotFound, ForgePermissionDenied, ForgeUnavailable
from bot.forges.http_errors import mapped_errors, status_error
from bot.forges.retries import RATE_LIMIT_WAIT_S, RateLimited


def _error(
    status: int, headers: dict[str, str] | None = None, *, limited: bool = False
) -> ForgeError:
    return status_error(
        "GitLab", "read issue 1", status, "boom", headers or {}, rate_limited=limited
    )


def test_the_status_ladder() -> None:
    assert type(_error(404)) is ForgeNotFound
    assert type(_error(401)) is ForgePermissionDenied
    assert type(_error(403)) is ForgePermissionDenied
    assert type(_error(422)) is ForgeError
    assert str(_error(422)) == "GitLab answered 422 to read issue 1: boom"
    for status in (500, 503, 0):  # 0: no answer came at all
        assert type(_error(status)) is ForgeUnavailable


def test_a_5xx_keeps_the_servers_retry_after() -> None:
    error = _error(503, {"Retry-After": "30"})
    assert isinstance(error, ForgeUnavailable)
    assert error.retry_after == 30
    assert _error(503).retry_after is None  # type: ignore[attr-defined]


def test_a_rate_limit_defers_as_long_as_asked_else_a_minute() -> None:
    asked = _error(429, {"Retry-After": "120"}, limited=True)
    assert isinstance(asked, RateLimited)
    assert asked.retry_after == 120
    assert "rate limit" in str(asked)
    # A 403 that the forge marks as a rate limit is deferred, not refused.
    bare = _error(403, limited=True)
    assert isinstance(bare, RateLimited)
    assert bare.retry_after == RATE_LIMIT_WAIT_S == 60


class ApiError(Exception):
    pass


def _mapped(exc: Exception) -> Exception:
    translate = mapped_errors("GitHub", "open a PR", ApiError, lambda e: ForgeNotFound(str(e)))
    with pytest.raises(ForgeError) as caught, translate:
        raise exc
    return caught.value


def test_mapped_errors_translates_each_kind_of_failure() -> None:
    assert type(_mapped(ApiError("gone"))) is ForgeNotFound
    unreachable = _mapped(requests.ConnectionError("refused"))
    assert type(unreachable) is ForgeUnavailable
    assert str(unreachable) == "GitHub unreachable while trying to open a PR: ConnectionError"
    assert type(_mapped(requests.Timeout())) is ForgeUnavailable
    assert "kept failing" in str(_mapped(requests.exceptions.RetryError()))
    already = ForgePermissionDenied("no")
    assert _mapped(already) is already


def test_mapped_errors_lets_other_errors_through() -> None:
    with pytest.raises(KeyError), mapped_errors("GitHub", "x", ApiError, ForgeError):
        raise KeyError("bug")
