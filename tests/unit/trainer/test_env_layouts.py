"""The builder and the reward on a fixture repository with every layout the test ids
must survive: tests inherited from a mixin in tests/__init__.py (unittest and plain
classes), nested classes, parametrised tests whose ids hold ``::``, ``/``, spaces and
brackets, a doctest in a src layout, a test module in a dotted folder. The builder's
ids run (it proves so itself), the gold patch earns 1, and breaking any one of them
earns 0."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tests.fakes import commit_files, git, make_git_repo
from tests.plugins.trainer import PYTEST, sandbox_factory
from tests.unit.worker.gates.test_junit import EXPECTED, PROJECT
from trainer.envs.builder import BuildSpec, EnvironmentBuilder
from trainer.envs.schema import Environment
from trainer.rl.reward import compute_reward

COMMAND = f"{PYTEST} --doctest-modules src tests"
BUGGY = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"
NEW_TEST = """\
import pytest

from pkg.calc import add


@pytest.mark.parametrize("a, b", [(2, 3), (0, 1)], ids=["2::3", "0/1 one"])
def test_add(a, b):
    assert add(a, b) == a + b
"""
BREAK_HOOK = """\
def pytest_runtest_call(item):
    if item.nodeid == {test_id!r}:
        raise AssertionError("broken on purpose")
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Environment, Path]:
    root = tmp_path_factory.mktemp("layouts")
    repo = root / "repo"
    base = make_git_repo(repo, {**PROJECT, "src/pkg/calc.py": BUGGY})
    fix = commit_files(repo, {"src/pkg/calc.py": FIXED, "tests/test_calc.py": NEW_TEST}, "fix add")
    builder = EnvironmentBuilder(sandbox_factory, reruns=1, test_timeout_s=120)
    env = builder.build(
        BuildSpec(repo, base, fix, "add subtracts", repo="acme/layouts", test_command=COMMAND)
    )
    checkout = root / "checkout"
    git(repo, "worktree", "add", "-q", "--detach", str(checkout), base)
    return env, checkout


def test_the_builder_keeps_every_layouts_node_id(built: tuple[Environment, Path]) -> None:
    env, _ = built
    assert env.FAIL_TO_PASS == [
        "tests/test_calc.py::test_add[0/1 one]",
        "tests/test_calc.py::test_add[2::3]",
    ]
    passing = sorted(t for t, o in EXPECTED.items() if o == "passed")
    assert passing == env.PASS_TO_PASS


def test_the_gold_patch_earns_one(built: tuple[Environment, Path]) -> None:
    env, checkout = built
    result = compute_reward(env, env.patch, checkout, sandbox_factory, gates=[])
    assert (result.resolved, result.reward) == (True, 1.0), result


@pytest.mark.parametrize("seed", range(3))
def test_breaking_any_one_test_earns_zero(built: tuple[Environment, Path], seed: int) -> None:
    env, checkout = built
    test_id = random.Random(seed).choice([*env.FAIL_TO_PASS, *env.PASS_TO_PASS])
    hook = BREAK_HOOK.format(test_id=test_id).splitlines()
    conftest = (
        "diff --git a/conftest.py b/conftest.py\nnew file mode 100644\n--- /dev/null\n"
        f"+++ b/conftest.py\n@@ -0,0 +1,{len(hook)} @@\n" + "".join(f"+{line}\n" for line in hook)
    )
    result = compute_reward(env, env.patch + conftest, checkout, sandbox_factory, gates=[])
    assert (result.resolved, result.reward) == (False, 0.0)
    assert result.failed_tests == (test_id,)
