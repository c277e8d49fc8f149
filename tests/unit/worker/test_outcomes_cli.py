"""`ribbit outcomes` (worker/outcomes_cli.py): the stored outcomes as a table, as JSON, one
repository's only, or exported as JSONL, on a migrated SQLite database."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from bot.runtime import upgrade_database
from bot.store.db import Database
from bot.store.outcomes import OutcomeStore
from bot.store.records.outcome import OutcomeRecord
from bot.store.records.review import FeedbackReview, ReviewFeedback
from worker.outcomes_cli import outcomes
from worker.settings import load_worker_settings

MERGED = OutcomeRecord(
    forge="github",
    repo="acme/calc",
    pr_number=12,
    issue_number=3,
    job_id="j1",
    human_authored=False,
    state="merged",
    actor="maya",
    decided_at=datetime(2026, 11, 30, 12, 0, tzinfo=UTC),
    time_to_merge_s=3600.0,
    revisions=1,
    review_comments=ReviewFeedback(reviews=(FeedbackReview("maya", "approved", "ok"),)),
    bot_diff="+fix",
    merged_diff="+fix",
    diff_similarity=0.875,
)
CLOSED = replace(
    MERGED,
    forge="gitlab",
    repo="a-very-long-group-name/and-a-long-project",
    pr_number=5,
    issue_number=None,
    job_id=None,
    state="closed",
    actor="somebody-with-a-long-name",
    decided_at=None,
    time_to_merge_s=None,
    revisions=0,
    diff_similarity=None,
)


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[OutcomeStore]:
    monkeypatch.setenv("RIBBIT_DATA_DIR", str(tmp_path))
    settings = load_worker_settings()
    upgrade_database(settings)
    db = Database(settings.effective_database_url)
    yield OutcomeStore(db)
    db.dispose()


def test_no_outcomes_yet(store: OutcomeStore) -> None:
    result = CliRunner().invoke(outcomes, [])
    assert result.exit_code == 0 and result.output == "no outcomes yet\n"


def test_the_table_has_a_row_per_outcome_oldest_first(store: OutcomeStore) -> None:
    store.save(MERGED)
    store.save(CLOSED)
    result = CliRunner().invoke(outcomes, [])
    assert result.exit_code == 0, result.output
    header, merged, closed = result.output.splitlines()
    assert header.split() == ["FORGE", "REPO", "PR", "STATE", "BY", "REV", "SIM"]
    assert merged.split() == ["github", "acme/calc", "12", "merged", "maya", "1", "0.88"]
    # Long names cut to their columns; no similarity, an empty column.
    assert closed.split() == [
        "gitlab",
        "a-very-long-group-name/and-a",
        "5",
        "closed",
        "somebody-wit",
        "0",
    ]


def test_json_has_every_field_of_each_outcome(store: OutcomeStore) -> None:
    store.save(MERGED)
    result = CliRunner().invoke(outcomes, ["--json"])
    assert json.loads(result.output) == [
        {
            "forge": "github",
            "repo": "acme/calc",
            "pr": 12,
            "issue": 3,
            "job_id": "j1",
            "human_authored": False,
            "state": "merged",
            "actor": "maya",
            "decided_at": "2026-11-30T12:00:00",
            "time_to_merge_s": 3600.0,
            "revisions": 1,
            "review_comments": {
                "comments": [],
                "reviews": [{"author": "maya", "state": "approved", "body": "ok"}],
            },
            "diff_similarity": 0.875,
            "bot_diff": "+fix",
            "merged_diff": "+fix",
        }
    ]


def test_repo_keeps_one_repositorys_outcomes(store: OutcomeStore) -> None:
    store.save(MERGED)
    store.save(CLOSED)
    result = CliRunner().invoke(outcomes, ["--json", "--repo", "acme/calc"])
    assert [row["pr"] for row in json.loads(result.output)] == [12]
    # The same name on the other forge is another repository.
    other = CliRunner().invoke(outcomes, ["--json", "--repo", "gitlab:acme/calc"])
    assert json.loads(other.output) == []
    group = "a-very-long-group-name/and-a-long-project"
    on_gitlab = CliRunner().invoke(outcomes, ["--json", "--forge", "gitlab", "--repo", group])
    assert [row["pr"] for row in json.loads(on_gitlab.output)] == [5]
    # Without --repo, --forge is a filter of its own.
    every_gitlab = CliRunner().invoke(outcomes, ["--json", "--forge", "gitlab"])
    assert [row["pr"] for row in json.loads(every_gitlab.output)] == [5]


def test_export_writes_one_json_line_per_outcome(store: OutcomeStore, tmp_path: Path) -> None:
    store.save(MERGED)
    store.save(CLOSED)
    out = tmp_path / "outcomes.jsonl"
    result = CliRunner().invoke(outcomes, ["--export", str(out)])
    assert result.output == f"wrote 2 outcomes to {out}\n"
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["forge"], r["pr"], r["decided_at"]) for r in rows] == [
        ("github", 12, "2026-11-30T12:00:00"),
        ("gitlab", 5, None),
    ]


def test_settings_that_do_not_load_are_a_usage_error(
    store: OutcomeStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RIBBIT_SANDBOX__BACKEND", "nonsense")
    result = CliRunner().invoke(outcomes, [])
    assert result.exit_code == 1
    assert result.output.startswith("Error: invalid settings:")
    assert "RIBBIT_SANDBOX__BACKEND" in result.output
