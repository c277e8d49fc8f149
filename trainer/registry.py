"""Model versions: register, promote (only if not worse on held-out), roll back.

A version is the base model plus an optional LoRA adapter folder, with its pass
rate on held-out environments. Each version belongs to one model line
(bot/model_lines.py); exactly one version per line is ``promoted`` at a time (or
none: that line's jobs then use the configured base model). Promotion is refused when
the candidate has no held-out score or scores below its line's current one; ``force``
is for humans who know better. Rollback retires the current version and puts
back the one promoted before it.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy.orm import Session

from bot.model_lines import DEFAULT_LINE
from bot.model_versions import ModelVersionError, ServedVersion
from bot.settings import Settings
from bot.store.db import Database
from trainer.store import ModelVersion, TrainerStore
from worker.settings import ModelSettings, as_worker_settings

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


class RegistryError(ModelVersionError):
    """A registry operation that cannot be done; the message says why."""


def register(
    db: Database,
    name: str,
    *,
    base_model: str,
    adapter_path: str | None,
    heldout_pass_rate: float | None = None,
    heldout_envs: int = 0,
    run_id: int | None = None,
    base_digest: str | None = None,
    line: str = DEFAULT_LINE,
) -> ModelVersion:
    """A candidate version. ``base_digest`` is the base weights' (worker.weights.base_digest);
    the adapter folder's digest is taken here, so the record says what the version is."""
    if not _NAME.fullmatch(name):
        raise RegistryError(f"{name!r} is not a valid version name (letters, digits, _ . -)")
    if heldout_pass_rate is not None and not 0.0 <= heldout_pass_rate <= 1.0:
        raise RegistryError(f"held-out pass rate must be in [0, 1]; got {heldout_pass_rate}")
    version = TrainerStore(db).add_version(
        ModelVersion(
            name=name,
            base_model=base_model,
            adapter_path=adapter_path,
            heldout_pass_rate=heldout_pass_rate,
            heldout_envs=heldout_envs,
            run_id=run_id,
            state="candidate",
            line=line,
            base_digest=base_digest,
            adapter_digest=_adapter_digest(adapter_path),
        )
    )
    if version is None:
        raise RegistryError(f"version {name!r} already exists")
    return version


def _adapter_digest(adapter_path: str | None) -> str | None:
    from worker.weights import folder_digest

    if adapter_path is None or not Path(adapter_path).is_dir():
        return None
    return folder_digest(Path(adapter_path))


def versions(db: Database, line: str | None = None) -> list[ModelVersion]:
    """Every version, or ``line``'s."""
    return TrainerStore(db).versions(line)


def _promoted(s: Session, line: str) -> ModelVersion | None:
    return TrainerStore.promoted_in(s, line)


def promoted_model(db: Database, line: str = DEFAULT_LINE) -> ModelVersion | None:
    """The version ``line``'s jobs should run, or None for the configured base model."""
    with db.session() as s:
        return _promoted(s, line)


def check_promotable(db: Database, name: str, *, force: bool = False) -> ModelVersion:
    """``name``'s version if :func:`promote` would accept it; raises :class:`RegistryError`
    saying why not. Lets callers prepare (load the adapter on servers) before promoting."""
    with db.session() as s:
        return _check(s, name, force=force)


def _check(s: Session, name: str, *, force: bool) -> ModelVersion:
    candidate = TrainerStore.version_in(s, name)
    if candidate is None:
        raise RegistryError(f"no version {name!r}")
    current = _promoted(s, candidate.line)
    if force or (current is not None and current.id == candidate.id):
        return candidate
    if candidate.heldout_pass_rate is None:
        raise RegistryError(f"{name} has no held-out score; evaluate it first")
    if (
        current is not None
        and current.heldout_pass_rate is not None
        and candidate.heldout_pass_rate < current.heldout_pass_rate
    ):
        raise RegistryError(
            f"{name} passes {candidate.heldout_pass_rate:.1%} of held-out environments, "
            f"worse than the promoted {current.name} ({current.heldout_pass_rate:.1%})"
        )
    return candidate


def promote(db: Database, name: str, *, force: bool = False) -> ModelVersion:
    with db.session() as s:
        candidate = _check(s, name, force=force)
        current = _promoted(s, candidate.line)
        if current is not None and current.id == candidate.id:
            return candidate
        if current is not None:
            current.state = "retired"
            s.flush()
        candidate.state = "promoted"
        candidate.promoted_at = datetime.now(UTC)
        return candidate


def rollback(db: Database, line: str = DEFAULT_LINE) -> ModelVersion | None:
    """Retire ``line``'s promoted version and promote the one before it in the same line
    (None: back to base)."""
    with db.session() as s:
        current = _promoted(s, line)
        if current is None:
            raise RegistryError(f"no version of line {line!r} is promoted; nothing to roll back")
        current.state = "rolled_back"
        s.flush()
        previous = TrainerStore.previously_promoted_in(s, line)
        if previous is not None:
            previous.state = "promoted"
        return previous


class RegistryVersions:
    """The registry with the inference servers kept in step: what `ribbit model
    promote/rollback` and the dashboard both do (bot.model_versions.ModelVersions)."""

    def __init__(self, db: Database, model: ModelSettings) -> None:
        self.db = db
        self.model = model

    def promote(self, name: str, *, force: bool = False) -> list[str]:
        # Load the adapter on every server first, so no worker asks for a name a server
        # does not know yet.
        from worker.model_choice import AdapterError, publish_version

        candidate = check_promotable(self.db, name, force=force)
        servers: list[str] = []
        if candidate.adapter_path:
            try:
                servers = publish_version(self.model, candidate.name, Path(candidate.adapter_path))
            except AdapterError as exc:
                raise ModelVersionError(str(exc)) from exc
        promote(self.db, name, force=force)
        return servers

    def rollback(self, line: str = DEFAULT_LINE) -> str | None:
        from worker.model_choice import AdapterError, publish_version, withdraw_version

        current = promoted_model(self.db, line)
        previous = rollback(self.db, line)
        if previous is not None and previous.adapter_path:
            try:
                publish_version(self.model, previous.name, Path(previous.adapter_path))
            except AdapterError as exc:
                raise ModelVersionError(str(exc)) from exc
        if current is not None:
            withdraw_version(self.model, current.name)
        return previous.name if previous is not None else None

    def serving(self, line: str = DEFAULT_LINE) -> ServedVersion | None:
        current = promoted_model(self.db, line)
        return None if current is None else ServedVersion(current.name, current.promoted_at)


def registry_versions(db: Database, settings: Settings) -> RegistryVersions:
    """The factory the CLI hands to ``create_app`` (bot.model_versions.ModelVersionsFactory)."""
    # `ribbit serve` built WorkerSettings; the web app hands them on typed as bot's.
    return RegistryVersions(db, as_worker_settings(settings).model)
