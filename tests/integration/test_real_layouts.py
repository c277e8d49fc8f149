"""Layouts teams use today, end to end (issue #35): a real public project whose tests run
through tox, with a ``src/`` layout, vendored at a real fix's parent with its licence
(tests/fixtures/itsdangerous/README.md) and judged by ``ribbit gates`` on bubblewrap with
no ``.ribbit.yml``.

Its tests import freezegun, which only ``requirements/tests.txt`` names, and that file is
what tox's ``[testenv]`` installs: set-up detection (worker/sandbox/testenvs.py) must
read ``tox.ini`` of the base commit, install the package editable (the ``src/`` layout
importable) and the tox environment's requirements through the registry proxy, and the
fix must come out verified with its own test as the evidence. One ``ribbit gates`` run,
about a minute on a two-core machine (the slow tier).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.fakes import make_git_repo
from tests.support import gates_on_bubblewrap, require_service, tree_from_patch
from worker.sandbox.setupcmd import commit_files, detect_setup

pytestmark = [pytest.mark.integration, pytest.mark.slow]

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "itsdangerous"
ISSUE = (
    "unsign crashes on a timestamp past year 9999\n"
    "TimestampSigner.unsign(b'value.TgPVoaGhoQ.AGBfQ6G6cr07byTRt0zAdPljHOY') raises "
    "ValueError: year is out of range, instead of BadTimeSignature."
)
# Failed on the parent's code and passed with the fix, run outside Ribbit (the fixture's
# README says how).
FAIL_TO_PASS = frozenset(
    {"tests/test_itsdangerous/test_timed.py::TestTimestampSigner::test_malformed_future_timestamp"}
)


@pytest.fixture(scope="module")
def base_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fix's parent as a git repository with no .ribbit.yml."""
    repo = tree_from_patch(FIXTURE / "base.patch", tmp_path_factory.mktemp("itsdangerous") / "repo")
    make_git_repo(repo, {})  # commits the tree as git apply left it
    return repo


def test_the_tox_environment_is_what_set_up_installs(base_repo: Path) -> None:
    # tox's `-r` is the test requirements file too: installed once, on the package's line.
    assert [step.command for step in detect_setup(commit_files(base_repo, "HEAD"))] == [
        "pip install -e . -r requirements/tests.txt"
    ]


def test_a_src_layout_tox_project_fix_is_verified(base_repo: Path, tmp_path: Path) -> None:
    require_service(shutil.which("bwrap") is not None, "bubblewrap")
    exit_code, report = gates_on_bubblewrap(base_repo, FIXTURE / "fix.patch", ISSUE, tmp_path)

    tests = next(g for g in report["gates"] if g["name"] == "tests")
    findings = [f | {"gate": g["name"]} for g in report["gates"] for f in g["findings"]]
    assert exit_code == 0, (report.get("verdict"), findings, tests.get("logs", "")[-3000:])
    assert set(tests["evidence"]) >= FAIL_TO_PASS, tests["evidence"]
    assert [f for f in findings if f["severity"] == "error"] == []
