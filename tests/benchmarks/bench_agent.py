"""Agent loop benchmark: ``python -m tests.benchmarks.bench_agent``.

Prints numbers, asserts nothing:

- the loop's own overhead per turn (prompt bookkeeping, tool dispatch, argument
  validation, trajectory recording: everything except generation and tool
  execution), measured with a scripted policy and a sandbox that does nothing;
- the tool-call parser's time per completion;
- CPU tokens/s of the tiny qwen3_5 test model through TransformersPolicy.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

from tests.fakes import NullSandbox, ScriptedPolicy
from worker.agent import AgentTask, run_agent
from worker.agent.parser import parse_completion
from worker.agent.tools import TOOL_SCHEMAS
from worker.settings import AgentSettings, ModelSettings

TASK = AgentTask(
    title="add() subtracts",
    body="`add(2, 3)` returns -1.\n" * 20,
    test_command="python -m pytest -q",
)

_CALLS = [
    "<think>\nLooking.\n</think>\n\n<tool_call>\n<function=Read>\n<parameter=file_path>\n"
    "calc.py\n</parameter>\n</function>\n</tool_call>",
    "<tool_call>\n<function=Bash>\n<parameter=command>\npython -m pytest -q\n</parameter>\n"
    "</function>\n</tool_call>",
    "<tool_call>\n<function=Edit>\n<parameter=file_path>\ncalc.py\n</parameter>\n"
    "<parameter=old_string>\nline one\n</parameter>\n<parameter=new_string>\nline 1\n"
    "</parameter>\n</function>\n</tool_call>",
]


def bench_loop_overhead(turns: int = 300, repeats: int = 5) -> None:
    script = [_CALLS[i % len(_CALLS)] for i in range(turns - 1)] + ["All done."]
    per_turn = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = run_agent(
            TASK, NullSandbox(), ScriptedPolicy(script), AgentSettings(max_turns=turns)
        )
        total = time.perf_counter() - start
        assert result.exit_reason == "agent"
        # With a null sandbox, tool time is all dispatch: validation, the exec thread.
        generation = sum(t.generation_s for t in result.trajectory.turns)
        per_turn.append((total - generation) / turns)
    print(
        f"loop overhead per turn ({turns} turns, scripted policy, null sandbox, tool "
        f"dispatch included): median {statistics.median(per_turn) * 1e6:.0f} us, "
        f"min {min(per_turn) * 1e6:.0f} us"
    )


def bench_parser(n: int = 5000) -> None:
    text = _CALLS[2] * 3
    start = time.perf_counter()
    for _ in range(n):
        parse_completion(text, TOOL_SCHEMAS, thinking_open=True)
    print(f"parser: {(time.perf_counter() - start) / n * 1e6:.0f} us per 3-call completion")


def bench_tiny_model(new_tokens: int = 128) -> None:
    from tests.plugins.models import build_tiny_model, program_model
    from worker.agent.policy import TransformersPolicy
    from worker.agent.prompt import initial_messages

    with tempfile.TemporaryDirectory() as tmp:
        base = build_tiny_model(Path(tmp) / "tiny")
        # A model that never ends its turn, so every run generates exactly new_tokens.
        path = program_model(base, Path(tmp) / "never-eos", {"\n": "x", "x": "x"})
        policy = TransformersPolicy(ModelSettings(model=str(path)))
        messages = initial_messages(TASK)
        limits = AgentSettings(max_new_tokens=new_tokens)
        policy.generate(messages, TOOL_SCHEMAS, limits=AgentSettings(max_new_tokens=16))  # warm
        short = AgentSettings(max_new_tokens=16)
        t0 = time.perf_counter()
        policy.generate(messages, TOOL_SCHEMAS, limits=short)
        t_short = time.perf_counter() - t0
        t0 = time.perf_counter()
        turn = policy.generate(messages, TOOL_SCHEMAS, limits=limits)
        t_long = time.perf_counter() - t0
        assert turn.completion_tokens == new_tokens
        decode_rate = (new_tokens - 16) / max(t_long - t_short, 1e-9)
        print(
            f"tiny qwen3_5 on CPU: prompt {turn.prompt_tokens} tokens; "
            f"{new_tokens} new tokens in {t_long:.2f} s "
            f"({new_tokens / t_long:.0f} tokens/s with prefill, "
            f"~{decode_rate:.0f} tokens/s decode)"
        )


def main() -> None:
    bench_loop_overhead()
    bench_parser()
    bench_tiny_model()


if __name__ == "__main__":
    main()
