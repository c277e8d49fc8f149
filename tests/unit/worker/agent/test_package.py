from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]


def test_importing_the_agent_package_stays_light() -> None:
    code = (
        "import sys, worker.agent\n"
        "heavy = [m for m in ('torch', 'transformers') if m in sys.modules]\n"
        "print(','.join(heavy))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert out.stdout.strip() == ""


def test_contract_names_are_exported() -> None:
    import worker.agent as agent

    for name in (
        "run_agent",
        "AgentTask",
        "AgentResult",
        "Policy",
        "AssistantTurn",
        "load_policy",
        "TransformersPolicy",
        "OpenAIPolicy",
        "ReplayPolicy",
        "Trajectory",
        "TurnRecord",
        "read_jsonl",
        "write_jsonl",
    ):
        assert hasattr(agent, name), name
