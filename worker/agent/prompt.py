"""The prompt: Leaf's system message and one user message carrying the task text.

The training harness (Leaf, microsoft/FrogNano ``frognano/harness/leaf``) starts every
episode with exactly two messages (``agent.py`` @ 33de19f9): its ``SYSTEM_PROMPT``
(``tools.py`` @ 354fccee, reproduced byte for byte below) and a user message that is
the task's instruction text itself, with no wrapper. Tools reach the model through
the chat template (``tools=``), and each tool result comes back as
``{"role": "tool", "tool_call_id", "content"}``, with no ``name`` (Leaf never sends one).

The task text is laid out as Leaf's SWE-bench Verified instructions were. Leaf reads
them unchanged from Harbor task directories (``frognano/datasets/swebench_verified.py``
@ 354fccee: laude-institute/harbor-datasets @ 86723674, ``datasets/swebench-verified/
<task>/instruction.md``; ``harbor.py`` @ 33de19f9 reads the file as is; the runtime's
``get_task_instruction`` @ 354fccee returns it unchanged). Those files come from Harbor's
SWE-bench adapter: its ``instruction.md`` template (:data:`HARBOR_SWEBENCH_TEMPLATE`)
filled with ``dedent(problem_statement).strip()``, ending in a newline. The template file
itself is not readable here; its text is the one four public re-implementations agree on
byte for byte (see worker/agent/README.md, "The user turn"). SWE-bench's problem
statement is the issue's ``title + "\n" + body``.

Comments come only from people with write access (the caller filters with the one trust
rule, ``worker.pipelines.trusted_text``), each under its author, inside the problem
statement. An issue a non-writer opened and a writer took up carries a line after it
naming both (:class:`Vouched`); a writer's own issue keeps SWE-bench's layout.
Repository instructions and hints (setup and test commands) are appended there only
when the repository opts in (``prompt.include_repo_context`` in .ribbit.yml); a
revision's brief is always appended, since it is the task. The footer's lines carry what
SWE-bench's did: the repository, its version (the latest tag), the base commit and an
instance id (``owner__name-NUMBER``); a line whose value is unknown is left out.

Issue text is untrusted. Nothing in this module gives it any power: the loop's safety
rests on the sandbox (no network, no secrets, nothing to steal), not on the prompt.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from textwrap import dedent
from typing import Any

LEAF_PROMPT_COMMIT = "354fcceef266d88d528403981dc8b33666175594"  # tools.py: SYSTEM_PROMPT
SYSTEM_PROMPT = (
    "You are a software-engineering agent working in a checked-out repository.\n"
    "Use the available tools to inspect files, make focused edits, and run commands.\n"
    "Solve the task, validate when practical, then give a brief final answer."
)

# Harbor's SWE-bench adapter template (harbor-framework/adapters @ 04c86870
# src/swebench/src/swebench_adapter/task-template/instruction.md; earlier
# laude-institute/harbor adapters/swebench/template/instruction.md), which wrote the
# instruction.md of Leaf's SWE-bench Verified tasks (laude-institute/harbor-datasets @
# 86723674 datasets/swebench-verified/<task>/instruction.md). Neither file is readable
# from here; this text is the one four public re-implementations agree on (README).
HARBOR_SWEBENCH_TEMPLATE = (
    "# Task\n"
    "\n"
    "{problem_statement}\n"
    "\n"
    "---\n"
    "\n"
    "**Repo:** `{repo}`\n"
    "**Version:** `{version}`\n"
    "**Base commit:** `{base_commit}`\n"
    "**Instance ID:** `{instance_id}`\n"
)
HARBOR_DATASETS_COMMIT = "86723674f04e4209ac479d0fb75d9d9f44b4377e"  # swebench_verified.py


@dataclass(frozen=True)
class IssueComment:
    author: str
    body: str


@dataclass(frozen=True)
class Vouched:
    """An issue written by someone without write access, taken up by a writer (the one who
    labelled it or asked for a retry): the prompt names both."""

    author: str
    by: str


@dataclass(frozen=True)
class AgentTask:
    """What the agent is asked to do."""

    title: str
    body: str
    comments: tuple[IssueComment, ...] = ()  # already filtered to people with write access
    vouched: Vouched | None = None  # the issue's author has no write access; a writer does
    repo: str | None = None  # "owner/name": the footer's Repo line
    number: int | None = None  # the issue's number: the footer's Instance ID
    base_commit: str | None = None  # the commit the workspace starts from
    version: str | None = None  # the repository's latest tag at that commit
    test_command: str | None = None
    setup_command: str | None = None
    hints: tuple[str, ...] = ()  # other repo-config facts worth telling the model
    extra_instructions: str | None = None  # revisions: current diff + review comments
    repo_instructions: str | None = None  # AGENTS.md or .ribbit.yml agent.instructions
    include_repo_context: bool = False  # the repo opted in to instructions and hints
    metadata: dict[str, Any] = field(default_factory=dict)  # job id etc.; kept in the trajectory
    # The first user message exactly as a solve job gave it (TaskRecord.first_message):
    # a training rollout of an environment built from that job replays it, byte for byte,
    # instead of rendering it again from fields that lost what the job knew.
    first_message: str | None = None


def render_user_message(task: AgentTask) -> str:
    """The task text: the one function that makes the first user message of a solve job,
    ``ribbit run`` and a training rollout alike (a replayed job's text is returned as is)."""
    if task.first_message is not None:
        return task.first_message
    statement = problem_statement(task)
    footer = [
        f"**{label}:** `{value}`"
        for label, value in (
            ("Repo", task.repo),
            ("Version", task.version),
            ("Base commit", task.base_commit),
            ("Instance ID", instance_id(task)),
        )
        if value
    ]
    text = f"# Task\n\n{statement}\n"
    if footer:
        text += "\n---\n\n" + "\n".join(footer) + "\n"
    return text


def instance_id(task: AgentTask) -> str | None:
    """SWE-bench's id form, ``owner__name-NUMBER`` (its number is the PR's; ours the issue's)."""
    if not task.repo or task.number is None:
        return None
    return f"{task.repo.replace('/', '__')}-{task.number}"


def problem_statement(task: AgentTask) -> str:
    """SWE-bench's ``f"{title}\\n{body}\\n"`` dedented and stripped as Harbor's adapter
    does, then what Ribbit adds to it (absent from training: each part stripped)."""
    parts = [dedent(f"{task.title}\n{task.body}\n").strip()]
    if task.vouched is not None:
        parts.append(
            f"(This issue was written by @{task.vouched.author}, who has no write access to "
            f"the repository; @{task.vouched.by}, who has, asked for this work.)"
        )
    for comment in task.comments:
        parts.append(f"Comment by @{comment.author}:\n{comment.body.strip()}")
    if task.include_repo_context:
        if task.repo_instructions and task.repo_instructions.strip():
            parts.append(task.repo_instructions.strip())
        repo_lines = []
        if task.setup_command:
            repo_lines.append(f"- Dependencies were installed with: {task.setup_command}")
        if task.test_command:
            repo_lines.append(f"- Run the tests with: {task.test_command}")
        repo_lines.extend(f"- {hint}" for hint in task.hints)
        if repo_lines:
            parts.append("About this repository:\n" + "\n".join(repo_lines))
    if task.extra_instructions:
        parts.append(task.extra_instructions.strip())
    return "\n\n".join(parts)


def initial_messages(task: AgentTask) -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": render_user_message(task)},
    ]


def first_user_message(messages: list[dict[str, Any]]) -> str | None:
    """The task text an episode began with (its first user turn), as the model saw it."""
    for message in messages:
        if message.get("role") == "user" and isinstance(message.get("content"), str):
            return str(message["content"])
    return None


def assistant_message(
    content: str, reasoning: str | None, tool_calls: list[dict[str, Any]]
) -> dict[str, Any]:
    """An assistant turn as the chat template expects it (arguments as a dict)."""
    msg: dict[str, Any] = {"role": "assistant", "content": content}
    if reasoning:
        msg["reasoning_content"] = reasoning
    if tool_calls:
        msg["tool_calls"] = tool_calls
    return msg


def tool_message(call_id: str, content: str) -> dict[str, Any]:
    """Leaf's tool result message (agent.py @ 33de19f9): no ``name`` key."""
    return {"role": "tool", "tool_call_id": call_id, "content": content}
