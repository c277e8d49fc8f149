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
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.forges.branches import BRANCH_PREFIX
from worker.agent.runner_launch import RunnerPlaces
from worker.sandbox.base import (
    DEFAULT_OUTPUT_CAP,
    TIMEOUT_EXIT_CODE,
    WORKSPACE,
    ClosedOnExit,
    ExecResult,
)

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


class LocalDirSandbox(ClosedOnExit):
    """Sandbox interface over a temporary copy of a checkout. NOT isolated: tests only."""

    backend = "local-test"

    def __init__(self, source: Path) -> None:
        self._root = Path(tempfile.mkdtemp(prefix="ribbit-localsb-"))
        self.workspace = self._root / "workspace"
        shutil.copytree(source, self.workspace, symlinks=True)
        # The tool runner and its requests go to this copy's own tmp/, never the host's
        # /tmp (which every other test run shares), and the tools run in this workspace.
        tmp = self._root / "tmp"
        tmp.mkdir()
        self.runner_places = RunnerPlaces(
            runner=str(tmp / "frognano_leaf_tool_runner.py"),
            request_prefix=str(tmp / "frognano_leaf_request_"),
            workdir=str(self.workspace),
        )
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
            **self.own_environment(),
        }
        argv = self.own_command(argv)
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

    def own_environment(self) -> dict[str, str]:
        """What a test's subclass puts in every command's environment, over the caller's."""
        return {}

    def own_command(self, argv: list[str]) -> list[str]:
        """Every command as a test's subclass runs it (a wrapper in front, say)."""
        return argv

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


@dataclass(frozen=True)
class FakeResult:
    """A stand-in pipeline's result (worker.jobs.JobResult): stored as ``json``, as it is."""

    json: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return self.json


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


def record_replay(repo: Path, path: Path, script: Sequence[object], task: Any = None) -> Path:
    """Play ``script`` as the agent on a host copy of ``repo`` (``task``: an AgentTask,
    by default issue "add() subtracts") and write its trajectory to ``path``, for the
    replay policy (`ribbit run --replay`, ``policy="replay"``)."""
    from worker.agent import AgentTask, run_agent
    from worker.settings import AgentSettings

    task = task if task is not None else AgentTask("add() subtracts", "")
    with LocalDirSandbox(repo) as sandbox:
        recorded = run_agent(task, sandbox, ScriptedPolicy(script), AgentSettings())
    recorded.trajectory.write_jsonl(path)
    return path


class NullSandbox(ClosedOnExit):
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


class FakeForge:
    """The Forge interface in memory over a bare git repository on disk: one repository,
    its issues and pull requests, for unit tests of the pipelines with no HTTP. The real
    forges are tested against the local forge (tests/forge/) in tests/integration/.
    ``fail`` maps a method name to an exception its next call raises (once)."""

    name = "github"

    def __init__(self, bare: Path, *, writers: Sequence[str] = ("maya",)) -> None:
        from bot.forges.base import CommitStatus, GateReview, Issue, PullRequest

        self.bare = bare
        self.writers = set(writers)
        self.issues: dict[int, Issue] = {}
        self.comments: dict[int, str] = {}  # comment id -> body (the last edit)
        self.pulls: dict[int, PullRequest] = {}
        self.statuses: list[tuple[str, CommitStatus]] = []
        self.reviews: list[tuple[int, str, GateReview]] = []
        self.fail: dict[str, Exception] = {}
        self.calls: list[str] = []
        self.labels: set[str] = set()  # the repository's label list

    @property
    def bot_login(self) -> str:
        return "ribbit-bot"

    def _called(self, method: str) -> None:
        self.calls.append(method)
        if method in self.fail:
            raise self.fail.pop(method)

    def add_issue(
        self,
        number: int,
        title: str,
        body: str,
        author: str = "maya",
        labels: tuple[str, ...] = ("ribbit",),
    ) -> None:
        from bot.forges.base import Issue, IssueRef, RepoRef

        ref = IssueRef(RepoRef("github", "acme/calc"), number)
        self.issues[number] = Issue(ref, title, body, author, "open", labels=labels)

    def get_issue(self, ref: Any) -> Any:
        self._called("get_issue")
        return self.issues[ref.number]

    def has_write_access(self, repo: Any, username: str) -> bool:
        self._called("has_write_access")
        return username in self.writers

    def ensure_label(self, repo: Any, name: str) -> bool:
        self._called("ensure_label")
        created = name not in self.labels
        self.labels.add(name)
        return created

    def post_comment(self, ref: Any, body: str) -> int:
        self._called("post_comment")
        comment_id = len(self.comments) + 1
        self.comments[comment_id] = body
        return comment_id

    def edit_comment(self, ref: Any, comment_id: int, body: str) -> None:
        self._called("edit_comment")
        self.comments[comment_id] = body

    def default_branch(self, repo: Any) -> str:
        return "main"

    def read_file(self, repo: Any, path: str, ref: str | None = None) -> str | None:
        self._called("read_file")
        proc = subprocess.run(
            ["git", "show", f"{ref or 'main'}:{path}"],
            cwd=self.bare,
            capture_output=True,
            text=True,
            env={**os.environ, **GIT_ENV},
        )
        return proc.stdout if proc.returncode == 0 else None

    def clone(self, repo: Any, dest: Path, *, branch: str | None = None) -> None:
        self._called("clone")
        extra = ["-b", branch] if branch else []
        git(dest.parent, "clone", "-q", *extra, str(self.bare), str(dest))

    def push(self, repo: Any, workdir: Path, branch: str) -> None:
        self._called("push")
        git(workdir, "push", "-q", str(self.bare), f"{branch}:{branch}")

    def branch_sha(self, branch: str) -> str | None:
        proc = subprocess.run(
            ["git", "rev-parse", "--verify", "-q", f"refs/heads/{branch}"],
            cwd=self.bare,
            capture_output=True,
            text=True,
        )
        return proc.stdout.strip() or None

    def find_pull_request(self, repo: Any, head_branch: str) -> Any:
        self._called("find_pull_request")
        return next((p for p in self.pulls.values() if p.head_branch == head_branch), None)

    def open_draft_pull_request(self, repo: Any, draft: Any) -> Any:
        from bot.forges.base import PullRequest, PullRequestRef

        self._called("open_draft_pull_request")
        number = 100 + len(self.pulls)
        pr = PullRequest(
            ref=PullRequestRef(repo, number),
            title=draft.title,
            body=draft.body,
            state="open",
            draft=True,
            head_branch=draft.head,
            head_sha=self.branch_sha(draft.head) or "",
            base_branch=draft.base,
            base_sha=self.branch_sha(draft.base) or "",
            author=self.bot_login,
            url=f"http://forge.test/acme/calc/pull/{number}",
            labels=tuple(draft.labels),
        )
        self.pulls[number] = pr
        return pr

    def get_pull_request(self, ref: Any) -> Any:
        self._called("get_pull_request")
        return self.pulls[ref.number]

    def update_pull_request_body(self, ref: Any, body: str) -> None:
        import dataclasses

        self._called("update_pull_request_body")
        self.pulls[ref.number] = dataclasses.replace(self.pulls[ref.number], body=body)

    def list_open_pull_requests(self, repo: Any, head_prefix: str = BRANCH_PREFIX) -> list[Any]:
        return [
            p
            for p in self.pulls.values()
            if p.state == "open" and p.head_branch.startswith(head_prefix)
        ]

    def list_reviews(self, ref: Any) -> list[Any]:
        return []

    def list_review_comments(self, ref: Any) -> list[Any]:
        return []

    def get_pull_request_diff(self, ref: Any) -> str:
        pr = self.pulls[ref.number]
        return git(self.bare, "diff", f"{pr.base_branch}...{pr.head_branch}")

    def set_commit_status(self, repo: Any, sha: str, status: Any) -> None:
        self._called("set_commit_status")
        self.statuses.append((sha, status))

    def publish_gate_review(self, ref: Any, head_sha: str, review: Any) -> None:
        self._called("publish_gate_review")
        self.reviews.append((ref.number, head_sha, review))
