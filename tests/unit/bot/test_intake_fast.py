"""The fast intake path: one short transaction per webhook, the answer before the broker.

A webhook's own work is one transaction of three statements (read what admission needs,
insert the job, insert the delivery); the job goes to the broker afterwards from the
background sender, and a job the sender cannot send stays for the sweep.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from typing import Any

from sqlalchemy import event, text

from bot.queue import BackgroundSender, prepare_broker
from bot.store.tables import Job
from tests.support import GITHUB_SECRET, github_headers, load_payload


def labeled(number: int = 1) -> dict[str, Any]:
    payload = load_payload("github", "issues.labeled")
    payload["label"]["name"] = "ribbit"
    payload["issue"]["number"] = number
    return payload


def test_labelled_issue_is_three_statements_in_one_transaction(
    app: Any, post_github: Any, store: Any
) -> None:
    post_github(labeled(1), "issues", "warm")  # the pool's first connection sets pragmas
    statements: list[str] = []
    commits: list[None] = []

    def record(_conn: Any, _cur: Any, statement: str, *_args: Any) -> None:
        if not statement.lstrip().upper().startswith(("PRAGMA", "BEGIN")):
            statements.append(statement.split()[0].upper())

    engine = store.db.engine
    event.listen(engine, "before_cursor_execute", record)
    event.listen(engine, "commit", lambda _conn: commits.append(None))
    try:
        resp = post_github(labeled(2), "issues", "d-2")
    finally:
        event.remove(engine, "before_cursor_execute", record)
    assert resp.get_json()["status"] == "accepted"
    # The intake transaction; then the sender's one (marking the job sent).
    assert statements[:3] == ["SELECT", "INSERT", "INSERT"], statements
    assert statements[3:] == ["UPDATE"], statements
    assert len(commits) == 2


class GatedDispatcher:
    """Sends only once the gate opens: a broker that is slow to answer."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.sent: list[str] = []

    def dispatch(self, job: Job) -> None:
        if not self.gate.wait(30):
            raise TimeoutError("the webhook's answer waited for the broker")
        self.sent.append(job.id)


def test_the_answer_does_not_wait_for_the_broker(settings: Any) -> None:
    from bot.web import create_app

    dispatcher = GatedDispatcher()
    app = create_app(settings, dispatcher=dispatcher)
    svc = app.extensions["ribbit"]
    try:
        body = json.dumps(labeled()).encode()
        resp = app.test_client().post(
            "/webhooks/github", data=body, headers=github_headers(body, "issues", "slow-1")
        )
        assert resp.status_code == 202
        job_id = resp.get_json()["job_id"]
        # Answered, committed, and not sent yet: the broker has not answered.
        assert dispatcher.sent == [] and not svc.store.get(job_id).dispatched
        dispatcher.gate.set()
        svc.intake.flush()
        assert dispatcher.sent == [job_id] and svc.store.get(job_id).dispatched
    finally:
        dispatcher.gate.set()
        svc.close()


def _job(n: int) -> Job:
    return Job(id=f"job-{n}", kind="solve", state="queued", held=False, dispatch_seq=1)


def test_sender_never_blocks_and_leaves_what_it_cannot_hold_to_the_sweep() -> None:
    entered, release = threading.Event(), threading.Event()
    sent: list[list[str]] = []

    def send(jobs: Any) -> None:
        entered.set()
        assert release.wait(30)
        sent.append([j.id for j in jobs])

    sender = BackgroundSender(send, backlog=1)
    try:
        sender.submit([_job(1)])
        assert entered.wait(30)  # job-1 is being sent; the backlog is empty
        sender.submit([_job(2), _job(3)])  # job-2 waits; job-3 finds the backlog full
        release.set()
        sender.flush()
        assert sent == [["job-1"], ["job-2"]]
    finally:
        release.set()
        sender.close()


def test_sender_survives_a_send_that_fails() -> None:
    calls: list[list[str]] = []

    def send(jobs: Any) -> None:
        calls.append([j.id for j in jobs])
        if len(calls) == 1:
            raise OSError("store unavailable")

    sender = BackgroundSender(send)
    try:
        sender.submit([_job(1)])
        sender.flush()
        sender.submit([_job(2)])
        sender.flush()
        assert calls == [["job-1"], ["job-2"]]
    finally:
        sender.close()


def test_sender_lingers_to_send_jobs_that_arrive_close_together_as_one_batch() -> None:
    sent: list[list[str]] = []
    sender = BackgroundSender(lambda jobs: sent.append([j.id for j in jobs]), linger_s=30)
    try:
        sender.submit([_job(1)])
        sender.submit([_job(2)])  # within the linger: the same batch
        started = time.monotonic()
        sender.flush()  # sends at once, without waiting out the linger
        assert time.monotonic() - started < 10
        assert sent == [["job-1", "job-2"]]
    finally:
        sender.close()


def test_sender_close_cuts_the_linger_short() -> None:
    sent: list[str] = []
    sender = BackgroundSender(lambda jobs: sent.extend(j.id for j in jobs), linger_s=30)
    sender.submit([_job(1)])
    started = time.monotonic()
    sender.close(timeout=20)
    assert time.monotonic() - started < 10
    assert sent == ["job-1"]


def test_sender_close_sends_what_is_queued_and_stops() -> None:
    sent: list[str] = []
    sender = BackgroundSender(lambda jobs: sent.extend(j.id for j in jobs))
    sender.submit([_job(1), _job(2)])
    sender.close()
    assert sent == ["job-1", "job-2"]
    sender.flush()  # no thread: returns at once


def test_sqlite_store_is_wal_with_synchronous_normal(store: Any) -> None:
    with store.db.session() as session:
        assert session.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        assert session.execute(text("PRAGMA synchronous")).scalar() == 1  # NORMAL


def test_embedded_broker_file_is_wal(settings: Any) -> None:
    prepare_broker(settings)
    conn = sqlite3.connect(settings.data_dir / "broker.db")
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    finally:
        conn.close()


def test_daily_budget_count_reads_only_todays_jobs_by_index(store: Any) -> None:
    """Every labelled webhook counts its repository's agent jobs since midnight: by the
    (forge, repo, created_at) index, not by reading every job the repository ever had."""
    from datetime import UTC, datetime

    from bot.store.jobs import _INTAKE_VIEW

    params = dict(forge="github", repo="o/r", issue=1, day=datetime.now(UTC))
    with store.db.session() as session:
        conn = session.connection()
        compiled = _INTAKE_VIEW.compile(dialect=conn.dialect)
        args = compiled.construct_params(params)
        plan = conn.exec_driver_sql(
            "EXPLAIN QUERY PLAN " + str(compiled),
            tuple(args[name] for name in compiled.positiontup or ()),
        ).all()
    details = [row[-1] for row in plan]
    assert any(
        "ix_jobs_repo_created" in d and "created_at>?" in d.replace(" ", "") for d in details
    ), details


def test_serve_freezes_what_start_up_built_before_serving(tmp_path: Any, monkeypatch: Any) -> None:
    """Start-up's objects live as long as the web process; frozen, a full collection no
    longer walks them while every web thread waits."""
    import gc
    import signal

    from click.testing import CliRunner

    from bot import logs
    from bot.cli import main
    from bot.web import serving

    frozen_at_run: list[int] = []

    class Server:
        url = "http://127.0.0.1:0"

        def run(self) -> None:
            frozen_at_run.append(gc.get_freeze_count())

        def stop(self) -> None:
            pass

    monkeypatch.setenv("RIBBIT_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("RIBBIT_GITHUB__WEBHOOK_SECRET", GITHUB_SECRET)
    monkeypatch.setattr(serving.DrainingServer, "create", lambda *_a, **_k: Server())
    monkeypatch.setattr(logs, "configure_logging", lambda _settings: None)
    sigterm = signal.getsignal(signal.SIGTERM)  # serve installs its own
    gc.unfreeze()
    try:
        result = CliRunner().invoke(main, ["serve", "--no-worker"])
    finally:
        gc.unfreeze()
        signal.signal(signal.SIGTERM, sigterm)
    assert result.exit_code == 0, result.output
    assert frozen_at_run and frozen_at_run[0] > 10_000
