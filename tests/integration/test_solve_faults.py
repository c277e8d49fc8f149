"""Faults in the publish steps of solve, through the real parts (the local forge over HTTP
with its fault injection, real git, a real Celery worker on Redis, the real sandbox and
gates): the job ends with exactly one draft PR, one branch and one status comment, and
a rerun resumes from the pushed branch instead of running the agent again."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from datetime import UTC, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update

from bot.store.tables import Job, utcnow
from tests.plugins.e2e import GOOD_SCRIPT, bot_comments, label_issue, new_repo, wait_for
from tests.plugins.forge import settings_for
from worker.jobs import STALE_AFTER
from worker.maintenance import Swept, sweep

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.integration

PR_CREATE = {"github": r"/repos/acme/calc/pulls$", "gitlab": r"/merge_requests$"}
PUSH = {"github": r"/git/github/acme/calc\.git/git-receive-pack$"}


def _sweep_when_due(dep: Any) -> dict[str, int]:
    """Beat's sweep, called directly, after the deferral's wait is declared over."""
    from bot.runtime import Runtime

    runtime = Runtime.open(dep.settings)
    try:
        with runtime.db.session() as s:
            s.execute(update(Job).where(Job.state == "queued").values(not_before=utcnow()))
        return sweep(runtime)
    finally:
        runtime.db.dispose()


@pytest.mark.parametrize(
    ("kind", "step"),
    [
        ("github", "pull_request"),
        ("gitlab", "pull_request"),
        ("github", "push"),
        ("github", "rate_limit"),
        ("gitlab", "rate_limit"),
    ],
)
def test_forge_outage_in_publish_resumes_without_rerunning_the_agent(
    kind: str, step: str, forge_world: Any, deployment_for: Any
) -> None:
    forge = forge_world.forge
    dep = deployment_for(GOOD_SCRIPT)
    repo = new_repo(forge_world, kind)
    if step == "rate_limit":  # GitHub's primary limit (403 + reset) or GitLab's 429
        outage = forge.rate_limit_next(kind, PR_CREATE[kind], wait_s=3600, count=10_000)
        outage.method = "POST"  # creating the PR, not looking for it
    else:
        path = PR_CREATE[kind] if step == "pull_request" else PUSH[kind]
        outage = forge.fail_next(path, count=10_000, status=502, method="POST")
    number = label_issue(forge_world, kind, repo)
    [job] = dep.store.list()
    deferred = wait_for(
        lambda: (j := dep.store.get(job.id)).state == "queued" and j.attempts == 1 and j,
        what="the deferral",
    )
    assert "deferred" in deferred.failure_reason
    if step == "rate_limit":  # the forge's own wait is honoured, not a fixed one
        when = deferred.not_before
        assert when is not None
        when = when if when.tzinfo else when.replace(tzinfo=UTC)
        assert when - utcnow() > timedelta(minutes=30)
    assert deferred.result["publish"]["branch"].startswith(f"ribbit/issue-{number}-")
    assert forge.pulls(kind, repo) == []
    outage.count = 0  # the forge is back

    assert _sweep_when_due(dep).dispatched == 1
    done = wait_for(
        lambda: (j := dep.store.get(job.id)).state in {"succeeded", "failed"} and j,
        what="job end",
    )
    assert done.state == "succeeded", done.failure_reason
    assert done.attempts == 2
    assert "agent" not in done.result["timings"]  # resumed: the agent ran once
    [pr] = forge.pulls(kind, repo)
    bot_branches = [b for b in forge.branches(kind, repo) if b.startswith("ribbit/")]
    assert bot_branches == [pr.head]  # no orphan branch
    assert forge.branches(kind, repo)[pr.head] == pr.head_sha == done.result["head_sha"]
    assert f"Fixes #{number}" in pr.body
    [status] = bot_comments(forge_world, kind, repo, number)
    assert "Draft pull request opened" in status.body
    assert _sweep_when_due(dep).dispatched == 0


KILLABLE_WORKER = """
import pickle, sys
import worker.pipelines  # noqa: F401
from worker.celery_app import create_celery
with open(sys.argv[1], "rb") as f:
    settings = pickle.load(f)
create_celery(settings).worker_main(
    ["worker", "--pool", "solo", "--loglevel", "INFO", "--without-mingle", "--without-gossip"]
)
"""


def test_worker_killed_between_push_and_pr_resumes_from_the_pushed_branch(
    forge_world: Any, tmp_path: Path, redis_url: str, sandbox_backend: str
) -> None:
    """A real worker process is SIGKILLed while its PR request is parked at the forge's door
    (after the push): the sweep requeues the job, and the next worker opens exactly one PR
    from the branch the first one pushed, without running the agent again."""
    import pickle

    from bot.queue import JobQueue
    from bot.runtime import Runtime
    from bot.store.jobs import JobSpec
    from tests.plugins.e2e import record

    forge = forge_world.forge
    base = settings_for(
        forge, tmp_path / "data", github_token=forge_world.bot.token, gitlab_token=None
    )
    replay = record(GOOD_SCRIPT, tmp_path / "replay.jsonl", tmp_path)
    redis_db = redis_url.rsplit("/", 1)[0] + "/12"
    settings = base.model_copy(
        update={
            "broker_url": redis_db,
            "model": base.model.model_copy(update={"policy": "replay", "replay_file": replay}),
            "sandbox": base.sandbox.model_copy(update={"backend": sandbox_backend}),
        }
    )
    import redis

    redis.Redis.from_url(redis_db).flushdb()
    pickled = tmp_path / "settings.pickle"
    pickled.write_bytes(pickle.dumps(settings))
    log = tmp_path / "worker.log"
    procs: list[subprocess.Popen[bytes]] = []

    def start_worker() -> subprocess.Popen[bytes]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("RIBBIT_")}
        env["PYTHONPATH"] = str(REPO)
        with log.open("ab") as out:
            proc = subprocess.Popen(
                [sys.executable, "-c", KILLABLE_WORKER, str(pickled)],
                cwd=REPO,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        procs.append(proc)
        return proc

    runtime = Runtime.open(settings)
    try:
        repo = new_repo(forge_world, "github")
        issue = forge.create_issue("github", repo, title="add() subtracts", author="maya")
        parked = forge.fail_next(PR_CREATE["github"], status=503, method="POST", hold=True)
        with runtime.db.session() as s:
            job = runtime.store.create(
                s,
                JobSpec(
                    kind="solve",
                    forge="github",
                    repo=repo,
                    issue_number=issue.number,
                    actor="maya",
                ),
            )
            assert job is not None
        JobQueue.to_celery(settings, runtime.store).send([job])
        first = start_worker()
        assert parked.reached.wait(timeout=300), log.read_text()[-3000:]
        os.killpg(first.pid, signal.SIGKILL)  # between the push and the PR
        first.wait(timeout=30)
        assert parked.release is not None
        parked.release.set()

        [branch] = [b for b in forge.branches("github", repo) if b.startswith("ribbit/")]
        assert forge.pulls("github", repo) == []
        assert runtime.store.get(job.id).state == "running"
        with runtime.db.session() as s:  # its heartbeat stopped with it
            s.execute(
                update(Job).where(Job.id == job.id).values(updated_at=utcnow() - STALE_AFTER * 3)
            )
        assert sweep(runtime) == Swept(requeued=1, failed=0, dispatched=1)
        start_worker()
        done = wait_for(
            lambda: (j := runtime.store.get(job.id)).state in {"succeeded", "failed"} and j,
            what="the resumed job",
        )
        assert done.state == "succeeded", (done.failure_reason, log.read_text()[-3000:])
        assert done.attempts == 2 and "agent" not in done.result["timings"]
        [pr] = forge.pulls("github", repo)
        assert pr.head == branch
        assert [b for b in forge.branches("github", repo) if b.startswith("ribbit/")] == [branch]
        [status] = bot_comments(forge_world, "github", repo, issue.number)
        assert "Draft pull request opened" in status.body
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
        runtime.db.dispose()
