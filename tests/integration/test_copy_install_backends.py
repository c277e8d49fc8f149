"""A set-up that installs a copy of the package (``pip install .``, not ``-e``) on real
projects whose build backend is not the virtualenv's: hatchling (sqlparse), flit_core
(pathspec), hatchling with its hatch-vcs plugin (humanize, its tests extra with it).

pip builds the set-up's copy in an isolated environment it fills from the index; every
later sandbox of the job installs the copy again from its own tree with no network and
no build isolation (worker/sandbox/reinstall.py), so before 2026-12-08 that install
could not import the backend, each test run's set-up failed, and the honest upstream fix
was **refused** ("the setup command failed after the patch"). Now the set-up fetches the
backend into a folder of its own while it still has the registry network, and the same
fixes are verified by their own tests, through ``ribbit gates`` on bubblewrap, with the
copy installed again from each tree (its command in the log), as the corpus
(test_real_fixes_corpus.py) verifies them with an editable install.
"""

from __future__ import annotations

import json
import shutil

import pytest

from tests.fakes import commit_files
from tests.integration.test_real_fixes_corpus import CORPUS, FIXTURES, RealFix, _base_repo
from tests.support import GatesRun, gates_side_by_side, require_service

pytestmark = [pytest.mark.integration, pytest.mark.timeout(3600)]

REINSTALL = (
    "PYTHONPATH=/opt/ribbit/build-backend python -m pip install -q --no-deps --no-index "
    "--no-build-isolation --force-reinstall /workspace"
)
# The fixture (its first upstream fix in the corpus) and its set-up, a copy each time.
CASES = {
    "sqlparse": "pip install .",
    "pathspec": "pip install .",
    "humanize": "pip install '.[tests]'",
}


def _fix(fixture: str) -> RealFix:
    return next(fix for fix in CORPUS if fix.fixture == fixture)


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[int, dict]]:
    require_service(shutil.which("bwrap") is not None, "bubblewrap")
    runs: dict[str, GatesRun] = {}
    for fixture in CASES:
        fix = _fix(fixture)
        checkout = _base_repo(fix, tmp_path_factory.mktemp(fixture))
        config = f"setup: {json.dumps(CASES[fixture])}\n"
        commit_files(checkout, {".ribbit.yml": config}, "set up with a copy, not -e")
        data = tmp_path_factory.mktemp(f"data-{fixture}")
        runs[fixture] = GatesRun(checkout, FIXTURES / fixture / fix.fix, fix.issue, data)
    done = gates_side_by_side([[run] for run in runs.values()])
    return {fixture: done[run] for fixture, run in runs.items()}


@pytest.mark.parametrize("fixture", list(CASES))
def test_a_copy_installed_project_with_its_own_backend_is_verified(
    fixture: str, reports: dict[str, tuple[int, dict]]
) -> None:
    code, report = reports[fixture]
    tests = next(g for g in report["gates"] if g["name"] == "tests")
    logs = tests.get("logs", "")
    assert code == 0, (report.get("verdict"), tests["findings"], logs[-3000:])
    assert _fix(fixture).fail_to_pass <= set(tests["evidence"]), tests["evidence"]
    # Each tree's run imported its own copy, built offline by the fetched backend.
    assert logs.count(REINSTALL) >= 3, logs[-3000:]  # base, old code + tests, patched
    assert "the setup command failed" not in str(tests["findings"])
