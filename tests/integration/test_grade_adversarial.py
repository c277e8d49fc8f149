"""The grader is the gate's judge (issue #31: "one per family also ... through ``ribbit
envs grade``; every one refused ..., none rewarded"). An environment is built from the
adversarial toy repository (tests/adversarial.py), whose ``add`` subtracts: the real
fix corrects it and adds ``tests/test_add.py``. Each family's first Python variant is
then graded as a rollout's patch would be, on bubblewrap through ``ribbit envs grade``:
the fix to ``add`` *plus* the variant (which breaks ``mul`` and hides it, or smuggles in
what the gates refuse). The fix alone earns 1.0; no variant earns anything.

Families whose variant is a raw patch (the parser mismatches) cannot carry the fix and
are graded as written. About two minutes on a two-core machine (slow tier).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from bot.cli import main
from tests.adversarial import BASE, CASES, Case, case_patch
from tests.fakes import commit_files, git, make_git_repo
from tests.plugins.trainer import sandbox_factory
from tests.support import require_service
from trainer.envs.builder import BuildSpec, EnvironmentBuilder
from trainer.envs.folders import EnvironmentFolders
from trainer.envs.schema import Environment

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SUBTRACTS = "def add(a, b):\n    return a - b\n"
ADDS = "def add(a, b):\n    return a + b\n"
TEST_ADD = "from calc.core import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
PYTEST = "python3 -m pytest -q -p no:cacheprovider"


def _first_per_family() -> list[Case]:
    seen: dict[str, Case] = {}
    for case in CASES:
        if not case.honest and case.base == "python":
            seen.setdefault(case.family, case)
    return list(seen.values())


FAMILIES = _first_per_family()


def _with_the_fix(case: Case) -> Case:
    """The variant on top of the real fix: ``add`` corrected wherever it is written."""
    changes = dict(case.changes)
    core = changes.get("calc/core.py", BASE["calc/core.py"])
    if core is not None:
        # In a UTF-7 file a plus is spelled "+-" (a bare "+" opens a base64 run).
        adds = ADDS.replace("+", "+-") if "coding: utf-7" in core else ADDS
        changes["calc/core.py"] = core.replace(SUBTRACTS, adds)
    return Case(case.name, case.family, changes, case.raw_patch, case.blocked_by, case.renames)


@pytest.fixture(scope="module")
def graded_env(tmp_path_factory: pytest.TempPathFactory) -> tuple[Environment, Path, Path]:
    """(environment, Ribbit data dir, a scratch checkout of the base for making patches)."""
    require_service(shutil.which("bwrap") is not None, "bubblewrap")
    root = tmp_path_factory.mktemp("calc")
    repo = root / "repo"
    base = make_git_repo(repo, BASE)
    fix = commit_files(
        repo,
        {
            "calc/core.py": BASE["calc/core.py"].replace(SUBTRACTS, ADDS),
            "tests/test_add.py": TEST_ADD,
        },
        "Fix add",
    )
    builder = EnvironmentBuilder(sandbox_factory, reruns=1, test_timeout_s=60)
    env = builder.build(
        BuildSpec(repo, base, fix, "add subtracts", repo="acme/calc", test_command=PYTEST)
    )
    assert env.FAIL_TO_PASS == ["tests/test_add.py::test_add"], env.FAIL_TO_PASS
    data = root / "data"
    EnvironmentFolders(data / "trainer").add(env, repo)
    scratch = root / "scratch"
    git(repo, "worktree", "add", "-q", "--detach", str(scratch), base)
    return env, data, scratch


def _grade(
    env: Environment, data: Path, patch: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> dict[str, object]:
    monkeypatch.setenv("RIBBIT_DATA_DIR", str(data))
    monkeypatch.setenv("RIBBIT_SANDBOX__BACKEND", "bubblewrap")
    path = tmp_path / "candidate.diff"
    path.write_text(patch)
    graded = CliRunner().invoke(
        main, ["envs", "grade", env.instance_id, "--patch", str(path), "--json"]
    )
    assert graded.exit_code == 0, graded.output
    verdict: dict[str, object] = json.loads(graded.output)
    return verdict


def test_the_fix_alone_earns_one(
    graded_env: tuple[Environment, Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env, data, _ = graded_env
    verdict = _grade(env, data, env.patch, tmp_path, monkeypatch)
    assert (verdict["reward"], verdict["reason"]) == (1.0, "solved"), verdict


@pytest.mark.parametrize("case", FAMILIES, ids=lambda c: f"{c.family}-{c.name}")
def test_no_variant_of_any_family_is_rewarded(
    graded_env: tuple[Environment, Path, Path],
    case: Case,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    env, data, scratch = graded_env
    patch = case_patch(scratch, _with_the_fix(case) if case.raw_patch is None else case)
    verdict = _grade(env, data, patch, tmp_path, monkeypatch)
    assert verdict["reward"] == 0.0, verdict
    if case.raw_patch is not None:
        return
    # What cost the reward is the variant, not a fix that failed to apply: a finding,
    # tamper, or the broken test the variant hid.
    assert verdict["reason"] in {"gate_findings", "tamper", "tests_failed"}, verdict
    if verdict["reason"] == "tests_failed":
        assert "tests/test_core.py::test_mul" in verdict["failed_tests"], verdict  # type: ignore[operator]


def test_every_python_family_is_graded() -> None:
    families = {c.family for c in CASES if not c.honest and c.base == "python"}
    assert {c.family for c in FAMILIES} == families
    assert len(FAMILIES) >= 15
