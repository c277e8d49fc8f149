"""A bounded warm shutdown for `ribbit worker`.

On SIGTERM Celery stops taking jobs and waits for the running ones, however long they
take: a job stuck retrying an unreachable forge kept `ribbit worker` up long after the
stop. Here the wait has a bound; past it the worker exits, its pool processes die with
it (Celery gives them a parent-death signal), and their jobs, acknowledged late, go back
to the queue, or the sweep requeues them once their heartbeat is stale.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from typing import Any

from celery.signals import worker_shutting_down

log = logging.getLogger(__name__)

# Exit status of a worker that gave up waiting (EX_TEMPFAIL: its jobs are retried).
GAVE_UP = 75


def bound_warm_shutdown(drain_s: float) -> Callable[..., None]:
    """Exit at most ``drain_s`` after the worker starts its warm shutdown. Returns the
    receiver, for a test to disconnect."""

    def give_up() -> None:
        log.error(
            "warm shutdown did not finish in %.0f s; stopping now (running jobs are retried)",
            drain_s,
        )
        logging.shutdown()
        os._exit(GAVE_UP)

    def on_shutting_down(**_kwargs: Any) -> None:
        log.warning("stopping: waiting at most %.0f s for the running jobs (--drain)", drain_s)
        timer = threading.Timer(drain_s, give_up)
        timer.daemon = True
        timer.start()

    # One bound per process, the last one set: a process that started a worker before
    # (a test's in-process `ribbit worker`) must not keep the earlier bound's timer too.
    worker_shutting_down.disconnect(dispatch_uid=_DISPATCH_UID)
    # Kept referenced by the signal (weak=False): the closure has no other owner.
    worker_shutting_down.connect(on_shutting_down, weak=False, dispatch_uid=_DISPATCH_UID)
    return on_shutting_down


_DISPATCH_UID = "ribbit-bounded-warm-shutdown"
