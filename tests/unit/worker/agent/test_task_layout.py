"""The user turn is laid out as Leaf's SWE-bench Verified instructions: Harbor's SWE-bench
adapter template (see worker/agent/prompt.py and worker/agent/README.md for where it was
read), filled with the issue as SWE-bench's problem statement."""

from __future__ import annotations

import hashlib

from worker.agent.prompt import (
    HARBOR_SWEBENCH_TEMPLATE,
    AgentTask,
    IssueComment,
    initial_messages,
    render_user_message,
)

# The template, written out: a change to it must be deliberate.
HARBOR_TEXT = (
    "# Task\n\n{problem_statement}\n\n---\n\n**Repo:** `{repo}`\n**Version:** `{version}`\n"
    "**Base commit:** `{base_commit}`\n**Instance ID:** `{instance_id}`\n"
)
HARBOR_SHA256 = "9c58c7b35d4f3e1818687509dd45edda42f2f648b8139db8de6fa7c341523437"


def test_template_is_harbors_swebench_instruction() -> None:
    assert HARBOR_SWEBENCH_TEMPLATE == HARBOR_TEXT
    assert hashlib.sha256(HARBOR_TEXT.encode()).hexdigest() == HARBOR_SHA256


def test_a_job_fills_every_line_as_a_swebench_task() -> None:
    task = AgentTask(
        title="add() subtracts",
        body="`add(2, 3)` returns -1.\r\n\nIt should be 5.\n",
        repo="acme/calc",
        number=7,
        base_commit="0123abcd" * 5,
        version="v1.2",
    )
    expected = HARBOR_SWEBENCH_TEMPLATE.format(
        problem_statement="add() subtracts\n`add(2, 3)` returns -1.\r\n\nIt should be 5.",
        repo="acme/calc",
        version="v1.2",
        base_commit="0123abcd" * 5,
        instance_id="acme__calc-7",
    )
    assert render_user_message(task) == expected
    assert initial_messages(task)[1] == {"role": "user", "content": expected}


def test_writers_comments_sit_in_the_problem_statement_above_the_footer() -> None:
    task = AgentTask(
        title="t",
        body="b",
        comments=(IssueComment("maya", "  Look at calc.py.  "),),
        repo="acme/tools/widgets",  # a GitLab subgroup
        number=3,
    )
    assert render_user_message(task) == (
        "# Task\n\nt\nb\n\nComment by @maya:\nLook at calc.py.\n\n---\n\n"
        "**Repo:** `acme/tools/widgets`\n**Instance ID:** `acme__tools__widgets-3`\n"
    )


def test_an_indented_issue_is_dedented_as_harbor_does() -> None:
    task = AgentTask(title="    t  ", body="    b\n      c\n\n")
    assert render_user_message(task) == "# Task\n\nt  \nb\n  c\n"
