"""Real services for integration tests: Redis (and PostgreSQL where installed).

A service named by an environment variable is used as it is (``.ci/run`` or a
developer may start one); otherwise the fixture starts its own on loopback in
a temporary folder and stops it at the end of the session.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support import require_service


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for_port(
    port: int, proc: subprocess.Popen[bytes], what: str, timeout: float = 15
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode} at start-up")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"{what} did not listen on 127.0.0.1:{port} within {timeout}s")


@contextmanager
def redis_server(workdir: Path) -> Iterator[str]:
    """A throwaway Redis on loopback (no persistence); yields its URL. Needs redis-server."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise RuntimeError("redis-server is not installed")
    port = free_port()
    proc = subprocess.Popen(
        [
            binary,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(workdir),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_for_port(port, proc, "redis-server")
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """URL of a real Redis server (RIBBIT_TEST_REDIS_URL, or one started here)."""
    given = os.environ.get("RIBBIT_TEST_REDIS_URL")
    if given:
        yield given
        return
    require_service(shutil.which("redis-server") is not None, "redis-server")
    with redis_server(tmp_path_factory.mktemp("redis")) as url:
        yield url


def _pg_bindir() -> Path | None:
    for candidate in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (candidate / "initdb").exists():
            return candidate
    return None


@contextmanager
def postgres_server(*, fsync: bool = False) -> Iterator[str]:
    """A throwaway PostgreSQL cluster on loopback; yields a SQLAlchemy URL. ``fsync`` off
    (the default) suits tests; a benchmark of the production path turns it on."""
    bindir = _pg_bindir()
    if bindir is None:
        raise RuntimeError("PostgreSQL server binaries (initdb) are not installed")
    # Not under pytest's tmp root: that is private to root, and postgres must traverse it.
    base = Path(tempfile.mkdtemp(prefix="ribbit-pg-"))
    datadir, sockdir = base / "data", base / "sock"
    sockdir.mkdir()
    run_as: list[str] = []
    if os.geteuid() == 0:
        # initdb refuses to run as root; hand the folders to the postgres user.
        subprocess.run(["chown", "-R", "postgres", str(base)], check=True)
        run_as = ["runuser", "-u", "postgres", "--"]
    subprocess.run(
        [
            *run_as,
            str(bindir / "initdb"),
            "-D",
            str(datadir),
            "-U",
            "ribbit",
            "--auth=trust",
            "-E",
            "UTF8",
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    port = free_port()
    proc = subprocess.Popen(
        [
            *run_as,
            str(bindir / "postgres"),
            "-D",
            str(datadir),
            "-p",
            str(port),
            "-k",
            str(sockdir),
            "-c",
            "listen_addresses=127.0.0.1",
            "-c",
            f"fsync={'on' if fsync else 'off'}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_for_port(port, proc, "postgres")
        # The port opens while the cluster is still starting up, and a connection then is
        # refused ("the database system is starting up"): createdb failed that way once.
        deadline = time.monotonic() + 30
        while subprocess.run(
            [str(bindir / "pg_isready"), "-q", "-h", "127.0.0.1", "-p", str(port)]
        ).returncode:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("postgres did not start accepting connections")
            time.sleep(0.05)
        subprocess.run(
            [
                *run_as,
                str(bindir / "createdb"),
                "-h",
                "127.0.0.1",
                "-p",
                str(port),
                "-U",
                "ribbit",
                "ribbit",
            ],
            check=True,
        )
        yield f"postgresql+psycopg://ribbit@127.0.0.1:{port}/ribbit"
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """URL of a real PostgreSQL (RIBBIT_TEST_POSTGRES_URL, or a throwaway cluster)."""
    given = os.environ.get("RIBBIT_TEST_POSTGRES_URL")
    if given:
        yield given
        return
    require_service(_pg_bindir() is not None, "PostgreSQL server binaries (initdb)")
    with postgres_server() as url:
        yield url
