"""Short replies on the issue or PR: help (also for unknown commands and after a stop) and
explain (the trajectory summary of the issue's latest agent run)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.forges.base import IssueRef
from bot.forges.sanitize import sanitize_forge_text
from bot.store.payloads import PayloadError, UnknownWord
from worker.jobs import JobContext, JobRefused, pipeline
from worker.metrics import record_outsider_refusal

HELP = """**Ribbit commands** (for collaborators with write access)

- `/ribbit retry`: start over from the issue
- `/ribbit stop`: cancel the queued or running job
- `/ribbit explain`: what the agent looked at, ran and changed
- `/ribbit revise <what to change>` (on Ribbit's PR): a new revision on the same branch
"""
MAX_STEPS = 40


def reply_target(ctx: JobContext) -> tuple[Any, IssueRef]:
    job = ctx.job
    repo = job.repo_ref
    forge = ctx.forges(repo.forge, installation_id=job.installation_id)
    # On GitHub a PR's conversation is an issue thread, so the reply goes where the command
    # was written; the Forge interface comments on issues only, so on GitLab it goes to the
    # issue the MR works on.
    on_pr = job.pr_number is not None and repo.forge == "github"
    number = job.pr_number if on_pr else job.issue_number
    assert number is not None
    return forge, IssueRef(repo, number)


WRITE_ACCESS_REFUSAL = "does not have write access"


@dataclass(frozen=True)
class Replied:
    """A help job's result: the reply is posted (a refusal raises instead)."""

    def to_json(self) -> dict[str, Any]:
        return {"replied": True}


@dataclass(frozen=True)
class Explained:
    """An explain job's result: whether there was a recorded agent run to explain (the
    issue is answered either way)."""

    explained: bool

    def to_json(self) -> dict[str, Any]:
        return {"explained": self.explained}


def check_actor(ctx: JobContext, forge: Any) -> None:
    repo = ctx.job.repo_ref
    if not ctx.job.actor or not forge.has_write_access(repo, ctx.job.actor):
        record_outsider_refusal(ctx.job.kind)
        raise JobRefused(f"{ctx.job.actor} {WRITE_ACCESS_REFUSAL}")


@pipeline("help")
def help_reply(ctx: JobContext) -> Replied:
    forge, target = reply_target(ctx)
    check_actor(ctx, forge)
    try:
        asked = ctx.job.payload
    except PayloadError:
        asked = None
    body = (
        f"I don't know the command `{asked.word}`.\n\n{HELP}"
        if isinstance(asked, UnknownWord)
        else HELP
    )
    forge.post_comment(target, body)
    return Replied()


def summarize_trajectory(path: Path) -> str:
    """What the agent looked at, ran and changed, from a recorded trajectory."""
    from worker.agent import read_jsonl

    [trajectory] = read_jsonl(path)[:1]
    lines = [
        f"**What the agent did** (ended: `{trajectory.exit_reason}`, "
        f"{len(trajectory.turns)} turns)",
        "",
    ]
    steps = 0
    for turn in trajectory.turns:
        for call in turn.tool_calls:
            steps += 1
            if steps > MAX_STEPS:
                continue
            args = call.arguments if isinstance(call.arguments, dict) else {}
            arg = (
                args.get("command")
                or args.get("file_path")
                or args.get("path")
                or args.get("pattern")
                or ""
            )
            shown = json.dumps(str(arg)[:120])
            lines.append(f"{steps}. `{call.name}` {shown}")
    if steps > MAX_STEPS:
        lines.append(f"… and {steps - MAX_STEPS} more tool calls")
    return "\n".join(lines)


@pipeline("explain")
def explain(ctx: JobContext) -> Explained:
    forge, target = reply_target(ctx)
    check_actor(ctx, forge)
    job = ctx.job
    record = (
        ctx.store.last_agent_record(job.forge, job.repo, job.issue_number)
        if job.issue_number is not None
        else None
    )
    path = record.trajectory_path if record else None
    if record is None or not path or not Path(path).exists():
        forge.post_comment(target, "There is no recorded agent run for this issue yet.")
        return Explained(False)
    summary = summarize_trajectory(Path(path))
    files = record.changed_files
    if files:
        summary += "\n\n**Changed:** " + ", ".join(f"`{f}`" for f in files[:30])
    # Tool arguments and file names are the model's text.
    forge.post_comment(target, sanitize_forge_text(summary))
    return Explained(True)
