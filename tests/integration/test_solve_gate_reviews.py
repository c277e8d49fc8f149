"""End to end on both forges: a patch whose new test fails goes out as a draft (the
repo asks for ``gates.draft_on_failure``), and the failing test is shown on the line
that defines it: a GitHub check run annotation, a GitLab MR discussion."""

from __future__ import annotations

from typing import Any

import pytest

from bot.forges.base import ForgeName
from tests.plugins.e2e import REPO_FILES, label_issue, wait_for, xml_call
from tests.plugins.forge import BOT_LOGIN

pytestmark = pytest.mark.integration

FAILING_TEST_SCRIPT = [
    xml_call("Edit", file_path="calc.py", old_string="return a - b", new_string="return a + b"),
    xml_call(
        "Write",
        file_path="tests/test_add.py",
        content="from calc import add\n\n\ndef test_add_two_numbers():\n"
        "    assert add(2, 3) == 6\n",
    ),
    "Fixed add() and added a test.",
]


@pytest.mark.parametrize("kind", ["github", "gitlab"])
def test_failing_test_is_shown_on_its_line_of_the_draft(
    kind: ForgeName, forge_world: Any, deployment_for: Any
) -> None:
    dep = deployment_for(FAILING_TEST_SCRIPT)
    repo = "acme/drafty" if kind == "github" else "acme/tools/drafty"
    files = dict(REPO_FILES)
    files[".ribbit.yml"] += "gates: {draft_on_failure: true}\n"
    forge_world.forge.create_repo(kind, repo, files=files)
    forge_world.forge.add_collaborator(kind, repo, BOT_LOGIN, "write")
    forge_world.forge.add_collaborator(kind, repo, "maya", "maintain")
    label_issue(forge_world, kind, repo)
    [job] = dep.store.list()
    job = wait_for(
        lambda: (j := dep.store.get(job.id)).state in {"succeeded", "failed"} and j,
        what="job end",
    )
    assert job.result["gates"]["passed"] is False
    [pr] = forge_world.forge.pulls(kind, repo)
    state = forge_world.forge.repo(kind, repo)
    assert state.statuses[-1].state in {"failure", "failed"}
    if kind == "github":
        [run] = state.check_runs
        assert (run.head_sha, run.conclusion) == (pr.head_sha, "failure")
        assert run.external_id == f"ribbit-{job.id}-{pr.head_sha}"
        notes = [(a.path, a.start_line, a.title) for a in run.annotations]
        assert ("tests/test_add.py", 4, "tests: test-fails") in notes, notes
    else:
        placed = [
            (d.position["new_path"], d.position["new_line"])
            for d in pr.discussions
            if d.position is not None and "tests: test-fails" in d.note.body
        ]
        assert placed == [("tests/test_add.py", 4)], [d.note.body for d in pr.discussions]
