"""The agent: the loop, its tools, the tool-call parser, prompts and policies.

Importing this package is light on purpose (no torch/transformers); the
transformers backend imports them when a model is loaded.
"""

from bot.store.records.trajectory import (
    SCHEMA_VERSION,
    ExitReason,
    ToolCall,
    ToolObservation,
    Trajectory,
    TurnRecord,
    read_jsonl,
    write_jsonl,
)
from worker.agent.loop import AgentResult, run_agent
from worker.agent.policy import (
    AssistantTurn,
    ContextWindowExceeded,
    OpenAIPolicy,
    Policy,
    PolicyError,
    ReplayPolicy,
    TransformersPolicy,
    load_policy,
)
from worker.agent.prompt import AgentTask, IssueComment, Vouched, first_user_message
from worker.agent.tools import TOOL_NAMES, TOOL_SCHEMAS

__all__ = [
    "SCHEMA_VERSION",
    "TOOL_NAMES",
    "TOOL_SCHEMAS",
    "AgentResult",
    "AgentTask",
    "AssistantTurn",
    "ContextWindowExceeded",
    "ExitReason",
    "IssueComment",
    "OpenAIPolicy",
    "Policy",
    "PolicyError",
    "ReplayPolicy",
    "ToolCall",
    "ToolObservation",
    "Trajectory",
    "TransformersPolicy",
    "TurnRecord",
    "Vouched",
    "first_user_message",
    "load_policy",
    "read_jsonl",
    "run_agent",
    "write_jsonl",
]
