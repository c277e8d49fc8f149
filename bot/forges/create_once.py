"""Creating a forge object exactly once, though the answer to its POST may be lost.

A POST that times out or comes back as a 5xx may still have created its comment, pull
request, check run or discussion: urllib3 never repeats it (see :mod:`bot.forges.retries`).
So after such an ambiguous failure the creator looks for the object (by its marker, key
or branch) before posting again. A rate limit is a refusal, not a loss: the forge did
nothing, and the job is deferred rather than the POST repeated. Each forge says only how
to look and how to create; the order of looking, waiting and posting lives here.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar

from bot.forges.base import ForgeUnavailable
from bot.forges.retries import RateLimited
from bot.retrying import retry, stop_after_attempts, wait_fixed

T = TypeVar("T")

CREATE_ATTEMPTS = 3
# Before looking again: a forge that stored the object may list it a moment later.
LOOK_AGAIN_DELAY_S = 0.5


def _jittered_pause() -> None:
    time.sleep(random.uniform(0, LOOK_AGAIN_DELAY_S))  # noqa: S311


def create_once(
    create: Callable[[], T],
    find: Callable[[], T | None],
    *,
    look_first: bool = False,
    attempts: int = CREATE_ATTEMPTS,
    pause: Callable[[], None] = _jittered_pause,
) -> T:
    """What ``create()`` made, or what ``find()`` shows an earlier try already made.

    ``find`` runs after every ambiguous failure (:class:`ForgeUnavailable`, not
    :class:`RateLimited`), and first of all when ``look_first`` is set (a retried job may
    have created the object before). Errors of ``find`` itself, and any other error of
    ``create``, are raised at once. After ``attempts`` lost answers with nothing found,
    the last failure is raised.
    """
    stop = stop_after_attempts(attempts)
    if look_first:
        found = find()
        if found is not None:
            return found

    def create_or_find() -> T:
        try:
            return create()
        except RateLimited:
            raise
        except ForgeUnavailable:
            # The pause is before looking, not before posting again: after the last lost
            # answer too, what the forge stored is found rather than the job failed.
            pause()
            found = find()
            if found is not None:
                return found
            raise

    return retry(
        create_or_find,
        retry_on=(ForgeUnavailable,),
        give_up_on=(RateLimited,),
        stop=stop,
        wait=wait_fixed(0),
        sleep=lambda _s: None,
    )
