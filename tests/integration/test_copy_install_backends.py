"""A set-up that installs a copy of the package (``pip install .``, not ``-e``) on real
projects whose build backend is not the virtualenv's: hatchling (sqlparse) and flit_core
(pathspec); hatchling with its hatch-vcs plugin through a whole job is humanize-copy in
test_real_projects_e2e.py.

pip builds the set-up's copy in an isolated environment it fills from the index; every
later sandbox of the job installs the copy again from its own tree with no network and
no build isolation (worker/sandbox/reinstall.py), so before 2026-12-08 that install
could not import the backend, each test run's set-up failed, and the honest upstream fix
was **refused** ("the setup command failed after the patch"). Now the set-up fetches the
backend into a folder of its own while it still has the registry network, and the same
fixes are verified by their own tests, through ``ribbit gates`` on bubblewrap (sqlparse
on docker too, against Podman), with the copy installed again from each tree (its
command in the log), as the corpus (test_real_fixes_corpus.py) verifies them with an
editable install.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.fakes import commit_files, make_git_repo
from tests.integration.test_real_fixes_corpus import CORPUS, FIXTURES, RealFix, _base_repo
from tests.support import GatesResult, GatesRun, gates_side_by_side, require_service, run_gates
from tests.unit.worker.gates.helpers import make_patch

pytestmark = [pytest.mark.integration, pytest.mark.timeout(3600)]

HOST_CA = Path(os.environ.get("SSL_CERT_FILE", "/etc/ssl/certs/ca-certificates.crt"))
REINSTALL = (
    "PYTHONPATH=/opt/ribbit/build-backend python -m pip install -q --no-deps --no-index "
    "--no-build-isolation --force-reinstall /workspace"
)
# The fixture (its first upstream fix in the corpus) and its set-up, a copy each time.
CASES = {
    "sqlparse": "pip install .",
    "pathspec": "pip install .",
}


def _fix(fixture: str) -> RealFix:
    return next(fix for fix in CORPUS if fix.fixture == fixture)


def _run(fixture: str, root: Path, **how: Any) -> GatesRun:
    """``ribbit gates`` over ``fixture``'s first fix, its base set up with a copy."""
    fix = _fix(fixture)
    checkout = _base_repo(fix, root)
    config = f"setup: {json.dumps(CASES[fixture])}\n"
    commit_files(checkout, {".ribbit.yml": config}, "set up with a copy, not -e")
    return GatesRun(checkout, FIXTURES / fixture / fix.fix, fix.issue, root / "data", **how)


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, GatesResult]:
    require_service(shutil.which("bwrap") is not None, "bubblewrap")
    runs = {fixture: _run(fixture, tmp_path_factory.mktemp(fixture)) for fixture in CASES}
    done = gates_side_by_side([[run] for run in runs.values()])
    return {fixture: done[run] for fixture, run in runs.items()}


def _assert_verified(fixture: str, result: GatesResult) -> None:
    code, report = result
    assert "gates" in report, report
    tests = next(g for g in report["gates"] if g["name"] == "tests")
    logs = tests.get("logs", "")
    assert code == 0, (report.get("verdict"), tests["findings"], logs[-3000:])
    assert _fix(fixture).fail_to_pass <= set(tests["evidence"]), tests["evidence"]
    # Each tree's run imported its own copy, built offline by the fetched backend.
    assert logs.count(REINSTALL) >= 3, logs[-3000:]  # base, old code + tests, patched
    assert "the setup command failed" not in str(tests["findings"])


@pytest.mark.parametrize("fixture", list(CASES))
def test_a_copy_installed_project_with_its_own_backend_is_verified(
    fixture: str, reports: dict[str, GatesResult]
) -> None:
    _assert_verified(fixture, reports[fixture])


def test_the_same_on_docker(tmp_path: Path, podman_socket: str, sandbox_image: str) -> None:
    engine = [
        ("RIBBIT_SANDBOX__DOCKER_URL", podman_socket),
        ("RIBBIT_SANDBOX__IMAGE", sandbox_image),
    ]
    # The image trusts Debian's CAs only; a deployment behind a TLS-inspecting gateway (as
    # these test machines are) hands the set-up the host's bundle (tests/plugins/e2e.py).
    if HOST_CA.is_file():
        engine.append(("RIBBIT_SANDBOX__SETUP_CA_BUNDLE", str(HOST_CA)))
    run = _run("sqlparse", tmp_path, backend="docker", env=tuple(engine))
    _assert_verified("sqlparse", run_gates(run))


PYPROJECT = (
    '[build-system]\nrequires = ["hatchling"]\nbuild-backend = "hatchling.build"\n\n'
    '[project]\nname = "calc"\nversion = "1.0"\ndependencies = [{deps}]\n'
)


def test_a_patch_that_changes_the_manifest_is_set_up_again_with_its_backend(
    tmp_path: Path,
) -> None:
    # The patch adds a dependency, so the base's set-up runs again over the patched tree
    # (worker/gates/basesetup.py: wheels only, no credentials), and the backend is
    # fetched again over the base's, as that step runs.
    require_service(shutil.which("bwrap") is not None, "bubblewrap")
    checkout = tmp_path / "calc"
    make_git_repo(
        checkout,
        {
            "pyproject.toml": PYPROJECT.format(deps=""),
            "src/calc/__init__.py": "def add(a, b):\n    return a - b\n",
            "tests/test_calc.py": "from calc import add\n\n\ndef test_zero():\n"
            "    assert add(1, 0) == 1\n",
            ".ribbit.yml": "setup: pip install .\n",
        },
    )
    fix = {
        "pyproject.toml": PYPROJECT.format(deps='"six"'),
        "src/calc/__init__.py": "import six\n\n\ndef add(a, b):\n    return a + b\n",
        "tests/test_add.py": "from calc import add\n\n\ndef test_add():\n"
        "    assert add(2, 3) == 5\n",
    }
    patch = tmp_path / "fix.diff"
    patch.write_text(make_patch(checkout, fix))
    code, report = run_gates(GatesRun(checkout, patch, "add subtracts", tmp_path / "data"))
    tests = next(g for g in report["gates"] if g["name"] == "tests")
    logs = tests.get("logs", "")
    assert code == 0, (report.get("verdict"), tests["findings"], logs[-3000:])
    assert tests["evidence"] == ["tests/test_add.py::test_add"]
    assert "ran again over the patched tree" in logs and "already exists" not in logs, logs
    assert logs.count(REINSTALL) >= 3, logs[-3000:]
