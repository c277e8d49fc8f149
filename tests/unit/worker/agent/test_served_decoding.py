"""One argument decoding on every backend: the same recorded completion, sampled in
process, or served by a vLLM-shaped or an SGLang-shaped server (each with its own tool
parser's reading of the arguments), gives identical turns and tool calls.

SGLang 0.5.18's parser reads ``null`` as None for any type and a boolean that is not
``true`` as False; vLLM 0.28's agrees with Ribbit's. Both return the sampled token ids
when asked, and Ribbit decodes those (worker/agent/policy/decoding.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from bot.store.records.trajectory import ToolCall
from tests.unit.worker.agent.conftest import ChatServer
from worker.agent import OpenAIPolicy, load_policy
from worker.agent.policy import AssistantTurn, TransformersPolicy
from worker.agent.prompt import SYSTEM_PROMPT
from worker.agent.tools import TOOL_SCHEMAS
from worker.settings import AgentSettings, ModelSettings

MESSAGES = [
    {"role": "system", "content": SYSTEM_PROMPT},
    {"role": "user", "content": "add() subtracts."},
]


def _call(name: str, **params: str) -> str:
    body = "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in params.items())
    return f"<tool_call>\n<function={name}>\n{body}</function>\n</tool_call>"


# What the model wrote (thinking mode: the prompt already opened <think>).
RECORDED = (
    "The sign is wrong.\n</think>\n\n"
    + _call("Edit", file_path="calc.py", old_string="a - b", new_string="null", replace_all="yes")
    + "\n"
    + _call("Edit", file_path="calc.py", old_string="x", new_string="null", replace_all="1")
    + "\n"
    + _call("Write", file_path="notes.txt", content="null")
    + "\n"
    + _call("Bash", command="pytest -q", timeout="inf")
)
_EDIT = {"file_path": "calc.py", "new_string": "null"}
DECODED = [
    ("Edit", {**_EDIT, "old_string": "a - b", "replace_all": "yes"}),
    ("Edit", {**_EDIT, "old_string": "x", "replace_all": "1"}),
    ("Write", {"file_path": "notes.txt", "content": "null"}),
    ("Bash", {"command": "pytest -q", "timeout": "inf"}),
]
# Each server's own parse of those calls, as it hands them back in `tool_calls`.
VLLM_ARGUMENTS = [args for _, args in DECODED]
SGLANG_ARGUMENTS: list[dict[str, Any]] = [
    {"file_path": "calc.py", "old_string": "a - b", "new_string": None, "replace_all": False},
    {"file_path": "calc.py", "old_string": "x", "new_string": None, "replace_all": False},
    {"file_path": "notes.txt", "content": None},
    {"command": "pytest -q", "timeout": float("inf")},
]


@pytest.fixture
def tiny_policy(tiny_model_dir: Path) -> TransformersPolicy:
    policy = load_policy(ModelSettings(model=str(tiny_model_dir)), AgentSettings())
    assert isinstance(policy, TransformersPolicy)
    return policy


def _ids(policy: TransformersPolicy) -> tuple[list[int], list[int]]:
    tokenizer = policy.tokenizer
    prompt = tokenizer.apply_chat_template(
        MESSAGES, tools=TOOL_SCHEMAS, add_generation_prompt=True, tokenize=True, return_dict=False
    )
    completion = tokenizer.encode(RECORDED + "<|im_end|>", add_special_tokens=False)
    assert tokenizer.decode(completion, skip_special_tokens=False) == RECORDED + "<|im_end|>"
    return list(prompt), list(completion)


def _in_process(policy: TransformersPolicy, monkeypatch: pytest.MonkeyPatch) -> AssistantTurn:
    import torch

    _, completion = _ids(policy)
    vocab = len(policy.tokenizer)

    def sampled(input_ids: Any, **_: Any) -> Any:
        ids = torch.cat([input_ids, torch.tensor([completion])], dim=1)
        return SimpleNamespace(sequences=ids, scores=[torch.zeros(1, vocab)] * len(completion))

    monkeypatch.setattr(policy.model, "generate", sampled)
    return policy.generate(MESSAGES, TOOL_SCHEMAS)


def _served(
    server: str, arguments: list[dict[str, Any]], prompt: list[int], completion: list[int]
) -> dict[str, Any]:
    calls = [
        {
            "id": f"{server}-{i}",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(args)},
        }
        for i, ((name, _), args) in enumerate(zip(DECODED, arguments, strict=True))
    ]
    choice: dict[str, Any] = {
        "index": 0,
        "message": {
            "role": "assistant",
            "content": "",
            "reasoning_content": "The sign is wrong.",
            "tool_calls": calls,
        },
        "finish_reason": "tool_calls",
        "token_ids": completion,
        "logprobs": {"content": [{"token": f"token_id:{i}", "logprob": -0.5} for i in completion]},
    }
    body: dict[str, Any] = {"id": "x", "object": "chat.completion", "choices": [choice]}
    if server == "vllm":
        body["prompt_token_ids"] = prompt  # vLLM: on the response
    else:
        choice["prompt_token_ids"] = prompt  # SGLang: on the choice
        choice["logprobs"] = {"content": [{"token": "t", "logprob": -0.5} for _ in completion]}
    return body


def _shape(turn: AssistantTurn) -> tuple[Any, ...]:
    return (
        turn.content,
        turn.reasoning,
        [(c.id, c.name, c.arguments, c.error) for c in turn.tool_calls],
        turn.raw_text,
        turn.completion_token_ids,
    )


def test_in_process_vllm_and_sglang_decode_the_same_calls(
    tiny_policy: TransformersPolicy, chat_server: ChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    local = _in_process(tiny_policy, monkeypatch)
    assert [(c.name, c.arguments) for c in local.tool_calls] == DECODED
    prompt, completion = _ids(tiny_policy)
    model = ModelSettings(
        policy="openai", model="frognano", openai_base_url=chat_server.url, openai_retry_backoff_s=0
    )
    for server, arguments in (("vllm", VLLM_ARGUMENTS), ("sglang", SGLANG_ARGUMENTS)):
        chat_server.replies = [(200, _served(server, arguments, prompt, completion))]
        policy = OpenAIPolicy(model, tokenizer=tiny_policy.tokenizer)
        remote = policy.generate(MESSAGES, TOOL_SCHEMAS)
        assert _shape(remote) == _shape(local), server


def test_without_token_ids_a_servers_null_is_written_back(chat_server: ChatServer) -> None:
    # No ids to decode (or no tokenizer): the server's parse, with what can be known put
    # back; a boolean the server already collapsed ("yes" -> False) stays lost.
    body = _served("sglang", SGLANG_ARGUMENTS, [], [])
    for key in ("token_ids", "prompt_token_ids", "logprobs"):
        body["choices"][0].pop(key)
    chat_server.replies = [(200, body)]
    model = ModelSettings(
        policy="openai", model="frognano", openai_base_url=chat_server.url, openai_retry_backoff_s=0
    )
    turn = OpenAIPolicy(model).generate(MESSAGES, TOOL_SCHEMAS)
    assert turn.tool_calls[0] == ToolCall(
        "sglang-0",
        "Edit",
        {"file_path": "calc.py", "old_string": "a - b", "new_string": "null", "replace_all": False},
    )
    assert turn.tool_calls[2].arguments == {"file_path": "notes.txt", "content": "null"}
