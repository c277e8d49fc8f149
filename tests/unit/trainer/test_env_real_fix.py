"""A real project's real bug fix (cachetools #200, vendored in tests/fixtures/cachetools):
its test classes inherit their test methods from a mixin in tests/__init__.py, the
layout that once gave ids pytest could not run and a reward of 1.0 to a patch that
broke an inherited test."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakes import git
from tests.plugins.trainer import PYTEST, cachetools_fix_repo, sandbox_factory
from trainer.envs.builder import BuildSpec, EnvironmentBuilder
from trainer.envs.schema import Environment
from trainer.rl.reward import compute_reward

CACHE_CLASSES = ("CacheTest", "FIFOCacheTest", "LFUCacheTest", "LRUCacheTest", "MRUCacheTest")
# Breaks one inherited test of one class: LRUCache.popitem on an empty cache keeps
# the StopIteration as the KeyError's context.
FROM_NONE = "raise KeyError('%s is empty' % type(self).__name__) from None"
BROKEN_ID = "tests/test_lru.py::LRUCacheTest::test_popitem_exception_context"


@pytest.fixture(scope="module")
def cachetools_fix(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    return cachetools_fix_repo(tmp_path_factory.mktemp("cachetools") / "repo")


@pytest.fixture(scope="module")
def env(cachetools_fix: tuple[Path, str, str]) -> Environment:
    repo, base, fix = cachetools_fix
    builder = EnvironmentBuilder(sandbox_factory, reruns=1, test_timeout_s=120)
    issue = "Handle __missing__ not storing cache items\n\nLRUCache breaks when it does not."
    return builder.build(
        BuildSpec(repo, base, fix, issue, repo="tkem/cachetools", test_command=PYTEST)
    )


@pytest.fixture(scope="module")
def checkout(
    cachetools_fix: tuple[Path, str, str], tmp_path_factory: pytest.TempPathFactory
) -> Path:
    repo, base, _ = cachetools_fix
    path = tmp_path_factory.mktemp("checkout") / "repo"
    git(repo, "worktree", "add", "-q", "--detach", str(path), base)
    return path


def test_ids_name_the_module_pytest_collected_the_class_from(env: Environment) -> None:
    ids = [*env.FAIL_TO_PASS, *env.PASS_TO_PASS]
    assert not any(i.startswith("tests/__init__.py") for i in ids)
    # The mixin's rewritten test_missing_getsizeof fails before the fix for the two
    # classes whose __getitem__ the fix changed and that count sizes.
    assert env.FAIL_TO_PASS == [
        "tests/test_lfu.py::LFUCacheTest::test_missing_getsizeof",
        "tests/test_lru.py::LRUCacheTest::test_missing_getsizeof",
    ]
    assert BROKEN_ID in env.PASS_TO_PASS
    inherited = [i for i in ids if i.endswith("::test_pickle")]
    assert len(inherited) == len(CACHE_CLASSES) + 1  # RRCacheTest too


def test_every_id_is_collected_by_pytest_exactly(
    env: Environment, cachetools_fix: tuple[Path, str, str], tmp_path: Path
) -> None:
    repo, _, fix = cachetools_fix
    tree = tmp_path / "at-fix"
    git(repo, "worktree", "add", "-q", "--detach", str(tree), fix)
    ids = sorted([*env.FAIL_TO_PASS, *env.PASS_TO_PASS])
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *ids],
        cwd=tree,
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    collected = [line for line in out.stdout.splitlines() if "::" in line]
    assert sorted(collected) == ids


def test_the_real_fix_earns_one(env: Environment, checkout: Path) -> None:
    result = compute_reward(env, env.patch, checkout, sandbox_factory, gates=[])
    assert result.reward == 1.0, result


def test_the_real_fix_plus_one_broken_inherited_test_earns_zero(
    env: Environment, checkout: Path, tmp_path: Path
) -> None:
    tree = tmp_path / "broken"
    git(checkout, "worktree", "add", "-q", "--detach", str(tree), env.base_commit)
    (tmp_path / "fix.diff").write_text(env.patch)
    git(tree, "apply", str(tmp_path / "fix.diff"))
    lru = tree / "cachetools" / "lru.py"
    assert FROM_NONE in lru.read_text()
    lru.write_text(lru.read_text().replace(FROM_NONE, FROM_NONE.removesuffix(" from None")))
    patch = git(tree, "diff", env.base_commit) + "\n"
    result = compute_reward(env, patch, checkout, sandbox_factory, gates=[])
    assert result.reward == 0.0
    assert result.reason == "tests_failed"
    assert result.failed_tests == (BROKEN_ID,)


BREAK_HOOK = """
import pytest


def pytest_runtest_{phase}(item):
    if item.nodeid == {test_id!r}:
        raise AssertionError("broken on purpose")
"""


@pytest.mark.parametrize("seed", range(4))
def test_any_single_broken_test_costs_the_reward(
    env: Environment, checkout: Path, seed: int
) -> None:
    # A property over the environment's own ids: whichever one test the patch breaks
    # (in its setup: an error; in its call: a failure), the reward is 0 and names it.
    rng = random.Random(seed)
    ids = sorted([*env.FAIL_TO_PASS, *env.PASS_TO_PASS])
    test_id = rng.choice(ids)
    phase = rng.choice(["setup", "call"])
    hook = BREAK_HOOK.format(phase=phase, test_id=test_id)
    lines = "".join(f"+{line}\n" for line in hook.splitlines())
    conftest = (
        "diff --git a/conftest.py b/conftest.py\nnew file mode 100644\n--- /dev/null\n"
        f"+++ b/conftest.py\n@@ -0,0 +1,{len(hook.splitlines())} @@\n{lines}"
    )
    result = compute_reward(env, env.patch + conftest, checkout, sandbox_factory, gates=[])
    assert result.reward == 0.0, (test_id, phase)
    assert result.failed_tests == (test_id,)
