"""scripts/backup.sh, the runbook's backup and restore, on real PostgreSQL and Redis
(started natively, tests/plugins/services.py) and a data dir: write state, back up, wipe
everything, restore, and the state is back; a damaged backup is refused."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.settings import Settings, load_settings
from bot.store.db import Database
from bot.store.jobs import JobSpec, JobStore

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "backup.sh"
REDIS_DB = 11
DB_NAME = "ribbit_backup_test"

# What the data volume holds that a backup must carry, and what it must leave out.
DATA_FILES = {
    "trajectories/job-1.jsonl": b'{"turns": []}\n',
    "trainer/envs/acme__calc-1/env.json": b'{"instance_id": "acme__calc-1"}',
    "trainer/runs/run-1/adapter/adapter_model.safetensors": bytes(range(256)) * 4,
    "celerybeat-schedule": b"beat",
}


@pytest.fixture
def deployment(
    tmp_path: Path, postgres_url: str, redis_url: str
) -> Iterator[tuple[Settings, dict[str, str]]]:
    import psycopg

    server = postgres_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DB_NAME}")
        conn.execute(f"CREATE DATABASE {DB_NAME}")
    db_url = postgres_url.rsplit("/", 1)[0] + f"/{DB_NAME}"
    broker = f"{redis_url.rsplit('/', 1)[0]}/{REDIS_DB}"
    data = tmp_path / "data"
    settings = load_settings(data_dir=data, database_url=db_url, broker_url=broker)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("RIBBIT_")},
        "RIBBIT_DATA_DIR": str(data),
        "RIBBIT_DATABASE_URL": db_url,
        "RIBBIT_BROKER_URL": broker,
        "PYTHON": sys.executable,
    }
    yield settings, env
    import redis

    redis.Redis.from_url(broker).flushdb()


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=120
    )


def _write_state(settings: Settings) -> str:
    db = Database(settings.effective_database_url)
    db.migrate()
    store = JobStore(db)
    with db.session() as session:
        job = store.create(
            session, JobSpec(kind="solve", forge="github", repo="acme/calc", issue_number=7)
        )
        assert job is not None
        job_id = job.id
    store.pause(forge="github", repo="acme/noisy")
    db.dispose()
    import redis

    r = redis.Redis.from_url(settings.broker_url or "")
    r.rpush("ribbit", b'{"task": "ribbit.solve", "id": "\x00\xff"}', b"second")
    r.hset("unacked", "tag-1", b"payload")
    r.set("expiring", b"soon", ex=3600)
    for rel, content in DATA_FILES.items():
        path = settings.data_dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    # Left out on purpose: re-pullable weights and running jobs' clones.
    (settings.data_dir / "work" / "job-2").mkdir(parents=True)
    (settings.data_dir / "work" / "job-2" / "big").write_bytes(b"x")
    return job_id


def _wipe(settings: Settings) -> None:
    import shutil

    import psycopg
    import redis

    url = (settings.database_url or "").replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP SCHEMA public CASCADE")
        conn.execute("CREATE SCHEMA public")
    redis.Redis.from_url(settings.broker_url or "").flushdb()
    shutil.rmtree(settings.data_dir)


def test_backup_restore_brings_every_store_back(
    deployment: tuple[Settings, dict[str, str]], tmp_path: Path
) -> None:
    settings, env = deployment
    job_id = _write_state(settings)
    backup = tmp_path / "backup"
    made = _run(env, "backup", str(backup))
    assert made.returncode == 0, made.stderr
    assert {p.name for p in backup.iterdir()} == {
        "postgres.dump",
        "redis.jsonl",
        "data.tar.gz",
        "SHA256SUMS",
    }
    _wipe(settings)
    import redis

    r = redis.Redis.from_url(settings.broker_url or "")
    assert r.dbsize() == 0 and not settings.data_dir.exists()

    done = _run(env, "restore", str(backup))
    assert done.returncode == 0, done.stderr
    assert "ribbit db upgrade" in done.stdout

    db = Database(settings.effective_database_url)
    try:
        store = JobStore(db)
        job = store.get(job_id)
        assert (job.repo, job.issue_number, job.state) == ("acme/calc", 7, "queued")
        assert store.paused_scopes() == ["github:acme/noisy"]
    finally:
        db.dispose()
    assert r.lrange("ribbit", 0, -1) == [b'{"task": "ribbit.solve", "id": "\x00\xff"}', b"second"]
    assert r.hgetall("unacked") == {b"tag-1": b"payload"}
    assert 0 < r.ttl("expiring") <= 3600
    for rel, content in DATA_FILES.items():
        assert (settings.data_dir / rel).read_bytes() == content, rel
    assert not (settings.data_dir / "work").exists()


def test_backup_restore_refuses_a_damaged_backup_and_a_live_data_dir(
    deployment: tuple[Settings, dict[str, str]], tmp_path: Path
) -> None:
    settings, env = deployment
    _write_state(settings)
    backup = tmp_path / "backup"
    assert _run(env, "backup", str(backup)).returncode == 0
    again = _run(env, "backup", str(backup))
    assert again.returncode != 0 and "exists" in again.stderr

    # Restoring over a data dir in use would mix two states.
    live = _run(env, "restore", str(backup))
    assert live.returncode != 0 and "not empty" in live.stderr

    # A changed byte in the dump: nothing is restored from it.
    dump = backup / "postgres.dump"
    raw = bytearray(dump.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    dump.write_bytes(bytes(raw))
    damaged = _run({**env, "RIBBIT_BACKUP_FORCE": "1"}, "restore", str(backup))
    assert damaged.returncode != 0 and "damaged" in damaged.stderr
    assert (settings.data_dir / "work" / "job-2" / "big").exists()  # untouched
