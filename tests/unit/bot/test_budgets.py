"""The job's time limits follow from the agent, setup and gate budgets."""

from __future__ import annotations

from pathlib import Path

from bot.queue import broker_transport_options
from worker.agent.repo_task import agent_limits
from worker.agent.tools import RUNNER_GRACE_S
from worker.repo_config import parse_repo_config
from worker.settings import AgentSettings, WorkerSettings


def test_agent_budget_is_leafs_swebench_verified_preset() -> None:
    agent = AgentSettings()
    assert (agent.max_turns, agent.max_context_tokens, agent.max_minutes * 60) == (
        100,
        65_536,
        3000,
    )
    assert (agent.temperature, agent.top_p, agent.top_k, agent.min_p) == (0.6, 0.95, 20, 0.0)
    assert agent.enable_thinking


def test_job_limit_covers_every_stage_at_its_budget(tmp_path: Path) -> None:
    settings = WorkerSettings(
        data_dir=tmp_path,
        broker_url="redis://localhost:6379/0",
        agent={"max_minutes": 120},
        gates={"test_timeout_s": 600, "semgrep_timeout_s": 100, "total_timeout_s": 10_000},
        sandbox={"setup_timeout_s": 1200},
    )
    agent_s = 120 * 60 + RUNNER_GRACE_S
    gates_s = 2 * 3 * 600 + 2 * 100
    limit = settings.effective_job_time_limit_s
    assert limit >= 1200 + agent_s + gates_s
    capped = WorkerSettings(
        data_dir=tmp_path, gates={"test_timeout_s": 600, "total_timeout_s": 900}
    )
    assert capped.effective_job_time_limit_s < settings.effective_job_time_limit_s
    assert broker_transport_options(settings)["visibility_timeout"] == limit + 600
    fixed = WorkerSettings(data_dir=tmp_path, job_time_limit_s=5000)
    assert fixed.effective_job_time_limit_s == 5000


def test_repo_may_shorten_the_clock_but_not_lengthen_it() -> None:
    base = AgentSettings(max_minutes=50)
    longer = agent_limits(base, parse_repo_config("agent: {max_minutes: 200, max_turns: 150}"))
    assert longer.max_minutes == 50 and longer.max_turns == 150
    shorter = agent_limits(base, parse_repo_config("agent: {max_minutes: 10}"))
    assert shorter.max_minutes == 10
