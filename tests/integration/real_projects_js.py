"""Real JavaScript and TypeScript projects, each with a bug fix from its own history, end
to end as tests/integration/test_real_projects_e2e.py runs the Python, Go and Rust ones:
a label on the local forge, the job, the sandbox with the install detected from the
tree (``npm ci --no-audit --no-fund``: a real install of the lock file's packages from
registry.npmjs.org through the registry-only proxy, nothing else reachable), the agent
replaying the fix through its tools, the gates with the project's own runner reporting
per test, and a draft PR whose diff is the upstream fix, with its new test named as
passing. Neither repository has a ``.ribbit.yml``.

- jest: kelektiv/node-cron f0d5d3f, the fix for #598 (``CronJob.setTime`` started a
  stopped job; adds ``should start, stop, change time, not start again``). Its script
  is ``jest --coverage``; jest reports through its own ``--json`` report.
- vitest: mesqueeb/merge-anything 6.0.4, the prototype pollution fix (#41; adds
  ``prototype pollution``). Its script is ``vitest run`` (TypeScript, run by vitest).

Both are vendored with their licences and lock files (tests/fixtures/*/README.md). The
test is the e2e module's: its ``PROJECTS`` takes these builders by name (lazily, since
this module imports its ``RealFix``), so they run on both backends like the others.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.integration.test_real_projects_e2e import FIXTURES, RealFix, _vendored, _with_patch

NPM_CI = "npm ci --no-audit --no-fund"


def _node_cron(tmp: Path, request: pytest.FixtureRequest) -> RealFix:
    base = _vendored("node-cron")
    fixed = _with_patch(base, FIXTURES / "node-cron" / "fix.patch", tmp / "node-cron")
    title = "should start, stop, change time, not start again"
    return RealFix(
        repo="kelektiv/node-cron",
        base=base,
        fixed=fixed,
        issue=(
            "setTime starts a stopped job",
            "After job.stop(), calling job.setTime(cron.time('*/2 * * * * *')) starts the "
            "job again: it keeps firing. setTime should only restart a job that was "
            "running.",
        ),
        tool="node",
        targets=(title,),
        # jest's ids: the file, then the describe blocks and the title.
        target_ids=(f"tests/cron.test.js::cron setTime {title}",),
        detected_setup=NPM_CI,
    )


def _merge_anything(tmp: Path, request: pytest.FixtureRequest) -> RealFix:
    base = _vendored("merge-anything")
    fixed = _with_patch(base, FIXTURES / "merge-anything" / "fix.patch", tmp / "merge-anything")
    return RealFix(
        repo="mesqueeb/merge-anything",
        base=base,
        fixed=fixed,
        issue=(
            "Prototype pollution through __proto__",
            'merge({}, defaults, JSON.parse(\'{"__proto__": {"isAdmin": true}}\')) '
            "returns an object whose prototype is the attacker's: result.isAdmin is "
            "true. merge must not copy a __proto__ key.",
        ),
        tool="node",
        targets=("prototype pollution",),
        target_ids=("test/index.test.ts::prototype pollution",),
        detected_setup=NPM_CI,
    )


JS_PROJECTS: dict[str, Callable[[Path, pytest.FixtureRequest], RealFix]] = {
    "node-cron": _node_cron,
    "merge-anything": _merge_anything,
}
