"""`make bench` writes dated result files itself (issue #36: "dated result tables the
benchmarks write themselves"): each benchmark's printed figures, verbatim, under a
header with the commit, cores and load, one file per benchmark and day."""

from __future__ import annotations

import datetime
import sys
import types
from pathlib import Path

import pytest

from tests.benchmarks.__main__ import main


def _fake_benchmark(monkeypatch: pytest.MonkeyPatch, name: str, status: int) -> None:
    module = types.ModuleType(f"tests.benchmarks.{name}")

    def bench_main() -> int:
        print(f"{'bare':>6} {'ribbit':>7} {'ratio':>6}")
        print(f"{'1.00 s':>6} {'1.50 s':>7} {'1.5x':>6}  args {sys.argv[1:]}")
        return status

    module.main = bench_main  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)


def test_a_run_writes_its_figures_to_a_dated_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _fake_benchmark(monkeypatch, "bench_fake", 0)
    assert main(["bench_fake", "--results", str(tmp_path), "--runs", "3"]) == 0
    today = datetime.datetime.now(datetime.UTC).date()
    [written] = tmp_path.iterdir()
    assert written.name == f"{today:%Y-%m-%d}-bench_fake.md"
    text = written.read_text()
    assert text.startswith(f"# bench_fake: results of {today:%Y-%m-%d}\n")
    assert "cores; load" in text and "exit status 0" in text
    assert "1.00 s  1.50 s   1.5x  args ['--runs', '3']" in text
    # The terminal saw the same figures.
    assert "1.50 s   1.5x" in capsys.readouterr().out


def test_a_second_run_the_same_day_adds_a_section(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_benchmark(monkeypatch, "bench_fake", 0)
    main(["bench_fake", "--results", str(tmp_path)])
    main(["bench_fake", "--results", str(tmp_path)])
    [written] = tmp_path.iterdir()
    assert written.read_text().count("## bench_fake, ") == 2


def test_a_failing_or_unknown_benchmark_fails_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_benchmark(monkeypatch, "bench_fails", 1)
    assert main(["bench_fails", "--results", str(tmp_path)]) == 1
    assert "exit status 1" in (next(tmp_path.iterdir())).read_text()
    assert main(["bench_no_such_thing", "--results", str(tmp_path)]) == 1
