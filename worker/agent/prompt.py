"""The prompt: a short system message and one user message carrying the issue.

The shape matches the harness the model was trained in: a brief system
prompt that describes the job, the task in the first user turn, tools passed
to the tokenizer's own chat template (which renders them into the system turn
as ``<tools>`` JSON lines and tells the model the ``<tool_call>`` XML format),
and tool results sent back as ``role: tool`` messages tied to their call (the
Qwen3.5 template wraps them in ``<tool_response>`` inside a user turn).

Issue text is untrusted. It is placed in the user turn as data between
markers; nothing in this module gives it any power: the loop's safety rests
on the sandbox (no network, no secrets, nothing to steal), not on the prompt.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SYSTEM_PROMPT = (
    "You are a software engineering agent working in a checked-out git repository (the "
    "current directory). Resolve the task the user gives you by inspecting the code, making "
    "focused edits with the tools, and running commands to check your work (tests, linters, "
    "small scripts). Keep changes minimal and in the style of the codebase; do not commit. "
    "When you are done, reply without a tool call and give a brief summary of what you "
    "changed and how you validated it."
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
    comments: tuple[IssueComment, ...] = ()
    repo: str | None = None  # "owner/name", shown for context only
    test_command: str | None = None
    setup_command: str | None = None
    hints: tuple[str, ...] = ()  # other repo-config facts worth telling the model
    extra_instructions: str | None = None  # revisions: current diff + review comments
    metadata: dict[str, Any] = field(default_factory=dict)  # job id etc.; kept in the trajectory


def render_user_message(task: AgentTask) -> str:
    parts = []
    where = f" in {task.repo}" if task.repo else ""
    parts.append(f"Resolve the following issue{where}.")
    parts.append(f"<issue>\nTitle: {task.title.strip()}\n\n{task.body.strip()}\n</issue>")
    if task.comments:
        rendered = "\n\n".join(f"{c.author} wrote:\n{c.body.strip()}" for c in task.comments)
        parts.append(f"<comments>\n{rendered}\n</comments>")
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


def tool_message(call_id: str, name: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "name": name, "content": content}
