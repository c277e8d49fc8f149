"""Intake-time admission on its own: the allow-list (forge-qualified or bare, case
folded, never by prefix) and the daily budget per repository, counted from a real store.
The webhook and handler tests check that a refusal is answered and no job is made."""

from __future__ import annotations

import pytest

from bot.admission import ALLOW_LIST_VAR, budget_refusal, refusal_reason, repo_allowed
from bot.settings import AdmissionSettings
from bot.store.db import Database
from bot.store.jobs import JobSpec, JobStore


def admission(**kw: object) -> AdmissionSettings:
    return AdmissionSettings.model_validate(kw)


def test_an_empty_allow_list_admits_every_repository() -> None:
    assert repo_allowed(admission(), "gitlab", "anyone/anything")


@pytest.mark.parametrize(
    ("entry", "forge", "repo", "allowed"),
    [
        ("acme/app", "github", "acme/app", True),
        ("acme/app", "gitlab", "acme/app", True),  # a bare entry names the repo on any forge
        ("github:acme/app", "github", "acme/app", True),
        ("github:acme/app", "gitlab", "acme/app", False),  # the same name on another forge
        ("ACME/App", "github", "acme/app", True),
        ("acme/app", "github", "Acme/APP", True),
        ("GitHub:acme/app", "github", "acme/app", True),
        ("acme/app", "github", "acme/app2", False),
        ("acme/app", "github", "acme/ap", False),
        ("acme/app", "github", "acme/app/sub", False),
        ("acme", "github", "acme/app", False),  # an owner is not a wildcard
        ("acme/app", "github", "evil/acme/app", False),
    ],
)
def test_allow_list_matches_whole_names_case_folded(
    entry: str, forge: str, repo: str, allowed: bool
) -> None:
    assert repo_allowed(admission(allowed_repos=[entry]), forge, repo) is allowed


def test_budget_admits_until_used_reaches_the_daily_limit() -> None:
    adm = admission(daily_jobs_per_repo=3)
    assert budget_refusal(adm, "github", "acme/app", 2) is None
    reason = budget_refusal(adm, "github", "acme/app", 3)
    assert reason is not None
    assert "daily job budget of 3 for github:acme/app" in reason and "00:00 UTC" in reason


def test_a_daily_budget_of_zero_admits_nothing() -> None:
    assert budget_refusal(admission(daily_jobs_per_repo=0), "github", "acme/app", 0) is not None


def test_a_repository_outside_the_allow_list_is_refused_whatever_its_budget() -> None:
    adm = admission(allowed_repos=["acme/app"], daily_jobs_per_repo=50)
    reason = budget_refusal(adm, "github", "evil/app", 0)
    assert reason == f"repository github:evil/app is not in {ALLOW_LIST_VAR}"


def _jobs_today(db: Database, forge: str, repo: str, n: int) -> None:
    store = JobStore(db)
    with db.session() as session:
        for issue in range(n):
            spec = JobSpec(kind="solve", forge=forge, repo=repo, issue_number=issue + 1)
            assert store.create(session, spec) is not None


def test_refusal_reason_counts_todays_jobs_of_that_forge_and_repository(db: Database) -> None:
    adm = admission(daily_jobs_per_repo=2)
    store = JobStore(db)
    _jobs_today(db, "github", "acme/app", 2)
    with db.session() as session:
        assert refusal_reason(adm, store, session, "github", "acme/app") is not None
        assert refusal_reason(adm, store, session, "gitlab", "acme/app") is None
        assert refusal_reason(adm, store, session, "github", "acme/other") is None


def test_refusal_reason_refuses_a_repository_outside_the_allow_list(db: Database) -> None:
    adm = admission(allowed_repos=["github:acme/app"])
    store = JobStore(db)
    with db.session() as session:
        reason = refusal_reason(adm, store, session, "gitlab", "acme/app")
    assert reason is not None and ALLOW_LIST_VAR in reason
