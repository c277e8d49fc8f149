"""How both forge clients turn a failed request into a :class:`~bot.forges.base.ForgeError`.

One ladder for both forges: a rate limit is a refusal that carries ``retry_after`` (the
job is deferred, not slept through); a 5xx, a connection error or a timeout may pass on
a later try; 404 and 401/403 are their own errors; anything else is a plain ForgeError.
Each forge says only which of its exceptions is an HTTP answer, how to read its status,
message and headers, and how it recognises a rate limit. Messages never carry a token:
callers redact the forge's message before it gets here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TypeVar

import requests

from bot.forges.base import ForgeError, ForgeNotFound, ForgePermissionDenied, ForgeUnavailable
from bot.forges.retries import RATE_LIMIT_WAIT_S, RateLimited, retry_after_seconds

E = TypeVar("E", bound=Exception)


@contextmanager
def mapped_errors(
    forge: str, what: str, api_error: type[E], to_forge_error: Callable[[E], ForgeError]
) -> Iterator[None]:
    """Run the block with ``api_error`` (the client library's HTTP error) turned into a
    ForgeError by ``to_forge_error``, and transport failures into ForgeUnavailable."""
    try:
        yield
    except ForgeError:
        raise
    except api_error as exc:
        raise to_forge_error(exc) from None
    except (requests.ConnectionError, requests.Timeout) as exc:
        raise ForgeUnavailable(
            f"{forge} unreachable while trying to {what}: {type(exc).__name__}"
        ) from None
    except requests.exceptions.RetryError:
        raise ForgeUnavailable(f"{forge} kept failing while trying to {what}") from None


def status_error(
    forge: str,
    what: str,
    status: int,
    message: str,
    headers: Mapping[str, str],
    *,
    rate_limited: bool,
) -> ForgeError:
    """The error for an HTTP answer ``status`` (0: none came) with the redacted ``message``."""
    text = f"{forge} answered {status} to {what}" + (f": {message}" if message else "")
    if rate_limited:
        wait = retry_after_seconds(headers)
        return RateLimited(
            f"{forge} rate limit while trying to {what}",
            retry_after=RATE_LIMIT_WAIT_S if wait is None else wait,
        )
    if status >= 500 or status == 0:
        return ForgeUnavailable(text, retry_after=retry_after_seconds(headers))
    if status == 404:
        return ForgeNotFound(text)
    if status in (401, 403):
        return ForgePermissionDenied(text)
    return ForgeError(text)
