"""PEP 735 dependency groups in set-up detection (worker/sandbox/depgroups.py and
setupcmd.py): which group a test run gets, resolved, and handed to pip as arguments
that no shell reads as code."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest

from worker.sandbox.depgroups import DependencyGroupError, group_for_tests
from worker.sandbox.setupcmd import detect_setup

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
PACKAGE = '[project]\nname = "demo"\nversion = "1"\n'


def _commands(tmp_path: Path, files: dict[str, str]) -> list[str]:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    return [step.command for step in detect_setup(tmp_path)]


def test_structlogs_own_manifest_installs_its_tests_group(tmp_path: Path) -> None:
    # structlog 26.1.0 as released: no extras, `tests` and a `dev` that includes it.
    pyproject = (FIXTURES / "structlog" / "pyproject.toml").read_text()
    assert _commands(tmp_path, {"pyproject.toml": pyproject}) == [
        "pip install -e . 'pytest-asyncio>=0.17' pytest-randomly 'pytest>=6.0' simplejson "
        "'time-machine>=2.14.1'"
    ]


@pytest.mark.parametrize(
    ("groups", "expected"),
    [
        # test before tests before testing before dev, whatever the file's order.
        ('dev = ["ruff"]\ntesting = ["c"]\ntests = ["b"]\ntest = ["a"]\n', ("test", ["a"])),
        ('dev = ["ruff"]\ntesting = ["c"]\ntests = ["b"]\n', ("tests", ["b"])),
        ('dev = ["ruff"]\ndocs = ["sphinx"]\n', ("dev", ["ruff"])),
        # Names compare as PEP 735 normalises them; the file's spelling is kept.
        ('Tests = ["b"]\n', ("Tests", ["b"])),
        # Includes are followed, in order, nested.
        (
            'dev = [{include-group = "test"}, "mypy"]\nbase = ["pytest"]\n'
            'test = [{include-group = "base"}, "hypothesis"]\n',
            ("test", ["pytest", "hypothesis"]),
        ),
        ("test = []\n", ("test", [])),
    ],
)
def test_the_group_for_tests(groups: str, expected: tuple[str, list[str]]) -> None:
    import tomllib

    found = group_for_tests(tomllib.loads("[dependency-groups]\n" + groups), dev_fallback=True)
    assert found is not None
    assert (found.group, list(found.requirements)) == expected


def test_no_group_for_tests() -> None:
    assert group_for_tests({}, dev_fallback=True) is None
    assert group_for_tests({"dependency-groups": ["pytest"]}, dev_fallback=True) is None
    assert group_for_tests({"dependency-groups": {"docs": ["x"]}}, dev_fallback=True) is None
    # With a test extra the project has said what tests need: dev is not added to it.
    assert group_for_tests({"dependency-groups": {"dev": ["x"]}}, dev_fallback=False) is None


@pytest.mark.parametrize(
    ("groups", "message"),
    [
        ({"test": [{"include-group": "test"}]}, "test includes itself"),
        (
            {"test": [{"include-group": "a"}], "a": [{"include-group": "test"}]},
            "Cyclic dependency group include",
        ),
        ({"test": [{"include-group": "nowhere"}]}, "'nowhere' not found"),
        ({"test": ["pytest; rm -rf /"]}, "Expected a marker variable"),
        ({"test": "pytest"}, "string rather than a list"),
        ({"test": [{"include": "a"}]}, "Invalid dependency group item"),
        ({"test": ["a"], "TEST": ["b"]}, "Duplicate dependency group names"),
    ],
)
def test_a_group_that_cannot_resolve_is_an_error(groups: dict[str, object], message: str) -> None:
    with pytest.raises(DependencyGroupError) as raised:
        group_for_tests({"dependency-groups": groups}, dev_fallback=True)
    assert str(raised.value).lower().startswith("[dependency-groups] test: ")
    assert message in str(raised.value)
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize(
    ("pyproject", "expected"),
    [
        # A group beside the package's test extra: both installed, in one pip run.
        (
            PACKAGE
            + '[project.optional-dependencies]\ntests = ["x"]\n'
            + '[dependency-groups]\ntest = ["pytest>=8"]\ndev = ["ruff"]\n',
            ["pip install -e '.[tests]' 'pytest>=8'"],
        ),
        # With a test extra, dev adds only linters and the like: not installed.
        (
            PACKAGE + '[project.optional-dependencies]\ntest = ["x"]\n'
            '[dependency-groups]\ndev = ["ruff"]\n',
            ["pip install -e '.[test]'"],
        ),
        (PACKAGE + '[dependency-groups]\ndev = ["ruff"]\n', ["pip install -e . ruff"]),
        # No package (PEP 735's own case: an application, a script collection): the
        # group's requirements alone.
        (
            '[tool.black]\nline-length = 99\n[dependency-groups]\ntests = ["pytest"]\n',
            ["pip install pytest"],
        ),
        ("[dependency-groups]\ntests = []\n", []),
        # Markers are the requirement's own: pip evaluates them.
        (
            PACKAGE + "[dependency-groups]\ntest = [\"tomli; python_version < '3.11'\"]\n",
            ["pip install -e . 'tomli; python_version < \"3.11\"'"],
        ),
    ],
)
def test_detected_commands_with_groups(tmp_path: Path, pyproject: str, expected: list[str]) -> None:
    assert _commands(tmp_path, {"pyproject.toml": pyproject}) == expected


def _run_with_fake_pip(
    tmp_path: Path, command: str
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """``command`` as the setup step runs it (``bash -c``), with a ``pip`` that writes
    the arguments it was given, one per line, instead of installing."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "pip"
    fake.write_text('#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done > "$ARGS"\n')
    fake.chmod(0o755)
    args_file = tmp_path / "args"
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "ARGS": str(args_file)}
    done = subprocess.run(
        ["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    args = args_file.read_text().splitlines() if args_file.exists() else []
    return done, args


def test_requirements_with_shell_syntax_reach_pip_as_arguments(tmp_path: Path) -> None:
    # Valid PEP 508 strings that a shell would run: a command substitution in a URL,
    # backquotes, a marker's `;`, `<` and quotes.
    hostile = [
        "demo @ file:///tmp/$(touch${IFS}pwned)",
        "other @ https://example.org/a`touch${IFS}pwned2`b.tar.gz",
        "tomli; python_version < '3.11'",
    ]
    pyproject = (
        PACKAGE
        + f"[dependency-groups]\ntest = ['{hostile[0]}', '{hostile[1]}', \"{hostile[2]}\"]\n"
    )
    tree = tmp_path / "tree"
    tree.mkdir()
    [command] = _commands(tree, {"pyproject.toml": pyproject})
    done, args = _run_with_fake_pip(tree, command)
    assert done.returncode == 0, done.stderr
    assert args == ["install", "-e", ".", hostile[0], hostile[1], 'tomli; python_version < "3.11"']
    assert not (tree / "pwned").exists() and not (tree / "pwned2").exists()


def test_a_broken_group_fails_the_setup_saying_why_and_runs_nothing(tmp_path: Path) -> None:
    # Not a requirement: the group cannot be installed, and its text is only printed.
    pyproject = (
        PACKAGE + '[dependency-groups]\ntests = ["pytest; touch pwned", "$(touch pwned2)"]\n'
    )
    [step] = detect_setup(_tree_with(tmp_path, pyproject))
    assert step.source == "pyproject.toml"
    done, args = _run_with_fake_pip(tmp_path, step.command)
    assert done.returncode != 0 and args == []
    assert done.stderr.startswith(
        "ribbit: cannot install the test dependencies: pyproject.toml [dependency-groups] tests: "
    )
    assert "pytest; touch pwned" in done.stderr and "$(touch pwned2)" in done.stderr
    assert "set `setup` in .ribbit.yml" in done.stderr
    assert not (tmp_path / "pwned").exists() and not (tmp_path / "pwned2").exists()
    # What ran is one printf and `false`, as a shell splits it.
    assert shlex.split(step.command)[0] == "printf"


def _tree_with(tmp_path: Path, pyproject: str) -> Path:
    (tmp_path / "pyproject.toml").write_text(pyproject)
    return tmp_path
