"""What the model saw around its Bash command in Leaf's task pod, recorded, and the
normalisation both sides go through before they are compared.

tests/fixtures/leaf_pod/bash_surroundings.json says how it was recorded (Leaf's runner
and Leaf's pod script in a stand-in for the pod). Used by the unit test (a plain
directory: the checks that need no sandbox, tests/unit/worker/agent/test_runner_launch.py)
and the integration test (the real backends, tests/integration/test_agent_sandbox.py).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

FIXTURE = Path(__file__).parents[1] / "fixtures" / "leaf_pod" / "bash_surroundings.json"
# The first line of a tool call's own processes in `ps -eo args` (Leaf's pod script).
CALL_SHELL = "/bin/bash -lc cd / && (trap "


@dataclass(frozen=True)
class Recorded:
    command: str
    observation: str


def recorded_calls() -> list[Recorded]:
    """Leaf's observations, in the order they were recorded on one pod."""
    calls = json.loads(FIXTURE.read_text(encoding="utf-8"))["calls"]
    return [Recorded(c["command"], c["observation"]) for c in calls]


def recorded(command: str) -> str:
    return next(c.observation for c in recorded_calls() if c.command == command)


def normalised(observation: str) -> str:
    """Random names (request files, exit markers) and pids out, as in the recording."""
    text = re.sub(r"[0-9a-f]{32}", "<hex>", observation)
    return re.sub(r": +\d+ Killed", ": <pid> Killed", text)


def split_processes(observation: str) -> tuple[list[str], list[str]]:
    """A `ps -eo args` observation as (the sandbox's or pod's own processes, the tool
    call's processes from its first shell down, the rest of the observation included)."""
    lines = observation.split("\n")
    first = next(i for i, line in enumerate(lines) if line.startswith(CALL_SHELL))
    header = lines.index("COMMAND")
    return lines[header + 1 : first], lines[first:]
