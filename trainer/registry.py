"""Model versions: register, promote (only if better on held-out), roll back, revoke.

A version is the base model plus an optional LoRA adapter folder, with its pass
rate on held-out environments. Each version belongs to one model line
(bot/model_lines.py); exactly one version per line is ``promoted`` at a time (or
none: that line's jobs then use the configured base model). Promotion needs the
candidate to be better than what it replaces (the line's promoted version, else the
base model) by the paired test of :mod:`trainer.promotion`, on the same held-out
environments, k and judge; ``force`` is for humans who know better, and the CLI audits
what it skipped. Rollback retires the current version and puts back the one promoted
before it. A revoked version (trained on deleted data) is never promoted again.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy.orm import Session

from bot.model_lines import DEFAULT_LINE
from bot.model_versions import ModelVersionError, ServedVersion
from bot.settings import Settings
from bot.store.db import Database
from trainer.promotion import (
    MIN_HELDOUT_ENVS,
    EnvResult,
    NotComparable,
    Scored,
    comparable,
    sign_test,
)
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
    if adapter_path is not None and not Path(adapter_path).is_absolute():
        # Relative to the registering process's folder, it would name nothing for a
        # worker, or another folder's adapter.
        raise RegistryError(f"the adapter path must be absolute; got {adapter_path!r}")
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


@dataclass(frozen=True)
class PromotionCheck:
    """What a promotion was decided on: the evidence (the paired test, or why none was
    possible), and, when forced, the checks it skipped (the audit row says them)."""

    candidate: ModelVersion
    evidence: str
    skipped: tuple[str, ...] = ()


def check_promotable(db: Database, name: str, *, force: bool = False) -> ModelVersion:
    """``name``'s version if :func:`promote` would accept it; raises :class:`RegistryError`
    saying why not. Lets callers prepare (load the adapter on servers) before promoting."""
    return promotion_check(db, name, force=force).candidate


def promotion_check(db: Database, name: str, *, force: bool = False) -> PromotionCheck:
    """:func:`check_promotable` with its evidence and, when forced, what it skipped."""
    with db.session() as s:
        return _check(s, name, force=force)


def base_subject(base_model: str) -> str:
    """How the base model's held-out results are stored (trainer/store.py)."""
    return f"base:{base_model}"


def _scored(s: Session, subject: str, line: str, label: str, rescore: str) -> Scored:
    rows = TrainerStore.results_in(s, subject, line)
    results = {
        r.instance_id: EnvResult(r.instance_id, r.content_hash, r.k, r.solved, r.judge)
        for r in rows
    }
    return Scored(label, results, rescore)


def _check(s: Session, name: str, *, force: bool) -> PromotionCheck:
    candidate = TrainerStore.version_in(s, name)
    if candidate is None:
        raise RegistryError(f"no version {name!r}")
    if candidate.state == "revoked":
        # Not even --force: its training data was deleted (`ribbit data delete`).
        raise RegistryError(f"{name} is revoked ({candidate.revoked_reason}); it is never served")
    current = _promoted(s, candidate.line)
    if current is not None and current.id == candidate.id:
        return PromotionCheck(candidate, "already promoted")
    k = candidate.heldout_k or 1
    line = candidate.line
    mine = _scored(s, name, line, name, f"ribbit model evaluate {name} --k {k}")
    if current is not None:
        theirs = _scored(
            s, current.name, line, current.name, f"ribbit model evaluate {current.name} --k {k}"
        )
    else:
        theirs = _scored(
            s,
            base_subject(candidate.base_model),
            line,
            f"base {candidate.base_model}",
            f"ribbit model evaluate-base --line {line} --model {candidate.base_model} --k {k}",
        )
    skipped: list[str] = []
    try:
        comparable(mine, theirs)
    except NotComparable as exc:
        if not force:
            raise RegistryError(str(exc)) from None
        return PromotionCheck(candidate, "no comparison", (str(exc),))
    envs = len(mine.results)
    if envs < MIN_HELDOUT_ENVS:
        small = f"held-out set of {envs} environment(s) is below the minimum of {MIN_HELDOUT_ENVS}"
        if not force:
            raise RegistryError(f"{small}; add held-out environments or promote with --force")
        skipped.append(small)
    test = sign_test(mine.results, theirs.results)
    evidence = f"{name} vs {theirs.label}: {test.text()}"
    if not test.better:
        if not force:
            raise RegistryError(f"{name} is not better than {theirs.label}: {test.text()}")
        skipped.append(f"not better: {test.text()}")
    return PromotionCheck(candidate, evidence, tuple(skipped))


def promote(db: Database, name: str, *, force: bool = False) -> ModelVersion:
    with db.session() as s:
        candidate = _check(s, name, force=force).candidate
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
