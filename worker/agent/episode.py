"""One episode of the agent, the same for serving and for training.

An episode is: a fresh sandbox over a checkout, the set-up step
(:func:`worker.sandbox.setup.run_setup`: the virtualenv, the repository's setup command
behind the registry-only proxy), then, only when that worked, the agent loop on the task
text, with the model told about the setup command exactly when it ran and worked. A
failed setup ends the episode before the agent starts: the agent never works in a
half-set-up environment.

The solve job (:mod:`worker.pipelines.solve`), ``ribbit run``, training rollouts, and
calibration and evaluation (:mod:`trainer.rl.rollout`) all call :func:`run_episode`, so
what a model is trained in is what it serves in. The environment builder and the reward
set their sandboxes up through the same :class:`~worker.sandbox.recipe.SandboxRecipe`.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from bot.store.records.trajectory import TurnRecord
from worker.agent.loop import AgentResult, run_agent
from worker.agent.policy import Policy
from worker.agent.prompt import AgentTask
from worker.sandbox.recipe import SandboxRecipe
from worker.settings import AgentSettings

if TYPE_CHECKING:
    from worker.sandbox.setup import SetupResult

Phase = Callable[[str], AbstractContextManager[object]]
"""Entered around each phase of an episode ("setup", then "agent"): the solve job times
them and tells the issue; training passes nothing."""


@dataclass(frozen=True)
class Episode:
    """What an episode did: its setup step, and the agent's run (None when the setup
    failed, so the agent never started)."""

    setup: SetupResult
    agent: AgentResult | None


class SetupFailed(Exception):
    """An episode whose setup failed, where the caller needs an agent run (a rollout)."""

    def __init__(self, setup: SetupResult) -> None:
        super().__init__(f"setup failed: {setup.summary()}")
        self.setup = setup


def _no_phase(name: str) -> AbstractContextManager[object]:
    return contextlib.nullcontext()


def run_episode(
    task: AgentTask,
    checkout: Path,
    policy: Policy,
    limits: AgentSettings,
    sandboxes: SandboxRecipe,
    *,
    setup_command: str | None,
    cancel: threading.Event | None = None,
    phase: Phase = _no_phase,
    on_turn: Callable[[TurnRecord], None] | None = None,
) -> Episode:
    """Open a sandbox over ``checkout`` (never changed: the sandbox works on its own
    copy), set it up with ``setup_command``, then run the agent on ``task`` within
    ``limits`` until it ends or ``cancel`` is set (``on_turn`` hears of each turn). The
    task's ``setup_command`` is what the setup step says ran and worked, whatever the
    caller put there."""
    with sandboxes(checkout) as sandbox:
        with phase("setup"):
            setup = sandboxes.setup(sandbox, setup_command)
        if not setup.ok:
            return Episode(setup, None)
        # The model hears of the setup command only when it ran and worked.
        told = replace(task, setup_command=setup.command if setup.installed else None)
        with phase("agent"):
            result = run_agent(told, sandbox, policy, limits, cancel=cancel, on_turn=on_turn)
    return Episode(setup, result)
