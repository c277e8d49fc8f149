"""The in-process fast decode path (static cache, compiled step) against the plain one,
on the tiny qwen3_5 model on CPU: the same greedy tokens and log-probs.

inductor's compile on CPU takes minutes and is not what a GPU runs anyway, so the
compiled check traces the step with dynamo's ``eager`` backend: the captured graph over
the static cache is exercised, the generated kernels are not (the GPU script compares
those, with a stated log-prob tolerance)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from worker.agent import TransformersPolicy
from worker.agent.policy.fast_decode import DecodePlan, plan_decode
from worker.settings import AgentSettings

MESSAGES = [{"role": "user", "content": "Fix add() in calc.py: it subtracts."}]
GREEDY = AgentSettings(temperature=0.0, max_new_tokens=24)
STATIC = DecodePlan(static_cache=True, compile=False, reason="test")
TRACED = DecodePlan(
    static_cache=True, compile=True, reason="test", compile_backend="eager", compile_any_device=True
)


def _load(tiny_model_dir: Path) -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    return AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval(), tokenizer


@pytest.fixture(scope="module")
def tiny(tiny_model_dir: Path) -> tuple[Any, Any]:
    return _load(tiny_model_dir)


def _policy(tiny: tuple[Any, Any], plan: DecodePlan | str) -> TransformersPolicy:
    model, tokenizer = tiny
    return TransformersPolicy.from_model(model, tokenizer, fast_decode=plan)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "plan",
    [STATIC, pytest.param(TRACED, marks=pytest.mark.slow)],  # tracing: ~25 s on 2 cores
    ids=["static-cache", "static-cache-traced"],
)
def test_fast_decode_greedy_tokens_equal_the_plain_path(
    tiny: tuple[Any, Any], plan: DecodePlan
) -> None:
    plain_turn = _policy(tiny, "off").generate(MESSAGES, [], limits=GREEDY)
    fast_turn = _policy(tiny, plan).generate(MESSAGES, [], limits=GREEDY)
    assert plain_turn.completion_token_ids and len(plain_turn.completion_token_ids) > 4
    assert fast_turn.completion_token_ids == plain_turn.completion_token_ids
    assert fast_turn.completion_logprobs == pytest.approx(plain_turn.completion_logprobs, abs=1e-5)
    assert fast_turn.finish_reason == plain_turn.finish_reason
    model = tiny[0]
    # The fast path really ran: transformers records the static cache's size on the
    # model, and the compiled call with the config it was compiled with.
    assert getattr(model, "_previous_max_cache_length", 0) >= len(plain_turn.prompt_token_ids)
    if plan.compile:
        assert model._last_compile_config.backend == "eager"


def test_fast_decode_failure_falls_back_to_plain_with_the_reason_logged(
    tiny_model_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A model of its own: the failed compile must not leave its state on the shared one.
    broken = DecodePlan(
        static_cache=True,
        compile=True,
        reason="test",
        compile_backend="no-such-backend",
        compile_any_device=True,
    )
    policy = _policy(_load(tiny_model_dir), broken)
    with caplog.at_level(logging.WARNING):
        turn = policy.generate(MESSAGES, [], limits=GREEDY)
    assert turn.completion_token_ids
    assert not policy.decode_plan.fast
    assert "no-such-backend" in policy.decode_plan.reason
    assert "falling back to plain decoding" in caplog.text


def test_fast_decode_plan_follows_the_setting_and_the_device(tiny: tuple[Any, Any]) -> None:
    model = tiny[0]
    assert plan_decode(model, "off") == DecodePlan(False, False, "RIBBIT_MODEL__FAST_DECODE=off")
    auto = plan_decode(model, "auto")
    assert not auto.fast and "cpu" in auto.reason  # auto is on for CUDA only
    on = plan_decode(model, "on")
    assert on.static_cache and not on.compile  # the step is compiled on CUDA only
    assert on.generation_kwargs() == {"cache_implementation": "static", "disable_compile": True}
    assert plan_decode(model, "off").generation_kwargs() == {}


def test_fast_decode_plan_refuses_a_model_with_a_cache_of_its_own(
    tiny: tuple[Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    model = tiny[0]
    monkeypatch.setattr(
        type(model), "_supports_default_dynamic_cache", classmethod(lambda c: False)
    )
    plan = plan_decode(model, "on")
    assert not plan.fast and "a cache of its own" in plan.reason


def test_fast_decode_setting_loads_its_own_plan(tiny_model_dir: Path) -> None:
    from worker.agent import load_policy
    from worker.settings import ModelSettings

    policy = load_policy(ModelSettings(model=str(tiny_model_dir), fast_decode="on"), GREEDY)
    assert isinstance(policy, TransformersPolicy)
    assert policy.decode_plan.static_cache and not policy.decode_plan.compile
