"""/review/jobs/<id>: one job's page for the people reviewing its pull request.

It shows what the admin job page shows of the work (the live turn count and current
step, every turn, the diff, the gates with their logs) through the same templates,
and nothing of the admin's (no actions, no other jobs). No login: each request must
carry the job's signed, expiring link (bot.joblinks), which the worker posts only where
people who can read the repository see it. Without Settings.reviewer.link_secret every
URL here is 404; a missing, altered, other-job or expired signature gets 403 and a page
saying which. The page polls for progress while the job runs.
"""

from __future__ import annotations

import time
from typing import Any

from flask import Blueprint, Response, abort, render_template, request, url_for

from bot import joblinks, live
from bot.web.admin import job_view, page_headers, queries
from bot.web.services import services

bp = Blueprint(
    "review",
    __name__,
    url_prefix="/review",
    template_folder="admin/templates",
    static_folder="admin/static",
)

TERMINAL = {"succeeded", "failed", "cancelled"}

REFUSALS: dict[str, str] = {
    "missing": "This page opens only from the signed link in the issue's status comment or "
    "in the pull request's description. The address you used has no signature.",
    "invalid": "This link's signature is not valid: it was changed, cut short, or belongs "
    "to another job. Open the link from the issue's status comment or the pull request.",
    "expired": "This link has expired. The status comment carries a fresh link whenever "
    "the job's status changes; otherwise ask the bot's admin for a new one.",
}


def _job_id() -> str:
    job_id = (request.view_args or {}).get("job_id", "")
    if not isinstance(job_id, str) or not job_id.isalnum() or len(job_id) > 32:
        abort(404)
    return job_id


@bp.before_request
def _guard() -> Any:
    settings = services().settings.reviewer
    if not joblinks.links_enabled(settings):
        abort(404)
    if request.endpoint == "review.static":
        return None
    signature = request.args.get(joblinks.SIGNATURE_PARAM)
    verdict = joblinks.check(settings, _job_id(), signature, now=time.time())
    if verdict.ok:
        return None
    assert verdict.refusal is not None and verdict.refusal != "disabled"
    return render_template(
        "admin/review_refused.html",
        reason=verdict.refusal,
        message=REFUSALS[verdict.refusal],
    ), 403


@bp.after_request
def _headers(response: Response) -> Response:
    # The dashboard's headers; no-referrer matters more here: the signature is in the URL,
    # and no page this one links to may learn it.
    return page_headers(response, "review.static")


def _load(job_id: str) -> tuple[Any, job_view.JobDetail, str]:
    svc = services()
    row = queries.get_job(svc.db, job_id)
    if row is None:
        abort(404)
    turns = live.read_turns(live.live_path(svc.settings.data_dir, job_id))
    detail = job_view.job_detail(row.result, svc.settings.data_dir, admitted_title=row.issue_title)
    detail = job_view.with_live_turns(detail, turns)
    return row, detail, _step(row, detail)


def _step(row: Any, detail: job_view.JobDetail) -> str:
    if row.state in TERMINAL:
        return f"finished ({row.state})"
    if row.state == "queued":
        return "waiting for a worker"
    trajectory = detail.trajectory
    last = trajectory.turns[-1] if trajectory and trajectory.turns else None
    last_calls = {"tool_calls": [{"name": c.name} for c in last.tool_calls]} if last else None
    return live.step_for(row.stage, last_calls)


def _progress(row: Any, detail: job_view.JobDetail, step: str) -> dict[str, Any]:
    return {
        "state": row.state,
        "turns": detail.turn_count,
        "step": step,
        "done": row.state in TERMINAL,
        # Changes whenever the rendered detail would: the page refetches it only then.
        "version": f"{row.state}:{row.stage}:{detail.turn_count}:{detail.gates_passed}",
    }


@bp.get("/jobs/<job_id>")
def job(job_id: str) -> str:
    row, detail, step = _load(_job_id())
    signature = request.args[joblinks.SIGNATURE_PARAM]
    return render_template(
        "admin/review_job.html",
        job=row,
        detail=detail,
        progress=_progress(row, detail, step),
        progress_url=url_for("review.progress", job_id=row.id, sig=signature),
        detail_url=url_for("review.detail", job_id=row.id, sig=signature),
        poll_ms=int(services().settings.reviewer.poll_interval_s * 1000),
    )


@bp.get("/jobs/<job_id>/progress")
def progress(job_id: str) -> dict[str, Any]:
    row, detail, step = _load(_job_id())
    return _progress(row, detail, step)


@bp.get("/jobs/<job_id>/detail")
def detail(job_id: str) -> str:
    """The gates, diff and turns alone, for the page to swap in when they changed."""
    _row, detail, _step_text = _load(_job_id())
    return render_template("admin/_job_detail.html", detail=detail)
