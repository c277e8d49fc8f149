"""A real merged fix that changes behaviour the repository's tests pinned (issue #38):
python-humanize 906a38c makes ``naturaltime(23.5)`` round to "24 seconds ago" and edits
the two parametrize tables that said "23 seconds ago" (tests/fixtures/humanize). Judged
by ``ribbit gates`` on bubblewrap with no set-up in ``.ribbit.yml`` (the detected
``pip install -e '.[tests]'`` builds it with hatch-vcs and installs freezegun from PyPI
through the registry proxy; the second run takes the cached set-up):

- as the upstream author would get it: unverified (exit 3), each moved test named with
  its old and new table row side by side, no test counted as evidence, and the rows
  whose index-based ids the inserted rows shifted reported as replaced, not missing;
- with the issue labelled as ``.ribbit.yml`` ``gates.behaviour_change_labels`` says:
  verified (exit 0), the new rows that fail on the old code as evidence, the moved
  rows still shown.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.fakes import make_git_repo
from tests.support import gates_on_bubblewrap, require_service

pytestmark = pytest.mark.integration

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "humanize"
RIBBIT_YML = "gates: {behaviour_change_labels: [behaviour-change]}\n"
ISSUE = (
    "naturaltime truncates float seconds\n"
    "naturaltime(23.5) says '23 seconds ago'; it should round to the nearest second."
)
OLD_ROW = '(23.5, "23 seconds ago"),'
NEW_ROWS = ['(22.5, "22 seconds ago"),', '(23.5, "24 seconds ago"),']
# Each moved row beside its table's new rows (the first table also gains a 23.9 row).
MOVED = {
    "tests/test_time.py::test_naturaltime[23.5-23 seconds ago]": (
        [OLD_ROW],
        [*NEW_ROWS, '(23.9, "24 seconds ago"),'],
    ),
    "tests/test_time.py::test_naturaltime_nomonths[23.5-23 seconds ago]": ([OLD_ROW], NEW_ROWS),
}


@pytest.fixture(scope="module")
def humanize(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """humanize 4.15.0 taken back to 4.14.0, the release before 906a38c (the vendored
    files), committed with a .ribbit.yml."""
    require_service(shutil.which("bwrap") is not None, "bubblewrap")
    tree = tmp_path_factory.mktemp("humanize-tree")
    for patch in ("base.patch", "rounding-base.patch"):
        subprocess.run(["git", "apply", str(FIXTURES / patch)], cwd=tree, check=True)
    files = {str(p.relative_to(tree)): p.read_text() for p in tree.rglob("*") if p.is_file()}
    repo = tmp_path_factory.mktemp("humanize") / "repo"
    make_git_repo(repo, {**files, ".ribbit.yml": RIBBIT_YML})
    return repo


def _gates(repo: Path, data: Path, *labels: str) -> tuple[int, dict[str, Any]]:
    label_args = [a for label in labels for a in ("--issue-label", label)]
    code, report = gates_on_bubblewrap(
        repo, FIXTURES / "rounding-fix.patch", ISSUE, data, *label_args
    )
    tests: dict[str, Any] = next(r for r in report["gates"] if r["name"] == "tests")
    return code, tests


def _moved_rows(tests: dict[str, Any]) -> dict[str, tuple[list[str], list[str]]]:
    return {
        c["test"]: (c["old"], c["new"]) for c in tests["details"]["pinned"]["behaviour_changes"]
    }


def test_a_real_behaviour_change_is_unverified_then_verified_under_its_label(
    humanize: Path, tmp_path: Path
) -> None:
    data = tmp_path / "data"  # one data dir: the second run restores the cached set-up
    code, tests = _gates(humanize, data)
    assert code == 3, (tests["findings"], tests["details"].get("pinned"))  # unverified
    details = tests["details"]
    assert details["command_source"] != ".ribbit.yml" and details["after"]["per_test"]
    assert "evidence" not in tests and details["pinned"]["regressions"] == []
    assert details["pinned"]["accepted_by_label"] is None
    # Each moved row beside its replacement: the table rows are part of the test they
    # decorate (not of the test above them in the file).
    assert _moved_rows(tests) == MOVED
    # Rows after the inserted ones change their index-based ids (``test_input25`` becomes
    # ``test_input27``): not lost tests, since the base's file ran against the new code.
    assert {(f["rule"], f["severity"]) for f in tests["findings"]} == {
        ("behaviour-change", "warning"),
        ("tests-replaced", "warning"),
    }
    (replaced,) = [f for f in tests["findings"] if f["rule"] == "tests-replaced"]
    assert "tests/test_time.py::test_naturaltime[test_input25-2 years ago]" in replaced["message"]
    # The fix's new rows fail on the old code: evidence that only the label admits.
    assert (
        "tests/test_time.py::test_naturaltime[23.5-24 seconds ago]"
        in (details["evidence"]["run"]["failing"])
    )

    code, labelled = _gates(humanize, data, "bug", "behaviour-change")
    assert code == 0, labelled["logs"][-3000:]  # verified
    assert labelled["details"]["pinned"]["accepted_by_label"] == "behaviour-change"
    assert set(labelled["evidence"]) >= {
        "tests/test_time.py::test_naturaltime[23.5-24 seconds ago]",
        "tests/test_time.py::test_naturaltime_nomonths[23.5-24 seconds ago]",
    }
    assert _moved_rows(labelled) == _moved_rows(tests)
