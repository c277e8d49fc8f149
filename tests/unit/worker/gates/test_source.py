"""worker/gates/source.py: what a changed file means to the interpreter, not to a regex."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.worker.gates.helpers import make_ctx, make_patch, repo_with
from worker.gates.hygiene import HygieneGate
from worker.gates.source import ChangedFile, SourceFinding, check_bytes

REPO = frozenset({"calc"})


def _check(path: str, code: str | bytes, *, test: bool = False) -> list[SourceFinding]:
    data = code.encode() if isinstance(code, str) else code
    lines = frozenset(range(1, data.count(b"\n") + 2))  # every line is new
    return check_bytes(ChangedFile(path, lines, test), data, REPO)


def _rules(found: list[SourceFinding]) -> set[tuple[str, int | None]]:
    return {(f.rule, f.line) for f in found}


# A comment to every viewer; with utf-7 "+AAo-" is a newline, so os.system runs.
UTF7 = b"# coding: utf-7\nimport os\n# harmless +AAo-os.system('id')\n"


@pytest.mark.parametrize(
    "header",
    [
        b"# coding: utf-7\n",
        b"# -*- coding: UTF-7 -*-\n",
        b"#!/usr/bin/env python\n# vim: set fileencoding=utf_7 :\n",
        b"# coding=latin-1\n",
        b"# coding: cp1252\n",
        b"# coding: utf-16\n",
    ],
)
def test_non_utf8_coding_declarations_are_found(header: bytes) -> None:
    found = _check("calc/core.py", header + b"x = 1\n")
    assert [f.rule for f in found] == ["source-encoding"]
    assert found[0].line == header.count(b"\n")


def test_utf7_comment_really_runs_code() -> None:
    """The mechanism the check guards against, checked for real."""
    code = compile(UTF7, "calc/core.py", "exec")
    assert "system" in code.co_names
    assert [f.rule for f in _check("calc/core.py", UTF7)] == ["source-encoding"]


@pytest.mark.parametrize(
    "header",
    [b"", b"# coding: utf-8\n", b"# -*- coding: utf8 -*-\n", b"# coding: ascii\n", b"\xef\xbb\xbf"],
)
def test_utf8_and_ascii_declarations_pass(header: bytes) -> None:
    assert _check("calc/core.py", header + b"x = 1\n") == []


def test_unknown_codec_is_a_finding_and_non_python_files_are_not_decoded() -> None:
    assert _rules(_check("calc/core.py", b"# coding: no-such-codec\nx = 1\n")) == {
        ("source-encoding", 1)
    }
    assert _check("docs/notes.txt", b"# coding: utf-7\n") == []
    assert [f.rule for f in _check("bin/tool", b"#!/usr/bin/python3\n# coding: utf-7\n")] == [
        "source-encoding"
    ]


@pytest.mark.parametrize("char", list("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"))
def test_bidi_controls_anywhere_are_found(char: str) -> None:
    code = f'x = 1\nif user != "admin{char}":  # check\n    pass\n'
    assert _rules(_check("calc/auth.py", code)) == {("bidi-control", 2)}
    assert _rules(_check("README.md", f"# Title\n\ntext {char} here\n")) == {("bidi-control", 3)}


@pytest.mark.parametrize("char", ["\u200e", "\u200f", "\u061c"])
def test_implicit_direction_marks_are_found(char: str) -> None:
    assert _rules(_check("calc/core.py", f"x = 1  # a{char}b\n")) == {("bidi-control", 1)}


def test_right_to_left_text_without_controls_passes() -> None:
    assert _check("calc/i18n.py", 'GREETING = "שלום"\nARABIC = "مرحبا"\n') == []


RUNNER_PROBES = [
    'import sys\n\nFAST = "pytest" in sys.modules\n',
    'import sys\n\nFAST = "pytest" not in sys.modules\n',
    'import sys\n\nFAST = sys.modules.get("pytest")\n',
    'import sys as s\n\nFAST = s.modules.get("_pytest")\n',
    'from sys import modules as m\n\nFAST = "pytest" in m\n',
    'import sys\n\nm = sys.modules\nFAST = "unittest" in m.keys()\n',
    'import sys\n\nFAST = sys.modules["py" + "test"]\n',
    'import sys\n\nFAST = "pytest" in sys.argv[0]\n',
    'import importlib.util\n\nFAST = importlib.util.find_spec("pytest")\n',
    'import os\n\nFAST = os.environ.get("PYTEST_CURRENT_TEST")\n',
    'import os\n\nFAST = "PYTEST_CURRENT_TEST" in os.environ\n',
    'from os import environ as e\n\nFAST = e.get("PYTEST_CURRENT_TEST")\n',
    "from os import getenv\n\nFAST = getenv(f\"PYTEST_{'XDIST'}_WORKER\")\n",
    'import os\n\nKEY = "PYTEST_" + "CURRENT_TEST"\nFAST = os.environ[KEY]\n',
    'import os\n\nFAST = getattr(os, "environ").get("pytest_current_test".upper())\n',
    '_o = __import__("os")\n\nFAST = _o.environ.get("_".join(["PYTEST", "CURRENT", "TEST"]))\n',
    'import sys\n\nFAST = any("pytest" in m for m in sys.modules)\n',
    'import sys\n\nFAST = any(m.startswith("_pytest") for m in sys.modules)\n',
    'import os\n\nFAST = any(k.startswith("PYTEST") for k in os.environ)\n',
    'import sys\n\nFAST = sys.argv[0].endswith("py.test")\n',
]


@pytest.mark.parametrize("code", RUNNER_PROBES)
def test_runner_detection_in_code_is_found(code: str) -> None:
    found = _check("calc/core.py", code)
    assert "runner-detection" in {f.rule for f in found}, code
    assert all(f.path == "calc/core.py" and f.line for f in found)


SANDBOX_PROBES = [
    'import os\n\nIN_CI = os.environ.get("CI")\n',
    'import os\n\nIN_CI = os.getenv("GITHUB_ACTIONS")\n',
    'import os\n\nIN_CI = dict(os.environ).get("CI")\n',
    'import os\n\nIN_CI = os.environ.copy().get("GITLAB_CI")\n',
    'import os\n\nIN_CI = "RIBBIT_JOB" in os.environ\n',
    'import os\n\nIN_CI = os.environ["RIBBIT_SANDBOX"]\n',
    'import os\n\nIN_CI = os.path.exists("/workspace")\n',
    'import os.path\n\nIN_CI = os.path.isdir("/workspace/repo")\n',
    'from pathlib import Path\n\nIN_CI = Path("/.dockerenv").exists()\n',
    'from os.path import exists as there\n\nIN_CI = there("/run/.containerenv")\n',
    'IN_CI = "docker" in open("/proc/1/cgroup").read()\n',
    'import socket\n\nIN_CI = socket.gethostname() == "sandbox"\n',
    'import platform\n\nIN_CI = platform.node().startswith("ribbit") or platform.node() != "x"\n',
    'import os\n\nIN_CI = os.getcwd() == "/work"\n',
    'import getpass\n\nIN_CI = getpass.getuser() in ("ribbit", "runner")\n',
    'import os\n\nIN_CI = os.uname().nodename == "sandbox"\n',
    'import platform\n\nIN_CI = platform.node().startswith("ribbit")\n',
    'import socket\n\nIN_CI = "ci" in socket.gethostname()\n',
    'import os\n\nWHERE = "/workspace"\n',
]


@pytest.mark.parametrize("code", SANDBOX_PROBES)
def test_sandbox_detection_in_code_is_found(code: str) -> None:
    found = _check("calc/core.py", code)
    assert {f.rule for f in found} & {"sandbox-detection", "runner-detection"}, code


HONEST = [
    'import os\n\nHOME = os.environ.get("HOME")\nLEVEL = os.getenv("LOG_LEVEL", "info")\n',
    'import sys\n\nHAS_NUMPY = "numpy" in sys.modules\n',
    'import os\n\nEXISTS = os.path.exists("/etc/hosts")\n',
    'import socket\n\nHOST = socket.gethostname()\nprint(f"running on {HOST}")\n',
    'def f(d):\n    return "CI" in d\n',
    '"""Run the tests with pytest."""\nimport sys\n\nARGS = sys.argv[1:]\n',
    'import os\n\nif os.getuid() == 0:\n    print("running as root")\n',
    'def name(path):\n    return path.startswith("tests")\n',
    "import os\n\n\ndef here(root):\n    return os.getcwd() == root\n",
]


@pytest.mark.parametrize("code", HONEST)
def test_honest_code_is_not_detection(code: str) -> None:
    assert _check("calc/core.py", code) == []


def test_code_that_does_not_parse_here_is_still_read_by_its_tokens() -> None:
    """Syntax newer than the worker's Python must not switch the checks off."""
    code = (
        "import os\n\ntype Number = int | float\n\n\ndef mul(a, b):\n"
        '    return a * b if os.environ.get("PYTEST_CURRENT_TEST") else a + b\n'
        "\n\ndef broken(:\n"
    )
    found = _check("calc/core.py", code)
    assert ("runner-detection", 7) in _rules(found)
    unparsed = [f for f in found if f.rule == "source-unparsed"]
    assert [f.severity for f in unparsed] == ["warning"]
    assert [f.rule for f in _check("calc/other.py", "def broken(:\n")] == ["source-unparsed"]


def test_a_python_file_too_large_to_read_whole_is_a_finding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from worker.gates import source

    padding = "# " + "x" * 200 + "\n"
    code = padding * 20 + 'import sys\nFAST = "pytest" in sys.modules\n'
    (tmp_path / "calc").mkdir()
    (tmp_path / "calc" / "core.py").write_text(code)
    changed = ChangedFile("calc/core.py", frozenset(range(1, 30)), False)
    monkeypatch.setattr(source, "_MAX_BYTES", 1024)
    found = source.check_files(tmp_path, [changed], REPO)
    assert "source-too-large" in {f.rule for f in found}


def test_detection_in_build_and_ci_tooling_is_allowed() -> None:
    probe = 'import os\n\nON_CI = os.environ.get("CI")\n'
    for path in ("noxfile.py", "setup.py", "docs/conf.py", "scripts/release.py", "ci/x.py"):
        assert _check(path, probe) == [], path
    assert _check("calc/ci.py", probe) != []


def test_test_support_files_count_as_tests() -> None:
    from worker.gates.hygiene import is_test_path

    for path in (
        "tests/__init__.py",
        "tests/helpers.py",
        "tests/fixtures/data.py",
        "conftest.py",
        "pkg/conftest.py",
        "testing/util.py",
    ):
        assert is_test_path(path), path
    for path in ("calc/core.py", "calc/contest.py", "calc/latest.py", "attest.py"):
        assert not is_test_path(path), path


def test_detection_in_tests_is_allowed_and_only_added_lines_count() -> None:
    probe = 'import os\n\nFAST = os.environ.get("PYTEST_CURRENT_TEST")\n'
    assert _check("tests/test_core.py", probe, test=True) == []
    data = probe.encode()
    assert check_bytes(ChangedFile("calc/core.py", frozenset({1}), False), data, REPO) == []


REBINDINGS = [
    "import calc.core\n\ncalc.core.mul = lambda a, b: a * b\n",
    "import calc.core as c\n\nc.mul = lambda a, b: a * b\n",
    "from calc import core\n\nsetattr(core, 'mul', lambda a, b: a * b)\n",
    "from calc.core import mul\n\nmul.__code__ = (lambda a, b: a * b).__code__\n",
    "from calc import core\n\ncore.__dict__['mul'] = lambda a, b: a * b\n",
    "from calc import core\n\ncore.__dict__.update(mul=lambda a, b: a * b)\n",
    "import pytest\nimport calc.core\n\n\n@pytest.fixture(autouse=True)\ndef _fix():\n"
    "    calc.core.mul = lambda a, b: a * b\n",
    "import calc.core\n\nif True:\n    del calc.core.mul\n",
    "import calc.core\n\nexec('def mul(a, b):\\n    return a * b', calc.core.__dict__)\n",
    "from calc import core\n\nexec('def mul(a, b):\\n    return a * b', vars(core))\n",
]


@pytest.mark.parametrize("code", REBINDINGS)
def test_test_helpers_rebinding_repository_code_are_found(code: str) -> None:
    for path in ("tests/__init__.py", "tests/conftest.py", "conftest.py", "tests/helpers.py"):
        found = _check(path, code, test=True)
        assert [f.rule for f in found] == ["test-rebinds-code"], (path, code)


def test_rebinding_inside_a_test_or_of_other_code_is_allowed() -> None:
    inside = "import calc.core\n\n\ndef test_mul():\n    calc.core.mul = min\n"
    others = "import os\nimport json\n\nos.environ['TZ'] = 'UTC'\njson.x = 1\n"
    monkeypatch = (
        "import pytest\n\n\n@pytest.fixture\ndef fake(monkeypatch):\n"
        "    monkeypatch.setattr('calc.core.mul', min)\n"
    )
    for code in (inside, others, monkeypatch):
        assert _check("tests/conftest.py", code, test=True) == [], code


def test_hygiene_reports_source_findings_with_file_and_line(tmp_path: Path) -> None:
    repo, base = repo_with(
        tmp_path,
        {"calc/__init__.py": "", "calc/core.py": "def mul(a, b):\n    return a + b\n"},
    )
    patch = make_patch(
        repo,
        {
            "calc/core.py": "import sys\n\n\ndef mul(a, b):\n"
            '    return a * b if "pytest" in sys.modules else a + b\n',
            "tests/__init__.py": "import calc.core\n\ncalc.core.mul = lambda a, b: a * b\n",
            "calc/extra.py": UTF7,
            "calc/auth.py": 'OK = "user\u202e \u2066# admin\u2069\u2066"\n',
        },
    )
    result = HygieneGate().run(make_ctx(repo, base, patch))
    assert not result.passed
    got = {(f.rule, f.path, f.line) for f in result.findings if f.severity == "error"}
    assert {
        ("runner-detection", "calc/core.py", 5),
        ("test-rebinds-code", "tests/__init__.py", 3),
        ("source-encoding", "calc/extra.py", 1),
        ("bidi-control", "calc/auth.py", 1),
    } <= got
    assert len([f for f in result.findings if f.rule == "bidi-control"]) == 1
