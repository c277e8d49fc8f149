"""One repository's training data: list it, export it, delete it, and expire old data.

What Ribbit keeps that carries a repository's code or discussion:

- outcomes (``outcomes`` rows: the bot's and the merged diffs, review comments);
- jobs' records of the task and the run (``jobs.result``: issue text, diff, trajectory
  path; ``jobs.instructions``) and the trajectory files under ``DATA_DIR/trajectories``;
- environments in the trainer's store (``envs/<id>/``: the task, patches, a git bundle of
  the repository) and rejected candidates (``rejected.jsonl``).

Delete removes the outcomes, the environments and rejections, and the trajectory files,
and strips the jobs' results down to figures with no content (the job rows stay: they are
the operational record the dashboard and the admission limits count). Environments know
their forge when built from outcomes; one with no forge recorded (built or imported by
hand) is matched on its repository name alone, so a delete never leaves a copy behind.
Trajectory files are only touched inside ``DATA_DIR``: a path in a job's record that
points elsewhere is neither read nor deleted.
"""

from __future__ import annotations

import io
import json
import shutil
import tarfile
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bot.forges.base import RepoRef, forge_name
from bot.store.db import Database
from bot.store.outcomes import outcome_dict
from bot.store.records import CONTENT_FREE_FIELDS, holds_content
from trainer.envs.folders import EnvironmentFolders
from trainer.envs.schema import Environment, Rejection
from trainer.store import TrainerStore


@dataclass
class RepoData:
    """What is stored for one repository (``before``: only what is older than that)."""

    repo: RepoRef
    outcome_ids: list[int] = field(default_factory=list)
    job_ids: list[str] = field(default_factory=list)  # jobs whose result holds content
    trajectories: list[Path] = field(default_factory=list)  # existing files, inside DATA_DIR
    environments: list[str] = field(default_factory=list)
    rejections: int = 0

    def summary(self) -> dict[str, Any]:
        return {
            "forge": self.repo.forge,
            "repo": self.repo.full_name,
            "outcomes": len(self.outcome_ids),
            "jobs": len(self.job_ids),
            "trajectories": len(self.trajectories),
            "environments": len(self.environments),
            "rejections": self.rejections,
        }


def _aware(when: datetime) -> datetime:
    # SQLite gives naive datetimes back (stored as UTC).
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def _older(when: datetime | None, before: datetime | None) -> bool:
    return before is None or (when is not None and _aware(when) < before)


def _env_matches(env: Environment, repo: RepoRef) -> bool:
    forge = env.provenance.forge
    return env.repo == repo.full_name and (forge is None or forge == repo.forge)


def _env_time(env: Environment, path: Path) -> datetime:
    try:
        return _aware(datetime.fromisoformat(env.created_at))
    except ValueError:
        return datetime.fromtimestamp(path.stat().st_mtime, UTC)


def _rejection_matches(r: Rejection, repo: RepoRef) -> bool:
    # Candidates are named "owner/name#PR" (outcomes) or "owner/name@base..fix" (builder).
    return r.candidate.startswith((f"{repo.full_name}#", f"{repo.full_name}@"))


def _trajectory(value: str | None, data_dir: Path) -> Path | None:
    if not value:
        return None
    root = data_dir.resolve()
    path = Path(value)
    path = (path if path.is_absolute() else root / path).resolve()
    if not path.is_relative_to(root) or not path.is_file():
        return None
    return path


def repo_data(
    db: Database,
    store: EnvironmentFolders,
    data_dir: Path,
    repo: RepoRef,
    *,
    before: datetime | None = None,
) -> RepoData:
    found = RepoData(repo)
    trainer_store = TrainerStore(db)
    for o in trainer_store.repo_outcomes(repo.forge, repo.full_name):
        if _older(o.recorded_at, before):
            found.outcome_ids.append(o.id)
    for job in trainer_store.repo_jobs(repo.forge, repo.full_name):
        if not _older(job.created_at, before):
            continue
        if holds_content(job.result) or job.instructions:
            found.job_ids.append(job.id)
        path = _trajectory(job.solve_record.trajectory_path, data_dir)
        if path is not None:
            found.trajectories.append(path)
    for env in store:
        if not _env_matches(env, repo):
            continue
        path = store.root / "envs" / env.instance_id / "environment.json"
        if before is None or _env_time(env, path) < before:
            found.environments.append(env.instance_id)
    if before is None:
        found.rejections = sum(_rejection_matches(r, repo) for r in store.rejections())
    return found


def export_repo(
    db: Database, store: EnvironmentFolders, data_dir: Path, repo: RepoRef, out: Path
) -> RepoData:
    """A gzipped tar of everything stored for ``repo``: ``outcomes.jsonl``, ``jobs.jsonl``
    (each job's record), ``trajectories/<file>``, ``environments/<id>/`` (the JSON and
    the git bundle) and ``rejected.jsonl``."""
    found = repo_data(db, store, data_dir, repo)
    trainer_store = TrainerStore(db)
    outcomes = [outcome_dict(o) for o in trainer_store.outcomes_by_id(found.outcome_ids)]
    jobs = [
        {
            "id": j.id,
            "kind": j.kind,
            "state": j.state,
            "issue_number": j.issue_number,
            "pr_number": j.pr_number,
            "instructions": j.instructions,
            "result": j.result,
            "created_at": _aware(j.created_at).isoformat(),
        }
        for j in trainer_store.repo_jobs(repo.forge, repo.full_name)
    ]
    rejections = [r for r in store.rejections() if _rejection_matches(r, repo)]
    with tarfile.open(out, "w:gz") as tar:
        _add_text(tar, "outcomes.jsonl", outcomes)
        _add_text(tar, "jobs.jsonl", jobs)
        _add_text(tar, "rejected.jsonl", [r.model_dump() for r in rejections])
        for path in found.trajectories:
            tar.add(path, arcname=f"trajectories/{path.name}", recursive=False)
        for instance_id in found.environments:
            folder = store.root / "envs" / instance_id
            for item in sorted(folder.iterdir()):
                if item.is_file() and not item.is_symlink():
                    tar.add(item, arcname=f"environments/{instance_id}/{item.name}")
    return found


def _add_text(tar: tarfile.TarFile, name: str, rows: list[Any]) -> None:
    data = "".join(json.dumps(r, default=str) + "\n" for r in rows).encode()
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def delete_repo(
    db: Database,
    store: EnvironmentFolders,
    data_dir: Path,
    repo: RepoRef,
    *,
    before: datetime | None = None,
) -> RepoData:
    """Delete what :func:`repo_data` finds; returns what was deleted."""
    found = repo_data(db, store, data_dir, repo, before=before)
    for path in found.trajectories:
        path.unlink(missing_ok=True)
    for instance_id in found.environments:
        shutil.rmtree(store.root / "envs" / instance_id, ignore_errors=True)
    TrainerStore(db).delete_repo_data(
        outcome_ids=found.outcome_ids,
        environment_ids=found.environments,
        job_ids=found.job_ids,
        kept_result_keys=CONTENT_FREE_FIELDS,
    )
    if before is None and found.rejections:
        _drop_rejections(store, repo)
    return found


def revoke_trained_on(db: Database, repo: RepoRef, environment_ids: list[str]) -> list[str]:
    """Revoke every version trained on ``repo``'s data (its recorded training environments,
    or ``environment_ids``, and every version descended from one): un-promoted, never
    served, promoted or rolled back to again. Their names, sorted."""
    store = TrainerStore(db)
    tainted = store.versions_trained_on(repo.forge, repo.full_name, environment_ids)
    names = sorted(v.name for v in tainted if v.state != "revoked")
    if names:
        store.revoke(names, f"trained on data of {repo}, deleted")
    return names


def _drop_rejections(store: EnvironmentFolders, repo: RepoRef) -> None:
    kept = [r for r in store.rejections() if not _rejection_matches(r, repo)]
    path = store.root / "rejected.jsonl"
    tmp = path.with_suffix(".jsonl.tmp")
    tmp.write_text("".join(r.model_dump_json() + "\n" for r in kept), encoding="utf-8")
    tmp.replace(path)


def stored_repos(db: Database, store: EnvironmentFolders) -> list[RepoRef]:
    """Every repository with outcomes, jobs or environments stored."""
    pairs = TrainerStore(db).repos_with_data()
    for env in store:
        if env.provenance.forge is not None:
            pairs.add((env.provenance.forge, env.repo))
    return [RepoRef(forge_name(f), r) for f, r in sorted(pairs)]


def prune(
    db: Database,
    store: EnvironmentFolders,
    data_dir: Path,
    retention_days: int | None,
    *,
    now: datetime | None = None,
) -> list[RepoData]:
    """Delete every repository's data older than ``retention_days`` (None: keep all);
    ``now`` is for tests. Environments with no forge recorded are aged too, by name."""
    if retention_days is None:
        return []
    cutoff = (now or datetime.now(UTC)) - timedelta(days=retention_days)
    repos = stored_repos(db, store)
    names = {r.full_name for r in repos}
    for env in store:
        if env.provenance.forge is None and env.repo not in names:
            repos.append(RepoRef("github", env.repo))  # matched on the name alone
            names.add(env.repo)
    done = [delete_repo(db, store, data_dir, r, before=cutoff) for r in repos]
    return [d for d in done if any(v for k, v in d.summary().items() if k not in ("forge", "repo"))]
