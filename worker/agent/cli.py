"""``ribbit run``: run the agent once on a local checkout, print the diff.

The command copies nothing itself: the sandbox backend makes its own private
copy of ``--repo`` (``worker.sandbox.open_sandbox``), so the checkout given is
never changed.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from bot.settings import AgentSettings, ModelSettings, SandboxSettings
from worker.agent.loop import AgentResult, run_agent
from worker.agent.policy import PolicyError, load_policy
from worker.agent.prompt import AgentTask, IssueComment
from worker.sandbox.base import Sandbox

SandboxOpener = Callable[[Path], Sandbox]


def read_issue_file(path: Path) -> AgentTask:
    """An issue as JSON (``{"title", "body", "comments": [{"author", "body"}], "repo",
    "number", ...}``) or as text (first line the title, a leading ``#`` dropped; the rest
    the body). The comments are taken as given: whoever writes the file vouches for them."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        data: dict[str, Any] = json.loads(text)
        comments = tuple(
            IssueComment(author=str(c.get("author", "someone")), body=str(c.get("body", "")))
            for c in data.get("comments", [])
        )
        return AgentTask(
            title=str(data["title"]),
            body=str(data.get("body", "")),
            comments=comments,
            repo=data.get("repo"),
            number=int(data["number"]) if data.get("number") is not None else None,
            base_commit=data.get("base_commit"),
            version=data.get("version"),
            test_command=data.get("test_command"),
            extra_instructions=data.get("extra_instructions"),
        )
    title, _, body = text.strip().partition("\n")
    return AgentTask(title=title.lstrip("#").strip(), body=body.strip())


def execute(
    task: AgentTask,
    repo: Path,
    model: ModelSettings,
    agent: AgentSettings,
    open_sandbox: SandboxOpener,
    trajectory_out: Path | None,
) -> AgentResult:
    policy = load_policy(model, agent)
    task = with_checkout_facts(task, repo)
    with open_sandbox(repo) as sandbox:
        result = run_agent(task, sandbox, policy, agent)
    if trajectory_out is not None:
        result.trajectory.write_jsonl(trajectory_out)
    return result


def with_checkout_facts(task: AgentTask, repo: Path) -> AgentTask:
    """The footer facts the solve job knows, read from the checkout when the issue file
    does not give them: its HEAD commit and nearest tag (so ``ribbit run`` shows the
    model the same task text a job on the same commit would)."""

    def git(*args: str) -> str | None:
        try:
            proc = subprocess.run(
                ["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=30
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        return proc.stdout.strip() or None if proc.returncode == 0 else None

    return replace(
        task,
        base_commit=task.base_commit or git("rev-parse", "HEAD"),
        version=task.version or git("describe", "--tags", "--abbrev=0"),
    )


def _sandbox_opener(backend: str) -> SandboxOpener:
    # Imported by name at run time: the sandbox backends are optional at import time.
    try:
        open_sandbox = importlib.import_module("worker.sandbox").open_sandbox
    except (ImportError, AttributeError) as exc:
        raise click.ClickException(
            f"no sandbox backend is available (worker.sandbox.open_sandbox: {exc})"
        ) from None
    # "local" is not a SandboxSettings choice; it is passed through for backends that
    # offer it and refused by the rest.
    settings = (
        SandboxSettings.model_validate({"backend": backend})
        if backend != "local"
        else SandboxSettings().model_copy(update={"backend": "local"})
    )

    def opener(source: Path) -> Sandbox:
        sandbox: Sandbox = open_sandbox(settings, source, network=False)
        return sandbox

    return opener


@click.command("run")
@click.option(
    "--repo",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    required=True,
    help="Checked-out repository to work on (copied, never changed).",
)
@click.option(
    "--issue-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    required=True,
    help="Issue as JSON, or text whose first line is the title.",
)
@click.option(
    "--policy",
    "policy_name",
    type=click.Choice(["transformers", "openai", "replay"]),
    default=None,
    help="Model backend (default: RIBBIT_MODEL__POLICY).",
)
@click.option("--model", "model_path", default=None, help="Model id or local path.")
@click.option(
    "--replay",
    "replay_file",
    type=click.Path(exists=True, path_type=Path),
    default=None,
    help="Trajectory JSONL to replay (implies --policy replay).",
)
@click.option(
    "--trajectory-out",
    type=click.Path(path_type=Path),
    default=None,
    help="Append the run's trajectory to this JSONL file.",
)
@click.option(
    "--backend",
    type=click.Choice(["auto", "docker", "bubblewrap", "local"]),
    default="auto",
    show_default=True,
    help="Sandbox backend.",
)
def run(
    repo: Path,
    issue_file: Path,
    policy_name: str | None,
    model_path: str | None,
    replay_file: Path | None,
    trajectory_out: Path | None,
    backend: str,
) -> None:
    """Run the agent on REPO for the issue in ISSUE_FILE; print the diff."""
    from bot.settings import load_settings

    settings = load_settings()
    update: dict[str, Any] = {}
    if replay_file is not None:
        update.update(policy="replay", replay_file=replay_file)
    if policy_name is not None:
        update["policy"] = policy_name
    if model_path is not None:
        update["model"] = model_path
    model = ModelSettings.model_validate({**settings.model.model_dump(), **update})
    task = read_issue_file(issue_file)
    try:
        result = execute(
            task, repo, model, settings.agent, _sandbox_opener(backend), trajectory_out
        )
    except PolicyError as exc:
        raise click.ClickException(str(exc)) from None
    sys.stdout.write(result.diff)
    turns = len(result.trajectory.turns)
    click.echo(
        f"ribbit run: {result.exit_reason} after {turns} turns"
        + (f" ({result.error})" if result.error else ""),
        err=True,
    )
