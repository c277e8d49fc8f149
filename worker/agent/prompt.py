"""The prompt: Leaf's system message and one user message carrying the task text.

The training harness (Leaf, microsoft/FrogNano ``frognano/harness/leaf``) starts every
episode with exactly two messages (``agent.py`` @ 33de19f9): its ``SYSTEM_PROMPT``
(``tools.py`` @ 354fccee, reproduced byte for byte below) and a user message that is
the task's instruction text itself, with no wrapper. Tools reach the model through
the chat template (``tools=``), and each tool result comes back as
``{"role": "tool", "tool_call_id", "content"}``, with no ``name`` (Leaf never sends one).

The task text is the issue laid out as a problem statement the way SWE-bench-style
training instructions are: the title on the first line, the body below it. Comments
come only from people with write access (the caller filters; see
``worker.pipelines.solve``), each under its author. Repository instructions and hints
(setup and test commands) are appended only when the repository opts in
(``agent.include_repo_context`` in .ribbit.yml); a revision's brief is always appended,
since it is the task.

Issue text is untrusted. Nothing in this module gives it any power: the loop's safety
rests on the sandbox (no network, no secrets, nothing to steal), not on the prompt.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

LEAF_PROMPT_COMMIT = "354fcceef266d88d528403981dc8b33666175594"  # tools.py: SYSTEM_PROMPT
SYSTEM_PROMPT = (
    "You are a software-engineering agent working in a checked-out repository.\n"
    "Use the available tools to inspect files, make focused edits, and run commands.\n"
    "Solve the task, validate when practical, then give a brief final answer."
)


@dataclass(frozen=True)
class IssueComment:
    author: str
    body: str


@dataclass(frozen=True)
class AgentTask:
    """What the agent is asked to do."""

    title: str
    body: str
    comments: tuple[IssueComment, ...] = ()  # already filtered to people with write access
    repo: str | None = None  # "owner/name"; kept in the trajectory, not shown
    test_command: str | None = None
    setup_command: str | None = None
    hints: tuple[str, ...] = ()  # other repo-config facts worth telling the model
    extra_instructions: str | None = None  # revisions: current diff + review comments
    repo_instructions: str | None = None  # AGENTS.md or .ribbit.yml agent.instructions
    include_repo_context: bool = False  # the repo opted in to instructions and hints
    metadata: dict[str, Any] = field(default_factory=dict)  # job id etc.; kept in the trajectory


def render_user_message(task: AgentTask) -> str:
    parts = [f"{task.title.strip()}\n{task.body.strip()}".rstrip()]
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
