from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from tests.unit.worker.gates.helpers import make_patch, repo_with
from tests.unit.worker.gates.test_runner_report import SARIF_MINIMAL_SCHEMA
from worker.gates.cli import gates_command

BASE = {"app.py": "def greet(name):\n    return 'hi ' + name\n"}


@pytest.fixture
def repo_and_patches(tmp_path: Path) -> tuple[Path, Path, Path]:
    repo, _ = repo_with(tmp_path, BASE)
    good = tmp_path / "good.diff"
    good.write_text(make_patch(repo, {"app.py": "def greet(name):\n    return f'hi {name}'\n"}))
    bad = tmp_path / "bad.diff"
    bad.write_text(
        make_patch(
            repo,
            {
                "app.py": BASE["app.py"] + "\n\ndef run(cmd):\n    import os\n    os.system(cmd)\n",
                ".github/workflows/ci.yml": "on: push\n",
            },
        )
    )
    return repo, good, bad


def test_cli_passes_clean_patch_with_exit_0(repo_and_patches: tuple[Path, Path, Path]) -> None:
    repo, good, _ = repo_and_patches
    result = CliRunner().invoke(
        gates_command, ["--repo", str(repo), "--patch", str(good), "--no-tests", "--json"]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["passed"] is True
    assert [(g["name"], g["passed"], g["findings"]) for g in data["gates"]] == [
        ("semgrep", True, []),
        ("hygiene", True, []),
    ]


def test_cli_fails_bad_patch_with_exit_1_and_writes_sarif(
    repo_and_patches: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    repo, _, bad = repo_and_patches
    sarif = tmp_path / "out.sarif"
    result = CliRunner().invoke(
        gates_command,
        ["--repo", str(repo), "--patch", str(bad), "--no-tests", "--sarif", str(sarif)],
    )
    assert result.exit_code == 1, result.output
    assert "semgrep ✖ (1 new finding) hygiene ✖ (1 finding)" in result.output
    data = json.loads(sarif.read_text())
    jsonschema.validate(data, SARIF_MINIMAL_SCHEMA)
    rule_ids = {r["ruleId"] for run in data["runs"] for r in run["results"]}
    assert rule_ids == {"ribbit.shell-injection.os-system", "ci-config"}


def test_cli_usage_errors_exit_2(repo_and_patches: tuple[Path, Path, Path], tmp_path: Path) -> None:
    repo, good, _ = repo_and_patches
    runner = CliRunner()
    assert runner.invoke(gates_command, ["--repo", str(repo)]).exit_code == 2
    missing = runner.invoke(
        gates_command, ["--repo", str(repo), "--patch", str(tmp_path / "nope.diff")]
    )
    assert missing.exit_code == 2
    not_git = tmp_path / "plain"
    not_git.mkdir()
    result = runner.invoke(
        gates_command, ["--repo", str(not_git), "--patch", str(good), "--no-tests"]
    )
    assert result.exit_code == 2 and "not a git repository" in result.output
    bad_backend = runner.invoke(
        gates_command, ["--repo", str(repo), "--patch", str(good), "--backend", "vm"]
    )
    assert bad_backend.exit_code == 2
