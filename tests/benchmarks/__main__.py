"""`make bench`: every benchmark, one after the other (figures and ratios, no assertions).

    python -m tests.benchmarks [NAME ...] [--results DIR]

Each benchmark's output goes to the terminal and, as it is printed, into a dated result
file, ``DIR/YYYY-MM-DD-<name>.md`` (default ``docs/benchmarks/results``): a header with
the commit, the machine's cores and load, then the benchmark's own figures and ratios
verbatim. Figures are written by the run that measured them, never copied by hand; a
second run on the same day adds a section to the same file, so runs on one machine
compare side by side. Options after the names go to each benchmark.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib
import io
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TextIO

BENCHMARKS = [
    "bench_webhooks",
    "bench_agent",
    "bench_sandbox",
    "bench_envcache",
    "bench_gates",
    "bench_watch",
    "bench_grade",
    "bench_trainer",
    "bench_trainer_gpu",
    "bench_cpu_job",
]
ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "benchmarks" / "results"


class _Tee(io.TextIOBase):
    """Writes to the terminal and keeps a copy."""

    def __init__(self, terminal: TextIO) -> None:
        self.terminal = terminal
        self.copy = io.StringIO()

    def write(self, text: str) -> int:
        self.terminal.write(text)
        return self.copy.write(text)

    def flush(self) -> None:
        self.terminal.flush()


@contextlib.contextmanager
def _teed() -> Iterator[_Tee]:
    tee = _Tee(sys.stdout)
    with contextlib.redirect_stdout(tee):
        yield tee


def _commit() -> str:
    try:
        out = subprocess.run(
            ["git", "describe", "--always", "--dirty"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return out.stdout.strip()


def result_section(name: str, output: str, status: int, when: datetime.datetime) -> str:
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return (
        f"## {name}, {when:%Y-%m-%d %H:%M} UTC\n\n"
        f"Commit {_commit()}; {os.cpu_count()} cores; load {load} at the end; "
        f"exit status {status}.\n\n```\n{output.rstrip()}\n```\n\n"
    )


def write_result(results: Path, name: str, section: str, when: datetime.datetime) -> Path:
    results.mkdir(parents=True, exist_ok=True)
    path = results / f"{when:%Y-%m-%d}-{name}.md"
    if not path.exists():
        path.write_text(
            f"# {name}: results of {when:%Y-%m-%d}\n\n"
            "Written by `python -m tests.benchmarks` as the benchmark ran "
            "(figures from one run compare only with each other).\n\n"
        )
    with path.open("a") as fh:
        fh.write(section)
    return path


def run_one(name: str, bench_main: Callable[[], int | None], results: Path) -> int:
    when = datetime.datetime.now(datetime.UTC)
    with _teed() as tee:
        status = bench_main() or 0
    path = write_result(
        results, name, result_section(name, tee.copy.getvalue(), status, when), when
    )
    print(f"(written to {path})", flush=True)
    return status


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "names", nargs="*", help=f"benchmarks to run (default: all of {BENCHMARKS})"
    )
    parser.add_argument("--results", type=Path, default=RESULTS)
    args, rest = parser.parse_known_args(sys.argv[1:] if argv is None else argv)
    failed = 0
    for name in args.names or BENCHMARKS:
        try:
            module = importlib.import_module(f"tests.benchmarks.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"tests.benchmarks.{name}":
                print(f"\n=== {name}: no such benchmark ===", flush=True)
                failed += 1
            else:  # an install without what it measures (torch, a GPU stack)
                print(f"\n=== {name}: skipped, needs {exc.name} ===", flush=True)
            continue
        print(f"\n=== {name} ===", flush=True)
        argv_before = sys.argv
        sys.argv = [f"tests.benchmarks.{name}", *rest]  # each benchmark parses sys.argv
        try:
            failed += 1 if run_one(name, module.main, args.results) else 0
        finally:
            sys.argv = argv_before
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
