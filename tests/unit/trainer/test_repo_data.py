"""One repository's stored data: export then delete (round trip, other repositories
untouched), paths in job records that point outside DATA_DIR neither read nor deleted,
and retention with a fixed clock."""

from __future__ import annotations

import json
import tarfile
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from sqlalchemy import select

from bot.forges.base import RepoRef
from bot.settings import Settings, TrainingDataSettings
from bot.store.db import Database
from bot.store.records import TASK_KEY
from bot.store.tables import Job, Outcome
from tests.support import printed_json
from trainer.data import delete_repo, export_repo, prune, repo_data
from trainer.data_cli import data
from trainer.envs.folders import EnvironmentFolders
from trainer.envs.schema import Environment, Provenance, Rejection

A = RepoRef("github", "acme/a")
B = RepoRef("github", "acme/b")
NOW = datetime(2026, 6, 1, tzinfo=UTC)
OLD = NOW - timedelta(days=40)
RECENT = NOW - timedelta(days=2)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path / "data", training=TrainingDataSettings(retention_days=30))


@pytest.fixture
def db(settings: Settings) -> Iterator[Database]:
    settings.data_dir.mkdir(parents=True)
    database = Database(settings.effective_database_url)
    database.migrate()
    yield database
    database.dispose()


@pytest.fixture
def store(settings: Settings) -> EnvironmentFolders:
    return EnvironmentFolders(settings.data_dir / "trainer")


def _env(repo: RepoRef, n: int, when: datetime, forge: str | None = "github") -> Environment:
    return Environment(
        instance_id=f"{repo.full_name.replace('/', '__')}-{n}",
        repo=repo.full_name,
        base_commit=f"{n:040d}",
        problem_statement=f"secret issue of {repo.full_name}",
        patch=f"patch {n}",
        test_patch="t",
        FAIL_TO_PASS=["t::a"],
        PASS_TO_PASS=[],
        created_at=when.isoformat(),
        provenance=Provenance(source="outcome", forge=forge),
    )


def _seed(db: Database, store: EnvironmentFolders, data_dir: Path, outside: Path) -> None:
    traj_dir = data_dir / "trajectories"
    traj_dir.mkdir(parents=True)
    outside.write_text("not Ribbit's to delete")
    with db.session() as s:
        for repo, n, when in ((A, 1, OLD), (A, 2, RECENT), (B, 3, OLD)):
            traj = traj_dir / f"job{n}.jsonl"
            traj.write_text(json.dumps({"turns": [f"code of {repo.full_name}"]}) + "\n")
            s.add(
                Job(
                    id=f"job{n}",
                    kind="solve",
                    state="succeeded",
                    forge=repo.forge,
                    repo=repo.full_name,
                    instructions="use the private helper",
                    created_at=when,
                    result={
                        "trajectory_path": str(traj),
                        "diff": "+secret",
                        "turns": 4,
                        TASK_KEY: {"issue_title": "t", "issue_body": "b"},
                    },
                )
            )
            s.add(
                Outcome(
                    forge=repo.forge,
                    repo=repo.full_name,
                    pr_number=n,
                    job_id=f"job{n}",
                    state="merged",
                    merged_diff="+secret",
                    recorded_at=when,
                )
            )
        # A tampered record pointing at a file outside DATA_DIR.
        s.add(
            Job(
                id="job9",
                kind="solve",
                state="failed",
                forge="github",
                repo="acme/a",
                created_at=OLD,
                result={"trajectory_path": str(outside)},
            )
        )
    store.add(_env(A, 1, OLD))
    store.add(_env(A, 2, RECENT))
    store.add(_env(A, 4, OLD, forge=None))  # built by hand: matched by name
    store.add(_env(B, 3, OLD))
    store.add(_env(RepoRef("gitlab", "acme/a"), 5, OLD, forge="gitlab"))  # another project
    store.reject(Rejection(candidate="acme/a#7", reason="pr_not_merged"))
    store.reject(Rejection(candidate="acme/b#8", reason="pr_not_merged"))


def test_export_then_delete_round_trip(
    db: Database, store: EnvironmentFolders, settings: Settings, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.txt"
    _seed(db, store, settings.data_dir, outside)
    listed = repo_data(db, store, settings.data_dir, A).summary()
    assert listed == {
        "forge": "github",
        "repo": "acme/a",
        "outcomes": 2,
        "jobs": 3,
        "trajectories": 2,
        "environments": 3,
        "rejections": 1,
    }

    bundle = tmp_path / "a.tar.gz"
    export_repo(db, store, settings.data_dir, A, bundle)
    with tarfile.open(bundle) as tar:
        names = set(tar.getnames())
        outcomes = tar.extractfile("outcomes.jsonl").read().decode().splitlines()  # type: ignore[union-attr]
        jobs = tar.extractfile("jobs.jsonl").read().decode().splitlines()  # type: ignore[union-attr]
    assert {
        "trajectories/job1.jsonl",
        "trajectories/job2.jsonl",
        "environments/acme__a-1/environment.json",
        "environments/acme__a-4/environment.json",
        "rejected.jsonl",
    } <= names
    assert not any("job3" in n or "acme__b" in n or "outside" in n for n in names)
    assert sorted(json.loads(o)["pr"] for o in outcomes) == [1, 2]
    assert sorted(json.loads(j)["id"] for j in jobs) == ["job1", "job2", "job9"]

    delete_repo(db, store, settings.data_dir, A)
    after = repo_data(db, store, settings.data_dir, A).summary()
    assert {k: v for k, v in after.items() if k not in ("forge", "repo")} == {
        "outcomes": 0,
        "jobs": 0,
        "trajectories": 0,
        "environments": 0,
        "rejections": 0,
    }
    assert outside.read_text() == "not Ribbit's to delete"
    with db.session() as s:
        job1 = s.get(Job, "job1")
        assert job1 is not None and job1.result == {"turns": 4} and job1.instructions is None
        assert [o.pr_number for o in s.scalars(select(Outcome))] == [3]  # repo B's stays
    assert not (settings.data_dir / "trajectories" / "job1.jsonl").exists()
    assert (settings.data_dir / "trajectories" / "job3.jsonl").exists()
    assert sorted(e.instance_id for e in store) == ["acme__a-5", "acme__b-3"]
    assert [r.candidate for r in store.rejections()] == ["acme/b#8"]


def test_retention_with_a_fixed_clock(
    db: Database, store: EnvironmentFolders, settings: Settings, tmp_path: Path
) -> None:
    _seed(db, store, settings.data_dir, tmp_path / "outside.txt")
    assert prune(db, store, settings.data_dir, None, now=NOW) == []  # unset: keep all
    done = prune(db, store, settings.data_dir, 30, now=NOW)
    assert {(d.repo.forge, d.repo.full_name) for d in done} == {
        ("github", "acme/a"),
        ("github", "acme/b"),
        ("gitlab", "acme/a"),
    }
    with db.session() as s:
        assert [o.pr_number for o in s.scalars(select(Outcome))] == [2]
        recent = s.get(Job, "job2")
        assert recent is not None and TASK_KEY in (recent.result or {})
    assert sorted(e.instance_id for e in store) == ["acme__a-2"]
    assert sorted(p.name for p in (settings.data_dir / "trajectories").iterdir()) == ["job2.jsonl"]
    # A day later nothing new has expired; 29 days later the recent one has.
    assert prune(db, store, settings.data_dir, 30, now=NOW + timedelta(days=1)) == []
    prune(db, store, settings.data_dir, 30, now=NOW + timedelta(days=29))
    assert list(store) == []


def test_cli_lists_exports_deletes(
    db: Database, store: EnvironmentFolders, settings: Settings, tmp_path: Path
) -> None:
    _seed(db, store, settings.data_dir, tmp_path / "outside.txt")
    runner = CliRunner()
    listed = runner.invoke(data, ["list", "--json"], obj=settings)
    assert listed.exit_code == 0, listed.output
    rows = {(r["forge"], r["repo"]): r for r in json.loads(listed.output)}
    assert rows[("github", "acme/b")]["outcomes"] == 1
    assert rows[("github", "acme/b")]["line"] is None  # visibility unknown: private
    out = tmp_path / "b.tar.gz"
    exported = runner.invoke(
        data, ["export", "--forge", "github", "--repo", "acme/b", "--out", str(out)], obj=settings
    )
    assert exported.exit_code == 0, exported.output
    assert out.is_file()
    deleted = runner.invoke(
        data, ["delete", "--forge", "github", "--repo", "acme/b", "--yes"], obj=settings
    )
    assert deleted.exit_code == 0, deleted.output
    assert '"outcomes": 1' in deleted.output
    assert all(e.repo != "acme/b" for e in store)
    vis = runner.invoke(
        data, ["visibility", "--forge", "github", "--repo", "acme/b", "--public"], obj=settings
    )
    assert vis.exit_code == 0 and "model line default" in vis.output


def test_cli_says_what_it_did_as_json(
    db: Database,
    store: EnvironmentFolders,
    settings: Settings,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import trainer.data

    _seed(db, store, settings.data_dir, tmp_path / "outside.txt")
    # The command's clock fixed, as in the retention test.
    monkeypatch.setattr(trainer.data, "prune", partial(prune, now=NOW))

    def as_json(*args: str, with_settings: Settings = settings) -> Any:
        result = CliRunner().invoke(data, [*args, "--json"], obj=with_settings)
        assert result.exit_code == 0, result.output
        return printed_json(result.stdout)

    b = repo_data(db, store, settings.data_dir, B).summary()
    assert b["outcomes"] == 1 and b["environments"] == 1
    out = tmp_path / "b.tar.gz"
    exported = as_json("export", "--forge", "github", "--repo", "acme/b", "--out", str(out))
    assert exported == {"wrote": str(out), **b} and out.is_file()
    deleted = as_json("delete", "--repo", "acme/b", "--yes")
    assert (deleted["deleted"], deleted["revoked"], deleted["not_recorded"]) == (b, [], [])
    shown = as_json("visibility", "--repo", "acme/b", "--public")
    assert {k: v for k, v in shown.items() if k != "message"} == {
        "forge": "github",
        "repo": "acme/b",
        "private": False,
        "line": "default",
    }
    pruned = as_json("prune")
    assert pruned["retention_days"] == 30
    assert sorted((p["forge"], p["repo"]) for p in pruned["pruned"]) == [
        ("github", "acme/a"),
        ("gitlab", "acme/a"),
    ]
    assert pruned["message"] == "pruned data older than 30 days from 2 repositories"
    kept = settings.model_copy(update={"training": TrainingDataSettings()})
    unset = as_json("prune", with_settings=kept)
    assert (unset["retention_days"], unset["pruned"]) == (None, [])
