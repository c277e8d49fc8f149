"""Detected setup commands (worker/sandbox/setupcmd.py): what a repository with no
``setup`` in ``.ribbit.yml`` gets installed, read from a checkout or from a commit."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.fakes import commit_files as commit_to_repo
from tests.fakes import make_git_repo
from worker.repo_config import RepoConfig, parse_repo_config
from worker.sandbox.setupcmd import commit_files, detect_setup, with_detected_setup


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def _commands(tmp_path: Path, files: dict[str, str]) -> list[str]:
    return [step.command for step in detect_setup(_tree(tmp_path, files))]


PEP621 = '[project]\nname = "demo"\nversion = "1"\n'


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({}, []),
        ({"README.md": "hi"}, []),
        ({"pyproject.toml": PEP621}, ["pip install -e ."]),
        (
            {"pyproject.toml": PEP621 + '[project.optional-dependencies]\ntest = ["pytest"]\n'},
            ["pip install -e '.[test]'"],
        ),
        (
            {
                "pyproject.toml": PEP621
                + "[project.optional-dependencies]\ntesting = []\ndocs = []\n"
            },
            ["pip install -e '.[testing]'"],
        ),
        # Dotted keys, as pyproject-fmt writes them (python-humanize's own manifest).
        (
            {
                "pyproject.toml": PEP621
                + 'optional-dependencies.tests = [ "freezegun", "pytest" ]\n'
                + '[build-system]\nbuild-backend = "hatchling.build"\n'
            },
            ["pip install -e '.[tests]'"],
        ),
        # Only tool settings (black, ruff, pytest): not a package, nothing to install.
        ({"pyproject.toml": "[tool.black]\nline-length = 99\n"}, []),
        ({"pyproject.toml": "[tool.poetry]\nname = 'x'\n"}, ["pip install -e ."]),
        ({"setup.py": "from setuptools import setup\nsetup()\n"}, ["pip install -e ."]),
        (
            {"setup.cfg": "[metadata]\nname = x\n[options.extras_require]\ntests = pytest\n"},
            ["pip install -e '.[tests]'"],
        ),
        (
            {"setup.py": "", "requirements-dev.txt": "pytest\n", "requirements.txt": "x==1\n"},
            ["pip install -e .", "pip install -r requirements-dev.txt"],
        ),
        # An application, not a package: its requirements file is what it runs with.
        ({"requirements.txt": "flask\n"}, ["pip install -r requirements.txt"]),
        ({"requirements/test.txt": "pytest\n"}, ["pip install -r requirements/test.txt"]),
        ({"requirements-test.txt": "pytest\n"}, ["pip install -r requirements-test.txt"]),
        (
            {"setup.py": "", "test-requirements.txt": "pytest\n"},
            ["pip install -e .", "pip install -r test-requirements.txt"],
        ),
        # A dependency group and a requirements file: each is installed.
        (
            {
                "pyproject.toml": PEP621 + '[dependency-groups]\ntests = ["pytest"]\n',
                "requirements-dev.txt": "ruff\n",
            },
            ["pip install -e . pytest", "pip install -r requirements-dev.txt"],
        ),
        ({"package.json": json.dumps({"name": "x", "scripts": {"test": "node --test"}})}, []),
        (
            {"package.json": json.dumps({"devDependencies": {"vitest": "^1"}})},
            ["npm install --no-audit --no-fund"],
        ),
        (
            {"package.json": json.dumps({"dependencies": {"a": "1"}}), "package-lock.json": "{}"},
            ["npm ci --no-audit --no-fund"],
        ),
        ({"package.json": "not json"}, []),
        ({"go.mod": "module x\n\ngo 1.19\n"}, []),
        ({"go.mod": "module x\n", "go.sum": "github.com/a/b v1 h1:x=\n"}, ["go mod download"]),
        ({"Cargo.toml": '[package]\nname = "x"\n'}, []),
        ({"Cargo.toml": '[package]\nname = "x"\n[dependencies]\nlocal = { path = "../l" }\n'}, []),
        (
            {"Cargo.toml": '[package]\nname = "x"\n[dev-dependencies]\nrand = "0.8"\n'},
            ["cargo fetch"],
        ),
        (
            {
                "Cargo.toml": '[package]\nname = "x"\n'
                "[target.'cfg(unix)'.dependencies]\nlibc = { version = \"0.2\" }\n"
            },
            ["cargo fetch"],
        ),
        # Several ecosystems in one tree: each installs, Python first.
        (
            {"setup.py": "", "package.json": json.dumps({"devDependencies": {"jest": "29"}})},
            ["pip install -e .", "npm install --no-audit --no-fund"],
        ),
    ],
)
def test_detected_commands(tmp_path: Path, files: dict[str, str], expected: list[str]) -> None:
    assert _commands(tmp_path, files) == expected


def test_a_broken_manifest_is_not_an_install(tmp_path: Path) -> None:
    # A malformed pyproject.toml names no package: nothing is guessed from it.
    assert _commands(tmp_path, {"pyproject.toml": "[project\nname="}) == []


def test_links_and_huge_files_are_not_read(tmp_path: Path) -> None:
    outside = tmp_path / "outside.toml"
    outside.write_text(PEP621)
    tree = tmp_path / "tree"
    tree.mkdir()
    os.symlink(outside, tree / "pyproject.toml")
    (tree / "requirements.txt").write_text("x\n" * (1 << 20))
    assert detect_setup(tree) == []


def test_the_teams_setup_wins_even_empty(tmp_path: Path) -> None:
    tree = _tree(tmp_path, {"setup.py": ""})
    assert with_detected_setup(RepoConfig(), tree).setup == "pip install -e ."
    named = parse_repo_config("setup: make deps\n")
    assert with_detected_setup(named, tree).setup == "make deps"
    nothing = parse_repo_config('setup: ""\n')
    assert with_detected_setup(nothing, tree).setup == ""
    assert with_detected_setup(RepoConfig(), tree, enabled=False).setup is None


def test_steps_are_joined_and_detection_is_idempotent(tmp_path: Path) -> None:
    tree = _tree(
        tmp_path,
        {"pyproject.toml": PEP621, "package.json": json.dumps({"dependencies": {"a": "1"}})},
    )
    once = with_detected_setup(RepoConfig(), tree)
    assert once.setup == "pip install -e . && npm install --no-audit --no-fund"
    # Detected once, the command is the config's: a second pass on another tree keeps it.
    assert with_detected_setup(once, tmp_path / "elsewhere").setup == once.setup


def test_a_commit_is_read_not_the_working_tree(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    make_git_repo(repo, {"setup.py": "from setuptools import setup\n"})
    first = commit_to_repo(repo, {"package.json": json.dumps({"dependencies": {"a": "1"}})}, "js")
    commit_to_repo(repo, {"package-lock.json": "{}"}, "lock")
    # The working tree (and HEAD) has a lock file; the first commit had none.
    assert [s.command for s in detect_setup(commit_files(repo, first))] == [
        "pip install -e .",
        "npm install --no-audit --no-fund",
    ]
    assert [s.command for s in detect_setup(commit_files(repo, "HEAD"))][-1] == (
        "npm ci --no-audit --no-fund"
    )
    # A link in the commit is not followed, as on disk.
    os.symlink("/etc/passwd", repo / "requirements.txt")
    head = commit_to_repo(repo, {"setup.py": None}, "link")
    assert "requirements.txt" not in str(detect_setup(commit_files(repo, head)))


def test_a_missing_commit_reads_nothing(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    make_git_repo(repo, {"setup.py": ""})
    assert detect_setup(commit_files(repo, "0" * 40)) == []
    assert detect_setup(commit_files(repo, "--output=/tmp/x")) == []
