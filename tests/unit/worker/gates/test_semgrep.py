from __future__ import annotations

from pathlib import Path

import pytest

from bot.store.records.gate_report import GateResult
from tests.support import require_service
from tests.unit.worker.gates.helpers import make_ctx, make_patch, repo_with
from tests.unit.worker.gates.snippets import INSECURE, SAFE
from worker.gates import semgrep
from worker.gates.semgrep import SemgrepGate, _rule_catalogue, builtin_rule_files, find_semgrep
from worker.repo_config import GateRules, RepoConfig

BASE = {
    "app/__init__.py": "",
    "app/legacy.py": 'import os\n\n\ndef clean(path):\n    os.system("rm -rf " + path)\n',
}


@pytest.fixture(autouse=True)
def _semgrep() -> None:
    require_service(find_semgrep() is not None, "semgrep")


def _run(
    tmp_path: Path,
    changes: dict[str, str | bytes | None],
    config: RepoConfig | None = None,
    base_files: dict[str, str] | None = None,
) -> GateResult:
    repo, base = repo_with(tmp_path, {**BASE, **(base_files or {})})
    patch = make_patch(repo, changes)
    return SemgrepGate().run(make_ctx(repo, base, patch, config=config))


def test_every_rule_family_has_a_snippet() -> None:
    families = {info["family"] for info in _rule_catalogue(builtin_rule_files()).values()}
    assert families == set(INSECURE)


def test_semgrep_catches_every_rule_family_and_passes_safe_code(tmp_path: Path) -> None:
    files = {f"app/{family.replace('-', '_')}.py": code for family, code in INSECURE.items()}
    extra = {
        "app/safe.py": SAFE,
        # Tests log in with made-up passwords: not a hard-coded credential.
        "tests/test_login.py": 'def test_login(client):\n    password = "hunter2-hunter2"\n',
    }
    result = _run(tmp_path, {**files, **extra})
    assert not result.passed
    family_of = {rid: info["family"] for rid, info in _rule_catalogue(builtin_rule_files()).items()}
    errors = [f for f in result.findings if f.severity == "error"]
    fired = {(f.path, family_of.get(f.rule)) for f in errors}
    for family in INSECURE:
        assert (f"app/{family.replace('-', '_')}.py", family) in fired, family
    assert {f.path for f in errors} == set(files)
    assert result.details["new"] == len(errors)
    assert set(result.details["rules"]) == {f.rule for f in errors}


def test_semgrep_ignores_preexisting_finding_even_when_it_moves(tmp_path: Path) -> None:
    moved = (
        'import os\n\nVERSION = 2\n\n\ndef clean(path):\n    """Remove path."""\n'
        '    os.system("rm -rf " + path)\n'
    )
    result = _run(tmp_path, {"app/legacy.py": moved})
    assert result.passed, result.findings
    assert result.details["preexisting"] == 1
    assert result.details["new"] == 0


def test_semgrep_blocks_second_copy_and_nosemgrep_does_not_hide_it(tmp_path: Path) -> None:
    more = BASE["app/legacy.py"] + (
        '\n\ndef clean_too(path):\n    os.system("rm -rf " + path)  # nosemgrep\n'
    )
    result = _run(tmp_path, {"app/legacy.py": more})
    assert not result.passed
    (finding,) = result.findings
    assert (finding.rule, finding.path, finding.line) == (
        "ribbit.shell-injection.os-system",
        "app/legacy.py",
        9,
    )


def test_semgrep_counts_fixed_findings_and_renames(tmp_path: Path) -> None:
    result = _run(
        tmp_path,
        {
            "app/legacy.py": None,
            "app/renamed.py": BASE["app/legacy.py"],
            "app/other.py": "import subprocess\n\n\ndef f(p):\n    subprocess.run(['rm', p])\n",
        },
    )
    assert result.passed, result.findings
    result = _run(
        tmp_path / "fix",
        {"app/legacy.py": "import shutil\n\n\ndef clean(path):\n    shutil.rmtree(path)\n"},
    )
    assert result.passed and result.details["fixed"] == 1


def test_semgrep_uses_repo_rules_from_base_commit(tmp_path: Path) -> None:
    repo_rules = (
        "rules:\n  - id: no-print\n    languages: [python]\n    severity: WARNING\n"
        "    message: use logging\n    pattern: print(...)\n"
    )
    extra = repo_rules.replace("no-print", "no-breakpoint").replace("print(...)", "breakpoint()")
    config = RepoConfig(gates=GateRules(semgrep_rules=["ci/extra-rules.yml"]))
    result = _run(
        tmp_path,
        {"app/new.py": "print('hi')\nbreakpoint()\n"},
        config=config,
        base_files={".semgrep.yml": repo_rules, "ci/extra-rules.yml": extra},
    )
    assert {f.rule for f in result.findings} == {"no-print", "no-breakpoint"}
    assert not result.passed


def test_semgrep_skips_invalid_repo_rules_with_warning(tmp_path: Path) -> None:
    result = _run(
        tmp_path,
        {"app/new.py": "eval(input())\n"},
        base_files={".semgrep.yml": "rules:\n  - id: broken\n    pattern: [\n"},
    )
    rules = {f.rule: f.severity for f in result.findings}
    assert rules == {"repo-rules-invalid": "warning", "ribbit.code-injection.eval-exec": "error"}


def test_the_ocaml_cli_scans_as_the_python_cli_did(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The gate runs osemgrep for speed (issue #33); what it matches, where, and which
    # files it could not parse must be what the Python CLI reported: rules' paths:
    # filters kept (no credential finding in tests/), folders Semgrep skips by default
    # (node_modules/) and what .semgrepignore names scanned all the same.
    tree = tmp_path / "tree"
    files = {
        f"{folder}/{family.replace('-', '_')}.py": code
        for family, code in INSECURE.items()
        for folder in ("after/app", "after/tests", "before/node_modules", "after/ignored")
    }
    files |= {
        "after/app/safe.py": SAFE,
        "after/app/broken.py": "def f(:\n    eval(x)\n)))]]]{{{\nclass\n",
        "after/app/nosem.py": "def g(x):\n    return eval(x)  # nosemgrep\n",
        "after/bin/tool": "#!/usr/bin/env python3\nimport os\nos.system('rm -rf ' + name)\n",
        "after/.semgrepignore": "ignored/\n",
        "after/app/not_a_target.py": "eval(input())\n",
    }
    for rel, text in files.items():
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        (tree / rel).write_text(text)
    targets = sorted(t for t in files if not t.endswith("not_a_target.py"))
    rules = builtin_rule_files()
    binary = find_semgrep()
    assert binary is not None

    def scan() -> list[tuple[str, str, int, str, str]]:
        home = tmp_path / f"home-{semgrep.ENGINE}"
        home.mkdir()
        found = semgrep._scan(binary, tree, targets, rules, _rule_catalogue(rules), home, 120)
        return sorted((m.rule, m.path, m.line, m.severity, m.code) for m in found)

    ocaml = scan()
    monkeypatch.setattr(semgrep, "ENGINE", "python")
    assert ocaml == scan()
    paths = {path for _, path, *_ in ocaml}
    assert {p.split("/")[1] for p in paths} == {"app", "tests", "node_modules", "ignored"}
    assert "after/app/not_a_target.py" not in paths
    assert ("semgrep-partial-scan", "after/app/broken.py", 0, "warning", "") in ocaml


@pytest.mark.parametrize("name", ["a b.py", "x[1].py", "star*.py", "q?.py", "back\\slash.py"])
def test_a_path_no_include_pattern_spells_goes_to_the_python_cli(name: str) -> None:
    argv = semgrep._scan_argv("semgrep", ["after/ok.py", f"after/{name}"], [])
    assert "--experimental" not in argv and "--include" not in argv
    assert argv[-2:] == ["./after/ok.py", f"./after/{name}"]
    plain = semgrep._scan_argv("semgrep", ["after/ok.py", "before/ün-i_c@de+1.py"], [])
    assert plain[-6:] == [
        *("--include", "/after/ok.py", "--include", "/before/ün-i_c@de+1.py"),
        *("--", "."),
    ]
