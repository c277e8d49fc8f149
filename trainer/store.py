"""The trainer's tables: environments (an index of the on-disk store), training
runs and model versions. Same metadata as the bot's tables (bot.store.models.Base);
the schema comes from migration 0002 (and later ones)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import JSON, Float, ForeignKey, Index, Integer, String, Text, select
from sqlalchemy.orm import Mapped, mapped_column

from bot.store.db import Database
from bot.store.models import Base, utcnow
from worker.models import PromotedVersion


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
    # candidate | promoted | retired (was promoted, replaced) | rolled_back
    state: Mapped[str] = mapped_column(String(16), default="candidate")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    promoted_at: Mapped[datetime | None] = mapped_column(nullable=True)


class TrainingRuns:
    """The training_runs table: one row per `ribbit train`, written by rank 0 alone."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def start(self, base_model: str, output_dir: Path, settings: dict[str, Any]) -> int:
        """A running run's row; its id."""
        with self.db.session() as s:
            row = TrainingRun(base_model=base_model, output_dir=str(output_dir), settings=settings)
            s.add(row)
            s.flush()
            return row.id

    def progress(self, run_id: int, steps_done: int, curve: Sequence[float]) -> None:
        """The mean reward per step so far (the dashboard draws it as the run goes)."""
        with self.db.session() as s:
            row = s.get(TrainingRun, run_id)
            if row is not None:
                row.reward_curve = list(curve)
                row.steps_done = steps_done

    def fail(self, run_id: int) -> None:
        with self.db.session() as s:
            row = s.get(TrainingRun, run_id)
            if row is not None:
                row.state = "failed"

    def finish(self, run_id: int, steps_done: int, rewards: Sequence[float]) -> None:
        with self.db.session() as s:
            row = s.get(TrainingRun, run_id)
            if row is None:
                raise LookupError(f"no training run {run_id}")
            row.state, row.steps_done = "finished", steps_done
            row.first_mean_reward = rewards[0] if rewards else None
            row.last_mean_reward = rewards[-1] if rewards else None
            row.reward_curve = list(rewards)
            row.finished_at = datetime.now(UTC)


def version_named(db: Database, name: str) -> PromotedVersion | None:
    """The model version called ``name``, as a job would run it (None: no such version)."""
    with db.session() as s:
        row = s.scalar(select(ModelVersion).where(ModelVersion.name == name))
        if row is None:
            return None
        adapter = Path(row.adapter_path) if row.adapter_path else None
        return PromotedVersion(row.name, row.base_model, adapter)
