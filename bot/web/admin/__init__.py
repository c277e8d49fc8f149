"""The admin dashboard at /admin: jobs, one job's trajectory/diff/gates, outcome rates,
and the trainer's tables once they exist.

Server-rendered Jinja with autoescaping (trajectories are untrusted model output),
a strict Content-Security-Policy (scripts only from /admin/static, no inline code),
and no anonymous access: without an admin token (Settings.admin_token, or the named
admins of Settings.admin_tokens) every /admin URL is 404.

This module holds the blueprint and its views; auth.py says who may see /admin, csrf.py
guards its POSTs, queries.py shapes the pages from the stores' named queries, job_view.py
one job's page from its typed records, overview.py the health page's facts, and
actions.py what an admin can do (through the same services the CLI uses).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from flask import (
    Blueprint,
    Response,
    abort,
    g,
    redirect,
    render_template,
    request,
    url_for,
)

from bot import env_validation, live
from bot.store import audit
from bot.store.training import valid_instance_id
from bot.web.admin import actions, auth, csrf, job_view, queries
from bot.web.admin.overview import health_snapshot
from bot.web.services import services

bp = Blueprint(
    "admin", __name__, url_prefix="/admin", template_folder="templates", static_folder="static"
)

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
PUBLIC_ENDPOINTS = {"admin.login", "admin.static"}


def _admins() -> auth.Admins | None:
    return auth.Admins.from_settings(services().settings)


def _who() -> auth.Authenticated:
    """Who the request is from; set by _guard for every view but the public ones."""
    who: auth.Authenticated = g.ribbit_admin
    return who


LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "[::1]"}


def _secure() -> bool:
    # Secure unless the dashboard is reached on loopback: behind a TLS-terminating proxy
    # the app itself sees plain HTTP, and a session cookie must never travel unencrypted.
    return request.is_secure or request.host.rsplit(":", 1)[0] not in LOOPBACK_HOSTS


@bp.before_request
def _guard() -> Response | None:
    admins = _admins()
    if admins is None:
        abort(404)
    if request.endpoint in PUBLIC_ENDPOINTS:
        return None
    who = auth.authenticate(admins, services().db, request)
    if who is not None:
        g.ribbit_admin = who
        return None
    # Scripts get a plain 401; browsers are sent to the form.
    if "Authorization" in request.headers or not request.accept_mimetypes.accept_html:
        return Response(
            "unauthorized\n",
            401,
            {"WWW-Authenticate": 'Bearer realm="ribbit"', "Content-Type": "text/plain"},
        )
    return redirect(url_for("admin.login", next=request.full_path))  # type: ignore[return-value]


@bp.context_processor
def _csrf_field() -> dict[str, str]:
    who: auth.Authenticated | None = g.get("ribbit_admin")
    return {"csrf_token": csrf.token_for(who.admin.token, request) if who is not None else ""}


def page_headers(response: Response, static_endpoint: str) -> Response:
    """What every dashboard and reviewer page is sent with: the CSP, no sniffing, no
    referrer, no framing, and no caching but of ``static_endpoint``'s files."""
    response.headers["Content-Security-Policy"] = CSP
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "no-referrer"
    response.headers["X-Frame-Options"] = "DENY"
    if request.endpoint != static_endpoint:
        response.headers["Cache-Control"] = "no-store"
    return response


@bp.after_request
def _headers(response: Response) -> Response:
    return page_headers(response, "admin.static")


def _safe_next(value: str | None) -> str:
    # Only paths inside the dashboard: an open redirect would make the login form a phishing aid.
    if value and value.startswith("/admin") and not value.startswith("//") and "\\" not in value:
        return value
    return url_for("admin.jobs")


@bp.route("/login", methods=["GET", "POST"])
def login() -> Any:
    admins = _admins()
    assert admins is not None  # _guard returned 404 otherwise
    error = None
    if request.method == "POST":
        admin = admins.matching(request.form.get("token", ""))
        if admin is not None:
            response = redirect(_safe_next(request.form.get("next")))
            auth.start_session(admin, services().db, response, secure=_secure())
            return response
        error = "That token is not the admin token."
    status = 401 if error else 200
    return render_template(
        "admin/login.html",
        error=error,
        next=_safe_next(request.args.get("next") or request.form.get("next")),
    ), status


@bp.post("/logout")
def logout() -> Any:
    response = redirect(url_for("admin.login"))
    auth.end_session(services().db, request, response, secure=_secure())
    return response


@bp.app_template_filter("ago")
def _fmt_time(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S UTC") if value else ""


@bp.app_template_filter("duration")
def _fmt_duration(seconds: float | None) -> str:
    if seconds is None:
        return ""
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60:02d}s"
    return f"{s // 3600}h {(s % 3600) // 60:02d}m"


@bp.app_template_filter("pretty_json")
def _pretty_json(value: Any) -> str:
    """A tool call's arguments as the model sent them, indented (the template escapes)."""
    return json.dumps(value, indent=2, ensure_ascii=False)


def _job_page() -> tuple[queries.JobFilter, queries.JobPage]:
    flt = queries.JobFilter.from_args(request.args)
    try:
        page = int(request.args.get("page", "1"))
    except ValueError:
        page = 1
    return flt, queries.list_jobs(services().db, flt, page)


def _poll_ms() -> int:
    return int(services().settings.admin_poll_interval_s * 1000)


@bp.get("/")
def jobs() -> str:
    flt, result = _job_page()
    return render_template(
        "admin/jobs.html",
        page=result,
        flt=flt,
        states=queries.JOB_STATES,
        kinds=queries.JOB_KINDS,
        forges=queries.FORGES,
        poll_ms=_poll_ms(),
    )


# The list and health pages poll these (static/admin_live.js): a small JSON answer each
# time, and the server-rendered fragment only when its version changed.


@bp.get("/live/jobs")
def jobs_live() -> dict[str, Any]:
    _flt, result = _job_page()
    return {"version": result.version(), "total": result.total}


@bp.get("/jobs/rows")
def jobs_rows() -> str:
    flt, result = _job_page()
    return render_template("admin/_jobs_rows.html", page=result, flt=flt)


@bp.get("/jobs/<job_id>")
def job(job_id: str) -> str:
    if not job_id.isalnum() or len(job_id) > 32:
        abort(404)
    svc = services()
    row = queries.get_job(svc.db, job_id)
    if row is None:
        abort(404)
    detail = job_view.with_live_turns(
        job_view.job_detail(row.result, svc.settings.data_dir, admitted_title=row.issue_title),
        live.read_turns(live.live_path(svc.settings.data_dir, row.id)),
    )
    extra_json = json.dumps(detail.extra, indent=2, default=str) if detail.extra else None
    return render_template("admin/job.html", job=row, detail=detail, extra_json=extra_json)


@bp.get("/outcomes")
def outcomes() -> str:
    series = queries.outcome_series(services().db)
    return render_template("admin/outcomes.html", series=series, chart=series.chart_data())


TRAINER_TITLES = {
    "environments": "Environments",
    "training-runs": "Training runs",
    "model-versions": "Model versions",
}


@bp.get("/<any(environments, 'training-runs', 'model-versions'):section>")
def trainer_section(section: str) -> str:
    db = services().db
    view = queries.trainer_table(db, queries.TRAINER_TABLES[section])
    curves = queries.reward_curves(db) if section == "training-runs" else []
    return render_template(
        "admin/table.html",
        title=TRAINER_TITLES[section],
        view=view,
        section=section,
        curves=curves,
    )


# -- actions ---------------------------------------------------------------------------------


def _actor() -> str:
    who = _who()
    return f"{who.admin.name} ({who.how}) from {request.remote_addr or 'unknown'}"


def _run_action(name: str, target: str, run: Any) -> Any:
    """Refuse cross-site POSTs, run the action, audit it either way, answer."""
    who = _who()
    db = services().db
    refused = csrf.refusal(who.admin.token, request)
    if refused is not None:
        audit.record(
            db, actor=_actor(), action=name, target=target, outcome="refused", detail=refused
        )
        return Response(f"forbidden: {refused}\n", 403, {"Content-Type": "text/plain"})
    result: actions.ActionResult = run()
    audit.record(
        db,
        actor=_actor(),
        action=name,
        target=target,
        outcome="ok" if result.ok else "error",
        detail=result.message,
    )
    if who.how == "bearer":
        return {"ok": result.ok, "message": result.message}, 200 if result.ok else 409
    wanted = request.form.get("next")
    if not wanted:
        return redirect(url_for("admin.health", msg=result.message))
    target = _safe_next(wanted)
    return redirect(f"{target}{'&' if '?' in target else '?'}{urlencode({'msg': result.message})}")


def _job_id(job_id: str) -> str:
    if not job_id.isalnum() or len(job_id) > 32:
        abort(404)
    return job_id


@bp.post("/jobs/<job_id>/retry")
def retry_job(job_id: str) -> Any:
    jid = _job_id(job_id)
    return _run_action("retry", f"job:{jid}", lambda: actions.retry_job(services(), jid))


@bp.post("/jobs/<job_id>/cancel")
def cancel_job(job_id: str) -> Any:
    jid = _job_id(job_id)
    return _run_action("cancel", f"job:{jid}", lambda: actions.cancel_job(services(), jid))


def _repo_scope() -> tuple[str | None, str | None]:
    repo = (request.form.get("repo") or "").strip() or None
    forge = (request.form.get("forge") or "github").strip()
    if repo is not None and ":" in repo:
        forge, repo = repo.split(":", 1)
    if forge not in queries.FORGES or (repo is not None and len(repo) > 255):
        abort(400)
    return (forge if repo else None), repo


@bp.post("/pause")
def pause() -> Any:
    forge, repo = _repo_scope()
    target = f"{forge}:{repo}" if repo else "*"
    return _run_action("pause", target, lambda: actions.pause(services(), forge, repo))


@bp.post("/resume")
def resume() -> Any:
    forge, repo = _repo_scope()
    target = f"{forge}:{repo}" if repo else "*"
    return _run_action("resume", target, lambda: actions.resume(services(), forge, repo))


@bp.post("/model-versions/promote")
def promote_model() -> Any:
    version = (request.form.get("version") or "").strip()
    if not version or len(version) > 128:
        abort(400)
    return _run_action("promote", f"model:{version}", lambda: actions.promote(services(), version))


@bp.post("/model-versions/rollback")
def rollback_model() -> Any:
    return _run_action("rollback", "model", lambda: actions.rollback(services()))


def _instance_id(instance_id: str) -> str:
    if not valid_instance_id(instance_id):
        abort(404)
    return instance_id


@bp.get("/environments/<instance_id>")
def environment(instance_id: str) -> str:
    iid = _instance_id(instance_id)
    db = services().db
    runs = env_validation.history(db, iid)
    return render_template(
        "admin/environment.html",
        instance_id=iid,
        fields=queries.environment_row(db, iid),
        runs=runs,
        version=_runs_version(runs),
        can_validate=services().env_validation is not None,
        msg=request.args.get("msg", "")[:300],
        poll_ms=_poll_ms(),
    )


def _runs_version(runs: list[env_validation.ValidationRecord]) -> str:
    return ",".join(f"{r.id}:{r.state}" for r in runs)


@bp.get("/live/environments/<instance_id>")
def environment_live(instance_id: str) -> dict[str, Any]:
    runs = env_validation.history(services().db, _instance_id(instance_id))
    return {"version": _runs_version(runs)}


@bp.get("/environments/<instance_id>/validations")
def environment_validations(instance_id: str) -> str:
    runs = env_validation.history(services().db, _instance_id(instance_id))
    return render_template("admin/_validations.html", runs=runs)


@bp.post("/environments/<instance_id>/validate")
def validate_environment(instance_id: str) -> Any:
    iid = _instance_id(instance_id)
    actor = _actor()
    return _run_action(
        "validate", f"env:{iid}", lambda: actions.validate_env(services(), iid, actor)
    )


@bp.get("/health")
def health() -> str:
    svc = services()
    snapshot = health_snapshot(svc)
    return render_template(
        "admin/health.html",
        health=snapshot,
        audit=audit.recent(svc.db, 50),
        msg=request.args.get("msg", "")[:300],
        poll_ms=_poll_ms(),
    )


@bp.get("/live/health")
def health_live() -> dict[str, Any]:
    """The health page's facts as JSON (also for scripts), with the version it polls on."""
    snapshot = health_snapshot(services())
    return {"version": snapshot.version(), **asdict(snapshot)}


@bp.get("/health/live")
def health_fragment() -> str:
    return render_template("admin/_health_live.html", health=health_snapshot(services()))
