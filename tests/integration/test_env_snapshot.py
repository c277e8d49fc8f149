"""One set-up environment per job, snapshotted and cached per repository, on both real
backends: the second job on a repository restores it instead of installing, a changed
lock file or another repository installs afresh, and the gates judge in a fresh copy of
the snapshot, so what the agent planted outside the repository never reaches a verdict.

The setup command stands in for an install: it writes a random token into the
virtualenv and a folder into the workspace (as ``npm install`` writes node_modules), so
"the install did not run again" is read from the token, not from a time."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fakes import make_git_repo
from worker.gates import GateContext
from worker.gates.tests import TestGate
from worker.repo_config import RepoConfig
from worker.sandbox import open_sandbox, sandbox_factory
from worker.sandbox.envcache import EnvCache, JobEnvironment, env_key
from worker.settings import GateSettings, SandboxSettings

pytestmark = pytest.mark.integration

SETUP = (
    "python3 -c 'import uuid; print(uuid.uuid4())' > \"$VIRTUAL_ENV/installed\" && "
    'mkdir -p node_modules/dep && cp "$VIRTUAL_ENV/installed" node_modules/dep/token'
)
READ_TOKENS = 'cat "$VIRTUAL_ENV/installed" node_modules/dep/token'
FILES = {
    "requirements.txt": "dep==1\n",
    "pkg/__init__.py": "",
    "pkg/mod.py": "def value():\n    return 1\n",
    "tests/test_mod.py": "from pkg.mod import value\n\n\ndef test_value():\n"
    "    assert value() == 1\n",
}
CONFIG = RepoConfig(setup=SETUP, test="python -m pytest -q -p no:cacheprovider")


@pytest.fixture(params=["bubblewrap", "docker"])
def settings(request: pytest.FixtureRequest) -> SandboxSettings:
    base: SandboxSettings = request.getfixturevalue(f"{request.param}_settings")
    # The stand-in install needs no registry: no network anywhere in these tests.
    return base.model_copy(update={"setup_network": False})


def _job(
    settings: SandboxSettings, cache: EnvCache, repo: str, checkout: Path, workdir: Path
) -> tuple[str, str | None]:
    """One job's agent sandbox: its setup step, then the tokens the agent would see."""
    key = env_key(repo, settings, checkout, CONFIG.setup)
    env = JobEnvironment(CONFIG, settings, checkout=checkout, workdir=workdir, cache=cache, key=key)
    with open_sandbox(settings, checkout) as sandbox:
        setup = env.setup(sandbox)
        assert setup.ok, setup.output
        seen = sandbox.exec(READ_TOKENS, timeout=60)
    assert seen.exit_code == 0, seen.stderr
    lines = seen.stdout.split()
    assert len(lines) == 2 and lines[0] == lines[1]  # the env and the workspace agree
    return lines[0], setup.restored_from


def test_cache_hit_skips_the_install_and_a_lock_or_repo_change_misses(
    settings: SandboxSettings, tmp_path: Path
) -> None:
    cache = EnvCache(tmp_path / "cache", max_bytes=1024**3, max_age_s=86400)
    checkout = tmp_path / "repo"
    make_git_repo(checkout, FILES)
    first, how = _job(settings, cache, "github:team/app", checkout, tmp_path / "job1")
    assert how is None  # installed
    again, how = _job(settings, cache, "github:team/app", checkout, tmp_path / "job2")
    assert (again, how) == (first, "cache")  # the install did not run again

    other_repo, how = _job(settings, cache, "github:team/fork", checkout, tmp_path / "job3")
    assert how is None and other_repo != first

    (checkout / "requirements.txt").write_text("dep==2\n")
    relocked, how = _job(settings, cache, "github:team/app", checkout, tmp_path / "job4")
    assert how is None and relocked not in {first, other_repo}


PLUGIN = """\
import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    outcome.get_result().outcome = "passed"
"""
PLANT = f"""\
set -e
site=$(python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
cat > "$site/ribbit_evil.py" <<'EOF'
{PLUGIN}EOF
mkdir -p "$site/ribbit_evil-0.dist-info"
printf 'Metadata-Version: 2.1\\nName: ribbit-evil\\nVersion: 0\\n' \\
  > "$site/ribbit_evil-0.dist-info/METADATA"
printf '[pytest11]\\nevil = ribbit_evil\\n' > "$site/ribbit_evil-0.dist-info/entry_points.txt"
"""
WRONG_TEST = FILES["tests/test_mod.py"] + "\n\ndef test_value_two():\n    assert value() == 2\n"


def test_a_plugin_planted_in_site_packages_does_not_reach_the_gate_verdict(
    settings: SandboxSettings, tmp_path: Path
) -> None:
    checkout = tmp_path / "repo"
    base = make_git_repo(checkout, FILES)
    env = JobEnvironment(CONFIG, settings, checkout=checkout, workdir=tmp_path / "job")
    with open_sandbox(settings, checkout) as sandbox:
        assert env.setup(sandbox).ok
        # The agent adds a test the code fails, and a plugin that turns failures into
        # passes, installed where pytest loads plugins from: the virtualenv.
        sandbox.write_file("tests/test_mod.py", WRONG_TEST.encode())
        planted = sandbox.exec(PLANT, timeout=60)
        assert planted.exit_code == 0, planted.stderr
        fooled = sandbox.exec(CONFIG.test, timeout=120)
        # Where it was planted, the plugin works: the failing test "passes".
        assert fooled.exit_code == 0 and "2 passed" in fooled.stdout, fooled.stdout
        patch = sandbox.diff()
    assert "ribbit_evil" not in patch
    tests = TestGate().run(
        GateContext(
            repo_dir=checkout,
            base_commit=base,
            patch=patch,
            repo_config=CONFIG,
            gate_settings=GateSettings(),
            sandbox_factory=sandbox_factory(settings, network=False),
            setup_step=env.restore,
        )
    )
    rules = {f.rule for f in tests.findings}
    assert not tests.passed and "target-test-fails" in rules, f"{rules}\n{tests.logs}"
    assert "restored from this job's snapshot" in tests.logs
    # Judged as the code is: only the agent's wrong test fails.
    assert tests.details["after"]["failing"] == ["tests/test_mod.py::test_value_two"]


SRC_LAYOUT = {
    "pyproject.toml": '[build-system]\nrequires = ["setuptools>=61"]\n'
    'build-backend = "setuptools.build_meta"\n\n[project]\nname = "calc"\nversion = "0.1.0"\n\n'
    '[tool.setuptools]\npackage-dir = {"" = "src"}\npackages = ["calc"]\n',
    "src/calc/__init__.py": "def add(a, b):\n    return a - b\n",
    "tests/test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
}


def test_what_setup_wrote_into_the_workspace_stays_out_of_the_agents_patch(
    settings: SandboxSettings, tmp_path: Path
) -> None:
    # `pip install -e .` writes pkg.egg-info into the checkout, `npm install`
    # node_modules: build output, which a PR must not carry; the agent's files it must.
    checkout = tmp_path / "repo"
    make_git_repo(checkout, FILES)
    cache = EnvCache(tmp_path / "cache", max_bytes=1024**3, max_age_s=86400)
    key = env_key("github:team/calc", settings, checkout, CONFIG.setup)
    for job in ("built", "cached"):
        env = JobEnvironment(
            CONFIG, settings, checkout=checkout, workdir=tmp_path / job, cache=cache, key=key
        )
        with open_sandbox(settings, checkout) as sandbox:
            setup = env.setup(sandbox)
            assert setup.ok, setup.output
            assert setup.restored_from == (None if job == "built" else "cache")
            assert sandbox.exec("test -f node_modules/dep/token", timeout=60).exit_code == 0
            sandbox.write_file("pkg/new.py", b"VALUE = 2\n")
            sandbox.write_file("pkg/mod.py", b"def value():\n    return 2\n")
            patch = sandbox.diff()
        assert "node_modules" not in patch, job
        assert "b/pkg/new.py" in patch and "b/pkg/mod.py" in patch, job


def test_a_copy_install_of_the_repository_is_installed_again_from_the_judged_tree(
    settings: SandboxSettings, tmp_path: Path
) -> None:
    # `pip install .` (not -e) puts a copy of the base's code in site-packages, and with
    # a src layout the tests import that copy: restored as it was, the gate would judge
    # the base's code instead of the patch's.
    checkout = tmp_path / "repo"
    base = make_git_repo(checkout, SRC_LAYOUT)
    config = RepoConfig(
        setup="pip install -q --no-deps --no-build-isolation .",
        test="python -m pytest -q -p no:cacheprovider",
    )
    cache = EnvCache(tmp_path / "cache", max_bytes=1024**3, max_age_s=86400)
    key = env_key("github:team/calc", settings, checkout, config.setup)
    env = JobEnvironment(
        config, settings, checkout=checkout, workdir=tmp_path / "job", cache=cache, key=key
    )
    with open_sandbox(settings, checkout) as sandbox:
        setup = env.setup(sandbox)
        assert setup.ok, setup.output
        sandbox.write_file("src/calc/__init__.py", b"def add(a, b):\n    return a + b\n")
        patch = sandbox.diff()
    assert cache.entries() == []  # the copy is of this commit: never cached
    tests = TestGate().run(
        GateContext(
            repo_dir=checkout,
            base_commit=base,
            patch=patch,
            repo_config=config,
            gate_settings=GateSettings(),
            sandbox_factory=sandbox_factory(settings, network=False),
            setup_step=env.restore,
            issue_text="test_add fails: add(2, 3) is -1",
        )
    )
    assert tests.passed, f"{[f.rule for f in tests.findings]}\n{tests.logs}"
    assert tests.details["before"]["failing"] == ["tests/test_calc.py::test_add"]
