"""trainer/rl/sources.py: local rollouts, one group per chosen environment, in order,
generated with the learner's weights gathered."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from trainer.envs.schema import Environment
from trainer.rl import sources
from trainer.rl.sources import LocalRollouts, RolloutSource
from trainer.rl.toy import toy_environment
from worker.settings import AgentSettings


class FakeLearner:
    def __init__(self) -> None:
        self.gathered_now = False

    @contextlib.contextmanager
    def gathered(self) -> Iterator[None]:
        self.gathered_now = True
        try:
            yield
        finally:
            self.gathered_now = False


def test_sources_local_collects_one_group_per_environment_in_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    learner = FakeLearner()
    calls: list[tuple[Any, ...]] = []

    def collect_group(env: Environment, checkout: Path, *rest: Any) -> list[Any]:
        assert learner.gathered_now  # every forward pass on the full weights
        calls.append((env.instance_id, checkout, *rest))
        return [f"{env.instance_id} #{i}" for i in range(rest[-1])]

    monkeypatch.setattr(sources, "collect_group", collect_group)
    policy, factory, reward = object(), object(), object()
    limits = AgentSettings(max_turns=2)
    source = LocalRollouts(policy, limits, factory, reward)  # type: ignore[arg-type]
    chosen = [(toy_environment("0" * 40, instance_id=i), Path(f"/co/{i}")) for i in ("b", "a")]
    groups = source.collect(learner, 1, chosen, 2)  # type: ignore[arg-type]
    assert groups == [["b #0", "b #1"], ["a #0", "a #1"]]
    assert calls == [
        ("b", Path("/co/b"), policy, limits, factory, reward, 2),
        ("a", Path("/co/a"), policy, limits, factory, reward, 2),
    ]
    assert not learner.gathered_now
    assert source.collect(learner, 2, [], 2) == []  # type: ignore[arg-type]


def test_sources_both_kinds_are_rollout_sources() -> None:
    from trainer.rl.remote import CeleryRollouts

    def takes(source: RolloutSource) -> RolloutSource:
        return source

    # Checked by mypy (structural typing), the collect signatures kept in step.
    assert takes(LocalRollouts(None, AgentSettings(), None, None))  # type: ignore[arg-type]
    assert CeleryRollouts.collect.__annotations__ == LocalRollouts.collect.__annotations__
