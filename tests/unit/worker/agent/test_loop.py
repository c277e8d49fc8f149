from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from bot.store.records.trajectory import ToolCall
from tests.fakes import LocalDirSandbox, ScriptedPolicy
from worker.agent import AgentTask, ReplayPolicy, Trajectory, TurnRecord, load_policy, run_agent
from worker.agent.loop import AgentRun, AgentStopped
from worker.agent.policy import AssistantTurn, ContextWindowExceeded
from worker.settings import AgentSettings, ModelSettings

TASK = AgentTask(
    title="add() subtracts", body="`add(2, 3)` returns -1.", test_command="python -m pytest -q"
)
LIMITS = AgentSettings()


def xml_call(name: str, **args: str) -> str:
    params = "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in args.items())
    return f"<tool_call>\n<function={name}>\n{params}</function>\n</tool_call>"


FIX_SCRIPT = [
    "<think>\nLook at the code.\n</think>\n\n" + xml_call("Read", file_path="calc.py"),
    xml_call(
        "Edit",
        file_path="calc.py",
        old_string="def add(a, b):\n    return a - b",
        new_string="def add(a, b):\n    return a + b",
    ),
    xml_call("Bash", command="python3 -B -c 'import calc; print(calc.add(2, 3))'"),
    "<think>\nPrints 5.\n</think>\n\nFixed `add` to return a + b.",
]


def test_loop_completes_and_returns_the_diff(sandbox: LocalDirSandbox) -> None:
    seen: list[TurnRecord] = []
    result = run_agent(TASK, sandbox, ScriptedPolicy(FIX_SCRIPT), LIMITS, on_turn=seen.append)
    assert result.exit_reason == "agent"
    assert "+    return a + b" in result.diff
    traj = result.trajectory
    assert traj.exit_reason == "agent" and traj.diff == result.diff
    assert [t.index for t in traj.turns] == [0, 1, 2, 3] == [t.index for t in seen]
    assert traj.turns[0].reasoning == "Look at the code."
    assert "5" in traj.turns[2].observations[0].content
    assert traj.turns[3].content == "Fixed `add` to return a + b."
    roles = [m["role"] for m in traj.messages]
    assert roles == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    tool_msg = traj.messages[3]
    assert tool_msg["tool_call_id"] == traj.messages[2]["tool_calls"][0]["id"]
    assert set(tool_msg) == {"role", "tool_call_id", "content"}  # Leaf sends no name
    assert "add() subtracts" in traj.messages[1]["content"]
    # Repo hints reach the prompt only when the repo opts in.
    assert "python -m pytest -q" not in traj.messages[1]["content"]


def test_a_run_is_steps_and_a_step_may_end_it_with_its_reason(sandbox: LocalDirSandbox) -> None:
    # AgentRun's parts are overridable, as mini-swe-agent's DefaultAgent's are: a variant
    # that vetoes tool calls ends the run through the same stop as the built-in reasons.
    class NoEdits(AgentRun):
        def execute_actions(self, turn: AssistantTurn) -> Any:
            if any(call.name == "Edit" for call in turn.tool_calls):
                raise AgentStopped("tool_error", "edits are not allowed here")
            return super().execute_actions(turn)

    run = NoEdits(TASK, sandbox, ScriptedPolicy(FIX_SCRIPT), LIMITS)
    result = run.run()
    assert (result.exit_reason, result.error) == ("tool_error", "edits are not allowed here")
    assert [t.index for t in result.trajectory.turns] == [0]  # the vetoed turn is unrecorded
    assert result.diff == "" and result.trajectory.diff == ""


def test_loop_stops_at_max_turns(sandbox: LocalDirSandbox) -> None:
    policy = ScriptedPolicy([xml_call("Glob", pattern="*")] * 10)
    result = run_agent(TASK, sandbox, policy, AgentSettings(max_turns=3))
    assert result.exit_reason == "max_turns"
    assert len(result.trajectory.turns) == 3


def test_loop_model_error_when_policy_fails(sandbox: LocalDirSandbox) -> None:
    result = run_agent(TASK, sandbox, ScriptedPolicy([xml_call("Glob", pattern="*")]), LIMITS)
    assert result.exit_reason == "llm_query_error"
    assert "script has only 1 turns" in (result.error or "")


class _Raising:
    name = "raising"
    model_name = "raising"

    def __init__(self, exc: Exception) -> None:
        self.exc = exc

    def generate(self, messages: Any, tools: Any, **kwargs: Any) -> AssistantTurn:
        raise self.exc


def test_loop_any_policy_exception_is_model_error(sandbox: LocalDirSandbox) -> None:
    result = run_agent(TASK, sandbox, _Raising(RuntimeError("boom")), LIMITS)
    assert result.exit_reason == "llm_query_error" and "boom" in (result.error or "")


def test_loop_context_exceeded(sandbox: LocalDirSandbox) -> None:
    result = run_agent(TASK, sandbox, _Raising(ContextWindowExceeded("too long")), LIMITS)
    assert result.exit_reason == "max_context_len"


def test_loop_context_from_token_counts(sandbox: LocalDirSandbox) -> None:
    turn = AssistantTurn(
        "",
        None,
        [ToolCall("c", "Glob", {"pattern": "*"})],
        "stop",
        prompt_tokens=2000,
        completion_tokens=100,
    )
    result = run_agent(
        TASK, sandbox, ScriptedPolicy([turn] * 5), AgentSettings(max_context_tokens=2048)
    )
    assert result.exit_reason == "max_context_len"
    assert len(result.trajectory.turns) == 1


@pytest.mark.parametrize(
    ("finish", "reason"), [("length", "max_tokens_per_turn"), ("context_length", "max_context_len")]
)
def test_loop_truncated_turn_ends_the_run(
    sandbox: LocalDirSandbox, finish: Any, reason: str
) -> None:
    turn = AssistantTurn("half a thought", None, [], finish)
    result = run_agent(TASK, sandbox, ScriptedPolicy([turn]), LIMITS)
    assert result.exit_reason == reason


def test_loop_garbage_policy_ends_cleanly(sandbox: LocalDirSandbox) -> None:
    garbage = [
        "<tool_call>\n<function=Read>\n<parameter=file_path>\ncalc.py",  # truncated
        "<tool_call>\nrun tests please\n</tool_call>",
        xml_call("Explode", target="everything"),
        xml_call("Read", colour="red"),
        xml_call("Bash"),
        "\x00\x01 ]]> </function> <parameter=",
    ]
    result = run_agent(TASK, sandbox, ScriptedPolicy(garbage), LIMITS)
    assert result.exit_reason == "agent"  # the last one has no call at all
    obs = [o for t in result.trajectory.turns for o in t.observations]
    assert len(obs) == 5 and all(o.is_error for o in obs)
    # As in Leaf: an unparseable call runs with no arguments.
    assert obs[0].content == "ValueError: file_path is required"
    assert obs[2].content == "Unknown tool: Explode"
    assert obs[4].content == "ValueError: command is required"
    assert result.diff == ""
    recover = LIMITS.model_copy(update={"recover_malformed_calls": True})
    result = run_agent(TASK, sandbox, ScriptedPolicy(garbage), recover)
    obs = [o for t in result.trajectory.turns for o in t.observations]
    assert obs[0].content.startswith("Error: ") and "truncated" in obs[0].content


@pytest.mark.parametrize("timeout", ["inf", "1e400", str(10**400)])
def test_an_infinite_bash_timeout_ends_with_tool_error_and_keeps_the_patch(
    sandbox: LocalDirSandbox, timeout: str
) -> None:
    script = [
        xml_call("Write", file_path="notes.txt", content="kept\n"),
        xml_call("Bash", command="true", timeout=timeout),
        "never asked for",
    ]
    result = run_agent(TASK, sandbox, ScriptedPolicy(script), LIMITS)
    assert result.exit_reason == "tool_error"
    assert result.trajectory.exit_reason == "tool_error"
    assert result.error is not None and result.error.startswith("OverflowError: ")
    assert "+kept" in result.diff and result.trajectory.diff == result.diff
    assert len(result.trajectory.turns) == 2


def test_a_lone_surrogate_ends_with_tool_error_and_keeps_the_patch(
    sandbox: LocalDirSandbox,
) -> None:
    script = [
        xml_call("Write", file_path="notes.txt", content="kept\n"),
        xml_call("Bash", command="echo \ud800"),
        "never asked for",
    ]
    result = run_agent(TASK, sandbox, ScriptedPolicy(script), LIMITS)
    assert result.exit_reason == "tool_error"
    assert result.error is not None and result.error.startswith("UnicodeEncodeError: ")
    assert "+kept" in result.diff and len(result.trajectory.turns) == 2


def test_loop_cancel_before_start(sandbox: LocalDirSandbox) -> None:
    cancel = threading.Event()
    cancel.set()
    result = run_agent(TASK, sandbox, ScriptedPolicy(FIX_SCRIPT), LIMITS, cancel=cancel)
    assert result.exit_reason == "cancelled"
    assert result.trajectory.turns == []


def test_loop_cancel_kills_the_wait_for_a_running_tool(sandbox: LocalDirSandbox) -> None:
    cancel = threading.Event()
    policy = ScriptedPolicy([xml_call("Bash", command="sleep 5"), "done"])
    threading.Timer(0.3, cancel.set).start()
    result = run_agent(TASK, sandbox, policy, LIMITS, cancel=cancel)
    assert result.exit_reason == "cancelled"
    # Returned while the command still ran: a finished one would have an observation.
    assert result.trajectory.turns[0].observations == []


def test_loop_max_time(sandbox: LocalDirSandbox) -> None:
    policy = ScriptedPolicy([xml_call("Bash", command="sleep 5")] * 3)
    result = run_agent(TASK, sandbox, policy, AgentSettings(max_minutes=1 / 60))
    assert result.exit_reason == "max_time"


def test_loop_on_turn_errors_do_not_end_the_run(sandbox: LocalDirSandbox) -> None:
    def broken(_: TurnRecord) -> None:
        raise ValueError("reporting is down")

    result = run_agent(TASK, sandbox, ScriptedPolicy(FIX_SCRIPT), LIMITS, on_turn=broken)
    assert result.exit_reason == "agent"


def test_replay_reproduces_a_recorded_run(repo: Path, tmp_path: Path) -> None:
    with LocalDirSandbox(repo) as first:
        recorded = run_agent(TASK, first, ScriptedPolicy(FIX_SCRIPT), LIMITS)
    path = tmp_path / "traj.jsonl"
    recorded.trajectory.write_jsonl(path)
    settings = ModelSettings(policy="replay", replay_file=path)
    policy = load_policy(settings, LIMITS)
    assert isinstance(policy, ReplayPolicy)
    for _ in range(2):  # one cached policy serves several runs
        with LocalDirSandbox(repo) as again:
            replayed = run_agent(TASK, again, policy, LIMITS)
        assert replayed.exit_reason == "agent"
        assert replayed.diff == recorded.diff
        assert "+    return a + b" in replayed.diff
        assert replayed.trajectory.messages == recorded.trajectory.messages


def test_replay_past_the_end_is_model_error(sandbox: LocalDirSandbox) -> None:
    short = Trajectory(
        messages=[],
        tools=[],
        turns=[TurnRecord(0, "", None, [ToolCall("c", "Glob", {"pattern": "*"})], [], "stop")],
    )
    result = run_agent(TASK, sandbox, ReplayPolicy(short), LIMITS)
    assert result.exit_reason == "llm_query_error"


def test_user_turn_is_the_task_text_alone() -> None:
    from worker.agent.prompt import IssueComment, render_user_message

    task = AgentTask(
        title="add() subtracts",
        body="`add(2, 3)` returns -1.\n",
        comments=(IssueComment("maint", "See calc.py."),),
        test_command="python -m pytest -q",
        repo_instructions="Use tabs.",
    )
    # No footer facts known: the template's task section alone.
    assert render_user_message(task) == (
        "# Task\n\nadd() subtracts\n`add(2, 3)` returns -1.\n\nComment by @maint:\nSee calc.py.\n"
    )
    opted_in = AgentTask(**{**task.__dict__, "include_repo_context": True})
    assert render_user_message(opted_in) == (
        "# Task\n\nadd() subtracts\n`add(2, 3)` returns -1.\n\nComment by @maint:\n"
        "See calc.py.\n\nUse tabs.\n\nAbout this repository:\n"
        "- Run the tests with: python -m pytest -q\n"
    )
