"""What watching costs a pytest run: the same suite run plain and watched.

    python -m tests.benchmarks.bench_watch [--files 50] [--tests 40] [--runs 3]

The suite is ``--files`` test modules of ``--tests`` small tests each (a function, a
parametrised row, a unittest method), run in the host-copy sandbox
(tests/fakes.LocalDirSandbox) with the host's ``python3 -m pytest``, once as a shell
command (not watched) and once plain (watched: the bootstrap of worker/gates/watch.py,
its runner snapshot checked after every test, the witness, the test-code check, and the
start-up scan made before the run). Prints the median of ``--runs`` runs of each, the
ratio and the cost per test, and the start-up scan's time alone.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from tests.fakes import LocalDirSandbox
from worker.gates.startup import scan_command
from worker.gates.testrun import run_tests

WATCHED = "python3 -m pytest -q -p no:cacheprovider"
PLAIN = f"bash -c '{WATCHED}'"  # a shell command: not watched


def build_suite(root: Path, files: int, tests: int) -> Path:
    """A package and ``files`` test modules of ``tests`` tests each."""
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("def add(a, b):\n    return a + b\n")
    (root / "tests").mkdir()
    (root / "tests" / "__init__.py").write_text("")
    third = max(tests // 3, 1)
    for f in range(files):
        lines = ["import unittest\n\nimport pytest\n\nfrom pkg import add\n\n"]
        lines += [
            f"\ndef test_add_{i}():\n    assert add({i}, 1) == {i + 1}\n" for i in range(third)
        ]
        rows = ", ".join(str(i) for i in range(third))
        lines.append(f"\n@pytest.mark.parametrize('n', [{rows}])\ndef test_row(n):\n")
        lines.append("    assert add(n, 0) == n\n")
        lines.append("\nclass TestAdd(unittest.TestCase):\n")
        methods = tests - 2 * third
        lines += [
            f"    def test_{i}(self):\n        self.assertEqual(add({i}, {i}), {2 * i})\n"
            for i in range(methods)
        ]
        (root / "tests" / f"test_mod{f}.py").write_text("".join(lines))
    return root


def _timed(tree: Path, command: str) -> tuple[float, int]:
    with LocalDirSandbox(tree) as sandbox:
        started = time.perf_counter()
        run = run_tests(sandbox, command, timeout=1800)
        elapsed = time.perf_counter() - started
    if run.exit_code != 0 or run.tamper or run.tampered:
        raise SystemExit(f"the suite did not pass cleanly ({command}):\n{run.log()[-2000:]}")
    return elapsed, len(run.outcomes)


def _scan_seconds(tree: Path) -> float:
    """The start-up scan alone, as a watched run makes it before the run."""
    with LocalDirSandbox(tree) as sandbox:
        started = time.perf_counter()
        done = sandbox.exec(scan_command("python3"), timeout=300, output_cap=4 * 1024 * 1024)
        elapsed = time.perf_counter() - started
    if done.exit_code != 0:
        raise SystemExit(f"the start-up scan failed:\n{done.stderr[-2000:]}")
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=50)
    parser.add_argument("--tests", type=int, default=40)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    with tempfile.TemporaryDirectory() as tmp:
        tree = build_suite(Path(tmp) / "repo", args.files, args.tests)
        plain: list[float] = []
        watched: list[float] = []
        scans: list[float] = []
        count = 0
        for _ in range(args.runs):  # interleaved, so drift in the machine's load hits both
            seconds, count = _timed(tree, PLAIN)
            plain.append(seconds)
            seconds, _ = _timed(tree, WATCHED)
            watched.append(seconds)
            scans.append(_scan_seconds(tree))
    p, w = statistics.median(plain), statistics.median(watched)
    print(f"suite: {args.files} files, {count} tests; median of {args.runs} runs each")
    print("| run | median s | spread s |")
    print("|---|---|---|")
    print(f"| plain (not watched) | {p:.2f} | {min(plain):.2f}-{max(plain):.2f} |")
    print(f"| watched | {w:.2f} | {min(watched):.2f}-{max(watched):.2f} |")
    print(f"watched / plain: {w / p:.2f}x; watching costs {(w - p) / count * 1000:.2f} ms a test")
    s = statistics.median(scans)
    print(f"of which the start-up scan before the run (worker/gates/startup.py): {s:.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
