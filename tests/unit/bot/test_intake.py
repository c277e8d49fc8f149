"""bot/web/intake.py below Flask: a delivery's payload in, an IntakeResult and stored jobs out.

Through ``Intake.handle`` only (the sans-IO core the webhook blueprint calls), with real
payloads, a real migrated database and a recording dispatcher in place of the broker. What
each handler decides is tested in tests/unit/bot/handlers/; here, what intake adds around
them: the allow-list and confidentiality checks before any handler, the answer it
composes, the delivery record, the hand-off after commit, the visibility it records.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from bot.settings import Settings
from bot.store.db import Database
from bot.store.jobs import JobStore
from bot.web.intake import Intake, IntakeResult
from tests.fakes import RecordingDispatcher
from tests.support import HeldLead, load_payload

REPO = "Codertocat/Hello-World"  # the repository of the GitHub fixtures
ALLOW_LIST = "RIBBIT_ADMISSION__ALLOWED_REPOS"

MakeIntake = Callable[..., Intake]


@pytest.fixture
def make_intake(
    db: Database, settings: Settings, dispatcher: RecordingDispatcher
) -> Iterator[MakeIntake]:
    """An Intake over the test database; ``admission`` fields override the settings'."""
    made: list[Intake] = []

    def make(**admission: Any) -> Intake:
        merged = settings.admission.model_copy(update=admission)
        intake = Intake(settings.model_copy(update={"admission": merged}), JobStore(db), dispatcher)
        made.append(intake)
        return intake

    yield make
    for intake in made:
        intake.close()


@pytest.fixture
def intake(make_intake: MakeIntake) -> Intake:
    return make_intake()


def labeled(number: int = 1, label: str = "ribbit", private: bool = False) -> dict[str, Any]:
    payload = load_payload("github", "issues.labeled")
    payload["label"]["name"] = label
    payload["issue"]["number"] = number
    payload["repository"]["private"] = private
    return payload


def comment(body: str) -> dict[str, Any]:
    payload = load_payload("github", "issue_comment.created")
    payload["comment"]["body"] = body
    return payload


def test_accepted_job_is_stored_then_handed_to_the_broker(
    intake: Intake, dispatcher: RecordingDispatcher
) -> None:
    result = intake.handle("github", "issues", "d-1", labeled(1))
    assert (result.status, result.key, result.reason) == ("accepted", "issues.labeled", "")
    [job_id] = result.job_ids
    job = intake.store.get(job_id)
    assert (job.kind, job.repo, job.issue_number, job.delivery_id) == ("solve", REPO, 1, "d-1")
    intake.flush()
    assert dispatcher.sent == [job_id]
    assert result.to_json() == {"status": "accepted", "job_id": job_id, "job_ids": [job_id]}


def test_a_delivery_seen_before_is_a_duplicate_and_keeps_nothing(intake: Intake) -> None:
    first = intake.handle("github", "issues", "d-1", labeled(1))
    # Same id, another issue: had its decision been kept, issue 2 would have a job.
    again = intake.handle("github", "issues", "d-1", labeled(2))
    assert (again.status, again.reason, again.job_ids) == (
        "duplicate",
        "delivery already received",
        (),
    )
    # The same signed body under a new id is a replay.
    body = labeled(3)
    intake.handle("github", "issues", "d-3", body, body_sha256="ab" * 32)
    replay = intake.handle("github", "issues", "d-4", body, body_sha256="ab" * 32)
    assert replay.status == "duplicate"
    assert first.status == "accepted"
    assert sorted(j.issue_number or 0 for j in intake.store.list()) == [1, 3]


def test_deliveries_that_arrive_together_share_a_commit_and_keep_their_own_answers(
    intake: Intake, dispatcher: RecordingDispatcher
) -> None:
    """Webhooks queued behind a running intake transaction go in one transaction together
    (GroupCommit); each is decided as if alone, so a duplicate among them keeps nothing
    and the others their jobs."""
    lead = HeldLead(intake.commits)
    deliveries = [("d-1", 1), ("d-2", 2), ("d-1", 1), ("d-3", 3)]
    results: dict[int, IntakeResult] = {}

    def deliver(index: int, delivery: str, issue: int) -> None:
        results[index] = intake.handle("github", "issues", delivery, labeled(issue))

    threads = [
        threading.Thread(target=deliver, args=(i, d, n)) for i, (d, n) in enumerate(deliveries)
    ]
    for t in threads:
        t.start()
    lead.wait_queued(len(deliveries))
    lead.release()
    for t in threads:
        t.join(30)
    statuses = {i: r.status for i, r in results.items()}
    assert sorted((statuses[0], statuses[2])) == ["accepted", "duplicate"]
    assert (statuses[1], statuses[3]) == ("accepted", "accepted")
    jobs = intake.store.list()
    assert sorted(j.issue_number or 0 for j in jobs) == [1, 2, 3]
    intake.flush()
    assert sorted(dispatcher.sent) == sorted(j.id for j in jobs)


def test_event_no_handler_acts_on_is_ignored_with_the_normalisers_reason(intake: Intake) -> None:
    result = intake.handle("github", "star", "d-1", {"action": "created"})
    assert result.status == "ignored"
    assert "is not one Ribbit acts on" in result.reason
    assert intake.store.list() == []


def test_handler_ignore_and_refusal_become_the_answer(make_intake: MakeIntake) -> None:
    intake = make_intake(daily_jobs_per_repo=0)
    other = intake.handle("github", "issues", "d-1", labeled(1, label="bug"))
    assert (other.status, other.reason) == ("ignored", "label 'bug' is not the trigger label")
    spent = intake.handle("github", "issues", "d-2", labeled(1))
    assert spent.status == "refused"
    assert spent.reason.startswith(f"daily job budget of 0 for github:{REPO}")
    assert intake.store.list() == []


def test_allow_list_refuses_every_kind_before_any_handler(make_intake: MakeIntake) -> None:
    intake = make_intake(allowed_repos=["acme/allowed"])
    refused = f"repository github:{REPO} is not in {ALLOW_LIST}"
    for n, body in enumerate(["/ribbit help", "/ribbit explain", "/ribbit stop", "thanks"]):
        result = intake.handle("github", "issue_comment", f"c-{n}", comment(body))
        assert (result.status, result.reason) == ("refused", refused), body
    assert intake.handle("github", "issues", "l-1", labeled(1)).status == "refused"
    # The webhook's own ping is answered all the same.
    ping = intake.handle("github", "ping", "p-1", load_payload("github", "ping"))
    assert (ping.status, ping.reason) == ("ignored", "pong")
    assert intake.store.list() == []


def test_confidential_gitlab_issue_and_note_are_refused(intake: Intake) -> None:
    issue = load_payload("gitlab", "issue.update.labeled")
    issue["object_attributes"]["confidential"] = True
    result = intake.handle("gitlab", "Confidential Issue Hook", "g-1", issue)
    assert result.status == "refused" and result.reason.startswith("confidential issue")
    note = load_payload("gitlab", "note.issue")
    note["object_attributes"]["note"] = "/ribbit retry"
    note["issue"]["confidential"] = True
    assert intake.handle("gitlab", "Confidential Note Hook", "g-2", note).status == "refused"
    assert intake.store.list() == []
    # The same issue in the open is worked on.
    issue["object_attributes"]["confidential"] = False
    assert intake.handle("gitlab", "Issue Hook", "g-3", issue).status == "accepted"


def test_paused_job_is_accepted_held_and_not_sent(
    intake: Intake, dispatcher: RecordingDispatcher
) -> None:
    intake.store.pause()
    result = intake.handle("github", "issues", "d-1", labeled(1))
    [job_id] = result.job_ids
    assert (result.status, result.reason) == ("accepted", f"job {job_id} held: the bot is paused")
    intake.flush()
    assert dispatcher.sent == []


def test_visibility_is_recorded_with_a_job_and_only_then(intake: Intake) -> None:
    intake.handle("github", "issues", "d-1", labeled(1, label="bug", private=True))
    assert intake.store.visibility("github", REPO) is None  # nothing decided, nothing written
    intake.handle("github", "issues", "d-2", labeled(1, private=True))
    assert intake.store.visibility("github", REPO) is True
    intake.handle("github", "issues", "d-3", labeled(2, private=False))
    assert intake.store.visibility("github", REPO) is False
