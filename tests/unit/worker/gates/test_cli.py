from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner, Result

from bot.store.records.gate_report import GateReport, GateResult
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


def test_cli_a_clean_patch_without_tests_is_unverified_with_exit_3(
    repo_and_patches: tuple[Path, Path, Path],
) -> None:
    # Issue #31: nothing blocked it, but with no test run nothing shows a fix, so it is
    # not "passed" (this exited 0 before the verdict had levels).
    repo, good, _ = repo_and_patches
    result = CliRunner().invoke(
        gates_command, ["--checkout", str(repo), "--patch", str(good), "--no-tests", "--json"]
    )
    assert result.exit_code == 3, result.output
    data = json.loads(result.output)
    assert data["passed"] is False and data["verdict"] == "unverified"
    assert [(g["name"], g["passed"], g["findings"]) for g in data["gates"]] == [
        ("semgrep", True, []),
        ("hygiene", True, []),
    ]


@pytest.mark.parametrize(
    ("evidence", "blocked", "exit_code", "verdict"),
    [
        (("t.py::test_x",), False, 0, "verified"),
        ((), False, 3, "unverified"),
        (("t.py::test_x",), True, 1, "refused"),
        ((), True, 1, "refused"),
    ],
)
def test_cli_exit_status_is_the_verdicts(
    repo_and_patches: tuple[Path, Path, Path],
    monkeypatch: pytest.MonkeyPatch,
    evidence: tuple[str, ...],
    blocked: bool,
    exit_code: int,
    verdict: str,
) -> None:
    repo, good, _ = repo_and_patches
    results = [
        GateResult("tests", passed=True, evidence=evidence),
        GateResult("hygiene", passed=not blocked),
    ]
    monkeypatch.setattr(
        "worker.gates.run_gates", lambda *a, **k: GateReport.from_results(results, 0.1)
    )
    args = ["--checkout", str(repo), "--patch", str(good), "--no-tests"]
    result = CliRunner().invoke(gates_command, [*args, "--json"])
    assert result.exit_code == exit_code, result.output
    data = json.loads(result.output)
    assert data["verdict"] == verdict and data["passed"] is (verdict == "verified")
    human = CliRunner().invoke(gates_command, args)
    assert human.exit_code == exit_code
    last = human.output.strip().splitlines()[-1]
    assert last.startswith(
        "gates: "
        + {"verified": "passed", "unverified": "not verified", "refused": "failed"}[verdict]
    )


def test_cli_says_what_the_pr_body_says_under_the_table(
    repo_and_patches: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, good, _ = repo_and_patches
    run = {"exit_code": 0, "failing": [], "per_test": True, "watched": True}
    details = {"before": run, "after": run, "targets": ["test_x"], "runner": "pytest"}
    results = [GateResult("tests", passed=True, evidence=("t.py::test_x",), details=details)]
    monkeypatch.setattr(
        "worker.gates.run_gates", lambda *a, **k: GateReport.from_results(results, 0.1)
    )
    args = ["--checkout", str(repo), "--patch", str(good), "--no-tests"]
    human = CliRunner().invoke(gates_command, args)
    assert "- Fails without this patch's code and passes with it: `t.py::test_x`." in human.output
    assert "- How these results were read: every run was watched" in human.output
    # Without a test gate (--no-tests for real) there is nothing to say.
    results[:] = [GateResult("hygiene", passed=True)]
    assert "How these results" not in CliRunner().invoke(gates_command, args).output


def test_cli_fails_bad_patch_with_exit_1_and_writes_sarif(
    repo_and_patches: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    repo, _, bad = repo_and_patches
    sarif = tmp_path / "out.sarif"
    result = CliRunner().invoke(
        gates_command,
        ["--checkout", str(repo), "--patch", str(bad), "--no-tests", "--sarif", str(sarif)],
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
    assert runner.invoke(gates_command, ["--checkout", str(repo)]).exit_code == 2
    missing = runner.invoke(
        gates_command, ["--checkout", str(repo), "--patch", str(tmp_path / "nope.diff")]
    )
    assert missing.exit_code == 2
    not_git = tmp_path / "plain"
    not_git.mkdir()
    result = runner.invoke(
        gates_command, ["--checkout", str(not_git), "--patch", str(good), "--no-tests"]
    )
    assert result.exit_code == 2 and "not a git repository" in result.output
    bad_backend = runner.invoke(
        gates_command, ["--checkout", str(repo), "--patch", str(good), "--backend", "vm"]
    )
    assert bad_backend.exit_code == 2


def test_cli_a_base_that_cannot_be_set_up_is_the_repositorys_not_the_patchs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The Go module proxy unreachable from the set-up (issue #35 item 4): the reason a
    # solve job would store, and no word on the patch or on a test that never ran.
    from tests.fakes import local_sandboxes

    setup = "echo 'dial tcp: lookup proxy.golang.org: no such host'; exit 1"
    repo, _ = repo_with(tmp_path, {**BASE, ".ribbit.yml": f"setup: {json.dumps(setup)}\n"})
    patch = tmp_path / "fix.diff"
    added = {"test_issue.py": "def test_issue218():\n    assert True\n"}
    patch.write_text(make_patch(repo, {**BASE, **added}))
    monkeypatch.setattr("worker.gates.cli._sandboxes", lambda backend, image: local_sandboxes())
    args = ["--checkout", str(repo), "--patch", str(patch)]
    human = CliRunner().invoke(gates_command, args)
    assert human.exit_code == 2, human.output
    lines = human.output.splitlines()
    assert lines[0] == (
        f"The repository's setup failed (`{setup}` exited 1), so no test ran. "
        "This is about the repository's set-up, not a patch."
    )
    assert lines[1] == (
        "who can fix it: the maintainer, in setup in .ribbit.yml on the default branch: "
        "the command failed: its output is below."
    )
    assert "  | dial tcp: lookup proxy.golang.org: no such host" in lines
    assert lines[-1] == "gates: not run (the base commit's set-up failed)"
    assert "after the patch" not in human.output and "test_issue218" not in human.output
    as_json = CliRunner().invoke(gates_command, [*args, "--json"])
    assert as_json.exit_code == 2
    data = json.loads(as_json.output)
    assert data["verdict"] is None and data["failure"]["what"] == lines[0]


def _gates_on_greet_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: dict[str, str]
) -> Result:
    """``ribbit gates`` on a repository of ``files`` with a patch that fixes ``greet``,
    its tests run in host-copy sandboxes."""
    from tests.fakes import local_sandboxes

    repo, _ = repo_with(tmp_path, files)
    patch = tmp_path / "fix.diff"
    patch.write_text(make_patch(repo, {"app.py": "def greet(name):\n    return f'hi {name}'\n"}))
    monkeypatch.setattr("worker.gates.cli._sandboxes", lambda backend, image: local_sandboxes())
    return CliRunner().invoke(gates_command, ["--checkout", str(repo), "--patch", str(patch)])


def test_cli_a_base_whose_tests_never_ran_names_who_can_fix_it_as_a_solve_job_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A test dependency the set-up did not install (issue #35, structlog's
    # pytest_asyncio): pytest stops in conftest.py at the base and with the patch, and no
    # report comes back. The solve job's stored reason names the missing module and the
    # maintainer's `setup` (worker/sandbox/failure.py output_fixer); so does `ribbit gates`.
    files = {
        **BASE,
        "conftest.py": "import ribbit_absent_plugin\n",
        "test_app.py": "from app import greet\n\n\ndef test_greet():\n    assert greet('x')\n",
    }
    human = _gates_on_greet_fix(tmp_path, monkeypatch, files)
    assert human.exit_code == 1, human.output
    lines = human.output.splitlines()
    assert (
        "The base commit's tests never ran, so the gates judged no test: this is about the "
        "repository's set-up, not the patch." in lines
    ), human.output
    assert (
        "who can fix it: the maintainer, in setup in .ribbit.yml on the default branch: "
        "ribbit_absent_plugin is not installed: install the test dependencies in setup "
        "(pip install -e .[test], say)." in lines
    ), human.output
    assert lines[-1].startswith("gates: failed (tests ✖")


def test_cli_a_base_whose_run_is_not_its_own_is_named_as_the_set_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The repository's own conftest ends every session with status 0, a failing test
    # and all: the base's run disagrees with its report before any patch, so the
    # patched run's disagreement is no sign of the patch.
    files = {
        **BASE,
        "conftest.py": "def pytest_sessionfinish(session, exitstatus):\n"
        "    session.exitstatus = 0\n",
        "test_app.py": "from app import greet\n\n\ndef test_greet():\n    assert greet('x')\n\n\n"
        "def test_known_bad():\n    assert False\n",
    }
    human = _gates_on_greet_fix(tmp_path, monkeypatch, files)
    assert human.exit_code == 1, human.output
    lines = human.output.splitlines()
    assert (
        "The base commit's own test run is not its own (its report and its run disagree): "
        "this is about the repository's set-up, not the patch." in lines
    ), human.output
