"""Reviewers drive the bot from its draft PR, through the real deployment (see
tests/plugins/e2e.py): revisions land as new commits on the same branch, `/ribbit stop`
kills a running job, outsiders and the bot itself are not obeyed, and every PR ends with
an outcome record."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.plugins.e2e import (
    GOOD_SCRIPT,
    bot_comments,
    label_issue,
    new_repo,
    wait_for,
    xml_call,
)
from tests.plugins.forge import BOT_LOGIN

pytestmark = pytest.mark.integration

REVISE_SCRIPT = [
    xml_call(
        "Edit",
        file_path="calc.py",
        old_string="def add(a, b):\n",
        new_string='def add(a, b):\n    """Return the sum of a and b."""\n',
    ),
    "Added the docstring the reviewer asked for.",
]
# The marker must be in a running process's command line for pgrep to see it: the tool
# call's text reaches the runner through a request file, as in a Leaf pod (never argv),
# so a shell named by the marker ($0) runs the sleep (two commands: no exec of sleep).
# Slow only where the deployment's sandbox runs it (its workspace is /workspace): record()
# runs the script once on a host copy first, which need not wait the 120 s out (it did:
# two minutes of each test using it).
SLOW_SCRIPT = [
    xml_call(
        "Bash",
        command="bash -c 'case $PWD in /workspace*) sleep 120;; esac; true' ribbit-slow-step",
    ),
    "done",
]


def _solved(forge_world: Any, dep: Any, kind: str) -> tuple[str, int, Any]:
    repo = new_repo(forge_world, kind)
    number = label_issue(forge_world, kind, repo)
    [job] = dep.store.list()
    wait_for(lambda: dep.store.get(job.id).state in {"succeeded", "failed"}, what="solve")
    assert dep.store.get(job.id).state == "succeeded", dep.store.get(job.id).failure_reason
    [pr] = forge_world.forge.pulls(kind, repo)
    return repo, number, pr


def _human_push(forge_world: Any, kind: str, repo: str, branch: str, tmp_path: Path) -> str:
    """A reviewer pushes their own commit to the bot's branch (straight into the bare repo)."""
    bare = forge_world.forge.repo(kind, repo).bare
    work = tmp_path / "human"
    env = {
        "GIT_AUTHOR_NAME": "Maya",
        "GIT_AUTHOR_EMAIL": "maya@example.com",
        "GIT_COMMITTER_NAME": "Maya",
        "GIT_COMMITTER_EMAIL": "maya@example.com",
        "PATH": "/usr/bin:/bin",
        "GIT_CONFIG_GLOBAL": "/dev/null",
    }

    def run(*args: str, cwd: Path | None = None) -> str:
        out = subprocess.run(
            ["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True
        )
        return out.stdout.strip()

    run("clone", "-q", "-b", branch, str(bare), str(work))
    (work / "NOTES.md").write_text("reviewer notes\n")
    run("add", "NOTES.md", cwd=work)
    run("commit", "-q", "-m", "reviewer: add notes", cwd=work)
    run("push", "-q", "origin", branch, cwd=work)
    return run("rev-parse", "HEAD", cwd=work)


@pytest.mark.parametrize("kind", ["github", "gitlab"])
def test_revision_is_a_new_commit_on_the_same_branch_over_human_commits(
    kind: str, forge_world: Any, deployment_for: Any, tmp_path: Path
) -> None:
    dep = deployment_for(GOOD_SCRIPT)
    repo, number, pr = _solved(forge_world, dep, kind)
    first_head = pr.head_sha
    human_sha = _human_push(forge_world, kind, repo, pr.head, tmp_path)
    dep.close()
    dep = deployment_for(REVISE_SCRIPT)  # the reviewer's turn; a new model run
    if kind == "github":
        _, delivery = forge_world.forge.submit_review(
            kind,
            repo,
            pr.number,
            author="maya",
            state="CHANGES_REQUESTED",
            body="Please document add().",
            comments=(("calc.py", 1, "needs a docstring"),),
        )
    else:
        _, delivery = forge_world.forge.comment_on_pull_as(
            kind, repo, pr.number, author="maya", body="/ribbit revise document add()"
        )
    assert delivery is not None and delivery.status_code == 202, delivery
    revise = wait_for(
        lambda: next((j for j in dep.store.list() if j.kind == "revise"), None), what="revise job"
    )
    revise = wait_for(
        lambda: (j := dep.store.get(revise.id)).state in {"succeeded", "failed"} and j,
        what="revise end",
    )
    assert revise.state == "succeeded", revise.failure_reason
    [after] = forge_world.forge.pulls(kind, repo)  # still one PR
    assert after.number == pr.number and after.head == pr.head
    # The revision's own diff (a docstring, judged on the PR's head) shows no fix: not
    # verified (issue #31; it said "passed" before the verdict had levels).
    assert f"job: `{revise.id}`" in after.body and "Ribbit gates: not verified" in after.body
    head = forge_world.forge.branches(kind, repo)[pr.head]
    bare = forge_world.forge.repo(kind, repo).bare
    log = subprocess.run(
        ["git", "log", "--format=%H %an", head],
        cwd=bare,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.splitlines()
    shas = [line.split()[0] for line in log]
    assert head != human_sha and human_sha in shas and first_head in shas  # on top, no force
    assert log[0].endswith("Ribbit")
    shown = subprocess.run(
        ["git", "show", f"{head}:calc.py"], cwd=bare, check=True, capture_output=True, text=True
    ).stdout
    assert "Return the sum of a and b." in shown and "return a + b" in shown
    statuses = [st for st in forge_world.forge.repo(kind, repo).statuses if st.sha == head]
    assert statuses and statuses[-1].state in ("failure", "failed")  # never success: unverified
    if kind == "github":
        # The review's text and its line comment reached the agent's prompt.
        prompt = revise.result and Path(revise.result["trajectory_path"]).read_text()
        assert "needs a docstring" in prompt and "Please document add()" in prompt
    [status] = bot_comments(forge_world, kind, repo, number)
    assert "Draft PR updated" in status.body


def test_stop_kills_a_running_job_and_outsiders_are_refused(
    forge_world: Any, deployment_for: Any
) -> None:
    dep = deployment_for(SLOW_SCRIPT)
    repo = new_repo(forge_world, "github")
    number = label_issue(forge_world, "github", repo)
    [job] = dep.store.list()
    wait_for(lambda: dep.store.get(job.id).stage == "agent", what="agent running")
    wait_for(
        lambda: (
            subprocess.run(["pgrep", "-f", "ribbit-slow-step"], capture_output=True).returncode == 0
        ),
        what="sleep started",
    )
    # An outsider's stop (GitHub marks otto as no collaborator) is dropped at the door: no
    # job, no reply; the job keeps running.
    _, outsider = forge_world.forge.comment_as(
        "github", repo, number, author="otto", body="/ribbit stop"
    )
    assert outsider is not None and outsider.status_code == 202
    assert "otto is not a collaborator" in outsider.response_text
    assert [j.kind for j in dep.store.list()] == ["solve"]
    assert dep.store.get(job.id).state == "running"
    # The bot's own command is ignored at the door.
    _, own = forge_world.forge.comment_as(
        "github", repo, number, author=BOT_LOGIN, body="/ribbit stop"
    )
    assert own is not None and own.status_code == 202 and "bot itself" in own.response_text
    # A maintainer's stop cancels it and kills the sandboxed command.
    forge_world.forge.comment_as("github", repo, number, author="maya", body="/ribbit stop")
    wait_for(lambda: dep.store.get(job.id).state == "cancelled", timeout=60, what="cancel")
    assert "stopped by maya" in dep.store.get(job.id).failure_reason
    wait_for(
        lambda: (
            subprocess.run(["pgrep", "-f", "ribbit-slow-step"], capture_output=True).returncode == 1
        ),
        timeout=30,
        what="sandboxed command killed",
    )
    assert forge_world.forge.pulls("github", repo) == []
    status = wait_for(
        lambda: next(
            (c for c in bot_comments(forge_world, "github", repo, number) if "Cancelled" in c.body),
            None,
        ),
        what="status comment",
    )
    assert "stopped by maya" in status.body
    texts = [c.body for c in bot_comments(forge_world, "github", repo, number)]
    assert not any("otto" in t for t in texts)
    assert any("Stopped job" in t for t in texts)


@pytest.mark.parametrize("how", ["merge", "close"])
def test_merge_and_close_webhooks_record_outcomes(
    how: str, forge_world: Any, deployment_for: Any, tmp_path: Path
) -> None:
    from bot.settings import load_settings  # noqa: F401  (settings come from the deployment)
    from bot.store.tables import Outcome

    dep = deployment_for(GOOD_SCRIPT)
    repo, _number, pr = _solved(forge_world, dep, "github")
    if how == "merge":
        # A reviewer edits the patch before merging: the outcome says how much.
        _human_push(forge_world, "github", repo, pr.head, tmp_path)
        delivery = forge_world.forge.merge_pull_request("github", repo, pr.number, actor="maya")
    else:
        delivery = forge_world.forge.close_pull_request("github", repo, pr.number, actor="maya")
    assert delivery is not None and delivery.status_code == 202
    outcome_job = wait_for(
        lambda: next(
            (
                j
                for j in dep.store.list()
                if j.kind == "outcome" and j.state in {"succeeded", "failed"}
            ),
            None,
        ),
        what="outcome job",
    )
    assert outcome_job.state == "succeeded", outcome_job.failure_reason
    with dep.store.db.session() as s:
        [outcome] = s.query(Outcome).all()
        assert outcome.pr_number == pr.number and outcome.job_id is not None
        if how == "merge":
            assert (outcome.state, outcome.actor) == ("merged", "maya")
            assert outcome.time_to_merge_s is not None and outcome.time_to_merge_s >= 0
            # The merged diff has the reviewer's extra file: similar, not identical.
            assert outcome.diff_similarity is not None and 0 < outcome.diff_similarity < 1
            assert "NOTES.md" in (outcome.merged_diff or "")
        else:
            assert outcome.state == "closed" and outcome.diff_similarity is None


def test_human_fix_for_an_issue_the_bot_failed_is_recorded(
    forge_world: Any, deployment_for: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    from click.testing import CliRunner

    from bot.cli import main
    from tests.plugins.e2e import INSECURE_SCRIPT

    dep = deployment_for(INSECURE_SCRIPT)
    repo = new_repo(forge_world, "github")
    number = label_issue(forge_world, "github", repo)
    [job] = dep.store.list()
    wait_for(lambda: dep.store.get(job.id).state == "failed", what="gates refusal")
    # A human writes the fix on their own branch and opens a PR that closes the issue.
    bare = forge_world.forge.repo("github", repo).bare
    work = tmp_path / "fix"
    env = {
        "GIT_AUTHOR_NAME": "Maya",
        "GIT_AUTHOR_EMAIL": "m@example.com",
        "PATH": "/usr/bin",
        "GIT_COMMITTER_NAME": "Maya",
        "GIT_COMMITTER_EMAIL": "m@example.com",
        "GIT_CONFIG_GLOBAL": "/dev/null",
    }
    for args in (["clone", "-q", str(bare), str(work)], ["checkout", "-q", "-b", "maya/fix"]):
        subprocess.run(
            ["git", *args],
            cwd=work if args[0] != "clone" else None,
            env=env,
            check=True,
            capture_output=True,
        )
    (work / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    for args in (["commit", "-qam", "fix add"], ["push", "-q", "origin", "maya/fix"]):
        subprocess.run(["git", *args], cwd=work, env=env, check=True, capture_output=True)
    repo_rec = forge_world.forge.repo("github", repo)
    pr = forge_world.forge.add_pull_record(
        repo_rec, "maya", "Fix add", f"Fixes #{number}", "maya/fix", "main", draft=False
    )
    delivery = forge_world.forge.merge_pull_request("github", repo, pr.number, actor="maya")
    assert delivery is not None and delivery.status_code == 202, delivery.response_text
    wait_for(
        lambda: any(j.kind == "outcome" and j.state == "succeeded" for j in dep.store.list()),
        what="human outcome",
    )
    monkeypatch.setenv("RIBBIT_DATA_DIR", str(dep.settings.data_dir))
    out = CliRunner().invoke(main, ["outcomes", "--json"])
    assert out.exit_code == 0, out.output
    [row] = json.loads(out.output)
    assert (row["pr"], row["issue"], row["human_authored"], row["state"]) == (
        pr.number,
        number,
        True,
        "merged",
    )
    assert "+    return a + b" in row["merged_diff"]
    export = tmp_path / "outcomes.jsonl"
    assert CliRunner().invoke(main, ["outcomes", "--export", str(export)]).exit_code == 0
    assert json.loads(export.read_text().splitlines()[0])["pr"] == pr.number


def test_retry_after_a_pr_starts_over_beside_it(forge_world: Any, deployment_for: Any) -> None:
    dep = deployment_for(GOOD_SCRIPT)
    repo, number, first = _solved(forge_world, dep, "github")
    _, delivery = forge_world.forge.comment_as(
        "github", repo, number, author="maya", body="/ribbit retry"
    )
    assert delivery is not None and delivery.status_code == 202
    wait_for(
        lambda: (
            len([j for j in dep.store.list() if j.kind == "solve" and j.state == "succeeded"]) == 2
        ),
        what="second solve",
    )
    pulls = forge_world.forge.pulls("github", repo)
    assert len(pulls) == 2
    second = next(p for p in pulls if p.number != first.number)
    assert second.head.startswith(first.head + "-")
    # The first PR's branch was not force-pushed.
    assert forge_world.forge.branches("github", repo)[first.head] == first.head_sha
    [status] = bot_comments(forge_world, "github", repo, number)  # still one status comment
    second_job = next(j for j in dep.store.list() if j.pr_number == second.number)
    assert second_job.pr_url and second_job.pr_url in status.body


def test_a_waiting_job_shows_its_queue_position(forge_world: Any, deployment_for: Any) -> None:
    dep = deployment_for(SLOW_SCRIPT)  # one agent job per repository at a time (default)
    repo = new_repo(forge_world, "github")
    first = label_issue(forge_world, "github", repo)
    [running] = dep.store.list()
    wait_for(lambda: dep.store.get(running.id).stage == "agent", what="first job running")
    second = label_issue(forge_world, "github", repo)
    status = wait_for(
        lambda: next(iter(bot_comments(forge_world, "github", repo, second)), None),
        what="queued status",
    )
    assert "Queued" in status.body and "next in line" in status.body
    waiting = next(j for j in dep.store.list() if j.issue_number == second)
    assert dep.store.get(waiting.id).state == "queued"
    for number in (first, second):  # clean up: stop both
        forge_world.forge.comment_as("github", repo, number, author="maya", body="/ribbit stop")
    wait_for(
        lambda: all(j.state == "cancelled" for j in dep.store.list() if j.kind == "solve"),
        timeout=90,
        what="both stopped",
    )
