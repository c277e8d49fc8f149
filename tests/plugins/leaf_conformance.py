"""The Leaf conformance script: tool calls on a fixture repository and, for each, the
exact text Leaf's tool runner gives (microsoft/FrogNano harness/leaf/tool_runner.py @
6dc21748). The expectations were produced by running Leaf's own runner on this
fixture; ``{ws}`` stands for the workspace's absolute path (``/workspace`` in a real
sandbox). Cases run in order: later ones see what earlier ones wrote.

Used by the unit test (a plain directory, tests/unit/worker/agent/test_tools.py) and
the integration test (both real sandbox backends, tests/integration/test_agent_sandbox.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

FIXTURE_FILES = {
    "README.md": "# calc\n",
    "calc.py": "def add(a, b):\n    return a - b\n\n\ndef sub(a, b):\n    return a - b\n",
    "pkg/util.py": "X = 1\nX = 1\n",
    "tests/test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
}

_BIG_LINES = 4000


def _big_read() -> str:
    body = "big.txt\n" + "\n".join(f"{n}. {n}" for n in range(1, _BIG_LINES + 1))
    return body[:20000] + f"\n[truncated {len(body) - 20000} chars]"


def _big_bash() -> str:
    body = "Exit code: 0\nSTDOUT:\n" + "y" * 40000 + "\nSTDERR:\n"
    return body[:30000] + f"\n[truncated {len(body) - 30000} chars]"


def _many_glob() -> str:
    return "\n".join(f"many/f{i:04}" for i in range(1000)) + "\n... 5 more files"


@dataclass(frozen=True)
class Case:
    tool: str
    args: dict[str, Any]
    expected: str
    sandbox_only: bool = False  # touches paths outside the workspace (/tmp, ~, processes)
    note: str = field(default="", compare=False)


CASES: tuple[Case, ...] = (
    Case(
        "Read",
        {"file_path": "calc.py"},
        "calc.py\n1. def add(a, b):\n2.     return a - b\n3. \n4. \n5. def sub(a, b):\n"
        "6.     return a - b",
    ),
    Case("Read", {"path": "calc.py", "offset": 2, "limit": 2}, "calc.py\n2.     return a - b\n3. "),
    Case("Read", {"file_path": "{ws}/calc.py", "offset": 6}, "calc.py\n6.     return a - b"),
    Case("Read", {"file_path": "calc.py", "offset": 99}, "calc.py\n"),
    Case(
        "Read",
        {"file_path": "missing.py"},
        "FileNotFoundError: [Errno 2] No such file or directory: '{ws}/missing.py'",
    ),
    Case("Read", {"file_path": "pkg"}, "IsADirectoryError: [Errno 21] Is a directory: '{ws}/pkg'"),
    Case("Read", {}, "ValueError: file_path is required"),
    Case(
        "Read",
        {"file_path": "calc.py", "offset": "two"},
        "ValueError: invalid literal for int() with base 10: 'two'",
    ),
    Case(
        "Write",
        {"file_path": "new/deep/file.txt", "content": "h\u00e9llo\n"},
        "Wrote new/deep/file.txt (6 bytes).",
    ),
    Case("Write", {"file_path": "empty.txt"}, "Wrote empty.txt (0 bytes)."),
    Case("Read", {"file_path": "empty.txt"}, "empty.txt\n"),
    Case(
        "Write",
        {"file_path": "/tmp/repro.py", "content": "print(1)\n"},
        "Wrote /tmp/repro.py (9 bytes).",
        sandbox_only=True,
    ),
    Case(
        "Bash",
        {"command": "python3 /tmp/repro.py"},
        "Exit code: 0\nSTDOUT:\n1\n\nSTDERR:\n",
        sandbox_only=True,
    ),
    Case(
        "Edit",
        {"file_path": "calc.py", "old_string": "a - b", "new_string": "a + b"},
        "ValueError: old_string matched 2 times; set replace_all=true or use a more specific "
        "old_string",
    ),
    Case(
        "Edit",
        {"file_path": "calc.py", "old_string": "nothing like it", "new_string": "x"},
        "ValueError: old_string was not found",
    ),
    Case(
        "Edit",
        {"file_path": "calc.py", "old_string": "", "new_string": "x"},
        "ValueError: old_string must be non-empty",
    ),
    Case(
        "Edit",
        {"file_path": "missing.py", "old_string": "a", "new_string": "b"},
        "FileNotFoundError: [Errno 2] No such file or directory: '{ws}/missing.py'",
    ),
    Case(
        "Edit",
        {
            "file_path": "calc.py",
            "old_string": "a - b",
            "new_string": "a + b",
            "replace_all": "yes",
        },
        "Edited calc.py (2 replacements).",
    ),
    Case(
        "Edit",
        {"file_path": "calc.py", "old_string": "def sub", "new_string": "def minus"},
        "Edited calc.py (1 replacement).",
    ),
    Case(
        "Edit",
        {"file_path": "README.md", "old_string": "calc"},
        "Edited README.md (1 replacement).",
    ),
    Case("Read", {"file_path": "README.md"}, "README.md\n1. # "),
    Case("Glob", {"pattern": "**/*.py"}, "calc.py\npkg/util.py\ntests/test_calc.py"),
    Case("Glob", {"pattern": "*.py", "path": "pkg"}, "pkg/util.py"),
    Case("Glob", {"pattern": "*"}, "README.md\ncalc.py\nempty.txt"),
    Case("Glob", {"pattern": "*.rs"}, "No files matched."),
    Case("Glob", {"pattern": ""}, "ValueError: pattern is required"),
    Case(
        "Glob",
        {"pattern": "*.py", "path": "/tmp"},
        "/tmp/frognano_leaf_tool_runner.py\n/tmp/repro.py",
        sandbox_only=True,
        note="Leaf's pod has its runner in /tmp (environment.py: _RUNNER_PATH); the first "
        "recording ran the runner outside a pod and showed /tmp/repro.py alone",
    ),
    Case(
        "Bash",
        {"command": "echo out; echo err >&2; exit 3", "description": "streams"},
        "Exit code: 3\nSTDOUT:\nout\n\nSTDERR:\nerr\n",
    ),
    Case("Bash", {"command": "printf 'a\\r\\nb'"}, "Exit code: 0\nSTDOUT:\na\nb\nSTDERR:\n"),
    Case("Bash", {"command": ""}, "ValueError: command is required"),
    Case(
        "Bash",
        {"command": "sleep 30", "timeout": 0.5},
        "Timed out after 0.5s\nSTDOUT:\n\nSTDERR:\n",
    ),
    Case(
        "Bash",
        {"command": "sleep 30", "timeout_ms": 300},
        "Timed out after 0.3s\nSTDOUT:\n\nSTDERR:\n",
    ),
    Case(
        "Bash",
        {"command": "sleep 30", "timeout": 1500},
        "Timed out after 1.5s\nSTDOUT:\n\nSTDERR:\n",
    ),
    Case(
        "Bash",
        {"command": "head -c 40000 /dev/zero | tr '\\0' y"},
        _big_bash(),
        note="30,000-character cap, head kept",
    ),
    Case(
        "Bash",
        {"command": f"seq 1 {_BIG_LINES} > big.txt; mkdir many; touch many/f{{0000..1004}}"},
        "Exit code: 0\nSTDOUT:\n\nSTDERR:\n",
    ),
    Case("Read", {"file_path": "big.txt"}, _big_read(), note="20,000-character cap"),
    Case("Glob", {"pattern": "many/*"}, _many_glob(), note="1,000 files, then a count"),
    Case("Bash", {"command": "ln -s calc.py link.py"}, "Exit code: 0\nSTDOUT:\n\nSTDERR:\n"),
    Case("Read", {"file_path": "link.py", "limit": 1}, "calc.py\n1. def add(a, b):"),
    Case(
        "Bash",
        {
            "command": "echo one > /tmp/state; echo two > ~/state; "
            "nohup sleep 300 >/dev/null 2>&1 & echo $! > /tmp/bg.pid"
        },
        "Exit code: 0\nSTDOUT:\n\nSTDERR:\n",
        sandbox_only=True,
    ),
    Case(
        "Bash",
        {"command": "cat /tmp/state ~/state; kill -0 $(cat /tmp/bg.pid) && echo alive"},
        "Exit code: 0\nSTDOUT:\none\ntwo\nalive\n\nSTDERR:\n",
        sandbox_only=True,
        note="/tmp, $HOME and background processes persist between calls",
    ),
    Case("Delete", {"file_path": "x"}, "Unknown tool: Delete"),
)


def expected_text(case: Case, workspace: str) -> str:
    return case.expected.replace("{ws}", workspace)


def call_args(case: Case, workspace: str) -> dict[str, Any]:
    return {
        k: v.replace("{ws}", workspace) if isinstance(v, str) else v for k, v in case.args.items()
    }
