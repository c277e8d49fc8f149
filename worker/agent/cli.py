"""``ribbit run``: run the agent once on a local checkout, print the diff.

It runs the solve job's episode (:func:`worker.agent.episode.run_episode`): the
repository's ``.ribbit.yml`` committed at HEAD gives the setup command, the test
command, the image and the agent limits as it does for a job, and the sandbox is set
up by the production setup step before the agent starts (a failed setup ends the
run). The command copies nothing itself: the sandbox backend makes its own private
copy of ``--checkout``, so the checkout given is never changed.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from bot.cli_options import checkout_option
from bot.hostgit import head_commit, latest_tag
from worker.agent.episode import Episode, SandboxRecipe, run_episode
from worker.agent.policy import PolicyError, load_policy
from worker.agent.prompt import AgentTask, IssueComment
from worker.repo_config import RepoConfig
from worker.sandbox.backend_option import backend_option
from worker.settings import AgentSettings, ModelSettings, SandboxSettings


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


def task_with_config(task: AgentTask, config: RepoConfig, instructions: str | None) -> AgentTask:
    """The issue's task with what the repository's ``.ribbit.yml`` says, as the solve job
    builds it: its test command (unless the issue file names one), whether the repo
    context is shown, and the repo's ``instructions`` (see solve.repo_instructions)."""
    return replace(
        task,
        test_command=task.test_command or config.test,
        include_repo_context=config.prompt.include_repo_context,
        repo_instructions=instructions,
    )


def execute(
    task: AgentTask,
    repo: Path,
    model: ModelSettings,
    agent: AgentSettings,
    sandboxes: SandboxRecipe,
    trajectory_out: Path | None,
    *,
    setup_command: str | None = None,
) -> Episode:
    policy = load_policy(model, agent)
    task = with_checkout_facts(task, repo)
    episode = run_episode(task, repo, policy, agent, sandboxes, setup_command=setup_command)
    if trajectory_out is not None and episode.agent is not None:
        episode.agent.trajectory.write_jsonl(trajectory_out)
    return episode


def with_checkout_facts(task: AgentTask, repo: Path) -> AgentTask:
    """The footer facts the solve job knows, read from the checkout when the issue file
    does not give them: its HEAD commit and nearest tag (so ``ribbit run`` shows the
    model the same task text a job on the same commit would)."""
    return replace(
        task,
        base_commit=task.base_commit or head_commit(repo),
        version=task.version or latest_tag(repo),
    )


def _sandbox_settings(backend: str | None, base: SandboxSettings) -> SandboxSettings:
    """The settings' sandbox section with --backend, where given, on top."""
    if backend is None:
        return base
    return SandboxSettings.model_validate({**base.model_dump(), "backend": backend})


def _model_settings(
    base: ModelSettings, policy_name: str | None, model_path: str | None, replay: Path | None
) -> ModelSettings:
    """The settings' model section with the command line's choices on top."""
    update: dict[str, Any] = {}
    if replay is not None:
        update.update(policy="replay", replay_file=replay)
    if policy_name is not None:
        update["policy"] = policy_name
    if model_path is not None:
        update["model"] = model_path
    return ModelSettings.model_validate({**base.model_dump(), **update})


@click.command("run")
@checkout_option("The repository to work on (copied, never changed)")
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
@backend_option
def run(
    checkout: Path,
    issue_file: Path,
    policy_name: str | None,
    model_path: str | None,
    replay_file: Path | None,
    trajectory_out: Path | None,
    backend: str | None,
) -> None:
    """Run the agent on the --checkout for the issue in --issue-file; print the diff."""
    from worker.agent.repo_task import agent_limits, repo_instructions
    from worker.repo_config import RepoConfigError, read_repo_config
    from worker.sandbox.setupcmd import commit_files, with_detected_setup
    from worker.settings import load_worker_settings

    settings = load_worker_settings()
    try:
        config = read_repo_config(checkout)
    except RepoConfigError as exc:
        raise click.ClickException(str(exc)) from None
    config = with_detected_setup(
        config, commit_files(checkout, "HEAD"), enabled=settings.sandbox.detect_setup
    )
    model = _model_settings(settings.model, policy_name, model_path, replay_file)
    task = task_with_config(
        read_issue_file(issue_file), config, repo_instructions(config, checkout)
    )
    sandboxes = SandboxRecipe.production(
        _sandbox_settings(backend, settings.sandbox), image=config.image
    )
    try:
        episode = execute(
            task,
            checkout,
            model,
            agent_limits(settings.agent, config),
            sandboxes,
            trajectory_out,
            setup_command=config.setup,
        )
    except PolicyError as exc:
        raise click.ClickException(str(exc)) from None
    if episode.agent is None:
        raise click.ClickException(
            f"the repository's setup failed ({episode.setup.summary()}); the agent did not "
            f"start:\n{episode.setup.output}"
        )
    result = episode.agent
    sys.stdout.write(result.diff)
    turns = len(result.trajectory.turns)
    click.echo(
        f"ribbit run: {result.exit_reason} after {turns} turns"
        + (f" ({result.error})" if result.error else ""),
        err=True,
    )
