"""Splits that are made and kept, and lines that stay apart (#33): the newest fixes of
each repository held out, never trained on by any selector, and a line trained and scored
only on its own repositories' environments (hand-built ones included)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.forges.base import RepoRef
from bot.model_lines import set_visibility
from bot.settings import TrainingDataSettings
from bot.store.db import Database
from trainer.checkouts import SelectionError, select_for_training
from trainer.distributed import Ranks
from trainer.envs.folders import EnvironmentFolders
from trainer.envs.lines import line_environments, line_heldout
from trainer.envs.schema import Calibration, Environment, Provenance
from trainer.envs.splits import plan_split
from trainer.training_run import RunOptions, TrainingRun
from worker.settings import WorkerSettings

LINES = TrainingDataSettings(lines={"team-a": ["github:acme/a"], "team-b": ["github:acme/b"]})


@pytest.fixture
def db() -> Iterator[Database]:
    database = Database("sqlite://")
    database.migrate()
    yield database
    database.dispose()


def _env(
    repo: str,
    n: int,
    *,
    split: str = "train",
    forge: str | None = "github",
    signal: bool = False,
) -> Environment:
    return Environment(
        instance_id=f"{repo.replace('/', '__')}-{n}",
        repo=repo,
        base_commit="0" * 40,
        problem_statement=f"fix {n}",
        patch=f"p{n}",
        test_patch="t",
        FAIL_TO_PASS=["t::a"],
        PASS_TO_PASS=[],
        created_at=f"2026-01-{n:02d}T00:00:00+00:00",
        split=split,  # type: ignore[arg-type]
        provenance=Provenance(source="local", forge=forge),
        calibration=Calibration(k=4, solved=2) if signal else Calibration(),
    )


def test_split_holds_out_the_newest_fixes_of_each_repository() -> None:
    envs = [_env("acme/a", n) for n in (3, 1, 4, 2)] + [_env("acme/b", n) for n in (1, 2)]
    plan = plan_split(envs, count=1)
    assert plan.heldout == ("acme__a-4", "acme__b-2")
    plan = plan_split(envs, fraction=0.5)  # ceil per repository: 2 of 4, 1 of 2
    assert plan.heldout == ("acme__a-3", "acme__a-4", "acme__b-2")


def test_split_goes_by_when_the_fix_was_made_not_when_it_was_built() -> None:
    old_fix = _env("acme/a", 9)  # built last, from the oldest fix
    old_fix.provenance.fixed_at = "2020-01-01T00:00:00+00:00"
    assert plan_split([_env("acme/a", 1), old_fix], count=1).heldout == ("acme__a-1",)


def test_split_is_one_way_and_never_holds_out_what_a_version_trained_on() -> None:
    # acme__a-1 was held out before: it stays, and counts towards the wanted number.
    envs = [_env("acme/a", 1, split="heldout"), _env("acme/a", 2), _env("acme/a", 3)]
    plan = plan_split(envs, count=2)
    assert plan.heldout == ("acme__a-1", "acme__a-3") and plan.newly == ("acme__a-3",)
    plan = plan_split(envs, count=2, trained={"acme__a-3"})
    assert plan.trained_on == ("acme__a-3",)
    assert plan.heldout == ("acme__a-1", "acme__a-2")
    with pytest.raises(ValueError, match="a fraction or a count"):
        plan_split(envs)


@pytest.fixture
def store(tmp_path: Path) -> EnvironmentFolders:
    env_store = EnvironmentFolders(tmp_path / "store")
    env_store.add(_env("acme/a", 1, signal=True))
    env_store.add(_env("acme/a", 2, split="heldout", signal=True))
    env_store.add(_env("acme/a", 3, split="test"))
    return env_store


@pytest.mark.parametrize(
    "selector", ["all", "signal", "split:train", "split:heldout", "split:test"]
)
def test_no_selector_yields_a_heldout_environment_for_training(
    store: EnvironmentFolders, selector: str
) -> None:
    picked = select_for_training(store, selector)
    assert all(e.split == "train" for e in picked)
    assert "acme__a-2" not in {e.instance_id for e in picked}


def test_naming_a_heldout_environment_for_training_is_refused(store: EnvironmentFolders) -> None:
    assert [e.instance_id for e in select_for_training(store, "acme__a-1")] == ["acme__a-1"]
    with pytest.raises(SelectionError, match="never trained on: acme__a-2"):
        select_for_training(store, "acme__a-1, acme__a-2")


def test_two_teams_never_train_or_score_on_each_other(db: Database, tmp_path: Path) -> None:
    """acme/b is team-b's private repository: team-a's run never trains on it nor is
    scored on it, and neither is the default line's, hand-built environments included."""
    env_store = EnvironmentFolders(tmp_path / "store")
    for env in (
        _env("acme/a", 1),
        _env("acme/a", 2, split="heldout"),
        _env("acme/b", 1),
        _env("acme/b", 2, split="heldout"),
        # Hand-built from team-b's code before a forge was required: no line at all.
        _env("acme/b", 3, forge=None),
        _env("acme/b", 4, forge=None, split="heldout"),
    ):
        env_store.add(env)
    set_visibility(db, RepoRef("github", "acme/b"), private=True)
    envs = list(env_store)
    assert [e.instance_id for e in line_heldout(db, LINES, "team-a", envs)] == ["acme__a-2"]
    assert [e.instance_id for e in line_heldout(db, LINES, "team-b", envs)] == ["acme__b-2"]
    assert line_environments(db, LINES, "default", envs) == []
    deployment = WorkerSettings(data_dir=tmp_path / "data", training=LINES)
    for line, mine in (("team-a", "acme/a"), ("team-b", "acme/b")):
        run = TrainingRun.open(
            _train_settings(tmp_path, env_store.root),
            RunOptions(line=line, register="v", heldout="all"),
            deployment,
            Ranks(),
            db=db,
            sandbox=object(),  # type: ignore[arg-type]
            reward=object(),  # type: ignore[arg-type]
        )
        assert {(e.repo, e.split, e.provenance.forge) for e in run.chosen} == {
            (mine, "train", "github")
        }
        assert {(e.repo, e.split, e.provenance.forge) for e in run.heldout_envs} == {
            (mine, "heldout", "github")
        }


def _train_settings(tmp_path: Path, store_dir: Path) -> object:
    from tests.plugins.trainer import toy_train_settings

    return toy_train_settings(tmp_path / "model", tmp_path / "out", store_dir=str(store_dir))
