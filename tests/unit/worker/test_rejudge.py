"""`ribbit prs rejudge` (worker/rejudge.py, worker/prs_cli.py) on the fake forge and a
migrated SQLite store: an open draft an older judge passed loses its closing keyword and
says "Not verified" at the top, once (a second run, or a dry run, changes nothing and
audits nothing); verified drafts, today's verdicts and closed PRs are left alone."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from bot.forges.base import PullRequest, PullRequestRef, RepoRef
from bot.store import audit
from bot.store.db import Database
from bot.store.records.gate_report import JUDGE_VERSION, GateReport, GateResult, Verdict
from bot.store.tables import Job
from tests.fakes import FakeForge
from worker import prs_cli
from worker.pipelines.publish import UNVERIFIED_WARNING, as_unverified, pr_body
from worker.rejudge import Action, judged_by_older, rejudge
from worker.repo_config import RepoConfig

REPO = RepoRef("github", "acme/calc")
ACTOR = "alice (cli)"
# A report stored before the verdict had levels: it only knew passed.
BEFORE_EVIDENCE = {"passed": True, "duration_s": 1.0, "summary": "tests ✔", "gates": []}
VERIFIED = GateReport.from_results([GateResult("tests", True, evidence=("t.py::test_a",))], 1.0)
UNVERIFIED = GateReport.from_results([GateResult("tests", True)], 1.0)


def _old_body(issue: int) -> str:
    """The body the publish code wrote when "passed" was the old judge's word."""
    return pr_body(
        config=RepoConfig(),
        issue=issue,
        summary="Fixed the sign.",
        report_md=Verdict.VERIFIED.heading,
        model="m",
        exit_reason="agent",
        turns=2,
        seconds=1.0,
        job_id="job",
        verdict=Verdict.VERIFIED,
    )


@pytest.fixture
def db() -> Iterator[Database]:
    database = Database("sqlite://")
    database.migrate()
    yield database
    database.dispose()


@pytest.fixture
def forge(tmp_path: Path) -> FakeForge:
    return FakeForge(tmp_path / "calc.git")


def _draft(forge: FakeForge, number: int, issue: int, *, state: str = "open") -> None:
    forge.pulls[number] = PullRequest(
        ref=PullRequestRef(REPO, number),
        title=f"Fix #{issue}",
        body=_old_body(issue),
        state=state,  # type: ignore[arg-type]
        draft=True,
        head_branch=f"ribbit/issue-{issue}",
        head_sha="h",
        base_branch="main",
        base_sha="b",
        author=forge.bot_login,
    )


def _job(db: Database, job_id: str, pr: int, issue: int, gates: Any, **kw: Any) -> None:
    with db.session() as s:
        s.add(
            Job(
                id=job_id,
                kind=kw.get("kind", "solve"),
                state="succeeded",
                forge="github",
                repo="acme/calc",
                issue_number=issue,
                pr_number=pr,
                result={"head_sha": kw.get("head_sha", "h")}
                | ({"gates": gates} if gates is not None else {}),
            )
        )


def _forges(forge: FakeForge) -> Any:
    return lambda name, *, installation_id=None: forge


@pytest.fixture
def ribbit_prs(db: Database, forge: FakeForge) -> FakeForge:
    """PR 100: judged before evidence with Fixes #4; 101: verified by today's judge; 102:
    verified before judges were recorded; 103: judged before evidence but closed; 104:
    judged before evidence, then revised and judged unverified today (its latest job)."""
    for number, issue in ((100, 4), (101, 5), (102, 6), (104, 8)):
        _draft(forge, number, issue)
    _draft(forge, 103, 7, state="closed")
    _job(db, "j100", 100, 4, BEFORE_EVIDENCE)
    _job(db, "j101", 101, 5, VERIFIED.to_dict())
    _job(db, "j102", 102, 6, {**VERIFIED.to_dict(), "judge": None})
    _job(db, "j103", 103, 7, BEFORE_EVIDENCE)
    _job(db, "j104a", 104, 8, BEFORE_EVIDENCE)
    _job(db, "j104b", 104, 8, UNVERIFIED.to_dict(), kind="revise")
    return forge


def test_only_prs_an_older_judge_passed_are_candidates(db: Database, ribbit_prs: FakeForge) -> None:
    older = {pr.pr_number: pr for pr in judged_by_older(db)}
    assert sorted(older) == [100, 102, 103]
    assert older[100].judge is None and older[100].verdict is Verdict.BEFORE_EVIDENCE
    assert older[100].issue == 4 and older[100].job_id == "j100"
    assert judged_by_older(db, repo=RepoRef("github", "someone/else")) == []
    # The same name on the other forge is another repository.
    assert judged_by_older(db, repo=RepoRef("gitlab", "acme/calc")) == []
    assert sorted(pr.pr_number for pr in judged_by_older(db, repo=REPO)) == [100, 102, 103]
    assert judged_by_older(db, forge="gitlab") == []
    assert len(judged_by_older(db, forge="github")) == 3


def test_an_old_judged_draft_becomes_unverified_and_is_audited(
    db: Database, ribbit_prs: FakeForge
) -> None:
    untouched = {n: ribbit_prs.pulls[n].body for n in (101, 102, 103, 104)}
    done = {
        r.pr.pr_number: r.action for r in rejudge(db, _forges(ribbit_prs), ACTOR, dry_run=False)
    }
    assert done == {100: Action.RELABELLED, 102: Action.VERIFIED, 103: Action.NOT_OPEN_DRAFT}
    body = ribbit_prs.pulls[100].body
    lines = body.splitlines()
    assert body.startswith(UNVERIFIED_WARNING)
    assert "Refs #4" in lines and "Fixes #4" not in lines
    assert Verdict.BEFORE_EVIDENCE.heading in lines and Verdict.VERIFIED.heading not in lines
    assert {n: ribbit_prs.pulls[n].body for n in untouched} == untouched
    assert ribbit_prs.calls.count("update_pull_request_body") == 1
    [(sha, status)] = ribbit_prs.statuses  # on Ribbit's own head, as an unverified draft's
    assert (sha, status.state) == ("h", "failure")
    assert status.description == "Not verified: judged before evidence"
    [row] = audit.recent(db)
    assert (row.actor, row.action, row.target, row.outcome) == (
        ACTOR,
        "rejudge",
        "github:acme/calc!100",
        "ok",
    )
    assert row.detail is not None and "j100" in row.detail and "Refs #4" in row.detail


def test_running_it_twice_changes_nothing_the_second_time(
    db: Database, ribbit_prs: FakeForge
) -> None:
    rejudge(db, _forges(ribbit_prs), ACTOR, dry_run=False)
    bodies = {n: p.body for n, p in ribbit_prs.pulls.items()}
    again = {
        r.pr.pr_number: r.action for r in rejudge(db, _forges(ribbit_prs), ACTOR, dry_run=False)
    }
    assert again[100] is Action.ALREADY
    assert {n: p.body for n, p in ribbit_prs.pulls.items()} == bodies
    assert ribbit_prs.calls.count("update_pull_request_body") == 1
    assert len(ribbit_prs.statuses) == 1
    assert len(audit.recent(db)) == 1


def test_a_dry_run_changes_nothing(db: Database, ribbit_prs: FakeForge) -> None:
    bodies = {n: p.body for n, p in ribbit_prs.pulls.items()}
    done = {r.pr.pr_number: r.action for r in rejudge(db, _forges(ribbit_prs), ACTOR, dry_run=True)}
    assert done[100] is Action.WOULD_RELABEL
    assert {n: p.body for n, p in ribbit_prs.pulls.items()} == bodies
    assert "update_pull_request_body" not in ribbit_prs.calls
    assert ribbit_prs.statuses == []
    assert audit.recent(db) == []


def test_a_head_someone_pushed_since_gets_no_status_of_ribbits(
    db: Database, forge: FakeForge
) -> None:
    _draft(forge, 100, 4)
    _job(db, "j100", 100, 4, BEFORE_EVIDENCE, head_sha="ribbits-own")
    [done] = rejudge(db, _forges(forge), ACTOR, dry_run=False)
    assert done.action is Action.RELABELLED and forge.statuses == []
    assert forge.pulls[100].body.startswith(UNVERIFIED_WARNING)


def test_a_draft_refused_by_a_judge_with_levels_is_left_alone(
    db: Database, forge: FakeForge
) -> None:
    """Published under draft_on_failure with Refs #N already; it is no unverified draft."""
    refused = GateReport.from_results([GateResult("tests", False)], 1.0).to_dict()
    _draft(forge, 100, 4)
    _job(db, "j100", 100, 4, {**refused, "judge": "reward-1"})
    [done] = rejudge(db, _forges(forge), ACTOR, dry_run=False)
    assert done.action is Action.REFUSED and forge.pulls[100].body == _old_body(4)
    assert "get_pull_request" not in forge.calls and audit.recent(db) == []


def test_a_failed_write_is_audited_as_an_error(db: Database, ribbit_prs: FakeForge) -> None:
    ribbit_prs.fail["update_pull_request_body"] = RuntimeError("502")
    with pytest.raises(RuntimeError):
        rejudge(db, _forges(ribbit_prs), ACTOR, dry_run=False)
    [row] = audit.recent(db)
    assert row.outcome == "error" and "502" in (row.detail or "")


def test_the_command_names_its_actor_and_honours_dry_run(
    db: Database, ribbit_prs: FakeForge, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(prs_cli, "_services", lambda: (db, _forges(ribbit_prs)))
    monkeypatch.setattr(db, "dispose", lambda: None)  # the fixture's in-memory database
    runner = CliRunner()
    dry = runner.invoke(prs_cli.prs, ["rejudge", "--dry-run", "--actor", "alice"])
    assert dry.exit_code == 0, dry.output
    assert "github:acme/calc!100" in dry.output and Action.WOULD_RELABEL.value in dry.output
    assert audit.recent(db) == []
    done = runner.invoke(prs_cli.prs, ["rejudge", "--repo", "acme/calc", "--actor", "alice"])
    assert done.exit_code == 0, done.output
    [row] = audit.recent(db)
    assert row.actor.startswith("alice (cli, os user ")
    assert runner.invoke(prs_cli.prs, ["rejudge", "--actor", "bob (session)"]).exit_code == 2


def test_the_command_says_what_it_did_as_json_for_a_script(
    db: Database, ribbit_prs: FakeForge, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(prs_cli, "_services", lambda: (db, _forges(ribbit_prs)))
    monkeypatch.setattr(db, "dispose", lambda: None)  # the fixture's in-memory database
    runner = CliRunner()
    args = ["rejudge", "--repo", "acme/calc", "--actor", "alice", "--json"]
    dry = runner.invoke(prs_cli.prs, [*args, "--dry-run"])
    assert dry.exit_code == 0, dry.output
    said = json.loads(dry.stdout)
    assert said["judge"] == JUDGE_VERSION and said["dry_run"] is True
    [pr] = [p for p in said["prs"] if p["pr"] == 100]
    assert pr["forge"] == "github" and pr["repo"] == "acme/calc"
    assert pr["action"] == "would_relabel" and pr["says"] == Action.WOULD_RELABEL.value
    assert audit.recent(db) == []
    done = json.loads(runner.invoke(prs_cli.prs, args).stdout)
    assert done["dry_run"] is False
    assert [p["action"] for p in done["prs"] if p["pr"] == 100] == ["relabelled"]
    again = json.loads(runner.invoke(prs_cli.prs, args).stdout)
    assert [p["action"] for p in again["prs"] if p["pr"] == 100] == ["already"]


# -- the body itself -------------------------------------------------------------------------


def test_only_ribbits_own_closing_line_for_the_issue_becomes_a_reference() -> None:
    body = "Closes #4\r\nsee Fixes #4 in the log\nFixes #40\nFixes #4\n"
    out = as_unverified(body, 4)
    assert (
        out == f"{UNVERIFIED_WARNING}\n\nRefs #4\r\nsee Fixes #4 in the log\nFixes #40\nRefs #4\n"
    )
    assert as_unverified(out, 4) == out


def test_the_warning_is_added_even_when_the_summary_quotes_it() -> None:
    """The summary is the model's text: quoting the note does not stand in for the warning."""
    body = _old_body(4).replace("Fixed the sign.", UNVERIFIED_WARNING)
    assert as_unverified(body, 4).startswith(UNVERIFIED_WARNING + "\n\nRefs #4\n")


def test_an_unverified_draft_published_today_already_reads_so() -> None:
    body = pr_body(
        config=RepoConfig(),
        issue=4,
        summary="s",
        report_md="r",
        model="m",
        exit_reason="agent",
        turns=1,
        seconds=1.0,
        job_id="j",
        verdict=Verdict.UNVERIFIED,
    )
    assert as_unverified(body, 4) == body


def test_a_pr_that_names_no_issue_is_left_alone(db: Database, forge: FakeForge) -> None:
    _draft(forge, 100, 4)
    _job(db, "j100", 100, 4, BEFORE_EVIDENCE)
    with db.session() as s:
        s.get(Job, "j100").issue_number = None  # type: ignore[union-attr]
    [done] = rejudge(db, _forges(forge), ACTOR, dry_run=False)
    assert done.action is Action.NO_ISSUE and "update_pull_request_body" not in forge.calls
    assert forge.pulls[100].body == _old_body(4)


def test_ribbit_registers_the_command_with_its_actor_option() -> None:
    """Registered as `ribbit prs` in pyproject (tests/unit/bot/test_cli_audit.py reads the
    installed metadata, which an editable install of an older checkout may lack)."""
    import importlib
    import tomllib

    root = Path(__file__).parents[3]
    commands = tomllib.loads((root / "pyproject.toml").read_text())["project"]["entry-points"]
    module, _, attr = commands["ribbit.commands"]["prs"].partition(":")
    group = getattr(importlib.import_module(module), attr)
    command = group.get_command(None, "rejudge")
    assert command is not None and "actor" in {p.name for p in command.params}


def test_a_solve_record_names_the_judge_of_its_report() -> None:
    from bot.store.records import SolveRecord

    assert SolveRecord.from_json({"gates": VERIFIED.to_dict()}).judge == VERIFIED.judge
    assert SolveRecord.from_json({"gates": BEFORE_EVIDENCE}).judge is None
    assert SolveRecord.from_json({}).judge is None
