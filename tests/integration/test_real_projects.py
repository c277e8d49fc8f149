"""Real public projects through the setup step and the test gate, on both backends.

Python: toolz 0.12.1, its sdist from PyPI (pinned by hash; BSD licence inside), set up
the README's way (``pip install -e .``, which fetches setuptools through the registry
proxy) and tested with its own suite (180 tests). The base tree has toolz's own bug
#387 put back (``partition_all`` compared elements with ``==`` through
``tuple.index``); the patch is the project's fix with its regression test. The fix
passes the gate; its test alone (without the fix) fails it (on bubblewrap; on docker the
same fix reaches a draft PR in test_real_projects_e2e.py).

Another toolchain: a Node.js package tested with node's built-in runner (no
downloaded dependency), per test (JUnit on Node 20, TAP on Debian's Node 18).
"""

from __future__ import annotations

import os
import shutil
from functools import partial
from pathlib import Path

import pytest

from tests.fakes import make_git_repo
from tests.support import pinned_sdist, require_service
from tests.unit.worker.gates.helpers import make_patch
from worker.gates import GateContext, run_gates
from worker.repo_config import RepoConfig
from worker.sandbox import sandbox_factory
from worker.sandbox.setup import run_setup
from worker.settings import GateSettings, SandboxSettings

pytestmark = pytest.mark.integration

TOOLZ = "toolz==0.12.1"
TOOLZ_SHA256 = "ecca342664893f177a13dac0e6b41cbd8ac25a358e5f215316d43e2100224f4d"
HOST_CA = Path(os.environ.get("SSL_CERT_FILE", "/etc/ssl/certs/ca-certificates.crt"))
# toolz's fix for issue #387, and the code it replaced.
FIXED = """\
        try:
            # If seq defines __len__, then
            # we can quickly calculate where no_pad starts
            yield prev[:len(seq) % n]
        except TypeError:
            # Get first index of no_pad without using .index()
            # https://github.com/pytoolz/toolz/issues/387
            # Binary search from CPython's bisect module,
            # modified for identity testing.
            lo, hi = 0, n
            while lo < hi:
                mid = (lo + hi) // 2
                if prev[mid] is no_pad:
                    hi = mid
                else:
                    lo = mid + 1
            yield prev[:lo]
"""
BUGGY = "        yield prev[:prev.index(no_pad)]\n"
REGRESSION_TEST = """
    # Regression test: https://github.com/pytoolz/toolz/issues/387
    class NoCompare(object):
        def __eq__(self, other):
            if self.__class__ == other.__class__:
                return True
            raise ValueError()
    obj = NoCompare()
    result = [(obj, obj, obj, obj), (obj, obj, obj)]
    assert list(partition_all(4, [obj]*7)) == result
    assert list(partition_all(4, iter([obj]*7))) == result
"""
ITERTOOLZ = "toolz/itertoolz.py"
TESTS = "toolz/tests/test_itertoolz.py"


@pytest.fixture(scope="session")
def toolz_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """toolz's sdist, downloaded on the host and checked against its pinned hash."""
    tree = pinned_sdist(TOOLZ, tmp_path_factory.mktemp("toolz-sdist"), TOOLZ_SHA256)
    require_service(tree is not None, f"PyPI ({TOOLZ} sdist)")
    assert tree is not None
    assert (tree / "LICENSE.txt").exists()
    return tree


def _files(tree: Path) -> dict[str, str]:
    return {
        str(p.relative_to(tree)): p.read_text()
        for p in sorted(tree.rglob("*"))
        if p.is_file() and "egg-info" not in p.parts[-2]
    }


def _project_settings(request: pytest.FixtureRequest, backend: str) -> SandboxSettings:
    base: SandboxSettings = request.getfixturevalue(f"{backend}_settings")
    return base.model_copy(
        update={
            "setup_network": True,
            "setup_ca_bundle": HOST_CA if HOST_CA.is_file() else None,
            "memory_mb": 1024,
            "pids": 256,
            "workspace_mb": 256,
        }
    )


@pytest.fixture(params=["bubblewrap", "docker"])
def settings(request: pytest.FixtureRequest) -> SandboxSettings:
    return _project_settings(request, request.param)


# toolz on docker reaches a draft PR in test_real_projects_e2e.py (toolz-detected-docker):
# the same sdist, set-up and fix through the image's toolchain. Here, where each half
# sets toolz up from PyPI again, bubblewrap alone (about 95 s of CI saved).
@pytest.fixture
def bubblewrap_project_settings(request: pytest.FixtureRequest) -> SandboxSettings:
    return _project_settings(request, "bubblewrap")


def _gate(
    settings: SandboxSettings, repo: Path, base: str, patch: str, config: RepoConfig
) -> tuple[bool, dict[str, object], set[str], str]:
    report = run_gates(
        GateContext(
            repo_dir=repo,
            base_commit=base,
            patch=patch,
            repo_config=config,
            gate_settings=GateSettings(),
            sandbox_factory=sandbox_factory(settings, network=True),
            setup_step=partial(run_setup, repo_config=config, settings=settings),
        )
    )
    tests = report.result("tests")
    assert tests is not None
    return tests.passed, tests.details, {f.rule for f in tests.findings}, tests.logs


def test_toolz_own_fix_passes_the_test_gate_and_its_test_alone_fails_it(
    toolz_tree: Path, bubblewrap_project_settings: SandboxSettings, tmp_path: Path
) -> None:
    settings = bubblewrap_project_settings
    upstream = _files(toolz_tree)
    assert FIXED in upstream[ITERTOOLZ] and REGRESSION_TEST in upstream[TESTS]
    base_files = {
        **upstream,
        ITERTOOLZ: upstream[ITERTOOLZ].replace(FIXED, BUGGY),
        TESTS: upstream[TESTS].replace(REGRESSION_TEST, ""),
    }
    repo = tmp_path / "toolz"
    base = make_git_repo(repo, base_files)
    config = RepoConfig(setup="pip install -e .", test="python -m pytest -q")

    fix = make_patch(repo, {ITERTOOLZ: upstream[ITERTOOLZ], TESTS: upstream[TESTS]})
    passed, details, rules, logs = _gate(settings, repo, base, fix, config)
    assert passed, f"{rules}\n{logs}"
    assert details["targets"] == ["test_partition_all"]
    after = details["after"]
    assert isinstance(after, dict) and after["counts"]["passed"] == 180, logs
    assert "Successfully installed toolz" in logs

    test_only = make_patch(repo, {TESTS: upstream[TESTS]})
    passed, details, rules, logs = _gate(settings, repo, base, test_only, config)
    assert not passed
    assert "target-test-fails" in rules, f"{rules}\n{logs}"


NODE_PACKAGE = {
    "package.json": '{"name": "slug", "version": "1.0.0", "scripts": {"test": "node --test"}}\n',
    "index.js": (
        "function slug(text) {\n  return text.trim().toLowerCase().replace(' ', '-');\n}\n"
        "module.exports = { slug };\n"
    ),
    "test/slug.test.js": (
        "const test = require('node:test');\nconst assert = require('node:assert');\n"
        "const { slug } = require('../index.js');\n\n"
        "test('one space', () => assert.strictEqual(slug(' Hello World '), 'hello-world'));\n"
    ),
}
NODE_FIX = {
    "index.js": NODE_PACKAGE["index.js"].replace(".replace(' ', '-')", ".replace(/\\s+/g, '-')"),
    "test/slug.test.js": NODE_PACKAGE["test/slug.test.js"]
    + "test('many spaces', () => assert.strictEqual(slug('a b  c'), 'a-b-c'));\n",
}


def test_node_builtin_test_runner_through_the_gate(
    settings: SandboxSettings, tmp_path: Path
) -> None:
    # bubblewrap runs the host's /usr (Node from the host); docker, the image's Node.
    if settings.backend == "bubblewrap":
        require_service(shutil.which("node") is not None, "node")
    repo = tmp_path / "slug"
    base = make_git_repo(repo, NODE_PACKAGE)
    # node's own runner, not npm: Debian packages npm apart from nodejs.
    config = RepoConfig(test="node --test")
    fix = make_patch(repo, NODE_FIX)
    # V8 reserves far more address space than it uses, and bubblewrap's memory limit
    # is an address-space rlimit per process: Node needs the default 2 GB, not the
    # small test limits.
    settings = settings.model_copy(update={"memory_mb": 2048})
    passed, details, rules, logs = _gate(settings, repo, base, fix, config)
    assert passed, f"{rules}\n{logs}"
    after = details["after"]
    assert isinstance(after, dict) and after["counts"]["passed"] == 2, logs
    broken = make_patch(repo, {"test/slug.test.js": NODE_FIX["test/slug.test.js"]})
    passed, details, rules, logs = _gate(settings, repo, base, broken, config)
    assert not passed and "test-fails" in rules, f"{rules}\n{logs}"
    assert details["new_failures"] == ["many spaces"]
