"""The watch benchmark (tests/benchmarks/bench_watch.py) runs, and its suite, functions,
parametrised rows and unittest methods, passes watched with no tamper: what it times
is an honest run."""

from __future__ import annotations

import pytest

from tests.benchmarks import bench_watch


def test_the_benchmark_times_an_honest_suite_both_ways(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench_watch.main(["--files", "2", "--tests", "6", "--runs", "1"]) == 0
    out = capsys.readouterr().out
    assert "suite: 2 files, 12 tests" in out
    assert "watched / plain:" in out
