"""The trainer's tables, mapped here next to their migration (0002 and later), and the
queries the bot and the worker make of them: which model version a line's jobs run, and
the dashboard's views of the training tables.

They live in bot/store (not trainer/) so the worker and the web app read them through
named methods without importing the trainer (the layering is trainer -> worker -> bot);
the trainer's own queries over them are in trainer/store.py.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    inspect,
    select,
)
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Mapped, Session, mapped_column

from bot.store.db import Database
from bot.store.tables import Base, utcnow

# An environment's instance id: its folder's name under the store's envs/
# (trainer/envs/folders.py) and its key in training_environments.
_INSTANCE_ID = re.compile(r"[A-Za-z0-9_.-]{1,200}")


def valid_instance_id(instance_id: str) -> bool:
    """Whether ``instance_id`` may name an environment: one path segment of safe
    characters, never ``.`` or ``..``, so it never leaves the folder it is joined to."""
    # fullmatch: with match and "$", "id\n" passed ("$" also matches before a last newline).
    return bool(_INSTANCE_ID.fullmatch(instance_id)) and instance_id not in {".", ".."}


class TrainingEnvironment(Base):
    __tablename__ = "training_environments"

    instance_id: Mapped[str] = mapped_column(String(255), primary_key=True)
    repo: Mapped[str] = mapped_column(String(255))
    split: Mapped[str] = mapped_column(String(16), default="train")
    store_path: Mapped[str] = mapped_column(Text)
    calibration_k: Mapped[int] = mapped_column(Integer, default=0)
    calibration_solved: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class TrainingRun(Base):
    __tablename__ = "training_runs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    base_model: Mapped[str] = mapped_column(String(512))
    output_dir: Mapped[str] = mapped_column(Text)
    settings: Mapped[dict[str, Any]] = mapped_column()
    state: Mapped[str] = mapped_column(String(16), default="running")  # running|finished|failed
    steps_done: Mapped[int] = mapped_column(Integer, default=0)
    first_mean_reward: Mapped[float | None] = mapped_column(Float, nullable=True)
    last_mean_reward: Mapped[float | None] = mapped_column(Float, nullable=True)
    # Mean reward per step, updated as the run goes (the dashboard draws it).
    reward_curve: Mapped[list[float] | None] = mapped_column(JSON, nullable=True)
    # Share of each step's episodes that forged their test run (trainer/rl/tamper.py);
    # None for runs recorded before it was (migration 0016).
    tamper_curve: Mapped[list[float] | None] = mapped_column(JSON, nullable=True)
    started_at: Mapped[datetime] = mapped_column(default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(nullable=True)


class ModelVersion(Base):
    __tablename__ = "model_versions"
    __table_args__ = (Index("ix_model_versions_line_state", "line", "state"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(128), unique=True)
    # The model line (bot/model_lines.py) it was trained for and is promoted within.
    line: Mapped[str] = mapped_column(String(64), default="default", server_default="default")
    base_model: Mapped[str] = mapped_column(String(512))
    adapter_path: Mapped[str | None] = mapped_column(Text, nullable=True)  # None: the base itself
    # What the version is, byte for byte: the pulled base weights' manifest digest and the
    # adapter folder's (worker/weights.py); None where unknown (weights not pulled).
    base_digest: Mapped[str | None] = mapped_column(String(64), nullable=True)
    adapter_digest: Mapped[str | None] = mapped_column(String(64), nullable=True)
    run_id: Mapped[int | None] = mapped_column(
        ForeignKey("training_runs.id", ondelete="SET NULL"), nullable=True
    )
    # pass@1 on the held-out environments (trainer/passk.py), its 95% interval (Wilson,
    # over environments) and the rollouts per environment it came from (migration 0010).
    heldout_pass_rate: Mapped[float | None] = mapped_column(Float, nullable=True)
    heldout_envs: Mapped[int] = mapped_column(Integer, default=0)
    heldout_ci_low: Mapped[float | None] = mapped_column(Float, nullable=True)
    heldout_ci_high: Mapped[float | None] = mapped_column(Float, nullable=True)
    heldout_k: Mapped[int | None] = mapped_column(Integer, nullable=True)
    # The judge (trainer/evaluate.py JUDGE_VERSION) that graded the held-out score, and the
    # version the training run started from (None: the base model), migration 0015.
    heldout_judge: Mapped[str | None] = mapped_column(String(64), nullable=True)
    parent_version: Mapped[str | None] = mapped_column(String(128), nullable=True)
    # candidate | promoted | retired (was promoted, replaced) | rolled_back | revoked
    # (trained on deleted data: never promoted or served again; revoked_reason says why)
    state: Mapped[str] = mapped_column(String(16), default="candidate")
    revoked_reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    promoted_at: Mapped[datetime | None] = mapped_column(nullable=True)


class HeldoutResult(Base):
    """One model's result on one held-out environment: what the paired promotion test
    compares (trainer/promotion.py). ``subject`` is a version's name, or ``base:<model>``
    for the base model scored on ``line``'s held-out set (migration 0015)."""

    __tablename__ = "heldout_results"
    __table_args__ = (
        UniqueConstraint("subject", "line", "instance_id", name="uq_heldout_results_subject"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    subject: Mapped[str] = mapped_column(String(640))
    line: Mapped[str] = mapped_column(String(64))
    instance_id: Mapped[str] = mapped_column(String(255))
    content_hash: Mapped[str | None] = mapped_column(String(64), nullable=True)
    k: Mapped[int] = mapped_column(Integer)
    solved: Mapped[int] = mapped_column(Integer)
    judge: Mapped[str] = mapped_column(String(64))
    scored_at: Mapped[datetime] = mapped_column(default=utcnow)


class VersionTrainingEnv(Base):
    """One environment a version was trained on, as it was then (its content hash), so
    deleting a repository's data finds every version that learned from it."""

    __tablename__ = "version_training_envs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    version_id: Mapped[int] = mapped_column(ForeignKey("model_versions.id", ondelete="CASCADE"))
    instance_id: Mapped[str] = mapped_column(String(255))
    content_hash: Mapped[str] = mapped_column(String(64))
    forge: Mapped[str | None] = mapped_column(String(32), nullable=True)
    repo: Mapped[str] = mapped_column(String(255), index=True)


@dataclass(frozen=True)
class VersionRecord:
    """What a job (or the dashboard) needs of a model version."""

    name: str
    base_model: str
    adapter_path: str | None
    promoted_at: datetime | None


@dataclass(frozen=True)
class TableView:
    """The newest rows of one training table as the database holds them (the dashboard
    shows every column, so it reads them generically)."""

    table: str
    exists: bool
    columns: list[str]
    rows: list[list[Any]]


@dataclass(frozen=True)
class RewardCurve:
    run_id: int
    rewards: list[float]


def promoted_in(session: Session, line: str) -> ModelVersion | None:
    """``line``'s promoted version, in the caller's transaction (a promotion reads and
    changes it in one)."""
    return session.scalar(
        select(ModelVersion)
        .where(ModelVersion.state == "promoted", ModelVersion.line == line)
        .order_by(ModelVersion.promoted_at.desc())
        .limit(1)
    )


class TrainingStore:
    """Reads of the training tables for the web app and the worker."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def promoted(self, line: str) -> VersionRecord | None:
        """The version ``line``'s jobs run (None: the configured base model)."""
        with self.db.session() as session:
            row = promoted_in(session, line)
            if row is None:
                return None
            return VersionRecord(row.name, row.base_model, row.adapter_path, row.promoted_at)

    def _reflected(self, table: str) -> Table | None:
        # Read as the database has it (not as mapped): the dashboard shows what is there,
        # including on a database a newer release migrated.
        if not inspect(self.db.engine).has_table(table):
            return None
        return Table(table, MetaData(), autoload_with=self.db.engine)

    def table_view(self, table: str, limit: int) -> TableView:
        """Newest rows of a training table, or an empty view where it does not exist."""
        try:
            tbl = self._reflected(table)
            if tbl is None:
                return TableView(table, False, [], [])
            columns = [c.name for c in tbl.columns]
            order = [tbl.c[name].desc() for name in ("created_at", "id") if name in tbl.c]
            with self.db.engine.connect() as conn:
                result = conn.execute(select(tbl).order_by(*order).limit(limit))
                rows = [list(r) for r in result]
        except SQLAlchemyError:
            return TableView(table, False, [], [])
        return TableView(table, True, columns, rows)

    def environment_row(self, instance_id: str) -> list[tuple[str, Any]] | None:
        """One environment's row of the index, as (column, value) pairs; None where the
        table or the row is missing."""
        try:
            tbl = self._reflected(TrainingEnvironment.__tablename__)
            if tbl is None:
                return None
            with self.db.engine.connect() as conn:
                row = conn.execute(select(tbl).where(tbl.c.instance_id == instance_id)).first()
        except SQLAlchemyError:
            return None
        return None if row is None else [(str(k), v) for k, v in row._mapping.items()]

    def reward_curves(self, limit: int) -> list[RewardCurve]:
        """The newest training runs' per-step mean rewards, oldest first; runs without
        any are left out."""
        try:
            tbl = self._reflected(TrainingRun.__tablename__)
            if tbl is None or "reward_curve" not in tbl.c:
                return []
            with self.db.engine.connect() as conn:
                rows = conn.execute(
                    select(tbl.c.id, tbl.c.reward_curve)
                    .where(tbl.c.reward_curve.is_not(None))
                    .order_by(tbl.c.id.desc())
                    .limit(limit)
                ).all()
        except SQLAlchemyError:
            return []
        curves = []
        for run_id, curve in reversed(rows):
            values = curve if isinstance(curve, list) else json.loads(curve or "[]")
            if values:
                curves.append(RewardCurve(int(run_id), [float(v) for v in values]))
        return curves
