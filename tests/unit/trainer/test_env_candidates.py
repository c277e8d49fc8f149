"""Environments from the outcome store: a merged bot PR builds (from the job's task
record in the database alone: issue text, base, .ribbit.yml commands), a closed one is
kept with its review comments and its patch checks the same issue's environments (tests
that pass a rejected patch build none), an outcome without a base commit or without an
issue text is refused, and another forge's outcomes are left alone."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.store.db import Database
from bot.store.records import TASK_KEY, TaskRecord
from bot.store.tables import Job, Outcome
from tests.fakes import git
from tests.plugins.trainer import PYTEST, FixRepo, sandbox_factory
from trainer.envs.builder import EnvironmentBuilder
from trainer.envs.candidates import environments_from_outcomes
from trainer.envs.folders import EnvironmentFolders

SETUP = "echo installed > .setup-ran"
# What the job's model was given (a vouching line and an indented body): rollouts replay it.
FIRST_MESSAGE = "# Task\n\nadd is wrong\n    add(2, 3) is -1\n\n(vouched)\n"


@pytest.fixture
def db() -> Iterator[Database]:
    database = Database("sqlite://")
    database.migrate()
    yield database
    database.dispose()


def test_outcomes_to_environments(db: Database, fix_with_new_test: FixRepo, tmp_path: Path) -> None:
    repo = fix_with_new_test
    merged_diff = git(repo.path, "diff", repo.base, repo.fix) + "\n"
    # The trajectory files live on some worker's disk, not here: building must not need them.
    traj_path = tmp_path / "elsewhere" / "job.jsonl"
    record = TaskRecord(
        issue_title="add is wrong",
        issue_body="add(2, 3) is -1",
        base_sha=repo.base,
        test_command=PYTEST,
        setup_command=SETUP,
        first_message=FIRST_MESSAGE,
    )
    results = {
        "job1": {TASK_KEY: record.to_json()},
        "job2": {TASK_KEY: record.to_json()},
        "job4": {},  # from before task records: no issue text anywhere
        "job5": {TASK_KEY: {**record.to_json(), "issue_title": " ", "issue_body": ""}},
        "job6": {TASK_KEY: record.to_json()},
    }
    with db.session() as s:
        for job_id, result in results.items():
            s.add(
                Job(
                    id=job_id,
                    kind="solve",
                    state="succeeded",
                    forge="gitlab" if job_id == "job6" else "github",
                    repo="acme/calc",
                    result={
                        "base_sha": repo.base,
                        "trajectory_path": str(traj_path),
                        **result,
                    },
                )
            )
        for number, job_id in ((4, "job4"), (5, "job5")):
            s.add(
                Outcome(
                    forge="github",
                    repo="acme/calc",
                    pr_number=number,
                    job_id=job_id,
                    state="merged",
                    merged_diff=merged_diff,
                )
            )
        # The same name on another forge is another project.
        s.add(
            Outcome(
                forge="gitlab",
                repo="acme/calc",
                pr_number=1,
                job_id="job6",
                state="merged",
                merged_diff=merged_diff,
            )
        )
        s.add(
            Outcome(
                forge="github",
                repo="acme/calc",
                pr_number=1,
                job_id="job1",
                state="merged",
                merged_diff=merged_diff,
                review_comments={"comments": [{"body": "also check negatives"}], "reviews": []},
            )
        )
        s.add(
            Outcome(
                forge="github",
                repo="acme/calc",
                pr_number=2,
                job_id="job2",
                state="closed",
                review_comments={"comments": [], "reviews": [{"body": "wrong approach"}]},
            )
        )
        s.add(
            Outcome(
                forge="github",
                repo="acme/calc",
                pr_number=3,
                state="merged",
                human_authored=True,
                merged_diff=merged_diff,
            )
        )
    store = EnvironmentFolders(tmp_path / "store")
    builder = EnvironmentBuilder(sandbox_factory, reruns=1, test_timeout_s=60)

    report = environments_from_outcomes(db, "github", "acme/calc", repo.path, builder, store)

    (env,) = report.built
    assert env.FAIL_TO_PASS == ["tests/test_add.py::test_add"]
    assert env.problem_statement == "add is wrong\n\nadd(2, 3) is -1"
    assert env.test_command == PYTEST and env.setup_commands == [SETUP]
    assert env.hints_text == "also check negatives"
    assert env.task_text == FIRST_MESSAGE  # the job's exact first message, for rollouts
    assert env.provenance.source == "outcome" and env.provenance.author == "bot"
    assert env.provenance.forge == "github"  # decides which model lines may train on it
    assert store.get(env.instance_id) == env
    reasons = {r.candidate: r for r in store.rejections()}
    assert reasons["acme/calc#2"].reason == "pr_not_merged"
    assert reasons["acme/calc#2"].negative_trajectory == str(traj_path)
    assert reasons["acme/calc#2"].hints == ["wrong approach"]
    assert reasons["acme/calc#3"].reason == "no_base_commit"
    assert reasons["acme/calc#4"].reason == "no_problem_statement"
    assert reasons["acme/calc#5"].reason == "no_problem_statement"
    assert len(report.built) + len(report.rejected) == 5  # gitlab's outcome not among them

    # Running it again finds the environment already stored.
    again = environments_from_outcomes(db, "github", "acme/calc", repo.path, builder, store)
    assert not again.built and "duplicate" in {r.reason for r in again.rejected}


def _outcomes_for_one_issue(db: Database, repo: FixRepo, closed_diffs: dict[int, str]) -> None:
    """A merged bot PR (#7) for issue 9, built from job1's task record, and closed bot
    PRs for the same issue with the patches reviewers turned down."""
    record = TaskRecord(
        issue_title="add is wrong",
        issue_body="add(2, 3) is -1",
        base_sha=repo.base,
        test_command=PYTEST,
    )
    with db.session() as s:
        s.add(
            Job(
                id="job1",
                kind="solve",
                state="succeeded",
                forge="github",
                repo="acme/calc",
                result={"base_sha": repo.base, TASK_KEY: record.to_json()},
            )
        )
        s.add(
            Outcome(
                forge="github",
                repo="acme/calc",
                pr_number=7,
                issue_number=9,
                job_id="job1",
                state="merged",
                merged_diff=git(repo.path, "diff", repo.base, repo.fix) + "\n",
            )
        )
        for number, diff in closed_diffs.items():
            s.add(
                Outcome(
                    forge="github",
                    repo="acme/calc",
                    pr_number=number,
                    issue_number=9,
                    state="closed",
                    bot_diff=diff,
                )
            )


def test_an_environment_whose_tests_pass_a_rejected_patch_is_not_built(
    db: Database, fix_with_new_test: FixRepo, tmp_path: Path
) -> None:
    # A reviewer closed #6: the same code change as the merged fix, say, but in a way
    # people turned down. Tests that pass it cannot tell the fix from it.
    repo = fix_with_new_test
    same_code = git(repo.path, "diff", repo.base, repo.fix, "--", "calc.py") + "\n"
    docs_only = "diff --git a/NOTES.md b/NOTES.md\nnew file mode 100644\n--- /dev/null\n"
    docs_only += "+++ b/NOTES.md\n@@ -0,0 +1 @@\n+add is fine\n"
    _outcomes_for_one_issue(db, repo, {5: docs_only, 6: same_code})
    store = EnvironmentFolders(tmp_path / "store")
    builder = EnvironmentBuilder(sandbox_factory, reruns=1, test_timeout_s=60)

    report = environments_from_outcomes(db, "github", "acme/calc", repo.path, builder, store)

    assert report.built == []
    reasons = {r.candidate: r for r in report.rejected}
    assert reasons["acme/calc#7"].reason == "passes_rejected_patch"
    assert "#6, which a reviewer closed unmerged" in reasons["acme/calc#7"].detail
    assert {reasons[f"acme/calc#{n}"].reason for n in (5, 6)} == {"pr_not_merged"}


def test_an_environment_that_fails_every_rejected_patch_is_built(
    db: Database, fix_with_new_test: FixRepo, tmp_path: Path
) -> None:
    repo = fix_with_new_test
    docs_only = "diff --git a/NOTES.md b/NOTES.md\nnew file mode 100644\n--- /dev/null\n"
    docs_only += "+++ b/NOTES.md\n@@ -0,0 +1 @@\n+add is fine\n"
    _outcomes_for_one_issue(db, repo, {5: docs_only})
    store = EnvironmentFolders(tmp_path / "store")
    builder = EnvironmentBuilder(sandbox_factory, reruns=1, test_timeout_s=60)

    report = environments_from_outcomes(db, "github", "acme/calc", repo.path, builder, store)

    (env,) = report.built
    assert env.FAIL_TO_PASS == ["tests/test_add.py::test_add"]
