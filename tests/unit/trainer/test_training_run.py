"""The training-run service without the CLI: its refusals before anything is recorded,
a whole run on the toy task (host sandboxes, the tiny two-choice model) recorded and
registered, and a run that fails marked failed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select

from bot.forges.base import RepoRef
from bot.model_lines import set_visibility
from bot.settings import TrainingDataSettings
from bot.store.db import Database
from tests.fakes import local_sandboxes, make_git_repo
from tests.plugins.trainer import toy_train_settings
from trainer.distributed import Ranks
from trainer.envs.folders import EnvironmentFolders
from trainer.envs.schema import Provenance
from trainer.registry import versions
from trainer.rl.toy import FirstTokenReward, toy_environment
from trainer.store import TrainerStore
from trainer.store import TrainingRun as TrainingRunRow
from trainer.training_run import RunOptions, TrainingRun, TrainingRunError
from worker.settings import WorkerSettings


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    database = Database(f"sqlite:///{tmp_path / 'ribbit.db'}")
    database.migrate()
    yield database
    database.dispose()


@pytest.fixture
def store(tmp_path: Path, db: Database) -> Path:
    """An environment store holding the toy environment (github:toy/toy, public: the
    default line's)."""
    repo = tmp_path / "toy"
    base = make_git_repo(repo, {"README.md": "toy\n"})
    env = toy_environment(base)
    env = env.model_copy(update={"provenance": Provenance(source="local", forge="github")})
    EnvironmentFolders(tmp_path / "store").add(env, repo)
    set_visibility(db, RepoRef("github", "toy/toy"), private=False)
    return tmp_path / "store"


def _open(
    store: Path, db: Database, model: Path, out: Path, options: RunOptions, **cfg: object
) -> TrainingRun:
    settings = toy_train_settings(model, out, store_dir=str(store), **cfg)
    deployment = WorkerSettings(
        data_dir=store.parent / "data",
        training=TrainingDataSettings(lines={"team-a": ["github:acme/a"]}),
    )
    return TrainingRun.open(
        settings,
        options,
        deployment,
        Ranks(),
        db=db,
        sandbox=local_sandboxes(),
        reward=FirstTokenReward(set()),
    )


def _runs(db: Database) -> list[TrainingRunRow]:
    with db.session() as s:
        return list(s.scalars(select(TrainingRunRow).order_by(TrainingRunRow.id)))


@pytest.mark.parametrize(
    ("options", "cfg", "message"),
    [
        (RunOptions(heldout="all"), {}, "--heldout scores the registered version"),
        (RunOptions(register="v1", heldout="split:nope"), {}, "no environments match --heldout"),
        (RunOptions(line="nope"), {}, "no model line 'nope'; lines: default, team-a"),
        # The toy environment is public github:toy/toy: the default line's only.
        (RunOptions(line="team-a"), {}, "no environments of line 'team-a' match 'all'"),
        (RunOptions(), {"envs": "split:heldout"}, "no environments of line 'default' match"),
    ],
)
def test_training_run_refuses_before_recording_a_run(
    store: Path,
    db: Database,
    tmp_path: Path,
    options: RunOptions,
    cfg: dict[str, object],
    message: str,
) -> None:
    with pytest.raises(TrainingRunError, match=message):
        _open(store, db, tmp_path / "model", tmp_path / "out", options, **cfg)
    assert _runs(db) == []


def test_training_run_trains_records_and_registers(
    store: Path, db: Database, two_choice_model_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    run = _open(
        store, db, two_choice_model_dir, out, RunOptions(register="v1"), steps=2, group_size=2
    )
    (row,) = _runs(db)
    assert (row.state, row.base_model, row.settings["steps"]) == (
        "running",
        str(two_choice_model_dir),
        2,
    )
    seen: list[int] = []
    with run:
        assert run.load() == 2
        result = run.train(lambda record: seen.append(record.step))
    assert seen == [0, 1]
    # The reward never pays, so every group is filtered: the run still finishes and saves.
    assert result.mean_rewards == [0.0, 0.0] and result.steps_done == 2
    assert result.tamper_rates == [0.0, 0.0]
    assert result.checkpoint == out / "step-2" and result.metrics == out / "metrics.jsonl"
    assert result.run_id == row.id and result.world_size == 1
    (row,) = _runs(db)
    assert (row.state, row.steps_done, row.reward_curve) == ("finished", 2, [0.0, 0.0])
    assert row.tamper_curve == [0.0, 0.0]
    assert (row.first_mean_reward, row.last_mean_reward) == (0.0, 0.0)
    assert row.finished_at is not None

    assert run.register(result) == "v1"
    (version,) = versions(db)
    assert (version.name, version.run_id, version.line) == ("v1", row.id, "default")
    assert version.adapter_path == str(out / "step-2" / "adapter")
    # Provenance (#33): the exact environments it trained on, with their content hashes.
    (trained,) = TrainerStore(db).training_envs("v1")
    assert (trained.instance_id, trained.forge, trained.repo) == ("toy__toy-0", "github", "toy/toy")
    assert trained.content_hash == EnvironmentFolders(store).get("toy__toy-0").content_hash()
    assert version.parent_version is None  # trained from the base
    assert run.heldout("v1") is None  # no held-out environments were asked for
    # A second registration under the same name is an error with a message, not a traceback.
    with pytest.raises(TrainingRunError, match="already exists; the run's last checkpoint"):
        run.register(result)


class Interrupted(Exception):
    """What the step callback raises to fail a run midway."""


def test_training_run_that_fails_is_marked_failed(
    store: Path, db: Database, two_choice_model_dir: Path, tmp_path: Path
) -> None:
    run = _open(
        store, db, two_choice_model_dir, tmp_path / "out", RunOptions(), steps=2, group_size=2
    )

    def interrupt(record: object) -> None:
        raise Interrupted

    with pytest.raises(Interrupted), run:
        run.load()
        run.train(interrupt)
    (row,) = _runs(db)
    assert (row.state, row.steps_done, row.reward_curve) == ("failed", 1, [0.0])


def test_training_run_trains_only_inside_its_checkouts(
    store: Path, db: Database, tmp_path: Path
) -> None:
    run = _open(store, db, tmp_path / "model", tmp_path / "out", RunOptions())
    with pytest.raises(RuntimeError, match="inside `with run:`"):
        run.train()
