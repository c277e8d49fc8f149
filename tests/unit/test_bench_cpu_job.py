"""The CPU job benchmark feeds the README's hardware table: its episode arithmetic, and its
script run end to end on a tiny model of the family so it does not rot between runs."""

from __future__ import annotations

import pytest

from tests.benchmarks import bench_cpu_job as bench

RATES = bench.CpuRates(prefill_tokens_per_s=100.0, decode_tokens_per_s=10.0)


def test_each_turn_rereads_the_whole_conversation() -> None:
    # Turn 1: 1000 prompt tokens at 100/s + 100 decoded at 10/s = 20 s. Turn 2 re-reads
    # 1000 + 100 generated + 100 observed = 1200 tokens (12 s) and decodes again (10 s).
    assert bench.episode_minutes(RATES, 1000, 1, 100, 100) == pytest.approx(20 / 60)
    assert bench.episode_minutes(RATES, 1000, 2, 100, 100) == pytest.approx(42 / 60)


def test_turns_within_a_budget_stop_before_it_is_exceeded() -> None:
    assert bench.turns_within(RATES, 1000, 42 / 60, 100, 100) == 2
    assert bench.turns_within(RATES, 1000, 41 / 60, 100, 100) == 1
    assert bench.turns_within(RATES, 1000, 0.1, 100, 100) == 0


def test_turns_within_stop_at_the_agent_turn_cap() -> None:
    fast = bench.CpuRates(prefill_tokens_per_s=1e9, decode_tokens_per_s=1e9)
    assert bench.turns_within(fast, 10, 50.0, 1, 1) == 100  # AgentSettings().max_turns


def test_first_prompt_counts_the_system_prompt_issue_and_tools() -> None:
    from worker.agent.prompt import SYSTEM_PROMPT

    assert bench.first_prompt_tokens() > len(SYSTEM_PROMPT) / 4 + len(bench._ISSUE_BODY) / 4


@pytest.mark.slow  # a model built and decoded on CPU: ~10 s on a quiet 2-core machine
def test_smoke_prints_every_figure(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(["--smoke", "--prompt-lengths", "32,64", "--new", "4"]) == 0
    out = capsys.readouterr().out
    assert "32-token prompt: prefill" in out and "64-token prompt: prefill" in out
    assert "decode, 1 stream, 3 steps: median" in out  # 4 tokens: the first ends the prefill
    assert "of the copy-bandwidth ceiling" in out
    assert "10 turn(s):" in out and "-minute agent budget:" in out
