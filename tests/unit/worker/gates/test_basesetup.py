"""The gates' base set-up outside a job (worker/gates/basesetup.py), on fakes: which
patches count as changing dependency manifests, and that a test run never sets a tree
up with network (the real backends: tests/integration/test_gates_patched_setup.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.worker.gates.helpers import make_patch, repo_with
from worker.gates.basesetup import BaseSetup, changed_manifests
from worker.sandbox.base import Sandbox, SandboxError
from worker.sandbox.recipe import SandboxRecipe
from worker.sandbox.setup import SetupResult


@pytest.mark.parametrize(
    ("changes", "manifests"),
    [
        ({"package.json": "{}\n"}, ("package.json",)),
        ({"requirements-dev.txt": "x\n", "app.py": "1\n"}, ("requirements-dev.txt",)),
        ({"requirements/base.txt": "x\n"}, ("requirements/base.txt",)),
        ({"setup.py": None}, ("setup.py",)),  # deleted
        ({"go.mod": "module x\n", "Cargo.lock": "x\n"}, ("Cargo.lock", "go.mod")),
        ({"src/package.json": "{}\n", "docs/requirements.txt": "x\n"}, ()),
        ({"app.py": "2\n"}, ()),
    ],
)
def test_changed_manifests(
    tmp_path: Path, changes: dict[str, str | None], manifests: tuple[str, ...]
) -> None:
    repo, _ = repo_with(tmp_path, {"app.py": "1\n", "setup.py": "x\n"})
    assert changed_manifests(make_patch(repo, changes)) == manifests


def test_an_unreadable_patch_changes_no_manifest() -> None:
    assert changed_manifests("not a diff") == ()


class Box:
    """A sandbox without snapshots."""


def _recipe(opened: list[str], ran: list[tuple[str, str | None]], ok: bool) -> SandboxRecipe:
    def open_online(source: Path) -> Sandbox:
        opened.append("online")
        return Box()  # type: ignore[return-value]

    def open_offline(source: Path) -> Sandbox:
        opened.append("offline")
        return Box()  # type: ignore[return-value]

    def setup(sandbox: Sandbox, command: str | None) -> SetupResult:
        ran.append(("setup", command))
        return SetupResult(
            command=command, ok=ok, exit_code=0 if ok else 1, output="", duration_s=0
        )

    return SandboxRecipe(open_online, setup, offline=open_offline)


def test_test_runs_get_offline_sandboxes_and_the_bases_failure(tmp_path: Path) -> None:
    opened: list[str] = []
    ran: list[tuple[str, str | None]] = []
    recipe = _recipe(opened, ran, ok=False)
    with BaseSetup(recipe, "npm ci", tmp_path) as base:
        with pytest.raises(SandboxError):
            base.step(Box())  # type: ignore[arg-type]
        failed = base.adopt(Box(), recipe.setup(Box(), "npm ci"))  # type: ignore[arg-type]
        base.sandboxes(tmp_path)
        assert opened == ["offline"]
        # Every tree gets the base's failure: nothing is set up again over another tree.
        assert base.step(Box()) is failed  # type: ignore[arg-type]
    assert ran == [("setup", "npm ci")]


def test_without_snapshots_each_run_sets_up_with_no_network(tmp_path: Path) -> None:
    opened: list[str] = []
    ran: list[tuple[str, str | None]] = []
    recipe = _recipe(opened, ran, ok=True)
    with BaseSetup(recipe, "npm ci", tmp_path) as base:
        base.adopt(Box(), recipe.setup(Box(), "npm ci"))  # type: ignore[arg-type]
        assert base.step(Box()).ok  # type: ignore[arg-type]
    # The run's setup is the offline recipe's (its sandboxes never had the proxy).
    assert ran == [("setup", "npm ci"), ("setup", "npm ci")]
