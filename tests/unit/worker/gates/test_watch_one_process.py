"""A watched pytest run is one process (worker/gates/watchboot.py, step 5).

A repository whose pytest configuration runs pytest-xdist (``addopts = "-n 2"``) had its
tests run in xdist's workers, where nothing watched the code under test, and the watched
process only wrote down the reports they sent: a patch that broke ``mul`` and rewrote
pytest's reports from the package's code (caught as a runner monkeypatch in one process)
passed the test gate with no finding. The bootstrap now switches xdist's workers and
``--forked`` off, and a test whose result still comes from another process (here a
conftest plugin that forks, as pytest-forked's ``forked`` mark does) is recorded as
``outside``: its result is no evidence, and a patch that makes tests run elsewhere is
tamper.

pytest-xdist is a dev dependency, so the host-copy sandbox runs the tests with this
venv's interpreter first on $PATH."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from tests.fakes import LocalDirSandbox, make_git_repo
from tests.unit.worker.gates.helpers import make_ctx, make_patch
from tests.watch_attacks import BASE, BROKEN, FORKS_EACH_TEST, TESTS
from worker.gates import GateResult
from worker.gates.tamper import OUTSIDE
from worker.gates.testrun import TestRun, run_tests
from worker.gates.tests import TestGate
from worker.repo_config import RepoConfig

WATCHED = "python3 -m pytest -q -p no:cacheprovider"
XDIST = '[tool.pytest.ini_options]\naddopts = "-n 2"\n'
# pytest's report rewritten from the package's own code: every failure passes.
FORGES_REPORTS = (
    "import _pytest.reports as _reports\n\n"
    "_made = _reports.TestReport.from_item_and_call.__func__\n\n\n"
    "def _passing(cls, item, call):\n"
    "    report = _made(cls, item, call)\n"
    "    if report.failed:\n"
    '        report.outcome = "passed"\n'
    "        report.longrepr = None\n"
    "    return report\n\n\n"
    "_reports.TestReport.from_item_and_call = classmethod(_passing)\n\n\n"
)


class _WithThisVenv(LocalDirSandbox):
    """The host-copy sandbox with this venv's interpreter (and its pytest-xdist) first."""

    def own_environment(self) -> dict[str, str]:
        return {"PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}


def _run(tmp_path: Path, files: Mapping[str, str]) -> TestRun:
    tree = tmp_path / "tree"
    for rel, text in files.items():
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        (tree / rel).write_text(text)
    with _WithThisVenv(tree) as sandbox:
        return run_tests(sandbox, WATCHED, timeout=120)


def _gate(tmp_path: Path, base_files: Mapping[str, str], changes: Mapping[str, str]) -> GateResult:
    repo = tmp_path / "repo"
    base = make_git_repo(repo, dict(base_files))
    patch = make_patch(repo, changes)
    config = RepoConfig(test=WATCHED)
    return TestGate().run(make_ctx(repo, base, patch, config=config, sandbox_factory=_WithThisVenv))


def test_xdist_in_the_repositorys_addopts_runs_in_the_watched_process(tmp_path: Path) -> None:
    run = _run(tmp_path, {**BASE, "pyproject.toml": XDIST, "calc/core.py": FORGES_REPORTS + BROKEN})
    assert run.watched
    assert "pytest-xdist's workers off" in run.log()
    # Rewritten in the watched process itself: recorded where it was done.
    forged = [e for e in run.tamper if e.mechanism == "runner-monkeypatch"]
    assert forged and forged[0].path == "calc/core.py", (run.tamper, run.log())
    assert not [e for e in run.tamper if e.mechanism == OUTSIDE]


def test_the_gate_refuses_the_report_rewrite_behind_xdist(tmp_path: Path) -> None:
    # The patch adds a test of mul's bug (it fails on the old code: evidence, were the
    # run to say it passes) and leaves mul broken behind the rewrite.
    base = {**BASE, "pyproject.toml": XDIST}
    new_test = TESTS + "\n\ndef test_mul_again():\n    assert mul(3, 3) == 9\n"
    changes = {"calc/core.py": FORGES_REPORTS + BROKEN, "tests/test_core.py": new_test}
    result = _gate(tmp_path, base, changes)
    tamper = [f for f in result.findings if f.rule == "tamper"]
    assert not result.passed and tamper, result.findings
    assert "runner-monkeypatch" in tamper[0].message


def test_a_test_whose_result_another_process_sent_is_recorded_outside(tmp_path: Path) -> None:
    run = _run(tmp_path, {**BASE, "calc/core.py": BROKEN, "tests/conftest.py": FORKS_EACH_TEST})
    assert run.watched
    assert [e.mechanism for e in run.tamper] == [OUTSIDE], run.log()
    assert "2 test(s) ran in another process" in run.tamper[0].what
    # The reports it sent are what pytest logged: mul's failure shows, this time.
    assert run.outcomes["tests/test_core.py::test_mul"] == "failed"


def test_results_from_another_process_are_no_evidence(tmp_path: Path) -> None:
    # The repository forks its tests itself (base and patch alike): the fix's tests
    # pass, but every result is a forked child's word, so nothing is verified by them.
    base = {**BASE, "calc/core.py": BROKEN, "tests/conftest.py": FORKS_EACH_TEST}
    new_test = TESTS + "\n\ndef test_mul_again():\n    assert mul(3, 3) == 9\n"
    changes = {"calc/core.py": BASE["calc/core.py"], "tests/test_core.py": new_test}
    result = _gate(tmp_path, base, changes)
    assert not [f for f in result.findings if f.severity == "error"], result.findings
    assert result.evidence == ()
    # The base forks its tests too: a warning (from the after run and from the run of
    # the patched code with the base's tests), nothing that blocks.
    assert {f.rule for f in result.findings} == {"tamper-in-base"}, result.findings
    assert "ran in another process" in result.findings[0].message


def test_a_patch_that_sends_tests_to_another_process_is_tamper(tmp_path: Path) -> None:
    result = _gate(tmp_path, BASE, {"tests/conftest.py": FORKS_EACH_TEST})
    tamper = [f for f in result.findings if f.rule == "tamper"]
    assert not result.passed and tamper, result.findings
    assert tamper[0].message.endswith(f"[{OUTSIDE}]")
