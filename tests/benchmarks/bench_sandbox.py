"""Sandbox overhead: create + exec + destroy per backend, next to a bare subprocess.

    python -m tests.benchmarks.bench_sandbox [--runs N]

The docker backend uses RIBBIT_SANDBOX__DOCKER_URL when set, else a Podman service this
script starts on a private socket (root, podman and the image needed; otherwise that
row is skipped). Prints medians in milliseconds and ratios to the bare subprocess.

"exec only" times the command in a sandbox kept open, interleaved with the bare
subprocess and the other backends round by round, so that load from the rest of a
shared machine falls on every row alike; "over bare" is the median of each round's
difference to the bare run of the same round (the issue's goal: bubblewrap within
10 ms, docker under 100 ms).
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
from contextlib import ExitStack, contextmanager
from pathlib import Path

from bot.settings import SandboxSettings
from tests.fakes import make_git_repo
from tests.plugins.sandbox import CONTAINERS_CONF, TEST_IMAGE, podman_env
from worker.sandbox import check_backends, open_sandbox

# The same binary everywhere: the sandboxes run the host's (bubblewrap) or the image's
# /usr/bin/python3, so the bare row must not use the virtualenv's interpreter.
COMMAND = ["/usr/bin/python3", "-c", "print('hi')"]


def median_ms(fn: Callable[[], object], runs: int) -> float:
    fn()  # warm caches (page cache, image layers) before timing
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def interleaved_ms(fns: dict[str, Callable[[], object]], runs: int) -> dict[str, list[float]]:
    """Each function once per round, in turn, ``runs`` rounds: milliseconds per run."""
    for fn in fns.values():
        fn()  # warm caches before timing
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(runs):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[name].append((time.perf_counter() - start) * 1000)
    return times


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ribbit-bench-src-") as tmp:
        source = Path(tmp) / "repo"
        make_git_repo(source, {f"pkg/m{i}.py": f"X = {i}\n" * 50 for i in range(50)})

        def bare_run() -> None:
            subprocess.run(COMMAND, capture_output=True, check=True)

        with podman_service() as url:
            configs = {"bubblewrap": SandboxSettings(backend="bubblewrap")}
            if url:
                docker = SandboxSettings(backend="docker", docker_url=url, image=TEST_IMAGE)
                if check_backends(docker)[0].ok:
                    configs["docker"] = docker
            with ExitStack() as stack:
                fns: dict[str, Callable[[], object]] = {"bare subprocess": bare_run}
                for name, settings in configs.items():
                    sb = stack.enter_context(open_sandbox(settings, source))
                    fns[name] = functools.partial(sb.exec, COMMAND, timeout=60)
                exec_times = interleaved_ms(fns, args.runs)
            full = {"bare subprocess": median_ms(bare_run, args.runs)}
            for name, settings in configs.items():

                def cycle(s: SandboxSettings = settings) -> None:
                    with open_sandbox(s, source) as sb:
                        sb.exec(COMMAND, timeout=60)

                full[name] = median_ms(cycle, args.runs)
    bare_times = exec_times["bare subprocess"]
    bare = statistics.median(bare_times)
    print(f"command: {' '.join(COMMAND)}; median of {args.runs} runs; checkout: 50 files")
    print(
        f"{'backend':<16} {'create+exec+destroy':>20} {'ratio':>7} {'exec only':>10} {'ratio':>7}"
        f" {'over bare':>10}"
    )
    for name, times in exec_times.items():
        exec_only = statistics.median(times)
        over = statistics.median(t - b for t, b in zip(times, bare_times, strict=True))
        print(
            f"{name:<16} {full[name]:>17.1f} ms {full[name] / full['bare subprocess']:>6.1f}x "
            f"{exec_only:>7.1f} ms {exec_only / bare:>6.1f}x {over:>+7.1f} ms"
        )
    if "docker" not in exec_times:
        print("docker: skipped (no engine or no image; see `ribbit sandbox check`)")


if __name__ == "__main__":
    main()
