"""The name-to-backend table behind RIBBIT_MODEL__POLICY, and the one policy per process."""

from __future__ import annotations

from typing import get_args

import pytest

from worker.agent.policy import (
    BACKENDS,
    OpenAIPolicy,
    PolicyError,
    load_policy,
    policy_factory,
)
from worker.settings import AgentSettings, ModelSettings


def test_every_setting_names_a_backend_and_no_backend_is_unreachable() -> None:
    names = get_args(ModelSettings.model_fields["policy"].annotation)
    assert sorted(BACKENDS) == sorted(names)


def test_an_unknown_name_is_refused_with_the_known_ones() -> None:
    with pytest.raises(PolicyError, match="unknown policy 'vllm'; known: openai, replay"):
        policy_factory("vllm")


def test_replay_without_a_file_says_which_setting_is_missing() -> None:
    with pytest.raises(PolicyError, match="RIBBIT_MODEL__REPLAY_FILE"):
        load_policy(ModelSettings(policy="replay"), AgentSettings())


def test_the_same_settings_share_one_policy() -> None:
    model = ModelSettings(policy="openai", model="served-name-for-this-test")
    first = load_policy(model, AgentSettings())
    assert isinstance(first, OpenAIPolicy)
    assert load_policy(model, AgentSettings()) is first
    assert load_policy(model, AgentSettings(max_turns=3)) is not first
