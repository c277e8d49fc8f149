"""Which backend a setting names, and the one policy per process built from it."""

from __future__ import annotations

import threading
from collections.abc import Callable

from worker.agent.policy.base import Policy, PolicyError
from worker.agent.policy.openai_policy import OpenAIPolicy
from worker.agent.policy.replay_policy import ReplayPolicy
from worker.agent.policy.transformers_policy import TransformersPolicy
from worker.settings import AgentSettings, ModelSettings

PolicyFactory = Callable[[ModelSettings, AgentSettings], Policy]


def _replay(model: ModelSettings, agent: AgentSettings) -> Policy:
    if model.replay_file is None:
        raise PolicyError("policy=replay needs RIBBIT_MODEL__REPLAY_FILE")
    return ReplayPolicy.from_file(model.replay_file)


# RIBBIT_MODEL__POLICY names one of these.
BACKENDS: dict[str, PolicyFactory] = {
    "transformers": TransformersPolicy,
    "openai": OpenAIPolicy,
    "replay": _replay,
}

_POLICIES: dict[str, Policy] = {}
_POLICIES_LOCK = threading.Lock()


def policy_factory(name: str) -> PolicyFactory:
    """The constructor of the backend called ``name``."""
    try:
        return BACKENDS[name]
    except KeyError:
        raise PolicyError(
            f"unknown policy {name!r}; known: {', '.join(sorted(BACKENDS))}"
        ) from None


def load_policy(model: ModelSettings, agent: AgentSettings) -> Policy:
    """The policy for these settings, created once per process (weights load once per
    worker process, never per job)."""
    key = model.model_dump_json() + agent.model_dump_json()
    with _POLICIES_LOCK:
        policy = _POLICIES.get(key)
        if policy is None:
            if model.policy == "transformers":
                # Let go of policies holding earlier weights (a promotion or rollback).
                for old in [k for k, p in _POLICIES.items() if isinstance(p, TransformersPolicy)]:
                    del _POLICIES[old]
            policy = policy_factory(model.policy)(model, agent)
            _POLICIES[key] = policy
        return policy
