"""Honest patches of a real project through the gates: no false block.

    python -m tests.benchmarks.real_fixes REPO COMMIT... [--test "python -m pytest -q"]
        [--backend local-test|docker|bubblewrap]

Each COMMIT of the git checkout REPO (merged fixes with their tests, say) is judged
as a patch against its parent, with every gate, the way a bot patch would be. Prints
one line per commit (passed, or the blocking rules) and a count. Issue #12 asks for
no false block on 20 real merged fixes; the commits used are in the report of the
change that added this script.
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
from pathlib import Path

from tests.benchmarks.bench_gates import _factory
from worker.gates import GateContext, run_gates
from worker.repo_config import RepoConfig
from worker.settings import GateSettings


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    ).stdout


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repo", type=Path)
    parser.add_argument("commits", nargs="+")
    parser.add_argument("--test", default=None)
    parser.add_argument("--backend", default="local-test")
    args = parser.parse_args(argv)
    python = shlex.quote(sys.executable) if args.backend == "local-test" else "python3"
    test = args.test or f"{python} -m pytest -q -p no:cacheprovider"
    blocked = 0
    for commit in args.commits:
        base = _git(args.repo, "rev-parse", f"{commit}^").strip()
        patch = _git(args.repo, "diff", "--binary", base, commit)
        ctx = GateContext(
            repo_dir=args.repo,
            base_commit=base,
            patch=patch,
            repo_config=RepoConfig(test=test),
            gate_settings=GateSettings(test_timeout_s=600),
            sandbox_factory=_factory(args.backend),
        )
        report = run_gates(ctx)
        errors = sorted(
            {
                f"{r.name}:{f.rule}"
                for r in report.results
                for f in r.findings
                if f.severity == "error"
            }
        )
        blocked += not report.passed
        title = _git(args.repo, "log", "-1", "--format=%s", commit).strip()[:60]
        verdict = "passed" if report.passed else "BLOCKED " + ", ".join(errors)
        print(f"{commit[:10]} {title:<60} {verdict}", flush=True)
    print(f"{len(args.commits) - blocked}/{len(args.commits)} honest fixes passed")
    return 0 if blocked == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
