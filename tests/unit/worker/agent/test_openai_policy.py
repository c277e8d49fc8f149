"""OpenAIPolicy against a real HTTP server on loopback speaking chat-completions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from tests.fakes import LocalDirSandbox
from tests.plugins.services import free_port
from tests.unit.worker.agent.conftest import ChatServer
from worker.agent import AgentTask, OpenAIPolicy, load_policy, run_agent
from worker.agent.policy import ContextWindowExceeded, PolicyError, TransformersPolicy
from worker.agent.tools import TOOL_SCHEMAS
from worker.settings import AgentSettings, ModelSettings

TASK = AgentTask(title="add() subtracts", body="Fix it.")


def completion(
    content: str | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
    finish: str = "stop",
    reasoning: str | None = None,
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    if reasoning:
        message["reasoning_content"] = reasoning
    return {
        "id": "x",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150},
    }


def fn_call(call_id: str, name: str, args: dict[str, Any] | str) -> dict[str, Any]:
    arguments = args if isinstance(args, str) else json.dumps(args)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def settings(url: str, **extra: Any) -> ModelSettings:
    return ModelSettings(
        policy="openai", model="frognano", openai_base_url=url, openai_retry_backoff_s=0.0, **extra
    )


def test_openai_run_edits_the_repo(chat_server: ChatServer, sandbox: LocalDirSandbox) -> None:
    chat_server.replies = [
        (
            200,
            completion(
                None,
                [
                    fn_call(
                        "call_a",
                        "Edit",
                        {
                            "file_path": "calc.py",
                            "old_string": "def add(a, b):\n    return a - b",
                            "new_string": "def add(a, b):\n    return a + b",
                        },
                    )
                ],
                finish="tool_calls",
                reasoning="The sign is wrong.",
            ),
        ),
        (200, completion("Fixed add().")),
    ]
    policy = OpenAIPolicy(settings(chat_server.url, openai_api_key=SecretStr("k-123")))
    result = run_agent(TASK, sandbox, policy, AgentSettings())
    assert result.exit_reason == "agent"
    assert "+    return a + b" in result.diff
    assert result.trajectory.turns[0].reasoning == "The sign is wrong."
    assert result.trajectory.turns[0].prompt_tokens == 120

    first, second = chat_server.requests
    assert first["model"] == "frognano"
    assert first["tools"] == TOOL_SCHEMAS
    assert (first["temperature"], first["top_p"], first["top_k"]) == (0.6, 0.95, 20)
    assert first["chat_template_kwargs"] == {"enable_thinking": True}
    # Leaf's request: parallel tool calls on, tool choice auto, no per-turn cap (this
    # policy has no tokenizer to measure the room left, so the server's window decides).
    assert first["parallel_tool_calls"] is True and first["tool_choice"] == "auto"
    assert "max_completion_tokens" not in first and "max_tokens" not in first
    assert [m["role"] for m in second["messages"]] == ["system", "user", "assistant", "tool"]
    assistant, tool = second["messages"][2:]
    assert isinstance(assistant["tool_calls"][0]["function"]["arguments"], str)
    assert tool == {
        "role": "tool",
        "tool_call_id": "call_a",
        "content": "Edited calc.py (1 replacement).",
    }
    assert chat_server.headers[0]["Authorization"] == "Bearer k-123"


def test_openai_retries_transient_failures(chat_server: ChatServer) -> None:
    chat_server.replies = [
        (503, {"error": "loading"}),
        (429, {"error": "busy"}),
        (200, completion("done")),
    ]
    turn = OpenAIPolicy(settings(chat_server.url)).generate(
        [{"role": "user", "content": "hi"}], TOOL_SCHEMAS
    )
    assert turn.content == "done" and len(chat_server.requests) == 3


def test_openai_gives_up_after_bounded_retries(chat_server: ChatServer) -> None:
    chat_server.replies = [(500, {"error": "down"})] * 10
    policy = OpenAIPolicy(settings(chat_server.url, openai_max_retries=2))
    with pytest.raises(PolicyError, match="failed 3 times"):
        policy.generate([{"role": "user", "content": "hi"}], TOOL_SCHEMAS)
    assert len(chat_server.requests) == 3


def test_openai_server_down_is_a_clear_model_error(sandbox: LocalDirSandbox) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    result = run_agent(
        TASK, sandbox, OpenAIPolicy(settings(url, openai_max_retries=1)), AgentSettings()
    )
    assert result.exit_reason == "llm_query_error"
    assert "is it running" in (result.error or "") and url in (result.error or "")


def test_openai_context_error_is_max_context(
    chat_server: ChatServer, sandbox: LocalDirSandbox
) -> None:
    chat_server.replies = [
        (400, {"error": {"message": "This model's maximum context length is 65536 tokens"}})
    ]
    result = run_agent(TASK, sandbox, OpenAIPolicy(settings(chat_server.url)), AgentSettings())
    assert result.exit_reason == "max_context_len"


def test_openai_client_error_is_not_retried(chat_server: ChatServer) -> None:
    chat_server.replies = [(401, {"error": "bad key"})]
    with pytest.raises(PolicyError, match="HTTP 401"):
        OpenAIPolicy(settings(chat_server.url)).generate(
            [{"role": "user", "content": "x"}], TOOL_SCHEMAS
        )
    assert len(chat_server.requests) == 1


def test_openai_raw_xml_content_is_parsed(chat_server: ChatServer) -> None:
    raw = (
        "Checking.\n</think>\n\n<tool_call>\n<function=Read>\n<parameter=file_path>\n"
        "calc.py\n</parameter>\n</function>\n</tool_call>"
    )
    chat_server.replies = [(200, completion(raw))]
    turn = OpenAIPolicy(settings(chat_server.url)).generate(
        [{"role": "user", "content": "x"}], TOOL_SCHEMAS
    )
    assert turn.reasoning == "Checking."
    assert [(c.name, c.arguments) for c in turn.tool_calls] == [("Read", {"file_path": "calc.py"})]


def test_openai_bad_arguments_json_becomes_error_observation(
    chat_server: ChatServer, sandbox: LocalDirSandbox
) -> None:
    chat_server.replies = [
        (200, completion(None, [fn_call("c1", "Read", "{not json")])),
        (200, completion("giving up")),
    ]
    result = run_agent(TASK, sandbox, OpenAIPolicy(settings(chat_server.url)), AgentSettings())
    assert result.exit_reason == "agent"
    obs = result.trajectory.turns[0].observations[0]
    # Leaf parses unparseable arguments as {} and runs the call.
    assert obs.is_error and obs.content == "ValueError: file_path is required"
    chat_server.replies = [
        (200, completion(None, [fn_call("c1", "Read", "{not json")])),
        (200, completion("giving up")),
    ]
    recover = AgentSettings(recover_malformed_calls=True)
    result = run_agent(TASK, sandbox, OpenAIPolicy(settings(chat_server.url)), recover)
    obs = result.trajectory.turns[0].observations[0]
    assert obs.is_error and "not valid JSON" in obs.content


def test_openai_length_finish_is_max_tokens(
    chat_server: ChatServer, sandbox: LocalDirSandbox
) -> None:
    chat_server.replies = [(200, completion("and so on and", finish="length"))]
    limits = AgentSettings(max_new_tokens=30)  # the reply used all 30 of its tokens
    result = run_agent(TASK, sandbox, OpenAIPolicy(settings(chat_server.url)), limits)
    assert result.exit_reason == "max_tokens_per_turn"
    # Leaf reads a length cut that did not use the turn's budget as a full context.
    chat_server.replies = [(200, completion("and so on and", finish="length"))]
    result = run_agent(TASK, sandbox, OpenAIPolicy(settings(chat_server.url)), AgentSettings())
    assert result.exit_reason == "max_context_len"


def test_openai_cancel_between_retries(chat_server: ChatServer) -> None:
    chat_server.replies = [(503, {"error": "loading"})] * 5
    polls: list[int] = []

    def stop() -> bool:
        polls.append(1)
        return len(polls) > 1

    turn = OpenAIPolicy(settings(chat_server.url)).generate(
        [{"role": "user", "content": "x"}], TOOL_SCHEMAS, should_stop=stop
    )
    assert turn.finish_reason == "cancelled" and len(chat_server.requests) == 1


def _long_conversation(tokenizer: Any) -> tuple[list[dict[str, Any]], int]:
    messages = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the failing test in calc.py please. " * 300},
    ]
    ids = tokenizer.apply_chat_template(
        messages, tools=TOOL_SCHEMAS, add_generation_prompt=True, tokenize=True, return_dict=False
    )
    assert len(ids) > 1024  # the window must be at least 1,024 tokens (AgentSettings)
    return messages, len(ids)


def test_served_turn_budget_is_the_in_process_backends(
    chat_server: ChatServer, tiny_model_dir: Path
) -> None:
    # The same conversation, 7 tokens short of the window: the in-process backend gets
    # 7 new tokens and stops on the window; the server is asked for exactly 7 (never a
    # fixed 8,192 it would refuse outright) and its length cut reads the same way.
    in_process = load_policy(ModelSettings(model=str(tiny_model_dir)), AgentSettings())
    assert isinstance(in_process, TransformersPolicy)
    messages, n_prompt = _long_conversation(in_process.tokenizer)
    limits = AgentSettings(max_context_tokens=n_prompt + 7, temperature=0.0)
    local = in_process.generate(messages, TOOL_SCHEMAS, limits=limits)

    served = OpenAIPolicy(settings(chat_server.url), tokenizer=in_process.tokenizer)
    chat_server.replies = [(200, completion("and so on", finish="length"))]
    remote = served.generate(messages, TOOL_SCHEMAS, limits=limits)
    assert chat_server.requests[0]["max_completion_tokens"] == 7
    assert remote.finish_reason == local.finish_reason == "context_length"  # greedy: fixed

    # With room to spare both get the per-turn cap and a length cut is the cap's.
    chat_server.replies = [(200, completion("and so on", finish="length"))]
    roomy = AgentSettings(max_context_tokens=n_prompt + 9000)
    assert served.generate(messages, TOOL_SCHEMAS, limits=roomy).finish_reason == "length"
    assert chat_server.requests[1]["max_completion_tokens"] == roomy.max_new_tokens == 8192


def test_served_prompt_past_the_window_ends_before_asking(
    chat_server: ChatServer, sandbox: LocalDirSandbox, tiny_model_dir: Path
) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    messages, n_prompt = _long_conversation(tokenizer)
    policy = OpenAIPolicy(settings(chat_server.url), tokenizer=tokenizer)
    with pytest.raises(ContextWindowExceeded, match=f"prompt is {n_prompt} tokens"):
        policy.generate(messages, TOOL_SCHEMAS, limits=AgentSettings(max_context_tokens=n_prompt))
    assert chat_server.requests == []
