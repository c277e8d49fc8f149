"""The trainer's store: its named queries over the training tables (environments,
training runs, model versions) and over the outcomes and jobs it trains on.

The tables are mapped in bot/store/training.py, next to their migration, so the worker and
the web app read them without importing the trainer; they are named here too because the
trainer's modules take them from their own store. Rows come back detached (read after
the transaction closed), as the job store's do.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from bot.store.db import Database
from bot.store.outcomes import OutcomeStore
from bot.store.records import content_free
from bot.store.tables import Job, Outcome
from bot.store.training import (
    HeldoutResult,
    ModelVersion,
    TrainingEnvironment,
    TrainingRun,
    VersionTrainingEnv,
    promoted_in,
)
from worker.model_choice import PromotedVersion

T = TypeVar("T")

__all__ = [
    "HeldoutResult",
    "IndexEntry",
    "ModelVersion",
    "TrainedOn",
    "TrainerStore",
    "TrainingEnvironment",
    "TrainingRun",
]


@dataclass(frozen=True)
class IndexEntry:
    """One stored environment as the index records it."""

    instance_id: str
    repo: str
    split: str
    calibration_k: int
    calibration_solved: int


@dataclass(frozen=True)
class TrainedOn:
    """One environment a version trained on, as it was (its content hash) and whose
    data it is (forge None: not recorded)."""

    instance_id: str
    content_hash: str
    forge: str | None
    repo: str


@dataclass(frozen=True)
class ScoredEnv:
    """One model's stored result on one held-out environment."""

    instance_id: str
    content_hash: str | None
    k: int
    solved: int
    judge: str


class TrainerStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    # -- outcomes and jobs: what the trainer learns from ----------------------------------

    # The outcome reads have one home, the outcome store; named here for the trainer.

    def outcomes(self) -> list[Outcome]:
        """Every recorded outcome, in the order recorded (by id)."""
        return list(OutcomeStore(self.db).outcomes())

    def outcome_repos(self) -> list[tuple[str, str]]:
        """(forge, repository) of every repository with an outcome, sorted."""
        return OutcomeStore(self.db).repos()

    def repos_with_data(self) -> set[tuple[str, str]]:
        """(forge, repository) of every repository with outcomes or jobs."""
        with self.db.session() as s:
            pairs = {(f, r) for f, r in s.execute(select(Outcome.forge, Outcome.repo))}
            pairs |= {(f, r) for f, r in s.execute(select(Job.forge, Job.repo))}
        return pairs

    def repo_outcomes(self, forge: str, repo: str) -> list[Outcome]:
        """The repository's outcomes, by id."""
        return list(OutcomeStore(self.db).outcomes(repo=repo, forge=forge))

    def outcomes_by_id(self, ids: Collection[int]) -> list[Outcome]:
        return list(OutcomeStore(self.db).outcomes_by_id(ids))

    def repo_jobs(self, forge: str, repo: str) -> list[Job]:
        """The repository's jobs of every kind, oldest first."""
        with self.db.session() as s:
            q = select(Job).where(Job.forge == forge, Job.repo == repo)
            return self._detached(s, s.scalars(q.order_by(Job.created_at)))

    def delete_repo_data(
        self,
        *,
        outcome_ids: Collection[int],
        environment_ids: Collection[str],
        job_ids: Collection[str],
        kept_result_keys: frozenset[str],
    ) -> None:
        """In one transaction: delete the outcomes and the environments' index rows, and
        strip the jobs' results to ``kept_result_keys`` and their instructions (the job
        rows stay: they are the operational record)."""
        with self.db.session() as s:
            if outcome_ids:
                s.execute(delete(Outcome).where(Outcome.id.in_(outcome_ids)))
            if environment_ids:
                s.execute(
                    delete(TrainingEnvironment).where(
                        TrainingEnvironment.instance_id.in_(environment_ids)
                    )
                )
            for job in s.scalars(select(Job).where(Job.id.in_(job_ids))):
                job.result = content_free(job.result, kept_result_keys)
                job.instructions = None

    # -- the environment index ----------------------------------------------------------

    def index_environments(self, root: str, entries: Iterable[IndexEntry]) -> None:
        """Make the index hold exactly ``entries`` for the store at ``root``: insert or
        update each, drop rows of that store's environments not among them (rows of other
        stores stay)."""
        wanted = {e.instance_id: e for e in entries}
        with self.db.session() as s:
            rows = {r.instance_id: r for r in s.scalars(select(TrainingEnvironment))}
            for instance_id, entry in wanted.items():
                row = rows.get(instance_id)
                if row is None:
                    row = TrainingEnvironment(
                        instance_id=instance_id, repo=entry.repo, store_path=root
                    )
                    s.add(row)
                row.repo, row.split, row.store_path = entry.repo, entry.split, root
                row.calibration_k = entry.calibration_k
                row.calibration_solved = entry.calibration_solved
            gone = [i for i, r in rows.items() if r.store_path == root and i not in wanted]
            if gone:
                s.execute(
                    delete(TrainingEnvironment).where(TrainingEnvironment.instance_id.in_(gone))
                )

    def environment_store_path(self, instance_id: str) -> str | None:
        """The store the index says holds the environment (None: not indexed)."""
        with self.db.session() as s:
            row = s.get(TrainingEnvironment, instance_id)
            return row.store_path if row is not None else None

    # -- model versions -------------------------------------------------------------------

    def version(self, name: str) -> ModelVersion | None:
        with self.db.session() as s:
            return self.version_in(s, name)

    def versions(self, line: str | None = None) -> list[ModelVersion]:
        """Every version (or ``line``'s), in the order registered."""
        with self.db.session() as s:
            q = select(ModelVersion).order_by(ModelVersion.id)
            if line is not None:
                q = q.where(ModelVersion.line == line)
            return list(s.scalars(q))

    def add_version(self, version: ModelVersion) -> ModelVersion | None:
        """Insert ``version``; None (nothing inserted) where its name is taken."""
        with self.db.session() as s:
            if self.version_in(s, version.name) is not None:
                return None
            s.add(version)
            s.flush()
            return version

    def record_heldout(
        self, name: str, *, rate: float, envs: int, low: float, high: float, k: int
    ) -> bool:
        """Store a version's held-out pass@1 and interval; False: no such version."""
        with self.db.session() as s:
            row = self.version_in(s, name)
            if row is None:
                return False
            row.heldout_pass_rate, row.heldout_envs = rate, envs
            row.heldout_ci_low, row.heldout_ci_high = low, high
            row.heldout_k = k
            return True

    def record_results(
        self, subject: str, line: str, results: Iterable[ScoredEnv], *, judge: str
    ) -> None:
        """Make ``subject``'s held-out results on ``line`` exactly ``results`` (a re-score
        replaces the last one whole, so a set never mixes two scorings)."""
        with self.db.session() as s:
            s.execute(
                delete(HeldoutResult).where(
                    HeldoutResult.subject == subject, HeldoutResult.line == line
                )
            )
            for r in results:
                s.add(
                    HeldoutResult(
                        subject=subject,
                        line=line,
                        instance_id=r.instance_id,
                        content_hash=r.content_hash,
                        k=r.k,
                        solved=r.solved,
                        judge=judge,
                    )
                )
            if not subject.startswith("base:"):
                row = self.version_in(s, subject)
                if row is not None:
                    row.heldout_judge = judge

    @staticmethod
    def results_in(session: Session, subject: str, line: str) -> list[ScoredEnv]:
        rows = session.scalars(
            select(HeldoutResult)
            .where(HeldoutResult.subject == subject, HeldoutResult.line == line)
            .order_by(HeldoutResult.instance_id)
        )
        return [ScoredEnv(r.instance_id, r.content_hash, r.k, r.solved, r.judge) for r in rows]

    def results(self, subject: str, line: str) -> list[ScoredEnv]:
        with self.db.session() as s:
            return self.results_in(s, subject, line)

    def record_training_envs(
        self, name: str, envs: Iterable[TrainedOn], *, parent: str | None
    ) -> bool:
        """Record what version ``name`` was trained on and from; False: no such version."""
        with self.db.session() as s:
            row = self.version_in(s, name)
            if row is None:
                return False
            row.parent_version = parent
            for e in envs:
                s.add(
                    VersionTrainingEnv(
                        version_id=row.id,
                        instance_id=e.instance_id,
                        content_hash=e.content_hash,
                        forge=e.forge,
                        repo=e.repo,
                    )
                )
            return True

    def training_envs(self, name: str) -> list[TrainedOn]:
        with self.db.session() as s:
            rows = s.scalars(
                select(VersionTrainingEnv)
                .join(ModelVersion, ModelVersion.id == VersionTrainingEnv.version_id)
                .where(ModelVersion.name == name)
                .order_by(VersionTrainingEnv.id)
            )
            return [TrainedOn(r.instance_id, r.content_hash, r.forge, r.repo) for r in rows]

    def trained_instance_ids(self, line: str) -> set[str]:
        """Every environment a recorded version of ``line`` trained on."""
        with self.db.session() as s:
            q = (
                select(VersionTrainingEnv.instance_id)
                .join(ModelVersion, ModelVersion.id == VersionTrainingEnv.version_id)
                .where(ModelVersion.line == line)
            )
            return set(s.scalars(q))

    def versions_trained_on(
        self, forge: str, repo: str, instance_ids: Collection[str] = ()
    ) -> list[ModelVersion]:
        """Versions trained on the repository's data: an environment recorded with its
        repository (forge unrecorded counts: it may be this one), or one of
        ``instance_ids``; and every version descended from one of them (a child trained
        from its weights)."""
        with self.db.session() as s:
            q = select(VersionTrainingEnv.version_id).where(
                (
                    (VersionTrainingEnv.repo == repo)
                    & ((VersionTrainingEnv.forge == forge) | VersionTrainingEnv.forge.is_(None))
                )
                | VersionTrainingEnv.instance_id.in_(list(instance_ids))
            )
            ids = set(s.scalars(q))
            every = list(s.scalars(select(ModelVersion).order_by(ModelVersion.id)))
            tainted = {v.name for v in every if v.id in ids}
            grew = True
            while grew:
                more = {v.name for v in every if v.parent_version in tainted} - tainted
                tainted |= more
                grew = bool(more)
            return [v for v in every if v.name in tainted]

    def versions_without_provenance(self) -> list[str]:
        """Versions (not revoked) with no recorded training environments: registered by
        hand or before migration 0015, so what they learned from is not known."""
        with self.db.session() as s:
            recorded = select(VersionTrainingEnv.version_id).distinct()
            q = select(ModelVersion.name).where(
                ModelVersion.state != "revoked", ModelVersion.id.not_in(recorded)
            )
            return sorted(s.scalars(q))

    def revoke(self, names: Collection[str], reason: str) -> None:
        """Un-promote and retire the versions for good: never served, promoted or rolled
        back to again."""
        with self.db.session() as s:
            for v in s.scalars(select(ModelVersion).where(ModelVersion.name.in_(names))):
                v.state, v.revoked_reason = "revoked", reason

    # Promotion and rollback read and change several versions in one transaction; the
    # registry (trainer/registry.py) holds it and asks these.

    @staticmethod
    def version_in(session: Session, name: str) -> ModelVersion | None:
        return session.scalar(select(ModelVersion).where(ModelVersion.name == name))

    @staticmethod
    def promoted_in(session: Session, line: str) -> ModelVersion | None:
        return promoted_in(session, line)

    @staticmethod
    def previously_promoted_in(session: Session, line: str) -> ModelVersion | None:
        """The line's retired version promoted most recently (a rollback's target)."""
        return session.scalar(
            select(ModelVersion)
            .where(
                ModelVersion.line == line,
                ModelVersion.state == "retired",
                ModelVersion.promoted_at.is_not(None),
            )
            .order_by(ModelVersion.promoted_at.desc(), ModelVersion.id.desc())
            .limit(1)
        )

    @staticmethod
    def _detached(session: Session, rows: Iterable[T]) -> list[T]:
        found = list(rows)
        session.expunge_all()
        return found


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

    def progress(
        self,
        run_id: int,
        steps_done: int,
        curve: Sequence[float],
        tamper: Sequence[float] = (),
    ) -> None:
        """The mean reward and the tamper rate per step so far (the dashboard draws the
        reward as the run goes)."""
        with self.db.session() as s:
            row = s.get(TrainingRun, run_id)
            if row is not None:
                row.reward_curve = list(curve)
                row.tamper_curve = list(tamper)
                row.steps_done = steps_done

    def fail(self, run_id: int) -> None:
        with self.db.session() as s:
            row = s.get(TrainingRun, run_id)
            if row is not None:
                row.state = "failed"

    def finish(
        self,
        run_id: int,
        steps_done: int,
        rewards: Sequence[float],
        tamper: Sequence[float] = (),
    ) -> None:
        with self.db.session() as s:
            row = s.get(TrainingRun, run_id)
            if row is None:
                raise LookupError(f"no training run {run_id}")
            row.state, row.steps_done = "finished", steps_done
            row.first_mean_reward = rewards[0] if rewards else None
            row.last_mean_reward = rewards[-1] if rewards else None
            row.reward_curve = list(rewards)
            row.tamper_curve = list(tamper)
            row.finished_at = datetime.now(UTC)


def version_named(db: Database, name: str) -> PromotedVersion | None:
    """The model version called ``name``, as a job would run it (None: no such version, or
    one revoked by `ribbit data delete`)."""
    row = TrainerStore(db).version(name)
    if row is None or row.state == "revoked":  # trained on deleted data: never run again
        return None
    adapter = Path(row.adapter_path) if row.adapter_path else None
    return PromotedVersion(row.name, row.base_model, adapter)
