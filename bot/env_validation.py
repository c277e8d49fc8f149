"""Re-running a training environment's validation from the dashboard.

The validation itself is the trainer's (trainer/envs/revalidate.py: the environment
builder's before/after test runs on the stored environment), which a web-only install
may not have: like the model registry (bot/model_versions.py) it is a seam passed into
the app, wired by the CLI. What lives here is the web side: the record of each request
and its result (environment_validations, kept by bot/store/validations.py), and the
runner that does the work in a background thread, so the request that asked returns at
once and the environment's page shows the result when it is there.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Literal, Protocol

from bot.store.db import Database
from bot.store.training import valid_instance_id
from bot.store.validations import ValidationRecord, ValidationStore

if TYPE_CHECKING:
    from bot.settings import Settings

log = logging.getLogger(__name__)

Verdict = Literal["valid", "changed", "invalid"]
DETAIL_CHARS = 4000
ABANDONED_AFTER = timedelta(hours=6)
# Each runs sandboxes in the web process: a few at once, however many are asked for.
MAX_RUNNING = 2


@dataclass(frozen=True)
class ValidationOutcome:
    """What a validation found: ``valid`` (its FAIL_TO_PASS and PASS_TO_PASS still hold),
    ``changed`` (built, but some of those tests no longer behave so), ``invalid`` (the
    builder rejects it now); ``detail`` says what, in words."""

    verdict: Verdict
    detail: str


class EnvValidator(Protocol):
    def known(self, instance_id: str) -> bool:
        """Whether an environment of that id is stored."""
        ...

    def validate(self, instance_id: str) -> ValidationOutcome:
        """Validate it again, for as long as that takes (the runner calls it in a thread)."""
        ...


EnvValidatorFactory = Callable[[Database, "Settings"], EnvValidator]


class AlreadyRunning(Exception):
    pass


class Busy(Exception):
    """As many validations as one process runs at once are running."""


def history(db: Database, instance_id: str, limit: int = 20) -> list[ValidationRecord]:
    return ValidationStore(db).history(instance_id, limit)


def _begin(db: Database, instance_id: str, requested_by: str) -> int:
    run_id = ValidationStore(db).begin(
        instance_id, requested_by[:255], abandoned_after=ABANDONED_AFTER
    )
    if run_id is None:
        raise AlreadyRunning(instance_id)
    return run_id


def _finish(db: Database, run_id: int, state: str, detail: str) -> None:
    ValidationStore(db).finish(run_id, state, detail[:DETAIL_CHARS])


class ValidationRunner:
    """Starts validations in daemon threads and records their results."""

    def __init__(self, db: Database, validator: EnvValidator) -> None:
        self.db = db
        self.validator = validator
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def start(self, instance_id: str, requested_by: str) -> int:
        """The new record's id; the work goes on in a thread. Raises KeyError for an
        unknown environment, AlreadyRunning when one of its validations still runs, and
        Busy when MAX_RUNNING validations run in this process."""
        if not valid_instance_id(instance_id) or not self.validator.known(instance_id):
            raise KeyError(instance_id)
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()]
            if len(self._threads) >= MAX_RUNNING:
                raise Busy(instance_id)
            run_id = _begin(self.db, instance_id, requested_by)
            thread = threading.Thread(
                target=self._run, args=(run_id, instance_id), name=f"ribbit-validate-{run_id}"
            )
            thread.daemon = True
            self._threads.append(thread)
            thread.start()
        return run_id

    def _run(self, run_id: int, instance_id: str) -> None:
        try:
            outcome = self.validator.validate(instance_id)
        except Exception as exc:  # a sandbox or store failure must still end the record
            log.exception("validation of %s failed", instance_id)
            _finish(self.db, run_id, "error", f"{type(exc).__name__}: {exc}")
            return
        _finish(self.db, run_id, outcome.verdict, outcome.detail)

    def join(self, timeout: float | None = None) -> None:
        """Wait for the validations started so far (tests; a clean shutdown)."""
        for thread in list(self._threads):
            thread.join(timeout)
