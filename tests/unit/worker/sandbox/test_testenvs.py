"""Test environments declared for hatch, pdm, tox and nox (worker/sandbox/testenvs.py,
noxsessions.py, pipwords.py) as set-up detection (setupcmd.py) installs them: which one
wins, what of it reaches pip, and what is refused with its reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fakes import commit_files as commit_to_repo
from tests.fakes import make_git_repo
from worker.sandbox.envcache import is_manifest
from worker.sandbox.setupcmd import commit_files, detect_setup

PEP621 = '[project]\nname = "demo"\nversion = "1"\n'
TEST_EXTRA = '[project.optional-dependencies]\ntest = ["pytest"]\n'


def _commands(tmp_path: Path, files: dict[str, str]) -> list[str]:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return [step.command for step in detect_setup(tmp_path)]


HATCH_TEST = """
[tool.hatch.envs.default]
dependencies = ["coverage"]
features = ["cli"]
[tool.hatch.envs.test]
extra-dependencies = ["pytest-mock"]
"""

TOX_INI = """\
[tox]
envlist = py311, lint
[base]
deps =
    pytest>=7
[testenv]
extras = testing, yaml
deps =
    {[base]deps}
    -r{toxinidir}/requirements/ci.txt
    -c constraints.txt
    hypothesis >= 6  # property tests
    py311: tomli
commands = pytest {posargs}
[testenv:lint]
deps = ruff
"""

NOXFILE = """\
import nox

TEST_DEPS = ["pytest", "pytest-cov"]

@nox.session
def lint(session):
    session.install("ruff")

@nox.session(python=["3.11", "3.12"])
def tests(session):
    session.install("-e", ".[test]")
    session.install(*TEST_DEPS, "freezegun==1.5")
    session.run("pytest")
"""


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        # hatch: the test env inherits `default`'s dependencies and features, adds its own.
        (
            {"pyproject.toml": PEP621 + HATCH_TEST},
            ["pip install -e '.[cli]' coverage pytest-mock"],
        ),
        # hatch.toml wins over pyproject's table; hatch-test stands alone (no template).
        (
            {
                "pyproject.toml": PEP621 + HATCH_TEST.replace("envs.test", "envs.lint"),
                "hatch.toml": '[envs.hatch-test]\nextra-dependencies = ["respx"]\n',
            },
            ["pip install -e . respx"],
        ),
        # A template cycle ends; it is no error.
        (
            {
                "pyproject.toml": PEP621
                + '[tool.hatch.envs.test]\ntemplate = "a"\ndependencies = ["x"]\n'
                + '[tool.hatch.envs.a]\ntemplate = "test"\nfeatures = ["f"]\n'
            },
            ["pip install -e '.[f]' x"],
        ),
        # pdm: the test group; its editable self-reference is the package install.
        (
            {
                "pyproject.toml": PEP621
                + "[tool.pdm.dev-dependencies]\nlint = ['ruff']\n"
                + "test = ['-e file:///${PROJECT_ROOT}/#egg=demo', 'pytest>=8']\n"
            },
            ["pip install -e . 'pytest>=8'"],
        ),
        # pdm's dev group only without a test extra.
        (
            {"pyproject.toml": PEP621 + "[tool.pdm.dev-dependencies]\ndev = ['pytest']\n"},
            ["pip install -e . pytest"],
        ),
        (
            {
                "pyproject.toml": PEP621
                + TEST_EXTRA
                + "[tool.pdm.dev-dependencies]\ndev = ['mypy']\n"
            },
            ["pip install -e '.[test]'"],
        ),
        # tox: references followed, files kept, factor lines and comments dropped.
        (
            {"setup.py": "", "tox.ini": TOX_INI},
            [
                "pip install -e '.[testing,yaml]' 'pytest>=7' 'hypothesis >= 6'"
                " -r requirements/ci.txt -c constraints.txt"
            ],
        ),
        # pip's long options, with `=` or a space.
        (
            {
                "setup.py": "",
                "tox.ini": "[testenv]\ndeps =\n    --requirement=req/a.txt\n"
                "    --constraint c.txt\n    --upgrade\n",
            },
            ["pip install -e . -r req/a.txt -c c.txt"],
        ),
        # tox's named test env overrides [testenv]'s deps and inherits its extras.
        (
            {
                "setup.py": "",
                "tox.ini": "[testenv]\nextras = t\ndeps = a\n[testenv:tests]\ndeps = b\n",
            },
            ["pip install -e '.[t]' b"],
        ),
        # tox in setup.cfg, and in pyproject.toml (legacy string and tox 4 native tables).
        (
            {"setup.cfg": "[metadata]\nname = x\n[tox:tox]\n[testenv]\ndeps = pytest\n"},
            ["pip install -e . pytest"],
        ),
        (
            {
                "pyproject.toml": PEP621
                + '[tool.tox]\nlegacy_tox_ini = """\n[testenv]\ndeps = mock\n"""\n'
            },
            ["pip install -e . mock"],
        ),
        (
            {
                "pyproject.toml": PEP621
                + '[tool.tox.env_run_base]\ndeps = ["pytest", "-r req-test.txt"]\n'
                + 'extras = ["test"]\n'
            },
            ["pip install -e '.[test]' pytest -r req-test.txt"],
        ),
        # nox: the tests session's literal installs, module constants followed.
        (
            {"pyproject.toml": PEP621, "noxfile.py": NOXFILE},
            ["pip install -e '.[test]' pytest pytest-cov freezegun==1.5"],
        ),
        (
            {
                "pyproject.toml": PEP621,
                "noxfile.py": "import nox\n@nox.session(name='test')\ndef unit(s):\n"
                "    s.install('-r', 'requirements-test.txt')\n",
                "requirements-test.txt": "pytest\n",
            },
            # The environment's -r already is the test requirements file: once.
            ["pip install -e . -r requirements-test.txt"],
        ),
        # A noxfile with no test session, or that is no Python: the package alone.
        (
            {"setup.py": "", "noxfile.py": "import nox\n@nox.session\ndef docs(s): ...\n"},
            ["pip install -e ."],
        ),
        ({"setup.py": "", "noxfile.py": "def (:\n"}, ["pip install -e ."]),
        # No package: the environment alone.
        ({"tox.ini": "[testenv]\nskip_install = true\ndeps = pytest\n"}, ["pip install pytest"]),
    ],
)
def test_test_environments(tmp_path: Path, files: dict[str, str], expected: list[str]) -> None:
    assert _commands(tmp_path, files) == expected


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        # A PEP 735 test group is first; hatch, then pdm, then tox, then nox.
        (
            {
                "pyproject.toml": PEP621
                + '[dependency-groups]\ntest = ["g"]\n'
                + '[tool.hatch.envs.test]\ndependencies = ["h"]\n',
                "tox.ini": "[testenv]\ndeps = t\n",
            },
            "pip install -e . g",
        ),
        (
            {
                "pyproject.toml": PEP621
                + '[tool.hatch.envs.test]\ndependencies = ["h"]\n'
                + "[tool.pdm.dev-dependencies]\ntest = ['p']\n",
                "tox.ini": "[testenv]\ndeps = t\n",
            },
            "pip install -e . h",
        ),
        (
            {
                "pyproject.toml": PEP621 + "[tool.pdm.dev-dependencies]\ntest = ['p']\n",
                "tox.ini": "[testenv]\ndeps = t\n",
            },
            "pip install -e . p",
        ),
        (
            {"pyproject.toml": PEP621, "tox.ini": "[testenv]\ndeps = t\n", "noxfile.py": NOXFILE},
            "pip install -e . t",
        ),
        # A `dev` group is the last resort: a test environment of any tool comes first.
        (
            {
                "pyproject.toml": PEP621 + '[dependency-groups]\ndev = ["d"]\n',
                "tox.ini": "[testenv]\ndeps = t\n",
            },
            "pip install -e . t",
        ),
        (
            {"pyproject.toml": PEP621 + '[dependency-groups]\ndev = ["d"]\n'},
            "pip install -e . d",
        ),
        # An environment that lists nothing (only `commands`, or factor lines alone) says
        # nothing of what the tests need: the next source decides.
        (
            {
                "pyproject.toml": PEP621 + '[dependency-groups]\ndev = ["d"]\n',
                "tox.ini": "[testenv]\ndeps =\n    cov: coverage\ncommands = pytest\n",
                "noxfile.py": "import nox\n@nox.session\ndef tests(session):\n"
                "    session.install('.')\n",
            },
            "pip install -e . d",
        ),
    ],
)
def test_precedence(tmp_path: Path, files: dict[str, str], expected: str) -> None:
    assert _commands(tmp_path, files)[0] == expected


@pytest.mark.parametrize(
    ("files", "reason"),
    [
        ({"tox.ini": "[testenv]\ndeps = {env:EXTRA_DEPS}\n"}, "tox.ini [testenv]: "),
        ({"tox.ini": "[testenv]\ndeps = {[nowhere]deps}\n"}, "names no setting"),
        ({"tox.ini": "[testenv]\ndeps = -r ../outside.txt\n"}, "is not a file of the tree"),
        ({"tox.ini": "[testenv]\ndeps = -e ./plugins/x\n"}, "is not the project itself"),
        ({"tox.ini": "[testenv]\ndeps = --index-url https://x\n"}, "not one Ribbit passes on"),
        ({"tox.ini": "[testenv]\ndeps = not a requirement!\n"}, "no requirement pip can"),
        (
            {
                "pyproject.toml": PEP621
                + '[tool.hatch.envs.test]\ndependencies = ["x @ {root:uri}/x"]\n'
            },
            "pyproject.toml [tool.hatch] envs.test",
        ),
        (
            {"pyproject.toml": PEP621 + "[tool.hatch.envs.test]\ndependencies = 'pytest'\n"},
            "not a list of strings",
        ),
        (
            {
                "noxfile.py": "import nox\nDEPS = get()\n@nox.session\ndef tests(session):\n"
                "    session.install(*DEPS)\n"
            },
            "noxfile.py session tests: line 5",
        ),
    ],
)
def test_what_cannot_be_installed_fails_saying_why(
    tmp_path: Path, files: dict[str, str], reason: str
) -> None:
    [command] = _commands(tmp_path, files)
    assert command.endswith(" >&2 && false")
    assert "cannot install the test dependencies" in command
    assert reason in command


def test_the_noxfile_is_read_never_run(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    noxfile = f"open({str(marker)!r}, 'w').close()\n" + NOXFILE
    assert _commands(tmp_path, {"noxfile.py": noxfile})
    assert not marker.exists()


def test_a_commits_environment_is_read_not_the_working_tree(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    make_git_repo(repo, {"setup.py": "", "tox.ini": "[testenv]\ndeps = pytest\n"})
    base = commit_to_repo(repo, {"README.md": "x\n"}, "docs")
    commit_to_repo(repo, {"tox.ini": "[testenv]\ndeps = evil\n", "noxfile.py": NOXFILE}, "p")
    assert [s.command for s in detect_setup(commit_files(repo, base))] == [
        "pip install -e . pytest"
    ]


def _node(tmp_path: Path, files: dict[str, str], manager: str | None = None) -> list[str]:
    manifest: dict[str, object] = {"devDependencies": {"vitest": "^1"}}
    if manager:
        manifest["packageManager"] = manager
    return _commands(tmp_path, {"package.json": json.dumps(manifest), **files})


YARN_BERRY = '__metadata:\n  version: 8\n\n"vitest@npm:^1":\n  version: 1.6.0\n'


@pytest.mark.parametrize(
    ("files", "manager", "tool", "release", "install"),
    [
        (
            {"pnpm-lock.yaml": "lockfileVersion: '9.0'\n"},
            None,
            "pnpm",
            "pnpm@9",
            "install --frozen-lockfile",
        ),
        # The pnpm major that writes the lock file's format.
        (
            {"pnpm-lock.yaml": "lockfileVersion: '6.0'\n"},
            None,
            "pnpm",
            "pnpm@8",
            "install --frozen-lockfile",
        ),
        (
            {"pnpm-lock.yaml": "lockfileVersion: 5.4\n"},
            None,
            "pnpm",
            "pnpm@7",
            "install --frozen-lockfile",
        ),
        (
            {"pnpm-lock.yaml": "lockfileVersion: 3\n"},
            None,
            "pnpm",
            None,
            "install --frozen-lockfile",
        ),
        (
            {"yarn.lock": "# yarn lockfile v1\n"},
            None,
            "yarn",
            "yarn@1",
            "install --frozen-lockfile",
        ),
        # yarn 2+ is no release npm can run: corepack or nothing.
        ({"yarn.lock": YARN_BERRY}, None, "yarn", None, "install --immutable"),
        # packageManager names the tool and its release whatever else lies there.
        (
            {"pnpm-lock.yaml": "x", "package-lock.json": "{}"},
            "pnpm@9.1.0+sha512.abc",
            "pnpm",
            "pnpm@9.1.0",
            "install --frozen-lockfile",
        ),
        ({"yarn.lock": "# yarn lockfile v1\n"}, "yarn@4.2.1", "yarn", None, "install --immutable"),
        (
            {"yarn.lock": "# yarn lockfile v1\n"},
            "yarn@1.22.22",
            "yarn",
            "yarn@1.22.22",
            "install --frozen-lockfile",
        ),
        ({}, "pnpm@9.1.0", "pnpm", "pnpm@9.1.0", "install"),
    ],
)
def test_pnpm_and_yarn(
    tmp_path: Path,
    files: dict[str, str],
    manager: str | None,
    tool: str,
    release: str | None,
    install: str,
) -> None:
    [command] = _node(tmp_path, files, manager)
    assert command.startswith(f"if command -v {tool} >/dev/null 2>&1; then {tool} {install};")
    fetched = f"npm exec --yes --no-audit --no-fund --package={release} -- {tool} {install};"
    assert (fetched in command) == (release is not None)
    assert f"corepack {tool} {install};" in command
    # With none of them the step fails saying so: npm's install would ignore the lock.
    assert f"asks for {tool}, and this sandbox has no {tool}" in command


@pytest.mark.parametrize(
    ("files", "manager", "expected"),
    [
        # npm's lock files come first when nothing names a manager.
        ({"package-lock.json": "{}", "yarn.lock": "x"}, None, "npm ci --no-audit --no-fund"),
        ({"yarn.lock": "x"}, "npm@10.9.0", "npm install --no-audit --no-fund"),
        # A manager Ribbit does not know: the lock files decide.
        ({"package-lock.json": "{}"}, "bun@1.1", "npm ci --no-audit --no-fund"),
    ],
)
def test_npm_keeps_its_place(
    tmp_path: Path, files: dict[str, str], manager: str | None, expected: str
) -> None:
    assert _node(tmp_path, files, manager) == [expected]


@pytest.mark.parametrize(
    "name", ["tox.ini", "noxfile.py", "hatch.toml", "test-requirements.txt", "pnpm-lock.yaml"]
)
def test_what_detection_reads_keys_the_environment_cache(name: str) -> None:
    # A changed test environment must not restore an environment set up without it, and a
    # patch that changes one gets the base's set-up run again (worker/gates/basesetup.py).
    assert is_manifest(name)
