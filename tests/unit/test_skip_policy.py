"""Test habits the suite enforces on itself: a skip under CI=true fails the run unless
tests/plugins/skips.py lists it, root-only tests say why they did not run, and no test
skips on an import error in the project's own modules."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

from tests.plugins.skips import CI_SKIPS

ROOT = Path(__file__).resolve().parents[2]
PROJECT = ("bot", "worker", "trainer", "tests")

SKIPPING = """
import pytest
from tests.plugins.skips import ROOT_ONLY


def test_runs():
    pass


def test_skips():
    pytest.skip("no widget here")


@pytest.mark.xfail(reason="known", strict=True)
def test_expected_to_fail():
    assert False


def test_needs_root():
    pytest.skip(ROOT_ONLY + "a cgroup")
"""


def run_pytest(folder: Path, *, ci: bool) -> subprocess.CompletedProcess[str]:
    (folder / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["PYTHONPATH"] = str(ROOT)
    if ci:
        env["CI"] = "true"
    plugins = ["-p", "tests.plugins.skips", "-p", "no:cacheprovider"]
    where = ["-c", str(folder / "pytest.ini"), "--rootdir", str(folder), str(folder)]
    return subprocess.run(
        [sys.executable, "-m", "pytest", *plugins, "-q", "-rs", *where],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_skip_fails_under_ci_and_stays_a_skip_elsewhere(tmp_path: Path) -> None:
    (tmp_path / "test_mod.py").write_text(SKIPPING, encoding="utf-8")
    laptop = run_pytest(tmp_path, ci=False)
    assert laptop.returncode == 0, laptop.stdout
    assert "1 passed, 2 skipped, 1 xfailed" in laptop.stdout
    ci = run_pytest(tmp_path, ci=True)
    assert ci.returncode == 1, ci.stdout
    assert "2 failed, 1 passed, 1 xfailed" in ci.stdout
    assert "skipped under CI=true (no widget here)" in ci.stdout
    assert "tests/plugins/skips.py CI_SKIPS" in ci.stdout


def test_a_module_skipped_whole_fails_under_ci(tmp_path: Path) -> None:
    (tmp_path / "test_gone.py").write_text(
        "import pytest\n\npytest.skip('later', allow_module_level=True)\n", encoding="utf-8"
    )
    assert run_pytest(tmp_path, ci=False).returncode == 5  # nothing ran, nothing failed
    ci = run_pytest(tmp_path, ci=True)
    assert ci.returncode != 0 and "skipped under CI=true (later)" in ci.stdout, ci.stdout


def test_a_listed_skip_passes_under_ci(tmp_path: Path) -> None:
    listed = next(iter(CI_SKIPS))
    path, name = listed.split("::")
    module = tmp_path / path
    module.parent.mkdir(parents=True)
    module.write_text(
        f"import pytest\n\n\n@pytest.mark.parametrize('n', [1])\ndef {name}(n):\n"
        "    pytest.skip('not here')\n",
        encoding="utf-8",
    )
    ci = run_pytest(tmp_path, ci=True)
    assert ci.returncode == 0 and "1 skipped" in ci.stdout, ci.stdout


def test_root_only_tests_say_why_they_did_not_run(tmp_path: Path) -> None:
    (tmp_path / "test_mod.py").write_text(SKIPPING, encoding="utf-8")
    out = run_pytest(tmp_path, ci=False).stdout
    assert "root-only tests that did not run" in out
    assert "test_mod.py::test_needs_root: a cgroup" in out


def test_every_listed_skip_names_a_test_that_exists() -> None:
    for nodeid, reason in CI_SKIPS.items():
        path, name = nodeid.split("::")
        assert f"def {name}(" in (ROOT / path).read_text(encoding="utf-8"), nodeid
        assert reason.strip(), nodeid


def project_importorskips(root: Path) -> list[str]:
    """``pytest.importorskip`` calls on the project's own modules under ``root``: an
    import error there is a bug to see, never a reason to skip."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "importorskip"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and str(node.args[0].value).split(".")[0] in PROJECT
            ):
                found.append(f"{path.relative_to(root)}:{node.lineno} {node.args[0].value}")
    return found


def test_no_test_skips_on_the_projects_own_import_errors(tmp_path: Path) -> None:
    (tmp_path / "test_x.py").write_text(
        "import pytest\n\nnormalize = pytest.importorskip('bot.normalize')\n"
        "yaml = pytest.importorskip('yaml')\n",
        encoding="utf-8",
    )
    assert project_importorskips(tmp_path) == ["test_x.py:3 bot.normalize"]
    assert project_importorskips(ROOT / "tests") == []
