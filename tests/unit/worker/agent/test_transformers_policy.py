"""The transformers backend end to end on tiny real models (CPU, a few seconds)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.fakes import LocalDirSandbox
from tests.plugins.models import GLOB_CALL_TOKEN
from worker.agent import AgentTask, Trajectory, TransformersPolicy, load_policy, run_agent
from worker.agent.policy import ContextWindowExceeded
from worker.agent.prompt import SYSTEM_PROMPT, initial_messages
from worker.agent.tools import TOOL_SCHEMAS
from worker.settings import AgentSettings, ModelSettings

TASK = AgentTask(title="add() subtracts", body="Fix it.")
MESSAGES = initial_messages(TASK)


@pytest.fixture(scope="module")
def tiny_policy(tiny_model_dir: Path) -> TransformersPolicy:
    policy = load_policy(ModelSettings(model=str(tiny_model_dir)), AgentSettings())
    assert isinstance(policy, TransformersPolicy)
    return policy


def programmed(
    factory: Callable[..., Path], name: str, first: str, then: dict[str, str] | None = None
) -> TransformersPolicy:
    # With thinking on, every prompt ends "<|im_start|>assistant\n<think>\n": the last
    # token is "\n", so "\n" -> first decides the first generated token.
    path = factory(name, {"\n": first, **(then or {})})
    return TransformersPolicy(ModelSettings(model=str(path)))


def test_load_policy_loads_once_per_process(
    tiny_model_dir: Path, tiny_policy: TransformersPolicy
) -> None:
    same = load_policy(ModelSettings(model=str(tiny_model_dir)), AgentSettings())
    assert same is tiny_policy
    other_limits = load_policy(ModelSettings(model=str(tiny_model_dir)), AgentSettings(max_turns=3))
    assert isinstance(other_limits, TransformersPolicy)
    assert other_limits.model is tiny_policy.model  # weights shared, never reloaded


def test_render_uses_the_tokenizers_chat_template(tiny_policy: TransformersPolicy) -> None:
    text = tiny_policy.render(MESSAGES, TOOL_SCHEMAS, enable_thinking=True)
    assert text.startswith("<|im_start|>system\n# Tools")
    assert '"name": "Edit"' in text and "<tool_call>\n<function=example_function_name>" in text
    assert SYSTEM_PROMPT in text and "add() subtracts" in text
    assert text.endswith("<|im_start|>assistant\n<think>\n")
    off = tiny_policy.render(MESSAGES, TOOL_SCHEMAS, enable_thinking=False)
    assert off.endswith("<think>\n\n</think>\n\n")


def test_generate_records_tokens_and_logprobs(tiny_policy: TransformersPolicy) -> None:
    turn = tiny_policy.generate(MESSAGES, TOOL_SCHEMAS, limits=AgentSettings(max_new_tokens=16))
    assert turn.prompt_token_ids and turn.completion_token_ids is not None
    assert turn.prompt_tokens == len(turn.prompt_token_ids)
    assert turn.completion_tokens == len(turn.completion_token_ids) <= 16
    assert turn.completion_logprobs is not None
    assert len(turn.completion_logprobs) == len(turn.completion_token_ids)
    assert all(lp <= 0.0 for lp in turn.completion_logprobs)
    assert turn.finish_reason in ("stop", "length")


def test_logprobs_match_a_forward_pass(tiny_policy: TransformersPolicy) -> None:
    import torch

    # Temperature 1 and no filtering: the sampling distribution is the model's own, so a
    # plain forward pass over prompt + completion must give the recorded log-probs.
    limits = AgentSettings(max_new_tokens=24, temperature=1.0, top_k=0, top_p=1.0, min_p=0.0)
    turn = tiny_policy.generate(MESSAGES, TOOL_SCHEMAS, limits=limits)
    assert turn.prompt_token_ids and turn.completion_token_ids and turn.completion_logprobs
    ids = turn.prompt_token_ids + turn.completion_token_ids
    with torch.no_grad():
        logits = tiny_policy.model(torch.tensor([ids])).logits[0].float()
    n = len(turn.prompt_token_ids)
    logp = torch.log_softmax(logits[n - 1 : len(ids) - 1], dim=-1)
    expected = logp.gather(1, torch.tensor(turn.completion_token_ids).unsqueeze(1)).squeeze(1)
    torch.testing.assert_close(
        torch.tensor(turn.completion_logprobs), expected, atol=1e-4, rtol=1e-4
    )


def test_stops_on_im_end(programmed_model_dir: Callable[..., Path]) -> None:
    policy = programmed(programmed_model_dir, "eos-im-end", "<|im_end|>")
    turn = policy.generate(MESSAGES, TOOL_SCHEMAS, limits=AgentSettings(max_new_tokens=64))
    assert turn.finish_reason == "stop"
    eos = policy.tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert turn.completion_token_ids == [eos]
    assert turn.content == "" and turn.tool_calls == []


def test_stops_on_endoftext(programmed_model_dir: Callable[..., Path]) -> None:
    policy = programmed(programmed_model_dir, "eos-endoftext", "<|endoftext|>")
    turn = policy.generate(MESSAGES, TOOL_SCHEMAS, limits=AgentSettings(max_new_tokens=64))
    assert turn.finish_reason == "stop" and turn.completion_tokens == 1


def test_run_ends_max_tokens(repo: Path, programmed_model_dir: Callable[..., Path]) -> None:
    policy = programmed(programmed_model_dir, "never-eos", "x", {"x": "x"})
    with LocalDirSandbox(repo) as sandbox:
        result = run_agent(TASK, sandbox, policy, AgentSettings(max_new_tokens=16))
    assert result.exit_reason == "max_tokens_per_turn"
    (turn,) = result.trajectory.turns
    assert turn.completion_tokens == 16 and turn.raw_text == "x" * 16


def test_run_ends_max_turns_with_real_tool_calls(
    repo: Path, programmed_model_dir: Callable[..., Path], tmp_path: Path
) -> None:
    policy = programmed(
        programmed_model_dir, "glob-forever", GLOB_CALL_TOKEN, {GLOB_CALL_TOKEN: "<|im_end|>"}
    )
    with LocalDirSandbox(repo) as sandbox:
        result = run_agent(TASK, sandbox, policy, AgentSettings(max_turns=2))
    assert result.exit_reason == "max_turns"
    turns = result.trajectory.turns
    assert len(turns) == 2
    for turn in turns:
        assert [c.name for c in turn.tool_calls] == ["Glob"]
        assert turn.observations[0].content == "calc.py"
        assert turn.completion_token_ids and len(turn.completion_token_ids) == 2
    # The second prompt shows the model its own call and the tool's answer.
    second = policy.tokenizer.decode(turns[1].prompt_token_ids)
    assert "<function=Glob>\n<parameter=pattern>\n*.py\n</parameter>" in second
    assert "<tool_response>\ncalc.py\n</tool_response>" in second
    # Round trip and training view.
    path = tmp_path / "t.jsonl"
    result.trajectory.write_jsonl(path)
    (back,) = Trajectory.read_jsonl(path)
    assert back.turns[1].completion_logprobs == turns[1].completion_logprobs
    segments = back.training_segments()
    assert sum(sum(s.loss_mask) for s in segments) == 4
    for seg in segments:
        model_tokens = [t for t, m in zip(seg.input_ids, seg.loss_mask, strict=True) if m]
        assert model_tokens[-1] == policy.tokenizer.convert_tokens_to_ids("<|im_end|>")


def test_run_ends_max_context_before_generating(
    repo: Path, tiny_policy: TransformersPolicy
) -> None:
    with pytest.raises(ContextWindowExceeded):
        tiny_policy.generate(MESSAGES, TOOL_SCHEMAS, limits=AgentSettings(max_context_tokens=1024))
    with LocalDirSandbox(repo) as sandbox:
        result = run_agent(TASK, sandbox, tiny_policy, AgentSettings(max_context_tokens=1024))
    assert result.exit_reason == "max_context_len"
    assert result.trajectory.turns == []


def test_run_ends_max_context_while_generating(
    repo: Path, programmed_model_dir: Callable[..., Path]
) -> None:
    policy = programmed(programmed_model_dir, "never-eos", "x", {"x": "x"})
    n_prompt = len(
        policy.tokenizer(
            policy.render(MESSAGES, TOOL_SCHEMAS, enable_thinking=True), add_special_tokens=False
        )["input_ids"]
    )
    limits = AgentSettings(max_context_tokens=n_prompt + 5, max_new_tokens=64)
    with LocalDirSandbox(repo) as sandbox:
        result = run_agent(TASK, sandbox, policy, limits)
    assert result.exit_reason == "max_context_len"
    assert result.trajectory.turns[0].finish_reason == "context_length"
    assert result.trajectory.turns[0].completion_tokens == 5


def test_should_stop_ends_generation(programmed_model_dir: Callable[..., Path]) -> None:
    policy = programmed(programmed_model_dir, "never-eos", "x", {"x": "x"})
    polls = []

    def stop() -> bool:
        polls.append(1)
        return len(polls) >= 3

    turn = policy.generate(
        MESSAGES, TOOL_SCHEMAS, limits=AgentSettings(max_new_tokens=200), should_stop=stop
    )
    assert turn.finish_reason == "cancelled"
    assert turn.completion_tokens is not None and turn.completion_tokens < 10


def test_missing_model_is_a_policy_error(tmp_path: Path) -> None:
    from worker.agent.policy import PolicyError

    with pytest.raises(PolicyError, match="cannot load model"):
        TransformersPolicy(ModelSettings(model=str(tmp_path / "nothing-here")))


def test_from_model_wraps_weights_in_memory(tiny_policy: TransformersPolicy) -> None:
    wrapped = TransformersPolicy.from_model(
        tiny_policy.model, tiny_policy.tokenizer, model_name="trainer-policy"
    )
    assert wrapped.model_name == "trainer-policy"
    turn = wrapped.generate(MESSAGES, TOOL_SCHEMAS, limits=AgentSettings(max_new_tokens=16))
    assert turn.completion_token_ids is not None and len(turn.completion_token_ids) <= 16


def test_offline_hub_id_fails_fast_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    from huggingface_hub import constants

    from worker.agent.policy import PolicyError

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(PolicyError, match="HF_HUB_OFFLINE"):
        TransformersPolicy(ModelSettings(model="microsoft/FrogNano-4B-2609"))
