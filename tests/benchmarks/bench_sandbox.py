"""Sandbox cost per backend next to a bare subprocess: exec overhead (the issue's goal:
bubblewrap exec within 10 ms of bare, docker exec under 100 ms) and create+exec+destroy.

    python -m tests.benchmarks.bench_sandbox [--exec-runs N] [--runs N]

(``python -m tests.benchmarks`` runs it with every other benchmark.) The docker backend
uses RIBBIT_SANDBOX__DOCKER_URL when set, else a Podman service this script starts on a
private socket (root, podman and the image needed; otherwise its rows are skipped).

Exec overhead: each command runs in a sandbox kept open, alternating round by round
with the same command as a bare subprocess (``subprocess.run``, output captured, as the
sandbox captures it), so load from the rest of a shared machine falls on both alike;
one backend at a time, so the engine's own after-work cannot land on another's rounds.
"over bare" is each round's difference to the bare run of the same round: its mean,
median and 90th percentile. Only same-run figures compare: the load average is printed
with them. Two commands: ``true`` (almost nothing but the spawn) and ``python3 -c
pass`` (an interpreter start, what most commands cost at least); each row runs the
binary its sandbox has (the host's for bubblewrap, the image's for docker).
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.fakes import make_git_repo
from tests.plugins.sandbox import CONTAINERS_CONF, TEST_IMAGE, podman_env
from worker.sandbox import check_backends, open_sandbox
from worker.settings import SandboxSettings

# The same binary everywhere: the sandboxes run the host's (bubblewrap) or the image's
# /usr/bin/python3, so the bare row must not use the virtualenv's interpreter.
COMMAND = ["/usr/bin/python3", "-c", "print('hi')"]
EXEC_COMMANDS = {
    "true": ["/usr/bin/true"],
    "python3 -c pass": ["/usr/bin/python3", "-c", "pass"],
}
# The goals, in milliseconds.
BUBBLEWRAP_OVER_BARE_GOAL = 10.0
DOCKER_EXEC_GOAL = 100.0


def median_ms(fn: Callable[[], object], runs: int) -> float:
    fn()  # warm caches (page cache, image layers) before timing
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


@dataclass(frozen=True)
class Spread:
    """Mean, median and 90th percentile of a sample, in milliseconds."""

    mean: float
    p50: float
    p90: float

    @classmethod
    def of(cls, sample: list[float]) -> Spread:
        ordered = sorted(sample)
        return cls(
            statistics.fmean(ordered),
            statistics.median(ordered),
            ordered[min(len(ordered) - 1, int(len(ordered) * 0.9))],
        )

    def cells(self, sign: str = "") -> str:
        return f"{self.mean:{sign}8.2f} {self.p50:{sign}8.2f} {self.p90:{sign}8.2f}"


@dataclass(frozen=True)
class ExecRow:
    backend: str
    command: str
    bare: Spread
    sandboxed: Spread
    over_bare: Spread


def paired_ms(
    bare: Callable[[], object], sandboxed: Callable[[], object], runs: int
) -> tuple[list[float], list[float]]:
    """``runs`` rounds of one bare run then one sandboxed run: milliseconds of each."""
    bare()
    sandboxed()  # warm caches before timing
    bare_ms: list[float] = []
    sandboxed_ms: list[float] = []
    for _ in range(runs):
        for fn, times in ((bare, bare_ms), (sandboxed, sandboxed_ms)):
            start = time.perf_counter()
            fn()
            times.append((time.perf_counter() - start) * 1000)
    return bare_ms, sandboxed_ms


def _bare(argv: list[str]) -> None:
    subprocess.run(argv, capture_output=True, check=True)


def exec_rows(name: str, settings: SandboxSettings, source: Path, runs: int) -> list[ExecRow]:
    rows = []
    with open_sandbox(settings, source) as sb:
        for label, argv in EXEC_COMMANDS.items():
            bare, inside = paired_ms(
                functools.partial(_bare, argv),
                functools.partial(sb.exec, argv, timeout=60),
                runs,
            )
            over = [s - b for s, b in zip(inside, bare, strict=True)]
            rows.append(ExecRow(name, label, Spread.of(bare), Spread.of(inside), Spread.of(over)))
    return rows


@contextmanager
def podman_service() -> Iterator[str | None]:
    given = os.environ.get("RIBBIT_SANDBOX__DOCKER_URL")
    if given:
        yield given
        return
    if shutil.which("podman") is None or os.geteuid() != 0:
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="ribbit-bench-") as tmp:
        conf = Path(tmp) / "containers.conf"
        conf.write_text(CONTAINERS_CONF)
        url = f"unix://{tmp}/podman.sock"
        proc = subprocess.Popen(
            ["podman", "system", "service", "--time=0", url],
            env=podman_env(conf),
            cwd=tmp,  # conmon writes marker files into its working directory
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 30
            while not Path(tmp, "podman.sock").exists() and time.monotonic() < deadline:
                time.sleep(0.1)
            time.sleep(0.5)
            yield url
        finally:
            proc.terminate()
            proc.wait(timeout=20)


def _goal(row: ExecRow) -> str:
    if row.backend == "bubblewrap":
        met = row.over_bare.mean <= BUBBLEWRAP_OVER_BARE_GOAL
        return f"{'met' if met else 'MISSED'} (+{BUBBLEWRAP_OVER_BARE_GOAL:.0f} ms over bare)"
    met = row.sandboxed.mean < DOCKER_EXEC_GOAL
    return f"{'met' if met else 'MISSED'} (exec < {DOCKER_EXEC_GOAL:.0f} ms)"


def print_exec_rows(rows: list[ExecRow], runs: int) -> None:
    print(f"exec overhead: {runs} rounds of bare then sandboxed, per backend; milliseconds")
    spread = f"{'mean':>8} {'p50':>8} {'p90':>8}"
    print(
        f"{'backend':<11} {'command':<16} | bare {spread} | sandboxed {spread} | over bare {spread}"
    )
    for row in rows:
        print(
            f"{row.backend:<11} {row.command:<16} | {'':4} {row.bare.cells()} | {'':9} "
            f"{row.sandboxed.cells()} | {'':9} {row.over_bare.cells('+')} | goal {_goal(row)}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--exec-runs", type=int, default=200, help="exec rounds per command")
    parser.add_argument("--runs", type=int, default=5, help="create+exec+destroy cycles")
    args = parser.parse_args()
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory(prefix="ribbit-bench-src-") as tmp:
        source = Path(tmp) / "repo"
        make_git_repo(source, {f"pkg/m{i}.py": f"X = {i}\n" * 50 for i in range(50)})
        with podman_service() as url:
            configs = {"bubblewrap": SandboxSettings(backend="bubblewrap")}
            if url:
                docker = SandboxSettings(backend="docker", docker_url=url, image=TEST_IMAGE)
                if check_backends(docker)[0].ok:
                    configs["docker"] = docker
            rows = [
                row
                for name, settings in configs.items()
                for row in exec_rows(name, settings, source, args.exec_runs)
            ]
            full = {"bare subprocess": median_ms(functools.partial(_bare, COMMAND), args.runs)}
            for name, settings in configs.items():

                def cycle(s: SandboxSettings = settings) -> None:
                    with open_sandbox(s, source) as sb:
                        sb.exec(COMMAND, timeout=60)

                full[name] = median_ms(cycle, args.runs)
    print_exec_rows(rows, args.exec_runs)
    if "docker" not in configs:
        print("docker: skipped (no engine or no image; see `ribbit sandbox check`)")
    print(
        f"\ncreate+exec+destroy of `{' '.join(COMMAND)}`, checkout of 50 files:"
        f" median of {args.runs}"
    )
    for name, ms in full.items():
        print(f"{name:<16} {ms:>9.1f} ms {ms / full['bare subprocess']:>7.1f}x")


if __name__ == "__main__":
    main()
