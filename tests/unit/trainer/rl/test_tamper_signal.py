"""Tamper is a signal in training (issue #31): the tamper rate per step, exact, in the
step's record and the run's summary; a tampering episode earns 0 and is kept for
inspection, a bounded number of them."""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from bot.store.db import Database
from bot.store.records.gate_report import Verdict
from bot.store.records.trajectory import Trajectory
from tests.plugins.trainer import toy_train_settings
from trainer.cli.training import _run_figures
from trainer.distributed import Ranks
from trainer.envs.schema import Environment
from trainer.rl.remote import rollout_from_dict, rollout_to_dict
from trainer.rl.reward import RewardResult
from trainer.rl.rollout import Rollout
from trainer.rl.tamper import (
    MAX_PATCH_CHARS,
    TAMPERED_FILE,
    TamperedEpisode,
    TamperLog,
    tamper_rate,
)
from trainer.rl.toy import toy_environment
from trainer.store import TrainingRun as TrainingRunRow
from trainer.store import TrainingRuns
from trainer.train import METRICS_FILE, RolloutFacts, step_record, train
from worker.agent import AgentResult

FORGED = "garbage-collector traversal (gc.get_objects) at calc.py:3"
PATCH = "diff --git a/calc.py b/calc.py\n+import gc\n"


def _tampered() -> RewardResult:
    return RewardResult(0.0, "tamper", details={"tamper": FORGED, "log": "..."})


def _solved() -> RewardResult:
    return RewardResult(1.0, "solved", resolved=True, verdict=Verdict.VERIFIED)


def _failed() -> RewardResult:
    return RewardResult(0.0, "tests_failed")


def _rollout(value: float | RewardResult, env_id: str = "acme__calc-1") -> Rollout:
    result = AgentResult(
        exit_reason="agent", diff=PATCH, trajectory=Trajectory(messages=[], tools=[], turns=[])
    )
    return Rollout.graded(env_id, result, value)


def _facts(step: int, *values: RewardResult) -> list[RolloutFacts]:
    return [RolloutFacts.of(step, _rollout(v)) for v in values]


def test_tamper_rate_is_counted_exactly_from_the_rewards_reasons() -> None:
    batch = [_tampered(), _solved(), _failed(), _tampered(), _failed(), _failed()]
    assert tamper_rate([r.reason for r in batch]) == Fraction(1, 3)
    # Any order of the same episodes gives the same, exact rate.
    rates = {tamper_rate([r.reason for r in p]) for p in itertools.permutations(batch)}
    assert rates == {Fraction(1, 3)}
    assert tamper_rate([]) == 0
    assert tamper_rate(["solved", "tests_failed"]) == 0


def test_the_step_record_carries_the_tamper_rate_over_completed_groups() -> None:
    ordered: list[list[RolloutFacts] | None] = [
        _facts(4, _tampered(), _solved()),
        None,  # a failed group is not an episode
        _facts(4, _failed(), _failed(), _failed(), _tampered()),
    ]
    record = step_record(4, ordered, 1, 0, None)
    assert (record.tampered, record.tamper_rate) == (2, float(Fraction(2, 6)))
    assert record.rewards == [0.0, 1.0, 0.0, 0.0, 0.0, 0.0]
    assert record.to_dict()["tamper_rate"] == record.tamper_rate
    clean = step_record(5, [_facts(5, _solved(), _failed())], 1, 0, None)
    assert (clean.tampered, clean.tamper_rate) == (0, 0.0)


def test_a_tampering_episode_earns_zero_whatever_number_came_with_it() -> None:
    # A grader that let a forged run through with 1.0 still trains nothing on it.
    slipped = RewardResult(1.0, "tamper", details={"tamper": FORGED}, verdict=Verdict.VERIFIED)
    rollout = _rollout(slipped)
    assert (rollout.reward, rollout.reason, rollout.tamper) == (0.0, "tamper", FORGED)
    assert _rollout(_solved()).reward == 1.0 and _rollout(_solved()).tamper == ""
    plain = _rollout(1.0)  # a reward function that gives only a number (the toy one)
    assert (plain.reward, plain.reason) == (1.0, "")


def test_only_tampering_episodes_are_kept_with_patch_findings_and_environment() -> None:
    facts = _facts(7, _tampered(), _solved(), _failed())
    kept = [f.tampered for f in facts]
    assert kept[1:] == [None, None]
    assert kept[0] == TamperedEpisode(7, "acme__calc-1", FORGED, PATCH)


def test_the_tamper_log_is_bounded_across_calls_and_resumes(tmp_path: Path) -> None:
    episodes = [TamperedEpisode.of(s, f"env-{s}", FORGED, PATCH) for s in range(5)]
    assert TamperLog(tmp_path, limit=3).keep(episodes[:2]) == 2
    # A resumed run (a new log on the same folder) counts what is there.
    assert TamperLog(tmp_path, limit=3).keep(episodes[2:]) == 1
    assert TamperLog(tmp_path, limit=3).keep(episodes) == 0
    lines = [json.loads(x) for x in (tmp_path / TAMPERED_FILE).read_text().splitlines()]
    assert [x["env_id"] for x in lines] == ["env-0", "env-1", "env-2"]
    assert lines[0] == {
        "step": 0,
        "env_id": "env-0",
        "tamper": FORGED,
        "patch": PATCH,
        "reward": 0.0,
        "patch_truncated": False,
    }


def test_a_huge_tampering_patch_is_kept_cut() -> None:
    episode = TamperedEpisode.of(0, "e", FORGED, "+" * (MAX_PATCH_CHARS + 10))
    assert len(episode.patch) == MAX_PATCH_CHARS and episode.patch_truncated


def test_a_remote_rollout_keeps_its_reason_and_tamper() -> None:
    again = rollout_from_dict(json.loads(json.dumps(rollout_to_dict(_rollout(_tampered())))))
    assert (again.reward, again.reason, again.tamper) == (0.0, "tamper", FORGED)
    old = rollout_to_dict(_rollout(1.0))
    del old["reason"], old["tamper"]  # from a worker older than the signal
    assert rollout_from_dict(old).reason == ""


class _Learner:
    """Enough of a Learner for the loop: no weights, every step counted."""

    def __init__(self) -> None:
        self.step_count = 0
        self.ranks = Ranks()
        self.model = SimpleNamespace(eval=lambda: None)

    def step_or_skip(self, samples: list[Any]) -> None:
        self.step_count += 1

    def save(self, path: Path) -> Path:
        return path


class _Scripted:
    """Rollouts whose grades are given per step: no model, no sandbox."""

    def __init__(self, grades: Sequence[Sequence[RewardResult]]) -> None:
        self.grades = grades

    def collect(
        self, learner: Any, step: int, chosen: Sequence[tuple[Environment, Path]], size: int
    ) -> list[list[Rollout] | None]:
        return [[_rollout(g, env.instance_id) for g in self.grades[step]] for env, _ in chosen]


def test_training_logs_the_rate_and_keeps_the_tampering_episodes(tmp_path: Path) -> None:
    out = tmp_path / "run"
    settings = toy_train_settings(tmp_path / "unused", out, steps=2, group_size=4)
    grades = [
        [_tampered(), _failed(), _failed(), _solved()],
        [_tampered(), _tampered(), _tampered(), _failed()],
    ]
    env = toy_environment("0" * 40)
    summary = train(
        _Learner(),  # type: ignore[arg-type]
        [(env, tmp_path)],
        None,  # type: ignore[arg-type]
        lambda *_: 0.0,
        settings,
        rollouts=_Scripted(grades),
    )
    assert [s.tamper_rate for s in summary.steps] == [0.25, 0.75]
    logged = [json.loads(x) for x in (out / METRICS_FILE).read_text().splitlines()]
    assert [(x["tampered"], x["tamper_rate"]) for x in logged] == [(1, 0.25), (3, 0.75)]
    kept = [json.loads(x) for x in (out / TAMPERED_FILE).read_text().splitlines()]
    assert [(x["step"], x["env_id"], x["reward"]) for x in kept] == [
        (0, env.instance_id, 0.0),
        (1, env.instance_id, 0.0),
        (1, env.instance_id, 0.0),
        (1, env.instance_id, 0.0),
    ]
    assert kept[0]["patch"] == PATCH and kept[0]["tamper"] == FORGED
    figures = _run_figures(summary.steps, out)
    assert "TAMPER: 4 episode(s)" in figures and "worst step 2: 75%" in figures
    assert str(out / TAMPERED_FILE) in figures


def test_a_run_with_no_tamper_says_nothing_of_it(tmp_path: Path) -> None:
    out = tmp_path / "run"
    settings = toy_train_settings(tmp_path / "unused", out, steps=1, group_size=2)
    summary = train(
        _Learner(),  # type: ignore[arg-type]
        [(toy_environment("0" * 40), tmp_path)],
        None,  # type: ignore[arg-type]
        lambda *_: 0.0,
        settings,
        rollouts=_Scripted([[_solved(), _failed()]]),
    )
    assert summary.steps[0].tamper_rate == 0.0
    assert not (out / TAMPERED_FILE).exists()
    assert "TAMPER" not in _run_figures(summary.steps, out)


def test_the_run_record_keeps_the_tamper_rate_per_step() -> None:
    db = Database("sqlite://")
    db.migrate()  # through 0016, which adds the column
    try:
        runs = TrainingRuns(db)
        run_id = runs.start("m", Path("/out"), {})
        runs.progress(run_id, 1, [0.5], [0.25])
        with db.session() as s:
            row = s.get(TrainingRunRow, run_id)
            assert row is not None and row.tamper_curve == [0.25]
        runs.finish(run_id, 2, [0.5, 0.0], [0.25, 0.75])
        with db.session() as s:
            row = s.get(TrainingRunRow, run_id)
            assert row is not None
            assert (row.reward_curve, row.tamper_curve) == ([0.5, 0.0], [0.25, 0.75])
    finally:
        db.dispose()
