"""Intake-time admission: which repositories the bot serves and how many jobs a day.

Concurrency limits are enforced when a worker claims a job (bot/store/jobs/lifecycle.py),
because only then is it known what is running.
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from bot.settings import AdmissionSettings
from bot.store.jobs import JobStore

ALLOW_LIST_VAR = "RIBBIT_ADMISSION__ALLOWED_REPOS"


def repo_allowed(admission: AdmissionSettings, forge: str, repo: str) -> bool:
    if not admission.allowed_repos:
        return True
    names = {entry.lower() for entry in admission.allowed_repos}
    return repo.lower() in names or f"{forge}:{repo}".lower() in names


def refusal_reason(
    admission: AdmissionSettings, store: JobStore, session: Session, forge: str, repo: str
) -> str | None:
    """Why a new agent job for ``repo`` may not be created, or None if it may."""
    if not repo_allowed(admission, forge, repo):
        return f"repository {forge}:{repo} is not in {ALLOW_LIST_VAR}"
    return budget_refusal(admission, forge, repo, store.started_today(session, forge, repo))


def budget_refusal(admission: AdmissionSettings, forge: str, repo: str, used: int) -> str | None:
    """Why a new agent job may not be created when ``used`` were created today, or None."""
    if not repo_allowed(admission, forge, repo):
        return f"repository {forge}:{repo} is not in {ALLOW_LIST_VAR}"
    if used >= admission.daily_jobs_per_repo:
        return (
            f"daily job budget of {admission.daily_jobs_per_repo} for {forge}:{repo} "
            "is spent; it resets at 00:00 UTC"
        )
    return None
