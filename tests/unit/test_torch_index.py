"""Which torch the install path takes (issue #36 item 2): the command `make install-dev`
would run (`make -n`), with PyTorch's CPU index answering and not. The public index is not
reachable from these machines, so a local HTTP server stands in for it; whether pip then
finds the real CPU wheel there is not tested here."""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import torch_cpu_index

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def index() -> Iterator[str]:
    with torch_cpu_index() as url:
        yield url


def _closed_port() -> int:
    # Bound and never listened on: a connection there is refused at once, no timeout waited.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _torch_install(tmp_path: Path, **env: str) -> str:
    """The torch line of `make -n install-dev` for a venv that does not exist yet."""
    environ = {k: v for k, v in os.environ.items() if k not in ("PIP_TORCH_ARGS", "MAKEFLAGS")}
    done = subprocess.run(
        ["make", "-n", "install-dev", f"VENV={tmp_path / 'venv'}"],
        cwd=ROOT,
        env={**environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    lines = [line for line in done.stdout.splitlines() if '"torch==' in line]
    assert len(lines) == 1, done.stdout
    return lines[0]


def test_cpu_torch_comes_from_the_pytorch_cpu_index_when_it_answers(
    tmp_path: Path, index: str
) -> None:
    line = _torch_install(tmp_path, TORCH_CPU_INDEX=index)
    assert line.endswith(f'pip install -q --index-url {index} "torch==2.13.0"'), line


def test_the_configured_index_is_used_when_the_cpu_index_does_not_answer(
    tmp_path: Path,
) -> None:
    unreachable = f"http://127.0.0.1:{_closed_port()}/whl/cpu"
    line = _torch_install(tmp_path, TORCH_CPU_INDEX=unreachable)
    assert "--index-url" not in line and line.endswith('pip install -q  "torch==2.13.0"'), line


def test_an_index_without_a_torch_page_is_not_taken(tmp_path: Path, index: str) -> None:
    # A server that answers but has no torch project (a captive portal, a wrong path).
    line = _torch_install(tmp_path, TORCH_CPU_INDEX=index.replace("/whl/cpu", "/other"))
    assert "--index-url" not in line, line


def test_pip_torch_args_still_overrides_the_probe(tmp_path: Path, index: str) -> None:
    line = _torch_install(
        tmp_path, TORCH_CPU_INDEX=index, PIP_TORCH_ARGS="--index-url https://cuda.example/cu130"
    )
    assert "--index-url https://cuda.example/cu130 " in line and index not in line, line
