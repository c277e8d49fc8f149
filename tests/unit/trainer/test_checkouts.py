"""trainer/checkouts.py: environments picked by a selector, each checked out of the
store's bundle at its base commit for as long as the task runs, and removed after."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.fakes import commit_files, make_git_repo
from trainer.checkouts import SelectionError, checked_out, select
from trainer.envs.folders import EnvironmentFolders
from trainer.rl.toy import toy_environment


@pytest.fixture
def store(tmp_path: Path) -> EnvironmentFolders:
    """Two environments of one repository, at two different base commits."""
    repo = tmp_path / "repo"
    first = make_git_repo(repo, {"README.md": "one\n"})
    second = commit_files(repo, {"README.md": "two\n"}, "second")
    env_store = EnvironmentFolders(tmp_path / "store")
    env_store.add(toy_environment(first, instance_id="toy__toy-1"), repo)
    env_store.add(toy_environment(second, instance_id="toy__toy-2"), repo)
    return env_store


def _head(checkout: Path) -> str:
    return subprocess.run(
        ["git", "-C", str(checkout), "rev-parse", "HEAD"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def test_checkouts_select_by_ids_in_the_order_named(store: EnvironmentFolders) -> None:
    picked = select(store, "toy__toy-2, toy__toy-1")
    assert [e.instance_id for e in picked] == ["toy__toy-2", "toy__toy-1"]
    assert [e.instance_id for e in select(store, "all")] == ["toy__toy-1", "toy__toy-2"]
    assert select(store, "split:heldout") == []  # picking none is the caller's call


def test_checkouts_select_refuses_an_id_not_stored(store: EnvironmentFolders) -> None:
    with pytest.raises(SelectionError) as missing:
        select(store, "toy__toy-1,nope")
    assert str(missing.value) == f"no environment 'nope' in {store.root}"
    # A path, not an id: refused before it is joined to the store's folder.
    with pytest.raises(SelectionError) as path:
        select(store, "../toy__toy-1")
    assert str(path.value) == "'../toy__toy-1' is not a valid instance id"


def test_checkouts_each_at_its_base_commit_then_removed(store: EnvironmentFolders) -> None:
    chosen = select(store, "all")
    with checked_out(store, chosen, "unit") as pairs:
        assert [env for env, _ in pairs] == chosen
        for env, checkout in pairs:
            assert _head(checkout) == env.base_commit
        assert [(c / "README.md").read_text() for _, c in pairs] == ["one\n", "two\n"]
        root = pairs[0][1].parent
        assert root.name.startswith("ribbit-unit-")
    assert not root.exists()


def test_checkouts_removed_when_the_task_fails(store: EnvironmentFolders) -> None:
    with pytest.raises(RuntimeError), checked_out(store, select(store, "all"), "unit") as pairs:
        root = pairs[0][1].parent
        raise RuntimeError("training crashed")
    assert not root.exists()
