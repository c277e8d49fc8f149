"""Shared test doubles, one copy of each.

``LocalDirSandbox`` implements the Sandbox interface with a plain temporary
copy of a checkout and host subprocesses: no isolation at all. It exists so
agent and gate logic can be tested fast; isolation is tested on the real
backends in tests/integration/.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from worker.sandbox.base import DEFAULT_OUTPUT_CAP, TIMEOUT_EXIT_CODE, WORKSPACE, ExecResult

if TYPE_CHECKING:
    from worker.agent.episode import SandboxRecipe
    from worker.agent.policy import AssistantTurn
    from worker.sandbox.base import Sandbox
    from worker.sandbox.setup import SetupResult

GIT_ENV = {
    "GIT_AUTHOR_NAME": "Test Author",
    "GIT_AUTHOR_EMAIL": "author@example.com",
    "GIT_COMMITTER_NAME": "Test Author",
    "GIT_COMMITTER_EMAIL": "author@example.com",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def git(cwd: Path, *args: str) -> str:
    env = {**os.environ, **GIT_ENV}
    out = subprocess.run(
        ["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True
    )
    return out.stdout.strip()


def make_git_repo(path: Path, files: Mapping[str, str], message: str = "initial") -> str:
    """Create a git repository at ``path`` with ``files`` committed on ``main``; returns the sha."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    return commit_files(path, files, message)


def commit_files(path: Path, files: Mapping[str, str | None], message: str) -> str:
    """Write (or, for None, delete) ``files`` and commit them; returns the new sha."""
    for rel, content in files.items():
        target = path / rel
        if content is None:
            target.unlink()
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", message)
    return git(path, "rev-parse", "HEAD")


class LocalDirSandbox:
    """Sandbox interface over a temporary copy of a checkout. NOT isolated: tests only."""

    backend = "local-test"

    def __init__(self, source: Path) -> None:
        self._root = Path(tempfile.mkdtemp(prefix="ribbit-localsb-"))
        self.workspace = self._root / "workspace"
        shutil.copytree(source, self.workspace, symlinks=True)
        self._closed = False

    def _host_path(self, path: str) -> Path:
        rel = path[len(WORKSPACE) :].lstrip("/") if path.startswith(WORKSPACE) else path
        target = (self.workspace / rel).resolve()
        if not target.is_relative_to(self.workspace.resolve()):
            raise PermissionError(f"{path}: outside the workspace")
        return target

    def exec(
        self,
        command: str | Sequence[str],
        *,
        timeout: float,
        cwd: str = WORKSPACE,
        env: Mapping[str, str] | None = None,
        output_cap: int = DEFAULT_OUTPUT_CAP,
    ) -> ExecResult:
        argv = ["bash", "-lc", command] if isinstance(command, str) else list(command)
        run_env = {
            "PATH": os.environ["PATH"],
            "HOME": str(self._root),
            "LANG": "C.UTF-8",
            **GIT_ENV,
            **(env or {}),
        }
        start = time.monotonic()
        proc = subprocess.Popen(
            argv,
            cwd=self._host_path(cwd),
            env=run_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        timed_out = False
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
        stdout = out.decode(errors="replace")
        stderr = err.decode(errors="replace")
        truncated = len(stdout) > output_cap or len(stderr) > output_cap
        return ExecResult(
            exit_code=TIMEOUT_EXIT_CODE if timed_out else proc.returncode,
            stdout=stdout[:output_cap],
            stderr=stderr[:output_cap],
            duration_s=time.monotonic() - start,
            timed_out=timed_out,
            truncated=truncated,
        )

    def read_file(self, path: str) -> bytes:
        return self._host_path(path).read_bytes()

    def write_file(self, path: str, data: bytes) -> None:
        target = self._host_path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)

    def diff(self) -> str:
        git(self.workspace, "add", "-A", "--intent-to-add")
        return subprocess.run(
            ["git", "diff", "--binary"],
            cwd=self.workspace,
            check=True,
            capture_output=True,
            text=True,
            env={**os.environ, **GIT_ENV},
        ).stdout

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            shutil.rmtree(self._root, ignore_errors=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def host_setup(sandbox: Sandbox, command: str | None) -> SetupResult:
    """The setup step for a :class:`LocalDirSandbox`: the repository's setup command
    alone. The production step (worker/sandbox/setup.py) would build its virtualenv at
    /opt/ribbit on the host here; the real backends, where it runs, are tested in
    tests/integration/."""
    from worker.sandbox.setup import SetupResult

    if not command:
        return SetupResult(command=None, ok=True, exit_code=None, output="", duration_s=0.0)
    done = sandbox.exec(["bash", "-c", command], timeout=300)
    return SetupResult(
        command=command,
        ok=done.exit_code == 0 and not done.timed_out,
        exit_code=done.exit_code,
        output=f"{done.stdout}\n{done.stderr}".strip(),
        duration_s=done.duration_s,
        timed_out=done.timed_out,
    )


def local_sandboxes() -> SandboxRecipe:
    """Host-copy sandboxes set up by :func:`host_setup`: the trainer's and the episode's
    fast tests."""
    from worker.agent.episode import SandboxRecipe

    return SandboxRecipe(LocalDirSandbox, host_setup)


class RecordingDispatcher:
    """Dispatcher that records job ids instead of sending them; ``fail`` simulates a dead
    broker."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.fail = False

    def dispatch(self, job: object) -> None:
        if self.fail:
            raise ConnectionError("broker unreachable")
        self.sent.append(job.id)  # type: ignore[attr-defined]


class ScriptedPolicy:
    """A Policy that plays scripted completions, in order (mini-swe-agent's
    DeterministicModel in Ribbit terms). A string is parsed like real model output
    (so it may be broken on purpose); an AssistantTurn is returned as is. Past the
    end of the script it raises PolicyError, like a model backend that failed."""

    name = "scripted"
    model_name = "scripted"

    def __init__(self, outputs: Sequence[object], *, thinking_open: bool = False) -> None:
        self.outputs = list(outputs)
        self.thinking_open = thinking_open
        self.calls: list[list[dict[str, object]]] = []

    def generate(
        self,
        messages: Sequence[Mapping[str, object]],
        tools: Sequence[dict[str, Any]],
        *,
        limits: object = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> AssistantTurn:
        from worker.agent.parser import parse_completion
        from worker.agent.policy import AssistantTurn, PolicyError

        self.calls.append([dict(m) for m in messages])
        n = len(self.calls) - 1
        if n >= len(self.outputs):
            raise PolicyError(f"script has only {len(self.outputs)} turns")
        out = self.outputs[n]
        if isinstance(out, AssistantTurn):
            return out
        assert isinstance(out, str)
        parsed = parse_completion(
            out, tools, thinking_open=self.thinking_open, id_prefix=f"call_{n}"
        )
        return AssistantTurn(
            content=parsed.content,
            reasoning=parsed.reasoning,
            tool_calls=parsed.tool_calls,
            finish_reason="stop",
            prompt_tokens=None,
            completion_tokens=len(out.split()),
            raw_text=out,
        )


class NullSandbox:
    """Sandbox interface that does nothing, instantly: for measuring the loop itself."""

    backend = "null"

    def exec(
        self,
        command: str | Sequence[str],
        *,
        timeout: float,
        cwd: str = WORKSPACE,
        env: Mapping[str, str] | None = None,
        output_cap: int = DEFAULT_OUTPUT_CAP,
    ) -> ExecResult:
        return ExecResult(exit_code=0, stdout="ok\n", stderr="", duration_s=0.0)

    def read_file(self, path: str) -> bytes:
        return b"line one\nline two\n"

    def write_file(self, path: str, data: bytes) -> None:
        return None

    def diff(self) -> str:
        return ""

    def close(self) -> None:
        return None

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
