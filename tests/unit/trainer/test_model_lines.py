"""Model lines: whose outcomes train which model, and which model a repository's jobs get.

Two repositories in two lines: line A's training data leaves out repo B's outcomes and
environments, a job for repo B asks for line B's promoted version (its own adapter name
on a server), promotion and rollback stay within a line, and a private repository
trains and is served by no shared line unless named exactly."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.forges.base import RepoRef
from bot.model_lines import DEFAULT_LINE, line_for, repo_line, set_visibility
from bot.settings import TrainingDataSettings
from bot.store.db import Database
from bot.store.tables import Outcome
from tests.support import score_heldout
from trainer.envs.lines import line_environments, line_outcomes, line_repos
from trainer.envs.schema import Environment, Provenance
from trainer.registry import (
    RegistryError,
    promote,
    promoted_model,
    register,
    rollback,
    versions,
)
from worker.model_choice import model_for_jobs, preflight
from worker.settings import ModelSettings, WorkerSettings

A = RepoRef("github", "acme/a")
B = RepoRef("github", "acme/b")
LINES = TrainingDataSettings(lines={"team-a": ["github:acme/a"], "team-b": ["github:acme/b"]})


@pytest.fixture
def db() -> Iterator[Database]:
    database = Database("sqlite://")
    database.migrate()
    yield database
    database.dispose()


def _env(repo: RefOrName, forge: str | None = "github") -> Environment:
    name = repo if isinstance(repo, str) else repo.full_name
    return Environment(
        instance_id=name.replace("/", "__") + (f"-{forge}" if forge else "-noforge"),
        repo=name,
        base_commit="0" * 40,
        problem_statement="fix it",
        patch="p",
        test_patch="t",
        FAIL_TO_PASS=["t::a"],
        PASS_TO_PASS=[],
        provenance=Provenance(source="outcome" if forge else "local", forge=forge),
    )


RefOrName = RepoRef | str


def test_private_repos_need_exact_listing_public_ones_follow_the_setting() -> None:
    cfg = TrainingDataSettings(
        lines={"team": ["github:acme/named", "github:acme/*"]}, public_repos="default_line"
    )
    named, other = RepoRef("github", "acme/named"), RepoRef("github", "acme/other")
    assert line_for(cfg, named, private=True) == "team"  # named exactly: in
    assert line_for(cfg, RepoRef("github", "Acme/Named"), private=True) == "team"
    assert line_for(cfg, other, private=True) is None  # a glob never pulls a private one in
    assert line_for(cfg, other, private=None) is None  # visibility unknown: private
    assert line_for(cfg, other, private=False) == "team"  # public: the glob matches
    # Same name on another forge is another project: the glob is forge-qualified.
    assert line_for(cfg, RepoRef("gitlab", "acme/other"), private=False) == DEFAULT_LINE
    listed = cfg.model_copy(update={"public_repos": "listed"})
    assert line_for(listed, RepoRef("gitlab", "acme/other"), private=False) is None
    # A glob-looking name is not a way in: "acme/*" literally is not a private repo's name.
    assert line_for(cfg, RepoRef("github", "acme/*"), private=True) is None


def test_line_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="forge:owner/name"):
        TrainingDataSettings(lines={"team": ["acme/a"]})
    with pytest.raises(ValueError, match="letters, digits"):
        TrainingDataSettings(lines={"../x": ["github:acme/a"]})
    with pytest.raises(ValueError, match="belongs to one line"):
        TrainingDataSettings(lines={"a": ["github:acme/a"], "b": ["github:Acme/A"]})


def test_training_data_for_line_a_leaves_out_repo_b(db: Database) -> None:
    with db.session() as s:
        for repo, pr in ((A, 1), (B, 2), (A, 3), (RepoRef("gitlab", "acme/a"), 4)):
            s.add(Outcome(forge=repo.forge, repo=repo.full_name, pr_number=pr, state="merged"))
    # Visibility unknown everywhere: exact listing is what lets them in.
    assert line_repos(db, LINES, "team-a") == [A]
    assert [o.pr_number for o in line_outcomes(db, LINES, "team-a")] == [1, 3]
    assert [o.pr_number for o in line_outcomes(db, LINES, "team-b")] == [2]
    envs = [_env(A), _env(B), _env(A, forge="gitlab"), _env("acme/a", forge=None)]
    assert [e.instance_id for e in line_environments(db, LINES, "team-a", envs)] == [
        "acme__a-github"
    ]
    assert [e.repo for e in line_environments(db, LINES, "team-b", envs)] == ["acme/b"]
    # Changed on purpose (#33): an environment without a recorded forge (hand-built before
    # --forge was required) is in no line, not the default one, which serves public
    # unlisted repositories. gitlab:acme/a is private until recorded otherwise.
    assert line_environments(db, LINES, DEFAULT_LINE, envs) == []
    set_visibility(db, RepoRef("gitlab", "acme/a"), private=False)
    assert [e.instance_id for e in line_environments(db, LINES, DEFAULT_LINE, envs)] == [
        "acme__a-gitlab"
    ]


def _version(db: Database, name: str, line: str, rate: float, base: str = "base") -> None:
    register(
        db,
        name,
        base_model=base,
        adapter_path=f"/ckpt/{name}",
        heldout_pass_rate=rate,
        heldout_envs=5,
        line=line,
    )
    # Per-environment results (what promotion compares): base solves none of 40.
    score_heldout(db, f"base:{base}", [0] * 40, line=line)
    score_heldout(db, name, [1] * round(40 * rate) + [0] * (40 - round(40 * rate)), line=line)


def test_promotion_and_rollback_are_per_line(db: Database) -> None:
    _version(db, "a1", "team-a", 0.5)
    _version(db, "a2", "team-a", 0.8)
    _version(db, "b1", "team-b", 0.3)  # worse than line A's, but line A is not its line
    promote(db, "a1")
    promote(db, "b1")
    promote(db, "a2")
    assert promoted_model(db, "team-a").name == "a2"  # type: ignore[union-attr]
    assert promoted_model(db, "team-b").name == "b1"  # type: ignore[union-attr]
    assert promoted_model(db) is None  # the default line has none: base model
    _version(db, "b2", "team-b", 0.05)
    with pytest.raises(RegistryError, match="b2 is not better than b1"):
        promote(db, "b2")
    assert rollback(db, "team-a").name == "a1"  # type: ignore[union-attr]
    assert promoted_model(db, "team-b").name == "b1"  # type: ignore[union-attr]
    with pytest.raises(RegistryError, match="nothing to roll back"):
        rollback(db, DEFAULT_LINE)
    assert {v.name for v in versions(db, "team-b")} == {"b1", "b2"}


def test_a_job_for_repo_b_asks_for_line_b_promoted_version(db: Database, tmp_path: Path) -> None:
    base = tmp_path / "base"
    base.mkdir()
    (base / "config.json").write_text("{}")
    _version(db, "a1", "team-a", 0.5, base=str(base))
    _version(db, "b1", "team-b", 0.5, base=str(base))
    promote(db, "a1")
    promote(db, "b1")

    vllm = ModelSettings(policy="openai", openai_server="vllm", model="microsoft/FrogNano-4B-2609")
    assert model_for_jobs(db, vllm, repo_line(db, LINES, B)).model == "b1"
    assert model_for_jobs(db, vllm, repo_line(db, LINES, A)).model == "a1"
    sglang = vllm.model_copy(update={"openai_server": "sglang"})
    assert model_for_jobs(db, sglang, repo_line(db, LINES, B)).model == (
        "microsoft/FrogNano-4B-2609:b1"
    )
    # Through the worker's preflight, in process: line B's adapter on the pulled base.
    settings = WorkerSettings(
        data_dir=tmp_path,
        model=ModelSettings(policy="transformers", model=str(base)),
        training=LINES,
    )
    model = preflight(db, settings, B)
    assert model.adapter_path == Path("/ckpt/b1") and model.model == str(base)
    assert preflight(db, settings, A).adapter_path == Path("/ckpt/a1")
    # The shared default line has a promoted version too: a public repository in no line
    # gets it, a private (or unrecorded) one gets the base model, never a trained one.
    _version(db, "shared1", DEFAULT_LINE, 0.5, base=str(base))
    promote(db, "shared1")
    secret, public = RepoRef("github", "acme/secret"), RepoRef("github", "acme/public")
    set_visibility(db, public, private=False)
    assert preflight(db, settings, public).adapter_path == Path("/ckpt/shared1")
    private = preflight(db, settings, secret)
    assert private.adapter_path is None and private.model == str(base)
    set_visibility(db, secret, private=True)
    assert preflight(db, settings, secret).adapter_path is None


def test_gitlab_internal_projects_count_as_private() -> None:
    from bot.web.normalize import from_gitlab
    from tests.support import load_payload

    payload = load_payload("gitlab", "issue.open")
    levels = {0: True, 10: True, 20: False, "20": None}
    for level, private in levels.items():
        payload["project"]["visibility_level"] = level
        event = from_gitlab("Issue Hook", "d", payload)
        assert isinstance(event, list) and event, level
        assert [e.private for e in event] == [private] * len(event), level


def test_train_refuses_an_unknown_line_and_a_line_without_environments(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from bot.cli import main
    from trainer.envs.folders import EnvironmentFolders

    monkeypatch.setenv("RIBBIT_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("RIBBIT_TRAINING__LINES", '{"team-a": ["github:acme/a"]}')
    EnvironmentFolders(tmp_path / "trainer").add(_env(B))  # repo B: in no line
    args = ["train", "--model", str(tmp_path), "--steps", "1"]
    unknown = CliRunner().invoke(main, [*args, "--line", "nope"])
    assert unknown.exit_code != 0 and "no model line 'nope'" in unknown.output
    empty = CliRunner().invoke(main, [*args, "--line", "team-a"])
    assert empty.exit_code != 0
    assert "no environments of line 'team-a' match 'all'" in empty.output


def test_versions_from_before_lines_are_in_the_default_line(tmp_path: Path) -> None:
    from alembic import command
    from sqlalchemy import text

    from bot.store.db import alembic_config

    database = Database(f"sqlite:///{tmp_path / 'old.db'}")
    cfg = alembic_config(database.engine)
    command.upgrade(cfg, "0008")
    with database.engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO model_versions (name, base_model, heldout_envs, state, created_at, "
                "promoted_at) VALUES ('old1', 'base', 0, 'promoted', '2026-01-01', '2026-01-01')"
            )
        )
    command.upgrade(cfg, "head")
    assert promoted_model(database, DEFAULT_LINE).name == "old1"  # type: ignore[union-attr]
    command.downgrade(cfg, "0008")  # and back, for an upgrade that has to be undone
    database.dispose()
