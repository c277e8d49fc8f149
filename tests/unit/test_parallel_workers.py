"""`make test`'s workers take a whole module each (the Makefile's XDIST_ARGS): a small
suite run with those arguments, each test writing down its worker. pytest-xdist's
``loadgroup`` cannot do this on pytest 9 (it renames ``item._nodeid``, which pytest 9
no longer reads, so every test was scheduled alone and each worker built the module
fixtures of every module again); ``loadfile`` needs no marks."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODULE = """import os
import pytest


@pytest.fixture(scope="module")
def built():
    with open(os.environ["WHERE"], "a") as out:
        out.write(f"fixture {__name__} {os.environ['PYTEST_XDIST_WORKER']}\\n")


@pytest.mark.parametrize("n", range(6))
def test_it(built, n):
    with open(os.environ["WHERE"], "a") as out:
        out.write(f"test {__name__} {os.environ['PYTEST_XDIST_WORKER']} {n}\\n")
"""


def _xdist_args() -> list[str]:
    makefile = (ROOT / "Makefile").read_text()
    found = re.search(r"^XDIST_ARGS = \$\(if .*?\)\),,(.*)\)$", makefile, re.MULTILINE)
    assert found, "the Makefile's XDIST_ARGS line"
    return found.group(1).replace("$(TEST_WORKERS)", "2").split()


def test_each_module_runs_whole_on_one_worker_in_order(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    for name in ("a", "b", "c", "d"):
        (suite / f"test_{name}.py").write_text(MODULE)
    where = tmp_path / "where.txt"
    args = ["-q", "-p", "no:cacheprovider", *_xdist_args(), str(suite)]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *args],
        cwd=tmp_path,
        env={**os.environ, "WHERE": str(where)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    workers: defaultdict[str, set[str]] = defaultdict(set)
    fixtures: list[str] = []
    order: defaultdict[str, list[int]] = defaultdict(list)
    for line in where.read_text().splitlines():
        kind, module, worker, *n = line.split()
        if kind == "fixture":
            fixtures.append(module)
        else:
            workers[module].add(worker)
            order[module].append(int(n[0]))
    assert sorted(workers) == ["test_a", "test_b", "test_c", "test_d"]
    assert all(len(w) == 1 for w in workers.values()), dict(workers)
    assert sorted(fixtures) == sorted(workers)  # each module's fixture built once
    assert all(ns == list(range(6)) for ns in order.values()), dict(order)
    assert len(set().union(*workers.values())) == 2  # and the suite is shared out
