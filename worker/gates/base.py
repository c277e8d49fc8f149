"""What every gate takes and returns.

A gate judges a candidate patch against the repository at its base commit and
returns a typed :class:`GateResult`. All gates run for every patch (a failing gate does
not hide the others' findings), and the trainer reuses the same results as its reward,
so results are plain data that serialise to JSON. The results, their findings and the
report of all gates live in bot/store/records/gate_report.py: the job's record keeps them, and
the admin pages read them with the same classes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from bot.store.records.gate_report import GateResult
from worker.repo_config import RepoConfig
from worker.sandbox.base import Sandbox, SandboxFactory
from worker.settings import GateSettings

if TYPE_CHECKING:
    from worker.sandbox.setup import SetupResult


@dataclass(frozen=True)
class GateContext:
    """The repository at its base commit (a host checkout, never executed on the host),
    the candidate patch, and what the gates may use to run things."""

    repo_dir: Path
    base_commit: str
    patch: str
    repo_config: RepoConfig
    gate_settings: GateSettings
    sandbox_factory: SandboxFactory
    issue_text: str = ""  # title + body, to find tests the issue names
    # The issue's labels (gates.behaviour_change_labels); none for a trainer's grade.
    issue_labels: tuple[str, ...] = ()
    cancel: threading.Event | None = None  # set by /ribbit stop: gates end early, failing
    deadline: float | None = None  # time.monotonic() by which the whole gate run ends

    # Makes each fresh test sandbox ready (worker/sandbox/setup.py run_setup, bound to the
    # repo's config and the sandbox settings); None: only the repo's setup command runs.
    setup_step: Callable[[Sandbox], SetupResult] | None = None

    def stop_reason(self) -> GateStopped | None:
        """Why no gate may start or go on now (cancelled, or the run's budget spent)."""
        if self.cancel is not None and self.cancel.is_set():
            return GateStopped("gate-cancelled", "the job was cancelled while the gates ran")
        if self.deadline is not None and time.monotonic() >= self.deadline:
            budget = self.gate_settings.total_timeout_s
            return GateStopped("gate-timeout", f"the gate run used up its {budget} s budget")
        return None

    def time_left(self, budget: float) -> float:
        """``budget`` seconds, or what is left of the run's budget if that is less."""
        if self.deadline is None:
            return budget
        return max(1.0, min(budget, self.deadline - time.monotonic()))


class GateStopped(Exception):
    """A gate ended early because the job was cancelled or the run's budget ran out."""

    def __init__(self, rule: str, message: str) -> None:
        super().__init__(message)
        self.rule = rule


@runtime_checkable
class Gate(Protocol):
    name: str

    def run(self, ctx: GateContext) -> GateResult: ...


GateFactory = Callable[[], Gate]
