"""The admin CLI against a real store (SQLite in a temp dir)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from bot.cli import main
from tests.support import printed_json

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("RIBBIT_DATA_DIR", str(tmp_path))
    return tmp_path


@pytest.fixture
def declared_entry_points(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The entry points this checkout's pyproject declares, found as if installed: a
    distribution named ribbit first on sys.path shadows the installed one, whose metadata
    may come from an older pyproject (an editable install of another checkout)."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    info = tmp_path / "entry-points" / f"ribbit-{project['version']}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Name: ribbit\nVersion: {project['version']}\n")
    (info / "entry_points.txt").write_text(
        "".join(
            f"[{group}]\n" + "".join(f"{name} = {target}\n" for name, target in entries.items())
            for group, entries in project["entry-points"].items()
        )
    )
    monkeypatch.syspath_prepend(str(info.parent))


def _add_job(issue: int = 7) -> str:
    from bot.settings import load_settings
    from bot.store.db import Database
    from bot.store.jobs import JobSpec, JobStore

    db = Database(load_settings().effective_database_url)
    db.migrate()
    store = JobStore(db)
    with db.session() as s:
        job = store.create(
            s,
            JobSpec(
                kind="solve", forge="gitlab", repo="acme/tools/w", issue_number=issue, actor="maya"
            ),
        )
        assert job is not None
        job_id = job.id
    db.dispose()
    return job_id


def test_jobs_json_lists_jobs(env: Path) -> None:
    job_id = _add_job()
    result = CliRunner().invoke(main, ["jobs", "--json"])
    assert result.exit_code == 0, result.output
    [row] = json.loads(result.output)
    assert (row["id"], row["state"], row["forge"], row["repo"], row["issue"]) == (
        job_id,
        "queued",
        "gitlab",
        "acme/tools/w",
        7,
    )


def test_jobs_repo_names_the_repository_on_its_forge(env: Path) -> None:
    job_id = _add_job()

    def listed(*args: str) -> list[str]:
        result = CliRunner().invoke(main, ["jobs", "--json", *args])
        assert result.exit_code == 0, result.output
        return [row["id"] for row in json.loads(result.output)]

    assert listed("--repo", "gitlab:acme/tools/w") == [job_id]
    assert listed("--repo", "acme/tools/w", "--forge", "gitlab") == [job_id]
    # Unprefixed, a repository is GitHub's, and GitHub has no acme/tools/w.
    bad = CliRunner().invoke(main, ["jobs", "--repo", "acme/tools/w"])
    assert bad.exit_code == 2 and "Invalid value for '--repo'" in bad.output
    assert listed("--repo", "gitlab:acme/other") == []
    assert listed("--forge", "gitlab") == [job_id]
    assert listed("--forge", "github") == []


def test_jobs_show_by_prefix_and_unknown(env: Path) -> None:
    job_id = _add_job()
    shown = CliRunner().invoke(main, ["jobs", "show", job_id[:8], "--json"])
    assert json.loads(shown.output)["id"] == job_id
    missing = CliRunner().invoke(main, ["jobs", "show", "nope"])
    assert missing.exit_code != 0 and "no job" in missing.output


def test_pause_and_resume(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from bot.settings import load_settings
    from bot.store.db import Database
    from bot.store.jobs import JobStore

    runner = CliRunner()
    assert runner.invoke(main, ["pause"]).exit_code == 0
    store = JobStore(Database(load_settings().effective_database_url))
    assert store.paused_scopes() == ["*"]
    assert runner.invoke(main, ["pause", "--repo", "gitlab:acme/x"]).exit_code == 0
    assert "gitlab:acme/x" in store.paused_scopes()
    result = runner.invoke(main, ["resume"])
    assert result.exit_code == 0 and "resumed everything" in result.output
    assert store.paused_scopes() == ["gitlab:acme/x"]
    store.db.dispose()


def test_doctor_reports_each_part(env: Path) -> None:
    result = CliRunner().invoke(main, ["doctor", "--json"])
    checks: list[dict[str, Any]] = json.loads(result.output)
    names = {c["name"] for c in checks}
    assert {"settings", "database", "broker", "github webhooks", "sandbox", "model"} <= names
    assert {c["name"]: c["status"] for c in checks}["database"] == "ok"


def test_doctor_fails_on_invalid_settings(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RIBBIT_PORT", "not-a-port")
    result = CliRunner().invoke(main, ["doctor"])
    assert result.exit_code == 1 and "RIBBIT_PORT" in result.output


def test_lazy_subcommands_load(env: Path) -> None:
    for name in ("sandbox", "gates", "run"):
        result = CliRunner().invoke(main, [name, "--help"])
        assert result.exit_code == 0, (name, result.output)


@pytest.mark.parametrize(
    ("flags", "queues", "takes_rollouts"),
    [
        ([], "ribbit", False),
        (["--rollouts"], "ribbit,rollouts", True),
        (["--only-rollouts"], "rollouts", True),
    ],
)
def test_worker_queues_and_the_rollout_task(
    env: Path,
    declared_entry_points: None,
    monkeypatch: pytest.MonkeyPatch,
    flags: list[str],
    queues: str,
    takes_rollouts: bool,
) -> None:
    from celery import Celery

    started: dict[str, Any] = {}

    def worker_main(self: Celery, argv: list[str]) -> None:  # the loop itself is Celery's
        self.loader.import_default_modules()  # what a starting worker does first
        started["argv"], started["tasks"] = argv, set(self.tasks)

    monkeypatch.setattr(Celery, "worker_main", worker_main)
    result = CliRunner().invoke(main, ["worker", *flags])
    assert result.exit_code == 0, result.output
    argv = started["argv"]
    assert argv[argv.index("-Q") + 1] == queues
    assert ("ribbit.rollout" in started["tasks"]) is takes_rollouts
    assert "ribbit.solve" in started["tasks"]


def test_jobs_table_shows_the_pause_and_held_jobs(env: Path) -> None:
    runner = CliRunner()
    assert runner.invoke(main, ["pause", "--repo", "gitlab:acme/tools/w"]).exit_code == 0
    from bot.settings import load_settings
    from bot.store.db import Database
    from bot.store.jobs import JobSpec, JobStore

    db = Database(load_settings().effective_database_url)
    store = JobStore(db)
    with db.session() as s:
        spec = JobSpec(kind="solve", forge="gitlab", repo="acme/tools/w", issue_number=3)
        assert store.create(s, spec, held=True) is not None
    db.dispose()
    result = runner.invoke(main, ["jobs"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("PAUSED: gitlab:acme/tools/w")
    assert " held " in result.output and "ribbit resume" in result.output


def test_db_upgrade_migrates_and_says_to_which_revision(env: Path) -> None:
    runner = CliRunner()
    first = runner.invoke(main, ["db", "upgrade"])
    assert first.exit_code == 0, first.output
    assert first.output.strip() == "database at revision 0019"
    assert runner.invoke(main, ["db", "upgrade"]).output == first.output  # idempotent
    as_json = runner.invoke(main, ["db", "upgrade", "--json"])
    assert as_json.exit_code == 0, as_json.output
    assert printed_json(as_json.stdout) == {"revision": "0019", "at_head": True}


def test_every_declared_entry_point_loads() -> None:
    """What each package registers for the CLI root, the doctor, the web app and the worker
    (pyproject's entry points) names a real object."""
    import importlib
    import tomllib

    groups = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    assert {"ribbit.commands", "ribbit.doctor", "ribbit.web", "ribbit.queues"} <= set(groups)
    for group, entries in groups.items():
        for name, target in entries.items():
            module, _, attr = target.partition(":")
            assert callable(getattr(importlib.import_module(module), attr)), (group, name)


def test_serve_gets_the_trainers_seams_by_registration(declared_entry_points: None) -> None:
    from bot.cli import WEB_GROUP, _env_validator, _model_versions, registered
    from trainer.envs.revalidate import env_validator
    from trainer.registry import registry_versions

    assert _model_versions() is registry_versions
    assert _env_validator() is env_validator
    assert registered(WEB_GROUP, "nothing-registers-this") is None


def test_a_registration_needing_a_missing_library_reads_as_absent(
    declared_entry_points: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A web-only install has no torch: the trainer's seams are then simply not there."""
    from importlib.metadata import EntryPoint

    from bot import cli

    def load(self: EntryPoint) -> Any:
        raise ModuleNotFoundError("No module named 'torch'", name="torch")

    monkeypatch.setattr(EntryPoint, "load", load)
    assert cli._model_versions() is None
    monkeypatch.setattr(
        EntryPoint,
        "load",
        lambda self: (_ for _ in ()).throw(ModuleNotFoundError("x", name="trainer.gone")),
    )
    with pytest.raises(ModuleNotFoundError):  # a broken import inside Ribbit still raises
        cli._model_versions()
