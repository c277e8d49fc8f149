"""`ribbit data delete` retires what learned from the deleted data (#33): every version
trained on the repository's environments, and every version trained on from one of
them, is un-promoted, never served, promoted or rolled back to again, and the audit row
names them."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from bot.cli import main
from bot.store.audit import recent
from bot.store.db import Database
from tests.support import printed_json
from tests.unit.trainer.cli.invoke import ok, refused, run
from trainer.registry import promote, promoted_model, register
from trainer.store import TrainedOn, TrainerStore, version_named
from worker.settings import load_worker_settings


def _version(db: Database, name: str, repo: str, parent: str | None = None) -> None:
    register(db, name, base_model="base", adapter_path=None)
    TrainerStore(db).record_training_envs(
        name, [TrainedOn(f"{repo.replace('/', '__')}-1", "h", "github", repo)], parent=parent
    )


def test_data_delete_revokes_every_version_trained_on_the_repository(data_dir: Path) -> None:
    db = Database(load_worker_settings().effective_database_url)
    db.migrate()
    _version(db, "clean", "acme/a")
    _version(db, "tainted", "acme/b")
    _version(db, "child", "acme/a", parent="tainted")  # continued from tainted's weights
    _version(db, "twin", "acme/b")
    register(db, "by-hand", base_model="base", adapter_path=None)  # nothing recorded
    promote(db, "clean", force=True)
    promote(db, "tainted", force=True)
    assert promoted_model(db).name == "tainted"  # type: ignore[union-attr]

    out = ok("data", "delete", "--forge", "github", "--repo", "acme/b", "--yes")
    assert "revoked child: trained on github:acme/b's data" in out
    assert "revoked tainted: trained on github:acme/b's data" in out
    assert "revoked clean" not in out
    assert "what these versions trained on is not recorded; check them: ['by-hand']" in out
    states = {v.name: v.state for v in TrainerStore(db).versions()}
    assert states == {
        "clean": "retired",
        "tainted": "revoked",
        "child": "revoked",
        "twin": "revoked",
        "by-hand": "candidate",
    }
    assert promoted_model(db) is None  # the line's jobs get the base model, not tainted
    assert version_named(db, "tainted") is None  # nor does `ribbit eval --version`
    assert "revoked" in refused("model", "promote", "tainted", "--force")
    promote(db, "clean", force=True)  # a clean version can be put back
    assert promoted_model(db).name == "clean"  # type: ignore[union-attr]
    (entry,) = [e for e in recent(db, 10) if e.action == "delete-data"]
    assert entry.outcome == "ok" and "revoked versions: ['child', 'tainted', 'twin']" in (
        entry.detail or ""
    )
    db.dispose()


def test_data_delete_as_json_keeps_stdout_to_the_object(data_dir: Path) -> None:
    db = Database(load_worker_settings().effective_database_url)
    db.migrate()
    _version(db, "tainted", "acme/b")
    register(db, "by-hand", base_model="base", adapter_path=None)
    result = run("data", "delete", "--forge", "github", "--repo", "acme/b", "--yes", "--json")
    assert result.exit_code == 0, result.output
    deleted = printed_json(result.stdout)  # the revoked lines went to stderr
    assert deleted["revoked"] == ["tainted"] and deleted["not_recorded"] == ["by-hand"]
    assert deleted["deleted"]["repo"] == "acme/b" and deleted["deleted"]["environments"] == 0
    assert deleted["message"].endswith("revoked versions: ['tainted']")
    assert "revoked tainted: trained on github:acme/b's data" in result.stderr
    db.dispose()


def test_data_delete_as_json_asks_on_stderr(data_dir: Path) -> None:
    """Without --yes the confirmation is asked, but on stderr: stdout still parses."""
    db = Database(load_worker_settings().effective_database_url)
    db.migrate()
    _version(db, "tainted", "acme/b")
    args = ["data", "delete", "--forge", "github", "--repo", "acme/b", "--json"]
    result = CliRunner().invoke(main, args, input="y\n")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["revoked"] == ["tainted"]
    assert "delete every stored record of github:acme/b?" in result.stderr
    db.dispose()
