"""Token ids and log-probs read from vLLM's and SGLang's chat-completion answers, and
what a malformed or hostile answer gives (never an exception, never wrong tokens)."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest

from worker.agent import served_tokens as st
from worker.agent.policy import OpenAIPolicy
from worker.agent.served_tokens import ServedTokens, served_tokens
from worker.settings import AgentSettings, ModelSettings

PROMPT = [1, 2, 3]
IDS = [7, 8, 9]
LPS = [-0.5, -1.25, -0.0]


def _logprobs(tokens: list[str], lps: list[Any]) -> dict[str, Any]:
    return {
        "content": [
            {"token": t, "logprob": lp, "bytes": None, "top_logprobs": []}
            for t, lp in zip(tokens, lps, strict=True)
        ]
    }


def vllm_answer(**choice_extra: Any) -> dict[str, Any]:
    choice = {
        "index": 0,
        "message": {"role": "assistant", "content": "hi"},
        "finish_reason": "stop",
        "logprobs": _logprobs([f"token_id:{i}" for i in IDS], LPS),
        "token_ids": IDS,
        **choice_extra,
    }
    return {"choices": [choice], "prompt_token_ids": PROMPT, "usage": {}}


def sglang_answer() -> dict[str, Any]:
    choice = {
        "index": 0,
        "message": {"role": "assistant", "content": "hi"},
        "finish_reason": "stop",
        "logprobs": _logprobs(["a", "b", "c"], LPS),
        "token_ids": IDS,
        "prompt_token_ids": PROMPT,
    }
    return {"choices": [choice], "usage": {}}


@pytest.fixture(autouse=True)
def _fresh_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(st, "_warned", threading.Event())


def test_vllm_and_sglang_shapes() -> None:
    expected = ServedTokens(PROMPT, IDS, LPS)
    assert served_tokens(vllm_answer()) == expected
    assert served_tokens(sglang_answer()) == expected


def test_vllm_ids_from_the_logprob_tokens_when_token_ids_are_missing() -> None:
    answer = vllm_answer()
    del answer["choices"][0]["token_ids"]
    assert served_tokens(answer) == ServedTokens(PROMPT, IDS, LPS)


@pytest.mark.parametrize(
    "spoil",
    [
        lambda a: a.pop("prompt_token_ids"),
        lambda a: a.update(prompt_token_ids=[]),
        lambda a: a.update(prompt_token_ids=[1, "2"]),
        lambda a: a.update(prompt_token_ids=[1, -2]),
        lambda a: a.update(prompt_token_ids=[True, 2]),
        lambda a: a["choices"][0].pop("logprobs"),
        lambda a: a["choices"][0].update(logprobs=None),
        lambda a: a["choices"][0].update(token_ids=[7, 8]),  # one id short
        lambda a: a["choices"][0].update(token_ids=[7, 8, 10]),  # disagrees with the tokens
        lambda a: a["choices"][0]["logprobs"]["content"][1].update(logprob="x"),
        lambda a: a["choices"][0]["logprobs"]["content"][1].update(logprob=0.5),
        lambda a: a["choices"][0]["logprobs"]["content"][1].update(logprob=float("nan")),
        lambda a: a["choices"][0]["logprobs"]["content"][1].update(logprob=None),
        lambda a: a["choices"][0]["logprobs"]["content"].append("junk"),
        lambda a: a.update(choices=[]),
        lambda a: a.update(choices=["junk"]),
    ],
)
def test_a_malformed_answer_gives_no_tokens(spoil: Any) -> None:
    answer = vllm_answer()
    spoil(answer)
    assert served_tokens(answer) is None


@pytest.mark.parametrize("token", ["token_id:-1", "token_id:", "token_id:١٢", "token_id:1 ", "7"])
def test_logprob_tokens_that_are_not_ids(token: str) -> None:
    answer = vllm_answer()
    del answer["choices"][0]["token_ids"]
    answer["choices"][0]["logprobs"]["content"][0]["token"] = token
    assert served_tokens(answer) is None


def test_missing_ids_warn_once(caplog: pytest.LogCaptureFixture) -> None:
    plain = {"choices": [{"index": 0, "message": {"content": "hi"}}]}
    with caplog.at_level(logging.WARNING, logger=st.__name__):
        assert served_tokens(plain) is None
        assert served_tokens(plain) is None
    assert len([r for r in caplog.records if "cannot be trained on" in r.getMessage()]) == 1


@pytest.mark.parametrize("server", ["vllm", "sglang", "other"])
def test_the_request_asks_vllm_and_sglang_for_tokens(server: str) -> None:
    model = ModelSettings(policy="openai", model="m", openai_server=server)  # type: ignore[arg-type]
    body = OpenAIPolicy(model).request_body([], [], AgentSettings())
    asked = {k: body.get(k) for k in st.TOKEN_REQUEST_FIELDS}
    if server == "other":  # a server that may refuse unknown keys is not sent them
        assert asked == dict.fromkeys(st.TOKEN_REQUEST_FIELDS)
    else:
        assert asked == st.TOKEN_REQUEST_FIELDS


def test_the_turn_carries_the_tokens() -> None:
    model = ModelSettings(policy="openai", model="m")
    turn = OpenAIPolicy(model)._parse_response(vllm_answer(), [], 0)
    assert turn.prompt_token_ids == PROMPT
    assert turn.completion_token_ids == IDS
    assert turn.completion_logprobs == LPS
