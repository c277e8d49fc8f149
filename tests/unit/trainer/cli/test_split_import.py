"""`ribbit envs split` and the origin of hand-made environments (#33): the split is made
per line and kept in the records, `envs build` needs the repository named, and `envs
import` takes the forge from the operator, never from the file."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import pytest

from tests.support import printed_json
from tests.unit.trainer.cli.invoke import ok, run
from trainer.envs.folders import EnvironmentFolders
from trainer.envs.schema import Environment, Provenance

_ok = partial(ok, "envs")


def _env(repo: str, n: int, forge: str | None = "github") -> Environment:
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
        provenance=Provenance(source="local", forge=forge),
    )


@pytest.fixture
def lines(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> EnvironmentFolders:
    monkeypatch.setenv(
        "RIBBIT_TRAINING__LINES",
        json.dumps({"team-a": ["github:acme/a"], "team-b": ["github:acme/b"]}),
    )
    env_store = EnvironmentFolders(data_dir / "trainer")
    for repo in ("acme/a", "acme/b"):
        for n in (1, 2, 3, 4):
            env_store.add(_env(repo, n))
    return env_store


def test_envs_split_holds_out_one_lines_newest_and_keeps_them(lines: EnvironmentFolders) -> None:
    out = _ok("split", "--line", "team-a", "--count", "1")
    assert out.endswith("line team-a: 1 held out (1 new), 3 for training\n")
    splits = {e.instance_id: e.split for e in lines}
    assert [i for i, s in splits.items() if s == "heldout"] == ["acme__a-4"]
    # Kept: a larger split adds to it, and a smaller one never moves one back.
    _ok("split", "--line", "team-a", "--fraction", "0.5")
    _ok("split", "--line", "team-a", "--count", "1")
    assert sorted(e.instance_id for e in lines if e.split == "heldout") == [
        "acme__a-3",
        "acme__a-4",
    ]
    assert "no environments belong to line 'nope'" in run("envs", "split", "--line", "nope").output


def test_envs_build_needs_the_repository_named(data_dir: Path, tmp_path: Path) -> None:
    issue = tmp_path / "issue.md"
    issue.write_text("x\n")
    args = ["build", "--checkout", str(tmp_path), "--base", "a", "--fix", "b"]
    for missing in (["--forge", "github"], ["--name", "acme/a"]):
        result = run("envs", *args, "--issue-file", str(issue), *missing)
        assert result.exit_code == 2 and "Missing option" in result.output


def test_envs_import_takes_the_forge_from_the_operator(data_dir: Path, tmp_path: Path) -> None:
    lying = _env("acme/b", 1, forge="github").model_copy(update={"instance_id": "x-1"})
    path = tmp_path / "in.jsonl"
    path.write_text(lying.model_dump_json() + "\n")
    out = _ok("import", str(path), "--store", str(tmp_path / "s1"))
    assert "train no model line" in out
    assert EnvironmentFolders(tmp_path / "s1").get("x-1").provenance.forge is None
    _ok("import", str(path), "--store", str(tmp_path / "s2"), "--forge", "gitlab")
    assert EnvironmentFolders(tmp_path / "s2").get("x-1").provenance.forge == "gitlab"


def test_envs_split_as_json(lines: EnvironmentFolders) -> None:
    assert printed_json(_ok("split", "--line", "team-a", "--count", "1", "--json")) == {
        "line": "team-a",
        "heldout": ["acme__a-4"],
        "newly_heldout": ["acme__a-4"],
        "kept_in_train": [],
        "training_count": 3,
    }
    again = json.loads(_ok("split", "--line", "team-a", "--count", "2", "--json"))
    assert (again["heldout"], again["newly_heldout"]) == (["acme__a-3", "acme__a-4"], ["acme__a-3"])


def test_envs_import_as_json_lists_what_it_took_and_refused(data_dir: Path, tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_text(_env("acme/b", 1).model_dump_json() + "\n")
    store = ["--store", str(tmp_path / "s")]
    first = printed_json(_ok("import", str(path), *store, "--forge", "github", "--json"))
    assert first == {"imported": ["acme__b-1"], "refused": [], "forge": "github"}
    again = json.loads(_ok("import", str(path), *store, "--json"))
    assert again["imported"] == [] and again["forge"] is None
    [refused] = again["refused"]
    assert (refused["candidate"], refused["reason"]) == ("acme__b-1", "duplicate")
