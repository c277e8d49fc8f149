"""Training samples and limits rollouts unlike serving only where that is written down:
trainer.config.SERVING_DEPARTURES names each difference and why, and the defaults of both
configs, the limits a rollout gets and trainer/README.md's table agree with it."""

from __future__ import annotations

from pathlib import Path

from trainer.config import SERVING_DEPARTURES, TrainSettings
from trainer.train import agent_limits
from worker.settings import AgentSettings

README = Path(__file__).resolve().parents[3] / "trainer" / "README.md"


def test_each_departure_is_the_two_configs_defaults() -> None:
    train, serve = TrainSettings(), AgentSettings()
    for d in SERVING_DEPARTURES:
        assert getattr(train, d.setting) == d.training, d.setting
        assert getattr(serve, d.setting) == d.serving, d.setting
        assert d.training != d.serving and d.why


def test_a_rollouts_limits_are_servings_but_for_the_listed_departures() -> None:
    rollout = agent_limits(TrainSettings()).model_dump()
    served = AgentSettings().model_dump()
    differing = {name for name in served if rollout[name] != served[name]}
    assert differing == {d.setting for d in SERVING_DEPARTURES}


def test_the_readme_table_lists_each_departure() -> None:
    text = README.read_text()
    for d in SERVING_DEPARTURES:
        assert f"| `{d.setting}` |" in text, d.setting
