"""How long the gates take on a small repository, split by gate.

    python -m tests.benchmarks.bench_gates [--runs 3] [--modules 20] [--backend local-test]

The repository has ``--modules`` source modules with one test file each; the patch
fixes a bug in one module, adds a test for it and touches two more modules, the
shape of a typical bot patch. ``local-test`` runs the tests in the unisolated
LocalDirSandbox from tests/fakes.py; ``docker``/``bubblewrap`` use the real sandbox
factory where it is installed. Prints the median and the spread of each part, then
the Semgrep gate against a bare ``semgrep scan`` with the same rule files on the same
files (median of ``--semgrep-runs``) and their ratio; the target is at most 1.5x.
"""

from __future__ import annotations

import argparse
import importlib
import shlex
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from tests.fakes import LocalDirSandbox, git, make_git_repo
from worker.gates import GateContext, run_gates
from worker.gates.trees import patch_trees
from worker.repo_config import RepoConfig
from worker.sandbox.base import SandboxFactory
from worker.settings import GateSettings


def build_repo(root: Path, modules: int) -> tuple[Path, str, str]:
    files: dict[str, str] = {"pkg/__init__.py": "", "tests/__init__.py": ""}
    for i in range(modules):
        files[f"pkg/mod{i}.py"] = (
            "import json\n\n\n"
            f"def value{i}(x):\n    return x + {i}\n\n\n"
            f"def dump{i}(data):\n    return json.dumps(data, sort_keys=True)\n"
        )
        files[f"tests/test_mod{i}.py"] = (
            f"from pkg.mod{i} import dump{i}, value{i}\n\n\n"
            f"def test_value{i}():\n    assert value{i}(1) == {i + 1}\n\n\n"
            f"def test_dump{i}():\n    assert dump{i}({{'b': 1, 'a': 2}}) == "
            '\'{"a": 2, "b": 1}\'\n'
        )
    files["pkg/mod0.py"] = files["pkg/mod0.py"].replace("return x + 0", "return x - 1")
    files["tests/test_mod0.py"] = files["tests/test_mod0.py"].replace(
        "def test_value0():\n    assert value0(1) == 1\n\n\n", ""
    )
    repo = root / "repo"
    base = make_git_repo(repo, files)
    (repo / "pkg/mod0.py").write_text(files["pkg/mod0.py"].replace("return x - 1", "return x"))
    with (repo / "tests/test_mod0.py").open("a") as fh:
        fh.write("\n\ndef test_value0():\n    assert value0(1) == 1\n")
    for i in (1, 2):
        with (repo / f"pkg/mod{i}.py").open("a") as fh:
            fh.write(f'\n\ndef double{i}(x):\n    """Twice x."""\n    return 2 * x\n')
    git(repo, "add", "-A")
    patch = git(repo, "diff", "--cached", "HEAD") + "\n"
    git(repo, "reset", "-q", "--hard", "HEAD")
    return repo, base, patch


def _factory(backend: str) -> SandboxFactory:
    if backend == "local-test":
        return LocalDirSandbox
    from worker.settings import SandboxSettings

    sandbox_factory = importlib.import_module("worker.sandbox").sandbox_factory

    factory: SandboxFactory = sandbox_factory(SandboxSettings.model_validate({"backend": backend}))
    return factory


def _timed(fn: Callable[[], object]) -> float:
    start = time.monotonic()
    fn()
    return time.monotonic() - start


def semgrep_ratio(ctx: GateContext, runs: int) -> str:
    """One line: the Semgrep gate's median time, a bare scan's median time with the same
    rules on the same files (both trees' changed files, as the gate scans them), the
    ratio."""
    import subprocess

    from worker.gates.semgrep import SemgrepGate, _targets, builtin_rule_files, find_semgrep

    binary = find_semgrep()
    if binary is None:
        return "semgrep ratio: semgrep is not installed"
    gate_s: list[float] = []
    bare_s: list[float] = []
    with patch_trees(ctx) as trees:
        before, after, _ = _targets(trees.parsed.files)
        files = [f"before/{t}" for t in before] + [f"after/{t}" for t in after]
        rules = builtin_rule_files()
        # The gate's engine (osemgrep, worker/gates/semgrep.py), so the ratio is the gate's.
        bare = [binary, "scan", "--experimental", "--json", "--metrics=off", "--quiet"]
        for rule in rules:
            bare += ["--config", str(rule)]
        bare += ["--", *files]
        for _ in range(runs):
            gate_s.append(_timed(lambda: SemgrepGate().run_on_trees(ctx, trees)))
            bare_s.append(
                _timed(
                    lambda: subprocess.run(
                        bare, cwd=trees.before.parent, capture_output=True, check=False
                    )
                )
            )
    gate, plain = statistics.median(gate_s), statistics.median(bare_s)
    return (
        f"semgrep gate {gate:.2f} s vs bare semgrep scan {plain:.2f} s "
        f"({len(rules)} rule files, {len(files)} files, median of {runs}): "
        f"ratio {gate / plain:.2f}x (target <= 1.5x)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--semgrep-runs", type=int, default=5)
    parser.add_argument("--modules", type=int, default=20)
    parser.add_argument(
        "--backend", default="local-test", choices=["local-test", "docker", "bubblewrap", "auto"]
    )
    args = parser.parse_args(argv)
    python = "python3" if args.backend != "local-test" else shlex.quote(sys.executable)
    root = Path(tempfile.mkdtemp(prefix="ribbit-bench-gates-"))
    try:
        repo, base, patch = build_repo(root, args.modules)
        ctx = GateContext(
            repo_dir=repo,
            base_commit=base,
            patch=patch,
            repo_config=RepoConfig(test=f"{python} -m pytest -q -p no:cacheprovider"),
            gate_settings=GateSettings(),
            sandbox_factory=_factory(args.backend),
        )
        samples: dict[str, list[float]] = {}

        def build_trees() -> None:
            with patch_trees(ctx):
                pass

        for _ in range(args.runs):
            samples.setdefault("trees (2 clones + apply)", []).append(_timed(build_trees))
            report = run_gates(ctx)
            if not report.passed:
                print(report.to_markdown(), file=sys.stderr)
                return 1
            for result in report.results:
                samples.setdefault(f"gate: {result.name}", []).append(result.duration_s)
            samples.setdefault("run_gates total", []).append(report.duration_s)
        lines = patch.count("\n")
        print(
            f"gates on {args.modules} modules + {args.modules} test files "
            f"({2 * args.modules} tests), a {lines}-line patch; backend {args.backend}; "
            f"{args.runs} runs"
        )
        print(f"{'part':<28}{'median s':>10}{'min s':>9}{'max s':>9}")
        for name, values in samples.items():
            print(
                f"{name:<28}{statistics.median(values):>10.2f}{min(values):>9.2f}"
                f"{max(values):>9.2f}"
            )
        print(semgrep_ratio(ctx, args.semgrep_runs))
        return 0
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
