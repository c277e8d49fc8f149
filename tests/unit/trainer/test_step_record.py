"""What a training step records, from rollout facts counted by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainer.rl.learner import StepStats
from trainer.train import RolloutFacts, StepRecord, append_metrics, step_record

STATS = StepStats(loss=0.1, policy_loss=0.1, kl=0.02, clip_fraction=0.0, tokens=30, grad_norm=1.0)


def test_step_record_counts_completed_groups_only() -> None:
    ordered = [
        [RolloutFacts(1.0, 10, "agent"), RolloutFacts(0.0, 20, "max_turns")],
        None,  # a group whose rollout failed
        [RolloutFacts(1.0, 30, "agent"), RolloutFacts(0.5, 40, "agent")],
    ]
    record = step_record(3, ordered, 2, 4, STATS, rollout_s=2.0, learner_s=0.5)
    assert record.rewards == [1.0, 0.0, 1.0, 0.5]
    assert record.mean_reward == pytest.approx(0.625)
    assert record.pass_rate == pytest.approx(0.5)  # partial credit is not a pass
    assert record.failed_groups == 1
    assert record.mean_generated_tokens == pytest.approx(25.0)
    assert record.max_generated_tokens == 40
    assert record.exit_reasons == {"agent": 3, "max_turns": 1}
    assert record.learner_tokens_per_s == pytest.approx(60.0)


def test_a_step_where_every_group_failed_is_recorded_not_divided_by_zero() -> None:
    record = step_record(0, [None, None], 0, 0, None)
    assert record.mean_reward == 0.0 and record.pass_rate == 0.0
    assert record.failed_groups == 2 and record.learner_tokens_per_s == 0.0


def test_metrics_lines_are_json(tmp_path: Path) -> None:
    path = tmp_path / "run" / "metrics.jsonl"
    for step in range(2):
        append_metrics(path, step_record(step, [[RolloutFacts(1.0, 5, "agent")]], 0, 0, STATS))
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line["step"] for line in lines] == [0, 1]
    assert lines[0]["learner"]["kl"] == 0.02 and lines[0]["pass_rate"] == 1.0
    assert set(StepRecord.__dataclass_fields__) <= set(lines[0])
