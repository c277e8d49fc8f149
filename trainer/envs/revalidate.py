"""Validate a stored environment again: the builder's own validation (the tests run
before and after the fix, reruns to drop flaky ones, every id selected on its own) on
the environment's bundle, its stored test patch and reference patch.

The dashboard asks for it through the seam in bot/env_validation.py; ``env_validator``
is what the CLI wires into the web app. An environment stays ``valid`` while every
FAIL_TO_PASS test still goes from failing to passing and every PASS_TO_PASS test still
passes in both trees (new ones found are reported, not required); the builder rejecting
it now (a patch that no longer applies, a setup that fails) makes it ``invalid``.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

from bot.env_validation import ValidationOutcome
from bot.settings import Settings
from bot.store.db import Database
from trainer.envs.builder import BuildRejected, BuildSpec, EnvironmentBuilder
from trainer.envs.folders import EnvironmentFolders
from trainer.envs.schema import Environment
from trainer.store import TrainerStore
from worker.agent.episode import SandboxRecipe
from worker.settings import as_worker_settings

DEFAULT_RERUNS = 3


class StoredEnvValidator:
    def __init__(
        self,
        db: Database,
        default_root: Path,
        recipe: Callable[[], SandboxRecipe],
        *,
        reruns: int = DEFAULT_RERUNS,
    ) -> None:
        self.db = db
        self.default_root = default_root
        # Made on first use: the web process builds this at start, and resolving the
        # sandbox backend there must not stop it from serving when it has none.
        self.recipe = recipe
        self.reruns = reruns

    def _store(self, instance_id: str) -> EnvironmentFolders:
        # The index records which store holds each environment (`envs build --store`).
        indexed = TrainerStore(self.db).environment_store_path(instance_id)
        return EnvironmentFolders(Path(indexed) if indexed is not None else self.default_root)

    def known(self, instance_id: str) -> bool:
        try:
            self._store(instance_id).get(instance_id)
        except (KeyError, ValueError):
            return False
        return True

    def validate(self, instance_id: str) -> ValidationOutcome:
        store = self._store(instance_id)
        env = store.get(instance_id)
        builder = EnvironmentBuilder(
            self.recipe(), reruns=self.reruns, test_timeout_s=env.test_timeout_s
        )
        with tempfile.TemporaryDirectory(prefix="ribbit-revalidate-") as tmp:
            checkout = store.checkout(env, Path(tmp) / "repo")
            spec = BuildSpec(
                checkout,
                env.base_commit,
                "",
                env.problem_statement,
                repo=env.repo,
                test_command=env.test_command,
                setup_commands=tuple(env.setup_commands),
                image=env.image,
                hints_text=env.hints_text,
                # The stored split of the fix, joined again: the builder splits it the same way.
                fix_diff=env.test_patch + env.patch,
            )
            try:
                rebuilt = builder.build(spec)
            except BuildRejected as exc:
                rejection = exc.rejection
                return ValidationOutcome("invalid", f"{rejection.reason}: {rejection.detail}")
        return compare(env, rebuilt, self.reruns)


def compare(stored: Environment, rebuilt: Environment, reruns: int) -> ValidationOutcome:
    lost_f2p = sorted(set(stored.FAIL_TO_PASS) - set(rebuilt.FAIL_TO_PASS))
    lost_p2p = sorted(set(stored.PASS_TO_PASS) - set(rebuilt.PASS_TO_PASS))
    found = sorted(
        (set(rebuilt.FAIL_TO_PASS) | set(rebuilt.PASS_TO_PASS))
        - (set(stored.FAIL_TO_PASS) | set(stored.PASS_TO_PASS))
    )
    extra = f"; newly found: {', '.join(found[:10])}" if found else ""
    if lost_f2p or lost_p2p:
        parts = []
        if lost_f2p:
            parts.append(f"no longer fail-to-pass: {', '.join(lost_f2p[:10])}")
        if lost_p2p:
            parts.append(f"no longer pass-to-pass: {', '.join(lost_p2p[:10])}")
        return ValidationOutcome("changed", "; ".join(parts) + extra)
    return ValidationOutcome(
        "valid",
        f"{len(stored.FAIL_TO_PASS)} FAIL_TO_PASS and {len(stored.PASS_TO_PASS)} PASS_TO_PASS "
        f"tests hold ({reruns} run(s) of each tree){extra}",
    )


def env_validator(db: Database, settings: Settings) -> StoredEnvValidator:
    """The seam `ribbit serve` hands the web app: the production sandboxes, the store
    under DATA_DIR/trainer unless the index names another."""
    sandbox = as_worker_settings(settings).sandbox
    return StoredEnvValidator(
        db, settings.data_dir / "trainer", lambda: SandboxRecipe.production(sandbox)
    )
